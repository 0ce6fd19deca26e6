package inferscale

/*
#include <stdlib.h>
#include <inferscale/inferscale.h>
*/
import "C"

import (
	"fmt"
	"math"
	"runtime"
	"strings"
	"sync"
	"time"
	"unsafe"
)

// SyncMode is when acknowledged writes reach stable storage. In every mode a
// write is in the operating system's hands when the call returns, so it
// survives the process being killed; the modes differ for power loss.
type SyncMode int

const (
	SyncFull   SyncMode = C.INFS_SYNC_FULL   // fsync before every write returns (default)
	SyncNormal SyncMode = C.INFS_SYNC_NORMAL // fsync on Close, Compact and Sync
	SyncOff    SyncMode = C.INFS_SYNC_OFF    // never fsync
)

// Options are how Open opens a store. The zero value opens an existing store
// for reading and writing, without checking its geometry or identity.
type Options struct {
	Create   bool // create the store if the path does not exist
	ReadOnly bool // no writes; does not take the writer lock

	// Geometry and Identity are required to create a store; when set for an
	// existing one, they are checked against it (ErrMismatch).
	Geometry *Geometry
	Identity string

	Sync SyncMode

	// UseDevice keeps a copy of the store on CUDA device Device, using at
	// most DeviceBudget bytes of its memory (0: no limit), and up to
	// HostBudget bytes of pinned host memory (0: none) for fact KV evicted
	// from the device (docs/cuda.md, "Tiers"; Store.Prefetch).
	UseDevice    bool
	Device       int
	DeviceBudget uint64
	HostBudget   uint64

	// FaissIndex is a FAISS index factory string ("Flat", "HNSW32", ...);
	// namespaces of at least FaissMinFacts facts (0: the library's default)
	// use it under BackendAuto.
	FaissIndex    string
	FaissMinFacts uint64

	// Remote ("redis://[user[:password]@]host[:port]") keeps the store on a
	// Redis or Valkey server, the file a cache of it that can be lost
	// (docs/scale-out.md): writes return once the server (and
	// RemoteReplicas replicas) acknowledged them; a namespace is brought in
	// whole by Prefetch or on first use. RemoteUser and RemotePassword (an
	// ACL user) replace the URL's; RemoteTimeout is per connect and command
	// (0: 2 s); RemotePrefix starts every key (""; "infs").
	Remote         string
	RemoteUser     string
	RemotePassword string
	RemoteTimeout  time.Duration
	RemotePrefix   string
	RemoteReplicas uint32
}

// Store is an open fact store. Its methods are safe for concurrent use by
// many goroutines. Close releases it; a method called after Close returns an
// error wrapping ErrClosed.
type Store struct {
	// mu is held shared by every call into the store and exclusively by
	// Close, so that Close waits for calls in flight and no call ever reaches
	// a freed handle.
	mu       sync.RWMutex
	c        *C.infs_store
	geom     Geometry
	tokBytes int
	identity string
	// bound holds the C searchers and injectors made on the store with
	// their free functions (C pointers only, so that no Go object is kept
	// alive from here), written under mu held exclusively; Close frees
	// those still there before it closes the store.
	bound map[unsafe.Pointer]func(unsafe.Pointer)
}

// cstring is s as a NUL-terminated byte string in Go memory, for C calls that
// only read it during the call. A NUL inside s is an error: C would see a
// shorter string than the caller meant.
func cstring(op, what, s string) ([]byte, error) {
	if strings.IndexByte(s, 0) >= 0 {
		return nil, newError(ErrInvalid, fmt.Sprintf("%s: %s contains a NUL byte", op, what))
	}
	b := make([]byte, len(s)+1)
	copy(b, s)
	return b, nil
}

func charp(b []byte) *C.char {
	if b == nil {
		return nil
	}
	return (*C.char)(unsafe.Pointer(unsafe.SliceData(b)))
}

