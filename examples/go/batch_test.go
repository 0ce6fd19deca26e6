package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	inferscale "github.com/inferscale/inferscale/bindings/go"
)

// askOnce sends one /ask from any goroutine and returns the status and the
// decoded answer (or the error's body).
func askOnce(hc *http.Client, base string, body map[string]any) (int, askResponse, string, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return 0, askResponse{}, "", err
	}
	resp, err := hc.Post(base+"/ask", "application/json", bytes.NewReader(b))
	if err != nil {
		return 0, askResponse{}, "", err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, askResponse{}, "", err
	}
	var a askResponse
	if resp.StatusCode == http.StatusOK {
		err = json.Unmarshal(raw, &a)
	}
	return resp.StatusCode, a, string(raw), err
}

// askAll sends the questions at once and returns their answers in order;
// every one must be answered 200.
func askAll(t *testing.T, base string, questions []string) []askResponse {
	t.Helper()
	hc := &http.Client{Timeout: 5 * time.Minute}
	out := make([]askResponse, len(questions))
	errs := make([]string, len(questions))
	var wg sync.WaitGroup
	for i, q := range questions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, a, raw, err := askOnce(hc, base, map[string]any{"namespace": "maya", "question": q, "k": 4, "max_tokens": 10})
			if s != http.StatusOK || err != nil {
				errs[i] = fmt.Sprintf("status %d, %v: %s", s, err, raw)
			}
			out[i] = a
		}()
	}
	wg.Wait()
	for i, e := range errs {
		if e != "" {
			t.Fatalf("question %d: %s", i, e)
		}
	}
	return out
}

var batchQuestions = []string{
	"What is the name of Maya's cat?", "Where does Maya work?", "What instrument does Maya play?",
	"Who is Biscuit?", "Where does Maya live?", "What does Maya like to drink?",
}

func addMaya(t *testing.T, c *client) {
	t.Helper()
	var added struct{ IDs []uint64 }
	if s := c.do("POST", "/facts", map[string]any{"namespace": "maya", "facts": []string{
		"Maya has a cat named Biscuit.", "Maya works as a nurse in Lisbon.", "Maya plays the cello.",
		"Maya drinks green tea every morning.", "Maya lives near the river.",
	}}, &added); s != http.StatusCreated || len(added.IDs) != 5 {
		t.Fatalf("POST /facts: status %d, ids %v", s, added.IDs)
	}
}

