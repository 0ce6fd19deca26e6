/* One model, forward passes from four threads at once (one on the model's
 * kept pool, the others on pools of their own): every thread gets the
 * logits and K/V of a pass run alone. */
#include <math.h>
#include <pthread.h>
#include <string.h>

#include "check.h"

#define N 12
#define ROUNDS 20

static infs_model *model;
static float want_logits[N * 128], want_k[2 * N * 2 * 16];
static int32_t tokens[N];
static int bad[4];

static void *worker(void *arg)
{
	int id = (int)(intptr_t)arg;
	float logits[N * 128], k[2 * N * 2 * 16];
	infs_forward_options fo = INFS_FORWARD_OPTIONS_INIT;
	fo.all_logits = 1;
	for (int r = 0; r < ROUNDS; r++) {
		if (infs_model_forward(logits, k, NULL, model, tokens, NULL, N, &fo) != INFS_OK) {
			bad[id]++;
			continue;
		}
		for (int i = 0; i < N * 128; i++)
			if (fabsf(logits[i] - want_logits[i]) > 1e-5f)
				bad[id]++;
		for (int i = 0; i < 2 * N * 2 * 16; i++)
			if (fabsf(k[i] - want_k[i]) > 1e-5f)
				bad[id]++;
	}
	return NULL;
}

int main(int argc, char **argv)
{
	CHECK(argc == 2);
	if (argc != 2)
		CHECK_DONE();
	char path[1024];
	snprintf(path, sizeof path, "%s/llama", argv[1]);
	infs_model_options mo = INFS_MODEL_OPTIONS_INIT;
	mo.n_threads = 2;
	CHECK_OK(infs_model_load(&model, path, &mo));
	if (!model)
		CHECK_DONE();
	for (int i = 0; i < N; i++)
		tokens[i] = (i * 29 + 3) % 128;
	infs_forward_options fo = INFS_FORWARD_OPTIONS_INIT;
	fo.all_logits = 1;
	CHECK_OK(infs_model_forward(want_logits, want_k, NULL, model, tokens, NULL, N, &fo));
	pthread_t th[4];
	for (int t = 0; t < 4; t++)
		CHECK(pthread_create(&th[t], NULL, worker, (void *)(intptr_t)t) == 0);
	for (int t = 0; t < 4; t++)
		pthread_join(th[t], NULL);
	for (int t = 0; t < 4; t++)
		CHECK(bad[t] == 0);
	infs_model_free(model);
	CHECK_DONE();
}
