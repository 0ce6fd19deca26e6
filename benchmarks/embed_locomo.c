/* Retrieval quality and throughput of the built-in embedder on LoCoMo.
 *
 * For every conversation: embed its memory facts (session_K_observation) and
 * its questions of categories 1-4, rank the conversation's facts by cosine
 * similarity for each question, and count the question as covered at k when
 * every evidence turn (qa[].evidence dia_ids) is cited by one of the k best
 * facts. Prints one JSON object: recall@10/20/50 per category and overall,
 * the ceiling (evidence cited by any fact of the conversation), and the
 * embedding throughput.
 *
 * usage: embed_locomo LOCOMO-DIR [MODEL-DIR [N-THREADS]]
 *   LOCOMO-DIR  ../shared/data/locomo from the checkout
 *   MODEL-DIR   default $INFS_CACHE/minilm (scripts/fetch-models.sh)
 *   N-THREADS   infs_embedder_options.n_threads, default 0 (all cores) */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "inferscale/inferscale.h"

#include "bench_common.h"
#include "jsonl.h"

#define MAX_CITES 8
#define N_K 3
static const size_t ks[N_K] = {10, 20, 50};

typedef struct fact {
	const char *text;
	const char *cites[MAX_CITES];
	size_t n_cites;
} fact;

typedef struct question {
	const char *text;
	int category;
	char **evidence; /* dia_ids, split at ';' */
	size_t n_evidence;
} question;

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* "D8:6; D9:17" holds two dia_ids; surrounding spaces are not part of one. */
static void split_evidence(question *q, const char *s)
{
	char *copy = strdup(s);
	for (char *tok = strtok(copy, "; "); tok; tok = strtok(NULL, "; ")) {
		q->evidence = realloc(q->evidence, (q->n_evidence + 1) * sizeof *q->evidence);
		q->evidence[q->n_evidence++] = strdup(tok);
	}
	free(copy);
}

static int cited(const fact *f, const char *dia_id)
{
	for (size_t c = 0; c < f->n_cites; c++)
		if (strcmp(f->cites[c], dia_id) == 0)
			return 1;
	return 0;
}

/* Totals over all conversations: [category 1..4, 0 = all][k index, N_K = ceiling] */
static size_t covered[5][N_K + 1], asked[5];
static size_t n_texts_all;
static double wall_all, cpu_all;

