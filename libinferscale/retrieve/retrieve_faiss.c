/* FAISS through its C API (faiss/c_api, library faiss_c). FAISS reports
 * failures as a status plus a per-thread message; each becomes an infs
 * error carrying that message. */
#include "retrieve/retrieve_faiss.h"

#include <faiss/c_api/AutoTune_c.h>
#include <faiss/c_api/Index_c.h>
#include <faiss/c_api/error_c.h>
#include <faiss/c_api/index_factory_c.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "retrieve/topk.h"

static int faiss_fail(int code, const char *what, const char *factory)
{
	const char *msg = faiss_get_last_error();
	return infs__error(code, "FAISS %s (index \"%s\") failed: %s", what, factory,
	                   msg && *msg ? msg : "no message from FAISS");
}

/* Sets search parameters ("efSearch=64,nprobe=16", FAISS's ParameterSpace
 * syntax) on a built index. */
static int set_params(FaissIndex *ix, const char *params, const char *spec)
{
	FaissParameterSpace *ps = NULL;
	if (faiss_ParameterSpace_new(&ps))
		return faiss_fail(INFS_ENOMEM, "parameter space", spec);
	int rc = INFS_OK;
	if (faiss_ParameterSpace_set_index_parameters(ps, ix, params))
		rc = faiss_fail(INFS_EINVAL, "search parameters", spec);
	faiss_ParameterSpace_free(ps);
	return rc;
}

int infs__faiss_build(void **out_index, const char *spec, const float *rows, const float *inv_norms, size_t n,
                      size_t dim)
{
	/* "factory" or "factory params": the factory string has no spaces */
	const char *sp = strchr(spec, ' ');
	size_t flen = sp ? (size_t)(sp - spec) : strlen(spec);
	char *factory = malloc(flen + 1);
	if (!factory)
		return infs__error(INFS_ENOMEM, "FAISS index \"%s\": out of memory", spec);
	memcpy(factory, spec, flen);
	factory[flen] = '\0';
	FaissIndex *ix = NULL;
	int made = faiss_index_factory(&ix, (int)dim, factory, METRIC_INNER_PRODUCT);
	free(factory);
	if (made)
		return faiss_fail(INFS_EINVAL, "index factory", spec);
	while (sp && *sp == ' ')
		sp++;
	int rc = sp && *sp ? set_params(ix, sp, spec) : INFS_OK;
	const float *x = rows;
	float *normed = NULL;
	if (rc == INFS_OK && inv_norms) {
		normed = malloc(n * dim * sizeof *normed);
		if (!normed)
			rc = infs__error(INFS_ENOMEM, "FAISS index \"%s\": out of memory for %zu rows", spec, n);
		for (size_t i = 0; normed && i < n; i++)
			for (size_t d = 0; d < dim; d++)
				normed[i * dim + d] = rows[i * dim + d] * inv_norms[i];
		x = normed;
	}
	/* an index that cannot be built from these rows (IVF with fewer rows
	 * than lists, say) is unsupported for this input, not a bad argument */
	if (rc == INFS_OK && !faiss_Index_is_trained(ix) && faiss_Index_train(ix, (idx_t)n, x))
		rc = faiss_fail(INFS_EUNSUPPORTED, "training", spec);
	if (rc == INFS_OK && faiss_Index_add(ix, (idx_t)n, x))
		rc = faiss_fail(INFS_EUNSUPPORTED, "add", spec);
	free(normed);
	if (rc) {
		faiss_Index_free(ix);
		return rc;
	}
	*out_index = ix;
	return INFS_OK;
}

int infs__faiss_search(infs_hit *out, size_t *out_n, const void *index, const float *rows, const uint64_t *ids,
                       const float *inv_norms, size_t n, size_t dim, const float *queries, size_t n_queries,
                       size_t k)
{
	float *dist = malloc(n_queries * k * sizeof *dist);
	idx_t *labels = malloc(n_queries * k * sizeof *labels);
	if (!dist || !labels) {
		free(dist);
		free(labels);
		return infs__error(INFS_ENOMEM, "FAISS search: out of memory for %zu results", n_queries * k);
	}
	int rc = INFS_OK;
	if (faiss_Index_search(index, (idx_t)n_queries, queries, (idx_t)k, dist, labels)) {
		const char *msg = faiss_get_last_error();
		rc = infs__error(INFS_EUNSUPPORTED, "FAISS search failed: %s", msg && *msg ? msg : "no message from FAISS");
	} else {
		for (size_t q = 0; q < n_queries; q++) {
			infs_hit *h = out + q * k;
			size_t m = 0;
			for (size_t j = 0; j < k; j++) {
				idx_t l = labels[q * k + j];
				if (l >= 0 && (size_t)l < n) /* -1 fills up when fewer than k were found */
					h[m++] = (infs_hit){ (uint64_t)l, dist[q * k + j] };
			}
			infs__hits_rescore(h, m, rows, ids, inv_norms, dim, queries + q * dim);
			out_n[q] = m;
		}
	}
	free(dist);
	free(labels);
	return rc;
}

void infs__faiss_index_free(void *index)
{
	faiss_Index_free(index);
}
