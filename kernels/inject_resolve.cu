/* The tables of an injection from fact ids in device memory: one block
 * looks every id up in the namespace's sorted rows, sums the tokens,
 * checks every limit and writes the counts the injection kernel reads,
 * zero on any error so that nothing is written. */
#include "common.cuh"
#include "inject_kernels.h"

namespace {

constexpr unsigned THREADS = 256;

__global__ void __launch_bounds__(THREADS) resolve_kernel(const infs_k_resolve_params p)
{
	__shared__ uint32_t ntok[INFS_K_RESOLVE_MAX_IDS];
	__shared__ unsigned long long part[THREADS];
	__shared__ uint32_t n_shared;
	__shared__ unsigned long long total_shared;
	const uint32_t tid = threadIdx.x;
	if (tid == 0)
		n_shared = *p.n_ids;
	__syncthreads();
	const uint32_t n = n_shared;
	const bool too_many = n > p.max_ids;
	const uint32_t m = too_many ? 0 : n; /* the ids looked up */

	/* Each id's row in the sorted ids. A row's K pointer is NULL while its
	 * KV is only in the store file (a tier move rewrites it in place). */
	int missing = 0, unresident = 0;
	for (uint32_t i = tid; i < m; i += THREADS) {
		const uint64_t id = *(const uint64_t *)((const char *)p.ids + (size_t)i * p.id_stride);
		const uint32_t lo = infs::row_of(p.row_ids, p.n_rows, id);
		const char *k = NULL;
		if (lo == p.n_rows || (p.dead[lo / 32] >> (lo % 32) & 1))
			missing = 1;
		else if (!(k = *(const char *volatile *)&p.row_kv[lo]))
			unresident = 1;
		if (!k) {
			ntok[i] = 0;
		} else {
			const uint32_t t = p.row_ntok[lo];
			ntok[i] = t;
			p.src_k[i] = k;
			p.src_v[i] = k + t * p.token_bytes;
		}
	}
	missing = __syncthreads_or(missing);
	unresident = __syncthreads_or(unresident);

	/* Prefix sum of the tokens: each thread sums a run of ids, thread 0
	 * the runs, then each thread writes its run's offsets. */
	const uint32_t per = (m + THREADS - 1) / THREADS;
	const uint32_t a = min(tid * per, m), b = min(a + per, m);
	unsigned long long sum = 0;
	for (uint32_t i = a; i < b; i++)
		sum += ntok[i];
	part[tid] = sum;
	__syncthreads();
	if (tid == 0) {
		unsigned long long run = 0;
		for (uint32_t j = 0; j < THREADS; j++) {
			const unsigned long long x = part[j];
			part[j] = run;
			run += x;
		}
		total_shared = run;
		p.fact_first[0] = 0;
	}
	__syncthreads();
	const unsigned long long total = total_shared;
	sum = part[tid];
	for (uint32_t i = a; i < b; i++) {
		sum += ntok[i];
		p.fact_first[i + 1] = (uint32_t)sum; /* wraps only past max_tokens: refused below */
	}

	/* The limits; every thread computes the same status. */
	int32_t status = 0;
	const uint64_t first_blk = p.start_pos / p.block_size;
	uint64_t last_blk = 0;
	if (too_many || total > p.max_tokens)
		status = p.err_range;
	else if (missing)
		status = p.err_notfound;
	else if (unresident)
		status = p.err_notresident;
	else if (total && (last_blk = (p.start_pos + total - 1) / p.block_size) >= p.block_table_len)
		status = p.err_range;
	int bad_block = 0;
	if (status == 0 && total)
		for (uint64_t blk = first_blk + tid; blk <= last_blk; blk += THREADS) {
			const int32_t id = p.block_table[blk];
			bad_block |= id < 0 || (uint32_t)id >= p.n_blocks;
		}
	if (__syncthreads_or(bad_block))
		status = p.err_range;

	if (tid == 0) {
		const uint32_t tokens = status ? 0 : (uint32_t)total;
		p.counts[0] = status ? 0 : m;
		p.counts[1] = tokens;
		if (p.status)
			*p.status = status;
		if (p.next_pos)
			*p.next_pos = p.start_pos + tokens;
	}
}

} /* namespace */

extern "C" cudaError_t infs_k_inject_resolve(const infs_k_resolve_params *p, cudaStream_t stream)
{
	if (p->max_ids > INFS_K_RESOLVE_MAX_IDS || p->block_size == 0)
		return cudaErrorInvalidValue;
	resolve_kernel<<<1, THREADS, 0, stream>>>(*p);
	return cudaGetLastError();
}
