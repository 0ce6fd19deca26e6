/* The store file under damage: truncation at every offset, flipped bytes in
 * the header and in records, wrong magic, a future format version, junk
 * after the last record, and the checksum itself. */
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "store/crc32c.h"
#include "store/store.h"
#include "test_store_util.h"

#define N_OPS 8

static unsigned char *slurp(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	*n = (size_t)ftell(f);
	fseek(f, 0, SEEK_SET);
	unsigned char *b = malloc(*n ? *n : 1);
	if (fread(b, 1, *n, f) != *n)
		*n = 0;
	fclose(f);
	return b;
}

/* Writes a new file (not truncating the old one: ext4 flushes files that
 * are truncated to zero and rewritten, which makes thousands of them slow). */
static void spit(const char *path, const void *b, size_t n)
{
	char torn[700];
	snprintf(torn, sizeof torn, "%s.torn", path);
	unlink(torn); /* left by a writer that opened the previous copy */
	unlink(path);
	FILE *f = fopen(path, "wb");
	if (!f || fwrite(b, 1, n, f) != n)
		abort();
	fclose(f);
}

static uint64_t file_size(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
}

/* The small store every test damages: puts of seeds 0..N_OPS-1 in two
 * namespaces with one delete in the middle. ends[k] is where record k ends;
 * record N_OPS/2 is the delete of the first fact. */
typedef struct layout {
	infs_geometry g;
	uint64_t ids[N_OPS];
	uint64_t ends[N_OPS + 2]; /* ends[0]: the header */
	int is_delete[N_OPS + 1];
	int n_rec;
} layout;

static void build(layout *l, const char *path, infs_dtype dtype)
{
	infs_store *s;
	infs_store_stats st = { .version = INFS_STORE_STATS_VERSION };
	l->g = small_geometry(dtype);
	unlink(path);
	CHECK_OK(open_store(&s, path, &l->g, INFS_OPEN_CREATE, INFS_SYNC_OFF));
	CHECK_OK(infs_store_stats_get(&st, s));
	l->ends[0] = st.file_bytes;
	l->n_rec = 0;
	for (int i = 0; i < N_OPS; i++) {
		gen_fact f;
		gen_fact_make(&f, &l->g, (uint64_t)i, i == 5 ? INFS_FACT_SEGMENT : 0);
		CHECK_OK(infs_fact_put(&l->ids[i], s, i % 2 ? "odd" : "even", &f.fact));
		gen_fact_free(&f);
		CHECK_OK(infs_store_stats_get(&st, s));
		l->is_delete[l->n_rec] = 0;
		l->ends[++l->n_rec] = st.file_bytes;
		if (i == N_OPS / 2 - 1) {
			CHECK_OK(infs_fact_delete(s, "even", l->ids[0]));
			CHECK_OK(infs_store_stats_get(&st, s));
			l->is_delete[l->n_rec] = 1;
			l->ends[++l->n_rec] = st.file_bytes;
		}
	}
	infs_store_close(s);
}

/* Checks that s holds exactly the facts of the first n_rec records. */
static void check_prefix(infs_store *s, const layout *l, int n_rec)
{
	int puts = 0, deleted = 0;
	for (int r = 0; r < n_rec; r++) {
		if (l->is_delete[r])
			deleted = 1;
		else
			puts++;
	}
	for (int i = 0; i < N_OPS; i++) {
		infs_fact_record *rec = NULL;
		int rc = infs_fact_get(&rec, s, i % 2 ? "odd" : "even", l->ids[i]);
		int want = i < puts && !(i == 0 && deleted);
		CHECK(want ? rc == INFS_OK : rc == INFS_ENOTFOUND);
		if (rc == INFS_OK)
			CHECK(gen_fact_matches(rec, &l->g, (uint64_t)i, i == 5 ? INFS_FACT_SEGMENT : 0));
		infs_fact_record_free(rec);
	}
}

