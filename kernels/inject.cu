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

template <typename S, typename D, int W> cudaError_t launch(const infs_k_inject_params *p, cudaStream_t stream)
{
	int dev, sms;
	cudaError_t err = cudaGetDevice(&dev);
	if (err == cudaSuccess)
		err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
	if (err != cudaSuccess)
		return err;
	/* Split layers over blocks until there are a few blocks per SM, and
	 * keep each block's index space within 31 bits. */
	uint64_t per_layer = 2ull * p->n_heads * (p->head_dim / W);
	uint32_t groups = div_up(4ull * sms, p->n_tokens);
	groups = groups < 1 ? 1 : groups > p->n_layers ? p->n_layers : groups;
	uint32_t lpb = div_up(p->n_layers, groups);
	uint32_t max_lpb = (uint32_t)((1ull << 31) / per_layer);
	if (lpb > max_lpb)
		lpb = max_lpb;
	groups = div_up(p->n_layers, lpb);
	dim3 grid(p->n_tokens, groups);
	inject_kernel<S, D, W><<<grid, INFS_K_INJECT_THREADS, 0, stream>>>(*p, lpb);
	return cudaGetLastError();
}

} /* namespace */

extern "C" int infs_k_inject_vectorized(const infs_k_inject_params *p)
{
	int ok = 0;
	dispatch_dtype(p->src_dtype, [&](auto s) {
		return dispatch_dtype(p->dst_dtype, [&](auto d) {
			ok = vector_ok<decltype(s), decltype(d)>(p);
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
	return dispatch_dtype(p->src_dtype, [&](auto s) {
		return dispatch_dtype(p->dst_dtype, [&](auto d) {
			using S = decltype(s);
			using D = decltype(d);
			if (vector_ok<S, D>(p))
				return launch<S, D, inject_width<S, D>::vec>(p, stream);
			return launch<S, D, 1>(p, stream);
		});
	});
}
