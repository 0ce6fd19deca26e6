package inferscale

import (
	"bytes"
	"math"
	"math/rand"
	"testing"
	"unsafe"
)

// expectedKV is what injecting fact f at positions start.. must leave in a
// cache: V as stored, K rotated to each position (per layer,
// [tokens][heads][dim] bytes).
func expectedKV(t *testing.T, g Geometry, f *Fact, start uint32) (k, v [][]byte) {
	t.Helper()
	n := len(f.Tokens)
	layerBytes := n * int(g.KVHeads*g.HeadDim) * g.KVDType.Size()
	pos := make([]int32, n)
	for i := range pos {
		pos[i] = int32(start) + int32(i)
	}
	for l := 0; l < int(g.Layers); l++ {
		kl := bytes.Clone(f.K[l*layerBytes : (l+1)*layerBytes])
		if err := RopeRotate(kl, g.KVDType, uint32(n), g.KVHeads, pos, &g); err != nil {
			t.Fatal(err)
		}
		k = append(k, kl)
		v = append(v, f.V[l*layerBytes:(l+1)*layerBytes])
	}
	return k, v
}

func closeF32(a, b []byte) bool {
	x, y := BytesFloat32(a), BytesFloat32(b)
	for i := range x {
		if math.Abs(float64(x[i]-y[i])) > 1e-5*(1+math.Abs(float64(y[i]))) {
			return false
		}
	}
	return len(x) == len(y)
}

func TestInjectEveryFormat(t *testing.T) {
	g := testGeometry()
	s, _ := createStore(t, g)
	rng := rand.New(rand.NewSource(7))
	facts := []*Fact{randomFact(rng, g, 3), randomFact(rng, g, 5)}
	header := randomFact(rng, g, 2)
	header.Segment, header.Embedding = true, nil
	facts = append([]*Fact{header}, facts...)
	var ids []uint64
	for _, f := range facts {
		id, err := s.Put("u", f)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	const blockSize, blocks, start = 4, 6, 3
	table := []int32{5, 2, 0, 4} // positions 3..12 use table[0..3]
	rowBytes := int(g.KVHeads*g.HeadDim) * 4

	for _, format := range []CacheFormat{FormatVLLM, FormatNHD, FormatHND, FormatPacked} {
		t.Run(format.String(), func(t *testing.T) {
			cache, err := NewHostCache(format, F32, g.Layers, g.KVHeads, g.HeadDim, blocks, blockSize)
			if err != nil {
				t.Fatal(err)
			}
			defer cache.Close()
			next, err := s.Inject("u", ids, start, table, cache.Layout(), nil)
			if err != nil {
				t.Fatal(err)
			}
			if want := uint32(start + 2 + 3 + 5); next != want {
				t.Fatalf("next position %d, want %d", next, want)
			}
			written := map[[2]int]bool{}
			pos := uint32(start)
			for _, f := range facts {
				wk, wv := expectedKV(t, g, f, pos)
				for i := range f.Tokens {
					p := int(pos) + i
					b, slot := int(table[p/blockSize]), p%blockSize
					written[[2]int{b, slot}] = true
					for l := 0; l < int(g.Layers); l++ {
						for h := 0; h < int(g.KVHeads); h++ {
							off := i*rowBytes + h*int(g.HeadDim)*4
							want := wk[l][off : off+int(g.HeadDim)*4]
							if !closeF32(cache.K(l, b, slot, h), want) {
								t.Fatalf("K at position %d layer %d head %d: %v, want %v", p, l, h,
									BytesFloat32(cache.K(l, b, slot, h)), BytesFloat32(want))
							}
							if !bytes.Equal(cache.V(l, b, slot, h), wv[l][off:off+int(g.HeadDim)*4]) {
								t.Fatalf("V at position %d layer %d head %d differs", p, l, h)
							}
						}
					}
				}
				pos += uint32(len(f.Tokens))
			}
			// Nothing else was written.
			for b := 0; b < blocks; b++ {
				for slot := 0; slot < blockSize; slot++ {
					if written[[2]int{b, slot}] {
						continue
					}
					for l := 0; l < int(g.Layers); l++ {
						for h := 0; h < int(g.KVHeads); h++ {
							if !allZero(cache.K(l, b, slot, h)) || !allZero(cache.V(l, b, slot, h)) {
								t.Fatalf("block %d slot %d was written", b, slot)
							}
						}
					}
				}
			}
		})
	}
}

func allZero(b []byte) bool {
	for _, x := range b {
		if x != 0 {
			return false
		}
	}
	return true
}

// halfToFloat decodes an IEEE half.
func halfToFloat(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h & 0x3ff)
	switch {
	case exp == 0 && mant == 0:
		return math.Float32frombits(sign)
	case exp == 0:
		v := float32(math.Ldexp(float64(mant), -24))
		if sign != 0 {
			v = -v
		}
		return v
	case exp == 31:
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	}
	return math.Float32frombits(sign | (exp+112)<<23 | mant<<13)
}