static void crc(void)
{
	CHECK(infs__crc32c(0, "123456789", 9) == 0xe3069283u);
	CHECK(infs__crc32c_sw(0, "123456789", 9) == 0xe3069283u);
	CHECK(infs__crc32c(0, "", 0) == 0);
	unsigned char buf[1000];
	uint64_t st = 5;
	for (size_t i = 0; i < sizeof buf; i++)
		buf[i] = (unsigned char)rng_next(&st);
	for (size_t off = 0; off < 9; off++)
		for (size_t n = 0; n + off <= sizeof buf; n += 37) {
			uint32_t whole = infs__crc32c_sw(0, buf + off, n);
			CHECK(infs__crc32c(0, buf + off, n) == whole);
			CHECK(infs__crc32c(infs__crc32c(0, buf + off, n / 3), buf + off + n / 3, n - n / 3) == whole);
		}
	/* lengths around the hardware path's blocks of three 2 KiB streams */
	enum { BIG = 40000 };
	unsigned char *big = malloc(BIG);
	CHECK(big != NULL);
	for (size_t i = 0; big && i < BIG; i++)
		big[i] = (unsigned char)rng_next(&st);
	static const size_t lens[] = { 6143, 6144, 6145, 6151, 12288, 12295, 24680, 39990 };
	for (size_t j = 0; big && j < sizeof lens / sizeof *lens; j++)
		for (size_t off = 0; off < 9; off += 3) {
			uint32_t whole = infs__crc32c_sw(0, big + off, lens[j]);
			CHECK(infs__crc32c(0, big + off, lens[j]) == whole);
			CHECK(infs__crc32c(infs__crc32c(0, big + off, lens[j] / 2), big + off + lens[j] / 2, lens[j] - lens[j] / 2) ==
			      whole);
		}
	free(big);
}

static void truncate_everywhere(void)
{
	char path[600], cut[600];
	scratch_path(path, sizeof path, "full.infs");
	scratch_path(cut, sizeof cut, "cut.infs");
	layout l;
	build(&l, path, INFS_DTYPE_BF16);
	size_t n;
	unsigned char *b = slurp(path, &n);
	CHECK(b && n == l.ends[l.n_rec]);
	for (size_t len = 0; len < n; len++) {
		int whole = 0;
		while (whole < l.n_rec && l.ends[whole + 1] <= len)
			whole++;
		spit(cut, b, len);
		for (int ro = 1; ro >= 0; ro--) {
			infs_store *s = NULL;
			int rc = open_store(&s, cut, NULL, ro ? INFS_OPEN_READONLY : 0, INFS_SYNC_OFF);
			if (len < l.ends[0]) {
				/* Inside the header: a clean error, never a store. */
				CHECK(rc == (len < 8 ? INFS_EFORMAT : INFS_ECORRUPT) && s == NULL);
				continue;
			}
			CHECK_OK(rc);
			if (rc)
				continue;
			infs_store_stats st = { .version = INFS_STORE_STATS_VERSION };
			CHECK_OK(infs_store_stats_get(&st, s));
			CHECK(st.dropped_tail_bytes == len - l.ends[whole] && st.file_bytes == l.ends[whole]);
			/* The commit slot counts every record, so a cut, even at a
			 * record boundary, reports the acknowledged records it lost. */
			CHECK(st.lost_records == (uint64_t)(l.n_rec - whole));
			if (whole < l.n_rec)
				CHECK(strstr(infs_error_last(), "acknowledged record"));
			check_prefix(s, &l, whole);
			infs_store_close(s);
			/* A writer moves the torn tail to cut.infs.torn and cuts it off;
			 * a reader leaves the file alone. */
			CHECK(file_size(cut) == (ro ? len : l.ends[whole]));
			char torn[700];
			snprintf(torn, sizeof torn, "%s.torn", cut);
			CHECK(access(torn, F_OK) == (!ro && len > l.ends[whole] ? 0 : -1));
			CHECK(file_size(torn) == (ro ? 0 : len - l.ends[whole]));
		}
	}
	/* A writer that dropped a tail appends after the last good record. */
	spit(cut, b, (size_t)l.ends[3] + 30);
	infs_store *s;
	CHECK_OK(open_store(&s, cut, NULL, 0, INFS_SYNC_FULL));
	gen_fact f;
	gen_fact_make(&f, &l.g, 77, 0);
	uint64_t id;
	CHECK_OK(infs_fact_put(&id, s, "new", &f.fact));
	CHECK(id == l.ids[2] + 1);
	infs_store_close(s);
	CHECK_OK(open_store(&s, cut, NULL, 0, INFS_SYNC_FULL));
	infs_store_stats st = { .version = INFS_STORE_STATS_VERSION };
	CHECK_OK(infs_store_stats_get(&st, s));
	CHECK(st.dropped_tail_bytes == 0 && st.n_facts == 4);
	check_prefix(s, &l, 3);
	infs_store_close(s);
	gen_fact_free(&f);
	free(b);
}

