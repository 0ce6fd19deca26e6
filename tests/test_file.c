/* The loaders' file reader (libinferscale/util/file.c): whole reads, size limits,
 * and the refusal of anything but a regular file. A FIFO given to model,
 * tokenizer or embedder loading (as the path, or as a file inside a model
 * directory) must fail at once instead of waiting for a writer: each such
 * load runs in a child process with an alarm, so that a hang is reported as
 * a failure instead of hanging the suite.
 * Usage: test_file MODEL_FIXTURE_DIR */
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "util/file.h"
#include "scratch_util.h"

/* Seconds a child may take before it counts as hung; a load that refuses
 * the file returns in microseconds, one that opens a FIFO never does. */
#define HANG_SECONDS 30

static char dir[512];

static const char *in_dir(const char *name)
{
	static char p[1024];
	snprintf(p, sizeof p, "%s/%s", dir, name);
	return p;
}

static void write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "wb");
	CHECK(f && fwrite(text, 1, strlen(text), f) == strlen(text));
	if (f)
		fclose(f);
}

static void test_read(void)
{
	char *text = NULL;
	size_t len = 0;
	write_text(in_dir("a.txt"), "hello\nworld");
	CHECK_OK(infs__file_read(&text, &len, in_dir("a.txt"), 11));
	CHECK(len == 11 && text && memcmp(text, "hello\nworld", 12) == 0); /* NUL-terminated */
	free(text);
	CHECK_ERR(infs__file_read(&text, &len, in_dir("a.txt"), 10), INFS_ERANGE);
	CHECK(strstr(infs_error_last(), "a.txt") != NULL);
	write_text(in_dir("empty"), "");
	CHECK_OK(infs__file_read(&text, &len, in_dir("empty"), 0));
	CHECK(len == 0 && text && text[0] == '\0');
	free(text);
	CHECK_ERR(infs__file_read(&text, &len, in_dir("missing"), 100), INFS_ENOTFOUND);
	CHECK_ERR(infs__file_read(&text, &len, dir, 100), INFS_EINVAL);
	CHECK(strstr(infs_error_last(), "a directory") != NULL);
	CHECK_ERR(infs__file_read(&text, &len, "/dev/null", 100), INFS_EINVAL);
	CHECK(strstr(infs_error_last(), "character device") != NULL);
	CHECK(mkfifo(in_dir("fifo"), 0600) == 0);
	CHECK_ERR(infs__file_read(&text, &len, in_dir("fifo"), 100), INFS_EINVAL);
	CHECK(strstr(infs_error_last(), "a FIFO") != NULL);
	int fd = -1;
	size_t size = 0;
	CHECK_ERR(infs__file_open(&fd, &size, in_dir("fifo"), 100), INFS_EINVAL);
	CHECK_OK(infs__file_open(&fd, &size, in_dir("a.txt"), 100));
	CHECK(size == 11 && fd >= 0);
	char buf[16];
	CHECK(read(fd, buf, sizeof buf) == 11); /* a blocking descriptor again */
	close(fd);
	unlink(in_dir("a.txt"));
	unlink(in_dir("empty"));
	unlink(in_dir("fifo"));
}

enum { MODEL, TOKENIZER, EMBEDDER };

typedef struct load_case {
	const char *what;
	int kind;
	char path[1024];
	const char *want; /* in the error message */
	pid_t pid;
} load_case;

/* In the child: the load must fail with INFS_EINVAL and name the file. */
static int run_load(const load_case *c)
{
	int rc;
	if (c->kind == MODEL) {
		infs_model *m = NULL;
		rc = infs_model_load(&m, c->path, NULL);
	} else if (c->kind == TOKENIZER) {
		infs_tokenizer *t = NULL;
		rc = infs_tokenizer_load(&t, c->path);
	} else {
		infs_embedder *e = NULL;
		rc = infs_embedder_load(&e, c->path, NULL);
	}
	int ok = rc == INFS_EINVAL && strstr(infs_error_last(), c->want) != NULL;
	if (!ok)
		fprintf(stderr, "%s: rc %d, message '%s', expected %d with '%s'\n", c->what, rc, infs_error_last(),
		        INFS_EINVAL, c->want);
	return ok ? 0 : 1;
}

static void start(load_case *c)
{
	fflush(NULL);
	c->pid = fork();
	CHECK(c->pid >= 0);
	if (c->pid == 0) {
		alarm(HANG_SECONDS);
		_exit(run_load(c));
	}
}

static void finish(const load_case *c)
{
	int status = 0;
	CHECK(waitpid(c->pid, &status, 0) == c->pid);
	if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM) {
		fprintf(stderr, "%s: still blocked after %d s\n", c->what, HANG_SECONDS);
		check_failures++;
	} else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		fprintf(stderr, "%s: failed (status 0x%x)\n", c->what, status);
		check_failures++;
	}
}

