/* Opening, creating and closing stores: options, the writer lock, the
 * geometry and identity checks. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/error.h"
#include "util/options.h"
#include "util/geometry.h"
#include "store/store_impl.h"

/* Files held for writing by this process. flock() already refuses a second
 * open file description, but on file systems where flock is emulated with
 * per-process fcntl locks (NFS) it would not, so the process keeps its own
 * list too. Entries carry the pid: a child made by fork() inherits the list
 * but not the stores. */
struct held {
	dev_t dev;
	ino_t ino;
	pid_t pid;
	struct held *next;
};
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static struct held *registry;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

/* A fork() while another thread holds the registry lock must not leave the
 * child with a lock that nobody will release. */
static void registry_prefork(void)
{
	pthread_mutex_lock(&registry_lock);
}

static void registry_postfork(void)
{
	pthread_mutex_unlock(&registry_lock);
}

static void registry_atfork(void)
{
	pthread_atfork(registry_prefork, registry_postfork, registry_postfork);
}

/* INFS_OK, INFS_EBUSY when this process holds the file already, or INFS_ENOMEM. */
static int registry_add(dev_t dev, ino_t ino)
{
	int rc = INFS_OK;
	pid_t pid = getpid();
	pthread_once(&atfork_once, registry_atfork);
	pthread_mutex_lock(&registry_lock);
	for (struct held *h = registry; h; h = h->next)
		if (h->dev == dev && h->ino == ino && h->pid == pid)
			rc = INFS_EBUSY;
	struct held *h = rc ? NULL : malloc(sizeof *h);
	if (h) {
		h->dev = dev;
		h->ino = ino;
		h->pid = pid;
		h->next = registry;
		registry = h;
	} else if (!rc) {
		rc = INFS_ENOMEM;
	}
	pthread_mutex_unlock(&registry_lock);
	return rc;
}

static void registry_remove(dev_t dev, ino_t ino)
{
	pthread_mutex_lock(&registry_lock);
	for (struct held **p = &registry; *p; p = &(*p)->next) {
		if ((*p)->dev == dev && (*p)->ino == ino) {
			struct held *h = *p;
			*p = h->next;
			free(h);
			break;
		}
	}
	pthread_mutex_unlock(&registry_lock);
}

void infs__registry_update(dev_t old_dev, ino_t old_ino, dev_t dev, ino_t ino)
{
	pthread_mutex_lock(&registry_lock);
	for (struct held *h = registry; h; h = h->next) {
		if (h->dev == old_dev && h->ino == old_ino) {
			h->dev = dev;
			h->ino = ino;
			break;
		}
	}
	pthread_mutex_unlock(&registry_lock);
}

INFS__DEFINE_INIT(infs_store_options_init, infs_store_options, infs__sizes_store_options, INFS_STORE_OPTIONS_INIT)

int infs__fsync_dir(const char *path)
{
	const char *slash = strrchr(path, '/');
	char *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
	if (!dir)
		return infs__error(INFS_ENOMEM, "out of memory");
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int rc = INFS_OK;
	if (fd < 0 || fsync(fd) != 0)
		rc = infs__error(INFS_EIO, "syncing the directory %s: %s", dir, strerror(errno));
	if (fd >= 0)
		close(fd);
	free(dir);
	return rc;
}

/* Creates the store file whole or not at all: the header goes to a private
 * temporary file that is then linked to path, which fails harmlessly when
 * another opener created it first. */