static void flipped_bytes(void)
{
	char path[600], bad[600], needle[64];
	scratch_path(path, sizeof path, "flip.infs");
	scratch_path(bad, sizeof bad, "flipped.infs");
	layout l;
	build(&l, path, INFS_DTYPE_F32);
	size_t n;
	unsigned char *b = slurp(path, &n);
	infs_store *s = NULL;

	/* Every byte of the header (the 64 bytes before ends[0] are the slots). */
	uint64_t slots = l.ends[0] - 64;
	for (size_t i = 0; i < slots; i++) {
		b[i] ^= 0x10;
		spit(bad, b, n);
		b[i] ^= 0x10;
		CHECK_ERR(open_store(&s, bad, NULL, 0, INFS_SYNC_OFF), i < 8 ? INFS_EFORMAT : INFS_ECORRUPT);
		CHECK(s == NULL);
	}
	CHECK(strstr(infs_error_last(), "header"));

	/* Every byte of the commit slots: a torn slot leaves the other one, and
	 * records past an older slot are kept, so nothing is lost. */
	for (size_t i = slots; i < l.ends[0]; i++) {
		b[i] ^= 0x04;
		spit(bad, b, n);
		b[i] ^= 0x04;
		CHECK_OK(open_store(&s, bad, NULL, INFS_OPEN_READONLY, INFS_SYNC_OFF));
		infs_store_stats st = { .version = INFS_STORE_STATS_VERSION };
		CHECK_OK(infs_store_stats_get(&st, s));
		CHECK(st.lost_records == 0 && st.dropped_tail_bytes == 0 && st.file_bytes == n);
		check_prefix(s, &l, l.n_rec);
		infs_store_close(s);
	}
	/* The newest slot torn and the log cut at a record boundary: the older
	 * slot sees the loss of the records it committed, and the torn one's
	 * intact count names every record lost. */
	uint64_t seq[2];
	memcpy(&seq[0], b + slots, 8);
	memcpy(&seq[1], b + slots + 32, 8);
	size_t newest = slots + (seq[1] > seq[0] ? 32 : 0);
	b[newest + 3] ^= 0x40;
	spit(bad, b, (size_t)l.ends[3]);
	b[newest + 3] ^= 0x40;
	CHECK_OK(open_store(&s, bad, NULL, INFS_OPEN_READONLY, INFS_SYNC_OFF));
	infs_store_stats lst = { .version = INFS_STORE_STATS_VERSION };
	CHECK_OK(infs_store_stats_get(&lst, s));
	CHECK(lst.lost_records == (uint64_t)(l.n_rec - 3) && lst.dropped_tail_bytes == 0);
	infs_store_close(s);
	/* The newest slot damaged and the log cut where the slot before it says
	 * it ends (the last record gone whole): the damaged slot's fields that
	 * the damage spared still name a newer commit, so the loss is reported,
	 * whichever byte was hit, and the writer's repair leaves a clean store. */
	for (size_t i = newest; i < newest + 32; i++) {
		b[i] ^= 0x40;
		spit(bad, b, (size_t)l.ends[l.n_rec - 1]);
		b[i] ^= 0x40;
		CHECK_OK(open_store(&s, bad, NULL, INFS_OPEN_READONLY, INFS_SYNC_OFF));
		CHECK_OK(infs_store_stats_get(&lst, s));
		CHECK(lst.lost_records == 1 && lst.dropped_tail_bytes == 0);
		CHECK(strstr(infs_error_last(), "1 acknowledged record lost"));
		check_prefix(s, &l, l.n_rec - 1);
		infs_store_close(s);
		CHECK_OK(open_store(&s, bad, NULL, 0, INFS_SYNC_FULL));
		CHECK(strstr(infs_error_last(), "1 acknowledged record lost"));
		infs_store_close(s);
		CHECK_OK(open_store(&s, bad, NULL, 0, INFS_SYNC_FULL));
		CHECK_OK(infs_store_stats_get(&lst, s));
		CHECK(lst.lost_records == 0);
		infs_store_close(s);
	}

	/* Every byte of a record with sound records after it: corruption, and
	 * the message names the damaged record's offset. */
	int r = 2;
	uint64_t from = l.ends[r], to = l.ends[r + 1];
	snprintf(needle, sizeof needle, "offset %llu ", (unsigned long long)from);
	for (uint64_t i = from; i < to; i++) {
		b[i] ^= 0x01;
		spit(bad, b, n);
		b[i] ^= 0x01;
		CHECK_ERR(open_store(&s, bad, NULL, 0, INFS_SYNC_OFF), INFS_ECORRUPT);
		CHECK(s == NULL && strstr(infs_error_last(), needle));
		CHECK(file_size(bad) == n); /* nothing was cut */
	}

	/* The last record damaged looks like a torn write, but its commit slot
	 * was written: dropped, reported as one lost record, and the writer
	 * keeps the damaged bytes in <path>.torn. */
	from = l.ends[l.n_rec - 1];
	char torn[700];
	snprintf(torn, sizeof torn, "%s.torn", bad);
	for (uint64_t i = from; i < n; i += 13) {
		b[i] ^= 0x80;
		spit(bad, b, n);
		/* Both opens name the same offsets: where the log ends and where
		 * its commit record says it ends. */
		char says[128];
		snprintf(says, sizeof says, "(the log ends at %llu, its commit record says %llu)",
		         (unsigned long long)from, (unsigned long long)n);
		CHECK_OK(open_store(&s, bad, NULL, INFS_OPEN_READONLY, INFS_SYNC_FULL));
		CHECK(strstr(infs_error_last(), says));
		infs_store_close(s);
		CHECK_OK(open_store(&s, bad, NULL, 0, INFS_SYNC_FULL));
		CHECK(strstr(infs_error_last(), "1 acknowledged record lost") && strstr(infs_error_last(), torn));
		CHECK(strstr(infs_error_last(), says));
		infs_store_stats st = { .version = INFS_STORE_STATS_VERSION };
		CHECK_OK(infs_store_stats_get(&st, s));
		CHECK(st.dropped_tail_bytes == n - from && st.lost_records == 1);
		/* What was set aside: its bytes, and the record whole in them
		 * unless the damage hit its head (24 bytes). */
		const uint64_t whole = i - from >= 24;
		CHECK(st.torn_bytes == n - from && st.torn_records == whole);
		check_prefix(s, &l, l.n_rec - 1);
		infs_store_close(s);
		size_t tn = 0;
		unsigned char *t = slurp(torn, &tn);
		CHECK(t && tn == n - from && !memcmp(t, b + from, tn));
		free(t);
		b[i] ^= 0x80;
		/* The repair is committed: the next open finds nothing to report. */
		CHECK_OK(open_store(&s, bad, NULL, 0, INFS_SYNC_FULL));
		CHECK_OK(infs_store_stats_get(&st, s));
		CHECK(st.dropped_tail_bytes == 0 && st.lost_records == 0);
		/* ... but that earlier opens set bytes aside, read-only too. */
		CHECK(st.torn_bytes == n - from && st.torn_records == whole);
		infs_store_close(s);
		CHECK_OK(open_store(&s, bad, NULL, INFS_OPEN_READONLY, INFS_SYNC_FULL));
		CHECK_OK(infs_store_stats_get(&st, s));
		CHECK(st.torn_bytes == n - from && st.torn_records == whole);
		infs_store_close(s);
	}
	free(b);
}

