package inferscale

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"github.com/inferscale/inferscale/bindings/go/internal/cudart"
)

// wantMessage fails unless err is an *Error of code want whose message is msg.
func wantMessage(t *testing.T, err error, want Code, msg string) {
	t.Helper()
	wantCode(t, err, want)
	if got := err.(*Error).Message; got != msg {
		t.Fatalf("message %q, want %q", got, msg)
	}
}

func TestSearcherNeedsADeviceCopy(t *testing.T) {
	s, _ := createStore(t, testGeometry())
	_, err := NewSearcher(s, SearcherOptions{})
	want := "CUDA is not in this build"
	if LibraryFeatures().CUDA {
		want = "the store has no device copy (open it with options.device >= 0)"
	}
	wantMessage(t, err, ErrUnsupported, "infs_searcher_create: "+want)

	// option ranges: the binding's, then the library's
	_, err = NewSearcher(s, SearcherOptions{MaxK: -1})
	wantMessage(t, err, ErrRange, "NewSearcher: MaxK -1 is not in 0..4294967295")
	_, err = NewSearcher(s, SearcherOptions{MaxK: SearcherKMax + 1})
	wantMessage(t, err, ErrRange, "infs_searcher_create: max_k 101 is not in 1..100")
	_, err = NewSearcher(s, SearcherOptions{MaxQueries: SearcherQueriesMax + 1})
	wantMessage(t, err, ErrRange, "infs_searcher_create: max_queries 4097 is not in 1..4096")
	s.Close()
	_, err = NewSearcher(s, SearcherOptions{})
	if !errors.Is(err, ErrClosed) {
		t.Fatalf("NewSearcher on a closed store: %v", err)
	}
}

