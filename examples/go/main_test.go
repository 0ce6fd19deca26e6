package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	inferscale "github.com/inferscale/inferscale/bindings/go"
)

// The geometry of the store the service creates for SmolLM2 and MiniLM
// (the default -model and -embedder): 30 layers, 3 KV heads of 64 dims in
// f16, 384-float embeddings.
const layers, kvHeads, headDim, embedDim = 30, 3, 64, 384

// emb is an embedding whose first floats are v, the rest 0.
func emb(v ...float32) []float32 {
	return append(v, make([]float32, embedDim-len(v))...)
}

// startService runs the service as main does, on 127.0.0.1 with a port the
// kernel picks, with the extra flags, its log into logw (nil: discarded),
// and returns its base URL and a function that stops it and returns run's
// error.
func startService(t *testing.T, storePath string, logw io.Writer, extra ...string) (string, func() error) {
	t.Helper()
	if logw == nil {
		logw = io.Discard
	}
	ctx, cancel := context.WithCancel(context.Background())
	addrc := make(chan string, 1)
	done := make(chan error, 1)
	args := append([]string{"-store", storePath, "-addr", "127.0.0.1:0"}, extra...)
	go func() { done <- run(ctx, args, logw, func(a string) { addrc <- a }) }()
	select {
	case addr := <-addrc:
		return "http://" + addr, func() error { cancel(); return <-done }
	case err := <-done:
		cancel()
		t.Fatalf("the service did not start: %v", err)
	case <-time.After(30 * time.Second):
		cancel()
		t.Fatal("the service did not start within 30 s")
	}
	return "", nil
}