// nsCall runs call, a C function of the open store and namespace ns, and
// returns its error.
func (s *Store) nsCall(op, ns string, call func(c *C.infs_store, ns *C.char) C.int) error {
	cns, err := cstring(op, "namespace", ns)
	if err != nil {
		return err
	}
	c, err := s.acquire(op)
	if err != nil {
		return err
	}
	defer s.release()
	return check(func() C.int { return call(c, charp(cns)) })
}

// Open opens the store at path, or creates it when opts.Create is set. A
// second writer, in this or another process, gets ErrBusy. opts may be nil.
func Open(path string, opts *Options) (*Store, error) {
	const op = "Open"
	if versionErr != nil {
		return nil, versionErr
	}
	if opts == nil {
		opts = &Options{}
	}
	cpath, err := cstring(op, "path", path)
	if err != nil {
		return nil, err
	}
	var co C.infs_store_options
	C.infs_store_options_init(&co, C.INFS_STORE_OPTIONS_VERSION)
	if opts.Create {
		co.flags |= C.INFS_OPEN_CREATE
	}
	if opts.ReadOnly {
		co.flags |= C.INFS_OPEN_READONLY
	}
	co.sync = C.infs_sync_mode(opts.Sync)
	if opts.UseDevice {
		co.device = C.int(opts.Device)
		co.device_budget_bytes = C.uint64_t(opts.DeviceBudget)
		co.host_budget_bytes = C.uint64_t(opts.HostBudget)
	}
	if opts.FaissMinFacts != 0 {
		co.faiss_min_facts = C.uint64_t(opts.FaissMinFacts)
	}

	// The options struct handed to C holds pointers to Go memory: pinned for
	// the call, as cgo requires.
	var pin runtime.Pinner
	defer pin.Unpin()
	var cg C.infs_geometry
	if opts.Geometry != nil {
		cg = opts.Geometry.toC()
		pin.Pin(&cg)
		co.geometry = &cg
	}
	var ident, faiss []byte
	if opts.Identity != "" {
		if ident, err = cstring(op, "identity", opts.Identity); err != nil {
			return nil, err
		}
		pin.Pin(unsafe.SliceData(ident))
		co.identity = charp(ident)
	}
	if opts.FaissIndex != "" {
		if faiss, err = cstring(op, "FAISS index", opts.FaissIndex); err != nil {
			return nil, err
		}
		pin.Pin(unsafe.SliceData(faiss))
		co.faiss_index = charp(faiss)
	}

	remote := []struct {
		what, value string
		field       **C.char
	}{
		{"remote", opts.Remote, &co.remote},
		{"remote user", opts.RemoteUser, &co.remote_user},
		{"remote password", opts.RemotePassword, &co.remote_password},
		{"remote prefix", opts.RemotePrefix, &co.remote_prefix},
	}
	for _, r := range remote {
		if r.value == "" {
			continue
		}
		b, err := cstring(op, r.what, r.value)
		if err != nil {
			return nil, err
		}
		pin.Pin(unsafe.SliceData(b))
		*r.field = charp(b)
	}
	if opts.RemoteTimeout < 0 || opts.RemoteTimeout/time.Millisecond > math.MaxUint32 {
		return nil, newError(ErrInvalid, fmt.Sprintf("%s: RemoteTimeout %v is out of range", op, opts.RemoteTimeout))
	}
	co.remote_timeout_ms = C.unsigned(opts.RemoteTimeout / time.Millisecond)
	co.remote_replicas = C.unsigned(opts.RemoteReplicas)

	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var c *C.infs_store
	if rc := C.infs_store_open(&c, charp(cpath), &co); rc != 0 {
		return nil, lastError(rc)
	}
	var g C.infs_geometry
	if rc := C.infs_store_geometry(&g, c); rc != 0 {
		err := lastError(rc)
		C.infs_store_close(c)
		return nil, err
	}
	s := &Store{c: c, geom: geometryFromC(&g), identity: C.GoString(C.infs_store_identity(c))}
	s.tokBytes = s.geom.KVTokenBytes()
	runtime.SetFinalizer(s, (*Store).Close)
	return s, nil
}

