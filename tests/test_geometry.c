/* Geometry validation, defaults and the error-state conventions. */
#include <string.h>

#include "check.h"
#include "util/geometry.h"
#include "test_util.h"

static infs_geometry smol(void)
{
	infs_geometry g = test_geometry(30, 3, 64, INFS_DTYPE_F16);
	g.rope_theta = 100000.0;
	g.embed_dim = 384;
	return g;
}

int main(void)
{
	infs_geometry g = smol(), h;
	CHECK_OK(infs_geometry_validate(&g));
	CHECK(infs_geometry_kv_token_bytes(&g) == 30u * 3 * 64 * 2);

	CHECK_ERR(infs_geometry_validate(NULL), INFS_EINVAL);
	h = g;
	h.version = 99;
	CHECK_ERR(infs_geometry_validate(&h), INFS_EINVAL);
	CHECK(strstr(infs_error_last(), "version") != NULL);
	h = g;
	h.rotary_dim = 63;
	CHECK_ERR(infs_geometry_validate(&h), INFS_EINVAL);
	CHECK(strstr(infs_error_last(), "rotary_dim") != NULL);
	h = g;
	h.rotary_dim = 66;
	CHECK_ERR(infs_geometry_validate(&h), INFS_EINVAL);
	h = g;
	h.kv_dtype = (infs_dtype)7;
	CHECK_ERR(infs_geometry_validate(&h), INFS_EINVAL);
	CHECK(strstr(infs_error_last(), "kv_dtype") != NULL);
	h = g;
	h.rope_scaling = INFS_ROPE_SCALING_LLAMA3;
	h.rope_low_freq_factor = 4;
	h.rope_high_freq_factor = 1;
	CHECK_ERR(infs_geometry_validate(&h), INFS_EINVAL);
	h = g;
	h.n_layers = 0;
	CHECK_ERR(infs_geometry_validate(&h), INFS_EINVAL);
	CHECK(infs_error_last_code() == INFS_EINVAL);

	/* Diff names the first differing field, ignores unused scaling params. */
	h = g;
	CHECK(infs__geometry_diff(&g, &h) == NULL);
	h.rope_factor = 3;
	CHECK(infs__geometry_diff(&g, &h) == NULL);
	h.head_dim = 128;
	CHECK(infs__geometry_diff(&g, &h) != NULL && strcmp(infs__geometry_diff(&g, &h), "head_dim") == 0);

	CHECK_ERR(infs_geometry_init(&h, 2), INFS_EINVAL);
	CHECK_OK(infs_geometry_init(&h, INFS_GEOMETRY_VERSION));
	CHECK(h.rope_style == INFS_ROPE_NEOX && h.kv_dtype == INFS_DTYPE_F16);

	CHECK(strcmp(infs_strerror(INFS_ECORRUPT), "corrupt file") == 0);
	CHECK(strcmp(infs_strerror(12345), "unknown status code") == 0);
	infs_free(NULL);
	CHECK_DONE();
}
