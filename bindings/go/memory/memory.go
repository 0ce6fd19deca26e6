// Package memory is a user's facts in one store file, answered from with
// the library's model, embedder and engine, in a few lines:
//
//	m, err := memory.Open("alice.infs", nil)
//	ids, err := m.Add("Maya has a cat named Biscuit.", "Maya lives in Lisbon.")
//	hits, err := m.Search("What pet does Maya have?", 3)
//	a, err := m.Ask("What is the name of Maya's cat?", nil) // a.Text
//	m.Close()
//
// It is Python's inferscale.Memory for Go (docs/go.md, "The memory
// package"). Every argument is checked before a model is loaded or anything
// is written.
package memory

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	inferscale "github.com/inferscale/inferscale/bindings/go"
)

// Options are how Open builds a Memory; nil or the zero value uses the
// default models from the cache, the namespace "default" and a context of
// 4096 tokens.
type Options struct {
	// Namespace is the user the calls read and write ("": "default");
	// Memory.Namespace gives another one on the same file.
	Namespace string
	// Model and Embedder, when set, are used (and not closed by Close);
	// else they are loaded from ModelPath and EmbedderPath ("": SmolLM2 and
	// all-MiniLM-L6-v2 in $INFS_CACHE, ~/.cache/inferscale by default,
	// where scripts/fetch-models.sh puts them).
	Model        *inferscale.Model
	ModelPath    string
	Embedder     *inferscale.Embedder
	EmbedderPath string
	// Ctx is the engine's context in tokens: prompt, facts and answer
	// (0: 4096). A fact that cannot fit it next to a question is refused by
	// Add.
	Ctx uint32
}

// Fact is a fact to add: its text and, optionally, metadata (a JSON object
// whose "date" and "speaker" appear in the prompt).
type Fact struct {
	Text     string
	Metadata string
}

// Hit is a fact Search found: its id, text, metadata and retrieval score
// (cosine similarity, higher is closer).
type Hit struct {
	ID       uint64
	Text     string
	Metadata string
	Score    float32
}

// Memory is one store file with the model, embedder and engine that encode
// its facts and answer from them, seen as one namespace (user). Its methods
// may be called from several goroutines; questions take turns on the
// engine.
type Memory struct {
	ns string
	*shared
}

// shared is what every namespace of one Open holds.
type shared struct {
	path      string
	ctx       uint32
	mu        sync.RWMutex // calls hold it for reading, Close for writing
	closed    bool
	owned     []interface{ Close() error }
	model     *inferscale.Model
	embedder  *inferscale.Embedder
	store     *inferscale.Store
	engine    *inferscale.Engine
	tok       *inferscale.Tokenizer
	factLimit int
}

const (
	defaultNamespace = "default"
	defaultCtx       = 4096
	// The engine's context: room for a question at least, and the
	// library's limit.
	minCtx, maxCtx = 65, 1 << 24
	maxK           = 4096
)

// cacheDir is where scripts/fetch-models.sh puts the models.
func cacheDir() string {
	if dir := os.Getenv("INFS_CACHE"); dir != "" {
		return dir
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "inferscale")
}

// DefaultModelPath is the model Open loads when Options name none.
func DefaultModelPath() string {
	return filepath.Join(cacheDir(), "smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")
}

// DefaultEmbedderPath is the embedder Open loads when Options name none.
func DefaultEmbedderPath() string { return filepath.Join(cacheDir(), "minilm") }

func invalid(format string, args ...any) error {
	return &inferscale.Error{Code: inferscale.ErrInvalid, Message: fmt.Sprintf(format, args...)}
}

func outOfRange(format string, args ...any) error {
	return &inferscale.Error{Code: inferscale.ErrRange, Message: fmt.Sprintf(format, args...)}
}

// checkNamespace refuses a namespace no call could use: empty, holding a
// NUL, or the library's own.
func checkNamespace(ns string) error {
	switch {
	case ns == "":
		return invalid("the namespace is empty: name the user")
	case strings.IndexByte(ns, 0) >= 0:
		return invalid("namespace %q holds a NUL character", ns)
	case strings.HasPrefix(ns, inferscale.ReservedPrefix):
		return invalid("namespace %q is reserved: names starting %q belong to the library", ns,
			inferscale.ReservedPrefix)
	}
	return nil
}

