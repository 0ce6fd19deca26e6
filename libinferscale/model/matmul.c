#include "model/matmul.h"

#include <string.h>

#ifdef INFS_HAVE_BLAS
#include <cblas.h>
#endif

/* Tile: TN tokens by TO output rows, accumulated in vectors of VL floats
 * (GCC/Clang vector extensions: SIMD at any optimisation level and target,
 * without intrinsics). */
#define TN 4
#define TO 2
#define VL 4
/* Output rows per pool task. */
#define ROWS_PER_TASK 64

typedef float vf __attribute__((vector_size(VL * sizeof(float))));

typedef struct mm_job {
	float *y;
	const float *x, *w, *bias;
	uint32_t n, in, out;
} mm_job;

static vf load_v(const float *p)
{
	vf v;
	memcpy(&v, p, sizeof v);
	return v;
}

static void tile(const mm_job *j, uint32_t t0, uint32_t nt, uint32_t o0, uint32_t no)
{
	vf acc[TN][TO];
	memset(acc, 0, sizeof acc);
	uint32_t in = j->in, k = 0;
	const float *xr[TN], *wr[TO];
	for (uint32_t a = 0; a < TN; a++)
		xr[a] = j->x + (size_t)(t0 + (a < nt ? a : 0)) * in;
	for (uint32_t b = 0; b < TO; b++)
		wr[b] = j->w + (size_t)(o0 + (b < no ? b : 0)) * in;
	for (; k + VL <= in; k += VL) {
		vf wv[TO];
		for (uint32_t b = 0; b < TO; b++)
			wv[b] = load_v(wr[b] + k);
		for (uint32_t a = 0; a < TN; a++) {
			vf xv = load_v(xr[a] + k);
			for (uint32_t b = 0; b < TO; b++)
				acc[a][b] += xv * wv[b];
		}
	}
	for (uint32_t a = 0; a < nt; a++) {
		for (uint32_t b = 0; b < no; b++) {
			float s = 0;
			for (uint32_t l = 0; l < VL; l++)
				s += acc[a][b][l];
			for (uint32_t kk = k; kk < in; kk++)
				s += xr[a][kk] * wr[b][kk];
			if (j->bias)
				s += j->bias[o0 + b];
			j->y[(size_t)(t0 + a) * j->out + o0 + b] = s;
		}
	}
}

static void mm_task(void *arg, uint32_t task, uint32_t worker)
{
	const mm_job *j = arg;
	uint32_t o_begin = task * ROWS_PER_TASK;
	uint32_t o_end = o_begin + ROWS_PER_TASK < j->out ? o_begin + ROWS_PER_TASK : j->out;
	for (uint32_t t0 = 0; t0 < j->n; t0 += TN) {
		uint32_t nt = j->n - t0 < TN ? j->n - t0 : TN;
		for (uint32_t o0 = o_begin; o0 < o_end; o0 += TO)
			tile(j, t0, nt, o0, o_end - o0 < TO ? o_end - o0 : TO);
	}
}

void infs__matmul_blocked(float *y, const float *x, const float *w, const float *bias, uint32_t n,
                          uint32_t in, uint32_t out, infs__pool *pool)
{
	mm_job j = { y, x, w, bias, n, in, out };
	infs__pool_run(pool, mm_task, &j, (out + ROWS_PER_TASK - 1) / ROWS_PER_TASK);
}

void infs__matmul(float *y, const float *x, const float *w, const float *bias, uint32_t n,
                  uint32_t in, uint32_t out, infs__pool *pool)
{
#ifdef INFS_HAVE_BLAS
	if (n == 1)
		cblas_sgemv(CblasRowMajor, CblasNoTrans, (int)out, (int)in, 1.0f, w, (int)in, x, 1, 0.0f, y, 1);
	else
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)n, (int)out, (int)in, 1.0f, x,
		            (int)in, w, (int)in, 0.0f, y, (int)out);
	if (bias)
		for (uint32_t t = 0; t < n; t++)
			for (uint32_t o = 0; o < out; o++)
				y[(size_t)t * out + o] += bias[o];
#else
	infs__matmul_blocked(y, x, w, bias, n, in, out, pool);
#endif
}
