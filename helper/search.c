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
 * Both answer the way the host's tools page (tool_search.go): every record
 * sorted by path (then line), the window [--offset, --offset + --page) of
 * them, the totals, and a fingerprint of the whole result, which the
 * gateway turns into the revision a continuation must present.  Only the
 * records up to the window's end are kept while the engine runs, and no
 * more than SEARCH_KEEP_BYTES of them.
 *
 * _GNU_SOURCE is defined for O_PATH and memmem(), which glibc and musl
 * declare only with it.
 */
#define _GNU_SOURCE
#include "helper/fs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
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
#include "core/path.h"

/*
 * The components of a glob's alternatives together, each plus one: the
 * bits of a state set, which the walk holds once per directory level.
 */
#define FS_GLOB_STATES_MAX (SG_GLOB_ALTS_MAX * 16)
/*
 * The bytes of records a search keeps to answer one page: the records
 * before its offset are kept too (the engines do not print in the order
 * pages are cut in), so this bounds how deep a continuation can reach
 * when lines are long.
 */
#define SEARCH_KEEP_BYTES (16 * SG_MiB)
/* The records one page may ask for (the gateway asks for 250 or 500). */
#define SEARCH_PAGE_MAX 1000
/* The deepest record offset a continuation may start at. */
#define SEARCH_OFFSET_MAX SG_GREP_COUNT_MAX

/*
 * A result's fingerprint: two 64-bit hashes of every record, each summed,
 * so that it does not depend on the order the engine printed them in.  A
 * continuation carries it, and a page of a result whose records changed
 * since the first page is refused.
 */
struct rhash {
	uint64_t a, b;
};

static void rhash_add(struct rhash *h, const char *kind, const char *s, size_t n,
		      long long num)
{
	uint64_t x = 0xcbf29ce484222325ULL, y = 0x84222325cbf29ce4ULL;
	char nb[24];
	int nn = snprintf(nb, sizeof(nb), "\n%lld", num);

	for (const char *k = kind; *k; k++) {
		x = (x ^ (unsigned char)*k) * 0x100000001b3ULL;
		y = (y ^ (unsigned char)*k) * 0x9E3779B97F4A7C15ULL;
	}
	for (size_t i = 0; i < n; i++) {
		x = (x ^ (unsigned char)s[i]) * 0x100000001b3ULL;
		y = (y ^ (unsigned char)s[i]) * 0x9E3779B97F4A7C15ULL;
	}
	for (int i = 0; i < nn; i++) {
		x = (x ^ (unsigned char)nb[i]) * 0x100000001b3ULL;
		y = (y ^ (unsigned char)nb[i]) * 0x9E3779B97F4A7C15ULL;
	}
	/* A final mix, so that sums of nearby values do not cancel. */
	y ^= y >> 31;
	y *= 0xbf58476d1ce4e5b9ULL;
	y ^= y >> 29;
	h->a += x;
	h->b += y;
}

/* ,"result_hash":"<32 hex>" */
static sg_err rhash_put(struct sg_buf *o, const struct rhash *h)
{
	char hex[40];

	snprintf(hex, sizeof(hex), "%016llx%016llx", (unsigned long long)h->a,
		 (unsigned long long)h->b);
	return sg_fs_kv_str(o, "result_hash", hex);
}

/* --offset and --page: the window of records a reply holds. */
static sg_err search_window(struct fs *c, int64_t *offset, int64_t *page)
{
	sg_err rc = sg_args_int(&c->a, "offset", 0, SEARCH_OFFSET_MAX, offset, &c->err);

	if (!rc)
		rc = sg_args_int(&c->a, "page", SEARCH_PAGE_MAX, SEARCH_PAGE_MAX, page, &c->err);
	if (!rc && (*offset < 0 || *page < 1))
		rc = sg_err_set(&c->err, SG_E_INVALID_ARGUMENT,
				"--offset must be >= 0 and --page >= 1");
	return rc;
}

/* ---- glob ---- */

struct hit {
	char *path;
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
	int64_t max, total;     /* max: the offset + page first paths kept */
	struct rhash sum;       /* of every matching path */
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

	return strcmp(x->path, y->path);
}

/*
 * Grow a search's array of kept records (glob's hits or grep's): double
 * from 64, never past twice the page, where the caller prunes instead, so
 * a search holds at most two pages of records.  NULL when out of memory
 * (v and *cap are then unchanged).
 */