// checkText refuses an empty or blank text, naming it as what.
func checkText(text, what string) error {
	if strings.TrimSpace(text) == "" {
		if text == "" {
			return invalid("%s is empty", what)
		}
		return invalid("%s is only white space", what)
	}
	if strings.IndexByte(text, 0) >= 0 {
		return invalid("%s holds a NUL character", what)
	}
	return nil
}

// Open opens the store file at path, or creates it (its directory must
// exist) with the model's geometry and identity and the embedder's
// dimension, in f16; an existing store made for another model is refused
// (inferscale.ErrMismatch). Every argument is checked first; then the
// models are loaded, an engine of opts.Ctx tokens built and the store
// prepared for it. opts may be nil.
func Open(path string, opts *Options) (*Memory, error) {
	if opts == nil {
		opts = &Options{}
	}
	o := *opts
	if o.Namespace == "" {
		o.Namespace = defaultNamespace
	}
	if o.Ctx == 0 {
		o.Ctx = defaultCtx
	}
	if o.ModelPath == "" {
		o.ModelPath = DefaultModelPath()
	}
	if o.EmbedderPath == "" {
		o.EmbedderPath = DefaultEmbedderPath()
	}
	if path == "" || strings.IndexByte(path, 0) >= 0 {
		return nil, invalid("memory path %q: give a file name", path)
	}
	if err := checkNamespace(o.Namespace); err != nil {
		return nil, err
	}
	if o.Ctx < minCtx || o.Ctx > maxCtx {
		return nil, outOfRange("Ctx %d is not in %d..%d", o.Ctx, minCtx, maxCtx)
	}
	existing := false
	if fi, err := os.Stat(path); err == nil {
		if fi.IsDir() {
			return nil, invalid("memory path %s is a directory: give a file name", path)
		}
		existing = true
	} else if dir := filepath.Dir(path); !isDir(dir) {
		return nil, &inferscale.Error{Code: inferscale.ErrNotFound,
			Message: fmt.Sprintf("memory path %s: directory %s does not exist: create it first", path, dir)}
	}
	for _, m := range []struct{ what, path string }{{"model", o.ModelPath}, {"embedder", o.EmbedderPath}} {
		if (m.what == "model" && o.Model != nil) || (m.what == "embedder" && o.Embedder != nil) {
			continue
		}
		if _, err := os.Stat(m.path); err != nil {
			return nil, &inferscale.Error{Code: inferscale.ErrNotFound, Message: fmt.Sprintf(
				"the %s %s does not exist: run scripts/fetch-models.sh, or name one in Options", m.what, m.path)}
		}
	}

	s := &shared{path: path, ctx: o.Ctx}
	m := &Memory{ns: o.Namespace, shared: s}
	if err := s.open(&o, existing); err != nil {
		s.closeOwned()
		return nil, err
	}
	return m, nil
}

func isDir(dir string) bool {
	fi, err := os.Stat(dir)
	return err == nil && fi.IsDir()
}

