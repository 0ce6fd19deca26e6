package inferscale

import (
	"math"
	"slices"
	"testing"
)

// A host engine with MaxSeqs > 1 answers AskBatch's questions together
// (one embedding, one prefill step, batched decode steps): each answer as
// the question gets alone from Ask, the group's time parts shared.
func TestEngineAskBatchOnTheHost(t *testing.T) {
	m, emb, eng, s, _ := engineSetup(t, 12)
	batched, err := NewEngine(m, EngineOptions{Ctx: 1024, KVDType: F16, MaxSeqs: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer batched.Close()
	if err := batched.Prepare(s); err != nil {
		t.Fatal(err)
	}
	qs := []string{demoQuestion, "Where does Maya live?", "What is Maya's job?", "Who is Biscuit?"}
	opts := &AskOptions{K: 4, MaxTokens: 10}
	many, err := batched.AskBatch(s, emb, "maya", qs, opts)
	if err != nil || len(many) != len(qs) {
		t.Fatalf("AskBatch: %d answers, %v", len(many), err)
	}
	for i, q := range qs {
		one, err := eng.Ask(s, emb, "maya", q, opts)
		if err != nil {
			t.Fatal(err)
		}
		b := many[i]
		t.Logf("%q: %q (prefill %.1f ms, decode %.1f ms)", q, b.Text, b.PrefillMs, b.DecodeMs)
		if b.Text != one.Text || b.Prompt != one.Prompt || b.Tokens != one.Tokens || !slices.Equal(b.FactIDs, one.FactIDs) {
			t.Fatalf("question %d: batched %q (%d tokens, facts %v), alone %q (%d, %v)", i, b.Text, b.Tokens, b.FactIDs,
				one.Text, one.Tokens, one.FactIDs)
		}
		var d, scale float64
		for j, x := range one.FirstLogits {
			d = math.Max(d, math.Abs(float64(b.FirstLogits[j]-x)))
			scale = math.Max(scale, math.Abs(float64(x)))
		}
		if d > 1e-4*scale {
			t.Fatalf("question %d: first logits differ by %g (scale %g)", i, d, scale)
		}
		if b.EmbedMs != many[0].EmbedMs || b.PrefillMs != many[0].PrefillMs {
			t.Fatalf("question %d was not embedded and prefilled with question 0: %+v, %+v", i, b, many[0])
		}
	}
	// More questions than sequences: the later ones wait for a slot.
	more, err := batched.AskBatch(s, emb, "maya", append(qs, "What does Maya drink?"), opts)
	if err != nil || len(more) != 5 || more[4].PrefillMs == more[0].PrefillMs || more[4].Text == "" {
		t.Fatalf("five questions on four sequences: %v", err)
	}
}
