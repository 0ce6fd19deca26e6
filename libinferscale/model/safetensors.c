#include "model/safetensors.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/error.h"
#include "util/file.h"
#include "util/json.h"

/* Headers of real checkpoints are a few hundred KB; this bounds a corrupt
 * length field before anything is allocated. */
#define MAX_HEADER (100u << 20)
#define MAX_SHARDS 4096

typedef struct shard {
	char *path;
	void *map;
	size_t size;
} shard;

struct infs__safetensors {
	shard *shards;
	size_t n_shards;
	infs__st_tensor *tensors; /* sorted by name */
	size_t n_tensors;
	char *strings;            /* names and dtype spellings, one block per shard */
	char **blocks;
	size_t n_blocks;
};

static const struct {
	const char *name;
	infs__st_dtype dtype;
	unsigned size;
} dtypes[] = {
	{ "F32", INFS_ST_F32, 4 },   { "F16", INFS_ST_F16, 2 },     { "BF16", INFS_ST_BF16, 2 },
	{ "F64", INFS_ST_OTHER, 8 }, { "I64", INFS_ST_OTHER, 8 },   { "U64", INFS_ST_OTHER, 8 },
	{ "I32", INFS_ST_OTHER, 4 }, { "U32", INFS_ST_OTHER, 4 },   { "I16", INFS_ST_OTHER, 2 },
	{ "U16", INFS_ST_OTHER, 2 }, { "I8", INFS_ST_OTHER, 1 },    { "U8", INFS_ST_OTHER, 1 },
	{ "BOOL", INFS_ST_OTHER, 1 },{ "F8_E4M3", INFS_ST_OTHER, 1 },{ "F8_E5M2", INFS_ST_OTHER, 1 },
};

void infs__safetensors_close(infs__safetensors *st)
{
	if (!st)
		return;
	for (size_t i = 0; i < st->n_shards; i++) {
		if (st->shards[i].map)
			munmap(st->shards[i].map, st->shards[i].size);
		free(st->shards[i].path);
	}
	for (size_t i = 0; i < st->n_blocks; i++)
		free(st->blocks[i]);
	free(st->blocks);
	free(st->shards);
	free(st->tensors);
	free(st);
}

static int map_file(shard *sh, const char *path)
{
	int fd;
	size_t size;
	int rc = infs__file_open(&fd, &size, path, UINT64_MAX);
	if (rc)
		return rc;
	if (size < 8) {
		close(fd);
		return infs__error(INFS_EFORMAT, "%s: truncated: %zu bytes, too short for a safetensors header",
		                   path, size);
	}
	void *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
	int e = errno;
	close(fd);
	if (map == MAP_FAILED)
		return infs__error(INFS_EIO, "%s: mmap: %s", path, strerror(e));
	sh->map = map;
	sh->size = size;
	return INFS_OK;
}

/* A non-negative integer that a double holds exactly. */
static int as_u64(const infs__json *v, uint64_t *out)
{
	if (!v || v->type != INFS_JSON_NUMBER || !(v->number >= 0) || v->number > 9007199254740992.0 ||
	    v->number != (double)(uint64_t)v->number)
		return 0;
	*out = (uint64_t)v->number;
	return 1;
}

static int parse_entry(infs__st_tensor *t, const char *key, const infs__json *e, const shard *sh,
                       size_t data_off)
{
	const char *path = sh->path;
	if (e->type != INFS_JSON_OBJECT)
		return infs__error(INFS_EFORMAT, "%s: header entry \"%s\" is not an object", path, key);
	const char *dt = infs__json_str(infs__json_get(e, "dtype"), NULL);
	if (!dt)
		return infs__error(INFS_EFORMAT, "%s: tensor \"%s\" has no dtype", path, key);
	size_t k = 0, nd = sizeof dtypes / sizeof dtypes[0];
	while (k < nd && strcmp(dtypes[k].name, dt) != 0)
		k++;
	if (k == nd)
		return infs__error(INFS_EFORMAT, "%s: tensor \"%s\" has unknown dtype \"%s\"", path, key, dt);
	const infs__json *shape = infs__json_get(e, "shape");
	if (!shape || shape->type != INFS_JSON_ARRAY || shape->len > INFS_ST_MAX_DIMS)
		return infs__error(INFS_EFORMAT, "%s: tensor \"%s\" has no shape or more than %d dimensions",
		                   path, key, INFS_ST_MAX_DIMS);
	uint64_t n = 1;
	for (size_t i = 0; i < shape->len; i++) {
		uint64_t d;
		if (!as_u64(&shape->items[i], &d))
			return infs__error(INFS_EFORMAT, "%s: tensor \"%s\": shape[%zu] is not a non-negative integer",
			                   path, key, i);
		if (d && n > UINT64_MAX / d)
			return infs__error(INFS_EFORMAT, "%s: tensor \"%s\": shape overflows", path, key);
		n *= d;
		t->shape[i] = d;
	}
	const infs__json *offs = infs__json_get(e, "data_offsets");
	uint64_t begin, end;
	if (!offs || offs->type != INFS_JSON_ARRAY || offs->len != 2 || !as_u64(&offs->items[0], &begin) ||
	    !as_u64(&offs->items[1], &end) || begin > end)
		return infs__error(INFS_EFORMAT, "%s: tensor \"%s\": data_offsets must be [begin, end] with begin <= end",
		                   path, key);
	uint64_t data_len = sh->size - data_off;
	if (end > data_len)
		return infs__error(INFS_EFORMAT, "%s: tensor \"%s\": data_offsets [%llu, %llu] run past the %llu data bytes (truncated file?)",
		                   path, key, (unsigned long long)begin, (unsigned long long)end,
		                   (unsigned long long)data_len);
	if (n > UINT64_MAX / dtypes[k].size || end - begin != n * dtypes[k].size)
		return infs__error(INFS_EFORMAT, "%s: tensor \"%s\": %llu bytes do not hold %llu elements of %s",
		                   path, key, (unsigned long long)(end - begin), (unsigned long long)n, dt);
	t->dtype = dtypes[k].dtype;
	t->dtype_name = dtypes[k].name;
	t->n_dims = (uint32_t)shape->len;
	t->n_elems = n;
	t->data = (const char *)sh->map + data_off + begin;
	t->nbytes = (size_t)(end - begin);
	t->file = sh->path;
	return INFS_OK;
}