// open loads what o names and opens the store: an existing file first, so
// that one that is not a store fails before the models load.
func (s *shared) open(o *Options, existing bool) error {
	var err error
	if existing {
		if s.store, err = inferscale.Open(s.path, nil); err != nil {
			return err
		}
		s.owned = append(s.owned, s.store)
	}
	if s.model = o.Model; s.model == nil {
		if s.model, err = inferscale.LoadModel(o.ModelPath, nil); err != nil {
			return err
		}
		s.owned = append(s.owned, s.model)
	}
	if s.embedder = o.Embedder; s.embedder == nil {
		if s.embedder, err = inferscale.LoadEmbedder(o.EmbedderPath, nil); err != nil {
			return err
		}
		s.owned = append(s.owned, s.embedder)
	}
	kv := inferscale.F16
	if existing {
		kv = s.store.Geometry().KVDType
	} else {
		g, err := s.model.Geometry(kv)
		if err != nil {
			return err
		}
		g.EmbedDim = uint32(s.embedder.Dim())
		ident, err := s.model.Identity(kv)
		if err != nil {
			return err
		}
		if s.store, err = inferscale.Open(s.path, &inferscale.Options{Create: true, Geometry: &g, Identity: ident}); err != nil {
			return err
		}
		s.owned = append(s.owned, s.store)
	}
	if s.engine, err = inferscale.NewEngine(s.model, inferscale.EngineOptions{Ctx: o.Ctx, KVDType: kv}); err != nil {
		return err
	}
	s.owned = append(s.owned, s.engine)
	if s.factLimit, err = s.engine.FactLimit(); err != nil {
		return err
	}
	if s.factLimit == 0 {
		return outOfRange("Ctx %d leaves no room for a fact next to the prompt's header and a question: raise Ctx", o.Ctx)
	}
	if err := s.engine.Prepare(s.store); err != nil {
		return err
	}
	s.tok, err = s.model.Tokenizer()
	return err
}

// Namespace is the memory of user ns in the same file, sharing its models
// and engine (Close on either closes both).
func (m *Memory) Namespace(ns string) (*Memory, error) {
	if err := checkNamespace(ns); err != nil {
		return nil, err
	}
	return &Memory{ns: ns, shared: m.shared}, nil
}

// Path is the store file; Name the namespace the calls use.
func (m *Memory) Path() string { return m.path }
func (m *Memory) Name() string { return m.ns }

// FactLimit is the most tokens one fact may take, rendered as in the prompt:
// Ctx less the prompt's header and room for a question.
func (m *Memory) FactLimit() int { return m.factLimit }

// live holds the memory open for one call (release with m.mu.RUnlock).
func (m *Memory) live() error {
	m.mu.RLock()
	if m.closed {
		m.mu.RUnlock()
		return fmt.Errorf("inferscale/memory: %s is closed: %w", m.path, inferscale.ErrClosed)
	}
	return nil
}

// Add stores facts (texts) and returns their ids, as AddFacts does.
func (m *Memory) Add(texts ...string) ([]uint64, error) {
	facts := make([]Fact, len(texts))
	for i, t := range texts {
		facts[i].Text = t
	}
	return m.AddFacts(facts...)
}

// AddFacts stores facts and returns their ids. Each is encoded as it
// appears in the engine's prompt (inferscale.RenderFact of its text and
// metadata) right after the engine's header, embedded from its plain text,
// and stored with its text and metadata. Every fact is checked first and
// none is stored if one is refused: an empty or blank text
// (inferscale.ErrInvalid), or one longer than FactLimit tokens
// (inferscale.ErrRange, naming both counts).
func (m *Memory) AddFacts(facts ...Fact) ([]uint64, error) {
	if err := m.live(); err != nil {
		return nil, err
	}
	defer m.mu.RUnlock()
	return m.encode(facts, func(i int) string { return fmt.Sprintf("fact %d", i) })
}

// encode checks facts and encodes them in one call; name(i) names fact i.
func (m *Memory) encode(facts []Fact, name func(i int) string) ([]uint64, error) {
	if len(facts) == 0 {
		return nil, invalid("no facts: give at least one")
	}
	in := make([]inferscale.FactInput, len(facts))
	for i, f := range facts {
		name := name(i)
		if err := checkText(f.Text, name); err != nil {
			return nil, err
		}
		rendered, err := inferscale.RenderFact(f.Text, f.Metadata)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		tokens, err := m.tok.Tokenize(rendered, 0)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		// What Engine.CheckFact counts, against the limit taken at Open.
		if len(tokens) > m.factLimit {
			return nil, outOfRange("%s has %d tokens; the memory's context of %d tokens (Options.Ctx) holds at most "+
				"%d for one fact next to the prompt's header and a question: split the fact, or open the memory "+
				"with a larger Ctx", name, len(tokens), m.ctx, m.factLimit)
		}
		in[i] = inferscale.FactInput{Text: f.Text, Tokens: tokens, Metadata: f.Metadata}
	}
	return m.store.Encode(m.ns, m.model, in,
		&inferscale.EncodeOptions{Context: m.engine.Header(), Embedder: m.embedder})
}

