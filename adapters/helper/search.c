/*
 * search.c - sg-helper's searches: fs glob and fs grep.
 *
 * Both walk beneath root the way fs.c's commands do (sg_fs_resolve(), then
 * *at() calls on descriptors).  glob matches one component at a time over
 * state sets (glob_step()), so no pattern costs more than its size allows;
 * grep's regex is never compiled here but only by the search program, a
 * confined process with its own limits that a cancel, the shutdown or its
 * deadline kills.
 *
 * _GNU_SOURCE is defined for O_PATH and memmem(), which glibc and musl
 * declare only with it.
 */
#define _GNU_SOURCE
#include "fs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/fsutil.h"
#include "base/jw.h"
#include "base/limits.h"
#include "base/utf8.h"
#include "../path.h"

/*
 * The components of a glob's alternatives together, each plus one: the
 * bits of a state set, which the walk holds once per directory level.
 */
#define FS_GLOB_STATES_MAX (SG_GLOB_ALTS_MAX * 16)
/*
 * The bytes of the hits (paths, and grep's lines) a glob or a grep keeps
 * in order: its reply shows no more than this.  They are pruned back to
 * it once twice as much is held, so 10,000 hits of 4 KiB paths cost what
 * their answer does, not 40 MiB.
 */
#define FS_HITS_BYTES SG_TOOL_OUTPUT

/* ---- glob ---- */

struct hit {
	char *path;
	long long sec, nsec;
};

/* One alternative of the pattern, after brace expansion. */
struct gpat {
	char *buf;              /* its text, '/' made '\0' */
	const char **pc;        /* its components */
	int np;
	size_t base;            /* its first state in a state set (glob_step()) */
};

struct globber {
	struct fs *c;
	struct gpat *pats;      /* the brace alternatives */
	int npats;
	size_t nstates;         /* np + 1 for every alternative */
	int ns;                 /* components walked below the searched directory */
	struct relpath path;            /* the walked path, from root */
	struct hit *hits;
	size_t nhits, cap;
	size_t bytes;           /* of the hits' paths */
	int64_t max, total;
};

static bool is_globstar(const char *p)
{
	return p[0] == '*' && p[1] == '*' && p[2] == '\0';
}

/* .git is matched only by a component that names it. */
static bool comp_match(const char *pat, const char *name)
{
	if (strcmp(name, ".git") == 0)
		return strcmp(pat, ".git") == 0;
	return fnmatch(pat, name, 0) == 0;
}

/*
 * Matching runs the pattern as a set of states, one per position in each
 * alternative's components (np + 1 of them, the last meaning "matched"),
 * stepped once per path component as the walk goes down.  A backtracking
 * matcher tries every way the "**" can split a path: twenty pairs of "**"
 * and "*" against a path thirty directories deep are about 10^11 tries,
 * which held a worker (in the gateway itself, on the local backend) with
 * no cancel seen until they were done.  The sets cost each entry at most
 * one look at every state.  A state set is a bitmap of g->nstates bits.
 */
static bool state_on(const unsigned char *set, size_t i)
{
	return set[i / 8] & (1u << (i % 8));
}

static void state_set(unsigned char *set, size_t i)
{
	set[i / 8] |= (unsigned char)(1u << (i % 8));
}

static size_t states_bytes(const struct globber *g)
{
	return (g->nstates + 7) / 8;
}

/* A "**" may match no component at all: whoever reaches it also passes it. */
static void glob_close(const struct gpat *p, unsigned char *set)
{
	for (int i = 0; i < p->np; i++)
		if (state_on(set, p->base + (size_t)i) && is_globstar(p->pc[i]))
			state_set(set, p->base + (size_t)i + 1);
}

/* The states before any component: the start of every alternative. */
static void glob_start(const struct globber *g, unsigned char *set)
{
	memset(set, 0, states_bytes(g));
	for (int k = 0; k < g->npats; k++) {
		state_set(set, g->pats[k].base);
		glob_close(&g->pats[k], set);
	}
}

/*
 * The states after one more component, name, into to.  *match tells
 * whether an alternative matches the path that ends in name, *below
 * whether something under it still could (a directory worth entering).
 * "**" never swallows ".git", and comp_match() decides the rest.
 */
static void glob_step(const struct globber *g, const unsigned char *from,
		      const char *name, unsigned char *to, bool *match, bool *below)
{
	bool git = strcmp(name, ".git") == 0;

	memset(to, 0, states_bytes(g));
	*match = *below = false;
	for (int k = 0; k < g->npats; k++) {
		const struct gpat *p = &g->pats[k];

		for (int i = 0; i < p->np; i++) {
			if (!state_on(from, p->base + (size_t)i))
				continue;
			if (is_globstar(p->pc[i])) {
				if (!git)
					state_set(to, p->base + (size_t)i);
			} else if (comp_match(p->pc[i], name)) {
				state_set(to, p->base + (size_t)i + 1);
			}
		}
		glob_close(p, to);
		*match |= state_on(to, p->base + (size_t)p->np);
		for (int i = 0; i < p->np && !*below; i++)
			*below = state_on(to, p->base + (size_t)i);
	}
}

static int hit_cmp(const void *a, const void *b)
{
	const struct hit *x = a, *y = b;

	if (x->sec != y->sec)
		return x->sec < y->sec ? 1 : -1;
	if (x->nsec != y->nsec)
		return x->nsec < y->nsec ? 1 : -1;
	return strcmp(x->path, y->path);
}

/*
 * Keep only the max newest hits, and of those no more bytes of path than
 * the reply can show (FS_HITS_BYTES), so memory stays bounded by both.
 */
static void hits_prune(struct globber *g)
{
	size_t keep = 0, bytes = 0;

	if (g->nhits > 1)
		qsort(g->hits, g->nhits, sizeof(*g->hits), hit_cmp);
	for (; keep < g->nhits && keep < (size_t)g->max; keep++) {
		size_t n = strlen(g->hits[keep].path) + 1;

		if (bytes + n > FS_HITS_BYTES)
			break;
		bytes += n;
	}
	for (size_t i = keep; i < g->nhits; i++)
		free(g->hits[i].path);
	g->nhits = keep;
	g->bytes = bytes;
}

