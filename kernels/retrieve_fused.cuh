/* Fused retrieval: scores and top-k in one pass over the rows, no score
 * matrix in memory. This header holds what the files of the family share:
 * the constants, the launch's config, the layouts of the lists and of the
 * kept scores, and the kernels, declared for the launcher. retrieve_scan.cu
 * defines the scan (with retrieve_cut.cuh, its cuts of the lists),
 * retrieve_merge.cu the two merges, retrieve.cu the launch.
 *
 * scan: the block's warps work in rounds. In each, every warp scores its own
 *   tile of 16 rows (streamed into shared memory with cp.async, the next two
 *   tiles in flight) against up to 32 queries on tensor cores (mma
 *   m16n8k16, f16 in, f32 accumulate) and appends the keys (see topk.cuh)
 *   above the block's threshold of each query to the block's list of that
 *   query. The barrier after the appends tells whether any list could
 *   overflow in the next round (or a query still lacks its seed): only
 *   then do the warps cut, behind a second barrier. Warp q % warps cuts
 *   query q's list, which raises the threshold: for kk up to
 *   raise_max it finds the kk-th best score (kk rounds of a warp maximum)
 *   and keeps the keys at or above it, unsorted; for larger kk it sorts the
 *   list (bitonic, in registers) down to its best kk keys. Sharing one list
 *   per query across the block's warps makes the threshold rise eight times
 *   as fast as per-warp lists would. At the end each list is cut to the
 *   block's top kk of its query, sorted. The tiles' 16-byte pieces are copied
 *   by the lanes in turn (coalesced), each lane's destinations found once:
 *   they repeat from tile to tile.
 * seeds: the blocks also share lower bounds of each query's kk-th best
 *   score. Each publishes its best score of round 0 into one of kk groups;
 *   the least of the groups' maxima, the scores of kk different rows, bounds
 *   the kk-th best from below. Round 0's keys wait in registers until round
 *   1, when the seeds are read: from then on the thresholds start where a
 *   block's own rows would take thousands of rows to raise them, the lists
 *   stay short and are rarely cut, and a batch's rounds are mostly scoring.
 * merge: per query, the best kk keys of the blocks' lists. Any block's kk-th
 *   key, and the kk-th largest of the blocks' first keys, are lower bounds
 *   of the query's kk-th best key: only the keys at or above the larger are
 *   gathered and sorted; when too many are, a radix selection over all.
 *   When the lists hold few live keys, all of them are gathered, no bound
 *   taken.
 * kept scores: sets of up to keep_max rows take neither lists nor seeds,
 *   whose bookkeeping costs a batch more per round than writing its scores
 *   does. The scan writes every score (into the L2, where the rows, read
 *   once, go first), with no barrier in its rounds; a query's rows are
 *   split between merge blocks, each of which bounds the kk-th best score
 *   by the best scores of kk different rows among its own loads, gathers
 *   the scores at or above that, and hands them to the last of them.
 *
 * Every step keeps every key that can be in the top kk, so the result is
 * exact, ties included (keys are unique: a score, then the smaller row).
 *
 * The tensor-core operands come from ldmatrix, which hands each lane its
 * fragment registers in the order the mma takes them (plain 16-byte loads
 * left the A fragment, two rows' halves, to be assembled by register moves
 * on the way to every mma). Rows and queries are read the same way, so the
 * k order is the same for both. */
#ifndef INFS_KERNELS_RETRIEVE_FUSED_CUH
#define INFS_KERNELS_RETRIEVE_FUSED_CUH

#include "topk.cuh"
#include "retrieve_kernels.h"

namespace infs::fused {

constexpr uint32_t sub_rows = 16;  /* rows a warp scores at once: its tile */
constexpr uint32_t max_warps = 8;  /* per block */
constexpr uint32_t stages = 2;     /* tiles per warp in shared memory */
/* A list holds 32 list_m keys: kk kept and a round's appends, for kk up to
 * INFS_K_FUSED_MAX. */
constexpr int list_m = 8;
constexpr uint32_t list_cap = 32 * list_m;
/* Lists of up to this kk are cut by a selection (raise), larger ones by a
 * sort: the selection takes kk dependent rounds, the sort a fixed number of
 * stages, and on an H200 the selection was the faster up to kk = 16. */
constexpr uint32_t raise_max = 16;
/* Lists of up to this many keys are cut by counting, one key a lane. */
constexpr uint32_t few_max = 8;
constexpr uint32_t merge_cap = 4096;          /* keys the merge sorts in shared memory */
constexpr uint32_t merge_threads = 1024;
constexpr int merge_regs = 4;                 /* keys each merge thread loads at once */
constexpr uint32_t all_max = 64;              /* live keys the merge sorts without a bound */
/* Sets of up to this many rows keep their scores (see scores). */
constexpr uint32_t keep_max = 1u << 17;
constexpr int scores_regs = 8;                /* 16-byte pieces of scores each merge thread loads at once */
/* Rows a merge block reads when a query's scores are split between blocks. */
constexpr uint32_t split_rows = scores_regs * 4 * merge_threads;

struct config {
	uint32_t nt;     /* tiles of 8 queries */
	uint32_t warps;  /* per block */
	size_t smem;     /* dynamic shared memory per block */
	uint32_t blocks;
	uint32_t groups;  /* seed groups (see scan_kernel), 0 when the blocks share none */
	bool keep_scores; /* the scan keeps every score, not lists (see scores) */
	uint32_t splits;  /* merge blocks per query when it does */
	bool early_merge; /* Hopper or later: the merge may launch while the scan runs */
};

/* Every block's list of every query. */
struct lists {
	uint64_t *keys; /* [blocks][nt * 8][list_cap] */
	uint32_t qp;
	__device__ uint64_t *of(uint32_t block, uint32_t q) const { return keys + ((size_t)block * qp + q) * list_cap; }
};

/* What the scan of a set of up to keep_max rows leaves: the order bits of
 * every score (0 for rows deleted), [n_queries][stride] with stride the
 * rows rounded up to a multiple of 4. Where the merge splits a query
 * between blocks, they gather its candidates in cand (merge_cap a query),
 * counted in count, and the last of them (ticket) places them; the scan
 * zeroes both counters. */
struct scores {
	uint32_t *bits, *count, *ticket;
	uint64_t *cand;
	uint32_t n_rows, stride;
};

/* The kernels, launched by retrieve.cu. The scan, a template, is handed
 * out by retrieve_scan.cu for nt tiles of 8 queries: without -rdc, nvcc
 * keeps a template kernel's launch stubs in the file that defines it. */
const void *scan_for(uint32_t nt);
__global__ void merge_kernel(const infs_k_fused_params p, lists ls, uint32_t blocks);
__global__ void merge_scores_kernel(const infs_k_fused_params p, scores sc);

} /* namespace infs::fused */

#endif