static void header_cases(void)
{
	char path[600], bad[600];
	scratch_path(path, sizeof path, "hdr.infs");
	scratch_path(bad, sizeof bad, "hdr-bad.infs");
	layout l;
	build(&l, path, INFS_DTYPE_F16);
	size_t n;
	unsigned char *b = slurp(path, &n);
	infs_store *s = NULL;
	uint32_t hlen;
	memcpy(&hlen, b + 12, 4);
	CHECK(hlen + 64 == l.ends[0]);

	memcpy(b, "NOTSTORE", 8);
	spit(bad, b, n);
	CHECK_ERR(open_store(&s, bad, NULL, 0, INFS_SYNC_OFF), INFS_EFORMAT);
	CHECK(strstr(infs_error_last(), "not an inferscale store"));
	memcpy(b, "INFSTORE", 8);

	/* A future version with a sound checksum: unsupported, not corrupt. */
	uint32_t v = 3, c;
	memcpy(b + 8, &v, 4);
	c = infs__crc32c(0, b, hlen - 4);
	memcpy(b + hlen - 4, &c, 4);
	spit(bad, b, n);
	CHECK_ERR(open_store(&s, bad, NULL, 0, INFS_SYNC_OFF), INFS_EUNSUPPORTED);
	CHECK(strstr(infs_error_last(), "version 3"));
	/* Version 0, or a geometry no library accepts, sealed with a sound
	 * checksum: still corrupt. */
	v = 0;
	memcpy(b + 8, &v, 4);
	c = infs__crc32c(0, b, hlen - 4);
	memcpy(b + hlen - 4, &c, 4);
	spit(bad, b, n);
	CHECK_ERR(open_store(&s, bad, NULL, 0, INFS_SYNC_OFF), INFS_ECORRUPT);
	v = 1;
	memcpy(b + 8, &v, 4);
	uint32_t layers = 0;
	memcpy(b + 16, &layers, 4);
	c = infs__crc32c(0, b, hlen - 4);
	memcpy(b + hlen - 4, &c, 4);
	spit(bad, b, n);
	CHECK_ERR(open_store(&s, bad, NULL, 0, INFS_SYNC_OFF), INFS_ECORRUPT);
	CHECK(strstr(infs_error_last(), "n_layers"));
	free(b);

	/* Not a store at all. */
	spit(bad, "hello, world\n", 13);
	CHECK_ERR(open_store(&s, bad, NULL, 0, INFS_SYNC_OFF), INFS_EFORMAT);
	spit(bad, "", 0);
	CHECK_ERR(open_store(&s, bad, NULL, 0, INFS_SYNC_OFF), INFS_EFORMAT);
	CHECK_ERR(open_store(&s, bad, &l.g, INFS_OPEN_CREATE, INFS_SYNC_OFF), INFS_EFORMAT);
	CHECK(s == NULL);
}