static int create_file(const char *path, const infs_geometry *g, const char *identity, infs_sync_mode sync)
{
	static unsigned counter;
	char *tmp;
	if (asprintf(&tmp, "%s.create-%ld-%u", path, (long)getpid(), __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED)) < 0)
		return infs__error(INFS_ENOMEM, "infs_store_open: out of memory");
	unsigned char header[INFS__HEADER_FIXED + INFS_IDENTITY_MAX + 16 + INFS__SLOTS];
	size_t len = infs__header_encode(header, g, identity, INFS__STORE_FORMAT);
	/* An empty log, committed in slot 1 (sequence 1); slot 0 is unused. */
	memset(header + len, 0, INFS__SLOT);
	infs__slot_encode(header + len + INFS__SLOT, &(infs__slot){ 1, 0, len + INFS__SLOTS });
	struct iovec iov = { header, len + INFS__SLOTS };
	int fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0) {
		int err = errno;
		free(tmp);
		return infs__error(err == ENOENT ? INFS_ENOTFOUND : INFS_EIO, "infs_store_open: creating %s: %s", path,
		                   strerror(err));
	}
	int rc = INFS_OK;
	if (infs__write_all(fd, 0, &iov, 1) != 0 || (sync != INFS_SYNC_OFF && fsync(fd) != 0))
		rc = infs__error(INFS_EIO, "infs_store_open: writing %s: %s", tmp, strerror(errno));
	close(fd);
	if (!rc && link(tmp, path) != 0 && errno != EEXIST)
		rc = infs__error(INFS_EIO, "infs_store_open: creating %s: %s", path, strerror(errno));
	unlink(tmp);
	free(tmp);
	if (!rc && sync != INFS_SYNC_OFF && (rc = infs__fsync_dir(path)))
		rc = infs__error_wrap(rc, "infs_store_open");
	return rc;
}

/* Copies the bytes [s->end, size) to <path>.torn, or <path>.torn.N when
 * that exists, and syncs it: the evidence of damage outlives the repair. */
