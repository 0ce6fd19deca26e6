/* Causal grouped-query attention over a paged cache and the new tokens,
 * flash style: a block of 4 warps takes 64 query rows of one sequence and
 * one KV head (the heads sharing that KV head, token after token, so that
 * each K/V tile read serves all of them), walks the visible keys in tiles
 * of 64 staged in shared memory as bf16, and keeps the softmax online in
 * registers: S = Q K^T and O += P V on tensor cores (mma.sync m16n8k16,
 * bf16 operands, f32 accumulation). Tiles no query of the block can see
 * (causal, sliding window) are skipped. When the grid would leave the
 * device idle (decode, short questions) the keys are split among several
 * blocks and a second kernel merges their partial results. A call of few
 * rows a sequence (decoding, a question) takes blocks of 16 query rows
 * instead: every warp holds them all and takes 16 keys of each tile, then
 * the warps merge their softmax states: a quarter of the serial work a
 * warp would do alone, and four times the blocks.
 *
 * Fragment layouts are those the PTX ISA gives for m16n8k16 (g = lane / 4,
 * t = lane % 4): A holds rows g and g + 8, columns 2t, 2t + 1 and 2t + 8,
 * 2t + 9; B holds rows (k) 2t, 2t + 1 and 2t + 8, 2t + 9 of column (n) g;
 * C holds rows g and g + 8, columns 2t and 2t + 1. */
#include <math.h>

#include <type_traits>

#include "model_common.cuh"

using namespace infs;

namespace {

constexpr int ROWS = INFS_K_ATTN_ROWS; /* query rows per block, 16 per warp */
constexpr int KEYS = 64;               /* keys per tile */
constexpr int THREADS = 128;
constexpr float LOG2E = 1.4426950408889634f;

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi)
{
	const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
	return *reinterpret_cast<const uint32_t *>(&v);
}

__device__ __forceinline__ void mma(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1)
{
	asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
	             "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
	             : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
	             : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* The keys a block sees: the cache positions [c_lo, c_hi) of its sequence,
 * then its new tokens [n_lo, n_hi) (indices within the sequence), each part
 * cut in tiles of KEYS. */
struct key_range {
	uint32_t c_lo, c_hi, n_lo, n_hi, c_tiles, tiles;
};

__device__ key_range keys_of(const infs_k_attn_params &p, const seq_span &sp, int64_t qmin, int64_t qmax)
{
	key_range r;
	const int64_t win_lo = p.sliding_window ? qmin - (int64_t)p.sliding_window + 1 : 0;
	const int64_t len = sp.end - sp.start;
	int64_t c_lo = win_lo > 0 ? win_lo : 0, c_hi = qmax + 1 < (int64_t)sp.n_past ? qmax + 1 : sp.n_past;
	int64_t n_lo = 0, n_hi = len;
	if (!p.seqs.positions) { /* new token j sits at n_past + j */
		n_lo = win_lo - (int64_t)sp.n_past > 0 ? win_lo - sp.n_past : 0;
		n_hi = qmax + 1 - (int64_t)sp.n_past < len ? qmax + 1 - (int64_t)sp.n_past : len;
	}
	if (p.in_place) /* the new tokens are in the cache already */
		n_lo = n_hi = 0;
	if (c_hi < c_lo)
		c_hi = c_lo;
	if (n_hi < n_lo)
		n_hi = n_lo;
	r.c_lo = (uint32_t)c_lo, r.c_hi = (uint32_t)c_hi, r.n_lo = (uint32_t)n_lo, r.n_hi = (uint32_t)n_hi;
	r.c_tiles = div_up_dev(r.c_hi - r.c_lo, KEYS);
	r.tiles = r.c_tiles + div_up_dev(r.n_hi - r.n_lo, KEYS);
	return r;
}

__device__ __forceinline__ uint32_t smem_addr(const void *p)
{
	return (uint32_t)__cvta_generic_to_shared(p);
}

/* 16 bytes from global to shared memory without passing through registers:
 * the copy runs while the block computes on the other buffer. */
__device__ __forceinline__ void copy16_async(void *dst, const void *src)
{
	asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_addr(dst)), "l"(src));
}