static void link_fixture(const char *fixtures, const char *from, const char *to)
{
	char p[1024];
	snprintf(p, sizeof p, "%s/%s", fixtures, from);
	CHECK(symlink(p, in_dir(to)) == 0);
}

static void make_fifo(const char *name)
{
	CHECK(mkfifo(in_dir(name), 0600) == 0);
}

static void test_loads(const char *fixtures)
{
	/* Directories: the path itself a FIFO, every embedder file a FIFO, an
	 * HF model with a FIFO as config.json, as weights, as the shard index
	 * or as tokenizer.json (after real weights), a tokenizer directory
	 * whose tokenizer.json is a directory. */
	static const char *const subdirs[] = { "embedder", "config", "weights", "index", "tokenizer", "tokdir" };
	for (size_t i = 0; i < sizeof subdirs / sizeof *subdirs; i++)
		CHECK(mkdir(in_dir(subdirs[i]), 0700) == 0);
	make_fifo("fifo");
	static const char *const embedder_files[] = { "config.json", "vocab.txt", "tokenizer_config.json",
		                                      "sentence_bert_config.json", "modules.json",
		                                      "model.safetensors" };
	char p[64];
	for (size_t i = 0; i < sizeof embedder_files / sizeof *embedder_files; i++) {
		snprintf(p, sizeof p, "embedder/%s", embedder_files[i]);
		make_fifo(p);
	}
	make_fifo("config/config.json");
	link_fixture(fixtures, "llama/config.json", "weights/config.json");
	make_fifo("weights/model.safetensors");
	link_fixture(fixtures, "llama/config.json", "index/config.json");
	make_fifo("index/model.safetensors.index.json");
	link_fixture(fixtures, "llama/config.json", "tokenizer/config.json");
	link_fixture(fixtures, "llama/model.safetensors", "tokenizer/model.safetensors");
	make_fifo("tokenizer/tokenizer.json");
	CHECK(mkdir(in_dir("tokdir/tokenizer.json"), 0700) == 0);

	load_case cases[] = {
		{ "model from a FIFO (GGUF path)", MODEL, "", "a FIFO", 0 },
		{ "model with a FIFO config.json", MODEL, "", "a FIFO", 0 },
		{ "model with FIFO weights", MODEL, "", "a FIFO", 0 },
		{ "model with a FIFO shard index", MODEL, "", "a FIFO", 0 },
		{ "model with a FIFO tokenizer.json", MODEL, "", "a FIFO", 0 },
		{ "tokenizer from a FIFO", TOKENIZER, "", "a FIFO", 0 },
		{ "tokenizer with a FIFO tokenizer.json", TOKENIZER, "", "a FIFO", 0 },
		{ "tokenizer.json that is a directory", TOKENIZER, "", "a directory", 0 },
		{ "embedder whose files are FIFOs", EMBEDDER, "", "a FIFO", 0 },
		{ "embedder from a FIFO", EMBEDDER, "", "not a directory", 0 },
	};
	const char *paths[] = { "fifo", "config", "weights", "index", "tokenizer", "fifo", "tokenizer", "tokdir",
		                "embedder", "fifo" };
	size_t n = sizeof cases / sizeof *cases;
	for (size_t i = 0; i < n; i++) {
		snprintf(cases[i].path, sizeof cases[i].path, "%s", in_dir(paths[i]));
		start(&cases[i]);
	}
	for (size_t i = 0; i < n; i++)
		finish(&cases[i]);

	rmdir(in_dir("tokdir/tokenizer.json"));
	for (size_t i = 0; i < sizeof embedder_files / sizeof *embedder_files; i++) {
		snprintf(p, sizeof p, "embedder/%s", embedder_files[i]);
		unlink(in_dir(p));
	}
	static const char *const files[] = { "fifo", "config/config.json", "weights/config.json",
		                             "weights/model.safetensors", "index/config.json",
		                             "index/model.safetensors.index.json", "tokenizer/config.json",
		                             "tokenizer/model.safetensors", "tokenizer/tokenizer.json" };
	for (size_t i = 0; i < sizeof files / sizeof *files; i++)
		unlink(in_dir(files[i]));
	for (size_t i = 0; i < sizeof subdirs / sizeof *subdirs; i++)
		rmdir(in_dir(subdirs[i]));
}

int main(int argc, char **argv)
{
	CHECK(argc == 2);
	if (argc != 2)
		CHECK_DONE();
	char unused[600];
	scratch_make("file", unused, sizeof unused, "x");
	snprintf(dir, sizeof dir, "%s", scratch_dir);
	test_read();
	test_loads(argv[1]);
	scratch_cleanup();
	CHECK_DONE();
}