// Concurrent /ask requests run together through the engine's continuous
// batching (one embedding and one prefill step for those admitted at
// once, which therefore share those times), each answered as it is alone.
func TestAskBatchesConcurrentRequests(t *testing.T) {
	storePath := filepath.Join(t.TempDir(), "memory.infs")
	// A window long enough that requests sent together meet in one batch
	// even on a loaded machine.
	base, stop := startService(t, storePath, nil, "-batch", "8", "-batch-window", "300ms")
	c := &client{t: t, base: base, http: &http.Client{Timeout: 5 * time.Minute}}
	addMaya(t, c)

	together := askAll(t, base, batchQuestions)
	groups := map[[2]float64][]int{}
	for i, a := range together {
		k := [2]float64{a.Timings.Embed, a.Timings.Prefill}
		groups[k] = append(groups[k], i)
		t.Logf("%q: %q (embed %.1f ms, prefill %.1f ms)", batchQuestions[i], a.Answer, a.Timings.Embed, a.Timings.Prefill)
	}
	if len(groups) >= len(batchQuestions) {
		t.Fatalf("%d concurrent questions ran as %d engine steps: not batched", len(batchQuestions), len(groups))
	}
	// One by one, the same answers.
	for i, q := range batchQuestions {
		alone := askAll(t, base, []string{q})[0]
		if alone.Answer != together[i].Answer || fmt.Sprint(alone.FactIDs) != fmt.Sprint(together[i].FactIDs) {
			t.Fatalf("%q: together %q (facts %v), alone %q (facts %v)", q, together[i].Answer, together[i].FactIDs,
				alone.Answer, alone.FactIDs)
		}
	}
	if !strings.Contains(together[0].Answer, "Biscuit") {
		t.Fatalf("the cat question was answered %q", together[0].Answer)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// A stop while /ask requests wait for the engine: each is answered 200,
// then run returns nil.
func TestShutdownAnswersQueuedAsks(t *testing.T) {
	storePath := filepath.Join(t.TempDir(), "memory.infs")
	var logBuf bytes.Buffer
	base, stop := startService(t, storePath, &logBuf, "-batch", "2", "-batch-window", "0")
	c := &client{t: t, base: base, http: &http.Client{Timeout: 5 * time.Minute}}
	addMaya(t, c)
	hc := &http.Client{Timeout: 5 * time.Minute}
	out := make([]askResponse, len(batchQuestions))
	finished := make(chan int, len(batchQuestions))
	for i, q := range batchQuestions {
		go func() {
			if s, a, _, err := askOnce(hc, base, map[string]any{"namespace": "maya", "question": q,
				"max_tokens": 6}); s == http.StatusOK && err == nil {
				out[i] = a
			}
			finished <- i
		}()
	}
	// Six questions on a batch of two: three engine calls. When the first
	// call has answered, the others are in their handlers, queued.
	<-finished
	if err := stop(); err != nil {
		t.Fatalf("run returned %v", err)
	}
	for range len(batchQuestions) - 1 {
		<-finished
	}
	for i, a := range out {
		if a.Tokens == 0 {
			t.Fatalf("question %d was not answered before the service stopped:\n%s", i, logBuf.String())
		}
	}
}

// A fact the engine's context cannot hold is refused at POST /facts with
// the limit named, and nothing of the request is stored; one stored
// anyway through the binding is left out of prompts: /ask still answers.
func TestFactTooLongForTheContext(t *testing.T) {
	storePath := filepath.Join(t.TempDir(), "memory.infs")
	base, stop := startService(t, storePath, nil, "-ctx", "256")
	c := &client{t: t, base: base, http: &http.Client{Timeout: 5 * time.Minute}}
	addMaya(t, c)

	long := strings.Repeat("Maya drinks green tea every morning. ", 40)
	for _, text := range []string{long, strings.Repeat("Maya likes tea. ", 550)} {
		var e errorJSON
		s := c.do("POST", "/facts", map[string]any{"namespace": "maya", "facts": []any{"Maya sings.", text}}, &e)
		var n, limit int
		if _, after, ok := strings.Cut(e.Error, "fact 1 has "); ok {
			fmt.Sscanf(after, "%d", &n)
		}
		if _, after, ok := strings.Cut(e.Error, "at most "); ok {
			fmt.Sscanf(after, "%d", &limit)
		}
		if s != http.StatusBadRequest || !strings.Contains(e.Error, "fact 1 has") || !strings.Contains(e.Error, "-ctx") ||
			!strings.Contains(e.Error, "context of 256 tokens") || limit <= 0 || limit >= 256 || n <= limit {
			t.Fatalf("POST /facts with a fact of %d bytes: status %d, %+v; want 400 naming the limit", len(text), s, e)
		}
	}
	var ids struct{ IDs []uint64 }
	if s := c.do("GET", "/v1/users/maya/facts", nil, &ids); s != http.StatusOK || len(ids.IDs) != 5 {
		t.Fatalf("maya has %v after the refused requests (status %d)", ids.IDs, s)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	// Stored through the binding, past the service's check.
	putLongFact(t, storePath, long)
	base, stop = startService(t, storePath, nil, "-ctx", "256")
	hc := &http.Client{Timeout: 5 * time.Minute}
	for _, q := range []string{"What does Maya drink every morning?", "What is the name of Maya's cat?"} {
		s, a, raw, err := askOnce(hc, base, map[string]any{"namespace": "maya", "question": q, "k": 10, "max_tokens": 8})
		if s != http.StatusOK || err != nil || a.Tokens == 0 || a.LeftOut != 1 || len(a.FactIDs) != 5 {
			t.Fatalf("%q after a fact longer than the context: status %d, %v, %s", q, s, err, raw)
		}
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// putLongFact encodes text into maya's facts of the store as the service
// encodes a fact, without its check.
func putLongFact(t *testing.T, storePath, text string) {
	t.Helper()
	m, err := inferscale.LoadModel(filepath.Join(cacheDir(), "smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	e, err := inferscale.LoadEmbedder(filepath.Join(cacheDir(), "minilm"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	eng, err := inferscale.NewEngine(m, inferscale.EngineOptions{Ctx: 256, KVDType: inferscale.F16})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	s, err := inferscale.Open(storePath, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tok, err := m.Tokenizer()
	if err != nil {
		t.Fatal(err)
	}
	rendered, err := inferscale.RenderFact(text, "")
	if err != nil {
		t.Fatal(err)
	}
	tokens, err := tok.Tokenize(rendered, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Encode("maya", m, []inferscale.FactInput{{Text: text, Tokens: tokens}},
		&inferscale.EncodeOptions{Context: eng.Header(), Embedder: e}); err != nil {
		t.Fatal(err)
	}
}