static sg_err hit_add(struct globber *g, const struct stat *st)
{
	struct hit *h;

	g->total++;
	if (g->max == 0)
		return SG_OK;
	if (g->nhits == g->cap && g->cap >= 2 * (size_t)g->max) {
		hits_prune(g);
	} else if (g->nhits == g->cap) {
		size_t cap = g->cap ? g->cap * 2 : 64;

		if (cap > 2 * (size_t)g->max)
			cap = 2 * (size_t)g->max;
		h = realloc(g->hits, cap * sizeof(*h));
		if (!h)
			return SG_E_INTERNAL;
		g->hits = h;
		g->cap = cap;
	}
	h = &g->hits[g->nhits];
	h->path = strdup(g->path.p);
	if (!h->path)
		return SG_E_INTERNAL;
	h->sec = (long long)st->st_mtim.tv_sec;
	h->nsec = (long long)st->st_mtim.tv_nsec;
	g->nhits++;
	g->bytes += g->path.len + 1;
	if (g->bytes > 2 * FS_HITS_BYTES)
		hits_prune(g);
	return SG_OK;
}

/* A directory a glob walks: the states that reached it. */
struct glob_dir {
	struct globber *g;
	const unsigned char *set; /* borrowed */
	unsigned char *next;      /* the states after one entry (scratch) */
	sg_err rc;                /* why the read was ended */
};

/*
 * The glob's sieve (sg_fs_names_read()): a file that matches is a hit as it is
 * read, a directory is kept only when something under it still could
 * match, and every other name is dropped, so that memory follows the hits
 * and the directories left to walk, never the size of one directory.
 * readdir's type spares a stat for every entry that cannot match, as find
 * does; a match is stat'ed for its mtime, and an entry of unknown type to
 * learn it.
 */
static int glob_sift(void *ctx, int dirfd, const char *name, unsigned char type)
{
	struct glob_dir *w = ctx;
	struct globber *g = w->g;
	bool match, below;
	struct stat st;
	size_t saved;

	if (sg_cancel_check(g->c->cancel)) {
		w->rc = sg_fs_cancelled(g->c, "the glob");
		return -1;
	}
	if (g->ns == FS_DEPTH_MAX)
		return 0;
	glob_step(g, w->set, name, w->next, &match, &below);
	if (type == DT_DIR)
		return below;
	if (!match && type != DT_UNKNOWN)
		return 0;
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
		return 0; /* vanished meanwhile */
	if (S_ISDIR(st.st_mode))
		return below;
	if (!match || !sg_fs_rp_push(&g->path, name, &saved))
		return 0;
	w->rc = hit_add(g, &st);
	sg_fs_rp_pop(&g->path, saved);
	return w->rc ? -1 : 0;
}

/*
 * Walk directory dirfd (borrowed), which the pattern's states in set
 * (borrowed) have reached: its matches are taken while it is read, then
 * the directories kept are walked in name order.
 */