// A cache in Go memory, of another dtype than the store: pinned for the
// call, and converted.
func TestInjectGoMemoryF16(t *testing.T) {
	g := testGeometry()
	s, _ := createStore(t, g)
	f := randomFact(rand.New(rand.NewSource(8)), g, 3)
	id, err := s.Put("u", f)
	if err != nil {
		t.Fatal(err)
	}
	const blockSize, blocks = 2, 3
	tensor := blockSize * int(g.KVHeads*g.HeadDim)
	// FlashInfer NHD in Go slices of f16 bits, one per layer.
	layers := make([][]uint16, g.Layers)
	l := &KVLayout{DType: F16, Layers: g.Layers, KVHeads: g.KVHeads, HeadDim: g.HeadDim, Blocks: blocks,
		BlockSize: blockSize, StrideBlock: int64(2 * tensor), StrideSlot: int64(g.KVHeads * g.HeadDim),
		StrideHead: int64(g.HeadDim), StrideDim: 1}
	for i := range layers {
		layers[i] = make([]uint16, blocks*2*tensor)
		l.K = append(l.K, unsafe.Pointer(&layers[i][0]))
		l.V = append(l.V, unsafe.Pointer(&layers[i][tensor]))
	}
	table := []int32{2, 0}
	next, err := s.Inject("u", []uint64{id}, 0, table, l, nil)
	if err != nil || next != 3 {
		t.Fatalf("Inject = %d, %v", next, err)
	}
	_, wv := expectedKV(t, g, f, 0)
	for layer := range layers {
		want := BytesFloat32(wv[layer])
		for tok := 0; tok < 3; tok++ {
			b, slot := int(table[tok/blockSize]), tok%blockSize
			for h := 0; h < int(g.KVHeads); h++ {
				for d := 0; d < int(g.HeadDim); d++ {
					got := halfToFloat(layers[layer][b*2*tensor+tensor+slot*int(g.KVHeads*g.HeadDim)+h*int(g.HeadDim)+d])
					w := want[(tok*int(g.KVHeads)+h)*int(g.HeadDim)+d]
					if math.Abs(float64(got-w)) > 1e-3*(1+math.Abs(float64(w))) {
						t.Fatalf("V[%d] token %d head %d dim %d = %v, want %v", layer, tok, h, d, got, w)
					}
				}
			}
		}
	}
}

func TestInjectBadInputs(t *testing.T) {
	g := testGeometry()
	s, _ := createStore(t, g)
	rng := rand.New(rand.NewSource(9))
	id, err := s.Put("u", randomFact(rng, g, 3))
	if err != nil {
		t.Fatal(err)
	}
	otherID, err := s.Put("other", randomFact(rng, g, 3))
	if err != nil {
		t.Fatal(err)
	}
	cache, err := NewHostCache(FormatVLLM, F32, g.Layers, g.KVHeads, g.HeadDim, 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer cache.Close()
	inject := func(ids []uint64, start uint32, table []int32, l *KVLayout) error {
		_, err := s.Inject("u", ids, start, table, l, nil)
		return err
	}
	lay := cache.Layout()
	wantCode(t, inject([]uint64{id + 1000}, 0, []int32{0, 1}, lay), ErrNotFound)
	wantCode(t, inject([]uint64{otherID}, 0, []int32{0, 1}, lay), ErrNotFound)
	wantCode(t, inject([]uint64{id}, 0, []int32{0}, lay), ErrRange)    // table too short
	wantCode(t, inject([]uint64{id}, 0, []int32{0, 2}, lay), ErrRange) // block 2 of 2
	wantCode(t, inject([]uint64{id}, 0, []int32{0, -1}, lay), ErrRange)
	wantCode(t, inject([]uint64{id}, 0, []int32{0, 1}, nil), ErrInvalid)
	bad := *lay
	bad.KVHeads = 3
	wantCode(t, inject([]uint64{id}, 0, []int32{0, 1}, &bad), ErrMismatch)
	bad = *lay
	bad.V = bad.V[:1]
	wantCode(t, inject([]uint64{id}, 0, []int32{0, 1}, &bad), ErrInvalid)
	if !allZero(cache.Bytes()) {
		t.Fatal("a refused injection wrote into the cache")
	}

	closed, err := NewHostCache(FormatNHD, F32, g.Layers, g.KVHeads, g.HeadDim, 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	closedLayout := closed.Layout()
	closed.Close()
	closed.Close()
	wantCode(t, inject([]uint64{id}, 0, []int32{0, 1}, closedLayout), ErrInvalid)

	_, err = NewHostCache(FormatNHD, DType(9), 1, 1, 1, 1, 1)
	wantCode(t, err, ErrInvalid)
	_, err = NewHostCache(CacheFormat(9), F32, 1, 1, 1, 1, 1)
	wantCode(t, err, ErrInvalid)
	_, err = NewHostCache(FormatNHD, F32, 1<<20, 1<<10, 1<<10, 1<<10, 1<<10)
	wantCode(t, err, ErrRange)

	x := make([]byte, 3*int(g.KVHeads*g.HeadDim)*4)
	wantCode(t, RopeRotate(x, F32, 3, g.KVHeads, []int32{0, 1}, &g), ErrInvalid)
	wantCode(t, RopeRotate(x[:8], F32, 3, g.KVHeads, []int32{0, 1, 2}, &g), ErrInvalid)
	wantCode(t, RopeRotate(x, F32, 3, g.KVHeads, []int32{0, 1, 2}, nil), ErrInvalid)
}