__device__ __forceinline__ void copy_commit()
{
	asm volatile("cp.async.commit_group;\n" ::);
}

template <int N> __device__ __forceinline__ void copy_wait()
{
	asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

/* Four 8x8 tiles of bf16 from shared memory, lane l giving the address of
 * row l % 8 of tile l / 8 (trans: each lane gets a column pair). */
__device__ __forceinline__ void ldsm4(uint32_t r[4], const void *p)
{
	asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
	             : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
	             : "r"(smem_addr(p)));
}

__device__ __forceinline__ void ldsm2(uint32_t r[2], const void *p)
{
	asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
	             : "=r"(r[0]), "=r"(r[1])
	             : "r"(smem_addr(p)));
}

__device__ __forceinline__ void ldsm4_trans(uint32_t r[4], const void *p)
{
	asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
	             : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
	             : "r"(smem_addr(p)));
}

/* Starts staging keys [j0, j0 + count) of one part (cache or new tokens)
 * as bf16 rows of ROW elements in sk and sv, their positions in kpos (-1:
 * none; their rows zero). bf16 rows of 16-byte aligned chunks (the new
 * tokens, a vLLM-layout bf16 cache) are copied asynchronously; other
 * caches are converted through registers. Returns nonzero when a cache
 * position has no valid block. */
template <typename D, int HD, int ROW>
__device__ int load_tile(const infs_k_attn_params &p, const seq_span &sp, uint32_t g, bool cached, uint32_t j0,
                         uint32_t count, uint16_t *sk, uint16_t *sv, int32_t *kpos)
{
	using bits = typename D::bits;
	constexpr int CHUNKS = HD / 8; /* 8 elements, 16 bytes of bf16 */
	int bad = 0;
#pragma unroll
	for (int i = 0; i < KEYS * CHUNKS / THREADS; i++) {
		const int idx = threadIdx.x + i * THREADS, c = idx / CHUNKS, e0 = idx % CHUNKS * 8;
		uint16_t *dk = sk + c * ROW + e0, *dv = sv + c * ROW + e0;
		int32_t pos = -1;
		bool done = false;
		if ((uint32_t)c < count) {
			const uint32_t j = j0 + c;
			if (cached) {
				const int64_t off = cache_offset(p.cache, sp.index, j, g);
				if (off < 0) {
					bad = 1;
				} else {
					const bits *ck = (const bits *)p.cache.k + off + e0, *cv = (const bits *)p.cache.v + off + e0;
					const int64_t sd = p.cache.stride_dim;
					if (std::is_same<D, bf16>::value && sd == 1 && (((uintptr_t)ck | (uintptr_t)cv) & 15) == 0) {
						copy16_async(dk, ck);
						copy16_async(dv, cv);
					} else {
						uint32_t w[4], x[4];
#pragma unroll
						for (int e = 0; e < 8; e += 2) {
							w[e / 2] = pack_bf16(to_float(D{}, ck[e * sd]), to_float(D{}, ck[(e + 1) * sd]));
							x[e / 2] = pack_bf16(to_float(D{}, cv[e * sd]), to_float(D{}, cv[(e + 1) * sd]));
						}
						*reinterpret_cast<uint4 *>(dk) = make_uint4(w[0], w[1], w[2], w[3]);
						*reinterpret_cast<uint4 *>(dv) = make_uint4(x[0], x[1], x[2], x[3]);
					}
					pos = (int32_t)j;
					done = true;
				}
			} else {
				const uint32_t t = sp.start + j;
				const size_t row = ((size_t)t * p.n_kv_heads + g) * HD + e0;
				copy16_async(dk, p.k + row);
				copy16_async(dv, p.v + row);
				if (e0 == 0)
					pos = (int32_t)token_pos(p.seqs, sp, t);
				done = true;
			}
		}
		if (!done) { /* zero keys are masked and add nothing */
			*reinterpret_cast<uint4 *>(dk) = make_uint4(0, 0, 0, 0);
			*reinterpret_cast<uint4 *>(dv) = make_uint4(0, 0, 0, 0);
		}
		if (e0 == 0)
			kpos[c] = pos;
	}
	return bad;
}