// modelIdentity is the identity of SmolLM2's f16 KV.
func modelIdentity(t *testing.T) string {
	t.Helper()
	m, err := inferscale.LoadModel(filepath.Join(cacheDir(), "smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	id, err := m.Identity(inferscale.F16)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

type client struct {
	t    *testing.T
	base string
	http *http.Client
}

// rawBody is a request body sent as it is, not marshalled.
type rawBody string

// do sends a JSON request and decodes the JSON answer into out (if not nil);
// it returns the status code.
func (c *client) do(method, path string, body, out any) int {
	c.t.Helper()
	var rd io.Reader
	if raw, ok := body.(rawBody); ok {
		rd = strings.NewReader(string(raw))
	} else if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			c.t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	if out != nil && len(raw) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			c.t.Fatalf("%s %s: %v in %q", method, path, err, raw)
		}
	}
	return resp.StatusCode
}

// kv is random f16 KV for n tokens (values in [0.5, 1)).
func kv(rng *rand.Rand, n int) []byte {
	b := make([]byte, layers*n*kvHeads*headDim*2)
	for i := 0; i < len(b); i += 2 {
		binary.LittleEndian.PutUint16(b[i:], 0x3800+uint16(rng.Intn(0x400)))
	}
	return b
}

func TestMemoryService(t *testing.T) {
	storePath := filepath.Join(t.TempDir(), "memory.infs")
	base, stop := startService(t, storePath, nil)
	c := &client{t: t, base: base, http: &http.Client{Timeout: 30 * time.Second}}
	rng := rand.New(rand.NewSource(1))

	// Alice's facts point along distinct axes; Bob has one fact along the
	// axis of Alice's first.
	facts := []struct {
		user, text string
		emb        []float32
	}{
		{"alice", "Alice has a dog named Rex.", emb(1, 0, 0, 0)},
		{"alice", "Alice works as a nurse.", emb(0, 1, 0, 0)},
		{"alice", "Alice lives in Lisbon.", emb(0, 0, 1, 0.1)},
		{"bob", "Bob plays the cello.", emb(1, 0, 0, 0)},
	}
	ids := make([]uint64, len(facts))
	for i, f := range facts {
		n := 3 + i
		tokens := make([]int32, n)
		for j := range tokens {
			tokens[j] = int32(100 + j)
		}
		kb, vb := kv(rng, n), kv(rng, n)
		var got struct{ ID uint64 }
		status := c.do("POST", "/v1/users/"+f.user+"/facts", map[string]any{
			"text": f.text, "tokens": tokens, "embedding": f.emb, "k": kb, "v": vb,
			"metadata": `{"turn":` + fmt.Sprint(i) + `}`, "source_id": i, "timestamp": 1700000000 + i,
		}, &got)
		if status != http.StatusCreated {
			t.Fatalf("adding fact %d: status %d", i, status)
		}
		ids[i] = got.ID

		// Read back with its KV: the bytes are the ones sent.
		var back factJSON
		if s := c.do("GET", fmt.Sprintf("/v1/users/%s/facts/%d?kv=1", f.user, got.ID), nil, &back); s != http.StatusOK {
			t.Fatalf("reading fact %d: status %d", got.ID, s)
		}
		if back.Text != f.text || !bytes.Equal(back.K, kb) || !bytes.Equal(back.V, vb) || len(back.Tokens) != n ||
			back.Timestamp != int64(1700000000+i) {
			t.Fatalf("fact %d read back as %+v", got.ID, back)
		}
	}

	var hits struct{ Hits []hitJSON }
	if s := c.do("POST", "/v1/users/alice/retrieve", map[string]any{"embedding": emb(0.1, 0.9), "k": 2}, &hits); s != http.StatusOK {
		t.Fatalf("retrieve: status %d", s)
	}
	if len(hits.Hits) != 2 || hits.Hits[0].ID != ids[1] || hits.Hits[0].Text != "Alice works as a nurse." ||
		hits.Hits[1].ID != ids[0] || hits.Hits[0].Score < hits.Hits[1].Score {
		t.Fatalf("alice's retrieval = %+v", hits.Hits)
	}
	// Bob's memory never shows Alice's facts, even for the query of her dog.
	if c.do("POST", "/v1/users/bob/retrieve", map[string]any{"embedding": emb(1), "k": 10}, &hits); len(hits.Hits) != 1 || hits.Hits[0].ID != ids[3] {
		t.Fatalf("bob's retrieval = %+v", hits.Hits)
	}
	if s := c.do("GET", fmt.Sprintf("/v1/users/bob/facts/%d", ids[0]), nil, nil); s != http.StatusNotFound {
		t.Fatalf("bob read alice's fact: status %d", s)
	}

	var stats struct {
		Facts    uint64
		Segments uint64
		Users    []string
		Identity string
		Geometry struct {
			Layers    uint32
			KVHeads   uint32  `json:"kv_heads"`
			KVDType   string  `json:"kv_dtype"`
			EmbedDim  uint32  `json:"embed_dim"`
			RopeTheta float64 `json:"rope_theta"`
		}
	}
	// The store was created for the model: its geometry and identity,
	// SmolLM2's RoPE theta of 100000; the engine's header and footer
	// segments in the reserved namespace.
	if c.do("GET", "/v1/stats", nil, &stats); stats.Facts != 4 || stats.Segments != 2 ||
		strings.Join(stats.Users, ",") != "alice,bob,"+inferscale.SegmentNamespace ||
		stats.Identity != modelIdentity(t) || stats.Geometry.KVDType != "f16" || stats.Geometry.Layers != layers ||
		stats.Geometry.KVHeads != kvHeads || stats.Geometry.EmbedDim != embedDim || stats.Geometry.RopeTheta != 100000 {
		t.Fatalf("stats = %+v", stats)
	}

	// Bad requests get the library's error code and a 4xx.
	var e errorJSON
	cases := []struct {
		method, path string
		body         any
		status, code int
	}{
		{"POST", "/v1/users/alice/retrieve", map[string]any{"embedding": []float32{1, 0}, "k": 2}, 400, int(inferscale.ErrInvalid)},
		{"POST", "/v1/users/alice/retrieve", map[string]any{"embedding": emb(1), "k": 0}, 400, int(inferscale.ErrRange)},
		{"POST", "/v1/users/alice/retrieve", map[string]any{"embedding": emb(1), "k": 1, "metric": "l2"}, 400, int(inferscale.ErrInvalid)},
		{"POST", "/v1/users/alice/facts", map[string]any{"tokens": []int32{1}, "embedding": emb(1), "k": kv(rng, 2), "v": kv(rng, 2)}, 400, int(inferscale.ErrInvalid)},
		{"POST", "/v1/users/alice/facts", map[string]any{"tokens": []int32{1}, "bogus": 1}, 400, int(inferscale.ErrInvalid)},
		{"GET", "/v1/users/alice/facts/123456", nil, 404, int(inferscale.ErrNotFound)},
		{"GET", "/v1/users/alice/facts/x", nil, 400, int(inferscale.ErrInvalid)},
		{"DELETE", "/v1/users/alice/facts/123456", nil, 404, int(inferscale.ErrNotFound)},
	}
	for _, tc := range cases {
		e = errorJSON{}
		if s := c.do(tc.method, tc.path, tc.body, &e); s != tc.status || e.Code != tc.code || e.Error == "" {
			t.Errorf("%s %s %v: status %d, error %+v; want %d with code %d", tc.method, tc.path, tc.body, s, e, tc.status, tc.code)
		}
	}

	if s := c.do("DELETE", fmt.Sprintf("/v1/users/alice/facts/%d", ids[1]), nil, nil); s != http.StatusNoContent {
		t.Fatalf("delete: status %d", s)
	}
	var list struct{ IDs []uint64 }
	if c.do("GET", "/v1/users/alice/facts", nil, &list); len(list.IDs) != 2 || list.IDs[0] != ids[0] || list.IDs[1] != ids[2] {
		t.Fatalf("alice's ids after delete = %v", list.IDs)
	}

	if err := stop(); err != nil {
		t.Fatalf("run returned %v", err)
	}
	// The service closed the store: it opens again, with what was written.
	s, err := inferscale.Open(storePath, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if n, err := s.Count("alice"); err != nil || n != 2 {
		t.Fatalf("alice has %d facts after restart (%v)", n, err)
	}
}
