/* Launcher of the injection kernel: picks the access width and the grid. */
#include "inject.cuh"

using namespace infs;

namespace {

template <typename S, typename D> int vector_ok(const infs_k_inject_params *p)
{
	const int64_t w = inject_width<S, D>::vec;
	if (p->stride_dim != 1 || p->head_dim % w || (p->ptr_bits & 15))
		return 0;
	if (p->rotary_dim % (p->style == 0 ? 2 * w : w))
		return 0;
	return p->stride_block % w == 0 && p->stride_slot % w == 0 && p->stride_head % w == 0;
}

/* The grid of a call: blocks of layers per token. Layers per block: what
 * the stage holds (stage_layer bytes a layer; 0: not staged), then fewer
 * until the grid has a few blocks per SM; each block's index space, of
 * per_layer vectors a layer, stays within 31 bits. */
cudaError_t plan_grid(dim3 *grid, uint32_t *lpb_out, const infs_k_inject_params *p, uint64_t per_layer,
                      uint64_t stage_layer)
{
	int dev, sms;
	cudaError_t err = cudaGetDevice(&dev);
	if (err == cudaSuccess)
		err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
	if (err != cudaSuccess)
		return err;
	uint32_t lpb = stage_layer ? (uint32_t)(INFS_K_STAGE_BYTES / stage_layer) : p->n_layers;
	lpb = lpb > p->n_layers ? p->n_layers : lpb;
	uint32_t groups = div_up((uint64_t)INFS_K_INJECT_WAVES * sms, p->n_tokens);
	if (groups > div_up(p->n_layers, lpb))
		lpb = div_up(p->n_layers, groups > p->n_layers ? p->n_layers : groups);
	const uint32_t max_lpb = (uint32_t)((1ull << 31) / per_layer);
	*lpb_out = lpb > max_lpb ? max_lpb : lpb;
	*grid = dim3(p->n_tokens, div_up(p->n_layers, *lpb_out));
	return cudaSuccess;
}

template <typename S, typename D, int W, bool STAGED>
cudaError_t launch(const infs_k_inject_params *p, cudaStream_t stream)
{
	const uint64_t layer_bytes = STAGED ? 2ull * p->n_heads * p->head_dim * sizeof(typename S::bits) : 0;
	dim3 grid;
	uint32_t lpb;
	cudaError_t err = plan_grid(&grid, &lpb, p, 2ull * p->n_heads * (p->head_dim / W), layer_bytes);
	if (err != cudaSuccess)
		return err;
	inject_kernel<S, D, W, STAGED><<<grid, INFS_K_INJECT_THREADS, lpb * layer_bytes, stream>>>(*p, lpb);
	return cudaGetLastError();
}

/* 0: scalar accesses; 1: 16-byte vectors through registers; 2: 16-byte
 * vectors staged through shared memory. */
template <typename S, typename D> int path(const infs_k_inject_params *p)
{
	if (!vector_ok<S, D>(p))
		return 0;
	uint64_t layer_bytes = 2ull * p->n_heads * p->head_dim * sizeof(typename S::bits);
	return layer_bytes <= INFS_K_STAGE_BYTES ? 2 : 1;
}

/* A layer of an fp8 token in the stage: K and V codes, and their scales. */
uint64_t fp8_layer_bytes(const infs_k_inject_params *p)
{
	return 2ull * p->n_heads * (p->head_dim + sizeof(float));
}

/* fp8 sources: W dims per thread when a vector of W never straddles a
 * rotary boundary and every access is aligned (the codes by 8, the stores
 * by W elements); otherwise 1. */
template <typename D> int fp8_width(const infs_k_inject_params *p)
{
	for (int w = 8; w > 1; w /= 2) {
		const int64_t store = w * (int64_t)sizeof(typename D::bits);
		if (p->stride_dim != 1 || p->head_dim % w || p->rotary_dim % (p->style == 0 ? 2 * w : w))
			continue;
		if ((p->ptr_bits & (uintptr_t)(store - 1)) || (p->ptr_bits & (uintptr_t)(w - 1)))
			continue;
		if (p->stride_block % w == 0 && p->stride_slot % w == 0 && p->stride_head % w == 0)
			return w;
	}
	return 1;
}

/* fp8 staged: a token's rows of every layer are whole 16-byte chunks,
 * every pointer is 16-aligned and one layer fits the stage. */
template <typename D> bool fp8_staged(const infs_k_inject_params *p)
{
	return fp8_width<D>(p) == 8 && (p->n_heads * p->head_dim) % 16 == 0 && !(p->ptr_bits & 15) &&
	       fp8_layer_bytes(p) <= INFS_K_STAGE_BYTES;
}

template <typename D, int W, bool STAGED> cudaError_t launch_fp8(const infs_k_inject_params *p, cudaStream_t stream)
{
	const uint64_t layer_bytes = STAGED ? fp8_layer_bytes(p) : 0;
	dim3 grid;
	uint32_t lpb;
	cudaError_t err = plan_grid(&grid, &lpb, p, 2ull * p->n_heads * (p->head_dim / W), layer_bytes);
	if (err != cudaSuccess)
		return err;
	inject_fp8_kernel<D, W, STAGED><<<grid, INFS_K_INJECT_THREADS, lpb * layer_bytes, stream>>>(*p, lpb);
	return cudaGetLastError();
}

template <typename D> cudaError_t inject_fp8(const infs_k_inject_params *p, cudaStream_t stream)
{
	if (fp8_staged<D>(p))
		return launch_fp8<D, 8, true>(p, stream);
	switch (fp8_width<D>(p)) {
	case 8: return launch_fp8<D, 8, false>(p, stream);
	case 4: return launch_fp8<D, 4, false>(p, stream);
	case 2: return launch_fp8<D, 2, false>(p, stream);
	default: return launch_fp8<D, 1, false>(p, stream);
	}
}

} /* namespace */

extern "C" int infs_k_inject_path(const infs_k_inject_params *p)
{
	if (p->src_dtype == INFS_K_FP8_E4M3) {
		int path = 0;
		dispatch_dtype(p->dst_dtype, [&](auto d) {
			path = fp8_staged<decltype(d)>(p) ? 2 : fp8_width<decltype(d)>(p) > 1;
			return cudaSuccess;
		});
		return path;
	}
	int ok = 0;
	dispatch_dtype(p->src_dtype, [&](auto s) {
		return dispatch_dtype(p->dst_dtype, [&](auto d) {
			ok = path<decltype(s), decltype(d)>(p);
			return cudaSuccess;
		});
	});
	return ok;
}

extern "C" cudaError_t infs_k_inject(const infs_k_inject_params *p, cudaStream_t stream)
{
	if (p->n_tokens == 0)
		return cudaSuccess;
	if (p->rotary_dim / 2 > INFS_K_MAX_PAIRS || p->n_facts == 0)
		return cudaErrorInvalidValue;
	if (p->src_dtype == INFS_K_FP8_E4M3)
		return dispatch_dtype(p->dst_dtype, [&](auto d) { return inject_fp8<decltype(d)>(p, stream); });
	return dispatch_dtype(p->src_dtype, [&](auto s) {
		return dispatch_dtype(p->dst_dtype, [&](auto d) {
			using S = decltype(s);
			using D = decltype(d);
			switch (path<S, D>(p)) {
			case 2: return launch<S, D, inject_width<S, D>::vec, true>(p, stream);
			case 1: return launch<S, D, inject_width<S, D>::vec, false>(p, stream);
			default: return launch<S, D, 1, false>(p, stream);
			}
		});
	});
}