/* WK (a step of few query rows: decoding): the block's query rows are at
 * most 16, which every warp holds, and the warps split each tile's keys,
 * 16 each, then merge their softmax states in shared memory; otherwise
 * each warp takes 16 of the block's 64 rows over every key. */
template <typename D, int HD, bool WK>
__global__ void __launch_bounds__(THREADS, 3) flash_kernel(const infs_k_attn_params p)
{
	constexpr int ROW = HD + 8; /* padding: the fragment loads hit 32 banks */
	constexpr int KS = HD / 16, DT = HD / 8, TILE = KEYS * ROW;
	constexpr int NT = WK ? KEYS / 8 / 4 : KEYS / 8; /* this warp's 8-key columns of a tile */
	extern __shared__ __align__(16) uint16_t smem[]; /* K and V of two tiles: one loads while one is used */
	__shared__ int32_t kpos[2][KEYS];
	__shared__ int s_qmin, s_qmax;

	const uint32_t lane = threadIdx.x % 32, warp = threadIdx.x / 32, gq = lane / 4, tq = lane % 4;
	const uint32_t kvh = blockIdx.y, group = p.n_heads / p.n_kv_heads, per_tile = (WK ? 16 : ROWS) / group;
	const uint32_t key0 = WK ? warp * NT * 8 : 0; /* this warp's first key of a tile */

	/* This block's sequence and its tile of tokens: blockIdx.x counts the
	 * tiles of every sequence in turn, from the end, so that the tiles with
	 * the most keys start first and the last wave is short; blocks past
	 * the last tile leave. */
	uint32_t tile = gridDim.x - 1 - blockIdx.x, s = 0;
	seq_span sp;
	for (;; s++) {
		if (s >= p.seqs.n_seqs)
			return;
		sp = seq_get(p.seqs, s);
		const uint32_t tiles = div_up_dev(sp.end - sp.start, per_tile);
		if (tile < tiles)
			break;
		tile -= tiles;
	}
	const uint32_t tok0 = sp.start + tile * per_tile;
	/* This sequence's calibration of its facts' keys, if any. */
	uint32_t c_lo = 0, c_hi = 0;
	float c_it = 1.0f, c_l2s = 0.0f;
	if (p.calib) {
		const int32_t *c = p.calib + 4 * (size_t)sp.index;
		c_lo = (uint32_t)c[0], c_hi = (uint32_t)c[1], c_it = __int_as_float(c[2]), c_l2s = __int_as_float(c[3]);
	}
	const bool calib = c_hi > c_lo;
	const uint32_t ntok = sp.end - tok0 < per_tile ? sp.end - tok0 : per_tile;

	if (threadIdx.x == 0)
		s_qmin = INT32_MAX, s_qmax = -1;
	__syncthreads();

	/* The thread's two rows (g and g + 8 of its warp's 16), their query
	 * fragments, positions and output places. */
	int bad = 0;
	uint32_t qa[KS][4];
	int64_t qpos[2];
	size_t orow[2];
	bool live[2];
#pragma unroll
	for (int r = 0; r < 2; r++) {
		const uint32_t row = (WK ? 0 : warp * 16) + gq + 8 * r, tl = row / group;
		const uint32_t tok = tok0 + tl, head = kvh * group + row % group;
		live[r] = tl < ntok;
		qpos[r] = live[r] ? token_pos(p.seqs, sp, tok) : -1;
		orow[r] = ((size_t)tok * p.n_heads + head) * HD;
		if (live[r]) {
			if (qpos[r] < 0 || qpos[r] > INT32_MAX || (p.write_cache && cache_offset(p.cache, s, qpos[r], kvh) < 0))
				bad = 1; /* its own K and V are not in the cache */
			else {
				atomicMin(&s_qmin, (int)qpos[r]);
				atomicMax(&s_qmax, (int)qpos[r]);
			}
		}
	}
#pragma unroll
	for (int ks = 0; ks < KS; ks++)
#pragma unroll
		for (int h = 0; h < 2; h++) /* columns 2t, 2t + 1, then 2t + 8, 2t + 9 */
#pragma unroll
			for (int r = 0; r < 2; r++) {
				float2 v = make_float2(0.0f, 0.0f);
				if (live[r])
					v = *reinterpret_cast<const float2 *>(p.q + orow[r] + ks * 16 + h * 8 + tq * 2);
				qa[ks][2 * h + r] = pack_bf16(v.x, v.y);
			}
	__syncthreads();
	const int64_t qmin = s_qmin, qmax = s_qmax;
	const key_range kr = keys_of(p, sp, qmin, qmax);
	const uint32_t per_split = div_up_dev(kr.tiles, gridDim.z);
	const uint32_t t_begin = blockIdx.z * per_split;
	const uint32_t t_end = t_begin + per_split < kr.tiles ? t_begin + per_split : kr.tiles;

	const float scale = p.scale * LOG2E; /* exp2 of scores in log2 units */
	float m[2] = { -INFINITY, -INFINITY }, l[2] = { 0.0f, 0.0f };
	float o[DT][4];
#pragma unroll
	for (int d = 0; d < DT; d++)
		o[d][0] = o[d][1] = o[d][2] = o[d][3] = 0.0f;

	/* Tile ti's first key, the end of its part, whether it is cached. */
	auto tile_at = [&](uint32_t ti, uint32_t &j0, uint32_t &count) {
		const bool cached = ti < kr.c_tiles;
		j0 = cached ? kr.c_lo + ti * KEYS : kr.n_lo + (ti - kr.c_tiles) * KEYS;
		const uint32_t hi = cached ? kr.c_hi : kr.n_hi;
		count = hi - j0 < (uint32_t)KEYS ? hi - j0 : KEYS;
		return cached;
	};
	if (t_begin < t_end) {
		uint32_t j0, count;
		const bool cached = tile_at(t_begin, j0, count);
		bad |= load_tile<D, HD, ROW>(p, sp, kvh, cached, j0, count, smem, smem + TILE, kpos[0]);
	}
	copy_commit();
	for (uint32_t ti = t_begin; ti < t_end; ti++) {
		const int buf = (ti - t_begin) & 1;
		if (ti + 1 < t_end) {
			uint32_t j1, c1;
			const bool cached1 = tile_at(ti + 1, j1, c1);
			uint16_t *nb = smem + (buf ^ 1) * 2 * TILE;
			bad |= load_tile<D, HD, ROW>(p, sp, kvh, cached1, j1, c1, nb, nb + TILE, kpos[buf ^ 1]);
			copy_commit();
			copy_wait<1>(); /* this tile's copies are done, the next one's may run */
		} else {
			copy_wait<0>();
		}
		__syncthreads();
		const uint16_t *sk = smem + buf * 2 * TILE, *sv = sk + TILE;
		const int32_t *kp = kpos[buf];
		uint32_t j0, count;
		const bool cached = tile_at(ti, j0, count);
		/* A tile every row sees whole needs no mask: full, its positions
		 * (implicit) all at or below the first row's, within the window. */
		const int64_t pos_lo = cached ? (int64_t)j0 : (int64_t)sp.n_past + j0;
		const bool unmasked = !calib && !p.seqs.positions && count == (uint32_t)KEYS && pos_lo + KEYS - 1 <= qmin &&
		                      (!p.sliding_window || qmax - pos_lo < (int64_t)p.sliding_window);

		float sc[NT][4];
#pragma unroll
		for (int n = 0; n < NT; n++) {
			sc[n][0] = sc[n][1] = sc[n][2] = sc[n][3] = 0.0f;
			/* lanes 8i..8i+7 address rows n*8.. of columns 8i.. of each pair of k-steps */
			const uint16_t *kr0 = sk + (key0 + n * 8 + (lane & 7)) * ROW + (lane >> 3) * 8;
#pragma unroll
			for (int ks = 0; ks + 1 < KS; ks += 2) {
				uint32_t b[4];
				ldsm4(b, kr0 + ks * 16);
				mma(sc[n], qa[ks], b[0], b[1]);
				mma(sc[n], qa[ks + 1], b[2], b[3]);
			}
			if (KS % 2) {
				uint32_t b[2];
				ldsm2(b, kr0 + (KS - 1) * 16);
				mma(sc[n], qa[KS - 1], b[0], b[1]);
			}
		}
		float mx[2] = { -INFINITY, -INFINITY };
#pragma unroll
		for (int n = 0; n < NT; n++)
#pragma unroll
			for (int e = 0; e < 4; e++) {
				const int r = e / 2;
				bool seen = true;
				int32_t k = 0;
				if (!unmasked) {
					k = kp[key0 + n * 8 + tq * 2 + e % 2];
					seen = k >= 0 && k <= qpos[r] && (!p.sliding_window || qpos[r] - k < (int64_t)p.sliding_window);
				}
				float v = sc[n][e] * scale;
				if (calib && seen && qpos[r] >= (int64_t)c_hi && (uint32_t)k >= c_lo && (uint32_t)k < c_hi)
					v = fmaf(v, c_it, c_l2s);
				sc[n][e] = seen ? v : -INFINITY;
				mx[r] = fmaxf(mx[r], sc[n][e]);
			}
		float corr[2], base[2];
#pragma unroll
		for (int r = 0; r < 2; r++) {
			mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
			mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
			const float m_new = fmaxf(m[r], mx[r]);
			base[r] = m_new == -INFINITY ? 0.0f : m_new; /* nothing seen yet: every p is 0 */
			corr[r] = exp2f(m[r] - base[r]);
			m[r] = m_new;
			l[r] *= corr[r];
		}
#pragma unroll
		for (int d = 0; d < DT; d++) {
			o[d][0] *= corr[0], o[d][1] *= corr[0];
			o[d][2] *= corr[1], o[d][3] *= corr[1];
		}
#pragma unroll
		for (int n = 0; n < NT; n++)
#pragma unroll
			for (int e = 0; e < 4; e++) {
				sc[n][e] = exp2f(sc[n][e] - base[e / 2]);
				l[e / 2] += sc[n][e];
			}
		/* O += P V: the C fragments of key columns 16c..16c+15 are the A
		 * fragment of P for that k-step; V's B fragments come transposed,
		 * lanes 8i..8i+7 addressing keys 16c + 8 (i % 2).. of columns
		 * 8 (d + i / 2).. */
#pragma unroll
		for (int c = 0; c < NT / 2; c++) {
			const uint32_t pa[4] = { pack_bf16(sc[2 * c][0], sc[2 * c][1]), pack_bf16(sc[2 * c][2], sc[2 * c][3]),
				                 pack_bf16(sc[2 * c + 1][0], sc[2 * c + 1][1]),
				                 pack_bf16(sc[2 * c + 1][2], sc[2 * c + 1][3]) };
			const uint16_t *v0 = sv + (key0 + c * 16 + (lane & 7) + (lane >> 3 & 1) * 8) * ROW + (lane >> 4) * 8;
#pragma unroll
			for (int d = 0; d < DT; d += 2) {
				uint32_t b[4];
				ldsm4_trans(b, v0 + d * 8);
				mma(o[d], pa, b[0], b[1]);
				mma(o[d + 1], pa, b[2], b[3]);
			}
		}
		__syncthreads(); /* this buffer is loaded again two tiles on */
	}
	#pragma unroll
	for (int r = 0; r < 2; r++) {
		l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
		l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
	}
	if (WK) { /* warp 0 takes the others' states over the same rows */
		float *so = reinterpret_cast<float *>(smem), *sml = so + 4 * DT * 32 * 4;
		__syncthreads(); /* the tiles' memory is free */
#pragma unroll
		for (int d = 0; d < DT; d++)
			*reinterpret_cast<float4 *>(so + ((warp * DT + d) * 32 + lane) * 4) =
				make_float4(o[d][0], o[d][1], o[d][2], o[d][3]);
		*reinterpret_cast<float4 *>(sml + (warp * 32 + lane) * 4) = make_float4(m[0], m[1], l[0], l[1]);
		__syncthreads();
		if (warp == 0) {
			float a[4][2];
#pragma unroll
			for (int r = 0; r < 2; r++) {
				float mm = -INFINITY;
#pragma unroll
				for (int w = 0; w < 4; w++)
					mm = fmaxf(mm, sml[(w * 32 + lane) * 4 + r]);
				l[r] = 0.0f;
#pragma unroll
				for (int w = 0; w < 4; w++) {
					const float mw = sml[(w * 32 + lane) * 4 + r];
					a[w][r] = mw == -INFINITY ? 0.0f : exp2f(mw - mm);
					l[r] += a[w][r] * sml[(w * 32 + lane) * 4 + 2 + r];
				}
				m[r] = mm;
			}
#pragma unroll
			for (int d = 0; d < DT; d++)
#pragma unroll
				for (int e = 0; e < 4; e++) {
					float acc = 0.0f;
#pragma unroll
					for (int w = 0; w < 4; w++)
						acc += a[w][e / 2] * so[((w * DT + d) * 32 + lane) * 4 + e];
					o[d][e] = acc;
				}
		}
	}
	bad = __syncthreads_or(bad);
	#pragma unroll
	for (int r = 0; r < 2; r++) {
		if (!live[r] || (WK && warp))
			continue;
		if (gridDim.z == 1) {
			const float inv = bad ? NAN : 1.0f / l[r]; /* l is 0 only when nothing was visible: NaN */
			#pragma unroll
			for (int d = 0; d < DT; d++)
				*reinterpret_cast<uint32_t *>(p.out + orow[r] + d * 8 + tq * 2) =
					pack_bf16(o[d][2 * r] * inv, o[d][2 * r + 1] * inv);
		} else {
			const size_t part = (size_t)blockIdx.z * p.seqs.n_tokens * p.n_heads * HD + orow[r];
			#pragma unroll
			for (int d = 0; d < DT; d++)
				*reinterpret_cast<float2 *>(p.part_o + part + d * 8 + tq * 2) =
					bad ? make_float2(NAN, NAN) : make_float2(o[d][2 * r], o[d][2 * r + 1]);
			if (tq == 0)
				*reinterpret_cast<float2 *>(p.part_ml + part / HD * 2) = make_float2(m[r], l[r]);
		}
	}
}