/* Maps path and appends its tensors to st. */
static int add_shard(infs__safetensors *st, const char *path, size_t *cap)
{
	shard *sh = &st->shards[st->n_shards];
	memset(sh, 0, sizeof *sh);
	if (!(sh->path = strdup(path)))
		return infs__error(INFS_ENOMEM, "out of memory");
	st->n_shards++;
	int rc = map_file(sh, path);
	if (rc)
		return rc;
	const unsigned char *p = sh->map;
	uint64_t hlen = 0;
	for (int i = 7; i >= 0; i--)
		hlen = hlen << 8 | p[i];
	if (hlen > sh->size - 8)
		return infs__error(INFS_EFORMAT, "%s: header length %llu runs past the %zu-byte file (truncated?)",
		                   path, (unsigned long long)hlen, sh->size);
	if (hlen > MAX_HEADER)
		return infs__error(INFS_EFORMAT, "%s: header length %llu is above %u", path,
		                   (unsigned long long)hlen, MAX_HEADER);
	infs__json *root = NULL;
	rc = infs__json_parse(&root, (const char *)p + 8, (size_t)hlen);
	if (rc)
		return infs__error_wrap(rc, "%s: header", path);
	if (root->type != INFS_JSON_OBJECT) {
		infs__json_free(root);
		return infs__error(INFS_EFORMAT, "%s: header is not a JSON object", path);
	}
	/* Names and dtype spellings are kept in one block per shard. */
	size_t names = 0, count = 0;
	for (size_t i = 0; i < root->len; i++) {
		if (strcmp(root->keys[i], "__metadata__") == 0)
			continue;
		names += strlen(root->keys[i]) + 1;
		count++;
	}
	char *block = malloc(names ? names : 1);
	if (!block) {
		infs__json_free(root);
		return infs__error(INFS_ENOMEM, "out of memory");
	}
	st->blocks[st->n_blocks++] = block;
	if (st->n_tensors + count > *cap) {
		size_t ncap = (st->n_tensors + count) * 2;
		infs__st_tensor *nt = realloc(st->tensors, ncap * sizeof *nt);
		if (!nt) {
			infs__json_free(root);
			return infs__error(INFS_ENOMEM, "out of memory");
		}
		st->tensors = nt;
		*cap = ncap;
	}
	for (size_t i = 0; i < root->len; i++) {
		const char *key = root->keys[i];
		if (strcmp(key, "__metadata__") == 0)
			continue;
		infs__st_tensor *t = &st->tensors[st->n_tensors];
		memset(t, 0, sizeof *t);
		rc = parse_entry(t, key, &root->items[i], sh, 8 + (size_t)hlen);
		if (rc) {
			infs__json_free(root);
			return rc;
		}
		size_t kl = strlen(key) + 1;
		memcpy(block, key, kl);
		t->name = block;
		block += kl;
		st->n_tensors++;
	}
	infs__json_free(root);
	return INFS_OK;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(((const infs__st_tensor *)a)->name, ((const infs__st_tensor *)b)->name);
}