/* Junk after the last record: zeros (a file extended but never written,
 * as after power loss) and random bytes are a torn tail; a sound record
 * after junk means the junk replaced real records: corruption. */
static void junk_tail(void)
{
	char path[600], bad[600];
	scratch_path(path, sizeof path, "junk.infs");
	scratch_path(bad, sizeof bad, "junk-bad.infs");
	layout l;
	build(&l, path, INFS_DTYPE_F16);
	size_t n;
	unsigned char *b = slurp(path, &n);
	size_t extra = 3000;
	unsigned char *j = calloc(1, n + extra + n);
	memcpy(j, b, n);
	infs_store *s;
	infs_store_stats st = { .version = INFS_STORE_STATS_VERSION };
	for (int kind = 0; kind < 3; kind++) {
		uint64_t rs = 99;
		for (size_t i = 0; i < extra; i++)
			j[n + i] = kind == 0 ? 0 : (unsigned char)rng_next(&rs);
		size_t len = n + extra;
		if (kind == 2) { /* a copy of the last records after the junk */
			memcpy(j + len, b + l.ends[1], n - l.ends[1]);
			len += n - l.ends[1];
		}
		spit(bad, j, len);
		int rc = open_store(&s, bad, NULL, 0, INFS_SYNC_OFF);
		if (kind < 2) {
			CHECK_OK(rc);
			CHECK_OK(infs_store_stats_get(&st, s));
			CHECK(st.dropped_tail_bytes == extra);
			check_prefix(s, &l, l.n_rec);
			infs_store_close(s);
		} else {
			CHECK(rc == INFS_ECORRUPT);
			CHECK(strstr(infs_error_last(), "sound record follows"));
		}
	}
	free(j);
	free(b);
}

/* Bytes inside a record's body that happen to form a sound record (here a
 * fact whose K begins with one) are never taken for records: a torn last
 * record stays a torn tail. */
