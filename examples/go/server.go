package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	inferscale "github.com/inferscale/inferscale/bindings/go"
)

// server is the HTTP memory service: one namespace of the store per user.
type server struct {
	store    *inferscale.Store
	model    *inferscale.Model
	embedder *inferscale.Embedder
	engine   *inferscale.Engine
	tok      *inferscale.Tokenizer
	asker    *batcher // /ask, batched
	// factLimit is the most tokens a fact may take (Engine.FactLimit for an
	// engine of ctx tokens): a longer one is refused when it is added.
	ctx       uint
	factLimit int
}

// maxBody bounds a request: a fact's KV for a long fact of a large model
// fits, a runaway client does not.
const maxBody = 64 << 20

func (s *server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /facts", s.addTexts)
	mux.HandleFunc("POST /ask", s.ask)
	mux.HandleFunc("POST /v1/users/{user}/facts", s.addFact)
	mux.HandleFunc("GET /v1/users/{user}/facts", s.listFacts)
	mux.HandleFunc("GET /v1/users/{user}/facts/{id}", s.getFact)
	mux.HandleFunc("DELETE /v1/users/{user}/facts/{id}", s.deleteFact)
	mux.HandleFunc("POST /v1/users/{user}/retrieve", s.retrieve)
	mux.HandleFunc("GET /v1/stats", s.stats)
	return mux
}

// factJSON is a fact on the wire. K and V are the raw pre-RoPE bytes in the
// store's KV dtype, [layers][tokens][kv heads][head dim], base64 in JSON.
type factJSON struct {
	ID        uint64    `json:"id,omitempty"`
	Text      string    `json:"text,omitempty"`
	Metadata  string    `json:"metadata,omitempty"`
	Tokens    []int32   `json:"tokens"`
	Embedding []float32 `json:"embedding,omitempty"`
	K         []byte    `json:"k,omitempty"`
	V         []byte    `json:"v,omitempty"`
	SourceID  uint64    `json:"source_id,omitempty"`
	Timestamp int64     `json:"timestamp,omitempty"`
}

type retrieveRequest struct {
	Embedding []float32 `json:"embedding"`
	K         int       `json:"k"`
	Metric    string    `json:"metric,omitempty"` // "cosine" (default) or "ip"
}

type hitJSON struct {
	ID    uint64  `json:"id"`
	Score float32 `json:"score"`
	Text  string  `json:"text"`
}

type errorJSON struct {
	Error string `json:"error"`
	Code  int    `json:"code"`
}

func (s *server) addFact(w http.ResponseWriter, r *http.Request) {
	var f factJSON
	if !decode(w, r, &f) || !noNUL(w, "user", r.PathValue("user"), "text", f.Text, "metadata", f.Metadata) {
		return
	}
	id, err := s.store.Put(r.PathValue("user"), &inferscale.Fact{
		Tokens: f.Tokens, Embedding: f.Embedding, K: f.K, V: f.V, Text: f.Text,
		Metadata: f.Metadata, SourceID: f.SourceID, Timestamp: f.Timestamp,
	})
	if err != nil {
		fail(w, err)
		return
	}
	reply(w, http.StatusCreated, map[string]uint64{"id": id})
}

func (s *server) listFacts(w http.ResponseWriter, r *http.Request) {
	if !noNUL(w, "user", r.PathValue("user")) {
		return
	}
	ids, err := s.store.List(r.PathValue("user"))
	if err != nil {
		fail(w, err)
		return
	}
	if ids == nil {
		ids = []uint64{}
	}
	reply(w, http.StatusOK, map[string][]uint64{"ids": ids})
}

func (s *server) getFact(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r)
	if !ok || !noNUL(w, "user", r.PathValue("user")) {
		return
	}
	f, err := s.store.Get(r.PathValue("user"), id)
	if err != nil {
		fail(w, err)
		return
	}
	out := factJSON{ID: f.ID, Text: f.Text, Metadata: f.Metadata, Tokens: f.Tokens, Embedding: f.Embedding,
		SourceID: f.SourceID, Timestamp: f.Timestamp}
	if r.URL.Query().Get("kv") == "1" {
		out.K, out.V = f.K, f.V
	}
	reply(w, http.StatusOK, out)
}