/* A warp per (token, head) row: lane z holds split z's softmax state, each split weighed by exp2(m_z - m_max); the lanes then
 * take 4 dims each and read every split's partial row in 16-byte loads,
 * several in flight. */
constexpr int MERGE_WARPS = 4;
__global__ void __launch_bounds__(MERGE_WARPS * 32) merge_kernel(const infs_k_attn_params p)
{
	const size_t rows = (size_t)p.seqs.n_tokens * p.n_heads;
	const size_t row = (size_t)blockIdx.x * MERGE_WARPS + threadIdx.x / 32;
	const uint32_t lane = threadIdx.x % 32, hd = p.head_dim, S = p.n_splits;
	if (row >= rows)
		return;
	const float2 ml = lane < S ? *reinterpret_cast<const float2 *>(p.part_ml + ((size_t)lane * rows + row) * 2)
	                           : make_float2(-INFINITY, 0.0f);
	float mmax = ml.x;
#pragma unroll
	for (int o = 16; o; o /= 2)
		mmax = fmaxf(mmax, __shfl_xor_sync(0xffffffffu, mmax, o));
	const float w = ml.x == -INFINITY ? 0.0f : exp2f(ml.x - mmax);
	const float sum = warp_sum(ml.y * w); /* 0: NaN below */
	for (uint32_t e = lane * 4; e < hd; e += 128) {
		float acc[4] = { 0.0f, 0.0f, 0.0f, 0.0f };
#pragma unroll 4
		for (uint32_t z = 0; z < S; z++) {
			const float wz = __shfl_sync(0xffffffffu, w, z), mz = __shfl_sync(0xffffffffu, ml.x, z);
			const float4 o = *reinterpret_cast<const float4 *>(p.part_o + ((size_t)z * rows + row) * hd + e);
			const float oz[4] = { o.x, o.y, o.z, o.w };
#pragma unroll
			for (int i = 0; i < 4; i++) /* a split that saw nothing adds 0, or its NaN */
				acc[i] += mz == -INFINITY ? (isnan(oz[i]) ? oz[i] : 0.0f) : oz[i] * wz;
		}
		*reinterpret_cast<uint2 *>(p.out + row * hd + e) =
			make_uint2(pack_bf16(acc[0] / sum, acc[1] / sum), pack_bf16(acc[2] / sum, acc[3] / sum));
	}
}

