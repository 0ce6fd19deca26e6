/* The benchmarks' random model (infs__model_random_device) on a small
 * llama configuration: its argument checks, the host forward's refusal (it
 * has no host weights), and a device forward over a paged bf16 cache whose
 * logits are finite, of the scale the weights' deviation 0.02 gives
 * (sqrt(n_embd) x 0.02 after the final RMSNorm of weight 1), the same for
 * the same seed and different for another. */
#include <math.h>
#include <string.h>

#include "gpu.h"
#include "model/model.h"
#include "random_model.h"

enum { D = 64, LAYERS = 2, HEADS = 4, KV = 2, HD = 16, FF = 128, VOCAB = 512, BS = 4, NB = 4, N = 6 };


/* The last token's logits of a forward over N tokens into a fresh cache. */
static void run(float *logits, const infs_model *m)
{
	const size_t row = (size_t)KV * HD, per_layer = 2 * (size_t)NB * BS * row;
	uint16_t *mem;
	void *lk[LAYERS], *lv[LAYERS];
	CUDA_OK(cudaMalloc((void **)&mem, LAYERS * per_layer * 2));
	CUDA_OK(cudaMemset(mem, 0, LAYERS * per_layer * 2));
	for (int l = 0; l < LAYERS; l++) {
		lk[l] = mem + l * per_layer;
		lv[l] = mem + l * per_layer + per_layer / 2;
	}
	infs_kv_layout kl = INFS_KV_LAYOUT_INIT;
	kl.device = 0, kl.dtype = INFS_DTYPE_BF16, kl.n_layers = LAYERS, kl.n_kv_heads = KV, kl.head_dim = HD;
	kl.n_blocks = NB, kl.block_size = BS, kl.k_layers = lk, kl.v_layers = lv;
	kl.stride_block = (int64_t)BS * row, kl.stride_slot = (int64_t)row, kl.stride_head = HD, kl.stride_dim = 1;
	const int32_t table[NB] = { 2, 0, 3, 1 }, tokens[N] = { 5, 77, 300, 1, 511, 42 };
	int32_t *d_table, *d_tokens;
	float *d_logits;
	CUDA_OK(cudaMalloc((void **)&d_table, sizeof table));
	CUDA_OK(cudaMalloc((void **)&d_tokens, sizeof tokens));
	CUDA_OK(cudaMalloc((void **)&d_logits, VOCAB * sizeof(float)));
	CUDA_OK(cudaMemcpy(d_table, table, sizeof table, cudaMemcpyHostToDevice));
	CUDA_OK(cudaMemcpy(d_tokens, tokens, sizeof tokens, cudaMemcpyHostToDevice));
	infs_device_forward_options o = INFS_DEVICE_FORWARD_OPTIONS_INIT;
	o.cache = &kl, o.block_table = d_table, o.block_table_len = NB;
	CHECK_OK(infs_model_forward_device(d_logits, m, d_tokens, NULL, N, &o));
	CUDA_OK(cudaDeviceSynchronize());
	CUDA_OK(cudaMemcpy(logits, d_logits, VOCAB * sizeof(float), cudaMemcpyDeviceToHost));
	cudaFree(mem);
	cudaFree(d_table);
	cudaFree(d_tokens);
	cudaFree(d_logits);
}

int main(void)
{
	gpu_require();
	infs__model_config c = gpu_small_llama(VOCAB, D, LAYERS, HEADS, KV, HD, FF, 500000.0), bad = c;
	infs_model *m = NULL, *same = NULL, *other = NULL;
	CHECK_ERR(infs__model_random_device(NULL, &c, 0, 8, 1, INFS_DTYPE_BF16), INFS_EINVAL);
	CHECK_ERR(infs__model_random_device(&m, NULL, 0, 8, 1, INFS_DTYPE_BF16), INFS_EINVAL);
	CHECK_ERR(infs__model_random_device(&m, &c, -1, 8, 1, INFS_DTYPE_BF16), INFS_EINVAL);
	CHECK_ERR(infs__model_random_device(&m, &c, 0, 0, 1, INFS_DTYPE_BF16), INFS_EINVAL);
	bad.n_kv_heads = 3;
	CHECK_ERR(infs__model_random_device(&m, &bad, 0, 8, 1, INFS_DTYPE_BF16), INFS_EFORMAT);
	CHECK(m == NULL);

	CHECK_OK(infs__model_random_device(&m, &c, 0, 8, 1, INFS_DTYPE_BF16));
	CHECK_OK(infs__model_random_device(&same, &c, 0, 8, 1, INFS_DTYPE_BF16));
	CHECK_OK(infs__model_random_device(&other, &c, 0, 8, 2, INFS_DTYPE_BF16));
	if (!m || !same || !other)
		CHECK_DONE();

	const int32_t tok[2] = { 1, 2 };
	float host_logits[VOCAB];
	CHECK_ERR(infs_model_forward(host_logits, NULL, NULL, m, tok, NULL, 2, NULL), INFS_EINVAL);
	CHECK(strstr(infs_error_last(), "no host weights") != NULL);

	static float a[VOCAB], b[VOCAB], o[VOCAB];
	run(a, m);
	run(b, same);
	run(o, other);
	double sum = 0, sq = 0;
	int finite = 1;
	for (int i = 0; i < VOCAB; i++) {
		finite &= isfinite(a[i]) != 0;
		sum += a[i];
		sq += (double)a[i] * a[i];
	}
	CHECK(finite);
	const double mean = sum / VOCAB, sd = sqrt(sq / VOCAB - mean * mean), want = sqrt((double)D) * 0.02;
	printf("logits: mean %.4f, deviation %.4f (weights' 0.02 gives %.4f)\n", mean, sd, want);
	CHECK(fabs(mean) < 0.3 * want);
	CHECK(sd > 0.8 * want && sd < 1.2 * want);
	CHECK(memcmp(a, b, sizeof a) == 0);
	CHECK(memcmp(a, o, sizeof a) != 0);

	infs_model_free(m);
	infs_model_free(same);
	infs_model_free(other);
	CHECK_DONE();
}