static void *hits_grow(void *v, size_t *cap, size_t size, size_t max)
{
	size_t next = *cap ? *cap * 2 : 64;
	void *p;

	if (next > 2 * max)
		next = 2 * max;
	p = realloc(v, next * size);
	if (p)
		*cap = next;
	return p;
}

/*
 * Keep only the max first hits by path, and of those no more bytes of
 * path than SEARCH_KEEP_BYTES, so memory stays bounded by both.
 */
static void hits_prune(struct globber *g)
{
	size_t keep = 0, bytes = 0;

	if (g->nhits > 1)
		qsort(g->hits, g->nhits, sizeof(*g->hits), hit_cmp);
	for (; keep < g->nhits && keep < (size_t)g->max; keep++) {
		size_t n = strlen(g->hits[keep].path) + 1;

		if (bytes + n > SEARCH_KEEP_BYTES)
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
	rhash_add(&g->sum, "glob", g->path.p, g->path.len, 0);
	if (g->max == 0)
		return SG_OK;
	if (g->nhits == g->cap && g->cap >= 2 * (size_t)g->max) {
		hits_prune(g);
	} else if (g->nhits == g->cap) {
		h = hits_grow(g->hits, &g->cap, sizeof(*h), (size_t)g->max);
		if (!h)
			return SG_E_INTERNAL;
		g->hits = h;
	}
	h = &g->hits[g->nhits];
	h->path = strdup(g->path.p);
	if (!h->path)
		return SG_E_INTERNAL;
	(void)st;
	g->nhits++;
	g->bytes += g->path.len + 1;
	if (g->bytes > 2 * SEARCH_KEEP_BYTES)
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

/* The reply: the page of paths in [offset, offset + page), then the counts. */
static sg_err glob_reply(struct fs *c, struct globber *g, int64_t offset, int64_t page)
{
	sg_err rc;

	hits_prune(g);
	rc = sg_reply_ok(c->out);
	if (!rc)
		rc = sg_buf_adds(c->out, ",\"files\":[");
	for (int64_t i = offset; !rc && i < offset + page && i < (int64_t)g->nhits; i++) {
		if (i > offset)
			rc = sg_buf_addc(c->out, ',');
		if (!rc)
			rc = sg_jw_str(c->out, g->hits[i].path, strlen(g->hits[i].path));
	}
	if (!rc)
		rc = sg_buf_addc(c->out, ']');
	if (!rc)
		rc = sg_fs_kv_int(c->out, "total", (long long)g->total);
	/* Kept fewer than the window needs: the paths were too long to hold. */
	if (!rc)
		rc = sg_fs_kv_bool(c->out, "short",
				   (int64_t)g->nhits < g->max && g->total > (int64_t)g->nhits);
	if (!rc)
		rc = rhash_put(c->out, &g->sum);
	if (!rc)
		rc = sg_fs_kv_revision(c);
	if (!rc)
		rc = sg_reply_end(c->out);
	return rc;
}

/*
 * fs glob PATTERN [--path PATH] [--offset N] [--page N]: the files beneath
 * PATH that PATTERN matches, sorted by path (relative to root), the page
 * from offset.  A pattern with no '/' matches a file's name at any depth,
 * as rg's --glob (gitignore rules) does for the host.
 */
sg_err sg_fs_glob(struct fs *c)
{
	struct sg_buf rel = SG_BUF_INIT(SG_PATH_MAX), anywhere = SG_BUF_INIT(SG_PATH_MAX + 4);
	const char *base = sg_args_str(&c->a, "path", ".");
	struct globber *g = calloc(1, sizeof(*g));
	unsigned char *start = NULL;
	const char *pattern;
	int64_t offset = 0, page = 0;
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
	rc = search_window(c, &offset, &page);
	if (!rc)
		rc = sg_fs_args_done(c, 1, 1);
	if (rc)
		goto out;
	g->max = offset + page;
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
	} else if (!strchr(pattern, '/')) {
		if (sg_buf_addf(&anywhere, "**/%s", pattern)) {
			rc = sg_err_set(&c->err, SG_E_INVALID_ARGUMENT,
					"the glob pattern is too long");
			goto out;
		}
		pattern = anywhere.p;
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
	if (!rc)
		rc = glob_reply(c, g, offset, page);
out:
	free(start);
	sg_fs_close(&dirfd);
	glob_free(g);
	sg_buf_release(&anywhere);
	sg_buf_release(&rel);
	return rc;
}

/* ---- grep ---- */

/*
 * A match line longer than this is shown as its head and tail, half and a
 * quarter of it (the host's maxGrepMatchContentBytes); one longer than
 * GREP_LINE_OMIT is not shown at all (the host's ripgrep record limit).
 */
#define GREP_CONTENT_MAX (4 * SG_KiB)
#define GREP_LINE_OMIT SG_MiB
#define GREP_CLIP_MARK "\n...[line truncated]...\n"
#define GREP_OMITTED "[match omitted: line exceeds 1 MiB; use read_file on this file to inspect]"
/* What a match in a file the host protects shows instead (grepMatchContentForPath). */
#define GREP_APP_CREDENTIAL "[REDACTED: Wuu credential file content]"
#define GREP_SENSITIVE "[REDACTED: sensitive file content]"

/* What a grep answers with: matching lines, files, or counts per file. */
enum grep_mode { GREP_CONTENT, GREP_FILES, GREP_COUNT };

/* One record: a match (its text already clipped), or a file and its count. */
struct ghit {
	char *path;             /* relative to root */
	long long line;         /* 0 for a file's record */
	char *text;             /* NULL for a file's record */
	size_t len;
	long long count;        /* matching lines, for a file's record */
	bool cut;               /* text is not the whole line */
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
	enum grep_mode mode;
	const char *root;       /* --root, for the host's credential files */
	bool unconfined;        /* a sensitive file's matches are masked, not hidden */
	struct ghit *hits;
	size_t nhits, cap;
	size_t bytes;           /* of the hits' paths and lines */
	int64_t max;            /* the offset + page first records are kept */
	int64_t total;          /* matching lines */
	int64_t records;        /* records (lines, or files) */
	size_t last;            /* the file record lines are counted in, or SIZE_MAX */
	struct sg_buf lastpath; /* its path */
	struct sg_buf full;     /* scratch: one match's path from root */
	struct rhash sum;       /* of every matching line */
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
 * than SEARCH_KEEP_BYTES.
 */
static void ghits_prune(struct grepper *g, size_t max)
{
	size_t keep = 0, bytes = 0;

	if (g->nhits > 1)
		qsort(g->hits, g->nhits, sizeof(*g->hits), ghit_cmp);
	for (; keep < g->nhits && keep < max; keep++) {
		if (bytes + ghit_bytes(&g->hits[keep]) > SEARCH_KEEP_BYTES)
			break;
		bytes += ghit_bytes(&g->hits[keep]);
	}
	for (size_t i = keep; i < g->nhits; i++) {
		free(g->hits[i].path);
		free(g->hits[i].text);
	}
	g->nhits = keep;
	g->bytes = bytes;
	g->last = SIZE_MAX;
}

static void ghits_free(struct grepper *g)
{
	ghits_prune(g, 0);
	free(g->hits);
	g->hits = NULL;
	g->cap = 0;
}

/* t (n bytes) with its credential values masked, then clipped. */
static sg_err grep_masked(struct grepper *g, const char *t, size_t n, bool *clipped)
{
	struct sg_buf red = SG_BUF_INIT(GREP_LINE_OMIT + GREP_LINE_OMIT / 2);
	size_t keep;
	sg_err rc = sg_fs_redact(t, n, &red);

	keep = rc ? 0 : sg_utf8_clip(red.p, red.len, GREP_CONTENT_MAX);
	*clipped = !rc && keep < red.len;
	if (!rc)
		rc = sg_buf_add(&g->tmp, red.p, keep);
	sg_buf_release(&red);
	return rc;
}

/*
 * Whether the match in g->full lies in a file the host protects: 1 for one
 * of its own credential files, 2 for a sensitive path (.env, keys ...), 0
 * otherwise.
 */
static int grep_protected(struct grepper *g)
{
	char parent[SG_PATH_MAX + 1], dir[2 * SG_PATH_MAX + 2];
	const char *name = sg_fs_split_rel(g->full.p, parent, sizeof(parent));

	snprintf(dir, sizeof(dir), "%s%s%s", g->root,
		 strcmp(parent, ".") ? "/" : "", strcmp(parent, ".") ? parent : "");
	if (sg_fs_app_credential(dir, name))
		return 1;
	return sg_fs_sensitive(g->full.p) ? 2 : 0;
}

/*
 * A match's text t (n bytes) into g->tmp as the host shows it: whole up to
 * GREP_CONTENT_MAX, else its head and tail around a marker, each cut on a
 * character boundary; a line longer than GREP_LINE_OMIT, or one whose end
 * was never read (`cut`), is replaced by a notice.  *clipped: not whole.
 */
static sg_err grep_clip(struct grepper *g, const char *t, size_t n, bool cut, bool *clipped)
{
	size_t head, tail;
	sg_err rc;

	switch (grep_protected(g)) {
	case 1:
		return sg_buf_adds(&g->tmp, GREP_APP_CREDENTIAL);
	case 2:
		if (!g->unconfined)
			return sg_buf_adds(&g->tmp, GREP_SENSITIVE);
		break;
	default:
		break;
	}
	*clipped = cut || n > GREP_CONTENT_MAX;
	if (cut || n > GREP_LINE_OMIT)
		return sg_buf_adds(&g->tmp, GREP_OMITTED);
	/* Unconfined lifts the gate, not the masking of credential values. */
	if (g->unconfined && sg_fs_sensitive(g->full.p))
		return grep_masked(g, t, n, clipped);
	if (n <= GREP_CONTENT_MAX)
		return sg_buf_add(&g->tmp, t, n);
	head = sg_utf8_clip(t, n, GREP_CONTENT_MAX / 2);
	tail = n - GREP_CONTENT_MAX / 4;
	while (tail < n && ((unsigned char)t[tail] & 0xC0) == 0x80)
		tail++;
	rc = sg_buf_add(&g->tmp, t, head);
	if (!rc)
		rc = sg_buf_adds(&g->tmp, GREP_CLIP_MARK);
	if (!rc)
		rc = sg_buf_add(&g->tmp, t + tail, n - tail);
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

/* Room for one more record in g->hits (pruned to the max first). */
static bool ghits_room(struct grepper *g)
{
	struct ghit *h;

	if (g->nhits == g->cap && g->cap >= 2 * (size_t)g->max)
		ghits_prune(g, (size_t)g->max);
	if (g->nhits < g->cap)
		return true;
	h = hits_grow(g->hits, &g->cap, sizeof(*h), (size_t)g->max);
	if (!h)
		return false;
	g->hits = h;
	return true;
}

/*
 * A line of a file whose record is being counted (files and count
 * modes): true when it was counted into that record, which both engines
 * print together.  A prune may have moved or dropped the record; a
 * dropped one lies past the page, and its lines need no counting.
 */
static bool grep_same_file(struct grepper *g, const char *path)
{
	if (!g->lastpath.len || strcmp(g->lastpath.p, path) != 0)
		return false;
	if (g->last == SIZE_MAX)
		for (size_t i = 0; i < g->nhits && g->last == SIZE_MAX; i++)
			if (strcmp(g->hits[i].path, path) == 0)
				g->last = i;
	if (g->last != SIZE_MAX)
		g->hits[g->last].count++;
	return true;
}

/*
 * One match of engine output, PATH (pn bytes, not NUL-terminated) and
 * "LINE:TEXT", or "LINE:COLUMN:TEXT" from an engine that prints columns
 * (tn bytes): counted and fingerprinted, and kept (as a line, or in its
 * file's record) while it is among the max first records by (path, line).
 */
static void grep_line(struct grepper *g, const char *s, size_t pn,
		      const char *t, size_t tn, bool cut)
{
	const char *text = t;
	size_t plen = strlen(g->prefix);
	long long line;
	struct ghit *h;
	bool clipped = false;

	if (pn >= 2 && s[0] == '.' && s[1] == '/')
		s += 2, pn -= 2;
	line = grep_number(&text, t + tn);
	if (g->columns)
		grep_number(&text, t + tn);
	if (g->total == SG_GREP_COUNT_MAX) {
		g->over = g->stop = true;
		return;
	}
	g->total++;
	sg_buf_reset(&g->full);
	if (sg_buf_addf(&g->full, "%s%s%.*s", g->prefix, plen ? "/" : "", (int)pn, s)) {
		g->oom = g->stop = true;
		return;
	}
	rhash_add(&g->sum, "grep", g->full.p, g->full.len, line);
	/* The text as shown is fingerprinted, never a protected file's own. */
	if (g->mode == GREP_CONTENT) {
		sg_buf_reset(&g->tmp);
		if (grep_clip(g, text, (size_t)(t + tn - text), cut, &clipped)) {
			g->oom = g->stop = true;
			return;
		}
		rhash_add(&g->sum, "text", g->tmp.p, g->tmp.len, line);
	}
	if (g->mode != GREP_CONTENT && grep_same_file(g, g->full.p))
		return;
	g->records++;
	if (g->mode != GREP_CONTENT) {
		sg_buf_reset(&g->lastpath);
		if (sg_buf_add(&g->lastpath, g->full.p, g->full.len)) {
			g->oom = g->stop = true;
			return;
		}
	}
	if (!ghits_room(g)) {
		g->oom = g->stop = true;
		return;
	}
	h = &g->hits[g->nhits];
	memset(h, 0, sizeof(*h));
	h->line = g->mode == GREP_CONTENT ? line : 0;
	h->count = 1;
	h->path = strdup(g->full.p);
	if (!h->path || (g->mode == GREP_CONTENT && !(h->text = malloc(g->tmp.len + 1)))) {
		free(h->path);
		g->oom = g->stop = true;
		return;
	}
	if (h->text) {
		memcpy(h->text, g->tmp.p, g->tmp.len);
		h->len = g->tmp.len;
	}
	h->cut = clipped;
	g->last = g->nhits;
	g->nhits++;
	g->bytes += ghit_bytes(h);
	if (g->bytes > 2 * SEARCH_KEEP_BYTES)
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
 * One read of the engine's stdout (fed to g) or stderr (its head kept);
 * *fd is closed at its end or on an error.  False when g has enough lines.
 */
static bool grep_take(struct grepper *g, int *fd, char *chunk, bool err)
{
	ssize_t r = read(*fd, chunk, FS_CHUNK);

	if (r > 0 && err)
		sg_buf_add_clipped(&g->errtext, chunk, (size_t)r);
	else if (r > 0)
		grep_feed(g, chunk, (size_t)r, false);
	else if (r == 0 || errno != EINTR)
		sg_fs_close(fd);
	return err || !g->stop;
}

/*
 * One wait of grep_run's: for the engine's open pipes (*outfd, *errfd:
 * closed and -1 at their end) and the cancel token, until g->deadline.
 * What came is read (stdout cut into g's lines, stderr kept).  False when
 * the engine must be stopped: its time is up (g->late), the token fired or
 * the wait failed (*rc set), or g has enough lines.
 */
static bool grep_step(struct fs *c, struct grepper *g, const char *prog, int *outfd,
		      int *errfd, char *chunk, sg_err *rc)
{
	struct pollfd pf[3];
	int n = 0, io = -1, ie = -1, ic = -1, ready;
	int64_t left;

	if (*outfd >= 0) {
		io = n;
		pf[n++] = (struct pollfd){ .fd = *outfd, .events = POLLIN };
	}
	if (*errfd >= 0) {
		ie = n;
		pf[n++] = (struct pollfd){ .fd = *errfd, .events = POLLIN };
	}
	if (sg_cancel_fd(c->cancel) >= 0) {
		ic = n;
		pf[n++] = (struct pollfd){ .fd = sg_cancel_fd(c->cancel), .events = POLLIN };
	}
	left = g->deadline - sg_now_ms();
	ready = left <= 0 ? 0 : poll(pf, (nfds_t)n, left > INT_MAX ? INT_MAX : (int)left);
	if (ready < 0 && errno == EINTR)
		return true;
	if (ready == 0) {
		g->late = true;
		return false;
	}
	if (ready < 0) {
		*rc = sg_err_set(&c->err, SG_E_INTERNAL, "waiting for %s failed: %s", prog,
				 sg_fs_errstr(errno));
		return false;
	}
	if ((ic >= 0 && pf[ic].revents) || sg_cancel_check(c->cancel)) {
		*rc = sg_fs_cancelled(c, "the search");
		return false;
	}
	if (io >= 0 && pf[io].revents && !grep_take(g, outfd, chunk, false))
		return false;
	if (ie >= 0 && pf[ie].revents)
		grep_take(g, errfd, chunk, true);
	return true;
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
	while (!stop && (outp[0] >= 0 || errp[0] >= 0))
		stop = !grep_step(c, g, prog, &outp[0], &errp[0], chunk, &rc);
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
 * The engine's command line, into av (at least 28 slots): rg as the host
 * runs it (--no-config, --hidden, its .gitignore rules), or GNU grep
 * skipping what the host's own walker skips.  rg searches in parallel and
 * prints files in whatever order its threads finish, so sg_fs_grep sorts.
 */
static void grep_argv(const char *engine, bool icase,
		      const char *glob, const char *include, const char *pattern,
		      const char *target, char **av)
{
	int ac = 0;

	if (strcmp(engine, "rg") == 0) {
		av[ac++] = (char *)"rg";
		av[ac++] = (char *)"--no-config";
		av[ac++] = (char *)"--hidden";
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
		av[ac++] = (char *)"--exclude-dir=.git";
		av[ac++] = (char *)"--exclude-dir=node_modules";
		av[ac++] = (char *)"--exclude-dir=vendor";
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
	struct sg_buf said = SG_BUF_INIT(SG_HELPER_STDERR + 32);
	const char *prefix = "grep failed: ";
	size_t n = g->errtext.len;
	sg_err rc;

	while (n && (g->errtext.p[n - 1] == '\n' || g->errtext.p[n - 1] == ' '))
		n--;
	if (!n)
		return sg_fs_fail(c, "%s exited with status %d", engine, status);
	/* The host checks the pattern before it searches: its words first. */
	if (memmem(g->errtext.p, n, "regex parse error", 17) ||
	    (strcmp(engine, "grep") == 0 &&
	     (memmem(g->errtext.p, n, "Unmatched ", 10) || memmem(g->errtext.p, n, "Invalid ", 8) ||
	      memmem(g->errtext.p, n, "Trailing backslash", 18) ||
	      memmem(g->errtext.p, n, "Regular expression too big", 26))))
		prefix = "invalid regex: ";
	else if (strcmp(engine, "rg") == 0)
		prefix = "ripgrep failed: ";
	sg_buf_reset(c->out);
	rc = sg_buf_adds(c->out, "{\"ok\":false,\"tool_error\":");
	if (!rc)
		rc = sg_buf_addf(&said, "%s%.*s", prefix, (int)n, g->errtext.p);
	if (!rc)
		rc = sg_jw_str(c->out, said.p, said.len);
	sg_buf_release(&said);
	if (!rc)
		rc = sg_buf_addc(c->out, '}');
	return rc;
}

/* One record of the page, as the host writes it. */
static sg_err grep_record_put(struct sg_buf *o, const struct grepper *g, const struct ghit *h)
{
	sg_err rc;

	if (g->mode == GREP_FILES)
		return sg_jw_str(o, h->path, strlen(h->path));
	rc = sg_buf_adds(o, "{\"file\":");
	if (!rc)
		rc = sg_jw_str(o, h->path, strlen(h->path));
	if (!rc && g->mode == GREP_COUNT)
		rc = sg_buf_addf(o, ",\"count\":%lld}", h->count);
	if (rc || g->mode == GREP_COUNT)
		return rc;
	rc = sg_buf_addf(o, ",\"line\":%lld,\"content\":", h->line);
	if (!rc)
		rc = sg_jw_str(o, h->text, h->len);
	if (!rc && h->cut)
		rc = sg_buf_adds(o, ",\"content_truncated\":true");
	if (!rc)
		rc = sg_buf_addc(o, '}');
	return rc;
}

/*
 * The reply: the records in [offset, offset + page) by (path, line), the
 * totals (lines, and records), and the result's fingerprint.  `short`:
 * the window needed more records than SEARCH_KEEP_BYTES could hold.
 */
static sg_err grep_reply(struct fs *c, struct grepper *g, const char *engine,
			 int64_t offset, int64_t page)
{
	sg_err rc;

	ghits_prune(g, (size_t)g->max);
	rc = sg_reply_ok(c->out);
	if (!rc)
		rc = sg_buf_adds(c->out, ",\"records\":[");
	for (int64_t i = offset; !rc && i < offset + page && i < (int64_t)g->nhits; i++) {
		if (i > offset)
			rc = sg_buf_addc(c->out, ',');
		if (!rc)
			rc = grep_record_put(c->out, g, &g->hits[i]);
	}
	if (!rc)
		rc = sg_buf_addc(c->out, ']');
	if (!rc)
		rc = sg_fs_kv_int(c->out, "total", (long long)g->total);
	if (!rc)
		rc = sg_fs_kv_int(c->out, "record_total", (long long)g->records);
	if (!rc)
		rc = sg_fs_kv_bool(c->out, "over", g->over);
	if (!rc)
		rc = sg_fs_kv_bool(c->out, "short",
				   (int64_t)g->nhits < g->max && g->records > (int64_t)g->nhits);
	if (!rc)
		rc = sg_fs_kv_str(c->out, "engine", engine);
	if (!rc)
		rc = rhash_put(c->out, &g->sum);
	if (!rc)
		rc = sg_fs_kv_revision(c);
	if (!rc)
		rc = sg_reply_end(c->out);
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

/* --mode: content (the default), files or count. */
static sg_err grep_mode(struct fs *c, enum grep_mode *mode)
{
	const char *m = sg_args_str(&c->a, "mode", "content");

	*mode = strcmp(m, "files") == 0 ? GREP_FILES
		: strcmp(m, "count") == 0 ? GREP_COUNT : GREP_CONTENT;
	if (*mode == GREP_CONTENT && strcmp(m, "content") != 0)
		return sg_err_set(&c->err, SG_E_INVALID_ARGUMENT,
				  "--mode must be content, files or count");
	return SG_OK;
}

/*
 * How the engine ended, as the tool's failure, or SG_OK when it answered;
 * *said: the failure is already the reply (the engine's own complaint).
 */
static sg_err grep_outcome(struct fs *c, struct grepper *g, const char *engine, int status,
			   bool killed, bool *said)
{
	*said = false;
	if (g->late)
		return sg_fs_fail(c, "the search was stopped after %lld s, its time limit; "
				  "narrow the pattern, `path` or `include`",
				  (long long)(grep_deadline_ms() + 999) / 1000);
	if (g->oom)
		return sg_err_set(&c->err, SG_E_INTERNAL, "out of memory while searching");
	if (!killed && WIFSIGNALED(status))
		return sg_fs_fail(c, "%s was stopped by signal %d; a search may use %zu MiB "
				  "of memory and %d s of CPU: narrow the pattern or `path`",
				  engine, WTERMSIG(status), (size_t)(SG_GREP_ENGINE_MEM / SG_MiB),
				  SG_GREP_ENGINE_CPU_S);
	/*
	 * Status 1 is "no match".  2 and up is an error, but one that
	 * still printed matches is usually an unreadable file in a big
	 * tree, and the matches are worth more than the complaint.
	 */
	if (!killed && WIFEXITED(status) && WEXITSTATUS(status) >= 2 && g->total == 0) {
		*said = true;
		return grep_complaint(c, g, engine, WEXITSTATUS(status));
	}
	return SG_OK;
}

/*
 * Where the engine runs (*cwdfd) and what it searches (*target) for the
 * resolved rel: a directory is searched as "." inside it, so the paths
 * come out short, and a file by its name inside its parent.  g->prefix is
 * the place relative to root; for a file it points into parent (cap
 * bytes), which must live as long as g.
 */
static sg_err grep_place(struct fs *c, const char *path, const struct sg_buf *rel,
			 struct grepper *g, char *parent, size_t cap, const char **target,
			 int *cwdfd)
{
	struct stat st;

	*cwdfd = sg_fs_open_rel(c, rel, O_PATH);
	if (*cwdfd < 0 || fstat(*cwdfd, &st) != 0)
		return sg_fs_fail(c, "%s: %s", path, sg_fs_errstr(errno));
	/*
	 * Decided on the descriptor resolved above, as read_file does: the
	 * engine would open a FIFO and wait for a writer until cancelled,
	 * and a device is no file to search.
	 */
	if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode))
		return sg_fs_fail(c, "%s is not a regular file", path);
	if (S_ISDIR(st.st_mode)) {
		g->prefix = rel->p;
	} else {
		sg_fs_split_rel(rel->p, parent, cap);
		g->prefix = strcmp(parent, ".") ? parent : "";
		sg_fs_close(cwdfd);
		*cwdfd = sg_fs_open_parent(c, rel, target);
	}
	if (*cwdfd < 0)
		return sg_fs_fail(c, "%s: %s", path, sg_fs_errstr(errno));
	return SG_OK;
}

/*
 * The engine, "rg" or "grep", into *engine and its absolute path into prog
 * (cap bytes); for grep, --glob becomes its --include option in include.
 */
static sg_err grep_engine(struct fs *c, const char *glob, struct sg_buf *include, char *prog,
			  size_t cap, const char **engine)
{
	/* rg walks by path: on this host only where it can be confined. */
	*engine = find_in_path("rg", prog, cap) &&
				  (!c->on_host || sg_confine_reader_ok()) ? "rg" : "grep";
	if (glob && strcmp(*engine, "grep") == 0 &&
	    sg_buf_addf(include, "--include=%s", glob))
		return sg_err_set(&c->err, SG_E_INVALID_ARGUMENT, "--glob is too long");
	if (strcmp(*engine, "grep") == 0 && !find_in_path("grep", prog, cap))
		return sg_fs_fail(c, "grep cannot search here: neither rg nor grep is installed");
	return SG_OK;
}

/*
 * fs grep PATTERN [--path PATH] [--glob G] [--ignore-case] [--mode M]
 * [--offset N] [--page N]: the matching lines (or files, or counts per
 * file) beneath PATH, sorted by path then line, the page from offset.
 */
sg_err sg_fs_grep(struct fs *c)
{
	struct sg_buf rel = SG_BUF_INIT(SG_PATH_MAX),
		      include = SG_BUF_INIT(SG_PATH_MAX + 16);
	const char *path = sg_args_str(&c->a, "path", ".");
	const char *glob = sg_args_str(&c->a, "glob", NULL);
	bool icase = sg_args_flag(&c->a, "ignore-case"), killed = false, said = false;
	char parent[SG_PATH_MAX + 1], prog[SG_PATH_MAX + 1];
	struct grepper g = { .prefix = "", .last = SIZE_MAX, .root = c->root,
			     .unconfined = c->unconfined };
	const char *target = ".", *engine;
	int64_t offset = 0, page = 0;
	char *av[32];
	int cwdfd = -1, status = 0;
	sg_err rc;

	sg_buf_init(&g.pending, SG_GREP_LINE_READ);
	sg_buf_init(&g.errtext, SG_HELPER_STDERR);
	sg_buf_init(&g.tmp, GREP_CONTENT_MAX + 256);
	sg_buf_init(&g.lastpath, 2 * SG_PATH_MAX + 2);
	sg_buf_init(&g.full, 2 * SG_PATH_MAX + 2);
	rc = search_window(c, &offset, &page);
	if (!rc)
		rc = grep_mode(c, &g.mode);
	if (!rc)
		rc = sg_fs_args_done(c, 1, 1);
	if (!rc)
		rc = sg_fs_resolve(c, path, SG_PATH_EXISTING, &rel);
	if (rc)
		goto out;
	g.max = offset + page;
	rc = grep_place(c, path, &rel, &g, parent, sizeof(parent), &target, &cwdfd);
	if (!rc)
		rc = grep_engine(c, glob, &include, prog, sizeof(prog), &engine);
	if (rc)
		goto out;
	g.dirfd = cwdfd;
	g.columns = strcmp(engine, "rg") == 0;
	g.deadline = sg_now_ms() + grep_deadline_ms();
	grep_argv(engine, icase, glob, include.p, c->pos[0], target, av);
	rc = grep_run(c, &g, prog, av, cwdfd, &status, &killed);
	if (!rc)
		rc = grep_outcome(c, &g, engine, status, killed, &said);
	if (!rc && !said)
		rc = grep_reply(c, &g, engine, offset, page);
out:
	ghits_free(&g);
	sg_fs_close(&cwdfd);
	sg_buf_release(&g.pending);
	sg_buf_release(&g.errtext);
	sg_buf_release(&g.tmp);
	sg_buf_release(&g.lastpath);
	sg_buf_release(&g.full);
	sg_buf_release(&include);
	sg_buf_release(&rel);
	return rc;
}
