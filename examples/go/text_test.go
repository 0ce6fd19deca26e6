package main

import (
	"bytes"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	inferscale "github.com/inferscale/inferscale/bindings/go"
)

// The text path: facts added as text, a question answered from them by the
// engine, bad requests refused with 400, one log line per request, and the
// store closed at shutdown with everything acknowledged in it.
func TestTextFactsAndAsk(t *testing.T) {
	storePath := filepath.Join(t.TempDir(), "memory.infs")
	var logBuf bytes.Buffer // read only after the service has stopped
	base, stop := startService(t, storePath, &logBuf)
	c := &client{t: t, base: base, http: &http.Client{Timeout: 120 * time.Second}}

	var added struct{ IDs []uint64 }
	if s := c.do("POST", "/facts", map[string]any{"namespace": "maya", "facts": []any{
		"Maya has a cat named Biscuit.",
		map[string]any{"text": "Maya works as a nurse in Lisbon.", "metadata": map[string]any{"date": "2024-05-01"}, "source_id": 9},
	}}, &added); s != http.StatusCreated || len(added.IDs) != 2 || added.IDs[0] == 0 || added.IDs[0] == added.IDs[1] {
		t.Fatalf("POST /facts: status %d, ids %v", s, added.IDs)
	}
	// The plain text and the metadata are stored; the engine reads the
	// fact as rendered (date first).
	var f factJSON
	if s := c.do("GET", fmt.Sprintf("/v1/users/maya/facts/%d", added.IDs[1]), nil, &f); s != http.StatusOK ||
		f.Text != "Maya works as a nurse in Lisbon." || f.Metadata != `{"date":"2024-05-01"}` || f.SourceID != 9 {
		t.Fatalf("fact %d read back as %+v (status %d)", added.IDs[1], f, s)
	}

	var a askResponse
	if s := c.do("POST", "/ask", map[string]any{"namespace": "maya", "question": "What is the name of Maya's cat?",
		"k": 2, "max_tokens": 12}, &a); s != http.StatusOK {
		t.Fatalf("POST /ask: status %d", s)
	}
	t.Logf("answer %q, facts %v, timings %+v", a.Answer, a.FactIDs, a.Timings)
	tm := a.Timings
	if strings.TrimSpace(a.Answer) == "" || a.Tokens == 0 || len(a.FactIDs) != 2 || len(a.Scores) != 2 ||
		!slices.Contains(a.FactIDs, added.IDs[0]) || !slices.Contains(a.FactIDs, added.IDs[1]) ||
		tm.Embed <= 0 || tm.Retrieve <= 0 || tm.Inject <= 0 || tm.Prefill <= 0 || tm.Decode <= 0 ||
		tm.TTFT < tm.Prefill {
		t.Fatalf("answer %+v", a)
	}
	// The cat fact is the best match, and the answer comes from it.
	if a.FactIDs[0] != added.IDs[0] || !strings.Contains(a.Answer, "Biscuit") {
		t.Fatalf("answer %q from facts %v, want Biscuit from fact %d first", a.Answer, a.FactIDs, added.IDs[0])
	}

	cases := []struct {
		path string
		body any
		says string
	}{
		{"/facts", map[string]any{"facts": []string{"x"}}, "namespace is required"},
		{"/facts", map[string]any{"namespace": "maya", "facts": []string{}}, "facts is empty"},
		{"/facts", map[string]any{"namespace": "maya"}, "facts is empty"},
		{"/facts", rawBody(`{"namespace": "maya", "facts": ["x"`), "bad request body"},
		{"/facts", map[string]any{"namespace": "maya", "facts": []any{map[string]any{"txt": "x"}}}, "bad request body"},
		{"/facts", map[string]any{"namespace": "maya", "facts": []any{map[string]any{"text": ""}}}, "fact 0 has no text"},
		{"/facts", map[string]any{"namespace": "maya", "facts": []any{map[string]any{"text": "x", "metadata": "date"}}}, "metadata must be a JSON object"},
		{"/facts", map[string]any{"namespace": "maya\x00x", "facts": []string{"x"}}, "namespace holds a NUL"},
		{"/facts", map[string]any{"namespace": "inferscale.segments", "facts": []string{"x"}}, "reserved"},
		{"/ask", map[string]any{"question": "Who?"}, "namespace is required"},
		{"/ask", map[string]any{"namespace": "maya"}, "question is required"},
		{"/ask", rawBody("not json"), "bad request body"},
		{"/ask", map[string]any{"namespace": "maya", "question": "Who?", "k": -1}, "out of range"},
	}
	for _, tc := range cases {
		var e errorJSON
		if s := c.do("POST", tc.path, tc.body, &e); s != http.StatusBadRequest || !strings.Contains(e.Error, tc.says) {
			t.Errorf("POST %s %v: status %d, error %+v; want 400 saying %q", tc.path, tc.body, s, e, tc.says)
		}
	}

	if err := stop(); err != nil {
		t.Fatalf("run returned %v", err)
	}
	// The store was closed: it opens again with the two facts.
	s, err := inferscale.Open(storePath, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if n, err := s.Count("maya"); err != nil || n != 2 {
		t.Fatalf("maya has %d facts after shutdown (%v)", n, err)
	}
	// One access log line per request, with its status and body size.
	log := logBuf.String()
	for _, want := range []string{
		"msg=request method=POST path=/facts status=201 ",
		"msg=request method=GET path=/v1/users/maya/facts/",
		"msg=request method=POST path=/ask status=200 ",
		"msg=request method=POST path=/ask status=400 ",
		"msg=\"shutting down\"",
		"msg=stopped",
	} {
		if !strings.Contains(log, want) {
			t.Errorf("the log has no %q:\n%s", want, log)
		}
	}
	if n := strings.Count(log, "msg=request "); n != 3+len(cases) {
		t.Errorf("%d request lines for %d requests", n, 3+len(cases))
	}
}
