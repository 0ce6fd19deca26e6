package memory

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	inferscale "github.com/inferscale/inferscale/bindings/go"
)

// needModels skips a test when the default models are not in the cache
// (scripts/fetch-models.sh puts them there).
func needModels(t *testing.T) {
	t.Helper()
	for _, p := range []string{DefaultModelPath(), DefaultEmbedderPath()} {
		if _, err := os.Stat(p); err != nil {
			t.Skipf("%s is absent: run scripts/fetch-models.sh", p)
		}
	}
}

func wantCode(t *testing.T, err error, code inferscale.Code, says string) {
	t.Helper()
	if !errors.Is(err, code) || !strings.Contains(err.Error(), says) {
		t.Fatalf("error %v, want code %v saying %q", err, code, says)
	}
}

// The five lines of the package comment, then the file reopened: the facts
// are still there.
func TestMemoryFiveLines(t *testing.T) {
	needModels(t)
	path := filepath.Join(t.TempDir(), "alice.infs")
	m, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := m.Add("Maya has a cat named Biscuit.", "Maya lives in Lisbon.")
	if err != nil || len(ids) != 2 {
		t.Fatalf("Add: %v, %v", ids, err)
	}
	hits, err := m.Search("What pet does Maya have?", 3)
	if err != nil || len(hits) != 2 || hits[0].ID != ids[0] || hits[0].Text != "Maya has a cat named Biscuit." ||
		hits[0].Score <= hits[1].Score {
		t.Fatalf("Search: %+v, %v", hits, err)
	}
	a, err := m.Ask("What is the name of Maya's cat?", nil)
	if err != nil || !strings.Contains(a.Text, "Biscuit") || a.FactIDs[0] != ids[0] {
		t.Fatalf("Ask: %+v, %v", a, err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatalf("Close again: %v", err)
	}
	if _, err := m.Search("cat", 1); !errors.Is(err, inferscale.ErrClosed) || !strings.Contains(err.Error(), path) {
		t.Fatalf("Search after Close: %v", err)
	}
	if _, err := m.Add("x"); !errors.Is(err, inferscale.ErrClosed) {
		t.Fatalf("Add after Close: %v", err)
	}

	m, err = Open(path, &Options{Ctx: 512})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	hits, err = m.Search("Where does Maya live?", 0)
	if err != nil || len(hits) != 2 || hits[0].ID != ids[1] {
		t.Fatalf("Search after reopening: %+v, %v", hits, err)
	}
}

// Update stores the new text (metadata kept) and deletes the old fact;
// Delete deletes; namespaces are users of one file.
func TestMemoryUpdateDeleteNamespaces(t *testing.T) {
	needModels(t)
	m, err := Open(filepath.Join(t.TempDir(), "m.infs"), &Options{Namespace: "maya", Ctx: 512})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ids, err := m.AddFacts(Fact{Text: "Maya lives in Porto.", Metadata: `{"date": "2024-05-01"}`},
		Fact{Text: "Maya plays the cello."})
	if err != nil {
		t.Fatal(err)
	}
	moved, err := m.Update(ids[0], "Maya lives in Lisbon.")
	if err != nil || moved == ids[0] {
		t.Fatalf("Update: %d, %v", moved, err)
	}
	hits, err := m.Search("Where does Maya live?", 5)
	if err != nil || len(hits) != 2 || hits[0].ID != moved || hits[0].Text != "Maya lives in Lisbon." ||
		hits[0].Metadata != `{"date": "2024-05-01"}` {
		t.Fatalf("after Update: %+v, %v", hits, err)
	}
	_, err = m.Update(ids[0], "Maya lives in Faro.")
	wantCode(t, err, inferscale.ErrNotFound, "")
	_, err = m.Update(moved, " ")
	wantCode(t, err, inferscale.ErrInvalid, "the text is only white space")
	if err := m.Delete(ids[1]); err != nil {
		t.Fatal(err)
	}
	wantCode(t, m.Delete(ids[1]), inferscale.ErrNotFound, "")

	bob, err := m.Namespace("bob")
	if err != nil || bob.Name() != "bob" {
		t.Fatal(err)
	}
	if _, err := bob.Add("Bob has a dog named Rex."); err != nil {
		t.Fatal(err)
	}
	hits, err = m.Search("Who has a dog?", 5)
	if err != nil || len(hits) != 1 || hits[0].ID != moved {
		t.Fatalf("maya's facts hold bob's: %+v, %v", hits, err)
	}
	a, err := bob.Ask("What is the name of Bob's dog?", &inferscale.AskOptions{MaxTokens: 12})
	if err != nil || !strings.Contains(a.Text, "Rex") {
		t.Fatalf("bob's answer %+v, %v", a, err)
	}
	for _, ns := range []string{"", "a\x00b", inferscale.ReservedPrefix + "x"} {
		if _, err := m.Namespace(ns); !errors.Is(err, inferscale.ErrInvalid) {
			t.Fatalf("Namespace(%q): %v", ns, err)
		}
	}
}

// Bad input is refused with what is wrong before anything is stored; k is
// taken alike by Search and Ask.
func TestMemoryRefuses(t *testing.T) {
	needModels(t)
	m, err := Open(filepath.Join(t.TempDir(), "m.infs"), &Options{Ctx: 256})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	limit := m.FactLimit()
	if limit <= 0 || limit >= 256 {
		t.Fatalf("fact limit %d for a context of 256", limit)
	}
	long := strings.Repeat("Maya likes tea. ", 550)
	_, err = m.Add("Maya sings.", long)
	wantCode(t, err, inferscale.ErrRange, "fact 1 has ")
	if !strings.Contains(err.Error(), "at most "+strconv.Itoa(limit)) || !strings.Contains(err.Error(), "Ctx") {
		t.Fatalf("the over-long fact's error does not name the limit %d: %v", limit, err)
	}
	_, err = m.Add("Maya sings.", "")
	wantCode(t, err, inferscale.ErrInvalid, "fact 1 is empty")
	_, err = m.Add(" \t")
	wantCode(t, err, inferscale.ErrInvalid, "fact 0 is only white space")
	_, err = m.Add()
	wantCode(t, err, inferscale.ErrInvalid, "no facts")
	if hits, err := m.Search("Does Maya sing?", 5); err != nil || len(hits) != 0 {
		t.Fatalf("refused facts were stored: %+v, %v", hits, err)
	}
	// A namespace without facts: answered from the model alone.
	a, err := m.Ask("Does Maya sing?", &inferscale.AskOptions{MaxTokens: 4})
	if err != nil || len(a.FactIDs) != 0 {
		t.Fatalf("a question to an empty namespace: %+v, %v", a, err)
	}
	if _, err := m.Add("Maya sings in a choir."); err != nil {
		t.Fatal(err)
	}
	for _, k := range []int{-1, 5000} {
		_, err = m.Search("Does Maya sing?", k)
		wantCode(t, err, inferscale.ErrRange, "not in 1..4096")
		_, err = m.Ask("Does Maya sing?", &inferscale.AskOptions{K: k})
		wantCode(t, err, inferscale.ErrRange, "not in 1..4096")
	}
	_, err = m.Search("", 1)
	wantCode(t, err, inferscale.ErrInvalid, "the query is empty")
	_, err = m.Ask("  ", nil)
	wantCode(t, err, inferscale.ErrInvalid, "the question is only white space")
}

// Open checks its arguments before it loads a model: each of these fails
// at once, naming the user's own argument.
func TestMemoryOpenChecksFirst(t *testing.T) {
	dir := t.TempDir()
	notAStore := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(notAStore, []byte("not a store"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path string
		opts *Options
		code inferscale.Code
		says string
	}{
		{"", nil, inferscale.ErrInvalid, "give a file name"},
		{dir, nil, inferscale.ErrInvalid, "is a directory"},
		{filepath.Join(dir, "no", "such", "m.infs"), nil, inferscale.ErrNotFound, "does not exist: create it"},
		{filepath.Join(dir, "m.infs"), &Options{Namespace: "ma\x00ya"}, inferscale.ErrInvalid, "NUL"},
		{filepath.Join(dir, "m.infs"), &Options{Namespace: "inferscale.x"}, inferscale.ErrInvalid, "reserved"},
		{filepath.Join(dir, "m.infs"), &Options{Ctx: 10}, inferscale.ErrRange, "Ctx 10"},
		{filepath.Join(dir, "m.infs"), &Options{ModelPath: filepath.Join(dir, "none.gguf")}, inferscale.ErrNotFound,
			"fetch-models.sh"},
	} {
		start := time.Now()
		_, err := Open(c.path, c.opts)
		wantCode(t, err, c.code, c.says)
		if d := time.Since(start); d > time.Second {
			t.Fatalf("Open(%q) took %v to refuse: it loaded something first", c.path, d)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "m.infs")); !os.IsNotExist(err) {
		t.Fatalf("a refused Open wrote the store: %v", err)
	}
	// A file that is not a store fails before the models load.
	start := time.Now()
	if _, err := Open(notAStore, nil); err == nil || time.Since(start) > time.Second {
		t.Fatalf("a file that is not a store: %v after %v", err, time.Since(start))
	}
	needModels(t)
	// Models given are used and not closed.
	model, err := inferscale.LoadModel(DefaultModelPath(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer model.Close()
	m, err := Open(filepath.Join(dir, "given.infs"), &Options{Model: model, Ctx: 256})
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
	if _, err := model.Geometry(inferscale.F16); err != nil {
		t.Fatalf("Close closed the model it was given: %v", err)
	}
	if !slices.Contains([]string{"default"}, m.Name()) {
		t.Fatalf("namespace %q", m.Name())
	}
}
