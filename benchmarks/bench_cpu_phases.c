/* The CPU runtime's phases, timed on request, for benchmarks/cpu_llamacpp.py
 * (which runs llama.cpp's the same way in between, interleaved):
 *
 *   bench_cpu_phases MODEL N_THREADS [int8]
 *
 * (int8: infs_model_options.int8_activations, 8-bit activations in the
 * products of few tokens, as llama.cpp runs them)
 *
 * reads commands on stdin, one a line, and answers each with one line:
 *   tokens ID ID ...      the token ids the phases take, in order -> "ok N"
 *   full N                prefill of tokens[0, N) into an empty cache -> ms
 *   question P Q          tokens[0, P) prefilled, then the Q next timed -> ms
 *   decode P S            tokens[0, P) prefilled, then S one-token steps
 *                         -> ms per step
 *   quit
 * The cache is paged f16 as the engine keeps it, logits of the last token
 * as the engine asks; the time is wall time, the CPU time follows it
 * ("ms cpu_ms"). Public API only. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "inferscale/inferscale.h"

#include "bench_common.h"

#define MAX_TOKENS 4096
#define BLOCK 16

typedef struct cache {
	infs_kv_layout layout;
	infs_forward_options fo;
	uint16_t *mem;
	void **kl, **vl;
	int32_t *table;
} cache;

static void cache_init(cache *c, const infs_model_info *info)
{
	const uint32_t n_blocks = MAX_TOKENS / BLOCK;
	const size_t row = (size_t)info->n_kv_heads * info->head_dim, per_layer = (size_t)n_blocks * BLOCK * row;
	c->mem = calloc((size_t)info->n_layers * 2 * per_layer, 2);
	c->kl = calloc(info->n_layers, sizeof *c->kl);
	c->vl = calloc(info->n_layers, sizeof *c->vl);
	c->table = malloc(n_blocks * sizeof *c->table);
	if (!c->mem || !c->kl || !c->vl || !c->table) {
		fprintf(stderr, "bench_cpu_phases: out of memory\n");
		exit(1);
	}
	for (uint32_t l = 0; l < info->n_layers; l++) {
		c->kl[l] = c->mem + (size_t)l * 2 * per_layer;
		c->vl[l] = c->mem + ((size_t)l * 2 + 1) * per_layer;
	}
	for (uint32_t b = 0; b < n_blocks; b++)
		c->table[b] = (int32_t)b;
	infs_kv_layout L = INFS_KV_LAYOUT_INIT;
	L.dtype = INFS_DTYPE_F16;
	L.n_layers = info->n_layers;
	L.n_kv_heads = info->n_kv_heads;
	L.head_dim = info->head_dim;
	L.n_blocks = n_blocks;
	L.block_size = BLOCK;
	L.k_layers = c->kl;
	L.v_layers = c->vl;
	L.stride_block = (int64_t)(BLOCK * row);
	L.stride_slot = (int64_t)row;
	L.stride_head = info->head_dim;
	c->layout = L;
	infs_forward_options fo = INFS_FORWARD_OPTIONS_INIT;
	fo.cache = &c->layout;
	fo.block_table = c->table;
	fo.block_table_len = n_blocks;
	fo.write_cache = 1;
	c->fo = fo;
}

/* tokens[at, at + n) at positions at.. over the cache's first at positions. */
static void run(const infs_model *m, cache *c, float *logits, const int32_t *tokens, uint32_t at, uint32_t n)
{
	int32_t pos[MAX_TOKENS];
	for (uint32_t i = 0; i < n; i++)
		pos[i] = (int32_t)(at + i);
	c->fo.n_past = at;
	if (infs_model_forward(logits, NULL, NULL, m, tokens + at, pos, n, &c->fo) != INFS_OK) {
		fprintf(stderr, "bench_cpu_phases: %s\n", infs_error_last());
		exit(1);
	}
}

int main(int argc, char **argv)
{
	if (argc != 3 && !(argc == 4 && !strcmp(argv[3], "int8"))) {
		fprintf(stderr, "usage: bench_cpu_phases MODEL N_THREADS [int8]\n");
		return 2;
	}
	infs_model_options mo = INFS_MODEL_OPTIONS_INIT;
	mo.n_threads = (uint32_t)atoi(argv[2]);
	mo.int8_activations = argc == 4;
	infs_model *m = NULL;
	if (infs_model_load(&m, argv[1], &mo) != INFS_OK) {
		fprintf(stderr, "bench_cpu_phases: %s\n", infs_error_last());
		return 1;
	}
	infs_model_info info = { .version = INFS_MODEL_INFO_VERSION };
	infs_model_info_get(&info, m);
	cache c;
	cache_init(&c, &info);
	float *logits = malloc((size_t)info.n_vocab * sizeof *logits);
	static int32_t tokens[MAX_TOKENS];
	uint32_t n_tokens = 0;
	char cmd[32];
	while (scanf("%31s", cmd) == 1) {
		unsigned a = 0, b = 0;
		double t0, c0, ms, cpu;
		if (!strcmp(cmd, "quit"))
			break;
		if (!strcmp(cmd, "tokens")) {
			int id;
			n_tokens = 0;
			while (n_tokens < MAX_TOKENS && scanf("%d", &id) == 1)
				tokens[n_tokens++] = id;
			if (scanf("%*s") == EOF) /* the terminating "end" */
				break;
			printf("ok %u\n", n_tokens);
			fflush(stdout);
			continue;
		}
		if (!strcmp(cmd, "full") && scanf("%u", &a) == 1 && a <= n_tokens) {
			t0 = bench_clock(CLOCK_MONOTONIC);
			c0 = bench_clock(CLOCK_PROCESS_CPUTIME_ID);
			run(m, &c, logits, tokens, 0, a);
			ms = (bench_clock(CLOCK_MONOTONIC) - t0) * 1e3;
			cpu = (bench_clock(CLOCK_PROCESS_CPUTIME_ID) - c0) * 1e3;
		} else if (!strcmp(cmd, "question") && scanf("%u %u", &a, &b) == 2 && a + b <= n_tokens) {
			run(m, &c, logits, tokens, 0, a);
			t0 = bench_clock(CLOCK_MONOTONIC);
			c0 = bench_clock(CLOCK_PROCESS_CPUTIME_ID);
			run(m, &c, logits, tokens, a, b);
			ms = (bench_clock(CLOCK_MONOTONIC) - t0) * 1e3;
			cpu = (bench_clock(CLOCK_PROCESS_CPUTIME_ID) - c0) * 1e3;
		} else if (!strcmp(cmd, "decode") && scanf("%u %u", &a, &b) == 2 && b && a + b <= n_tokens) {
			run(m, &c, logits, tokens, 0, a);
			t0 = bench_clock(CLOCK_MONOTONIC);
			c0 = bench_clock(CLOCK_PROCESS_CPUTIME_ID);
			for (uint32_t i = 0; i < b; i++)
				run(m, &c, logits, tokens, a + i, 1);
			ms = (bench_clock(CLOCK_MONOTONIC) - t0) * 1e3 / b;
			cpu = (bench_clock(CLOCK_PROCESS_CPUTIME_ID) - c0) * 1e3 / b;
		} else {
			fprintf(stderr, "bench_cpu_phases: bad command \"%s\" (or too few tokens)\n", cmd);
			return 2;
		}
		printf("%.3f %.3f\n", ms, cpu);
		fflush(stdout);
	}
	free(logits);
	free(c.mem);
	free(c.kl);
	free(c.vl);
	free(c.table);
	infs_model_free(m);
	return 0;
}