static void record_inside_a_record(void)
{
	char path[600], other[600], cut[600];
	scratch_path(path, sizeof path, "nest.infs");
	scratch_path(other, sizeof other, "nest-src.infs");
	scratch_path(cut, sizeof cut, "nest-cut.infs");
	infs_geometry g = small_geometry(INFS_DTYPE_F32);
	infs_store *s;
	infs_store_stats st = { .version = INFS_STORE_STATS_VERSION };

	/* A sound drop record, taken from a store of its own. */
	unsigned char rec[64];
	size_t rec_len = 0;
	for (int tries = 0; tries < 50 && !rec_len; tries++) {
		char ns[16];
		snprintf(ns, sizeof ns, "n%d", tries);
		unlink(other);
		CHECK_OK(open_store(&s, other, &g, INFS_OPEN_CREATE, INFS_SYNC_OFF));
		gen_fact f;
		gen_fact_make(&f, &g, 1, 0);
		uint64_t id;
		CHECK_OK(infs_fact_put(&id, s, ns, &f.fact));
		gen_fact_free(&f);
		CHECK_OK(infs_store_stats_get(&st, s));
		uint64_t at = st.file_bytes;
		CHECK_OK(infs_namespace_drop(s, ns));
		CHECK_OK(infs_store_stats_get(&st, s));
		infs_store_close(s);
		size_t n;
		unsigned char *b = slurp(other, &n);
		/* It must read as finite floats to be accepted as K. */
		int finite = 1;
		for (uint64_t i = at; i + 4 <= n; i += 4) {
			uint32_t u;
			memcpy(&u, b + i, 4);
			finite &= (u & 0x7f800000u) != 0x7f800000u;
		}
		if (finite && n - at <= sizeof rec) {
			rec_len = n - at;
			memcpy(rec, b + at, rec_len);
		}
		free(b);
	}
	CHECK(rec_len > 0);

	gen_fact f;
	gen_fact_make(&f, &g, 6, 0); /* 7 tokens: K is 7*3*2*8 floats */
	CHECK(f.kv_bytes >= rec_len);
	memcpy(f.k, rec, rec_len);
	CHECK_OK(open_store(&s, path, &g, INFS_OPEN_CREATE, INFS_SYNC_OFF));
	uint64_t id;
	gen_fact first;
	gen_fact_make(&first, &g, 2, 0);
	CHECK_OK(infs_fact_put(&id, s, "u", &first.fact));
	CHECK_OK(infs_store_stats_get(&st, s));
	uint64_t good_end = st.file_bytes;
	CHECK_OK(infs_fact_put(&id, s, "u", &f.fact));
	infs_store_close(s);
	size_t n;
	unsigned char *b = slurp(path, &n);
	/* Cut inside V (after the nested record), and flip a byte of V. */
	for (int mode = 0; mode < 2; mode++) {
		if (mode == 0) {
			spit(cut, b, n - 40);
		} else {
			b[n - 40] ^= 1;
			spit(cut, b, n);
			b[n - 40] ^= 1;
		}
		CHECK_OK(open_store(&s, cut, NULL, 0, INFS_SYNC_OFF));
		CHECK_OK(infs_store_stats_get(&st, s));
		CHECK(st.n_facts == 1 && st.file_bytes == good_end);
		infs_store_close(s);
	}
	free(b);
	gen_fact_free(&f);
	gen_fact_free(&first);
}

/* Records larger than the scan's read window (4 MiB) are checked in
 * pieces: they reopen intact, cut short they are a torn tail, damaged with
 * a record after them they are corruption. */
static void big_records(void)
{
	char path[600], bad[600];
	scratch_path(path, sizeof path, "big.infs");
	scratch_path(bad, sizeof bad, "big-bad.infs");
	infs_geometry g = small_geometry(INFS_DTYPE_F16);
	g.n_layers = 32;
	g.n_kv_heads = 8;
	g.head_dim = 128;
	g.rotary_dim = 128;
	infs_store *s;
	infs_store_stats st = { .version = INFS_STORE_STATS_VERSION };
	CHECK_OK(open_store(&s, path, &g, INFS_OPEN_CREATE, INFS_SYNC_OFF));
	gen_fact f;
	gen_fact_make(&f, &g, 6, 0);
	size_t tok = infs_geometry_kv_token_bytes(&g), n_tok = 40;
	unsigned char *k = malloc(tok * n_tok), *v = malloc(tok * n_tok);
	int32_t tokens[40];
	for (size_t i = 0; i < tok * n_tok; i++) {
		k[i] = (unsigned char)(i * 7);
		v[i] = (unsigned char)(i * 13 + 1);
	}
	for (size_t i = 1; i < tok * n_tok; i += 2) { /* keep every f16 finite */
		k[i] &= 0x3f;
		v[i] &= 0x3f;
	}
	for (int i = 0; i < 40; i++)
		tokens[i] = i;
	infs_fact big = f.fact;
	big.n_tokens = (uint32_t)n_tok;
	big.tokens = tokens;
	big.k = k;
	big.v = v;
	uint64_t ids[3];
	CHECK_OK(infs_fact_put(&ids[0], s, "u", &f.fact));
	CHECK_OK(infs_store_stats_get(&st, s));
	uint64_t big_at = st.file_bytes;
	CHECK_OK(infs_fact_put(&ids[1], s, "u", &big));
	CHECK_OK(infs_store_stats_get(&st, s));
	uint64_t big_end = st.file_bytes;
	CHECK(big_end - big_at > 5u << 20);
	CHECK_OK(infs_fact_put(&ids[2], s, "u", &f.fact));
	infs_store_close(s);

	CHECK_OK(open_store(&s, path, &g, 0, INFS_SYNC_OFF));
	infs_fact_record *r;
	CHECK_OK(infs_fact_get(&r, s, "u", ids[1]));
	CHECK(r->n_tokens == n_tok && !memcmp(r->k, k, tok * n_tok) && !memcmp(r->v, v, tok * n_tok));
	infs_fact_record_free(r);
	CHECK_OK(infs_fact_get(&r, s, "u", ids[2]));
	CHECK(gen_fact_matches(r, &g, 6, 0));
	infs_fact_record_free(r);
	infs_store_close(s);

	size_t n;
	unsigned char *b = slurp(path, &n);
	spit(bad, b, (size_t)big_end - 4096);
	CHECK_OK(open_store(&s, bad, &g, 0, INFS_SYNC_OFF));
	CHECK_OK(infs_store_stats_get(&st, s));
	CHECK(st.n_facts == 1 && st.dropped_tail_bytes == big_end - 4096 - big_at);
	infs_store_close(s);
	b[big_at + (5u << 20)] ^= 4;
	spit(bad, b, n);
	CHECK_ERR(open_store(&s, bad, &g, 0, INFS_SYNC_OFF), INFS_ECORRUPT);
	char needle[64];
	snprintf(needle, sizeof needle, "offset %llu ", (unsigned long long)big_at);
	CHECK(strstr(infs_error_last(), needle));
	free(b);
	free(k);
	free(v);
	gen_fact_free(&f);
}