static int run_conversation(const infs_embedder *e, const char *path)
{
	size_t len;
	char *text = bench_read_text(path, &len);
	jsonl doc = { 0 };
	if (!text || jsonl_parse(&doc, text, len) || doc.v->type != JSONL_OBJECT) {
		if (!text)
			fprintf(stderr, "%s: cannot read\n", path);
		else if (doc.err)
			fprintf(stderr, "%s:%zu:%zu: %s\n", path, doc.line, doc.col, doc.err);
		else
			fprintf(stderr, "%s: not a JSON object\n", path);
		jsonl_free(&doc);
		free(text);
		return 1;
	}
	const jsonl_value *root = doc.v;

	fact *facts = NULL;
	question *qs = NULL;
	size_t nf = 0, nq = 0;
	const jsonl_value *sess = root + 1;
	for (size_t k = 0; k < root->len; k++, sess = jsonl_next(sess)) {
		const char *key = sess->key;
		size_t kl = strlen(key);
		if (strncmp(key, "session_", 8) != 0 || kl < 12 || strcmp(key + kl - 12, "_observation"))
			continue;
		/* an object of lists (one per speaker) of [text, cites] items */
		const jsonl_value *list = sess + 1;
		for (size_t s = 0; s < sess->len; s++, list = jsonl_next(list)) {
			const jsonl_value *it = list + 1;
			for (size_t i = 0; i < list->len; i++, it = jsonl_next(it)) {
				if (it->type != JSONL_ARRAY || it->len < 2)
					continue;
				facts = realloc(facts, (nf + 1) * sizeof *facts);
				fact *f = &facts[nf++];
				memset(f, 0, sizeof *f);
				f->text = jsonl_str(it + 1, "");
				/* a fact cites one dia_id, or a list of them */
				const jsonl_value *c = jsonl_next(it + 1);
				if (c->type == JSONL_STRING)
					f->cites[f->n_cites++] = c->str;
				const jsonl_value *ci = c + 1;
				for (size_t j = 0; c->type == JSONL_ARRAY && j < c->len && j < MAX_CITES; j++, ci = jsonl_next(ci))
					f->cites[f->n_cites++] = jsonl_str(ci, "");
			}
		}
	}
	const jsonl_value *qa = jsonl_get(root, "qa");
	const jsonl_value *qe = qa ? qa + 1 : NULL;
	for (size_t i = 0; qa && i < qa->len; i++, qe = jsonl_next(qe)) {
		int cat = (int)jsonl_num(jsonl_get(qe, "category"), 0);
		if (cat < 1 || cat > 4)
			continue;
		qs = realloc(qs, (nq + 1) * sizeof *qs);
		question *q = &qs[nq++];
		memset(q, 0, sizeof *q);
		q->text = jsonl_str(jsonl_get(qe, "question"), "");
		q->category = cat;
		const jsonl_value *ev = jsonl_get(qe, "evidence");
		const jsonl_value *item = ev ? ev + 1 : NULL;
		for (size_t j = 0; ev && j < ev->len; j++, item = jsonl_next(item))
			split_evidence(q, jsonl_str(item, ""));
	}

	uint32_t dim = infs_embedder_dim(e);
	size_t n = nf + nq;
	const char **texts = malloc(n * sizeof *texts);
	for (size_t i = 0; i < nf; i++)
		texts[i] = facts[i].text;
	for (size_t i = 0; i < nq; i++)
		texts[nf + i] = qs[i].text;
	float *emb = malloc(n * dim * sizeof *emb);
	double t0 = bench_clock(CLOCK_MONOTONIC), c0 = bench_clock(CLOCK_PROCESS_CPUTIME_ID);
	int rc = infs_embed(emb, e, texts, n, NULL);
	wall_all += bench_clock(CLOCK_MONOTONIC) - t0;
	cpu_all += bench_clock(CLOCK_PROCESS_CPUTIME_ID) - c0;
	n_texts_all += n;
	if (rc) {
		fprintf(stderr, "infs_embed: %s\n", infs_error_last());
		return 1;
	}

	/* Rank facts per question (vectors are unit length: cosine = dot). */
	float *score = malloc(nf * sizeof *score);
	char *taken = malloc(nf);
	for (size_t qi = 0; qi < nq; qi++) {
		const question *q = &qs[qi];
		const float *qv = emb + (nf + qi) * dim;
		for (size_t f = 0; f < nf; f++) {
			float s = 0;
			for (uint32_t d = 0; d < dim; d++)
				s += qv[d] * emb[f * dim + d];
			score[f] = s;
		}
		/* rank r = the r-th best fact; selection is enough for k <= 50 */
		memset(taken, 0, nf);
		size_t need = q->n_evidence, got_at[N_K + 1] = {0};
		char *found = calloc(need ? need : 1, 1);
		size_t n_found = 0;
		for (size_t r = 0; r < nf; r++) {
			size_t best = nf;
			for (size_t f = 0; f < nf; f++)
				if (!taken[f] && (best == nf || score[f] > score[best]))
					best = f;
			taken[best] = 1;
			for (size_t ev = 0; ev < need; ev++)
				if (!found[ev] && cited(&facts[best], q->evidence[ev])) {
					found[ev] = 1;
					n_found++;
				}
			for (int ki = 0; ki < N_K; ki++)
				if (r + 1 == ks[ki])
					got_at[ki] = n_found;
			if (r + 1 >= ks[N_K - 1] && n_found == need)
				break;
		}
		/* facts past the last k only matter for the ceiling */
		for (size_t f = 0; f < nf; f++)
			for (size_t ev = 0; ev < need; ev++)
				if (!found[ev] && cited(&facts[f], q->evidence[ev])) {
					found[ev] = 1;
					n_found++;
				}
		for (int ki = 0; ki < N_K; ki++)
			if (nf < ks[ki])
				got_at[ki] = n_found;
		got_at[N_K] = n_found;
		for (int ki = 0; ki <= N_K; ki++) {
			int ok = need > 0 && got_at[ki] == need;
			covered[q->category][ki] += ok;
			covered[0][ki] += ok;
		}
		asked[q->category]++;
		asked[0]++;
		free(found);
	}

	for (size_t i = 0; i < nq; i++) {
		for (size_t j = 0; j < qs[i].n_evidence; j++)
			free(qs[i].evidence[j]);
		free(qs[i].evidence);
	}
	free(score);
	free(taken);
	free(emb);
	free(texts);
	free(facts);
	free(qs);
	jsonl_free(&doc);
	free(text);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 2 || argc > 4) {
		fprintf(stderr, "usage: embed_locomo LOCOMO-DIR [MODEL-DIR [N-THREADS]]\n");
		return 2;
	}
	char model[4096];
	if (argc > 2)
		snprintf(model, sizeof model, "%s", argv[2]);
	else
		bench_model_path(model, sizeof model, "minilm");
	infs_embedder_options o = INFS_EMBEDDER_OPTIONS_INIT;
	o.n_threads = argc > 3 ? (uint32_t)strtoul(argv[3], NULL, 10) : 0;
	infs_embedder *e;
	if (infs_embedder_load(&e, model, &o) != INFS_OK) {
		fprintf(stderr, "%s\n", infs_error_last());
		return 1;
	}

	DIR *d = opendir(argv[1]);
	if (!d) {
		fprintf(stderr, "%s: cannot open\n", argv[1]);
		return 1;
	}
	char *names[256];
	size_t nn = 0;
	for (struct dirent *de; (de = readdir(d)) && nn < 256;) {
		size_t l = strlen(de->d_name);
		if (strncmp(de->d_name, "conv-", 5) == 0 && l > 5 && strcmp(de->d_name + l - 5, ".json") == 0)
			names[nn++] = strdup(de->d_name);
	}
	closedir(d);
	qsort(names, nn, sizeof *names, by_name);
	int rc = 0;
	for (size_t i = 0; i < nn && !rc; i++) {
		char path[4096];
		snprintf(path, sizeof path, "%s/%s", argv[1], names[i]);
		rc = run_conversation(e, path);
	}

	printf("{\n  \"benchmark\": \"embed_locomo\",\n  \"model\": \"%s\",\n", model);
	char cpu[256];
	bench_cpu_name(cpu, sizeof cpu);
	const char *coretype = getenv("OPENBLAS_CORETYPE");
	printf("  \"hardware\": {\"cpu\": \"%s\", \"cores_online\": %ld},\n", cpu,
	       sysconf(_SC_NPROCESSORS_ONLN));
	printf("  \"conversations\": %zu,\n  \"features\": {\"blas\": %s, "
	       "\"OPENBLAS_CORETYPE\": \"%s\"},\n", nn,
	       infs_features() & INFS_FEATURE_BLAS ? "true" : "false", coretype ? coretype : "");
	printf("  \"questions\": {\"all\": %zu, \"1\": %zu, \"2\": %zu, \"3\": %zu, \"4\": %zu},\n",
	       asked[0], asked[1], asked[2], asked[3], asked[4]);
	printf("  \"recall\": {\n");
	for (int c = 0; c <= 4; c++) {
		printf("    \"%s\": {", c == 0 ? "all" : c == 1 ? "1" : c == 2 ? "2" : c == 3 ? "3" : "4");
		for (int ki = 0; ki <= N_K; ki++) {
			double r = asked[c] ? (double)covered[c][ki] / (double)asked[c] : 0;
			if (ki < N_K)
				printf("\"@%zu\": %.4f, ", ks[ki], r);
			else
				printf("\"ceiling\": %.4f}", r);
		}
		printf("%s\n", c < 4 ? "," : "");
	}
	printf("  },\n  \"embedding\": {\"texts\": %zu, \"threads\": %u, "
	       "\"wall_s\": %.3f, \"cpu_s\": %.3f, \"texts_per_s\": %.1f}\n}\n",
	       n_texts_all, o.n_threads ? o.n_threads : (unsigned)sysconf(_SC_NPROCESSORS_ONLN), wall_all, cpu_all,
	       (double)n_texts_all / wall_all);
	for (size_t i = 0; i < nn; i++)
		free(names[i]);
	infs_embedder_free(e);
	return rc;
}
