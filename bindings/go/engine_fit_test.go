package inferscale

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// A fact the engine's context cannot hold is refused by CheckFact with the
// limit named; one stored anyway (Store.Encode does not know the engine)
// is left out of the prompt, and questions still get answers.
func TestEngineFactLimit(t *testing.T) {
	m, emb, eng, s, ids := engineSetup(t, 12)
	small, err := NewEngine(m, EngineOptions{Ctx: 256, KVDType: F16})
	if err != nil {
		t.Fatal(err)
	}
	defer small.Close()
	if err := small.Prepare(s); err != nil {
		t.Fatal(err)
	}
	limit, err := small.FactLimit()
	if err != nil {
		t.Fatal(err)
	}
	big, err := eng.FactLimit()
	if err != nil {
		t.Fatal(err)
	}
	header := len(small.Header())
	if limit <= 0 || limit > 256-header-FactQuestionRoom || big-limit != 1024-256 {
		t.Fatalf("fact limits %d (n_ctx 256) and %d (n_ctx 1024), header %d", limit, big, header)
	}

	tok, err := m.Tokenizer()
	if err != nil {
		t.Fatal(err)
	}
	text := "Maya has a cat named Biscuit."
	rendered, err := RenderFact(text, `{"date": "2024-05-01"}`)
	if err != nil {
		t.Fatal(err)
	}
	want, err := tok.Tokenize(rendered, 0)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := small.CheckFact(text, `{"date": "2024-05-01"}`); err != nil || n != len(want) {
		t.Fatalf("CheckFact(%q) = %d, %v; want %d tokens", text, n, err, len(want))
	}
	long := strings.Repeat("Maya drinks green tea every morning. ", 40)
	n, err := small.CheckFact(long, "")
	wantCode(t, err, ErrRange)
	if n <= limit || !strings.Contains(err.Error(), fmt.Sprint(limit)) || !strings.Contains(err.Error(), fmt.Sprint(n)) {
		t.Fatalf("CheckFact of a long fact: %d tokens, %v; want the limit %d named", n, err, limit)
	}
	for _, blank := range []string{"", "  \n"} {
		_, err := small.CheckFact(blank, "")
		wantCode(t, err, ErrInvalid)
	}
	_, err = small.CheckFact("a\x00b", "")
	wantCode(t, err, ErrInvalid)

	// Stored anyway: every fact retrieved, the long one left out.
	longTokens, err := tok.Tokenize(must(RenderFact(long, "")), 0)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Encode("maya", m, []FactInput{{Text: long, Tokens: longTokens}},
		&EncodeOptions{Context: small.Header(), Embedder: emb})
	if err != nil {
		t.Fatal(err)
	}
	a, err := small.Ask(s, emb, "maya", "What does Maya drink every morning?", &AskOptions{K: 13, MaxTokens: 8})
	if err != nil {
		t.Fatalf("a question after a fact longer than the context: %v", err)
	}
	if a.LeftOut < 1 || slices.Contains(a.FactIDs, got[0]) || len(a.FactIDs)+a.LeftOut != len(ids)+1 || a.Tokens == 0 {
		t.Fatalf("answer %q: facts %v, %d left out; the long fact is %d", a.Text, a.FactIDs, a.LeftOut, got[0])
	}
	many, err := small.AskBatch(s, emb, "maya", []string{"What does Maya drink?", demoQuestion}, &AskOptions{K: 13, MaxTokens: 4})
	if err != nil || many[0].LeftOut < 1 {
		t.Fatalf("AskBatch after a fact longer than the context: %v", err)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