/* Random damage anywhere — flipped bits, overwritten spans, cuts, junk
 * appended — never crashes the open and never yields altered data: the
 * store either opens with intact facts (a prefix, when the damage was at
 * the end) or fails with a clean error. */
static void random_damage(void)
{
	char path[600], bad[600];
	scratch_path(path, sizeof path, "rand.infs");
	scratch_path(bad, sizeof bad, "rand-bad.infs");
	layout l;
	build(&l, path, INFS_DTYPE_F16);
	size_t n;
	unsigned char *b = slurp(path, &n);
	unsigned char *d = malloc(n + 512);
	uint64_t rng = 12345;
	int opened = 0, refused = 0;
	for (int iter = 0; iter < 1500; iter++) {
		size_t len = n;
		memcpy(d, b, n);
		int edits = 1 + (int)(rng_next(&rng) % 3);
		for (int e = 0; e < edits; e++) {
			size_t at = (size_t)(rng_next(&rng) % len);
			switch (rng_next(&rng) % 4) {
			case 0:
				d[at] ^= (unsigned char)(1u << (rng_next(&rng) % 8));
				break;
			case 1:
				for (size_t i = at; i < at + 8 && i < len; i++)
					d[i] = (unsigned char)rng_next(&rng);
				break;
			case 2:
				len = at;
				break;
			default: {
				size_t extra = (size_t)(rng_next(&rng) % 200);
				for (size_t i = 0; i < extra && len < n + 512; i++)
					d[len++] = (unsigned char)rng_next(&rng);
			}
			}
		}
		spit(bad, d, len);
		infs_store *s = NULL;
		int rc = open_store(&s, bad, NULL, 0, INFS_SYNC_OFF);
		if (rc != INFS_OK) {
			CHECK(s == NULL && (rc == INFS_ECORRUPT || rc == INFS_EFORMAT || rc == INFS_EUNSUPPORTED));
			refused++;
			continue;
		}
		opened++;
		for (int i = 0; i < N_OPS; i++) {
			infs_fact_record *r = NULL;
			rc = infs_fact_get(&r, s, i % 2 ? "odd" : "even", l.ids[i]);
			CHECK(rc == INFS_OK || rc == INFS_ENOTFOUND);
			if (rc == INFS_OK)
				CHECK(gen_fact_matches(r, &l.g, (uint64_t)i, i == 5 ? INFS_FACT_SEGMENT : 0));
			infs_fact_record_free(r);
		}
		infs_store_close(s);
	}
	CHECK(opened > 0 && refused > 0);
	free(d);
	free(b);
}

/* Bytes rewritten under an open handle: get refuses the record (rather
 * than serve NaN and Inf keys), verify names it; a sound store verifies. */
