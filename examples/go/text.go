package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	inferscale "github.com/inferscale/inferscale/bindings/go"
)

// textFact is one fact of POST /facts: a JSON string, or an object with the
// text and, optionally, metadata (a JSON object: its "date" and "speaker"
// appear in the prompt), a source id and a timestamp.
type textFact struct {
	Text      string          `json:"text"`
	Metadata  json.RawMessage `json:"metadata,omitempty"`
	SourceID  uint64          `json:"source_id,omitempty"`
	Timestamp int64           `json:"timestamp,omitempty"`
}

func (f *textFact) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		*f = textFact{}
		return json.Unmarshal(b, &f.Text)
	}
	type plain textFact // without this method
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode((*plain)(f))
}

type factsRequest struct {
	Namespace string     `json:"namespace"`
	Facts     []textFact `json:"facts"`
}

type askRequest struct {
	Namespace string `json:"namespace"`
	Question  string `json:"question"`
	K         int    `json:"k"`          // facts retrieved; 0: 10
	MaxTokens int    `json:"max_tokens"` // 0: 64
}

// askResponse is the answer with the facts used and the engine's times:
// TTFT = embed + retrieve + inject + prefill, then decode.
type askResponse struct {
	Answer  string    `json:"answer"`
	FactIDs []uint64  `json:"fact_ids"`
	Scores  []float32 `json:"scores"`
	Tokens  uint32    `json:"tokens"`
	// LeftOut counts the facts retrieved that the context could not hold
	// next to the question (stored before they were checked at add time).
	LeftOut int `json:"left_out"`
	Timings struct {
		Embed    float64 `json:"embed"`
		Retrieve float64 `json:"retrieve"`
		Inject   float64 `json:"inject"`
		Prefill  float64 `json:"prefill"`
		TTFT     float64 `json:"ttft"`
		Decode   float64 `json:"decode"`
	} `json:"timings_ms"`
}

func badRequest(w http.ResponseWriter, format string, args ...any) {
	fail(w, &inferscale.Error{Code: inferscale.ErrInvalid, Message: fmt.Sprintf(format, args...)})
}

// addTexts encodes the facts as the engine reads them: each rendered as in
// the prompt (RenderFact of its text and metadata) and run through the model
// right after the engine's header; its embedding is the embedder's of the
// plain text, which is what is stored.
func (s *server) addTexts(w http.ResponseWriter, r *http.Request) {
	var req factsRequest
	if !decode(w, r, &req) {
		return
	}
	if req.Namespace == "" {
		badRequest(w, "namespace is required")
		return
	}
	if len(req.Facts) == 0 {
		badRequest(w, "facts is empty: give at least one fact")
		return
	}
	if !noNUL(w, "namespace", req.Namespace) {
		return
	}
	in := make([]inferscale.FactInput, len(req.Facts))
	for i, f := range req.Facts {
		if strings.TrimSpace(f.Text) == "" {
			badRequest(w, "fact %d has no text", i)
			return
		}
		var meta string
		if len(f.Metadata) > 0 && string(f.Metadata) != "null" {
			if f.Metadata[0] != '{' {
				badRequest(w, "fact %d: metadata must be a JSON object", i)
				return
			}
			var buf bytes.Buffer
			if err := json.Compact(&buf, f.Metadata); err != nil {
				badRequest(w, "fact %d: metadata: %v", i, err)
				return
			}
			meta = buf.String()
		}
		rendered, err := inferscale.RenderFact(f.Text, meta)
		if err != nil {
			fail(w, err)
			return
		}
		tokens, err := s.tok.Tokenize(rendered, 0)
		if err != nil {
			fail(w, err)
			return
		}
		// What the engine's Engine.CheckFact counts, checked here against
		// the limit taken at start: adds do not wait for the engine.
		if len(tokens) > s.factLimit {
			fail(w, &inferscale.Error{Code: inferscale.ErrRange, Message: fmt.Sprintf("fact %d has %d tokens; "+
				"the engine's context of %d tokens (-ctx) holds at most %d for one fact next to the prompt's "+
				"header and a question: split the fact, or start the service with a larger -ctx",
				i, len(tokens), s.ctx, s.factLimit)})
			return
		}
		in[i] = inferscale.FactInput{Text: f.Text, Tokens: tokens, Metadata: meta, SourceID: f.SourceID,
			Timestamp: f.Timestamp}
	}
	ids, err := s.store.Encode(req.Namespace, s.model, in,
		&inferscale.EncodeOptions{Context: s.engine.Header(), Embedder: s.embedder})
	if err != nil {
		fail(w, err)
		return
	}
	reply(w, http.StatusCreated, map[string][]uint64{"ids": ids})
}

func (s *server) ask(w http.ResponseWriter, r *http.Request) {
	var req askRequest
	if !decode(w, r, &req) {
		return
	}
	if req.Namespace == "" {
		badRequest(w, "namespace is required")
		return
	}
	if req.Question == "" {
		badRequest(w, "question is required")
		return
	}
	if !noNUL(w, "namespace", req.Namespace, "question", req.Question) {
		return
	}
	if req.K < 0 || req.MaxTokens < 0 {
		fail(w, &inferscale.Error{Code: inferscale.ErrRange, Message: fmt.Sprintf(
			"k %d or max_tokens %d is out of range: give 0 (the default) or more", req.K, req.MaxTokens)})
		return
	}
	a, err := s.asker.ask(r.Context(), req.Namespace, req.Question, req.K, req.MaxTokens)
	if err != nil {
		fail(w, err)
		return
	}
	out := askResponse{Answer: a.Text, FactIDs: a.FactIDs, Scores: a.Scores, Tokens: a.Tokens, LeftOut: a.LeftOut}
	t := &out.Timings
	t.Embed, t.Retrieve, t.Inject, t.Prefill, t.TTFT, t.Decode = a.EmbedMs, a.RetrieveMs, a.InjectMs, a.PrefillMs,
		a.TTFTMs, a.DecodeMs
	reply(w, http.StatusOK, out)
}