static int save_tail(const infs_store *s, char **torn, uint64_t size)
{
	int fd = -1;
	for (unsigned n = 0; fd < 0 && n < 1000; n++) {
		free(*torn);
		if ((n ? asprintf(torn, "%s.torn.%u", s->path, n) : asprintf(torn, "%s.torn", s->path)) < 0) {
			*torn = NULL;
			return infs__error(INFS_ENOMEM, "infs_store_open: out of memory");
		}
		fd = open(*torn, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
		if (fd < 0 && errno != EEXIST)
			break;
	}
	if (fd < 0)
		return infs__error(INFS_EIO, "infs_store_open: creating %s: %s", *torn, strerror(errno));
	int rc = INFS_OK;
	unsigned char buf[1u << 16];
	for (uint64_t off = s->end; off < size && !rc;) {
		size_t n = size - off < sizeof buf ? (size_t)(size - off) : sizeof buf;
		ssize_t r = pread(s->fd, buf, n, (off_t)off);
		struct iovec iov = { buf, r > 0 ? (size_t)r : 0 };
		if (r <= 0 || infs__write_all(fd, off - s->end, &iov, 1))
			rc = infs__error(INFS_EIO, "infs_store_open: copying the damaged tail of %s to %s: %s", s->path,
			                 *torn, r == 0 ? "the file shrank" : strerror(errno));
		off += r > 0 ? (uint64_t)r : 0;
	}
	if (!rc && s->opts.sync != INFS_SYNC_OFF && fsync(fd) != 0)
		rc = infs__error(INFS_EIO, "infs_store_open: syncing %s: %s", *torn, strerror(errno));
	close(fd);
	if (!rc && s->opts.sync != INFS_SYNC_OFF)
		rc = infs__fsync_dir(*torn);
	return rc;
}

/* A writer's repair of a damaged or torn log: the dropped bytes go to a
 * .torn file, the file is cut after the last sound record, and a commit slot
 * for what remains is written, so that the next open reports nothing new. */
static int set_aside(infs_store *s, char **torn, uint64_t size)
{
	int rc;
	if (s->dropped_tail && (rc = save_tail(s, torn, size)))
		return rc;
	if (ftruncate(s->fd, (off_t)s->end) != 0)
		return infs__error(INFS_EIO, "infs_store_open: cutting the torn tail of %s: %s", s->path, strerror(errno));
	if ((rc = infs__commit(s)))
		return infs__error_wrap(rc, "infs_store_open");
	if (s->opts.sync == INFS_SYNC_FULL && fdatasync(s->fd) != 0)
		return infs__error(INFS_EIO, "infs_store_open: syncing %s: %s", s->path, strerror(errno));
	return INFS_OK;
}

/* The whole records at the start of a set-aside file of size bytes: each a
 * sound head whose body lies inside the file (sound or damaged). */
static uint64_t torn_records(int fd, uint64_t size)
{
	uint64_t n = 0;
	for (uint64_t off = 0; size - off >= INFS__REC_HEAD; n++) {
		unsigned char b[INFS__REC_HEAD];
		infs__rec_head h;
		if (pread(fd, b, sizeof b, (off_t)off) != (ssize_t)sizeof b || !infs__head_decode(&h, b) ||
		    h.body_len > size - off - INFS__REC_HEAD)
			break;
		off += INFS__REC_HEAD + h.body_len;
	}
	return n;
}

/* What writable opens set aside before: the files <path>.torn, .torn.1, ...
 * (save_tail's names) up to the first missing one. */
static void count_torn(infs_store *s)
{
	s->torn_bytes = s->torn_records = 0;
	for (unsigned n = 0; n < 1000; n++) {
		char *p;
		if ((n ? asprintf(&p, "%s.torn.%u", s->path, n) : asprintf(&p, "%s.torn", s->path)) < 0)
			return;
		int fd = open(p, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
		free(p);
		struct stat st;
		if (fd < 0)
			return;
		if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
			s->torn_bytes += (uint64_t)st.st_size;
			s->torn_records += torn_records(fd, (uint64_t)st.st_size);
		}
		close(fd);
	}
}

/* Leaves what the open found in infs_error_last(), though it succeeded. */
static void report_damage(const infs_store *s, const char *torn)
{
	char lost[200] = "", kept[PATH_MAX + 64] = "";
	if (s->lost && s->newer_damaged)
		snprintf(lost, sizeof lost, ": %llu acknowledged record%s lost (the log ends at %llu, where the commit record "
		         "before the newest says; the newest commit record is damaged)", (unsigned long long)s->lost,
		         s->lost == 1 ? "" : "s", (unsigned long long)s->end);
	else if (s->lost)
		snprintf(lost, sizeof lost, ": %llu acknowledged record%s lost (the log ends at %llu, its commit record says %llu)",
		         (unsigned long long)s->lost, s->lost == 1 ? "" : "s", (unsigned long long)s->end,
		         (unsigned long long)s->lost_slot_end);
	if (torn)
		snprintf(kept, sizeof kept, "; the dropped bytes are in %s", torn);
	else if (s->dropped_tail && s->readonly)
		snprintf(kept, sizeof kept, "; a writable open moves them to %s.torn", s->path);
	if (s->dropped_tail)
		infs__error(INFS_OK, "infs_store_open: %s%s; dropped %llu bytes of a torn or damaged tail at offset %llu%s",
		            s->path, lost, (unsigned long long)s->dropped_tail, (unsigned long long)s->end, kept);
	else
		infs__error(INFS_OK, "infs_store_open: %s%s", s->path, lost);
}

static int check_options(infs_store_options *o, infs_geometry *geom, const infs_store_options *in, bool attach,
                         const char *no_device)
{
	infs_store_options init = INFS_STORE_OPTIONS_INIT;
	*o = init;
	int rc = INFS__TAKE(*o, in, infs__sizes_store_options, "infs_store_open", "options");
	if (rc)
		return rc;
	unsigned known = INFS_OPEN_CREATE | INFS_OPEN_READONLY;
	if (o->flags & ~known)
		return infs__error(INFS_EINVAL, "infs_store_open: unknown flags 0x%x", o->flags & ~known);
	if ((o->flags & INFS_OPEN_CREATE) && (o->flags & INFS_OPEN_READONLY))
		return infs__error(INFS_EINVAL, "infs_store_open: INFS_OPEN_CREATE and INFS_OPEN_READONLY exclude each other");
	if (o->sync != INFS_SYNC_FULL && o->sync != INFS_SYNC_NORMAL && o->sync != INFS_SYNC_OFF)
		return infs__error(INFS_EINVAL, "infs_store_open: unknown sync mode %d", (int)o->sync);
	if (o->geometry) {
		rc = infs__geometry_copy(geom, o->geometry);
		if (!rc)
			rc = infs_geometry_validate(geom);
		if (rc)
			return infs__error_wrap(rc, "infs_store_open");
	}
	if (o->identity) {
		size_t n = strnlen(o->identity, INFS_IDENTITY_MAX + 1);
		if (n == 0 || n > INFS_IDENTITY_MAX)
			return infs__error(INFS_EINVAL, "infs_store_open: identity must be 1..%u bytes", INFS_IDENTITY_MAX);
	}
	if ((o->flags & INFS_OPEN_CREATE) && (!o->geometry || !o->identity))
		return infs__error(INFS_EINVAL, "infs_store_open: INFS_OPEN_CREATE needs a geometry and an identity");
	if (o->device < -1)
		return infs__error(INFS_EINVAL, "infs_store_open: device %d is not -1 or a device index", o->device);
	if (o->device >= 0 && !attach)
		return infs__error(INFS_EUNSUPPORTED, "infs_store_open: device %d asked for, but this build has %s",
		                   o->device, no_device);
	return INFS_OK;
}

static const struct {
	const char *name;
	size_t off;
	char kind; /* 'u' uint32_t, 'd' double, 'e' enum */
} geom_fields[] = {
	{ "n_layers", offsetof(infs_geometry, n_layers), 'u' },
	{ "n_kv_heads", offsetof(infs_geometry, n_kv_heads), 'u' },
	{ "head_dim", offsetof(infs_geometry, head_dim), 'u' },
	{ "rotary_dim", offsetof(infs_geometry, rotary_dim), 'u' },
	{ "rope_style", offsetof(infs_geometry, rope_style), 'e' },
	{ "rope_theta", offsetof(infs_geometry, rope_theta), 'd' },
	{ "rope_scaling", offsetof(infs_geometry, rope_scaling), 'e' },
	{ "rope_factor", offsetof(infs_geometry, rope_factor), 'd' },
	{ "rope_low_freq_factor", offsetof(infs_geometry, rope_low_freq_factor), 'd' },
	{ "rope_high_freq_factor", offsetof(infs_geometry, rope_high_freq_factor), 'd' },
	{ "rope_original_max_pos", offsetof(infs_geometry, rope_original_max_pos), 'u' },
	{ "rope_beta_fast", offsetof(infs_geometry, rope_beta_fast), 'd' },
	{ "rope_beta_slow", offsetof(infs_geometry, rope_beta_slow), 'd' },
	{ "rope_attn_factor", offsetof(infs_geometry, rope_attn_factor), 'd' },
	{ "kv_dtype", offsetof(infs_geometry, kv_dtype), 'e' },
	{ "embed_dim", offsetof(infs_geometry, embed_dim), 'u' },
};

static void field_str(char *buf, size_t n, const infs_geometry *g, const char *name)
{
	static const char *const dtypes[] = { "f32", "f16", "bf16", "fp8_e4m3" };
	static const char *const styles[] = { "neox", "gptj" };
	static const char *const scalings[] = { "none", "linear", "llama3", "yarn" };
	for (size_t i = 0; i < sizeof geom_fields / sizeof *geom_fields; i++) {
		if (strcmp(geom_fields[i].name, name) != 0)
			continue;
		const char *p = (const char *)g + geom_fields[i].off;
		uint32_t u;
		double d;
		int e;
		switch (geom_fields[i].kind) {
		case 'u':
			memcpy(&u, p, sizeof u);
			snprintf(buf, n, "%u", u);
			return;
		case 'd':
			memcpy(&d, p, sizeof d);
			snprintf(buf, n, "%.17g", d);
			return;
		default:
			memcpy(&e, p, sizeof e);
			if (!strcmp(name, "kv_dtype") && e >= 0 && e < 4)
				snprintf(buf, n, "%s", dtypes[e]);
			else if (!strcmp(name, "rope_style") && e >= 0 && e < 2)
				snprintf(buf, n, "%s", styles[e]);
			else if (!strcmp(name, "rope_scaling") && e >= 0 && e < 4)
				snprintf(buf, n, "%s", scalings[e]);
			else
				snprintf(buf, n, "%d", e);
			return;
		}
	}
	snprintf(buf, n, "?");
}

static int check_binding(const infs_store *s, const infs_store_options *o, const infs_geometry *geom)
{
	if (o->geometry) {
		const char *f = infs__geometry_diff(&s->geom, geom);
		if (f) {
			char have[64], gave[64];
			field_str(have, sizeof have, &s->geom, f);
			field_str(gave, sizeof gave, geom, f);
			return infs__error(INFS_EMISMATCH, "infs_store_open: %s has %s %s, caller gave %s", s->path, f, have,
			                   gave);
		}
	}
	if (o->identity && strcmp(o->identity, s->identity) != 0)
		return infs__error(INFS_EMISMATCH, "infs_store_open: %s has identity \"%.200s\", caller gave \"%.200s\"",
		                   s->path, s->identity, o->identity);
	return INFS_OK;
}

/* Opens path and, for a writer, takes the lock. Compaction renames a new
 * file over path, so after locking the writer checks that path still names
 * the file it locked, and starts again if not. */
static int open_locked(infs_store *s, const infs_store_options *o, const infs_geometry *geom)
{
	for (int attempt = 0; attempt < 100; attempt++) {
		/* O_NONBLOCK: opening a FIFO must not wait for a writer; fstat
		 * below refuses anything but a regular file. */
		int fd = open(s->path, (s->readonly ? O_RDONLY : O_RDWR) | O_CLOEXEC | O_NONBLOCK);
		if (fd < 0 && errno == ENOENT && (o->flags & INFS_OPEN_CREATE)) {
			int rc = create_file(s->path, geom, o->identity, o->sync);
			if (rc)
				return rc;
			continue;
		}
		if (fd < 0) {
			if (errno == ENOENT)
				return infs__error(INFS_ENOTFOUND,
				                   "infs_store_open: %s does not exist (INFS_OPEN_CREATE creates it)", s->path);
			if (errno == EISDIR)
				return infs__error(INFS_EINVAL, "infs_store_open: %s is not a regular file", s->path);
			return infs__error(INFS_EIO, "infs_store_open: opening %s: %s", s->path, strerror(errno));
		}
		struct stat st, now;
		if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || fcntl(fd, F_SETFL, 0) != 0) {
			close(fd);
			return infs__error(INFS_EINVAL, "infs_store_open: %s is not a regular file", s->path);
		}
		s->fd = fd;
		s->dev = st.st_dev;
		s->ino = st.st_ino;
		if (s->readonly)
			return INFS_OK;
		int rc = registry_add(st.st_dev, st.st_ino);
		if (rc) {
			close(fd);
			s->fd = -1;
			if (rc == INFS_ENOMEM)
				return infs__error(rc, "infs_store_open: out of memory");
			return infs__error(rc, "infs_store_open: %s is already open for writing in this process", s->path);
		}
		if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
			int err = errno;
			registry_remove(st.st_dev, st.st_ino);
			close(fd);
			s->fd = -1;
			if (err == EWOULDBLOCK)
				return infs__error(INFS_EBUSY, "infs_store_open: %s is open for writing in another process",
				                   s->path);
			return infs__error(INFS_EIO, "infs_store_open: locking %s: %s", s->path, strerror(err));
		}
		if (stat(s->path, &now) == 0 && now.st_dev == st.st_dev && now.st_ino == st.st_ino)
			return INFS_OK;
		registry_remove(st.st_dev, st.st_ino);
		close(fd);
		s->fd = -1;
	}
	return infs__error(INFS_EBUSY, "infs_store_open: %s keeps being replaced", s->path);
}

