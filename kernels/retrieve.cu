/* Launcher of the fused retrieval (see retrieve_fused.cuh): the device's
 * attributes, and the choice of the launch for a call's shapes. */
#include <atomic>

#include "retrieve_fused.cuh"

using namespace infs::fused;

namespace {

/* What the launches need to know of a device: its attributes, and the
 * scan kernels' shared memory limit raised to its opt-in maximum. Found
 * once per device, since a call of a few microseconds would otherwise pay
 * for the queries on its critical path. Threads that race to find them
 * make the same idempotent calls and store the same value. */
struct device_facts {
	int sms, optin, major;
};

bool find_facts(int dev, device_facts *f)
{
	if (cudaDeviceGetAttribute(&f->sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
	    cudaDeviceGetAttribute(&f->optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess ||
	    cudaDeviceGetAttribute(&f->major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess)
		return false;
	for (uint32_t nt = 1; nt <= 4; nt++) {
		cudaFuncAttributes fa;
		const void *fn = scan_for(nt);
		if (cudaFuncGetAttributes(&fa, fn) != cudaSuccess ||
		    cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
		                         f->optin - (int)fa.sharedSizeBytes) != cudaSuccess)
			return false;
	}
	return true;
}

/* Per device: 0 while unknown, else 1 | major << 8 | sms << 16 | optin << 32. */
constexpr int cached_devices = 64;
std::atomic<uint64_t> known[cached_devices];

bool facts_of(int dev, device_facts *f)
{
	uint64_t v = dev < cached_devices ? known[dev].load(std::memory_order_acquire) : 0;
	if (!v) {
		if (!find_facts(dev, f))
			return false;
		v = 1 | (uint64_t)(f->major & 0xff) << 8 | (uint64_t)(f->sms & 0xffff) << 16 | (uint64_t)f->optin << 32;
		if (dev < cached_devices)
			known[dev].store(v, std::memory_order_release);
	}
	*f = {(int)(v >> 16 & 0xffff), (int)(v >> 32), (int)(v >> 8 & 0xff)};
	return true;
}

/* The launch for these shapes on the current device; false when the fused
 * path does not take them. */
bool make_config(config *cf, uint32_t n_rows, uint32_t dim, uint32_t n_queries, uint32_t k)
{
	if (dim == 0 || dim % 64 || dim > INFS_K_FUSED_MAX_DIM || n_queries == 0 ||
	    n_queries > INFS_K_FUSED_MAX_QUERIES || k == 0 || k > INFS_K_FUSED_MAX)
		return false;
	int dev;
	device_facts f;
	if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || !facts_of(dev, &f))
		return false;
	cf->early_merge = f.major >= 9;
	cf->nt = (n_queries + 7) / 8;
	/* the queries, and the lists when they are in shared memory */
	const size_t fixed = (size_t)cf->nt * 8 * dim * 2 + (cf->nt == 1 ? 8 * list_cap * 8 : 0);
	const size_t stage = (size_t)sub_rows * dim * 2;
	const size_t statics = cf->nt * 8 * 16 + 1024; /* count[], thresh[], best[], the runtime's share */
	if ((size_t)f.optin < fixed + statics + stages * stage)
		return false;
	const size_t fit = (f.optin - fixed - statics) / (stages * stage);
	cf->warps = fit < max_warps ? (uint32_t)fit : max_warps;
	cf->smem = fixed + cf->warps * stages * stage;
	const uint32_t tiles = (n_rows + sub_rows - 1) / sub_rows, busy = (tiles + cf->warps - 1) / cf->warps;
	cf->blocks = busy < (uint32_t)f.sms ? busy : (uint32_t)f.sms;
	cf->blocks = cf->blocks ? cf->blocks : 1;
	cf->keep_scores = n_rows <= keep_max;
	/* enough merge blocks to keep the SMs busy, each reading up to split_rows */
	const uint32_t per_query = cf->blocks / n_queries ? cf->blocks / n_queries : 1;
	cf->splits = min((n_rows + split_rows - 1) / split_rows, per_query);
	cf->groups = !cf->keep_scores && k <= 32 && cf->blocks >= k ? k : 0;
	return true;
}

} /* namespace */

extern "C" int infs_k_fused_supported(uint32_t dim, uint32_t n_queries, uint32_t k)
{
	config cf;
	return make_config(&cf, 1, dim, n_queries, k);
}

extern "C" size_t infs_k_fused_workspace_bytes(uint32_t n_rows, uint32_t dim, uint32_t n_queries, uint32_t k)
{
	config cf;
	if (!make_config(&cf, n_rows, dim, n_queries, k))
		return 0;
	if (cf.keep_scores)
		return 8ull * n_queries * merge_cap + 4ull * n_queries * ((n_rows + 3) / 4 * 4 + 2);
	return 8ull * cf.blocks * cf.nt * 8 * list_cap;
}

extern "C" size_t infs_k_fused_workspace_max(uint32_t max_rows, uint32_t dim, uint32_t n_queries, uint32_t k)
{
	/* the kept scores grow with the rows up to keep_max, the lists beyond */
	const size_t a = infs_k_fused_workspace_bytes(max_rows < keep_max ? max_rows : keep_max, dim, n_queries, k);
	const size_t b = infs_k_fused_workspace_bytes(max_rows, dim, n_queries, k);
	return a > b ? a : b;
}

extern "C" cudaError_t infs_k_fused_topk(const infs_k_fused_params *p, cudaStream_t stream)
{
	config cf;
	if (!make_config(&cf, p->n_rows, p->dim, p->n_queries, p->k) || p->n_rows == 0)
		return cudaErrorInvalidValue;
	const void *fn = scan_for(cf.nt);
	lists ls = {(uint64_t *)p->workspace, cf.nt * 8};
	/* the scores' workspace, as infs_k_fused_workspace_bytes counts it */
	const uint32_t stride = (p->n_rows + 3) / 4 * 4, nq = p->n_queries;
	uint64_t *const cand = (uint64_t *)p->workspace;
	uint32_t *const bits = (uint32_t *)(cand + (size_t)nq * merge_cap), *const count = bits + (size_t)nq * stride;
	scores sc = {bits, count, count + nq, cand, p->n_rows, stride};
	void *args[] = {(void *)p, &cf, &ls, &sc};
	cudaError_t err = cudaLaunchKernel(fn, cf.blocks, 32 * cf.warps, args, cf.smem, stream);
	if (err != cudaSuccess)
		return err;
	/* On Hopper and later the merge is launched while the scan runs
	 * (programmatic dependent launch) and waits for it on the device, which
	 * hides a launch latency. */
	cudaLaunchAttribute attr;
	attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
	attr.val.programmaticStreamSerializationAllowed = 1;
	cudaLaunchConfig_t lc = {};
	lc.gridDim = dim3(p->n_queries);
	lc.blockDim = dim3(merge_threads);
	lc.stream = stream;
	lc.attrs = &attr;
	lc.numAttrs = cf.early_merge ? 1 : 0;
	if (cf.keep_scores) {
		lc.gridDim = dim3(cf.splits, p->n_queries);
		return cudaLaunchKernelEx(&lc, merge_scores_kernel, *p, sc);
	}
	return cudaLaunchKernelEx(&lc, merge_kernel, *p, ls, cf.blocks);
}