// Close flushes the store per its sync mode and releases it, after freeing
// the Searchers and Injectors made on it that are still open. It waits for
// calls in flight on other goroutines, and calling it again does nothing.
func (s *Store) Close() error {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.c != nil {
		for h, free := range s.bound {
			free(h)
		}
		s.bound = nil
		C.infs_store_close(s.c)
		s.c = nil
		runtime.SetFinalizer(s, nil)
	}
	return nil
}

// acquire returns the C handle, held open until release.
func (s *Store) acquire(op string) (*C.infs_store, error) {
	if s == nil {
		return nil, closedError(op)
	}
	s.mu.RLock()
	if s.c == nil {
		s.mu.RUnlock()
		return nil, closedError(op)
	}
	return s.c, nil
}

// release ends a call started by acquire. The store stays reachable until
// here, so its finalizer cannot close the handle while C is using it.
func (s *Store) release() {
	s.mu.RUnlock()
	runtime.KeepAlive(s)
}

// bind makes a C object that uses the store (a searcher, an injector) with
// create, and records it to be freed with free by unbind or Close.
func (s *Store) bind(op string, create func(*C.infs_store) (unsafe.Pointer, C.int), free func(unsafe.Pointer)) (unsafe.Pointer, error) {
	if s == nil {
		return nil, closedError(op)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.c == nil {
		return nil, closedError(op)
	}
	var h unsafe.Pointer
	if err := check(func() C.int {
		var rc C.int
		h, rc = create(s.c)
		return rc
	}); err != nil {
		return nil, err
	}
	if s.bound == nil {
		s.bound = make(map[unsafe.Pointer]func(unsafe.Pointer))
	}
	s.bound[h] = free
	return h, nil
}

// unbind frees *h, made by bind, unless Close already has, and sets it to
// nil; it waits for calls in flight on the store.
func (s *Store) unbind(h *unsafe.Pointer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if free, ok := s.bound[*h]; ok && *h != nil {
		delete(s.bound, *h)
		free(*h)
	}
	*h = nil
}

// acquireBound is acquire for a call on *h, made by bind: it returns *h,
// read under the lock, or an error wrapping ErrClosed once *h or the store
// is closed.
func (s *Store) acquireBound(op string, h *unsafe.Pointer) (unsafe.Pointer, error) {
	if _, err := s.acquire(op); err != nil {
		return nil, err
	}
	if _, ok := s.bound[*h]; !ok || *h == nil {
		s.release()
		return nil, closedError(op)
	}
	return *h, nil
}

// NamespaceGeneration is a number that changes with every change of
// namespace ns (a put, a delete, a drop) and never repeats while the store
// is open; 0 for a namespace without records (unknown, or dropped). A CUDA
// graph that captured Searcher.Search or Injector.InjectDevice on ns must
// be captured again once it has changed.
func (s *Store) NamespaceGeneration(ns string) (uint64, error) {
	var g C.uint64_t
	if err := s.nsCall("Store.NamespaceGeneration", ns, func(c *C.infs_store, cns *C.char) C.int {
		return C.infs_namespace_generation(&g, c, cns)
	}); err != nil {
		return 0, err
	}
	return uint64(g), nil
}

// Tier is where a namespace's fact KV lies, fastest first.
type Tier int

const (
	TierDevice Tier = C.INFS_TIER_DEVICE // all of it on the device
	TierHost   Tier = C.INFS_TIER_HOST   // all on the device or in pinned host memory, not all on the device
	TierFile   Tier = C.INFS_TIER_FILE   // some of it only in the store file
)

// Prefetch starts moving namespace ns's fact KV up to the device (as far as
// the budgets hold it) and returns at once; nothing to do on a store
// without a device copy.
func (s *Store) Prefetch(ns string) error {
	return s.nsCall("Store.Prefetch", ns, func(c *C.infs_store, cns *C.char) C.int { return C.infs_prefetch(c, cns) })
}

// NamespaceTier is the slowest tier holding some of namespace ns's fact KV:
// TierFile on a store without a device copy; the fastest tier for an empty
// namespace.
func (s *Store) NamespaceTier(ns string) (Tier, error) {
	var t C.infs_tier
	if err := s.nsCall("Store.NamespaceTier", ns, func(c *C.infs_store, cns *C.char) C.int {
		return C.infs_namespace_tier(&t, c, cns)
	}); err != nil {
		return TierFile, err
	}
	return Tier(t), nil
}

// TierWait waits until the tier moves queued so far (prefetches, promotions
// after injections, evicted KV going down to pinned memory) are done.
func (s *Store) TierWait() error {
	c, err := s.acquire("Store.TierWait")
	if err != nil {
		return err
	}
	defer s.release()
	return check(func() C.int { return C.infs_tier_wait(c) })
}

// Geometry is the geometry the store is bound to (still valid after Close;
// the zero Geometry for a nil store).
func (s *Store) Geometry() Geometry {
	if s == nil {
		return Geometry{}
	}
	return s.geom
}

// Identity is the store's identity string: model, tokenizer, chat template,
// anything that changes the KV (still valid after Close).
func (s *Store) Identity() string {
	if s == nil {
		return ""
	}
	return s.identity
}

// Fact is one record of a store: a memory fact (retrieved by its embedding)
// or a segment (a header, footer or separator: injectable, never retrieved).
type Fact struct {
	ID        uint64 // set by Get; ignored by Put
	Segment   bool
	Tokens    []int32
	Embedding []float32 // EmbedDim floats for a fact; empty for a segment
	// K and V are laid out [layers][tokens][kv heads][head dim] in the
	// store's KV dtype, keys before rotary embedding:
	// len(Tokens) * Geometry().KVTokenBytes() bytes each.
	K, V      []byte
	Text      string // optional
	Metadata  string // optional, JSON by convention
	SourceID  uint64 // the caller's reference, e.g. a conversation turn
	Timestamp int64  // the caller's clock, e.g. Unix seconds
}

// Put stores f in namespace ns and returns its id, unique within the store
// and never reused. When Put returns nil the fact survives a crash of the
// process. The slices of f are read in place, not copied.
func (s *Store) Put(ns string, f *Fact) (uint64, error) {
	const op = "Store.Put"
	if f == nil {
		return 0, newError(ErrInvalid, op+": fact is nil")
	}
	cns, err := cstring(op, "namespace", ns)
	if err != nil {
		return 0, err
	}
	text, err := cstring(op, "text", f.Text)
	if err != nil {
		return 0, err
	}
	meta, err := cstring(op, "metadata", f.Metadata)
	if err != nil {
		return 0, err
	}
	c, err := s.acquire(op)
	if err != nil {
		return 0, err
	}
	defer s.release()

	// C reads the KV and the embedding with sizes it derives from the
	// geometry: slices of any other length would be read out of bounds.
	if n := len(f.Tokens); n > 0 && n <= FactTokensMax {
		want := n * s.tokBytes
		if len(f.K) != want || len(f.V) != want {
			return 0, newError(ErrInvalid, fmt.Sprintf(
				"%s: K has %d bytes and V %d, want %d each (%d tokens of %d bytes)",
				op, len(f.K), len(f.V), want, n, s.tokBytes))
		}
	}
	if len(f.Embedding) != 0 && len(f.Embedding) != int(s.geom.EmbedDim) {
		return 0, newError(ErrInvalid, fmt.Sprintf("%s: embedding has %d floats, the store's embed_dim is %d",
			op, len(f.Embedding), s.geom.EmbedDim))
	}

	var pin runtime.Pinner
	defer pin.Unpin()
	cf := C.infs_fact{version: C.INFS_FACT_VERSION}
	if f.Segment {
		cf.flags |= C.INFS_FACT_SEGMENT
	}
	cf.n_tokens = C.uint32_t(min(len(f.Tokens), FactTokensMax+1))
	if len(f.Tokens) > 0 {
		pin.Pin(unsafe.SliceData(f.Tokens))
		cf.tokens = (*C.int32_t)(unsafe.Pointer(unsafe.SliceData(f.Tokens)))
	}
	if len(f.Embedding) > 0 {
		pin.Pin(unsafe.SliceData(f.Embedding))
		cf.embedding = (*C.float)(unsafe.Pointer(unsafe.SliceData(f.Embedding)))
	}
	if len(f.K) > 0 {
		pin.Pin(unsafe.SliceData(f.K))
		cf.k = unsafe.Pointer(unsafe.SliceData(f.K))
	}
	if len(f.V) > 0 {
		pin.Pin(unsafe.SliceData(f.V))
		cf.v = unsafe.Pointer(unsafe.SliceData(f.V))
	}
	if f.Text != "" {
		pin.Pin(unsafe.SliceData(text))
		cf.text = charp(text)
	}
	if f.Metadata != "" {
		pin.Pin(unsafe.SliceData(meta))
		cf.metadata = charp(meta)
	}
	cf.source_id = C.uint64_t(f.SourceID)
	cf.timestamp = C.int64_t(f.Timestamp)

	var id C.uint64_t
	if err := check(func() C.int { return C.infs_fact_put(&id, c, charp(cns), &cf) }); err != nil {
		return 0, err
	}
	return uint64(id), nil
}

// Get reads fact id of namespace ns into Go memory. An id of another
// namespace is ErrNotFound, exactly like an id that never existed.
func (s *Store) Get(ns string, id uint64) (*Fact, error) {
	const op = "Store.Get"
	cns, err := cstring(op, "namespace", ns)
	if err != nil {
		return nil, err
	}
	c, err := s.acquire(op)
	if err != nil {
		return nil, err
	}
	defer s.release()

	var r *C.infs_fact_record
	if err := check(func() C.int { return C.infs_fact_get(&r, c, charp(cns), C.uint64_t(id)) }); err != nil {
		return nil, err
	}
	defer C.infs_fact_record_free(r)

	n := int(r.n_tokens)
	f := &Fact{
		ID:        uint64(r.id),
		Segment:   r.flags&C.INFS_FACT_SEGMENT != 0,
		Tokens:    make([]int32, n),
		Text:      C.GoString(r.text),
		Metadata:  C.GoString(r.metadata),
		SourceID:  uint64(r.source_id),
		Timestamp: int64(r.timestamp),
	}
	copy(f.Tokens, unsafe.Slice((*int32)(unsafe.Pointer(r.tokens)), n))
	if r.embedding != nil {
		f.Embedding = make([]float32, s.geom.EmbedDim)
		copy(f.Embedding, unsafe.Slice((*float32)(unsafe.Pointer(r.embedding)), len(f.Embedding)))
	}
	f.K = C.GoBytes(r.k, C.int(n*s.tokBytes))
	f.V = C.GoBytes(r.v, C.int(n*s.tokBytes))
	return f, nil
}

// Delete deletes fact id of namespace ns, durably like a Put.
func (s *Store) Delete(ns string, id uint64) error {
	return s.nsCall("Store.Delete", ns, func(c *C.infs_store, cns *C.char) C.int {
		return C.infs_fact_delete(c, cns, C.uint64_t(id))
	})
}

// Count is the number of live records (facts and segments) of namespace ns;
// 0 for an unknown namespace.
func (s *Store) Count(ns string) (uint64, error) {
	var n C.uint64_t
	if err := s.nsCall("Store.Count", ns, func(c *C.infs_store, cns *C.char) C.int {
		return C.infs_fact_count(&n, c, cns)
	}); err != nil {
		return 0, err
	}
	return uint64(n), nil
}

// List is the ids of namespace ns in increasing order; empty for an unknown
// namespace.
func (s *Store) List(ns string) ([]uint64, error) {
	var ids *C.uint64_t
	var n C.size_t
	if err := s.nsCall("Store.List", ns, func(c *C.infs_store, cns *C.char) C.int {
		return C.infs_fact_list(&ids, &n, c, cns)
	}); err != nil {
		return nil, err
	}
	defer C.infs_free(unsafe.Pointer(ids))
	out := make([]uint64, int(n))
	copy(out, unsafe.Slice((*uint64)(unsafe.Pointer(ids)), int(n)))
	return out, nil
}

// Namespaces is the sorted names of the namespaces holding live records.
func (s *Store) Namespaces() ([]string, error) {
	const op = "Store.Namespaces"
	c, err := s.acquire(op)
	if err != nil {
		return nil, err
	}
	defer s.release()
	var names **C.char
	var n C.size_t
	if err := check(func() C.int { return C.infs_namespace_list(&names, &n, c) }); err != nil {
		return nil, err
	}
	defer C.infs_free(unsafe.Pointer(names))
	out := make([]string, int(n))
	for i, p := range unsafe.Slice(names, int(n)) {
		out[i] = C.GoString(p)
	}
	return out, nil
}

// DropNamespace deletes every record of namespace ns.
func (s *Store) DropNamespace(ns string) error {
	return s.nsCall("Store.DropNamespace", ns, func(c *C.infs_store, cns *C.char) C.int {
		return C.infs_namespace_drop(c, cns)
	})
}

// Sync forces every acknowledged write to stable storage.
func (s *Store) Sync() error {
	c, err := s.acquire("Store.Sync")
	if err != nil {
		return err
	}
	defer s.release()
	return check(func() C.int { return C.infs_store_sync(c) })
}

// Compact rewrites the file without deleted records, atomically: a crash at
// any point leaves either the old file or the new one, each complete.
func (s *Store) Compact() error {
	c, err := s.acquire("Store.Compact")
	if err != nil {
		return err
	}
	defer s.release()
	return check(func() C.int { return C.infs_store_compact(c) })
}

// Stats describes a store's contents and files.
type Stats struct {
	Facts            uint64 // live facts in all namespaces
	Segments         uint64 // live segments in all namespaces
	Namespaces       uint64 // namespaces with at least one live record
	FileBytes        uint64
	LiveBytes        uint64 // bytes of live records
	DroppedTailBytes uint64 // torn or corrupt tail dropped when opening
	DeviceBytes      uint64 // device memory held for this store
	LostRecords      uint64 // acknowledged records found missing when opening
	// The tiers of fact KV (0 without a device copy).
	HostBytes       uint64 // pinned host memory held for this store
	KVDeviceBytes   uint64 // fact KV held on the device
	KVHostBytes     uint64 // fact KV held in pinned host memory
	DeviceEvictions uint64 // namespaces whose KV left the device for lack of room
	HostEvictions   uint64 // namespaces whose KV left pinned host memory for lack of room
	Promotions      uint64 // namespaces whose KV was moved up (prefetch, injection)
}

// Stats reports the store's counts and sizes.
func (s *Store) Stats() (Stats, error) {
	c, err := s.acquire("Store.Stats")
	if err != nil {
		return Stats{}, err
	}
	defer s.release()
	cs := C.infs_store_stats{version: C.INFS_STORE_STATS_VERSION}
	if err := check(func() C.int { return C.infs_store_stats_get(&cs, c) }); err != nil {
		return Stats{}, err
	}
	return Stats{
		Facts:            uint64(cs.n_facts),
		Segments:         uint64(cs.n_segments),
		Namespaces:       uint64(cs.n_namespaces),
		FileBytes:        uint64(cs.file_bytes),
		LiveBytes:        uint64(cs.live_bytes),
		DroppedTailBytes: uint64(cs.dropped_tail_bytes),
		DeviceBytes:      uint64(cs.device_bytes),
		LostRecords:      uint64(cs.lost_records),
		HostBytes:        uint64(cs.host_bytes),
		KVDeviceBytes:    uint64(cs.kv_device_bytes),
		KVHostBytes:      uint64(cs.kv_host_bytes),
		DeviceEvictions:  uint64(cs.device_evictions),
		HostEvictions:    uint64(cs.host_evictions),
		Promotions:       uint64(cs.promotions),
	}, nil
}

// Verify re-reads the header and every record from the file and checks
// their checksums; the error (ErrCorrupt) names the first damaged record.
func (s *Store) Verify() error {
	c, err := s.acquire("Store.Verify")
	if err != nil {
		return err
	}
	defer s.release()
	return check(func() C.int { return C.infs_store_verify(c, nil, nil) })
}
