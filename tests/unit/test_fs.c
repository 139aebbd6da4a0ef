/*
 * test_fs.c - sg-helper's fs commands, called in-process.
 *
 * Every test gets a fresh temporary directory as host_root for the
 * environment root "/workspace", runs sg_helper_fs() with an argv as the
 * gateway would build it, and parses the one JSON reply with jansson.
 */
/* nftw() is an XSI interface, memrchr() a GNU one. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "helper/fs.h"
#include "helper/internal.h"
#include "base/cancel.h"
#include "base/limits.h"

#define ROOT "/workspace"

struct fx {
	char dir[64];
	struct sg_buf out;
	json_t *reply;
	bool path_changed; /* PATH to restore in teardown */
	char *saved_path;  /* NULL when PATH was unset */
	char outside[64];  /* a directory beside the tree, "" if none */
};

static void path_of(struct fx *f, const char *rel, char *p, size_t n)
{
	snprintf(p, n, "%s/%s", f->dir, rel);
}

static void put(struct fx *f, const char *rel, const void *data, size_t n)
{
	char p[512];
	FILE *fp;

	path_of(f, rel, p, sizeof(p));
	fp = fopen(p, "wb");
	assert_non_null(fp);
	assert_int_equal(fwrite(data, 1, n, fp), n);
	fclose(fp);
}

static void puts_file(struct fx *f, const char *rel, const char *text)
{
	put(f, rel, text, strlen(text));
}

static void mk(struct fx *f, const char *rel)
{
	char p[512];

	path_of(f, rel, p, sizeof(p));
	assert_int_equal(mkdir(p, 0755), 0);
}

static void ln(struct fx *f, const char *target, const char *rel)
{
	char p[512];

	path_of(f, rel, p, sizeof(p));
	assert_int_equal(symlink(target, p), 0);
}

/* The file's bytes (NUL-terminated, caller frees), or NULL if absent. */
static char *slurp(struct fx *f, const char *rel, size_t *len)
{
	char p[512], *buf;
	long n;
	FILE *fp;

	path_of(f, rel, p, sizeof(p));
	fp = fopen(p, "rb");
	if (!fp)
		return NULL;
	fseek(fp, 0, SEEK_END);
	n = ftell(fp);
	fseek(fp, 0, SEEK_SET);
	buf = malloc((size_t)n + 1);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, (size_t)n, fp), (size_t)n);
	buf[n] = '\0';
	fclose(fp);
	if (len)
		*len = (size_t)n;
	return buf;
}

static bool exists(struct fx *f, const char *rel)
{
	char p[512];
	struct stat st;

	path_of(f, rel, p, sizeof(p));
	return lstat(p, &st) == 0;
}

static mode_t mode_of(struct fx *f, const char *rel)
{
	char p[512];
	struct stat st;

	path_of(f, rel, p, sizeof(p));
	assert_int_equal(lstat(p, &st), 0);
	return st.st_mode;
}

static void set_mtime(struct fx *f, const char *rel, time_t t)
{
	char p[512];
	struct timespec ts[2] = { { .tv_sec = t }, { .tv_sec = t } };

	path_of(f, rel, p, sizeof(p));
	assert_int_equal(utimensat(AT_FDCWD, p, ts, AT_SYMLINK_NOFOLLOW), 0);
}

static int rm_one(const char *p, const struct stat *st, int flag,
		  struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	return flag == FTW_DP ? rmdir(p) : unlink(p);
}

