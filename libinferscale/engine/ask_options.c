/* What an ask needs before it runs: the engine's prompt layout, the
 * options of infs_engine_ask checked and defaulted, and the attention
 * calibration they ask for. */
#include <math.h>

#include "engine/engine_impl.h"
#include "store/store.h"
#include "util/error.h"
#include "util/options.h"

int infs__engine_need_prompt(const infs_engine *e, const char *fn)
{
	if (e->have_prompt)
		return INFS_OK;
	return infs__error(e->prompt_rc ? e->prompt_rc : INFS_EUNSUPPORTED, "%s: the engine has no prompt layout (the model's tokenizer or chat template is missing)", fn);
}

int infs__calib_of(infs__calib *c, const infs_ask_options *o, size_t n_facts, uint32_t lo, uint32_t hi)
{
	const float scale = o->fact_scale > 0.0f ? o->fact_scale : 1.0f / sqrtf((float)(n_facts ? n_facts : 1));
	if (o->fact_temperature == 1.0f && scale == 1.0f)
		return 0; /* off: the attention of plain injection, bit for bit */
	c->lo = lo;
	c->hi = hi;
	c->inv_temp = 1.0f / o->fact_temperature;
	c->log_scale = logf(scale);
	return 1;
}

int infs__ask_take(infs_ask_options *po, const infs_engine *e, const infs_store *store,
                   const infs_embedder *embedder, const infs_ask_options *opts, const char *fn)
{
	infs_ask_options o = INFS_ASK_OPTIONS_INIT;
	int rc = INFS__TAKE(o, opts, infs__sizes_ask_options, fn, "options");
	if (rc)
		return rc;
	rc = infs__engine_need_prompt(e, fn);
	if (rc)
		return rc;
	if (e->prepared != store || e->prepared_serial != infs__store_serial(store))
		return infs__error(INFS_EINVAL, "%s: run infs_engine_prepare on this store first", fn);
	if (!o.k)
		o.k = 10;
	if (o.k > INFS_RETRIEVE_K_MAX)
		return infs__error(INFS_ERANGE, "%s: k %u is above %u", fn, o.k, INFS_RETRIEVE_K_MAX);
	if (o.n_fact_ids && !o.fact_ids)
		return infs__error(INFS_EINVAL, "%s: n_fact_ids %zu with NULL fact_ids", fn, o.n_fact_ids);
	if (!o.fact_ids && !embedder)
		return infs__error(INFS_EINVAL, "%s: no embedder to retrieve with", fn);
	if (!(o.recompute_ratio >= 0.0f && o.recompute_ratio <= 1.0f))
		return infs__error(INFS_ERANGE, "%s: recompute_ratio %g is not in [0, 1]", fn, (double)o.recompute_ratio);
	if (!(o.query_weight >= 0.0f && o.query_weight <= 1.0f))
		return infs__error(INFS_ERANGE, "%s: query_weight %g is not in [0, 1]", fn, (double)o.query_weight);
	if (o.check_layer >= e->geom.n_layers)
		return infs__error(INFS_ERANGE, "%s: check_layer %u: the model has %u layers", fn, o.check_layer,
		                   e->geom.n_layers);
	/* Recomputing every token is full recompute, exactly. */
	if (o.recompute_ratio >= 1.0f)
		o.full_recompute = 1;
	if (!(o.fact_temperature > 0.0f && o.fact_temperature <= 1e3f) || !(o.fact_scale >= 0.0f && o.fact_scale <= 1e3f))
		return infs__error(INFS_ERANGE, "%s: fact_temperature %g, fact_scale %g: the temperature must be in "
		                   "(0, 1000], the scale in (0, 1000] or 0 for 1 / sqrt(facts) (1 and 1: no calibration)",
		                   fn, (double)o.fact_temperature, (double)o.fact_scale);
	infs_generate_options g = INFS_GENERATE_OPTIONS_INIT;
	if ((rc = INFS__TAKE(g, &o.generate, infs__sizes_generate_options, fn, "generate options")))
		return rc;
	if (!g.max_tokens)
		g.max_tokens = 64;
	if (!(g.top_p > 0 && g.top_p <= 1) || g.temperature != g.temperature)
		return infs__error(INFS_ERANGE, "%s: top_p %g is outside (0, 1] or the temperature is NaN", fn,
		                   (double)g.top_p);
	o.generate = g;
	*po = o;
	return INFS_OK;
}