static void rewritten_under_handle(void)
{
	char path[600];
	scratch_path(path, sizeof path, "rewrite.infs");
	layout l;
	build(&l, path, INFS_DTYPE_F32);
	infs_store *s;
	CHECK_OK(open_store(&s, path, NULL, INFS_OPEN_READONLY, INFS_SYNC_OFF));
	uint64_t off = 1, id = 1;
	CHECK_OK(infs_store_verify(s, &off, &id));
	CHECK(off == 0 && id == 0);
	/* Record 2 (from ends[2]) is the put of seed 2 ("even"): its K data lies well past
	 * the fixed fields and the namespace. */
	uint64_t at = l.ends[2] + 24 + 48 + 8 + 16 + 32;
	int fd = open(path, O_WRONLY);
	float inf[2] = { INFINITY, NAN };
	CHECK(fd >= 0 && pwrite(fd, inf, sizeof inf, (off_t)at) == sizeof inf);
	infs_fact_record *r = NULL;
	CHECK_ERR(infs_fact_get(&r, s, "even", l.ids[2]), INFS_ECORRUPT);
	CHECK(r == NULL && strstr(infs_error_last(), "checksum"));
	CHECK_OK(infs_fact_get(&r, s, "odd", l.ids[1]));
	infs_fact_record_free(r);
	CHECK_ERR(infs_store_verify(s, &off, &id), INFS_ECORRUPT);
	CHECK(off == l.ends[2] && id == l.ids[2] && strstr(infs_error_last(), "namespace \"even\""));
	/* The header rewritten: verify says so. */
	CHECK(pwrite(fd, "X", 1, 20) == 1);
	CHECK_ERR(infs_store_verify(s, NULL, NULL), INFS_ECORRUPT);
	CHECK(strstr(infs_error_last(), "header"));
	close(fd);
	CHECK_ERR(infs_store_verify(NULL, NULL, NULL), INFS_EINVAL);
	infs_store_close(s);
}

/* A FIFO, a directory and a device are refused, read-only and writable,
 * without blocking: the opens run in a child that an alarm would kill. */
static void not_regular(void)
{
	char fifo[600];
	scratch_path(fifo, sizeof fifo, "fifo.infs");
	CHECK(mkfifo(fifo, 0644) == 0);
	pid_t pid = fork();
	if (pid == 0) {
		alarm(10);
		const char *paths[] = { fifo, scratch_dir, "/dev/null" };
		int bad = 0;
		for (int i = 0; i < 3; i++)
			for (int ro = 0; ro < 2; ro++) {
				infs_store *s = NULL;
				int rc = open_store(&s, paths[i], NULL, ro ? INFS_OPEN_READONLY : 0, INFS_SYNC_OFF);
				bad += rc != INFS_EINVAL || s != NULL || !strstr(infs_error_last(), "not a regular file");
			}
		_exit(bad);
	}
	int status = 0;
	CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	unlink(fifo);
}

/* A version-1 file (no commit slots) still opens; compaction rewrites it
 * in the current format. A version-1 stats struct gets only its fields. */
static void version_1(void)
{
	char path[600], old[600];
	scratch_path(path, sizeof path, "v2.infs");
	scratch_path(old, sizeof old, "v1.infs");
	layout l;
	build(&l, path, INFS_DTYPE_F16);
	size_t n;
	unsigned char *b = slurp(path, &n);
	uint32_t hlen = (uint32_t)l.ends[0] - 64, v = 1, c;
	memmove(b + hlen, b + hlen + 64, n - hlen - 64);
	memcpy(b + 8, &v, 4);
	c = infs__crc32c(0, b, hlen - 4);
	memcpy(b + hlen - 4, &c, 4);
	spit(old, b, n - 64);
	infs_store *s;
	CHECK_OK(open_store(&s, old, NULL, 0, INFS_SYNC_FULL));
	check_prefix(s, &l, l.n_rec);
	struct {
		infs_store_stats st;
		uint64_t guard;
	} st1;
	memset(&st1, 0xab, sizeof st1);
	st1.st.version = 1;
	CHECK_OK(infs_store_stats_get(&st1.st, s));
	CHECK(st1.st.file_bytes == n - 64 && st1.st.lost_records == 0xababababababababull);
	CHECK_OK(infs_store_compact(s));
	infs_store_close(s);
	free(b);
	b = slurp(old, &n);
	memcpy(&v, b + 8, 4);
	CHECK(v == 2);
	free(b);
	CHECK_OK(open_store(&s, old, NULL, INFS_OPEN_READONLY, INFS_SYNC_OFF));
	check_prefix(s, &l, l.n_rec);
	infs_store_close(s);
}

int main(void)
{
	scratch_init("store-file");
	crc();
	truncate_everywhere();
	flipped_bytes();
	header_cases();
	junk_tail();
	record_inside_a_record();
	big_records();
	random_damage();
	rewritten_under_handle();
	not_regular();
	version_1();
	scratch_cleanup();
	CHECK_DONE();
}