func TestInjectorNeedsADeviceCopy(t *testing.T) {
	g := testGeometry()
	s, _ := createStore(t, g)
	hc, err := NewHostCache(FormatNHD, F32, g.Layers, g.KVHeads, g.HeadDim, 4, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer hc.Close()
	_, err = NewInjector(s, hc.Layout(), InjectorOptions{})
	wantCode(t, err, ErrInvalid)
	if !strings.HasPrefix(err.(*Error).Message, "infs_injector_create: the cache is in host memory") {
		t.Fatalf("message %q", err.(*Error).Message)
	}
	// described as a device cache: refused before its memory is read
	dev := *hc.Layout()
	dev.UseDevice, dev.Device = true, 0
	_, err = NewInjector(s, &dev, InjectorOptions{})
	want := "layout device is 0 but this build has no CUDA support"
	if LibraryFeatures().CUDA {
		want = "the store has no device copy (open it with options.device >= 0)"
	}
	wantMessage(t, err, ErrUnsupported, "infs_injector_create: "+want)
	_, err = NewInjector(s, &dev, InjectorOptions{MaxTokens: -5})
	wantMessage(t, err, ErrRange, "NewInjector: MaxTokens -5 is not in 0..4294967295")
	_, err = NewInjector(s, nil, InjectorOptions{})
	wantMessage(t, err, ErrInvalid, "NewInjector: cache is nil")
}

// The argument checks come before anything reaches C: a Searcher and an
// Injector that were never made (no C handle) report each bad argument,
// and only good ones get as far as finding the handle closed.
func TestDeviceCallArguments(t *testing.T) {
	s, _ := createStore(t, testGeometry())
	sr := &Searcher{store: s, maxQueries: 4, maxK: 10}
	const p = uintptr(0x7f0000001000)
	for _, c := range []struct {
		nq, k           int
		q, hits, counts uintptr
		ns              string
		code            Code
		msg             string
	}{
		{0, 5, p, p, p, "u", ErrRange, "Searcher.Search: nQueries 0 is not in 1..4 (the searcher's MaxQueries)"},
		{5, 5, p, p, p, "u", ErrRange, "Searcher.Search: nQueries 5 is not in 1..4 (the searcher's MaxQueries)"},
		{-1, 5, p, p, p, "u", ErrRange, "Searcher.Search: nQueries -1 is not in 1..4 (the searcher's MaxQueries)"},
		{2, 0, p, p, p, "u", ErrRange, "Searcher.Search: k 0 is not in 1..10 (the searcher's MaxK)"},
		{2, 11, p, p, p, "u", ErrRange, "Searcher.Search: k 11 is not in 1..10 (the searcher's MaxK)"},
		{2, -3, p, p, p, "u", ErrRange, "Searcher.Search: k -3 is not in 1..10 (the searcher's MaxK)"},
		{2, 5, 0, p, p, "u", ErrInvalid, "Searcher.Search: queries is 0"},
		{2, 5, p, 0, p, "u", ErrInvalid, "Searcher.Search: hits is 0"},
		{2, 5, p, p, 0, "u", ErrInvalid, "Searcher.Search: counts is 0"},
		{2, 5, p, p, p, "u\x00", ErrInvalid, "Searcher.Search: namespace contains a NUL byte"},
		{4, 10, p, p, p, "u", ErrInvalid, "Searcher.Search: " + closedMsg},
	} {
		wantMessage(t, sr.Search(c.ns, c.q, c.nq, c.k, c.hits, c.counts, 0), c.code, c.msg)
	}

	inj := &Injector{store: s, maxIDs: 8}
	for _, c := range []struct {
		ids, nIDs, bt uintptr
		stride, btLen int
		code          Code
		msg           string
	}{
		{p, p, p, 0, 4, ErrInvalid, "Injector.InjectDevice: idStride 0 is not a positive multiple of 8 bytes"},
		{p, p, p, -8, 4, ErrInvalid, "Injector.InjectDevice: idStride -8 is not a positive multiple of 8 bytes"},
		{p, p, p, 12, 4, ErrInvalid, "Injector.InjectDevice: idStride 12 is not a positive multiple of 8 bytes"},
		{p, p, p, 16, 0, ErrInvalid, "Injector.InjectDevice: blockTableLen 0 is not positive"},
		{p, p, p, 16, -1, ErrInvalid, "Injector.InjectDevice: blockTableLen -1 is not positive"},
		{0, p, p, 8, 4, ErrInvalid, "Injector.InjectDevice: ids is 0"},
		{p, 0, p, 8, 4, ErrInvalid, "Injector.InjectDevice: nIDs is 0"},
		{p, p, 0, 8, 4, ErrInvalid, "Injector.InjectDevice: blockTable is 0"},
		{p, p, p, 16, 4, ErrInvalid, "Injector.InjectDevice: " + closedMsg},
	} {
		err := inj.InjectDevice("u", c.ids, c.stride, c.nIDs, 0, c.bt, c.btLen, 0, 0, 0)
		wantMessage(t, err, c.code, c.msg)
	}
	if err := inj.InjectDevice("u", p, 8, p, 0, p, 1, 0, 0, 0); !errors.Is(err, ErrClosed) {
		t.Fatalf("InjectDevice without a handle: %v", err)
	}
	var nilSr *Searcher
	if err := nilSr.Search("u", p, 1, 1, p, p, 0); !errors.Is(err, ErrClosed) {
		t.Fatalf("Search on a nil Searcher: %v", err)
	}
	if nilSr.Close() != nil || (*Injector)(nil).Close() != nil {
		t.Fatal("Close of nil")
	}
}

func TestNamespaceGeneration(t *testing.T) {
	g := testGeometry()
	s, _ := createStore(t, g)
	rng := rand.New(rand.NewSource(4))
	gen := func() uint64 {
		t.Helper()
		v, err := s.NamespaceGeneration("u")
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if gen() != 0 {
		t.Fatal("an unknown namespace has generation 0")
	}
	seen := map[uint64]bool{0: true}
	id, err := s.Put("u", randomFact(rng, g, 3))
	if err != nil {
		t.Fatal(err)
	}
	seen[gen()] = true
	before := gen()
	if _, err := s.Put("v", randomFact(rng, g, 2)); err != nil || gen() != before {
		t.Fatalf("a put in another namespace changed u's generation (%v)", err)
	}
	if _, err := s.Put("u", randomFact(rng, g, 2)); err != nil {
		t.Fatal(err)
	}
	seen[gen()] = true
	if err := s.Delete("u", id); err != nil {
		t.Fatal(err)
	}
	seen[gen()] = true
	if len(seen) != 4 {
		t.Fatalf("generations repeat: %v", seen)
	}
	if err := s.DropNamespace("u"); err != nil || gen() != 0 {
		t.Fatalf("a dropped namespace has generation %d (%v), want 0", gen(), err)
	}
	if _, err := s.Put("u", randomFact(rng, g, 2)); err != nil || seen[gen()] {
		t.Fatalf("generation %d after the drop was seen before (%v)", gen(), err)
	}
	_, err = s.NamespaceGeneration("u\x00")
	wantCode(t, err, ErrInvalid)
	s.Close()
	if _, err := s.NamespaceGeneration("u"); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
}

// GPU: device search against the exact CPU search, device injection of its hits against
// host-pointer injection into the same kind of device cache, and Close.
func TestGPUSearchAndInject(t *testing.T) {
	if !LibraryFeatures().CUDA {
		t.Skip("the library has no CUDA")
	}
	if err := cudart.Load(); err != nil {
		t.Skip(err)
	}
	g := testGeometry()
	g.EmbedDim, g.HeadDim, g.RotaryDim = 64, 64, 64
	s, err := Open(filepath.Join(t.TempDir(), "gpu.infs"), &Options{Create: true, Geometry: &g, Identity: testIdentity,
		Sync: SyncOff, UseDevice: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rng := rand.New(rand.NewSource(9))
	for i := 0; i < 200; i++ {
		if _, err := s.Put("u", randomFact(rng, g, 1+rng.Intn(8))); err != nil {
			t.Fatal(err)
		}
	}
	const nq, k = 3, 6
	q := make([]float32, nq*int(g.EmbedDim))
	for i := range q {
		q[i] = float32(rng.NormFloat64())
	}
	dev := func(n int) uintptr {
		p, err := cudart.Malloc(n)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cudart.Free(p) })
		return p
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	dq, dHits, dCounts := dev(len(q)*4), dev(nq*k*16), dev(nq*4)
	must(cudart.ToDevice(dq, Float32Bytes(q)))
	stream, err := cudart.StreamCreate()
	must(err)
	defer cudart.StreamDestroy(stream)

	sr, err := NewSearcher(s, SearcherOptions{MaxQueries: 4, MaxK: k})
	must(err)
	must(sr.Search("u", dq, nq, k, dHits, dCounts, stream))
	must(cudart.StreamSynchronize(stream))
	hits := make([]Hit, nq*k)
	counts := make([]uint32, nq)
	must(cudart.ToHost(unsafe.Slice((*byte)(unsafe.Pointer(&hits[0])), len(hits)*16), dHits))
	must(cudart.ToHost(unsafe.Slice((*byte)(unsafe.Pointer(&counts[0])), nq*4), dCounts))
	// the exact CPU search as the reference (Retrieve itself would search the device copy)
	want, err := s.RetrieveBatch("u", q, k, &RetrieveOptions{Backend: BackendExact})
	must(err)
	for i := 0; i < nq; i++ {
		if int(counts[i]) != len(want[i]) || len(want[i]) != k {
			t.Fatalf("query %d: %d hits, Retrieve %d", i, counts[i], len(want[i]))
		}
		for j, h := range want[i] {
			if hits[i*k+j] != h {
				t.Fatalf("query %d hit %d: %+v, Retrieve %+v", i, j, hits[i*k+j], h)
			}
		}
	}

	// Two device caches, FlashInfer NHD, f32: one written from the hits on
	// the device, one by Inject from the same ids on the host.
	const blocks, bs = 8, 16
	tensor := int64(bs) * int64(g.KVHeads) * int64(g.HeadDim)
	layerBytes := 2 * blocks * tensor * 4
	total := int(layerBytes) * int(g.Layers)
	layout := func(base uintptr) *KVLayout {
		l := &KVLayout{UseDevice: true, DType: F32, Layers: g.Layers, KVHeads: g.KVHeads, HeadDim: g.HeadDim,
			Blocks: blocks, BlockSize: bs, StrideBlock: 2 * tensor, StrideSlot: int64(g.KVHeads) * int64(g.HeadDim),
			StrideHead: int64(g.HeadDim), StrideDim: 1}
		for i := 0; i < int(g.Layers); i++ {
			kb := base + uintptr(int64(i)*layerBytes)
			// device memory, as KVLayout takes it: never dereferenced by Go
			l.K = append(l.K, unsafe.Add(unsafe.Pointer(nil), kb))
			l.V = append(l.V, unsafe.Add(unsafe.Pointer(nil), kb+uintptr(tensor*4)))
		}
		return l
	}
	zeros := make([]byte, total)
	cacheA, cacheB := dev(total), dev(total)
	must(cudart.ToDevice(cacheA, zeros))
	must(cudart.ToDevice(cacheB, zeros))
	table := []int32{5, 2, 7, 0, 1, 3}
	var tb bytes.Buffer
	must(binary.Write(&tb, binary.LittleEndian, table))
	dTable, dNext, dStatus := dev(len(table)*4), dev(4), dev(4)
	must(cudart.ToDevice(dTable, tb.Bytes()))
	must(cudart.ToDevice(dStatus, []byte{0x9d, 0xff, 0xff, 0xff}))

	inj, err := NewInjector(s, layout(cacheA), InjectorOptions{MaxIDs: k, MaxTokens: 64})
	must(err)
	const qi, start = 1, 5
	must(inj.InjectDevice("u", dHits+uintptr(qi*k*16), 16, dCounts+qi*4, start, dTable, len(table), dNext, dStatus,
		stream))
	must(cudart.StreamSynchronize(stream))
	ids := make([]uint64, k)
	for j := range ids {
		ids[j] = hits[qi*k+j].ID
	}
	end, err := s.Inject("u", ids, start, table, layout(cacheB), nil)
	must(err)
	must(cudart.StreamSynchronize(0))
	word := make([]byte, 4)
	must(cudart.ToHost(word, dStatus))
	if st := int32(binary.LittleEndian.Uint32(word)); st != 0 {
		t.Fatalf("status %d", st)
	}
	must(cudart.ToHost(word, dNext))
	if next := binary.LittleEndian.Uint32(word); next != end {
		t.Fatalf("next position %d, Inject's %d", next, end)
	}
	a, b := make([]byte, total), make([]byte, total)
	must(cudart.ToHost(a, cacheA))
	must(cudart.ToHost(b, cacheB))
	if !bytes.Equal(a, b) || bytes.Equal(a, zeros) {
		t.Fatal("the device injection differs from Inject's (or wrote nothing)")
	}

	// Store.Close frees what is still open; both then report ErrClosed.
	must(sr.Close())
	if err := sr.Search("u", dq, nq, k, dHits, dCounts, stream); !errors.Is(err, ErrClosed) {
		t.Fatalf("Search after Close: %v", err)
	}
	sr2, err := NewSearcher(s, SearcherOptions{})
	must(err)
	must(s.Close())
	if err := sr2.Search("u", dq, 1, 1, dHits, dCounts, stream); !errors.Is(err, ErrClosed) {
		t.Fatalf("Search after Store.Close: %v", err)
	}
	err = inj.InjectDevice("u", dHits, 16, dCounts, 0, dTable, len(table), 0, 0, stream)
	if !errors.Is(err, ErrClosed) {
		t.Fatalf("InjectDevice after Store.Close: %v", err)
	}
	must(sr2.Close())
	must(inj.Close())
}
