/* The kernels of one question's device path (kernels/ask.cu) against what
 * the host path computes: the injection order of retrieval's hits (the
 * host path's reversal in engine_batch.c, best last) for counts of none,
 * one, some, all and more than k, every id past the count untouched; and
 * the step's position and calibration taken from where the injection
 * ended, against infs__calib_of packed as the host path packs it
 * (infs__calib_pack), for calibrations off, fixed and by 1 / sqrt(facts),
 * with and without a calibration to write. */
#include <string.h>

#include "gpu.h"
#include "ask_kernels.h"
#include "engine/engine_impl.h"

enum { K = INFS__ASK_K_MAX, SENTINEL = 0x5a };

static void order(const infs_hit *d_hits, uint32_t count, uint32_t k)
{
	infs_hit h[K];
	gpu_from_dev(h, d_hits, sizeof h);
	uint32_t *d_count = gpu_to_dev(&count, sizeof count);
	uint64_t *d_ids = gpu_to_dev(NULL, K * sizeof(uint64_t)), ids[K];
	CUDA_OK(cudaMemset(d_ids, SENTINEL, K * sizeof(uint64_t)));
	CUDA_OK(infs_k_ask_order(d_ids, d_hits, sizeof(infs_hit), d_count, k, 0));
	gpu_from_dev(ids, d_ids, sizeof ids);
	uint64_t untouched;
	memset(&untouched, SENTINEL, sizeof untouched);
	const uint32_t n = count < k ? count : k;
	int bad = 0;
	for (uint32_t i = 0; i < K; i++)
		bad += ids[i] != (i < n ? h[n - 1 - i].id : untouched);
	printf("order: count %u, k %u: %d wrong\n", count, k, bad);
	CHECK(bad == 0);
	cudaFree(d_count);
	cudaFree(d_ids);
}

/* The step's inputs after an injection that ended at end with count facts
 * found, the calibration o asks for after n_header positions. */
static void past(const infs_ask_options *o, uint32_t count, uint32_t k, uint32_t n_header, uint32_t end, int with_calib)
{
	int32_t by_count[4 * (K + 1)];
	const int on = infs__calib_by_count(by_count, o, k, n_header);
	const uint32_t scalars[2] = { count, end };
	uint32_t *d_sc = gpu_to_dev(scalars, sizeof scalars);
	int32_t *d_tab = gpu_to_dev(by_count, sizeof by_count);
	int32_t init[5] = { -7, -7, -7, -7, -7 }, got[5];
	int32_t *d_out = gpu_to_dev(init, sizeof init);
	CUDA_OK(infs_k_ask_past(d_out, with_calib ? d_out + 1 : NULL, d_sc + 1, d_sc, d_tab, k, 0));
	gpu_from_dev(got, d_out, sizeof got);
	/* the host path: calibration of the facts it injected, [n_header, end) */
	const uint32_t n = count < k ? count : k;
	infs__calib c;
	int32_t want[4] = { 0, 0, 0, 0 };
	if (infs__calib_of(&c, o, n, n_header, end))
		infs__calib_pack(want, &c);
	CHECK(got[0] == (int32_t)end);
	if (with_calib)
		CHECK(!memcmp(got + 1, want, sizeof want));
	else
		CHECK(got[1] == -7 && got[2] == -7 && got[3] == -7 && got[4] == -7);
	printf("past: t %g s %g, count %u, k %u, end %u%s: n_past %d, calibration [%d, %d) %s\n",
	       (double)o->fact_temperature, (double)o->fact_scale, count, k, end, with_calib ? "" : " (none asked)",
	       got[0], got[1], got[2], on ? "on" : "off");
	cudaFree(d_sc);
	cudaFree(d_tab);
	cudaFree(d_out);
}

int main(void)
{
	gpu_require();
	infs_hit hits[K];
	for (uint32_t i = 0; i < K; i++) {
		hits[i].id = 1000003ull * (i + 1) + ((uint64_t)i << 40);
		hits[i].score = 1.0f - (float)i / K;
	}
	infs_hit *d_hits = gpu_to_dev(hits, sizeof hits);
	static const uint32_t counts[] = { 0, 1, 37, 50, 100 };
	for (size_t i = 0; i < sizeof counts / sizeof *counts; i++) {
		order(d_hits, counts[i], 50);
		order(d_hits, counts[i], K);
	}
	cudaFree(d_hits);

	infs_ask_options o = INFS_ASK_OPTIONS_INIT;
	const float cal[][2] = { { 1.0f, 1.0f }, { 0.5f, 0.25f }, { 1.0f, 0.0f }, { 0.7f, 0.0f } };
	for (size_t i = 0; i < sizeof cal / sizeof *cal; i++) {
		o.fact_temperature = cal[i][0];
		o.fact_scale = cal[i][1];
		for (size_t j = 0; j < sizeof counts / sizeof *counts; j++) {
			past(&o, counts[j], 50, 31, 31 + 24 * (counts[j] < 50 ? counts[j] : 50), 1);
			past(&o, counts[j], 50, 31, 31 + 24 * (counts[j] < 50 ? counts[j] : 50), 0);
		}
	}
	CHECK_DONE();
}