int infs__store_open(infs_store **out, const char *path, const infs_store_options *opts,
                     int (*attach)(infs_store *s), const char *no_device)
{
	if (!out)
		return infs__error(INFS_EINVAL, "infs_store_open: out is NULL");
	*out = NULL;
	if (!path || !*path)
		return infs__error(INFS_EINVAL, "infs_store_open: path is %s", path ? "empty" : "NULL");
	infs_store_options o;
	infs_geometry geom;
	int rc = check_options(&o, &geom, opts, attach != NULL, no_device);
	if (rc)
		return rc;

	infs_store *s = calloc(1, sizeof *s);
	if (!s || !(s->path = strdup(path)) || (o.faiss_index && !(s->faiss_index = strdup(o.faiss_index)))) {
		if (s)
			free(s->path);
		free(s);
		return infs__error(INFS_ENOMEM, "infs_store_open: out of memory");
	}
	static uint64_t opened;
	s->serial = __atomic_add_fetch(&opened, 1, __ATOMIC_RELAXED);
	s->fd = -1;
	s->readonly = o.flags & INFS_OPEN_READONLY;
	pthread_rwlockattr_t attr;
	pthread_rwlockattr_init(&attr);
	/* Writers are not starved by a steady stream of retrievals. */
	pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_rwlock_init(&s->lock, &attr);
	pthread_rwlockattr_destroy(&attr);

	if ((rc = open_locked(s, &o, &geom)))
		goto fail;
	/* Compaction renames a new file over s->path: through a symbolic link
	 * that would replace the link, not the store it points to. */
	char *real = realpath(path, NULL);
	if (real) {
		free(s->path);
		s->path = real;
	}
	struct stat st;
	if (fstat(s->fd, &st) != 0) {
		rc = infs__error(INFS_EIO, "infs_store_open: %s: %s", path, strerror(errno));
		goto fail;
	}
	if ((rc = infs__header_read(&s->geom, &s->identity, &s->header_len, &s->version, s->fd, (uint64_t)st.st_size,
	                            path)))
		goto fail;
	if ((rc = check_binding(s, &o, &geom)))
		goto fail;
	s->kv_token_bytes = infs_geometry_kv_token_bytes(&s->geom);
	s->opts = o;
	s->opts.geometry = &s->geom;
	s->opts.identity = s->identity;
	s->opts.faiss_index = s->faiss_index;
	infs__index_init(&s->ix, s->geom.embed_dim);
	if ((rc = infs__store_scan(s, (uint64_t)st.st_size))) {
		rc = infs__error_wrap(rc, "infs_store_open");
		goto fail;
	}
	char *torn = NULL;
	s->lost_slot_end = s->slot_end; /* the repair's commit moves slot_end */
	if (!s->readonly && (s->dropped_tail || s->lost) && (rc = set_aside(s, &torn, (uint64_t)st.st_size)))
		goto fail;
	count_torn(s);
	/* A writer takes the reserve for deletes now, while there is room:
	 * the repair above may have cut it off, and an older library kept less. */
	s->reserved = s->readonly ? s->end : infs__reserve_quietly(s->fd, s->end, s->ix.erase_bytes + INFS__RESERVE);
	if ((rc = infs__map_reserve(s, s->end))) {
		rc = infs__error_wrap(rc, "infs_store_open");
		goto fail;
	}
	if (!s->readonly) {
		/* A compaction that crashed before its rename left this behind. */
		char *tmp;
		if (asprintf(&tmp, "%s.compact", s->path) >= 0) {
			unlink(tmp);
			free(tmp);
		}
	}
	if (o.device >= 0 && (rc = attach(s)))
		goto fail;
	if (s->dropped_tail || s->lost)
		report_damage(s, torn);
	free(torn);
	*out = s;
	return INFS_OK;
fail:
	infs_store_close(s);
	return rc;
}

void infs_store_close(infs_store *s)
{
	if (!s)
		return;
	for (int i = INFS_EXT_COUNT - 1; i >= 0; i--)
		if (s->ext[i].destroy)
			s->ext[i].destroy(s->ext[i].data);
	if (s->fd >= 0 && !s->readonly && s->opts.sync == INFS_SYNC_NORMAL)
		fdatasync(s->fd);
	if (s->map)
		munmap((void *)s->map, s->map_cap);
	if (s->fd >= 0) {
		if (!s->readonly)
			registry_remove(s->dev, s->ino);
		close(s->fd);
	}
	infs__index_free(&s->ix);
	pthread_rwlock_destroy(&s->lock);
	free(s->identity);
	free(s->faiss_index);
	free(s->path);
	free(s);
}
