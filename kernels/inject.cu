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

template <typename S, typename D, int W, bool STAGED>
cudaError_t launch(const infs_k_inject_params *p, cudaStream_t stream)
{
	int dev, sms;
	cudaError_t err = cudaGetDevice(&dev);
	if (err == cudaSuccess)
		err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
	if (err != cudaSuccess)
		return err;
	/* Layers per block: what the stage holds, then fewer until the grid has
	 * a few blocks per SM; each block's index space stays within 31 bits. */
	const uint64_t per_layer = 2ull * p->n_heads * (p->head_dim / W);
	const uint64_t layer_bytes = 2ull * p->n_heads * p->head_dim * sizeof(typename S::bits);
	uint32_t lpb = STAGED ? (uint32_t)(INFS_K_STAGE_BYTES / layer_bytes) : p->n_layers;
	lpb = lpb > p->n_layers ? p->n_layers : lpb;
	uint32_t groups = div_up((uint64_t)INFS_K_INJECT_WAVES * sms, p->n_tokens);
	if (groups > div_up(p->n_layers, lpb))
		lpb = div_up(p->n_layers, groups > p->n_layers ? p->n_layers : groups);
	const uint32_t max_lpb = (uint32_t)((1ull << 31) / per_layer);
	if (lpb > max_lpb)
		lpb = max_lpb;
	dim3 grid(p->n_tokens, div_up(p->n_layers, lpb));
	size_t smem = STAGED ? lpb * layer_bytes : 0;
	inject_kernel<S, D, W, STAGED><<<grid, INFS_K_INJECT_THREADS, smem, stream>>>(*p, lpb);
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

template <typename D, int W> cudaError_t launch_fp8(const infs_k_inject_params *p, cudaStream_t stream)
{
	int dev, sms;
	cudaError_t err = cudaGetDevice(&dev);
	if (err == cudaSuccess)
		err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
	if (err != cudaSuccess)
		return err;
	/* layers per block: enough blocks for a few per SM, each block's index
	 * space within 31 bits */
	const uint64_t per_layer = 2ull * p->n_heads * (p->head_dim / W);
	uint32_t groups = div_up((uint64_t)INFS_K_INJECT_WAVES * sms, p->n_tokens);
	groups = groups > p->n_layers ? p->n_layers : groups;
	uint32_t lpb = div_up(p->n_layers, groups);
	const uint32_t max_lpb = (uint32_t)((1ull << 31) / per_layer);
	lpb = lpb > max_lpb ? max_lpb : lpb;
	dim3 grid(p->n_tokens, div_up(p->n_layers, lpb));
	inject_fp8_kernel<D, W><<<grid, INFS_K_INJECT_THREADS, 0, stream>>>(*p, lpb);
	return cudaGetLastError();
}

template <typename D> cudaError_t inject_fp8(const infs_k_inject_params *p, cudaStream_t stream)
{
	switch (fp8_width<D>(p)) {
	case 8: return launch_fp8<D, 8>(p, stream);
	case 4: return launch_fp8<D, 4>(p, stream);
	case 2: return launch_fp8<D, 2>(p, stream);
	default: return launch_fp8<D, 1>(p, stream);
	}
}

} /* namespace */

extern "C" int infs_k_inject_path(const infs_k_inject_params *p)
{
	if (p->src_dtype == INFS_K_FP8_E4M3) {
		int w = 1;
		dispatch_dtype(p->dst_dtype, [&](auto d) {
			w = fp8_width<decltype(d)>(p);
			return cudaSuccess;
		});
		return w > 1;
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