func (s *server) deleteFact(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r)
	if !ok || !noNUL(w, "user", r.PathValue("user")) {
		return
	}
	if err := s.store.Delete(r.PathValue("user"), id); err != nil {
		fail(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *server) retrieve(w http.ResponseWriter, r *http.Request) {
	var req retrieveRequest
	if !decode(w, r, &req) || !noNUL(w, "user", r.PathValue("user"), "metric", req.Metric) {
		return
	}
	opts := &inferscale.RetrieveOptions{}
	switch req.Metric {
	case "", "cosine":
	case "ip":
		opts.Metric = inferscale.InnerProduct
	default:
		fail(w, &inferscale.Error{Code: inferscale.ErrInvalid, Message: fmt.Sprintf("unknown metric %q", req.Metric)})
		return
	}
	user := r.PathValue("user")
	hits, err := s.store.Retrieve(user, req.Embedding, req.K, opts)
	if err != nil {
		fail(w, err)
		return
	}
	out := make([]hitJSON, 0, len(hits))
	for _, h := range hits {
		f, err := s.store.Get(user, h.ID)
		if errors.Is(err, inferscale.ErrNotFound) {
			continue // deleted since the retrieval
		}
		if err != nil {
			fail(w, err)
			return
		}
		out = append(out, hitJSON{ID: h.ID, Score: h.Score, Text: f.Text})
	}
	reply(w, http.StatusOK, map[string][]hitJSON{"hits": out})
}

func (s *server) stats(w http.ResponseWriter, r *http.Request) {
	st, err := s.store.Stats()
	if err != nil {
		fail(w, err)
		return
	}
	users, err := s.store.Namespaces()
	if err != nil {
		fail(w, err)
		return
	}
	if users == nil {
		users = []string{}
	}
	g := s.store.Geometry()
	reply(w, http.StatusOK, map[string]any{
		"facts":              st.Facts,
		"segments":           st.Segments,
		"users":              users,
		"file_bytes":         st.FileBytes,
		"live_bytes":         st.LiveBytes,
		"dropped_tail_bytes": st.DroppedTailBytes,
		"identity":           s.store.Identity(),
		"geometry": map[string]any{
			"layers": g.Layers, "kv_heads": g.KVHeads, "head_dim": g.HeadDim,
			"rotary_dim": g.RotaryDim, "rope_theta": g.RopeTheta,
			"kv_dtype": g.KVDType.String(), "embed_dim": g.EmbedDim,
			"kv_bytes_per_token": g.KVTokenBytes(),
		},
		"library": inferscale.Version(),
	})
}

func pathID(w http.ResponseWriter, r *http.Request) (uint64, bool) {
	id, err := strconv.ParseUint(r.PathValue("id"), 10, 64)
	if err != nil {
		fail(w, &inferscale.Error{Code: inferscale.ErrInvalid, Message: fmt.Sprintf("fact id %q is not a number", r.PathValue("id"))})
		return 0, false
	}
	return id, true
}

// noNUL answers 400 and returns false when one of the (name, value) pairs
// holds a NUL: Go strings, JSON and escaped paths carry one, the library's C
// strings cannot, and a name cut at it would reach another user's memory.
func noNUL(w http.ResponseWriter, pairs ...string) bool {
	for i := 0; i+1 < len(pairs); i += 2 {
		if strings.IndexByte(pairs[i+1], 0) >= 0 {
			fail(w, &inferscale.Error{Code: inferscale.ErrInvalid, Message: pairs[i] + " holds a NUL character"})
			return false
		}
	}
	return true
}

func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		fail(w, &inferscale.Error{Code: inferscale.ErrInvalid, Message: "bad request body: " + err.Error()})
		return false
	}
	return true
}

// fail answers with the library's error: its message and code, and the HTTP
// status that fits the code.
func fail(w http.ResponseWriter, err error) {
	status := http.StatusInternalServerError
	switch {
	case errors.Is(err, inferscale.ErrNotFound):
		status = http.StatusNotFound
	case errors.Is(err, inferscale.ErrInvalid), errors.Is(err, inferscale.ErrRange),
		errors.Is(err, inferscale.ErrMismatch):
		status = http.StatusBadRequest
	case errors.Is(err, inferscale.ErrReadOnly):
		status = http.StatusForbidden
	case errors.Is(err, errStopping):
		status = http.StatusServiceUnavailable
	}
	e := errorJSON{Error: err.Error()}
	var ie *inferscale.Error
	if errors.As(err, &ie) {
		e.Code = int(ie.Code)
	}
	reply(w, status, e)
}

func reply(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}