static void rm_tree(const char *dir)
{
	nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	snprintf(f->dir, sizeof(f->dir), "/tmp/sg-fs-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	sg_buf_init(&f->out, SG_ENVTOOL_REPLY);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	/* Restored here so that a failed assertion cannot leak it. */
	if (f->path_changed && f->saved_path)
		setenv("PATH", f->saved_path, 1);
	else if (f->path_changed)
		unsetenv("PATH");
	free(f->saved_path);
	if (f->outside[0])
		rm_tree(f->outside);
	rm_tree(f->dir);
	json_decref(f->reply);
	sg_buf_release(&f->out);
	free(f);
	return 0;
}

/*
 * Run "fs <args...> --root /workspace --host-root <dir>" with stdin
 * in/inlen; the parsed reply stays owned by f (borrowed by the caller).
 */
static json_t *run_v(struct fx *f, const void *in, size_t inlen,
		     const struct sg_cancel *cancel, va_list ap)
{
	char *argv[40];
	json_error_t jerr;
	const char *s;
	int argc = 0;

	while ((s = va_arg(ap, const char *)) != NULL) {
		assert_true(argc < 34);
		argv[argc++] = (char *)s;
	}
	argv[argc++] = (char *)"--root";
	argv[argc++] = (char *)ROOT;
	argv[argc++] = (char *)"--host-root";
	argv[argc++] = f->dir;
	argv[argc] = NULL;
	assert_int_equal(sg_helper_fs(argc, argv, in, inlen, &f->out, cancel),
			 0);
	json_decref(f->reply);
	f->reply = json_loadb(f->out.p, f->out.len, 0, &jerr);
	if (!f->reply)
		fail_msg("unparsable reply %s: %s", f->out.p, jerr.text);
	return f->reply;
}

static json_t *run(struct fx *f, ...)
{
	va_list ap;
	json_t *r;

	va_start(ap, f);
	r = run_v(f, NULL, 0, NULL, ap);
	va_end(ap);
	return r;
}

static json_t *run_in(struct fx *f, const void *in, size_t inlen, ...)
{
	va_list ap;
	json_t *r;

	va_start(ap, inlen);
	r = run_v(f, in, inlen, NULL, ap);
	va_end(ap);
	return r;
}

static json_t *run_cancel(struct fx *f, const struct sg_cancel *c, ...)
{
	va_list ap;
	json_t *r;

	va_start(ap, c);
	r = run_v(f, NULL, 0, c, ap);
	va_end(ap);
	return r;
}

static void expect_ok(struct fx *f)
{
	if (!json_is_true(json_object_get(f->reply, "ok")))
		fail_msg("expected ok, got %s", f->out.p);
}

static void expect_tool_error(struct fx *f, const char *part)
{
	const char *msg = json_string_value(json_object_get(f->reply,
							    "tool_error"));

	if (!json_is_false(json_object_get(f->reply, "ok")) || !msg)
		fail_msg("expected a tool error, got %s", f->out.p);
	if (part && !strstr(msg, part))
		fail_msg("tool error \"%s\" lacks \"%s\"", msg, part);
}

static void expect_error(struct fx *f, const char *word, const char *part)
{
	const char *w = json_string_value(json_object_get(f->reply, "error"));
	const char *msg = json_string_value(json_object_get(f->reply,
							    "message"));

	if (!w || strcmp(w, word) != 0 || !msg)
		fail_msg("expected error %s, got %s", word, f->out.p);
	if (part && !strstr(msg, part))
		fail_msg("message \"%s\" lacks \"%s\"", msg, part);
	assert_null(json_object_get(f->reply, "ok"));
}

static const char *str(struct fx *f, const char *key)
{
	const char *s = json_string_value(json_object_get(f->reply, key));

	if (!s)
		fail_msg("no string %s in %s", key, f->out.p);
	return s;
}

static json_int_t num(struct fx *f, const char *key)
{
	json_t *v = json_object_get(f->reply, key);

	if (!json_is_integer(v))
		fail_msg("no integer %s in %s", key, f->out.p);
	return json_integer_value(v);
}

static bool flag(struct fx *f, const char *key)
{
	json_t *v = json_object_get(f->reply, key);

	if (!json_is_boolean(v))
		fail_msg("no boolean %s in %s", key, f->out.p);
	return json_is_true(v);
}

/* A key of the view that write and edit answer (the host's result). */
static json_t *view_key(struct fx *f, const char *key)
{
	json_t *v = json_object_get(json_object_get(f->reply, "view"), key);

	if (!v)
		fail_msg("no %s in the view of %s", key, f->out.p);
	return v;
}

static const char *vstr(struct fx *f, const char *key)
{
	const char *s = json_string_value(view_key(f, key));

	if (!s)
		fail_msg("%s is not a string in %s", key, f->out.p);
	return s;
}

/* ---- read ---- */

static void test_read_text(void **state)
{
	struct fx *f = *state;

	puts_file(f, "a.txt", "one\r\ntwo\nthree\n");
	run(f, "read", "a.txt", NULL);
	expect_ok(f);
	/* The lines as they are: the gateway numbers them for the view. */
	assert_string_equal(str(f, "text"), "one\r\ntwo\nthree\n");
	assert_string_equal(str(f, "kind"), "text");
	assert_int_equal(num(f, "size"), 15);
	assert_int_equal(num(f, "total_lines"), 3);
	assert_int_equal(num(f, "num_lines"), 3);
	assert_int_equal(num(f, "start_line"), 1);
	/* The whole file's digest, whatever the window. */
	assert_string_equal(str(f, "content_sha256"),
			    "737cacfd55bc153855c76808d5ca28da6a8e36118f5b48bb7b6105a457cca25c");
	assert_true(strncmp(str(f, "workspace_revision"), "fs:worktree:", 12) == 0);
	assert_int_equal(strlen(str(f, "workspace_revision")), 12 + 16);
	assert_string_equal(str(f, "path"), "a.txt");

	run(f, "read", ROOT "/a.txt", "--offset", "2", "--limit", "1", NULL);
	assert_string_equal(str(f, "text"), "two\n");
	assert_int_equal(num(f, "num_lines"), 1);
	assert_int_equal(num(f, "total_lines"), 3);
	assert_string_equal(str(f, "content_sha256"),
			    "737cacfd55bc153855c76808d5ca28da6a8e36118f5b48bb7b6105a457cca25c");

	run(f, "read", "a.txt", "--offset", "9", NULL);
	expect_ok(f);
	assert_string_equal(str(f, "text"), "");
	assert_int_equal(num(f, "num_lines"), 0);

	puts_file(f, "noeol.txt", "x\ny");
	run(f, "read", "noeol.txt", NULL);
	assert_int_equal(num(f, "total_lines"), 2);
	assert_string_equal(str(f, "text"), "x\ny");

	puts_file(f, "ten.txt", "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n");
	run(f, "read", "ten.txt", "--offset", "9", NULL);
	assert_string_equal(str(f, "text"), "9\n10\n11\n");

	puts_file(f, "empty.txt", "");
	run(f, "read", "empty.txt", NULL);
	assert_int_equal(num(f, "total_lines"), 0);
	assert_int_equal(num(f, "size"), 0);
	assert_string_equal(str(f, "text"), "");
}

/* --raw: the text, then the JSON line that gives its length (the last line). */
static void test_read_raw(void **state)
{
	struct fx *f = *state;
	char *argv[] = { "read", "--raw", "r.txt", "--root", (char *)ROOT, "--host-root",
			 f->dir, NULL };
	const char *nl;
	json_t *j;

	puts_file(f, "r.txt", "a\xff\nb\n");
	sg_buf_reset(&f->out);
	assert_int_equal(sg_helper_fs(7, argv, NULL, 0, &f->out, NULL), 0);
	nl = memrchr(f->out.p, '\n', f->out.len);
	assert_non_null(nl);
	j = json_loadb(nl + 1, f->out.len - (size_t)(nl + 1 - f->out.p), 0, NULL);
	assert_non_null(j);
	assert_true(json_is_true(json_object_get(j, "ok")));
	assert_null(json_object_get(j, "content"));
	assert_null(json_object_get(j, "content_bytes"));
	/* Valid UTF-8 before it crosses a transport: 0xff is U+FFFD. */
	assert_int_equal(json_integer_value(json_object_get(j, "text_bytes")), 7);
	assert_int_equal(json_integer_value(json_object_get(j, "total_lines")), 2);
	/* The lines cross once; the gateway numbers them. */
	assert_int_equal((size_t)(nl - f->out.p), 7);
	assert_memory_equal(f->out.p, "a\xef\xbf\xbd\nb\n", 7);
	json_decref(j);
}

static void test_read_utf8(void **state)
{
	struct fx *f = *state;

	put(f, "bad.txt", "a\xff\xfe" "b\n", 5);
	run(f, "read", "bad.txt", NULL);
	expect_ok(f);
	assert_string_equal(str(f, "text"), "a\xef\xbf\xbd\xef\xbf\xbd" "b\n");
	assert_int_equal(num(f, "size"), 5);
}

static void test_read_big(void **state)
{
	struct fx *f = *state;
	size_t n = 200000, len = 0;
	char *big = malloc(n * 8);

	assert_non_null(big);
	for (size_t i = 1; i <= n; i++)
		len += (size_t)snprintf(big + len, 16, "%zu\n", i);
	put(f, "big.txt", big, len);
	run(f, "read", "big.txt", "--offset", "199999", "--limit", "1", NULL);
	assert_string_equal(str(f, "text"), "199999\n");
	assert_int_equal(num(f, "total_lines"), 200000);
	assert_int_equal(num(f, "size"), (json_int_t)len);

	/* No limit: the host's 256 KiB rule, with its sentence. */
	run(f, "read", "big.txt", NULL);
	expect_tool_error(f, "file too large (");
	expect_tool_error(f, "bytes, max 262144). Use offset and limit to read portions");
	run(f, "read", "big.txt", "--limit", "10", NULL);
	assert_string_equal(str(f, "text"), "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n");
	assert_int_equal(num(f, "total_lines"), 200000);
	/* A window larger than a reply may hold is refused, as the host refuses. */
	run(f, "read", "big.txt", "--limit", "200000", NULL);
	expect_tool_error(f, "selected read range too large");
	free(big);
}

static void test_read_failures(void **state)
{
	struct fx *f = *state;
	char p[512];

	mk(f, "d");
	puts_file(f, "d/Readme.md", "x");
	run(f, "read", "nope.txt", NULL);
	expect_tool_error(f, "File not found: nope.txt");
	assert_null(strstr(str(f, "tool_error"), "Did you mean"));
	run(f, "read", "d/readme.md", NULL);
	expect_tool_error(f, "File not found: d/readme.md. Did you mean: d/Readme.md?");
	run(f, "read", "d/Readme", NULL);
	expect_tool_error(f, "Did you mean: d/Readme.md?");
	run(f, "read", "d", NULL);
	expect_tool_error(f, "path is a directory: d. Use list_files");
	run(f, "read", "../etc/passwd", NULL);
	expect_error(f, "path_escape",
		     "../etc/passwd resolves outside the workspace root");
	ln(f, "/etc/passwd", "pw");
	run(f, "read", "pw", NULL);
	expect_error(f, "path_escape", NULL);
	run(f, "read", "/etc/passwd", NULL);
	expect_error(f, "path_escape", NULL);
	/* A FIFO is refused without waiting for a writer. */
	path_of(f, "fifo", p, sizeof(p));
	assert_int_equal(mkfifo(p, 0600), 0);
	run(f, "read", "fifo", NULL);
	expect_tool_error(f, "read_file requires a regular file: fifo");
	put(f, "nul.bin", "ab\0cd", 5);
	run(f, "read", "nul.bin", NULL);
	expect_tool_error(f, "unsupported binary file");
	run(f, "read", "a", "b", NULL);
	expect_error(f, "invalid_argument", NULL);
	run(f, "read", "x", "--limit", "-1", NULL);
	expect_error(f, "invalid_argument", "--limit");
}

/* The host's sensitive paths: refused unless unconfined. */
static void test_read_sensitive(void **state)
{
	struct fx *f = *state;

	mk(f, "k");
	puts_file(f, ".env.local", "T=1\n");
	puts_file(f, "k/id_ed25519", "key\n");
	puts_file(f, "my-credentials.json", "{}\n");
	puts_file(f, "credentials.go", "package x\n");
	run(f, "read", ".env.local", NULL);
	expect_error(f, "permission_denied", "refuses to read sensitive path \".env.local\" "
		     "(.env file)");
	run(f, "read", "k/id_ed25519", NULL);
	expect_error(f, "permission_denied", "SSH private key");
	run(f, "read", "my-credentials.json", NULL);
	expect_error(f, "permission_denied", "credential or secret path");
	/* Source about credentials is not a credential store. */
	run(f, "read", "credentials.go", NULL);
	expect_ok(f);
	run(f, "read", "--unconfined", ".env.local", NULL);
	expect_ok(f);
	assert_string_equal(str(f, "text"), "T=1\n");
	/* Unconfined, credentials in a sensitive file are masked as the host's. */
	puts_file(f, ".env", "A=1\nAPI_KEY=\"sk-abcdefghijkl\"\nAuthorization: Bearer abcdefghijk\n"
		  "my_password=x\n-----BEGIN RSA PRIVATE KEY-----\nMIIE\n"
		  "-----END RSA PRIVATE KEY-----\n");
	run(f, "read", "--unconfined", ".env", NULL);
	assert_string_equal(str(f, "text"), "A=1\nAPI_KEY=[REDACTED]\"\nAuthorization: [REDACTED] "
			    "[REDACTED]\nmy_password=x\n[REDACTED]\n");
	run(f, "read", "--unconfined", "--byte-offset", "4", "--byte-limit", "30", ".env", NULL);
	expect_ok(f);
	assert_null(strstr(str(f, "data"), "c2stYWJj")); /* no "sk-abc" in the window */
	/* An ordinary file is shown as it is. */
	puts_file(f, "notes.txt", "token=abc\n");
	run(f, "read", "--unconfined", "notes.txt", NULL);
	assert_string_equal(str(f, "text"), "token=abc\n");
	assert_string_equal(sg_fs_sensitive("a/.git/config"), "version-control metadata");
	assert_string_equal(sg_fs_sensitive("x/PRIVATE_KEY.pem"), "private key path");
	assert_null(sg_fs_sensitive("src/main.c"));
}

/* PNG, JPEG, GIF and WebP by their bytes: whole, base64, with dimensions. */
static void test_read_image(void **state)
{
	struct fx *f = *state;
	static const char png[] = "\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x03\0\0\0\x02\x08\x06\0\0\0";
	static const char gif[] = "GIF89a\x05\0\x07\0\0\0\0,\0\0\0\0\x05\0\x07\0\0\x02\x01\0\0;";

	put(f, "p.png", png, sizeof(png) - 1);
	run(f, "read", "p.png", NULL);
	expect_ok(f);
	assert_string_equal(str(f, "kind"), "image");
	assert_string_equal(str(f, "media_type"), "image/png");
	assert_int_equal(num(f, "width"), 3);
	assert_int_equal(num(f, "height"), 2);
	assert_string_equal(str(f, "data"), "iVBORw0KGgoAAAANSUhEUgAAAAMAAAACCAYAAAA=");
	put(f, "g.gif", gif, sizeof(gif) - 1);
	run(f, "read", "g.gif", NULL);
	expect_ok(f);
	assert_int_equal(num(f, "width"), 5);
	assert_int_equal(num(f, "height"), 7);
	put(f, "bad.png", png, 12);
	run(f, "read", "bad.png", NULL);
	expect_tool_error(f, "cannot decode image");
}

/* One revision for every command: it moves with the tree's files. */
static void test_revision(void **state)
{
	struct fx *f = *state;
	char first[64];

	puts_file(f, "a.txt", "1\n");
	run(f, "revision", NULL);
	expect_ok(f);
	snprintf(first, sizeof(first), "%s", str(f, "workspace_revision"));
	assert_true(strncmp(first, "fs:worktree:", 12) == 0);
	run(f, "revision", NULL);
	assert_string_equal(str(f, "workspace_revision"), first);
	/* Version-control and dot directories are not part of it. */
	mk(f, ".git");
	puts_file(f, ".git/HEAD", "x\n");
	run(f, "revision", NULL);
	assert_string_equal(str(f, "workspace_revision"), first);
	puts_file(f, "a.txt", "2\n");
	run(f, "revision", NULL);
	assert_string_not_equal(str(f, "workspace_revision"), first);
	run(f, "list", NULL);
	assert_string_not_equal(str(f, "workspace_revision"), first);
}

/*
 * Run "fs <cmd> --unconfined --root <root> -- <path>" as the helper runs
 * inside the environment (no --host-root); the reply stays owned by f.
 */
static void run_unconfined(struct fx *f, const char *cmd, char *root, const char *path)
{
	char *argv[] = { (char *)cmd, "--unconfined", "--root", root, "--", (char *)path,
			 NULL };

	sg_buf_reset(&f->out);
	assert_int_equal(sg_helper_fs(6, argv, NULL, 0, &f->out, NULL), 0);
	json_decref(f->reply);
	f->reply = json_loadb(f->out.p, f->out.len, 0, NULL);
}

/*
 * --unconfined where the helper runs in the environment (no --host-root):
 * a path outside root resolves and comes back absolute.  In-process on
 * the host it is refused instead.
 */
static void test_unconfined(void **state)
{
	struct fx *f = *state;
	char root[512];

	puts_file(f, "in.txt", "in\n");
	snprintf(root, sizeof(root), "%s", f->dir);
	run_unconfined(f, "read", root, "/etc/hostname");
	expect_ok(f);
	assert_string_equal(str(f, "path"), "/etc/hostname");
	run_unconfined(f, "list", root, "../../../../../../etc");
	expect_ok(f);
	assert_string_equal(str(f, "path"), "/etc");
	run_unconfined(f, "read", root, "in.txt");
	assert_string_equal(str(f, "path"), "in.txt");
	/* In-process on this host: the host's files are never reached. */
	run(f, "read", "--unconfined", "/etc/hostname", NULL);
	expect_error(f, "permission_denied", "outside the workspace root");
}

/* ---- write, base64 ---- */

static void test_write(void **state)
{
	struct fx *f = *state;
	char *data;

	run_in(f, "hi\n", 3, "write", "n/e/w.txt", NULL);
	expect_ok(f);
	assert_int_equal(json_integer_value(view_key(f, "written_bytes")), 3);
	assert_string_equal(vstr(f, "path"), "n/e/w.txt");
	assert_string_equal(vstr(f, "action"), "create");
	assert_string_equal(vstr(f, "new_file_sha"), "sha256:98ea6e4f216f2fb4b69fff9b3a44842c"
			    "38686ca685f3f55dc48c5d3fb1107be4");
	data = slurp(f, "n/e/w.txt", NULL);
	assert_string_equal(data, "hi\n");
	free(data);
	assert_true(S_ISDIR(mode_of(f, "n/e")));
	assert_int_equal(mode_of(f, "n/e/w.txt") & 07777, 0644);

	/* Overwriting keeps the mode. */
	{
		char p[512];

		path_of(f, "n/e/w.txt", p, sizeof(p));
		assert_int_equal(chmod(p, 0600), 0);
	}
	run_in(f, "again", 5, "write", "n/e/w.txt", NULL);
	expect_ok(f);
	assert_string_equal(vstr(f, "action"), "overwrite");
	assert_string_equal(vstr(f, "old_file_sha"), "sha256:98ea6e4f216f2fb4b69fff9b3a44842c"
			    "38686ca685f3f55dc48c5d3fb1107be4");
	assert_int_equal(mode_of(f, "n/e/w.txt") & 07777, 0600);
	run_in(f, "x", 1, "write", "--create-only", "n/e/w.txt", NULL);
	expect_tool_error(f, "file already exists: n/e/w.txt");

	/* No temporary file is left beside the target. */
	{
		char p[512];
		struct dirent *e;
		int names = 0;
		DIR *d;

		path_of(f, "n/e", p, sizeof(p));
		d = opendir(p);
		assert_non_null(d);
		while ((e = readdir(d)))
			names += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
		closedir(d);
		assert_int_equal(names, 1);
	}

	/* An empty write makes an empty file. */
	run_in(f, "", 0, "write", "empty", NULL);
	expect_ok(f);
	assert_int_equal(json_integer_value(view_key(f, "written_bytes")), 0);
	assert_true(exists(f, "empty"));
}

static void test_write_links_and_refusals(void **state)
{
	struct fx *f = *state;
	char *data;

	puts_file(f, "target.txt", "old");
	ln(f, "target.txt", "link");
	ln(f, ROOT "/target.txt", "abslink");
	ln(f, "/etc", "etc_link");
	mk(f, "d");

	run_in(f, "new", 3, "write", "link", NULL);
	expect_ok(f);
	assert_string_equal(vstr(f, "path"), "target.txt");
	assert_true(S_ISLNK(mode_of(f, "link")));
	data = slurp(f, "target.txt", NULL);
	assert_string_equal(data, "new");
	free(data);

	run_in(f, "abs", 3, "write", "abslink", NULL);
	expect_ok(f);
	assert_string_equal(vstr(f, "path"), "target.txt");

	run_in(f, "x", 1, "write", "etc_link/evil", NULL);
	expect_error(f, "path_escape", NULL);
	run_in(f, "x", 1, "write", "../evil", NULL);
	expect_error(f, "path_escape", NULL);
	run_in(f, "x", 1, "write", "d", NULL);
	expect_tool_error(f, "is a directory");
	run_in(f, "x", 1, "write", "target.txt/x", NULL);
	expect_tool_error(f, "not a directory");
	run_in(f, "x", 1, "write", "--overwrite-policy", "always", "y", NULL);
	expect_tool_error(f, "invalid overwrite_policy");
	run_in(f, "x", 1, "write", "--mode", "0755", "y", NULL);
	expect_error(f, "invalid_argument", "--mode");
	run_in(f, "x", 1, "write", ".env", NULL);
	expect_tool_error(f, "refuses to write sensitive path");
	assert_false(exists(f, "y"));
	assert_false(exists(f, ".env"));
}

/* No base64 either way: the host's read_file and write_file take text. */
static void test_base64(void **state)
{
	struct fx *f = *state;

	puts_file(f, "p1", "a");
	run(f, "read", "--base64", "p1", NULL);
	expect_error(f, "invalid_argument", NULL);
	run_in(f, "YQ==", 4, "write", "--base64", "p2", NULL);
	expect_error(f, "invalid_argument", NULL);
}

/* ---- edit ---- */

static void edit(struct fx *f, const char *path, const char *old,
		 const char *repl, bool all)
{
	char in[512];
	int n = snprintf(in, sizeof(in), "%zu\n%s%s", strlen(old), old, repl);

	if (all)
		run_in(f, in, (size_t)n, "edit", path, "--all", NULL);
	else
		run_in(f, in, (size_t)n, "edit", path, NULL);
}

static void test_edit(void **state)
{
	struct fx *f = *state;
	char p[512], *data;

	puts_file(f, "e.txt", "hello world hello\n");
	path_of(f, "e.txt", p, sizeof(p));
	assert_int_equal(chmod(p, 0640), 0);

	edit(f, "e.txt", "world", "there", false);
	expect_ok(f);
	assert_string_equal(vstr(f, "action"), "edit");
	assert_string_equal(vstr(f, "path"), "e.txt");
	data = slurp(f, "e.txt", NULL);
	assert_string_equal(data, "hello there hello\n");
	free(data);
	assert_int_equal(mode_of(f, "e.txt") & 07777, 0640);

	edit(f, "e.txt", "hello", "bye", false);
	expect_tool_error(f, "ambiguous_old_text: old_text matched 2 locations");
	data = slurp(f, "e.txt", NULL);
	assert_string_equal(data, "hello there hello\n");
	free(data);

	edit(f, "e.txt", "hello", "bye", true);
	expect_ok(f);
	data = slurp(f, "e.txt", NULL);
	assert_string_equal(data, "bye there bye\n");
	free(data);

	/* Replacing with nothing, and matches that would overlap. */
	puts_file(f, "o.txt", "aaaa");
	edit(f, "o.txt", "aa", "", true);
	expect_ok(f);
	data = slurp(f, "o.txt", NULL);
	assert_string_equal(data, "");
	free(data);

	edit(f, "e.txt", "absent", "x", false);
	expect_tool_error(f, "old_text_not_found: failed to find old_text in file");
	edit(f, "e.txt", "", "x", false);
	expect_tool_error(f, "edit_file requires old_text");
	edit(f, "missing.txt", "a", "b", false);
	expect_tool_error(f, "no such file");
	run_in(f, "99\nab", 5, "edit", "e.txt", NULL);
	expect_error(f, "invalid_argument", NULL);
	run_in(f, "x\nab", 4, "edit", "e.txt", NULL);
	expect_error(f, "invalid_argument", NULL);
}

/* ---- list ---- */

static void test_list(void **state)
{
	struct fx *f = *state;
	json_t *e;

	puts_file(f, "a.txt", "1");
	mk(f, "b");
	puts_file(f, "b/c.txt", "22");
	puts_file(f, ".hidden", "");
	puts_file(f, ".env", "X=1\n");
	mk(f, ".git");
	ln(f, "a.txt", "link");
	ln(f, "/etc", "z_etc");

	run(f, "list", NULL);
	expect_ok(f);
	assert_string_equal(str(f, "path"), ".");
	/* One level, sorted, dot names too; links are entries, never followed. */
	e = json_object_get(f->reply, "entries");
	assert_int_equal(json_array_size(e), 5);
	{
		char *got = json_dumps(e, JSON_COMPACT | JSON_SORT_KEYS);

		assert_string_equal(got,
				    "[{\"is_dir\":false,\"name\":\".hidden\",\"path\":\".hidden\","
				    "\"size\":0},{\"is_dir\":false,\"name\":\"a.txt\",\"path\":"
				    "\"a.txt\",\"size\":1},{\"is_dir\":true,\"name\":\"b\",\"path\":"
				    "\"b\"},{\"is_dir\":false,\"name\":\"link\",\"path\":\"link\","
				    "\"size\":5},{\"is_dir\":false,\"name\":\"z_etc\",\"path\":"
				    "\"z_etc\",\"size\":4}]");
		free(got);
	}
	assert_int_equal(num(f, "total"), 7);
	assert_int_equal(num(f, "visible_total"), 5);
	assert_int_equal(num(f, "omitted_protected"), 2);
	assert_false(flag(f, "has_more"));
	assert_int_equal(strlen(str(f, "listing")), 64);

	run(f, "list", "--unconfined", NULL);
	assert_int_equal(num(f, "visible_total"), 7);

	run(f, "list", "b", NULL);
	e = json_array_get(json_object_get(f->reply, "entries"), 0);
	assert_string_equal(json_string_value(json_object_get(e, "path")), "b/c.txt");

	run(f, "list", "a.txt", NULL);
	expect_tool_error(f, "path is not a directory: a.txt. Use read_file to inspect files");
	run(f, "list", "nope", NULL);
	expect_tool_error(f, "no such file");
	run(f, "list", "z_etc", NULL);
	expect_error(f, "path_escape", NULL);
	run(f, "list", ".git", NULL);
	expect_error(f, "permission_denied", "list_files refuses to list sensitive path");
}

/*
 * Pages of 1000 from --offset: each page is the next part of the whole,
 * and the digest names the whole listing, whatever the page.
 */
static void test_list_pages(void **state)
{
	struct fx *f = *state;
	char name[64], listing[80];
	json_t *e;

	mk(f, "many");
	for (int i = 0; i < 1003; i++) {
		snprintf(name, sizeof(name), "many/n%04d", (i * 7) % 1003);
		puts_file(f, name, "x");
	}
	run(f, "list", "many", NULL);
	expect_ok(f);
	assert_int_equal(json_array_size(json_object_get(f->reply, "entries")), 1000);
	assert_true(flag(f, "has_more"));
	assert_int_equal(num(f, "visible_total"), 1003);
	snprintf(listing, sizeof(listing), "%s", str(f, "listing"));
	run(f, "list", "many", "--offset", "1000", NULL);
	e = json_object_get(f->reply, "entries");
	assert_int_equal(json_array_size(e), 3);
	assert_string_equal(json_string_value(json_object_get(json_array_get(e, 0), "name")),
			    "n1000");
	assert_false(flag(f, "has_more"));
	assert_string_equal(str(f, "listing"), listing);
	run(f, "list", "many", "--offset", "5000", NULL);
	assert_int_equal(json_array_size(json_object_get(f->reply, "entries")), 0);
	puts_file(f, "many/zz", "y");
	run(f, "list", "many", "--offset", "1000", NULL);
	assert_string_not_equal(str(f, "listing"), listing);
}

/* ---- glob ---- */

static void glob_tree(struct fx *f)
{
	mk(f, "src");
	mk(f, "src/sub");
	mk(f, ".git");
	puts_file(f, "src/a.c", "");
	puts_file(f, "src/sub/b.c", "");
	puts_file(f, "src/x.h", "");
	puts_file(f, "top.c", "");
	puts_file(f, ".git/config.c", "");
	ln(f, "src", "linkdir");
	set_mtime(f, "src/a.c", 1000);
	set_mtime(f, "src/x.h", 2000);
	set_mtime(f, "src/sub/b.c", 3000);
	set_mtime(f, "top.c", 4000);
	set_mtime(f, ".git/config.c", 5000);
}

/*
 * The records of a glob ("files") or a grep ("records", content mode) as
 * lines, "PATH" or "PATH:LINE:TEXT", each path as list writes a name (one
 * line, C-quoted when it holds control characters), in reply order.
 */
static const char *hits(struct fx *f)
{
	static struct sg_buf b = SG_BUF_INIT(4 * SG_MiB);
	json_t *files = json_object_get(f->reply, "files"), *e;
	json_t *recs = json_object_get(f->reply, "records");
	size_t i;

	sg_buf_reset(&b);
	json_array_foreach(files, i, e) {
		assert_int_equal(sg_fs_name_put(&b, json_string_value(e),
						json_string_length(e), ""), SG_OK);
		assert_int_equal(sg_buf_addc(&b, '\n'), SG_OK);
	}
	json_array_foreach(recs, i, e) {
		json_t *file = json_object_get(e, "file"), *text = json_object_get(e, "content");

		assert_int_equal(sg_fs_name_put(&b, json_string_value(file),
						json_string_length(file), ""), SG_OK);
		assert_int_equal(sg_buf_addf(&b, ":%lld:%s\n",
					     (long long)json_integer_value(json_object_get(e, "line")),
					     json_string_value(text)), SG_OK);
	}
	return b.p ? b.p : "";
}

/* How many records the reply holds. */
static size_t shown(struct fx *f)
{
	json_t *v = json_object_get(f->reply, "files");

	return json_array_size(v ? v : json_object_get(f->reply, "records"));
}

/* v as compact JSON, in order (until the next call). */
static const char *json_dumps_s(const json_t *v)
{
	static char buf[4096];

	buf[0] = '\0';
	if (v && json_dumpb(v, buf, sizeof(buf) - 1, JSON_COMPACT) < sizeof(buf) - 1)
		buf[json_dumpb(v, buf, sizeof(buf) - 1, JSON_COMPACT)] = '\0';
	return buf;
}

static void glob_is(struct fx *f, const char *pattern, const char *want)
{
	run(f, "glob", pattern, NULL);
	expect_ok(f);
	if (strcmp(hits(f), want) != 0)
		fail_msg("glob %s: got \"%s\", want \"%s\"", pattern, hits(f), want);
}

static void test_glob(void **state)
{
	struct fx *f = *state;

	glob_tree(f);
	/* Sorted by path, whatever the times; .git only where a component names it. */
	glob_is(f, "**/*.c", "src/a.c\nsrc/sub/b.c\ntop.c\n");
	assert_int_equal(num(f, "total"), 3);
	assert_int_equal(strlen(str(f, "result_hash")), 32);
	glob_is(f, "src/*.c", "src/a.c\n");
	/* No '/': a name at any depth, as rg's --glob matches it for the host. */
	glob_is(f, "*.c", "src/a.c\nsrc/sub/b.c\ntop.c\n");
	glob_is(f, "src/**", "src/a.c\nsrc/sub/b.c\nsrc/x.h\n");
	glob_is(f, "src/**/b.c", "src/sub/b.c\n");
	glob_is(f, "src/**/**/*.c", "src/a.c\nsrc/sub/b.c\n");
	glob_is(f, "src/[ab].c", "src/a.c\n");
	glob_is(f, "?op.c", "top.c\n");
	glob_is(f, "./src/./x.?", "src/x.h\n");
	glob_is(f, ".git/*.c", ".git/config.c\n");
	glob_is(f, "**/config.c", "");
	glob_is(f, "linkdir/*.c", "");
	glob_is(f, "nothing*", "");
	glob_is(f, ROOT "/src/*.c", "src/a.c\n");

	/* A page: the window from --offset, the total of all. */
	run(f, "glob", "**/*.c", "--page", "2", NULL);
	assert_string_equal(hits(f), "src/a.c\nsrc/sub/b.c\n");
	assert_int_equal(num(f, "total"), 3);
	run(f, "glob", "**/*.c", "--page", "2", "--offset", "2", NULL);
	assert_string_equal(hits(f), "top.c\n");
	run(f, "glob", "**/*.c", "--offset", "9", NULL);
	assert_string_equal(hits(f), "");
	assert_int_equal(num(f, "total"), 3);

	run(f, "glob", "*.c", "--path", "src", NULL);
	assert_string_equal(hits(f), "src/a.c\nsrc/sub/b.c\n");
	run(f, "glob", "*.c", "--path", "linkdir", NULL);
	assert_string_equal(hits(f), "src/a.c\nsrc/sub/b.c\n");

	run(f, "glob", "../*", NULL);
	expect_error(f, "invalid_argument", NULL);
	run(f, "glob", "/etc/*", NULL);
	expect_error(f, "path_escape", NULL);
	run(f, "glob", "*", "--path", "../", NULL);
	expect_error(f, "path_escape", NULL);
	run(f, "glob", "*", "--path", "top.c", NULL);
	expect_tool_error(f, "not a directory");
}

static void test_glob_many(void **state)
{
	struct fx *f = *state;
	char name[32];

	const char *first;

	/* More hits than twice the window: the bounded keeper must stay exact. */
	mk(f, "m");
	for (int i = 0; i < 50; i++) {
		snprintf(name, sizeof(name), "m/f%02d", (i * 7) % 50);
		puts_file(f, name, "");
	}
	run(f, "glob", "m/*", "--page", "3", NULL);
	expect_ok(f);
	assert_string_equal(hits(f), "m/f00\nm/f01\nm/f02\n");
	assert_int_equal(num(f, "total"), 50);
	first = json_string_value(json_object_get(f->reply, "result_hash"));
	first = first ? strdup(first) : NULL;
	run(f, "glob", "m/*", "--page", "3", "--offset", "47", NULL);
	assert_string_equal(hits(f), "m/f47\nm/f48\nm/f49\n");
	/* The fingerprint is the whole result's, not the page's. */
	assert_string_equal(str(f, "result_hash"), first);
	puts_file(f, "m/f50", "");
	run(f, "glob", "m/*", "--page", "3", NULL);
	assert_string_not_equal(str(f, "result_hash"), first);
	free((char *)first);
	run(f, "glob", "m/*", NULL);
	assert_int_equal(shown(f), 51);
}

/*
 * Many "**" in one pattern against a deep tree: the matcher used to try
 * every way the "**" could split each path (about 10^7 tries per entry
 * here, growing sixfold with every further pair), holding the caller
 * for seconds to hours with no cancel seen.  It must answer at once, and
 * still match as before, ".git" rules included.
 */
static void test_glob_nested_globstars(void **state)
{
	struct fx *f = *state;
	char dir[128] = "", pat[256] = "";
	int64_t t0;

	for (int i = 0; i < 30; i++) {
		strcat(dir, i ? "/a" : "a");
		mk(f, dir);
	}
	strcat(dir, "/f.c");
	puts_file(f, dir, "");
	strcat(dir, "\n");
	mk(f, "a/.git");
	puts_file(f, "a/.git/g.c", "");
	for (int i = 0; i < 12; i++)
		strcat(pat, "**/*/");
	strcat(pat, "zz");
	t0 = sg_now_ms();
	glob_is(f, pat, "");
	assert_true(sg_now_ms() - t0 < 1000);

	/* The same answers as the backtracking matcher gave. */
	glob_is(f, "**/*/**/*/**/f.c", dir);
	glob_is(f, "**/*/**/*/**/*/**/*/**/*/**/*/**/*/**/*/**/*/**/*/**/f.c", dir);
	glob_is(f, "a/**/.git/*.c", "a/.git/g.c\n");
	glob_is(f, "**/g.c", "");
	glob_is(f, "**/b/*.c", "");
	glob_is(f, "{zz,**/a/f.c,**/b/f.c}", dir);
}

/* ---- grep ---- */

static void grep_tree(struct fx *f)
{
	mk(f, "src");
	puts_file(f, "src/a.c", "int main\nfoo bar\n");
	puts_file(f, "src/b.txt", "FOO\n");
	puts_file(f, "notes.md", "foo\n");
}

static bool has_line(const char *content, const char *line)
{
	size_t n = strlen(line);

	for (const char *p = content; (p = strstr(p, line)) != NULL; p++)
		if ((p == content || p[-1] == '\n') && p[n] == '\n')
			return true;
	return false;
}

static bool have_rg(void)
{
	const char *path = getenv("PATH");
	char buf[512];

	for (const char *p = path ? path : ""; *p;) {
		size_t n = strcspn(p, ":");

		snprintf(buf, sizeof(buf), "%.*s/rg", (int)n, p);
		if (access(buf, X_OK) == 0)
			return true;
		p += n;
		if (*p)
			p++;
	}
	return false;
}

static void grep_checks(struct fx *f, const char *engine)
{
	const char *c;

	run(f, "grep", "foo", NULL);
	expect_ok(f);
	assert_string_equal(str(f, "engine"), engine);
	c = hits(f);
	/* By file then line. */
	assert_string_equal(c, "notes.md:1:foo\nsrc/a.c:2:foo bar\n");
	assert_int_equal(num(f, "total"), 2);
	assert_int_equal(num(f, "record_total"), 2);

	run(f, "grep", "foo", "--ignore-case", NULL);
	assert_true(has_line(hits(f), "src/b.txt:1:FOO"));
	assert_int_equal(num(f, "total"), 3);

	run(f, "grep", "foo", "--glob", "*.c", NULL);
	assert_string_equal(hits(f), "src/a.c:2:foo bar\n");

	run(f, "grep", "fo+ ba[r]", "--path", "src", NULL);
	assert_string_equal(hits(f), "src/a.c:2:foo bar\n");
	run(f, "grep", "main", "--path", ROOT "/src/a.c", NULL);
	assert_string_equal(hits(f), "src/a.c:1:int main\n");
	run(f, "grep", "foo", "--path", "notes.md", NULL);
	assert_string_equal(hits(f), "notes.md:1:foo\n");

	/* The other modes: files, and lines counted per file. */
	run(f, "grep", "o", "--ignore-case", "--mode", "files", NULL);
	assert_string_equal(json_dumps_s(json_object_get(f->reply, "records")),
			    "[\"notes.md\",\"src/a.c\",\"src/b.txt\"]");
	run(f, "grep", "o", "--ignore-case", "--mode", "count", NULL);
	assert_string_equal(json_dumps_s(json_object_get(f->reply, "records")),
			    "[{\"file\":\"notes.md\",\"count\":1},{\"file\":\"src/a.c\","
			    "\"count\":1},{\"file\":\"src/b.txt\",\"count\":1}]");
	assert_int_equal(num(f, "total"), 3);
	run(f, "grep", "o", "--mode", "lines", NULL);
	expect_error(f, "invalid_argument", NULL);

	run(f, "grep", "-e", NULL);
	expect_ok(f);
	assert_int_equal(num(f, "total"), 0);

	run(f, "grep", "nomatch-anywhere", NULL);
	expect_ok(f);
	assert_string_equal(hits(f), "");
	assert_int_equal(num(f, "total"), 0);

	run(f, "grep", "o", "--ignore-case", "--page", "1", NULL);
	expect_ok(f);
	assert_string_equal(hits(f), "notes.md:1:foo\n");
	assert_int_equal(num(f, "total"), 3);
	run(f, "grep", "o", "--ignore-case", "--page", "1", "--offset", "2", NULL);
	assert_string_equal(hits(f), "src/b.txt:1:FOO\n");

	/* The host's words for a pattern it cannot compile, whichever engine. */
	run(f, "grep", "(unclosed", NULL);
	expect_tool_error(f, "invalid regex: ");
	run(f, "grep", "foo", "--path", "../", NULL);
	expect_error(f, "path_escape", NULL);
	run(f, "grep", "foo", "--path", "missing", NULL);
	expect_tool_error(f, "no such file");
}

static void test_grep_rg(void **state)
{
	struct fx *f = *state;

	if (!have_rg())
		skip();
	grep_tree(f);
	grep_checks(f, "rg");
}

/* A PATH with grep and nothing else: no rg to be found (teardown restores it). */
static void use_grep_only(struct fx *f)
{
	const char *grep = access("/usr/bin/grep", X_OK) == 0 ? "/usr/bin/grep"
							     : "/bin/grep";
	char bin[512], link[600];

	f->saved_path = getenv("PATH") ? strdup(getenv("PATH")) : NULL;
	f->path_changed = true;
	path_of(f, ".bin", bin, sizeof(bin));
	assert_int_equal(mkdir(bin, 0755), 0);
	snprintf(link, sizeof(link), "%s/grep", bin);
	assert_int_equal(symlink(grep, link), 0);
	assert_int_equal(setenv("PATH", bin, 1), 0);
}

static void test_grep_fallback(void **state)
{
	struct fx *f = *state;

	grep_tree(f);
	use_grep_only(f);
	grep_checks(f, "grep");
	/* And with no search program at all. */
	assert_int_equal(setenv("PATH", "/sg-nonexistent", 1), 0);
	run(f, "grep", "foo", NULL);
	expect_tool_error(f, "grep");
}

struct firing {
	struct sg_cancel *c;
	int64_t delay_ms;
};

static void *fire_later(void *arg)
{
	struct firing *fi = arg;
	struct timespec ts = { .tv_sec = fi->delay_ms / 1000,
			       .tv_nsec = (fi->delay_ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
	sg_cancel_fire(fi->c, SG_E_CANCELLED);
	return NULL;
}

static void test_grep_cancel(void **state)
{
	struct fx *f = *state;
	struct sg_cancel c;
	struct firing fi = { .c = &c, .delay_ms = 200 };
	pthread_t th;
	char line[3003];
	int64_t t0;

	/*
	 * A search that takes minutes: back-references send GNU grep to
	 * glibc's backtracking matcher, and a line of 3001 'a's before the
	 * 'c' makes it try every split in vain.  Only cancel ends it.  (A
	 * FIFO used to serve, but grep refuses one now, as read_file does.)
	 */
	memset(line, 'a', 3001);
	memcpy(line + 3001, "c\n", 2);
	put(f, "slow.txt", line, sizeof(line));
	use_grep_only(f);
	assert_int_equal(sg_cancel_init(&c), SG_OK);
	assert_int_equal(pthread_create(&th, NULL, fire_later, &fi), 0);
	t0 = sg_now_ms();
	run_cancel(f, &c, "grep", "^(a*)(a*)(a*)\\3\\2\\1c$", "--path", "slow.txt", NULL);
	pthread_join(th, NULL);
	expect_error(f, "cancelled", NULL);
	assert_true(sg_now_ms() - t0 >= 150);
	assert_true(sg_now_ms() - t0 < 5000);
	sg_cancel_release(&c);

	/* A token fired before the call: nothing waits at all. */
	puts_file(f, "a.txt", "x\n");
	assert_int_equal(sg_cancel_init(&c), SG_OK);
	sg_cancel_fire(&c, SG_E_TIMEOUT);
	run_cancel(f, &c, "grep", "x", "--path", "a.txt", NULL);
	expect_error(f, "timeout", NULL);
	sg_cancel_release(&c);
}

static void test_grep_not_regular(void **state)
{
	struct fx *f = *state;
	struct sg_cancel c;
	struct firing fi = { .c = &c, .delay_ms = 1500 };
	pthread_t th;
	char p[512];
	int64_t t0;

	/*
	 * A FIFO is refused at once, as read_file refuses it, also through a
	 * link: the engine would wait for a writer until cancelled.  The
	 * token fired after 1.5 s turns a regression into a failure, not a
	 * hang.
	 */
	path_of(f, "trap.fifo", p, sizeof(p));
	assert_int_equal(mkfifo(p, 0600), 0);
	ln(f, "trap.fifo", "to-fifo");
	assert_int_equal(sg_cancel_init(&c), SG_OK);
	assert_int_equal(pthread_create(&th, NULL, fire_later, &fi), 0);
	t0 = sg_now_ms();
	run_cancel(f, &c, "grep", "x", "--path", "trap.fifo", NULL);
	expect_tool_error(f, "trap.fifo is not a regular file");
	run_cancel(f, &c, "grep", "x", "--path", "to-fifo", NULL);
	expect_tool_error(f, "to-fifo is not a regular file");
	assert_true(sg_now_ms() - t0 < 1000);
	pthread_join(th, NULL);
	sg_cancel_release(&c);
	/* A directory holding one is searched; rg and grep -r pass it by. */
	puts_file(f, "a.txt", "x\n");
	run(f, "grep", "x", NULL);
	expect_ok(f);
	assert_string_equal(hits(f), "a.txt:1:x\n");
}

/* ---- names with control characters ---- */

/*
 * A directory whose name makes "./NAME/innocent.txt", as the engine
 * prints it, read like rg's notice after a binary match followed by the
 * path ./innocent.txt.
 */
#define NOTICE_DIR "x: WARNING: stopped searching binary file after match " \
		   "(found \"\\0\" byte around offset 5)\n."
#define NOTICE_QUOTED "\"x: WARNING: stopped searching binary file after match " \
		      "(found \\\"\\\\0\\\" byte around offset 5)\\n./innocent.txt\""

static void hostile_tree(struct fx *f)
{
	puts_file(f, "innocent.txt", "secret\n");
	puts_file(f, "evil\ninnocent.txt", "needle\n");
	puts_file(f, "t\tq\"b\\s\001\177.txt", "needle\n");
	puts_file(f, "plain\"quote\\.txt", "needle\n");
	mk(f, "d\nx");
	puts_file(f, "d\nx/f.txt", "needle\n");
	puts_file(f, "x", "needle\n");
	mk(f, NOTICE_DIR);
	puts_file(f, NOTICE_DIR "/innocent.txt", "needle\n");
}

static size_t count_lines(const char *s)
{
	size_t n = 0;

	for (; *s; s++)
		n += *s == '\n';
	return n;
}

/* What grep answers on hostile_tree, whichever engine. */
static void hostile_grep(struct fx *f, const char *engine)
{
	run(f, "grep", "needle", NULL);
	expect_ok(f);
	assert_string_equal(str(f, "engine"), engine);
	assert_string_equal(hits(f),
			    "\"d\\nx/f.txt\":1:needle\n"
			    "\"evil\\ninnocent.txt\":1:needle\n"
			    "plain\"quote\\.txt:1:needle\n"
			    "\"t\\tq\\\"b\\\\s\\001\\177.txt\":1:needle\n"
			    "x:1:needle\n"
			    NOTICE_QUOTED ":1:needle\n");
	assert_int_equal(num(f, "total"), 6);
	assert_false(has_line(hits(f), "innocent.txt:1:needle"));

	/* The searched directory's own name is quoted with the rest. */
	run(f, "grep", "needle", "--path", "d\nx", NULL);
	assert_string_equal(hits(f), "\"d\\nx/f.txt\":1:needle\n");
	/* And a single file whose name holds a newline. */
	run(f, "grep", "needle", "--path", "evil\ninnocent.txt", NULL);
	assert_string_equal(hits(f), "\"evil\\ninnocent.txt\":1:needle\n");
	run(f, "grep", "secret", NULL);
	assert_string_equal(hits(f), "innocent.txt:1:secret\n");
}

static void test_hostile_names(void **state)
{
	struct fx *f = *state;
	const char *c;

	hostile_tree(f);

	/* One entry is one name, exactly as it is: a JSON string. */
	run(f, "list", NULL);
	expect_ok(f);
	{
		json_t *e = json_object_get(f->reply, "entries");
		const char *want[] = { "d\nx", "evil\ninnocent.txt", "innocent.txt",
				       "plain\"quote\\.txt", "t\tq\"b\\s\001\177.txt", "x" };

		assert_int_equal(json_array_size(e), 7);
		for (size_t i = 0; i < sizeof(want) / sizeof(*want); i++)
			assert_string_equal(json_string_value(json_object_get(
						    json_array_get(e, i), "name")), want[i]);
	}
	run(f, "list", "d\nx", NULL);
	assert_string_equal(json_string_value(json_object_get(json_array_get(
				    json_object_get(f->reply, "entries"), 0), "path")), "d\nx/f.txt");

	run(f, "glob", "**", NULL);
	expect_ok(f);
	c = hits(f);
	assert_int_equal(num(f, "total"), 7);
	assert_int_equal(count_lines(c), 7);
	assert_true(has_line(c, "\"evil\\ninnocent.txt\""));
	assert_true(has_line(c, "\"d\\nx/f.txt\""));
	assert_true(has_line(c, NOTICE_QUOTED));
	assert_true(has_line(c, "innocent.txt"));
	assert_true(has_line(c, "plain\"quote\\.txt"));

	if (have_rg())
		hostile_grep(f, "rg");
	use_grep_only(f);
	hostile_grep(f, "grep");
}

static void test_grep_binary_notice(void **state)
{
	struct fx *f = *state;
	char name[32], *big;
	size_t n = 70000;
	const char *c;

	if (!have_rg())
		skip();
	/*
	 * rg reports a match, finds a NUL further on, and prints a notice
	 * line with no NUL ("PATH: WARNING: stopped searching binary file
	 * ..."); whatever follows it is still read as the match it is.
	 */
	big = malloc(n + 16);
	assert_non_null(big);
	memcpy(big, "needle\n", 7);
	memset(big + 7, 'a', n);
	memcpy(big + 7 + n, "\n\0x\n", 4);
	put(f, "bin.txt", big, 7 + n + 4);
	free(big);
	for (int i = 0; i < 8; i++) {
		snprintf(name, sizeof(name), "c%d.txt", i);
		puts_file(f, name, "needle\n");
	}
	run(f, "grep", "needle", NULL);
	expect_ok(f);
	c = hits(f);
	assert_int_equal(num(f, "total"), 9);
	assert_int_equal(count_lines(c), 9);
	assert_true(has_line(c, "bin.txt:1:needle"));
	for (int i = 0; i < 8; i++) {
		char want[32];

		snprintf(want, sizeof(want), "c%d.txt:1:needle", i);
		assert_true(has_line(c, want));
	}
	assert_null(strstr(c, "WARNING"));
}

/* ---- stat, delete, move, mkdir, resolve ---- */

static void test_stat(void **state)
{
	struct fx *f = *state;
	const char *m;

	puts_file(f, "s.txt", "12345");
	set_mtime(f, "s.txt", 1700000000);
	mk(f, "d");
	ln(f, "s.txt", "l");
	ln(f, "/etc", "out");

	run(f, "stat", "s.txt", NULL);
	expect_ok(f);
	assert_string_equal(str(f, "type"), "file");
	assert_int_equal(num(f, "size"), 5);
	assert_string_equal(str(f, "mode"), "0644");
	assert_string_equal(str(f, "mtime"), "2023-11-14T22:13:20Z");
	assert_string_equal(str(f, "path"), "s.txt");
	assert_null(json_object_get(f->reply, "target"));

	run(f, "stat", "d", NULL);
	assert_string_equal(str(f, "type"), "dir");
	run(f, "stat", ".", NULL);
	assert_string_equal(str(f, "type"), "dir");
	assert_string_equal(str(f, "path"), "");

	run(f, "stat", "l", NULL);
	assert_string_equal(str(f, "type"), "symlink");
	assert_string_equal(str(f, "target"), "s.txt");
	run(f, "stat", "out", NULL);
	expect_ok(f);
	assert_string_equal(str(f, "target"), "/etc");
	m = str(f, "mtime");
	assert_int_equal(strlen(m), 20);
	assert_int_equal(m[19], 'Z');

	run(f, "stat", "nope", NULL);
	expect_tool_error(f, "nope: no such file or directory");
	run(f, "stat", "out/passwd", NULL);
	expect_error(f, "path_escape", NULL);
}

static void test_delete(void **state)
{
	struct fx *f = *state;
	char *outside = f->outside, p[512];

	puts_file(f, "f.txt", "x");
	mk(f, "empty");
	mk(f, "full");
	mk(f, "full/sub");
	puts_file(f, "full/sub/x", "x");
	ln(f, "full", "dirlink");
	/* A link inside the tree to a directory outside it. */
	snprintf(outside, sizeof(f->outside), "/tmp/sg-fs-out-XXXXXX");
	assert_non_null(mkdtemp(outside));
	snprintf(p, sizeof(p), "%s/keep", outside);
	assert_int_equal(close(open(p, O_CREAT | O_WRONLY, 0644)), 0);
	ln(f, outside, "full/sub/escape");

	run(f, "delete", "f.txt", NULL);
	expect_ok(f);
	assert_string_equal(str(f, "deleted"), "f.txt");
	assert_false(exists(f, "f.txt"));

	run(f, "delete", "empty", NULL);
	expect_ok(f);
	assert_false(exists(f, "empty"));

	run(f, "delete", "dirlink", NULL);
	expect_ok(f);
	assert_false(exists(f, "dirlink"));
	assert_true(exists(f, "full/sub/x"));

	run(f, "delete", "full", NULL);
	expect_tool_error(f, "not empty");
	assert_true(exists(f, "full/sub/x"));
	run(f, "delete", "full", "--recursive", NULL);
	expect_ok(f);
	assert_false(exists(f, "full"));
	assert_int_equal(access(p, F_OK), 0);

	run(f, "delete", ".", NULL);
	expect_error(f, "permission_denied", NULL);
	run(f, "delete", ROOT, "--recursive", NULL);
	expect_error(f, "permission_denied", NULL);
	run(f, "delete", "sub/..", NULL);
	expect_tool_error(f, NULL);
	run(f, "delete", "nope", NULL);
	expect_tool_error(f, "no such file");
	run(f, "delete", "../x", NULL);
	expect_error(f, "path_escape", NULL);
}

static void test_move(void **state)
{
	struct fx *f = *state;
	char *data;

	puts_file(f, "a", "A");
	puts_file(f, "b", "B");
	ln(f, "a", "la");

	run(f, "move", "a", "c", NULL);
	expect_ok(f);
	assert_string_equal(str(f, "from"), "a");
	assert_string_equal(str(f, "to"), "c");
	assert_false(exists(f, "a"));
	data = slurp(f, "c", NULL);
	assert_string_equal(data, "A");
	free(data);

	run(f, "move", "c", "b", NULL);
	expect_tool_error(f, "already exists");
	data = slurp(f, "b", NULL);
	assert_string_equal(data, "B");
	free(data);
	run(f, "move", "c", "b", "--overwrite", NULL);
	expect_ok(f);
	data = slurp(f, "b", NULL);
	assert_string_equal(data, "A");
	free(data);
	assert_false(exists(f, "c"));

	run(f, "move", "b", "x/y/z.txt", NULL);
	expect_ok(f);
	assert_string_equal(str(f, "to"), "x/y/z.txt");
	assert_true(exists(f, "x/y/z.txt"));
	run(f, "move", "x/y/z.txt", ROOT "/x/", NULL);
	expect_tool_error(f, "already exists");

	/* A symlink moves as itself. */
	run(f, "move", "la", "lb", NULL);
	expect_ok(f);
	assert_true(S_ISLNK(mode_of(f, "lb")));

	run(f, "move", ".", "r", NULL);
	expect_error(f, "permission_denied", NULL);
	run(f, "move", "nope", "q", NULL);
	expect_tool_error(f, "no such file");
	run(f, "move", "lb", "../out", NULL);
	expect_error(f, "path_escape", NULL);
	run(f, "move", "lb", "x/..", NULL);
	expect_error(f, "invalid_argument", NULL);
	run(f, "move", "lb", NULL);
	expect_error(f, "invalid_argument", NULL);
}

static void test_mkdir(void **state)
{
	struct fx *f = *state;

	puts_file(f, "file", "");
	run(f, "mkdir", "m/n/o", NULL);
	expect_ok(f);
	assert_true(flag(f, "created"));
	assert_string_equal(str(f, "path"), "m/n/o");
	assert_true(S_ISDIR(mode_of(f, "m/n/o")));
	run(f, "mkdir", "m/n/o", NULL);
	expect_ok(f);
	assert_false(flag(f, "created"));
	run(f, "mkdir", ".", NULL);
	expect_ok(f);
	assert_false(flag(f, "created"));
	run(f, "mkdir", "file", NULL);
	expect_tool_error(f, "not a directory");
	run(f, "mkdir", "file/sub", NULL);
	expect_tool_error(f, NULL);
	run(f, "mkdir", "../m", NULL);
	expect_error(f, "path_escape", NULL);
}

static void test_resolve(void **state)
{
	struct fx *f = *state;

	puts_file(f, "a.txt", "");
	mk(f, "d");
	ln(f, ROOT "/d", "ld");

	run(f, "resolve", "d/../a.txt", NULL);
	expect_ok(f);
	assert_string_equal(str(f, "path"), ROOT "/a.txt");
	assert_string_equal(str(f, "rel"), "a.txt");
	run(f, "resolve", ".", NULL);
	assert_string_equal(str(f, "path"), ROOT);
	assert_string_equal(str(f, "rel"), "");
	run(f, "resolve", "ld/new", "--for-write", NULL);
	expect_ok(f);
	assert_string_equal(str(f, "path"), ROOT "/d/new");
	run(f, "resolve", "new", NULL);
	expect_tool_error(f, "no such file");
	run(f, "resolve", "/tmp", NULL);
	expect_error(f, "path_escape", "/tmp resolves outside the workspace");
}

static void test_usage(void **state)
{
	struct fx *f = *state;
	char *argv[] = { (char *)"read", (char *)"a", NULL };
	char *noroot[] = { (char *)"stat", (char *)".", (char *)"--root",
			   (char *)"workspace", NULL };
	json_t *j;

	run(f, "frobnicate", NULL);
	expect_error(f, "invalid_argument", "unknown fs command");
	run(f, "stat", ".", "--bogus", "1", NULL);
	expect_error(f, "invalid_argument", "--bogus");
	run(f, "stat", NULL);
	expect_error(f, "invalid_argument", NULL);
	{
		/* After `--` everything is positional, dashes or not. */
		char *dash[] = { (char *)"stat", (char *)"--root", (char *)ROOT,
				 (char *)"--host-root", f->dir, (char *)"--",
				 (char *)"--weird", NULL };

		assert_int_equal(sg_helper_fs(7, dash, NULL, 0, &f->out, NULL),
				 0);
		j = json_loads(f->out.p, 0, NULL);
		assert_non_null(strstr(json_string_value(json_object_get(
					       j, "tool_error")),
				       "--weird: no such file"));
		json_decref(j);
	}

	/* --root is mandatory and absolute. */
	assert_int_equal(sg_helper_fs(2, argv, NULL, 0, &f->out, NULL), 0);
	j = json_loads(f->out.p, 0, NULL);
	assert_string_equal(json_string_value(json_object_get(j, "error")),
			    "invalid_argument");
	json_decref(j);
	assert_int_equal(sg_helper_fs(4, noroot, NULL, 0, &f->out, NULL), 0);
	j = json_loads(f->out.p, 0, NULL);
	assert_string_equal(json_string_value(json_object_get(j, "error")),
			    "invalid_argument");
	json_decref(j);
	assert_int_equal(sg_helper_fs(0, argv, NULL, 0, &f->out, NULL), 0);
	j = json_loads(f->out.p, 0, NULL);
	assert_string_equal(json_string_value(json_object_get(j, "error")),
			    "invalid_argument");
	json_decref(j);

	/* A reply that does not fit the caller's buffer is too_large. */
	{
		struct sg_buf small = SG_BUF_INIT(128);
		char *big[] = { (char *)"read", (char *)"big",
				(char *)"--root", (char *)ROOT,
				(char *)"--host-root", f->dir, NULL };

		char text[300];

		memset(text, 'x', sizeof(text));
		put(f, "big", text, sizeof(text));
		assert_int_equal(sg_helper_fs(6, big, NULL, 0, &small, NULL), 0);
		j = json_loads(small.p, 0, NULL);
		assert_non_null(j);
		assert_string_equal(json_string_value(json_object_get(j,
								      "error")),
				    "too_large");
		json_decref(j);
		sg_buf_release(&small);
	}
}

/* Several commands at once on one tree: nothing is shared between them. */
struct worker {
	struct fx *f;
	int id, failures;
};

static void *hammer(void *arg)
{
	struct worker *w = arg;
	struct sg_buf out = SG_BUF_INIT(SG_ENVTOOL_REPLY);
	char name[32], body[32];

	for (int i = 0; i < 100; i++) {
		char *wr[] = { (char *)"write", name, (char *)"--root",
			       (char *)ROOT, (char *)"--host-root", w->f->dir,
			       NULL };
		char *rd[] = { (char *)"read", name, (char *)"--root",
			       (char *)ROOT, (char *)"--host-root", w->f->dir,
			       NULL };
		json_t *j;
		int n;

		snprintf(name, sizeof(name), "t%d/f%d", w->id, i % 5);
		n = snprintf(body, sizeof(body), "%d-%d", w->id, i);
		if (sg_helper_fs(6, wr, body, (size_t)n, &out, NULL) != 0 ||
		    sg_helper_fs(6, rd, NULL, 0, &out, NULL) != 0) {
			w->failures++;
			continue;
		}
		j = json_loadb(out.p, out.len, 0, NULL);
		if (!j || !json_is_string(json_object_get(j, "text")) ||
		    strcmp(json_string_value(json_object_get(j, "text")),
			   body) != 0)
			w->failures++;
		json_decref(j);
	}
	sg_buf_release(&out);
	return NULL;
}

/* --read-only: every command that changes the tree is refused. */
static void test_read_only(void **state)
{
	struct fx *f = *state;
	char *text;

	puts_file(f, "keep.txt", "kept\n");
	mk(f, "dir");
	run_in(f, "new", 3, "write", "--read-only", "new.txt", NULL);
	expect_error(f, "permission_denied", "read-only");
	run_in(f, "4\nkeptgone", 9, "edit", "--read-only", "keep.txt", NULL);
	expect_error(f, "permission_denied", "read-only");
	run(f, "mkdir", "--read-only", "made", NULL);
	expect_error(f, "permission_denied", "read-only");
	run(f, "move", "--read-only", "keep.txt", "moved.txt", NULL);
	expect_error(f, "permission_denied", "read-only");
	run(f, "delete", "--read-only", "--recursive", "dir", NULL);
	expect_error(f, "permission_denied", "read-only");
	text = slurp(f, "keep.txt", NULL);
	assert_string_equal(text, "kept\n");
	free(text);
	assert_false(exists(f, "new.txt"));
	assert_false(exists(f, "made"));
	assert_false(exists(f, "moved.txt"));
	assert_true(exists(f, "dir"));
	/* Reading commands take the flag and work. */
	run(f, "read", "--read-only", "keep.txt", NULL);
	expect_ok(f);
	run(f, "stat", "--read-only", "dir", NULL);
	expect_ok(f);
}

static void test_threads(void **state)
{
	struct worker w[4];
	pthread_t th[4];

	for (int i = 0; i < 4; i++) {
		w[i] = (struct worker){ .f = *state, .id = i };
		assert_int_equal(pthread_create(&th[i], NULL, hammer, &w[i]), 0);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(w[i].failures, 0);
	}
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(test_read_text),
		T(test_read_raw),
		T(test_read_utf8),
		T(test_read_big),
		T(test_read_failures),
		T(test_read_sensitive),
		T(test_read_image),
		T(test_revision),
		T(test_unconfined),
		T(test_write),
		T(test_write_links_and_refusals),
		T(test_base64),
		T(test_edit),
		T(test_list),
		T(test_list_pages),
		T(test_glob),
		T(test_glob_many),
		T(test_glob_nested_globstars),
		T(test_grep_rg),
		T(test_grep_fallback),
		T(test_grep_cancel),
		T(test_grep_not_regular),
		T(test_hostile_names),
		T(test_grep_binary_notice),
		T(test_stat),
		T(test_delete),
		T(test_move),
		T(test_mkdir),
		T(test_resolve),
		T(test_usage),
		T(test_read_only),
		T(test_threads),
	};
#undef T

	return cmocka_run_group_tests(tests, NULL, NULL);
}