template <typename D, int HD, bool WK> cudaError_t launch_wk(const infs_k_attn_params &p, cudaStream_t stream)
{
	const uint32_t per_tile = (WK ? 16 : ROWS) / (p.n_heads / p.n_kv_heads);
	const uint32_t tiles = div_up(p.seqs.n_tokens, per_tile) + (p.seqs.starts ? p.seqs.n_seqs : 0);
	const size_t smem = 2 * 2 * KEYS * (HD + 8) * sizeof(uint16_t);
	/* Above 48 KiB a kernel must ask, and three blocks per multiprocessor
	 * need most of its memory as shared memory; asking twice is harmless. */
	static bool sized;
	cudaError_t err = cudaSuccess;
	if (!sized && smem > 48 * 1024)
		err = cudaFuncSetAttribute(flash_kernel<D, HD, WK>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
	if (!sized && err == cudaSuccess)
		err = cudaFuncSetAttribute(flash_kernel<D, HD, WK>, cudaFuncAttributePreferredSharedMemoryCarveout,
		                           cudaSharedmemCarveoutMaxShared);
	sized = err == cudaSuccess;
	if (err != cudaSuccess)
		return err;
	flash_kernel<D, HD, WK><<<dim3(tiles, p.n_kv_heads, p.n_splits), THREADS, smem, stream>>>(p);
	err = cudaGetLastError();
	if (err == cudaSuccess && p.n_splits > 1) {
		merge_kernel<<<div_up(p.seqs.n_tokens * p.n_heads, MERGE_WARPS), MERGE_WARPS * 32, 0, stream>>>(p);
		err = cudaGetLastError();
	}
	return err;
}

template <typename D, int HD> cudaError_t launch(const infs_k_attn_params &p, cudaStream_t stream)
{
	const uint32_t rows = p.block_rows ? p.block_rows
	                                   : infs_k_attn_block_rows(p.seqs.n_tokens, p.seqs.starts ? p.seqs.n_seqs : 0,
	                                                            p.n_heads / p.n_kv_heads, UINT64_MAX);
	return rows == INFS_K_ATTN_FEW_ROWS ? launch_wk<D, HD, true>(p, stream) : launch_wk<D, HD, false>(p, stream);
}

template <typename D> cudaError_t launch_hd(const infs_k_attn_params &p, cudaStream_t stream)
{
	switch (p.head_dim) {
	case 16: return launch<D, 16>(p, stream);
	case 32: return launch<D, 32>(p, stream);
	case 48: return launch<D, 48>(p, stream);
	case 64: return launch<D, 64>(p, stream);
	case 80: return launch<D, 80>(p, stream);
	case 96: return launch<D, 96>(p, stream);
	case 112: return launch<D, 112>(p, stream);
	case 128: return launch<D, 128>(p, stream);
	default: return cudaErrorInvalidValue;
	}
}

} /* namespace */

extern "C" cudaError_t infs_k_attention(const infs_k_attn_params *p, cudaStream_t stream)
{
	if (!INFS_K_ATTN_HEAD_DIM_OK(p->head_dim) || p->n_kv_heads == 0 || p->n_heads % p->n_kv_heads ||
	    p->n_heads / p->n_kv_heads > ROWS || p->n_splits == 0 || p->n_splits > INFS_K_ATTN_MAX_SPLITS ||
	    p->seqs.n_seqs == 0 ||
	    (p->block_rows && p->block_rows != INFS_K_ATTN_ROWS &&
	     (p->block_rows != INFS_K_ATTN_FEW_ROWS || p->n_heads / p->n_kv_heads > INFS_K_ATTN_FEW_ROWS)) ||
	    (p->n_splits > 1 && (!p->part_o || !p->part_ml)))
		return cudaErrorInvalidValue;
	if (p->seqs.n_tokens == 0)
		return cudaSuccess;
	return dispatch_dtype(p->cache.dtype, [&](auto d) { return launch_hd<decltype(d)>(*p, stream); });
}