// Update replaces fact id's text, keeping its metadata, and returns the new
// fact's id: the store never rewrites a record, so the new fact is stored
// first, under a new id, and the old one deleted after it (a crash in
// between leaves both, never neither). inferscale.ErrNotFound when the
// namespace has no fact id; the text is checked as Add checks it, and a
// refused one changes nothing.
func (m *Memory) Update(id uint64, text string) (uint64, error) {
	if err := m.live(); err != nil {
		return 0, err
	}
	defer m.mu.RUnlock()
	old, err := m.store.Get(m.ns, id)
	if err != nil {
		return 0, err
	}
	ids, err := m.encode([]Fact{{Text: text, Metadata: old.Metadata}}, func(int) string { return "the text" })
	if err != nil {
		return 0, err
	}
	return ids[0], m.store.Delete(m.ns, id)
}

// Delete deletes fact id (inferscale.ErrNotFound if the namespace has none).
func (m *Memory) Delete(id uint64) error {
	if err := m.live(); err != nil {
		return err
	}
	defer m.mu.RUnlock()
	return m.store.Delete(m.ns, id)
}

// checkK takes k as Search and Ask do: 0 is 10, else 1..4096.
func checkK(k int) (int, error) {
	if k == 0 {
		return 10, nil
	}
	if k < 0 || k > maxK {
		return 0, outOfRange("k %d is not in 1..%d (0: 10)", k, maxK)
	}
	return k, nil
}

// Search returns the k facts nearest to query (cosine of the embeddings),
// best first; k 0 is 10, else 1..4096, as in Ask.
func (m *Memory) Search(query string, k int) ([]Hit, error) {
	if err := checkText(query, "the query"); err != nil {
		return nil, err
	}
	k, err := checkK(k)
	if err != nil {
		return nil, err
	}
	if err := m.live(); err != nil {
		return nil, err
	}
	defer m.mu.RUnlock()
	q, err := m.embedder.Embed([]string{query}, nil)
	if err != nil {
		return nil, err
	}
	hits, err := m.store.Retrieve(m.ns, q, k, nil)
	if err != nil {
		return nil, err
	}
	out := make([]Hit, 0, len(hits))
	for _, h := range hits {
		f, err := m.store.Get(m.ns, h.ID)
		if errors.Is(err, inferscale.ErrNotFound) {
			continue // deleted since the retrieval
		}
		if err != nil {
			return nil, err
		}
		out = append(out, Hit{ID: h.ID, Text: f.Text, Metadata: f.Metadata, Score: h.Score})
	}
	return out, nil
}

// Ask answers question from the opts.K best facts (0: 10, else 1..4096, as
// in Search), injected, with only the question prefilled (Engine.Ask);
// opts (nil: greedy, at most 64 tokens) are Engine.Ask's. A namespace
// without facts is answered from the model alone (Answer.FactIDs empty);
// retrieved facts that did not fit the context next to the question are
// left out (Answer.LeftOut).
func (m *Memory) Ask(question string, opts *inferscale.AskOptions) (*inferscale.Answer, error) {
	if err := checkText(question, "the question"); err != nil {
		return nil, err
	}
	o := inferscale.AskOptions{}
	if opts != nil {
		o = *opts
	}
	k, err := checkK(o.K)
	if err != nil {
		return nil, err
	}
	o.K = k
	if err := m.live(); err != nil {
		return nil, err
	}
	defer m.mu.RUnlock()
	return m.engine.Ask(m.store, m.embedder, m.ns, question, &o)
}

// Close closes the engine, the store and the models Open loaded (not those
// given in Options), once the calls in flight have returned; later calls
// fail with inferscale.ErrClosed. Closing again does nothing.
func (m *Memory) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	m.closed = true
	return m.closeOwned()
}

func (s *shared) closeOwned() error {
	var err error
	for i := len(s.owned) - 1; i >= 0; i-- {
		err = errors.Join(err, s.owned[i].Close())
	}
	s.owned = nil
	return err
}