/* The shard file names of a sharded checkpoint's index, deduplicated. */
static int read_index(char ***out, size_t *n_out, const char *index_path)
{
	char *text = NULL;
	size_t len = 0;
	int rc = infs__file_read(&text, &len, index_path, MAX_HEADER);
	if (rc)
		return rc;
	infs__json *root = NULL;
	rc = infs__json_parse(&root, text, len);
	free(text);
	if (rc)
		return infs__error_wrap(rc, "%s", index_path);
	const infs__json *map = infs__json_get(root, "weight_map");
	if (!map || map->type != INFS_JSON_OBJECT || map->len == 0) {
		infs__json_free(root);
		return infs__error(INFS_EFORMAT, "%s: no weight_map object", index_path);
	}
	char **names = calloc(map->len, sizeof *names);
	size_t n = 0;
	rc = names ? INFS_OK : infs__error(INFS_ENOMEM, "out of memory");
	for (size_t i = 0; !rc && i < map->len; i++) {
		const char *file = infs__json_str(&map->items[i], NULL);
		if (!file || !file[0] || strchr(file, '/') || strcmp(file, "..") == 0) {
			rc = infs__error(INFS_EFORMAT, "%s: weight_map entry \"%s\" is not a file name beside the index",
			                 index_path, map->keys[i]);
			break;
		}
		size_t j = 0;
		while (j < n && strcmp(names[j], file) != 0)
			j++;
		if (j < n)
			continue;
		if (n == MAX_SHARDS)
			rc = infs__error(INFS_EFORMAT, "%s: more than %d shards", index_path, MAX_SHARDS);
		else if (!(names[n++] = strdup(file)))
			rc = infs__error(INFS_ENOMEM, "out of memory");
	}
	infs__json_free(root);
	if (rc) {
		for (size_t j = 0; j < n; j++)
			free(names[j]);
		free(names);
		return rc;
	}
	*out = names;
	*n_out = n;
	return INFS_OK;
}

int infs__safetensors_open(infs__safetensors **out, const char *path)
{
	struct stat sb;
	if (stat(path, &sb) != 0)
		return infs__error(errno == ENOENT ? INFS_ENOTFOUND : INFS_EIO, "%s: %s", path, strerror(errno));
	char **files = NULL;
	size_t n_files = 0;
	int rc = INFS_OK;
	if (S_ISDIR(sb.st_mode)) {
		char *index = infs__path_join(path, "model.safetensors.index.json");
		if (!index)
			return infs__error(INFS_ENOMEM, "out of memory");
		if (access(index, F_OK) == 0) {
			rc = read_index(&files, &n_files, index);
			for (size_t i = 0; !rc && i < n_files; i++) {
				char *full = infs__path_join(path, files[i]);
				if (!full)
					rc = infs__error(INFS_ENOMEM, "out of memory");
				free(files[i]);
				files[i] = full;
			}
		} else {
			files = calloc(1, sizeof *files);
			if (files && (files[0] = infs__path_join(path, "model.safetensors")))
				n_files = 1;
			else
				rc = infs__error(INFS_ENOMEM, "out of memory");
		}
		free(index);
	} else {
		files = calloc(1, sizeof *files);
		if (files && (files[0] = strdup(path)))
			n_files = 1;
		else
			rc = infs__error(INFS_ENOMEM, "out of memory");
	}

	infs__safetensors *st = rc ? NULL : calloc(1, sizeof *st);
	if (!rc && (!st || !(st->shards = calloc(n_files, sizeof *st->shards)) ||
	            !(st->blocks = calloc(n_files, sizeof *st->blocks))))
		rc = infs__error(INFS_ENOMEM, "out of memory");
	size_t cap = 0;
	for (size_t i = 0; !rc && i < n_files; i++)
		rc = add_shard(st, files[i], &cap);
	for (size_t i = 0; i < n_files; i++)
		free(files[i]);
	free(files);
	if (!rc && st->n_tensors > 1) {
		qsort(st->tensors, st->n_tensors, sizeof *st->tensors, by_name);
		for (size_t i = 1; i < st->n_tensors; i++) {
			if (strcmp(st->tensors[i - 1].name, st->tensors[i].name) == 0) {
				rc = infs__error(INFS_EFORMAT, "tensor \"%s\" appears in %s and in %s",
				                 st->tensors[i].name, st->tensors[i - 1].file, st->tensors[i].file);
				break;
			}
		}
	}
	if (rc) {
		infs__safetensors_close(st);
		return rc;
	}
	*out = st;
	return INFS_OK;
}

size_t infs__safetensors_count(const infs__safetensors *st)
{
	return st->n_tensors;
}

const infs__st_tensor *infs__safetensors_at(const infs__safetensors *st, size_t i)
{
	return i < st->n_tensors ? &st->tensors[i] : NULL;
}

const infs__st_tensor *infs__safetensors_find(const infs__safetensors *st, const char *name)
{
	infs__st_tensor key;
	key.name = name;
	if (!st->n_tensors)
		return NULL;
	return bsearch(&key, st->tensors, st->n_tensors, sizeof key, by_name);
}