static sg_err glob_walk(struct globber *g, int dirfd, const unsigned char *set)
{
	struct glob_dir w = { .g = g, .set = set };
	struct names_sieve sieve = { glob_sift, &w };
	struct names ns = { 0 };
	sg_err rc = SG_OK;
	bool match, below;

	if (sg_cancel_check(g->c->cancel))
		return sg_fs_cancelled(g->c, "the glob");
	w.next = malloc(states_bytes(g));
	if (!w.next) {
		rc = SG_E_INTERNAL;
		goto out;
	}
	if (sg_fs_names_read(dirfd, true, &sieve, 0, &ns) != 0) {
		rc = w.rc; /* else unreadable: nothing more in it matches */
		goto out;
	}
	for (size_t i = 0; i < ns.n && !rc; i++) {
		const char *name = ns.v[i];
		size_t saved;
		int sub;

		if (sg_cancel_check(g->c->cancel)) {
			rc = sg_fs_cancelled(g->c, "the glob");
			break;
		}
		if (!sg_fs_rp_push(&g->path, name, &saved))
			continue;
		glob_step(g, set, name, w.next, &match, &below);
		sub = openat(dirfd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (sub >= 0) {
			g->ns++;
			rc = glob_walk(g, sub, w.next);
			g->ns--;
			close(sub);
		}
		sg_fs_rp_pop(&g->path, saved);
	}
out:
	free(w.next);
	sg_fs_names_free(&ns);
	return rc;
}

static sg_err glob_bad(struct globber *g, const char *fmt, ...) SG_PRINTF(2, 3);

/* An invalid pattern: invalid_argument, saying why. */
static sg_err glob_bad(struct globber *g, const char *fmt, ...)
{
	va_list ap;
	sg_err rc;

	va_start(ap, fmt);
	rc = sg_err_vset(&g->c->err, SG_E_INVALID_ARGUMENT, fmt, ap);
	va_end(ap);
	return rc;
}

/*
 * The end of the bracket expression that starts at s (s[0] == '['): the
 * index of its ']', or 0 when it is not closed.  "[]...]" and "[!]...]"
 * hold a literal ']', and "[:name:]" is a class, whose name is checked:
 * fnmatch(3) would silently take an unknown one as literal text.
 */
static size_t bracket_end(struct globber *g, const char *s, sg_err *rc)
{
	static const char *const classes[] = {
		"alnum", "alpha", "blank", "cntrl", "digit", "graph", "lower",
		"print", "punct", "space", "upper", "xdigit", NULL
	};
	size_t i = 1;

	*rc = SG_OK;
	if (s[i] == '!' || s[i] == '^')
		i++;
	if (s[i] == ']')
		i++;
	for (; s[i] && s[i] != '/'; i++) {
		if (s[i] == ']')
			return i;
		if (s[i] == '\\' && s[i + 1])
			i++;
		else if (s[i] == '[' && s[i + 1] == ':') {
			const char *end = strstr(s + i + 2, ":]");
			size_t n = end ? (size_t)(end - (s + i + 2)) : 0;
			bool known = false;

			for (size_t k = 0; end && classes[k]; k++)
				known |= strlen(classes[k]) == n &&
					 strncmp(classes[k], s + i + 2, n) == 0;
			if (!known && !g)
				return 0;
			if (!known) {
				*rc = glob_bad(g, "unknown character class \"%.*s\" in the "
					       "glob pattern (known: [:alpha:], [:digit:], "
					       "[:alnum:], [:upper:], [:lower:], [:space:] ...)",
					       (int)(end ? n + 4 : strlen(s + i)), s + i);
				return 0;
			}
			i = (size_t)(end - s) + 1;
		}
	}
	return 0;
}

/*
 * Check one alternative (no braces left) and find no construct fnmatch(3)
 * would quietly read as literal text.
 */
static sg_err glob_check(struct globber *g, const char *s)
{
	sg_err rc = SG_OK;

	for (size_t i = 0; s[i] && !rc; i++) {
		if (s[i] == '\\') {
			if (!s[i + 1])
				rc = glob_bad(g, "the glob pattern ends with a lone '\\'");
			i++;
		} else if (s[i] == '[') {
			size_t end = bracket_end(g, s + i, &rc);

			if (!rc && !end)
				rc = glob_bad(g, "unterminated '[' at byte %zu of the glob "
					      "pattern (a class is closed by ']'; "
					      "write '\\[' for a literal '[')", i + 1);
			i += end;
		}
	}
	return rc;
}

/*
 * The end of the brace alternative that starts at s[i], inside a group
 * that closes at s[close]: the index of the ',' at the group's own level,
 * or close.  With close 0, the group's '}' (0 when it is not closed).
 * Brackets hide braces and commas.
 */
static size_t brace_scan(const char *s, size_t i, size_t close)
{
	int depth = 0;
	sg_err ignored;

	for (; s[i] && (!close || i < close); i++) {
		if (s[i] == '\\' && s[i + 1])
			i++;
		else if (s[i] == '[')
			i += bracket_end(NULL, s + i, &ignored);
		else if (s[i] == '{')
			depth++;
		else if (s[i] == '}' && depth-- == 0)
			return close ? close : i;
		else if (s[i] == ',' && depth == 0 && close)
			return i;
	}
	return close;
}

static sg_err glob_add(struct globber *g, const char *text, size_t n);

/*
 * Expand the first brace group of s (nested ones by recursion): every
 * alternative becomes a pattern of its own, as in the shell.  A group
 * without a comma ("{a}") is its one alternative.
 */
static sg_err glob_expand(struct globber *g, const char *s)
{
	struct sg_buf alt = SG_BUF_INIT(SG_PATH_MAX + 1);
	size_t open = 0, close;
	bool found = false;
	sg_err rc = SG_OK;

	for (size_t i = 0; s[i]; i++) {
		if (s[i] == '\\' && s[i + 1]) {
			i++;
		} else if (s[i] == '[') {
			size_t end = bracket_end(g, s + i, &rc);

			if (rc)
				return rc;
			i += end;
		} else if (s[i] == '}') {
			return glob_bad(g, "unmatched '}' at byte %zu of the glob pattern "
					"(write '\\}' for a literal '}')", i + 1);
		} else if (s[i] == '{') {
			open = i;
			found = true;
			break;
		}
	}
	if (!found)
		return glob_add(g, s, strlen(s));
	close = brace_scan(s, open + 1, 0);
	if (!close)
		return glob_bad(g, "unmatched '{' at byte %zu of the glob pattern "
				"(write '\\{' for a literal '{')", open + 1);
	/* Each alternative: prefix, the alternative, suffix, expanded again. */
	for (size_t start = open + 1;;) {
		size_t end = brace_scan(s, start, close);

		sg_buf_reset(&alt);
		if (sg_buf_add(&alt, s, open) || sg_buf_add(&alt, s + start, end - start) ||
		    sg_buf_adds(&alt, s + close + 1) || sg_buf_addc(&alt, '\0'))
			rc = glob_bad(g, "the glob pattern is too long once its braces are "
				      "expanded");
		if (!rc)
			rc = glob_expand(g, alt.p);
		if (rc || end >= close)
			break;
		start = end + 1;
	}
	sg_buf_release(&alt);
	return rc;
}

/*
 * Add one alternative, split into components: "." and empty ones dropped,
 * runs of "**" folded into one, and a final "**" read as "**" + "*"
 * (every file below).  ".." is refused: a pattern stays below its
 * directory.
 */
static sg_err glob_add(struct globber *g, const char *text, size_t n)
{
	struct gpat *p;
	char *s;
	sg_err rc;

	if (g->npats == SG_GLOB_ALTS_MAX)
		return glob_bad(g, "the glob pattern's braces expand to more than %d "
				"patterns", SG_GLOB_ALTS_MAX);
	rc = glob_check(g, text);
	if (rc)
		return rc;
	p = &g->pats[g->npats];
	p->buf = strndup(text, n);
	p->pc = calloc(n / 2 + 3, sizeof(*p->pc));
	if (!p->buf || !p->pc) {
		free(p->buf);
		free(p->pc);
		return SG_E_INTERNAL;
	}
	g->npats++;
	p->np = 0;
	for (s = p->buf; *s;) {
		char *end = s + strcspn(s, "/");
		bool more = *end != '\0';

		*end = '\0';
		if (strcmp(s, "..") == 0)
			return glob_bad(g, "glob patterns may not contain '..'");
		if (*s && strcmp(s, ".") != 0 &&
		    !(is_globstar(s) && p->np && is_globstar(p->pc[p->np - 1]))) {
			if (p->np + 1 >= FS_DEPTH_MAX)
				return glob_bad(g, "the glob pattern is too long");
			p->pc[p->np++] = s;
		}
		s = more ? end + 1 : end;
	}
	if (p->np && is_globstar(p->pc[p->np - 1]))
		p->pc[p->np++] = "*";
	if (p->np == 0)
		return glob_bad(g, "the glob pattern is empty");
	p->base = g->nstates;
	g->nstates += (size_t)p->np + 1;
	if (g->nstates > FS_GLOB_STATES_MAX)
		return glob_bad(g, "the glob pattern's braces expand to more than %d "
				"components in all", FS_GLOB_STATES_MAX);
	return SG_OK;
}

static void glob_free(struct globber *g)
{
	for (int i = 0; g->pats && i < g->npats; i++) {
		free(g->pats[i].buf);
		free(g->pats[i].pc);
	}
	free(g->pats);
	for (size_t i = 0; i < g->nhits; i++)
		free(g->hits[i].path);
	free(g->hits);
	free(g);
}

/* fs glob PATTERN [--path PATH] [--max N] */
sg_err sg_fs_glob(struct fs *c)
{
	struct sg_buf rel = SG_BUF_INIT(SG_PATH_MAX), text = SG_BUF_INIT(SG_TOOL_OUTPUT);
	const char *base = sg_args_str(&c->a, "path", ".");
	struct globber *g = calloc(1, sizeof(*g));
	unsigned char *start = NULL;
	const char *pattern;
	bool truncated;
	long long count = 0;
	int dirfd = -1;
	sg_err rc;

	if (!g)
		return SG_E_INTERNAL;
	g->c = c;
	g->pats = calloc(SG_GLOB_ALTS_MAX, sizeof(*g->pats));
	if (!g->pats) {
		rc = SG_E_INTERNAL;
		goto out;
	}
	rc = sg_args_int(&c->a, "max", SG_LIST_MAX, SG_LIST_MAX, &g->max,
			 &c->err);
	if (!rc)
		rc = sg_fs_args_done(c, 1, 1);
	if (rc)
		goto out;
	pattern = c->pos[0];
	if (pattern[0] == '/') {
		/* An absolute pattern is an environment path under root. */
		size_t rn = strlen(c->root);

		if (rn == 1)
			rn = 0;
		if (strncmp(pattern, c->root, rn) != 0 ||
		    (pattern[rn] != '/' && pattern[rn] != '\0')) {
			rc = sg_err_set(&c->err, SG_E_PATH_ESCAPE,
					"%s resolves outside the workspace root",
					pattern);
			goto out;
		}
		pattern += rn;
		base = ".";
	}
	rc = glob_expand(g, pattern);
	if (!rc)
		rc = sg_fs_resolve(c, base, SG_PATH_EXISTING, &rel);
	if (rc)
		goto out;
	dirfd = sg_fs_open_rel(c, &rel, O_PATH | O_DIRECTORY);
	if (dirfd < 0) {
		rc = sg_fs_fail(c, "%s is not a directory", base);
		goto out;
	}
	memcpy(g->path.p, rel.p, rel.len + 1);
	g->path.len = rel.len;
	start = malloc(states_bytes(g));
	if (!start) {
		rc = SG_E_INTERNAL;
		goto out;
	}
	glob_start(g, start);
	rc = glob_walk(g, dirfd, start);
	if (rc)
		goto out;
	if (g->max)
		hits_prune(g);
	/* The marker line needs room, so the paths stop a little early. */
	text.max -= 256;
	for (size_t i = 0; i < g->nhits; i++) {
		size_t mark = text.len;

		if (sg_fs_name_put(&text, g->hits[i].path, strlen(g->hits[i].path), "") ||
		    sg_buf_addc(&text, '\n')) {
			sg_buf_truncate(&text, mark);
			break;
		}
		count++;
	}
	text.max += 256;
	truncated = g->total > count;
	if (truncated &&
	    sg_buf_addf(&text, "[truncated: %lld of %lld matching files shown, newest first; "
			"narrow the pattern or the path to see the rest]\n",
			count, (long long)g->total))
		rc = SG_E_INTERNAL;
	if (!rc)
		rc = sg_reply_ok(c->out);
	if (!rc)
		rc = sg_fs_kv_strn(c->out, "content", text.p, text.len);
	if (!rc)
		rc = sg_fs_kv_int(c->out, "count", count);
	if (!rc)
		rc = sg_fs_kv_int(c->out, "total", (long long)g->total);
	if (!rc)
		rc = sg_fs_kv_bool(c->out, "truncated", truncated);
	if (!rc)
		rc = sg_reply_end(c->out);
out:
	free(start);
	sg_fs_close(&dirfd);
	glob_free(g);
	sg_buf_release(&text);
	sg_buf_release(&rel);
	return rc;
}

/* ---- grep ---- */

/* One match, its text already clipped. */
struct ghit {
	char *path;             /* relative to root */
	long long line;
	char *text;
	size_t len;
};

struct grepper {
	struct sg_buf pending;  /* child output not yet cut into records */
	size_t nonul;           /* bytes at pending's head known to hold no NUL */
	struct sg_buf errtext;  /* the child's stderr, head kept */
	struct sg_buf tmp;      /* scratch for one line */
	const char *prefix;     /* the searched directory, relative to root */
	int dirfd;              /* where the engine runs (borrowed) */
	bool columns;           /* the engine prints the first match's column */
	int64_t deadline;       /* sg_now_ms() time the engine is killed at */
	bool late;              /* ... and it was */
	bool skipping;          /* dropping the rest of an overlong line */
	bool sorted;            /* the engine prints in path order */
	struct ghit *hits;
	size_t nhits, cap;
	size_t bytes;           /* of the hits' paths and lines */
	int64_t max, total;
	bool over, stop, oom;
};

static int ghit_cmp(const void *a, const void *b)
{
	const struct ghit *x = a, *y = b;
	int d = strcmp(x->path, y->path);

	if (d)
		return d;
	return x->line < y->line ? -1 : x->line > y->line;
}

static size_t ghit_bytes(const struct ghit *h)
{
	return strlen(h->path) + 1 + h->len;
}

/*
 * Keep the first max hits by (path, line), and of those no more bytes
 * than the reply can show (FS_HITS_BYTES).
 */
static void ghits_prune(struct grepper *g, size_t max)
{
	size_t keep = 0, bytes = 0;

	if (g->nhits > 1)
		qsort(g->hits, g->nhits, sizeof(*g->hits), ghit_cmp);
	for (; keep < g->nhits && keep < max; keep++) {
		if (bytes + ghit_bytes(&g->hits[keep]) > FS_HITS_BYTES)
			break;
		bytes += ghit_bytes(&g->hits[keep]);
	}
	for (size_t i = keep; i < g->nhits; i++) {
		free(g->hits[i].path);
		free(g->hits[i].text);
	}
	g->nhits = keep;
	g->bytes = bytes;
}

static void ghits_free(struct grepper *g)
{
	ghits_prune(g, 0);
	free(g->hits);
	g->hits = NULL;
	g->cap = 0;
}

/*
 * A matching line longer than SG_GREP_LINE_MAX, as a window around its
 * first match, with the bytes left out said on each side.  at is that
 * match's byte offset in the line as the engine printed it (rg's column;
 * GNU grep prints none, and 0 starts the window at the line's head).
 * `cut`: the engine's line was longer than SG_GREP_LINE_READ and its end
 * was never seen.
 */
static sg_err grep_clip(struct grepper *g, const char *t, size_t n, bool cut,
			size_t at)
{
	size_t start = 0, keep;
	sg_err rc = SG_OK;

	if (n <= SG_GREP_LINE_MAX && !cut)
		return sg_buf_add(&g->tmp, t, n);
	if (at > SG_GREP_LINE_MAX / 4 && at < n)
		start = at - SG_GREP_LINE_MAX / 4;
	while (start < n && ((unsigned char)t[start] & 0xC0) == 0x80)
		start++;
	keep = sg_utf8_clip(t + start, n - start, SG_GREP_LINE_MAX);
	if (start)
		rc = sg_buf_addf(&g->tmp, "[%zu bytes clipped] ", start);
	if (!rc)
		rc = sg_buf_add(&g->tmp, t + start, keep);
	if (!rc && cut)
		rc = sg_buf_addf(&g->tmp, " [the rest of a line longer than %zu bytes "
				 "clipped]", (size_t)SG_GREP_LINE_READ);
	else if (!rc && start + keep < n)
		rc = sg_buf_addf(&g->tmp, " [%zu bytes clipped]", n - start - keep);
	return rc;
}

/*
 * The decimal number at *p (before end), moved past it and one ':' after
 * it.  Numbers past what a line of SG_GREP_LINE_READ bytes or a file can
 * hold stop growing: they only place a window or name a line.
 */
static long long grep_number(const char **p, const char *end)
{
	long long v = 0;

	for (; *p < end && **p >= '0' && **p <= '9'; (*p)++)
		if (v < INT64_MAX / 10 - 10)
			v = v * 10 + (**p - '0');
	if (*p < end && **p == ':')
		(*p)++;
	return v;
}

/*
 * One match of engine output, PATH (pn bytes, not NUL-terminated) and
 * "LINE:TEXT", or "LINE:COLUMN:TEXT" from an engine that prints columns
 * (tn bytes): counted, and kept when it is among the max first by (path,
 * line).
 */
static void grep_line(struct grepper *g, const char *s, size_t pn,
		      const char *t, size_t tn, bool cut)
{
	const char *text = t;
	size_t plen = strlen(g->prefix);
	long long line, col = 0;
	struct ghit *h;

	if (pn >= 2 && s[0] == '.' && s[1] == '/')
		s += 2, pn -= 2;
	line = grep_number(&text, t + tn);
	if (g->columns)
		col = grep_number(&text, t + tn);
	if (g->total == SG_GREP_COUNT_MAX) {
		g->over = g->stop = true;
		return;
	}
	g->total++;
	/* In path order, a hit past what the reply can show stays unseen. */
	if (g->sorted && ((int64_t)g->nhits >= g->max || g->bytes > FS_HITS_BYTES))
		return;
	if (g->nhits == g->cap && g->cap >= 2 * (size_t)g->max) {
		ghits_prune(g, (size_t)g->max);
	} else if (g->nhits == g->cap) {
		size_t cap = g->cap ? g->cap * 2 : 64;

		if (cap > 2 * (size_t)g->max)
			cap = 2 * (size_t)g->max;
		h = realloc(g->hits, cap * sizeof(*h));
		if (!h) {
			g->oom = g->stop = true;
			return;
		}
		g->hits = h;
		g->cap = cap;
	}
	sg_buf_reset(&g->tmp);
	h = &g->hits[g->nhits];
	h->line = line;
	h->path = malloc(plen + 1 + pn + 1);
	if (h->path)
		snprintf(h->path, plen + 1 + pn + 1, "%s%s%.*s", g->prefix,
			 plen ? "/" : "", (int)pn, s);
	if (!h->path ||
	    grep_clip(g, text, (size_t)(t + tn - text), cut, col > 0 ? (size_t)(col - 1) : 0) ||
	    !(h->text = malloc(g->tmp.len + 1))) {
		free(h->path);
		g->oom = g->stop = true;
		return;
	}
	memcpy(h->text, g->tmp.p, g->tmp.len);
	h->len = g->tmp.len;
	g->nhits++;
	g->bytes += ghit_bytes(h);
	if (!g->sorted && g->bytes > 2 * FS_HITS_BYTES)
		ghits_prune(g, (size_t)g->max);
}

/*
 * Whether line s (n bytes, no newline) has the shape of a notice an
 * engine prints on stdout between its matches, with no NUL: rg's
 * "PATH: WARNING: stopped searching binary file after match (found "\0"
 * byte around offset N)" and "PATH: binary file matches (found ... byte
 * around offset N)", and "Binary file PATH matches" from GNU grep before
 * 3.5.
 */
static bool grep_notice_shape(const char *s, size_t n)
{
	static const char head[] = "Binary file ", tail[] = " matches",
			  rg[] = " byte around offset ";
	size_t i = n;

	if (n >= sizeof(head) - 1 + sizeof(tail) - 1 &&
	    memcmp(s, head, sizeof(head) - 1) == 0 &&
	    memcmp(s + n - (sizeof(tail) - 1), tail, sizeof(tail) - 1) == 0)
		return true;
	if (!i || s[i - 1] != ')')
		return false;
	i--;
	while (i && s[i - 1] >= '0' && s[i - 1] <= '9')
		i--;
	return i < n - 1 && i >= sizeof(rg) - 1 &&
	       memcmp(s + i - (sizeof(rg) - 1), rg, sizeof(rg) - 1) == 0;
}

/*
 * The text before a NUL holds a newline: either a notice line came first
 * (then the NUL ends the next match's path), or the path itself holds a
 * newline.  It is a notice only when its first line (ln bytes) has a
 * notice's shape and the whole text (pn bytes) names nothing where the
 * engine runs; a name made to look like a notice followed by another
 * file's path is then still read as the one name it is, never as a match
 * in that other file.  A text too long to look up stays a name for the
 * same reason; a component too long to exist (a notice adds about 95
 * bytes to its file's name) names nothing.
 */
static bool grep_is_notice(struct grepper *g, const char *s, size_t pn, size_t ln)
{
	char path[SG_PATH_MAX + 1];
	struct stat st;

	if (!grep_notice_shape(s, ln) || pn >= SG_PATH_MAX)
		return false;
	memcpy(path, s, pn);
	path[pn] = '\0';
	if (fstatat(g->dirfd, path, &st, AT_SYMLINK_NOFOLLOW) == 0)
		return false;
	return errno == ENOENT || errno == ENOTDIR || errno == ENAMETOOLONG;
}

/*
 * Take the next record from engine output s (n bytes; `more`: more may
 * follow): "PATH\0LINE:TEXT\n" (--null).  PATH may hold newlines and TEXT
 * cannot, so the NUL is found first and the newline after it ends the
 * record; cutting at the first newline instead would let a file named
 * "evil\ninnocent.txt" pass its match off as innocent.txt's.  Returns the
 * bytes used, 0 when the record is not complete yet.
 */
static size_t grep_record(struct grepper *g, const char *s, size_t n, bool more)
{
	const char *nul = NULL, *nl = memchr(s, '\n', n), *end;
	bool full = n >= g->pending.max;

	/* Lines without a NUL are searched once, however long they wait. */
	if (g->nonul < n)
		nul = memchr(s + g->nonul, '\0', n - g->nonul);
	g->nonul = nul ? (size_t)(nul - s) : n;

	if (nl && (!nul || nl < nul)) {
		/*
		 * A line with no NUL before its newline; until the NUL is
		 * seen, it cannot be told from the head of a name.
		 */
		if (!nul && more && !full)
			return 0;
		if (!nul || grep_is_notice(g, s, (size_t)(nul - s), (size_t)(nl - s)))
			return (size_t)(nl - s) + 1;
	}
	if (!nul) {
		/* Neither NUL nor newline: wait, or drop what is no match. */
		if (more && !full)
			return 0;
		g->skipping = more;
		return n;
	}
	end = memchr(nul + 1, '\n', n - (size_t)(nul + 1 - s));
	if (end) {
		grep_line(g, s, (size_t)(nul - s), nul + 1, (size_t)(end - nul - 1), false);
		return (size_t)(end - s) + 1;
	}
	if (more && !full)
		return 0;
	/* The end of output, or a line longer than we read: its head, then skip. */
	grep_line(g, s, (size_t)(nul - s), nul + 1, n - (size_t)(nul + 1 - s), more);
	g->skipping = more;
	return n;
}

static void grep_feed(struct grepper *g, const char *data, size_t n, bool eof)
{
	while (!g->stop) {
		const char *p, *nl;
		size_t take, left, used;

		if (g->skipping) {
			nl = n ? memchr(data, '\n', n) : NULL;
			if (!nl)
				return;
			n -= (size_t)(nl + 1 - data);
			data = nl + 1;
			g->skipping = false;
		}
		take = g->pending.max - g->pending.len;
		if (take > n)
			take = n;
		if (take && sg_buf_add(&g->pending, data, take)) {
			g->oom = g->stop = true;
			return;
		}
		data += take;
		n -= take;
		p = g->pending.p;
		left = g->pending.len;
		while (!g->stop && !g->skipping && left &&
		       (used = grep_record(g, p, left, n || !eof)) != 0) {
			p += used;
			left -= used;
			g->nonul = g->nonul > used ? g->nonul - used : 0;
		}
		sg_buf_consume(&g->pending, (size_t)(p - g->pending.p));
		if (!g->pending.len)
			g->nonul = 0;
		if (n)
			continue;
		if (eof) {
			sg_buf_reset(&g->pending);
			g->nonul = 0;
		}
		return;
	}
}

/* The absolute path of prog in $PATH, into dst; false if absent. */
static bool find_in_path(const char *prog, char *dst, size_t cap)
{
	const char *path = getenv("PATH");

	return sg_program_find(prog, path ? path : "/usr/local/bin:/usr/bin:/bin", dst, cap) == 0;
}

/*
 * Run the search program prog (an absolute path) with cwd = cwdfd
 * (borrowed), its stdout cut into g's lines and stderr kept for a message,
 * until both close, g has enough lines, the cancel token fires or
 * g->deadline passes; in the last three cases it is killed.  The child is
 * always reaped.  It runs under sg_confine_spawn_reader()'s limits: the
 * engine walks the tree by path, so a directory swapped for a link during
 * its walk would lead it out of root, and where Landlock exists it may
 * read only beneath the searched directory.  Without Landlock, the engine
 * runs in an environment that reaches only what the environment sees
 * anyway, or on this host fs_grep chose GNU grep, whose walk refuses
 * links.
 */
static sg_err grep_run(struct fs *c, struct grepper *g, const char *prog,
		       char *const *av, int cwdfd, int *status, bool *killed)
{
	int outp[2] = { -1, -1 }, errp[2] = { -1, -1 };
	char *chunk = malloc(FS_CHUNK);
	bool stop = false;
	pid_t pid = -1;
	sg_err rc = SG_OK;
	int e;

	*killed = false;
	*status = 0;
	if (!chunk || pipe2(outp, O_CLOEXEC) != 0 || pipe2(errp, O_CLOEXEC) != 0) {
		rc = sg_err_set(&c->err, SG_E_INTERNAL,
				"cannot start %s: %s", prog,
				sg_fs_errstr(chunk ? errno : ENOMEM));
		goto out;
	}
	pid = sg_confine_spawn_reader(prog, av, cwdfd, outp[1], errp[1]);
	e = errno;
	sg_fs_close(&outp[1]);
	sg_fs_close(&errp[1]);
	if (pid < 0) {
		rc = sg_fs_fail(c, "cannot run %s: %s", prog, sg_fs_errstr(e));
		goto out;
	}
	while (outp[0] >= 0 || errp[0] >= 0) {
		struct pollfd pf[3];
		int n = 0, io = -1, ie = -1, ic = -1, ready;
		int64_t left;
		ssize_t r;

		if (outp[0] >= 0) {
			io = n;
			pf[n++] = (struct pollfd){ .fd = outp[0], .events = POLLIN };
		}
		if (errp[0] >= 0) {
			ie = n;
			pf[n++] = (struct pollfd){ .fd = errp[0], .events = POLLIN };
		}
		if (sg_cancel_fd(c->cancel) >= 0) {
			ic = n;
			pf[n++] = (struct pollfd){ .fd = sg_cancel_fd(c->cancel),
						   .events = POLLIN };
		}
		left = g->deadline - sg_now_ms();
		ready = left <= 0 ? 0
				  : poll(pf, (nfds_t)n, left > INT_MAX ? INT_MAX : (int)left);
		if (ready < 0 && errno == EINTR)
			continue;
		if (ready == 0) {
			g->late = stop = true;
			break;
		}
		if (ready < 0) {
			rc = sg_err_set(&c->err, SG_E_INTERNAL,
					"waiting for %s failed: %s", prog,
					sg_fs_errstr(errno));
			stop = true;
			break;
		}
		if ((ic >= 0 && pf[ic].revents) || sg_cancel_check(c->cancel)) {
			rc = sg_fs_cancelled(c, "the search");
			stop = true;
			break;
		}
		if (io >= 0 && pf[io].revents) {
			r = read(outp[0], chunk, FS_CHUNK);
			if (r > 0)
				grep_feed(g, chunk, (size_t)r, false);
			else if (r == 0 || errno != EINTR)
				sg_fs_close(&outp[0]);
			if (g->stop) {
				stop = true;
				break;
			}
		}
		if (ie >= 0 && pf[ie].revents) {
			r = read(errp[0], chunk, FS_CHUNK);
			if (r > 0)
				sg_buf_add_clipped(&g->errtext, chunk, (size_t)r);
			else if (r == 0 || errno != EINTR)
				sg_fs_close(&errp[0]);
		}
	}
	if (!stop)
		grep_feed(g, NULL, 0, true);
out:
	if (pid > 0) {
		if (stop) {
			kill(pid, SIGKILL);
			*killed = true;
		}
		sg_fs_close(&outp[0]);
		sg_fs_close(&errp[0]);
		while (waitpid(pid, status, 0) < 0 && errno == EINTR)
			;
	}
	sg_fs_close(&outp[0]);
	sg_fs_close(&outp[1]);
	sg_fs_close(&errp[0]);
	sg_fs_close(&errp[1]);
	free(chunk);
	return rc;
}

/*
 * The engine's command line, into av (at least 24 slots).  rg searches in
 * parallel and prints files in whatever order its threads finish, so
 * fs_grep sorts; `sorted` asks rg to print in path order instead (one
 * thread), for when there are too many matches to hold them all.
 */
static void grep_argv(const char *engine, bool sorted, bool icase,
		      const char *glob, const char *include, const char *pattern,
		      const char *target, char **av)
{
	int ac = 0;

	if (strcmp(engine, "rg") == 0) {
		av[ac++] = (char *)"rg";
		av[ac++] = (char *)"--line-number";
		av[ac++] = (char *)"--no-heading";
		av[ac++] = (char *)"--with-filename";
		av[ac++] = (char *)"--null";
		av[ac++] = (char *)"--column";
		av[ac++] = (char *)"--color";
		av[ac++] = (char *)"never";
		/* What compiling the pattern may take, whatever rg's defaults. */
		av[ac++] = (char *)"--regex-size-limit";
		av[ac++] = (char *)SG_GREP_REGEX_SIZE;
		av[ac++] = (char *)"--dfa-size-limit";
		av[ac++] = (char *)SG_GREP_REGEX_SIZE;
		if (sorted) {
			av[ac++] = (char *)"--sort";
			av[ac++] = (char *)"path";
		}
		if (icase)
			av[ac++] = (char *)"-i";
		if (glob) {
			av[ac++] = (char *)"-g";
			av[ac++] = (char *)glob;
		}
	} else {
		av[ac++] = (char *)"grep";
		av[ac++] = (char *)"-rnHZE";
		/*
		 * Binary files are skipped, as rg skips them.  Their matches
		 * were never shown anyway, and grep before 3.5 says "Binary
		 * file PATH matches" on stdout, a line with no NUL that could
		 * otherwise run into the next match's path (grep_record()).
		 */
		av[ac++] = (char *)"-I";
		if (icase)
			av[ac++] = (char *)"-i";
		if (glob)
			av[ac++] = (char *)include;
	}
	av[ac++] = (char *)"-e";
	av[ac++] = (char *)pattern;
	av[ac++] = (char *)"--";
	av[ac++] = (char *)target;
	av[ac] = NULL;
}

/* The engine's complaint, whole, as the tool's failure. */
static sg_err grep_complaint(struct fs *c, struct grepper *g, const char *engine,
			     int status)
{
	size_t n = g->errtext.len;
	sg_err rc;

	while (n && (g->errtext.p[n - 1] == '\n' || g->errtext.p[n - 1] == ' '))
		n--;
	if (!n)
		return sg_fs_fail(c, "%s exited with status %d", engine, status);
	sg_buf_reset(c->out);
	rc = sg_buf_adds(c->out, "{\"ok\":false,\"tool_error\":");
	if (!rc)
		rc = sg_jw_str(c->out, g->errtext.p, n);
	if (!rc)
		rc = sg_buf_addc(c->out, '}');
	return rc;
}

/* The reply: the kept matches in (path, line) order, then the marker. */
static sg_err grep_reply(struct fs *c, struct grepper *g, const char *engine)
{
	struct sg_buf text = SG_BUF_INIT(SG_TOOL_OUTPUT - 512);
	long long shown = 0;
	bool truncated;
	sg_err rc = SG_OK;

	ghits_prune(g, (size_t)g->max);
	for (size_t i = 0; i < g->nhits; i++) {
		struct ghit *h = &g->hits[i];
		size_t mark = text.len;

		if (sg_fs_name_put(&text, h->path, strlen(h->path), "") ||
		    sg_buf_addf(&text, ":%lld:", h->line) ||
		    sg_buf_add(&text, h->text, h->len) || sg_buf_addc(&text, '\n')) {
			sg_buf_truncate(&text, mark); /* whole lines only */
			break;
		}
		shown++;
	}
	truncated = g->over || g->total > shown;
	text.max += 512;
	if (truncated && g->over)
		rc = sg_buf_addf(&text, "[truncated: the first %lld matches shown, by path then "
				 "line; more than %d lines matched; narrow the pattern, "
				 "`path` or `glob`]\n", shown, SG_GREP_COUNT_MAX);
	else if (truncated)
		rc = sg_buf_addf(&text, "[truncated: %lld of %lld matches shown, by path then "
				 "line; narrow the pattern, `path` or `glob`, or raise "
				 "`max_results` (up to %d)]\n", shown, (long long)g->total,
				 (int)SG_LIST_MAX);
	if (!rc)
		rc = sg_reply_ok(c->out);
	if (!rc)
		rc = sg_fs_kv_strn(c->out, "content", text.p, text.len);
	if (!rc)
		rc = sg_fs_kv_int(c->out, "count", shown);
	if (!rc)
		rc = sg_fs_kv_int(c->out, "total", (long long)g->total);
	if (!rc)
		rc = sg_fs_kv_bool(c->out, "total_exact", !g->over);
	if (!rc)
		rc = sg_fs_kv_bool(c->out, "truncated", truncated);
	if (!rc)
		rc = sg_fs_kv_str(c->out, "engine", engine);
	if (!rc)
		rc = sg_reply_end(c->out);
	sg_buf_release(&text);
	return rc;
}

/*
 * A search's time, SG_GREP_DEADLINE_MS.  Tests may shorten it, never
 * lengthen it, with SANDGATE_TEST_GREP_DEADLINE_MS: a test cannot wait
 * the whole deadline for a search to overrun.
 */
static int64_t grep_deadline_ms(void)
{
	const char *t = getenv("SANDGATE_TEST_GREP_DEADLINE_MS");
	long long ms = t ? strtoll(t, NULL, 10) : 0;

	return ms > 0 && ms < SG_GREP_DEADLINE_MS ? ms : SG_GREP_DEADLINE_MS;
}

/* fs grep PATTERN [--path PATH] [--glob G] [--ignore-case] [--max N] */
sg_err sg_fs_grep(struct fs *c)
{
	struct sg_buf rel = SG_BUF_INIT(SG_PATH_MAX),
		      include = SG_BUF_INIT(SG_PATH_MAX + 16);
	const char *path = sg_args_str(&c->a, "path", ".");
	const char *glob = sg_args_str(&c->a, "glob", NULL);
	bool icase = sg_args_flag(&c->a, "ignore-case"), killed = false;
	char parent[SG_PATH_MAX + 1], prog[SG_PATH_MAX + 1];
	struct grepper g = { .prefix = "" };
	const char *target = ".", *engine;
	char *av[28];
	int cwdfd = -1, status = 0;
	struct stat st;
	sg_err rc;

	sg_buf_init(&g.pending, SG_GREP_LINE_READ);
	sg_buf_init(&g.errtext, SG_HELPER_STDERR);
	sg_buf_init(&g.tmp, SG_GREP_LINE_MAX + 256);
	rc = sg_args_int(&c->a, "max", SG_GREP_DEFAULT, SG_LIST_MAX, &g.max,
			 &c->err);
	if (!rc && g.max < 1)
		g.max = 1;
	if (!rc)
		rc = sg_fs_args_done(c, 1, 1);
	if (!rc)
		rc = sg_fs_resolve(c, path, SG_PATH_EXISTING, &rel);
	if (rc)
		goto out;
	cwdfd = sg_fs_open_rel(c, &rel, O_PATH);
	if (cwdfd < 0 || fstat(cwdfd, &st) != 0) {
		rc = sg_fs_fail(c, "%s: %s", path, sg_fs_errstr(errno));
		goto out;
	}
	/*
	 * Decided on the descriptor resolved above, as read_file does: the
	 * engine would open a FIFO and wait for a writer until cancelled,
	 * and a device is no file to search.
	 */
	if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode)) {
		rc = sg_fs_fail(c, "%s is not a regular file", path);
		goto out;
	}
	if (S_ISDIR(st.st_mode)) {
		/* Search "." in the directory so the paths come out short. */
		g.prefix = rel.p;
	} else {
		sg_fs_split_rel(rel.p, parent, sizeof(parent));
		g.prefix = strcmp(parent, ".") ? parent : "";
		sg_fs_close(&cwdfd);
		cwdfd = sg_fs_open_parent(c, &rel, &target);
	}
	if (cwdfd < 0) {
		rc = sg_fs_fail(c, "%s: %s", path, sg_fs_errstr(errno));
		goto out;
	}
	g.dirfd = cwdfd;
	/* rg walks by path: on this host only where it can be confined. */
	engine = find_in_path("rg", prog, sizeof(prog)) &&
				 (!c->on_host || sg_confine_reader_ok()) ? "rg" : "grep";
	if (glob && strcmp(engine, "grep") == 0 &&
	    sg_buf_addf(&include, "--include=%s", glob)) {
		rc = sg_err_set(&c->err, SG_E_INVALID_ARGUMENT, "--glob is too long");
		goto out;
	}
	if (strcmp(engine, "grep") == 0 && !find_in_path("grep", prog, sizeof(prog))) {
		rc = sg_fs_fail(c, "grep cannot search here: neither rg nor grep is installed");
		goto out;
	}
	g.columns = strcmp(engine, "rg") == 0;
	g.deadline = sg_now_ms() + grep_deadline_ms();
	grep_argv(engine, false, icase, glob, include.p, c->pos[0], target, av);
	rc = grep_run(c, &g, prog, av, cwdfd, &status, &killed);
	if (!rc && g.over && strcmp(engine, "rg") == 0) {
		/*
		 * Too many to sort them all: ask rg for path order and take
		 * the first max, so the answer is still the same every time.
		 */
		ghits_free(&g);
		g.total = 0;
		g.over = g.stop = g.skipping = false;
		g.sorted = true;
		sg_buf_reset(&g.pending);
		g.nonul = 0;
		grep_argv(engine, true, icase, glob, include.p, c->pos[0], target, av);
		rc = grep_run(c, &g, prog, av, cwdfd, &status, &killed);
		g.over = true;
	}
	if (rc)
		goto out;
	if (g.late) {
		rc = sg_fs_fail(c, "the search was stopped after %lld s, its time limit; "
			       "narrow the pattern, `path` or `glob`",
			       (long long)(grep_deadline_ms() + 999) / 1000);
		goto out;
	}
	if (g.oom) {
		rc = sg_err_set(&c->err, SG_E_INTERNAL, "out of memory while searching");
		goto out;
	}
	/*
	 * Status 1 is "no match".  2 and up is an error, but one that
	 * still printed matches is usually an unreadable file in a big
	 * tree, and the matches are worth more than the complaint.
	 */
	if (!killed && WIFSIGNALED(status)) {
		rc = sg_fs_fail(c, "%s was stopped by signal %d; a search may use %zu MiB "
			       "of memory and %d s of CPU: narrow the pattern or `path`",
			       engine, WTERMSIG(status), (size_t)(SG_GREP_ENGINE_MEM / SG_MiB),
			       SG_GREP_ENGINE_CPU_S);
		goto out;
	}
	if (!killed && WIFEXITED(status) && WEXITSTATUS(status) >= 2 &&
	    g.total == 0) {
		rc = grep_complaint(c, &g, engine, WEXITSTATUS(status));
		goto out;
	}
	rc = grep_reply(c, &g, engine);
out:
	ghits_free(&g);
	sg_fs_close(&cwdfd);
	sg_buf_release(&g.pending);
	sg_buf_release(&g.errtext);
	sg_buf_release(&g.tmp);
	sg_buf_release(&include);
	sg_buf_release(&rel);
	return rc;
}

