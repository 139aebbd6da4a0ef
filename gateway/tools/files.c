/*
 * files.c - the host's read_file, list_files and present_artifact.
 *
 * Each is one sg-helper step (`fs read`, `fs list`) or one export, and
 * answers with the view the host's own worker gives: the same keys,
 * defaults, limits and failure sentences (internal/tools/tool_files.go).
 *
 * read_file's reply frame is built here as text: the helper sends the
 * window's lines raw after its JSON line, once; they are numbered here for
 * the model's view and escaped straight into the frame (twice for the
 * view, which is JSON inside a JSON string; once for the plain text
 * programs get), in batches, without a parse or a second encoding
 * through jansson, which for a megabyte costs tens of milliseconds, and
 * without holding the view whole beside the frame.
 *
 * The read_unchanged stub needs what an actor read before: a small table
 * per process (READ_SEEN entries, the oldest replaced), keyed by session,
 * actor, permission mode and path, remembering the range and the digest.
 */
#define _GNU_SOURCE /* strdup under strict POSIX */
#include "gateway/tools/tool.h"

#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "base/jw.h"
#include "base/limits.h"
#include "base/utf8.h"

/* The most reads remembered for read_unchanged, all actors together. */
#define READ_SEEN 512
/* Bytes of a continuation token decoded; a real one is a path and numbers. */
#define CONTINUATION_MAX (2 * SG_PATH_MAX)
/* The host's largest byte_range window, and the next page's it offers. */
#define BYTE_WINDOW_MAX 4096
#define BYTE_PAGE_NEXT (128 * 1024)

/* ---- what an actor read (read_unchanged) ---- */

struct seen {
	char *key; /* session \n actor \n mode \n path */
	int64_t offset, limit;
	char sha[65];
};

static struct {
	pthread_mutex_t lock;
	struct seen v[READ_SEEN];
	size_t next;
} reads = { .lock = PTHREAD_MUTEX_INITIALIZER };

static char *seen_key(struct sg_tool_call *t, const char *path)
{
	char *key = NULL;

	if (asprintf(&key, "%s\n%s\n%d\n%s", t->s->session_id ? t->s->session_id : "",
		     t->actor, (int)t->mode, path) < 0)
		return NULL;
	return key;
}

/* Whether this actor read the same range of the same content before. */
static bool seen_unchanged(const char *key, int64_t offset, int64_t limit, const char *sha)
{
	bool same = false;

	pthread_mutex_lock(&reads.lock);
	for (size_t i = 0; i < READ_SEEN && !same; i++)
		same = reads.v[i].key && !strcmp(reads.v[i].key, key) &&
		       reads.v[i].offset == offset && reads.v[i].limit == limit &&
		       !strcmp(reads.v[i].sha, sha);
	pthread_mutex_unlock(&reads.lock);
	return same;
}

/* Remember a read (key is stolen), replacing this path's entry or the oldest. */
static void seen_record(char *key, int64_t offset, int64_t limit, const char *sha)
{
	struct seen *slot = NULL;

	pthread_mutex_lock(&reads.lock);
	for (size_t i = 0; i < READ_SEEN && !slot; i++)
		if (reads.v[i].key && !strcmp(reads.v[i].key, key))
			slot = &reads.v[i];
	if (!slot) {
		slot = &reads.v[reads.next];
		reads.next = (reads.next + 1) % READ_SEEN;
	}
	free(slot->key);
	slot->key = key;
	slot->offset = offset;
	slot->limit = limit;
	snprintf(slot->sha, sizeof(slot->sha), "%s", sha);
	pthread_mutex_unlock(&reads.lock);
}

/* ---- arguments ---- */

/* An optional integer argument; *given says whether it was there. */
static sg_err int_arg(struct sg_tool_call *t, json_t *obj, const char *key, int64_t *out,
		      bool *given)
{
	json_t *v = json_object_get(obj, key);

	*given = v && !json_is_null(v);
	*out = 0;
	if (!*given)
		return SG_OK;
	if (json_is_real(v) && json_real_value(v) == (double)(int64_t)json_real_value(v)) {
		*out = (int64_t)json_real_value(v);
		return SG_OK;
	}
	if (!json_is_integer(v))
		return sg_err_set(&t->op->err, SG_E_INVALID_ARGUMENT,
				  "%s must be an integer", key);
	*out = json_integer_value(v);
	return SG_OK;
}

static int b64url_value(unsigned char ch)
{
	if (ch >= 'A' && ch <= 'Z')
		return ch - 'A';
	if (ch >= 'a' && ch <= 'z')
		return ch - 'a' + 26;
	if (ch >= '0' && ch <= '9')
		return ch - '0' + 52;
	return ch == '-' ? 62 : ch == '_' ? 63 : -1;
}

/*
 * The host's read_file continuation: unpadded URL-safe base64 of
 * {"path","offset","limit","expected_sha256"} (or byte_offset for a byte
 * window).  *out new.
 */
static sg_err decode_continuation(struct sg_tool_call *t, const char *token, json_t **out)
{
	size_t n = strlen(token), len = 0;
	unsigned acc = 0, bits = 0;
	char *raw = n <= CONTINUATION_MAX ? malloc(n) : NULL;
	struct sg_errinfo why = { 0 };
	json_t *c = NULL;
	sg_err rc = SG_OK;

	*out = NULL;
	for (size_t i = 0; raw && i < n; i++) {
		int v = b64url_value((unsigned char)token[i]);

		if (v < 0)
			break;
		acc = acc << 6 | (unsigned)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			raw[len++] = (char)(acc >> bits);
		}
		if (i + 1 == n)
			rc = sg_json_parse(raw, len, SG_JSON_REJECT_DUPLICATES, &c, &why);
	}
	if (!raw || !c || rc || !json_is_object(c) ||
	    !json_string_length(json_object_get(c, "path")) ||
	    (!json_object_get(c, "byte_offset") &&
	     (json_integer_value(json_object_get(c, "offset")) <= 0 ||
	      json_integer_value(json_object_get(c, "limit")) <= 0))) {
		free(raw);
		json_decref(c);
		return sg_err_set(&t->op->err, SG_E_INVALID_ARGUMENT,
				  "invalid read_file continuation token");
	}
	free(raw);
	*out = c;
	return SG_OK;
}

/* ---- read_file ---- */

struct read_args {
	const char *path, *expected;
	int64_t offset, limit; /* limit 0: to the end */
	bool ranged;           /* anything but a path: images refuse it */
	bool bytes;            /* a byte window (byte_range) instead of lines */
	int64_t boff, blim, bend;
	json_t *continuation;  /* owns the strings above when they came from it */
};

/* byte_range {offset, limit, end_offset}, or a byte continuation's. */
static sg_err byte_args(struct sg_tool_call *t, json_t *range, struct read_args *r)
{
	bool given;
	sg_err rc;

	if (!json_is_object(range))
		return sg_err_set(&t->op->err, SG_E_INVALID_ARGUMENT,
				  "byte_range must be an object {offset, limit, end_offset}");
	rc = int_arg(t, range, "offset", &r->boff, &given);
	if (!rc)
		rc = int_arg(t, range, "limit", &r->blim, &given);
	if (!rc)
		rc = int_arg(t, range, "end_offset", &r->bend, &given);
	if (rc)
		return rc;
	/* Providers that send every optional key with a zero mean "absent". */
	r->bytes = r->boff || r->blim;
	return SG_OK;
}

static sg_err read_args(struct sg_tool_call *t, struct read_args *r)
{
	const char *token = NULL;
	json_t *range = json_object_get(t->a, "byte_range");
	bool has_offset, has_limit;
	sg_err rc;

	rc = sg_arg_str(t->a, "path", false, &r->path, &t->op->err);
	if (!rc)
		rc = sg_arg_str(t->a, "continuation", false, &token, &t->op->err);
	if (!rc)
		rc = sg_arg_str(t->a, "expected_sha256", false, &r->expected, &t->op->err);
	if (!rc)
		rc = int_arg(t, t->a, "offset", &r->offset, &has_offset);
	if (!rc)
		rc = int_arg(t, t->a, "limit", &r->limit, &has_limit);
	if (rc)
		return rc;
	if (token && token[strspn(token, " \t\r\n")]) {
		const char *cpath;

		rc = decode_continuation(t, token + strspn(token, " \t\r\n"), &r->continuation);
		if (rc)
			return rc;
		cpath = json_string_value(json_object_get(r->continuation, "path"));
		if (r->path && r->path[strspn(r->path, " \t\r\n")] && strcmp(r->path, cpath))
			return sg_err_set(&t->op->err, SG_E_INVALID_ARGUMENT,
					  "read_file continuation does not match path");
		r->path = cpath;
		if (json_object_get(r->continuation, "byte_offset")) {
			range = json_pack("{s:O, s:O, s:O*}", "offset",
					  json_object_get(r->continuation, "byte_offset"), "limit",
					  json_object_get(r->continuation, "limit"), "end_offset",
					  json_object_get(r->continuation, "byte_end_offset"));
			rc = range ? byte_args(t, range, r)
				   : sg_err_set(&t->op->err, SG_E_INTERNAL, "out of memory");
			json_decref(range);
			range = NULL;
			if (rc)
				return rc;
		} else {
			r->offset = json_integer_value(json_object_get(r->continuation, "offset"));
			r->limit = json_integer_value(json_object_get(r->continuation, "limit"));
			has_offset = has_limit = true;
		}
		r->expected = json_string_value(json_object_get(r->continuation, "expected_sha256"));
	}
	if (!r->path || !r->path[strspn(r->path, " \t\r\n")])
		return sg_err_set(&t->op->err, SG_E_INVALID_ARGUMENT,
				  token ? "read_file requires path" :
				  "read_file requires path or continuation");
	if (range && !json_is_null(range)) {
		rc = byte_args(t, range, r);
		if (rc)
			return rc;
	}
	if (r->bytes && (r->offset > 0 || (has_limit && r->limit)))
		return sg_err_set(&t->op->err, SG_E_INVALID_ARGUMENT,
				  "read_file accepts byte_range instead of offset/limit");
	if (r->bytes && r->boff < 0)
		return sg_err_set(&t->op->err, SG_E_INVALID_ARGUMENT,
				  "read_file byte_range.offset must be non-negative");
	if (r->bytes && r->blim <= 0)
		return sg_err_set(&t->op->err, SG_E_INVALID_ARGUMENT,
				  "read_file byte_range.limit must be positive");
	if (r->bytes && r->blim > BYTE_WINDOW_MAX)
		return sg_err_set(&t->op->err, SG_E_INVALID_ARGUMENT,
				  "read_file byte_range.limit must be <= %d", BYTE_WINDOW_MAX);
	if (r->bytes && r->bend < 0)
		r->bend = 0;
	if (r->limit < 0)
		return sg_err_set(&t->op->err, SG_E_INVALID_ARGUMENT,
				  "read_file limit must be positive");
	if (r->offset < 0)
		r->offset = 0;
	if (r->expected && !r->expected[strspn(r->expected, " \t\r\n")])
		r->expected = NULL;
	r->ranged = r->offset > 1 || (has_limit && r->limit) || r->continuation || r->expected ||
		    r->bytes;
	(void)has_offset;
	return SG_OK;
}

/* An image: the host's read_image view and the picture itself. */
static sg_err read_image(struct sg_tool_call *t, const struct read_args *r, json_t *reply,
			 json_t **result)
{
	const char *path = json_string_value(json_object_get(reply, "path"));
	const char *slash = path ? strrchr(path, '/') : NULL;
	json_t *w = json_object_get(reply, "width"), *h = json_object_get(reply, "height");
	json_t *view, *mime = json_object_get(reply, "media_type");

	if (r->ranged)
		return sg_err_set(&t->op->err, SG_E_INVALID_ARGUMENT,
				  "image reads do not support text ranges or continuations; call "
				  "read_file with only path");
	view = json_pack("{s:s, s:O, s:O, s:O, s:O, s:O, s:O, s:b}", "action", "read_image",
			 "path", json_object_get(reply, "path"), "media_type", mime, "width", w,
			 "height", h, "source_width", w, "source_height", h, "resized", 0);
	*result = view ? sg_tool_result(view, NULL) : NULL;
	if (*result)
		json_array_append_new(json_object_get(*result, "content"),
				      json_pack("{s:s, s:O, s:O, s:s}", "type", "image", "mime_type",
						mime, "data", json_object_get(reply, "data"), "name",
						slash ? slash + 1 : path ? path : ""));
	return *result ? SG_OK : sg_err_set(&t->op->err, SG_E_INTERNAL, "out of memory");
}

/*
 * ,"path":P,"range":{"end_line":E,"start_line":S} for the lines shown:
 * the two keys stand together in both read views' sorted order.
 */
static sg_err add_path_range(struct sg_buf *b, const char *path, int64_t start,
			     int64_t shown)
{
	sg_err rc = sg_buf_adds(b, ",\"path\":");

	if (!rc)
		rc = sg_jw_str(b, path, strlen(path));
	if (!rc)
		rc = sg_buf_addf(b, ",\"range\":{\"end_line\":%lld,\"start_line\":%lld}",
				 (long long)(start + shown - 1), (long long)start);
	return rc;
}

/* The host's omitted_ranges (null when nothing was left out) and
 * next_suggestions, from the lines shown and the file's. */
static sg_err add_omitted(struct sg_buf *b, int64_t start, int64_t shown, int64_t total)
{
	int64_t end = start + shown - 1;
	bool before = total > 0 && start > 1, after = total > 0 && end < total;
	sg_err rc = sg_buf_adds(b, ",\"omitted_ranges\":");

	if (!rc && !before && !after)
		rc = sg_buf_adds(b, "null");
	if (!rc && (before || after))
		rc = sg_buf_addc(b, '[');
	if (!rc && before)
		rc = sg_buf_addf(b, "{\"end_line\":%lld,\"start_line\":1}%s",
				 (long long)(start - 1 < total ? start - 1 : total), after ? "," : "");
	if (!rc && after)
		rc = sg_buf_addf(b, "{\"end_line\":%lld,\"start_line\":%lld}", (long long)total,
				 (long long)(end + 1 > 1 ? end + 1 : 1));
	if (!rc && (before || after))
		rc = sg_buf_addc(b, ']');
	if (!rc)
		rc = sg_buf_addf(b, ",\"next_suggestions\":[\"%s\"]",
				 before || after ? "read an omitted range or nearby surrounding lines "
						   "if the current excerpt is insufficient before "
						   "editing"
						 : "use the excerpt as grounded evidence for subsequent "
						   "edits or analysis");
	return rc;
}

struct text_read {
	json_t *reply;    /* the helper's JSON line */
	const char *text; /* the window's lines after it, newlines kept */
	size_t text_len;
	int64_t start, shown, total;
};

/* The read_unchanged view (keys sorted, as the host's are), into v. */
static sg_err stub_view(const struct text_read *x, struct sg_buf *v)
{
	json_t *rp = x->reply;
	const char *path = json_string_value(json_object_get(rp, "path"));
	const char *sha = json_string_value(json_object_get(rp, "content_sha256"));
	const char *rev = json_string_value(json_object_get(rp, "workspace_revision"));
	sg_err rc;

	rc = sg_buf_addf(v, "{\"action\":\"read_unchanged\",\"content_sha256\":\"%s\","
			 "\"message\":\"File unchanged since last read. Refer to the earlier "
			 "read result.\",\"next_suggestions\":[\"use the earlier read result as "
			 "evidence, or request a different offset/limit if more context is "
			 "needed\"]", sha);
	if (!rc)
		rc = add_path_range(v, path, x->start, x->shown);
	if (!rc)
		rc = sg_buf_adds(v, ",\"unchanged\":true,\"workspace_revision\":");
	if (!rc)
		rc = sg_jw_str(v, rev, strlen(rev));
	return rc ? rc : sg_buf_addc(v, '}');
}

/* s escaped twice into frame (JSON inside a JSON string), through once. */
static sg_err escape_twice(struct sg_buf *frame, const char *s, size_t n, struct sg_buf *once)
{
	sg_err rc;

	sg_buf_reset(once);
	rc = sg_jw_chars(once, s, n);
	return rc ? rc : sg_jw_chars(frame, once->p, once->len);
}

/* A line's newline in the view, escaped twice: \n, its backslash escaped. */
static const char newline_twice[] = "\\\\n";

/* no in decimal and "|" at the end of the NUM_WIDTH bytes at out; returns its start. */
#define NUM_WIDTH 24
static char *line_number(char *out, int64_t no)
{
	char *p = out + NUM_WIDTH;
	uint64_t v = no < 0 ? 0 - (uint64_t)no : (uint64_t)no;

	*--p = '|';
	do
		*--p = (char)('0' + v % 10);
	while (v /= 10);
	if (no < 0)
		*--p = '-';
	return p;
}

/*
 * One line of the view (n bytes at p, its newline gone), "N|" or "|" before
 * it, escaped twice into frame.  Escaping leaves the prefix and a line of
 * plain bytes as they are, so such a line (most of them) is copied once,
 * into room reserved once; only the others go through once.
 */
static sg_err put_line(struct sg_buf *frame, const char *p, size_t n, int64_t no, bool numbered,
		       struct sg_buf *once)
{
	char num[NUM_WIDTH], *dst;
	const char *lead = numbered ? line_number(num, no) : "|";
	size_t k = numbered ? (size_t)(num + NUM_WIDTH - lead) : 1, nl = sizeof(newline_twice) - 1;
	sg_err rc;

	if (sg_jw_plain(p, n) == n) {
		rc = sg_buf_reserve(frame, k + n + nl, &dst);
		if (rc)
			return rc;
		memcpy(dst, lead, k);
		memcpy(dst + k, p, n);
		memcpy(dst + k + n, newline_twice, nl);
		sg_buf_commit(frame, k + n + nl);
		return SG_OK;
	}
	rc = sg_buf_add(frame, lead, k);
	if (!rc)
		rc = escape_twice(frame, p, n, once);
	return rc ? rc : sg_buf_add(frame, newline_twice, nl);
}

/*
 * The view's content, "N|line" per line (the number on the first line and
 * every tenth, as the host's; a line's newline and up to two carriage
 * returns before it dropped), escaped twice into frame in one pass over
 * the text.  Each line ends at a newline, so never inside a character.
 */
static sg_err put_numbered(struct sg_buf *frame, const struct text_read *x)
{
	struct sg_buf once = SG_BUF_INIT(SG_MAX_FRAME);
	const char *p = x->text, *end = x->text + x->text_len;
	int64_t no = x->start;
	sg_err rc = SG_OK;

	while (!rc && p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t n = (size_t)((nl ? nl : end) - p);

		for (int i = 0; nl && i < 2 && n && p[n - 1] == '\r'; i++)
			n--;
		rc = put_line(frame, p, n, no, no == x->start || no % 10 == 0, &once);
		p = nl ? nl + 1 : end;
		no++;
	}
	sg_buf_release(&once);
	return rc;
}

/*
 * The view after its content, in the host's key order (Go sorts a map's
 * keys): action and content come first, then content_sha256,
 * next_suggestions, num_lines, omitted_ranges, path, range, start_line,
 * total_lines, truncated, workspace_revision.  v gets `","content_sha256"
 * ...}`: the content string's closing quote and the rest.
 */
static sg_err read_view_rest(const struct text_read *x, struct sg_buf *v)
{
	json_t *rp = x->reply;
	const char *path = json_string_value(json_object_get(rp, "path"));
	const char *sha = json_string_value(json_object_get(rp, "content_sha256"));
	const char *rev = json_string_value(json_object_get(rp, "workspace_revision"));
	struct sg_buf om = SG_BUF_INIT(4 * SG_KiB);
	const char *ranges, *sugg;
	sg_err rc;

	/* add_omitted writes ,"omitted_ranges":X,"next_suggestions":Y */
	rc = add_omitted(&om, x->start, x->shown, x->total);
	ranges = rc ? NULL : strstr(om.p, ",\"omitted_ranges\":");
	sugg = rc ? NULL : strstr(om.p, ",\"next_suggestions\":");
	if (rc || !ranges || !sugg) {
		sg_buf_release(&om);
		return SG_E_INTERNAL;
	}
	rc = sg_buf_addf(v, "\",\"content_sha256\":\"%s\"", sha);
	if (!rc)
		rc = sg_buf_adds(v, sugg);
	if (!rc)
		rc = sg_buf_addf(v, ",\"num_lines\":%lld", (long long)x->shown);
	if (!rc)
		rc = sg_buf_add(v, ranges, (size_t)(sugg - ranges));
	if (!rc)
		rc = add_path_range(v, path, x->start, x->shown);
	if (!rc)
		rc = sg_buf_addf(v, ",\"start_line\":%lld,\"total_lines\":%lld,\"truncated\":%s,"
				 "\"workspace_revision\":", (long long)x->start, (long long)x->total,
				 x->start <= x->total && x->start - 1 + x->shown < x->total ? "true"
											    : "false");
	if (!rc)
		rc = sg_jw_str(v, rev, strlen(rev));
	if (!rc)
		rc = sg_buf_addc(v, '}');
	sg_buf_release(&om);
	return rc;
}

/* The view, escaped once into frame as the text part's string body. */
static sg_err put_view(struct sg_buf *frame, const struct text_read *x, bool unchanged)
{
	static const char head[] = "{\"action\":\"read\",\"content\":\"";
	struct sg_buf v = SG_BUF_INIT(SG_MAX_FRAME);
	sg_err rc;

	if (unchanged) {
		rc = stub_view(x, &v);
		if (!rc)
			rc = sg_jw_chars(frame, v.p, v.len);
		sg_buf_release(&v);
		return rc;
	}
	rc = sg_jw_chars(frame, head, sizeof(head) - 1);
	if (!rc)
		rc = put_numbered(frame, x);
	if (!rc)
		rc = read_view_rest(x, &v);
	if (!rc)
		rc = sg_jw_chars(frame, v.p, v.len);
	sg_buf_release(&v);
	return rc;
}

/*
 * The whole reply frame: {"id":ID,"data":{"content":[{"type":"text",
 * "text":VIEW}],"structured_content":{...}}}.  Its size is about the
 * text twice and a few bytes a line, so it is allocated once at that size
 * rather than doubled up to it.
 */
static sg_err read_frame(struct sg_tool_call *t, const struct text_read *x, bool unchanged)
{
	struct sg_buf frame = SG_BUF_INIT(SG_MAX_FRAME - 1);
	json_t *rp = x->reply;
	const char *path = json_string_value(json_object_get(rp, "path"));
	char *idtext = json_dumps(t->op->id, JSON_COMPACT | JSON_ENCODE_ANY);
	size_t guess = 2 * x->text_len + 8 * (size_t)x->shown + 4 * SG_KiB;
	char *unused;
	sg_err rc;

	rc = idtext ? SG_OK : SG_E_INTERNAL;
	if (!rc && guess < frame.max)
		rc = sg_buf_reserve(&frame, guess, &unused);
	if (!rc)
		rc = sg_buf_addf(&frame, "{\"id\":%s,\"data\":{\"content\":[{\"type\":\"text\","
				 "\"text\":\"", idtext);
	if (!rc)
		rc = put_view(&frame, x, unchanged);
	if (!rc)
		rc = sg_buf_addf(&frame, "\"}],\"structured_content\":{\"content_sha256\":\"%s\","
				 "\"num_lines\":%lld,\"path\":",
				 json_string_value(json_object_get(rp, "content_sha256")),
				 (long long)x->shown);
	if (!rc)
		rc = sg_jw_str(&frame, path, strlen(path));
	if (!rc)
		rc = sg_buf_addf(&frame, ",\"start_line\":%lld,\"text\":", (long long)x->start);
	if (!rc)
		rc = sg_jw_str(&frame, x->text, x->text_len);
	if (!rc)
		rc = sg_buf_addf(&frame, ",\"total_lines\":%lld}}}", (long long)x->total);
	if (rc)
		rc = sg_err_set(&t->op->err, SG_E_TOO_LARGE,
				"the selected lines do not fit in a reply; use a lower limit");
	else
		t->op->raw_reply = sg_buf_take(&frame, &t->op->raw_len);
	free(idtext);
	sg_buf_release(&frame);
	return rc;
}

/* A helper's tool_error or error reply, as the tool's failure. */
static sg_err helper_failed(struct sg_tool_call *t, json_t *reply)
{
	const char *te = json_string_value(json_object_get(reply, "tool_error"));
	const char *word = json_string_value(json_object_get(reply, "code"));
	sg_err code = word ? sg_err_from_word(word) : SG_E_NOT_FOUND;

	return sg_tool_fail(t, code == SG_E_INTERNAL ? SG_E_NOT_FOUND : code, "%s",
			    te ? te : "the read failed");
}

static sg_err read_text(struct sg_tool_call *t, const struct read_args *r, json_t *reply,
			const struct sg_buf *tail)
{
	struct text_read x = { .reply = reply };
	const char *sha = json_string_value(json_object_get(reply, "content_sha256"));
	const char *path = json_string_value(json_object_get(reply, "path"));
	int64_t tb = json_integer_value(json_object_get(reply, "text_bytes"));
	char *key;
	bool unchanged;

	if (!sha || !path || !json_is_string(json_object_get(reply, "workspace_revision")) ||
	    tb < 0 || (size_t)tb != tail->len)
		return sg_err_set(&t->op->err, SG_E_INTERNAL,
				  "sg-helper's read reply is malformed");
	if (r->expected && strcmp(r->expected, sha))
		return sg_tool_fail(t, SG_E_INVALID_ARGUMENT,
				    "read_file continuation is stale: file content changed from "
				    "\"%s\" to \"%s\"; restart without expected_sha256",
				    r->expected, sha);
	x.text = tail->p;
	x.text_len = (size_t)tb;
	x.start = r->offset > 0 ? r->offset : 1;
	x.shown = json_integer_value(json_object_get(reply, "num_lines"));
	x.total = json_integer_value(json_object_get(reply, "total_lines"));
	key = seen_key(t, path);
	if (!key)
		return sg_err_set(&t->op->err, SG_E_INTERNAL, "out of memory");
	unchanged = seen_unchanged(key, x.start, r->limit, sha);
	if (unchanged)
		free(key);
	else
		seen_record(key, x.start, r->limit, sha);
	return read_frame(t, &x, unchanged);
}

/* Unpadded URL-safe base64 of n bytes (new), as the host's tokens are. */
static char *b64url(const char *p, size_t n)
{
	char *out = malloc(4 * ((n + 2) / 3) + 1);
	int len;

	if (!out)
		return NULL;
	len = EVP_EncodeBlock((unsigned char *)out, (const unsigned char *)p, (int)n);
	while (len > 0 && out[len - 1] == '=')
		len--;
	out[len] = '\0';
	for (char *c = out; *c; c++)
		*c = *c == '+' ? '-' : *c == '/' ? '_' : *c;
	return out;
}

/*
 * A byte window as the host's read_bytes page: text when the bytes are
 * UTF-8 without NUL (cut after a line when that keeps half the window),
 * base64 otherwise; has_more with the continuation that reads on.
 */
/* The helper's base64 window into out (at most BYTE_WINDOW_MAX + 3 bytes). */
static bool unbase64(const char *b64, struct sg_buf *out)
{
	size_t n = strlen(b64), pad = 0;
	char *dst;
	int got;

	if (n % 4 || n / 4 * 3 > BYTE_WINDOW_MAX + 3 || sg_buf_reserve(out, n / 4 * 3 + 1, &dst))
		return false;
	got = n ? EVP_DecodeBlock((unsigned char *)dst, (const unsigned char *)b64, (int)n) : 0;
	if (got < 0)
		return false;
	while (pad < 2 && pad < n && b64[n - 1 - pad] == '=')
		pad++;
	sg_buf_commit(out, (size_t)got - pad);
	return true;
}

static sg_err read_bytes_page(struct sg_tool_call *t, const struct read_args *r, json_t *reply,
			      const struct sg_buf *data, json_t **result)
{
	const char *sha = json_string_value(json_object_get(reply, "content_sha256"));
	int64_t off = json_integer_value(json_object_get(reply, "byte_offset"));
	int64_t end = json_integer_value(json_object_get(reply, "segment_end_offset"));
	size_t keep = data->len < (size_t)r->blim ? data->len : (size_t)r->blim;
	bool text = sg_utf8_valid(data->p, data->len) && !memchr(data->p, '\0', data->len);
	json_t *view, *cont;
	char *token = NULL, *enc = NULL;
	sg_err rc = SG_OK;

	if (r->expected && sha && strcmp(r->expected, sha))
		return sg_tool_fail(t, SG_E_INVALID_ARGUMENT,
				    "read_file continuation is stale: file content changed from "
				    "\"%s\" to \"%s\"; restart without expected_sha256",
				    r->expected, sha);
	if (text && data->len && sg_utf8_seq((const unsigned char *)data->p, data->len) > keep)
		text = false;
	if (text && keep < data->len) {
		const char *nl = memrchr(data->p, '\n', keep);

		if (nl && (size_t)(nl - data->p) + 1 >= keep / 2)
			keep = (size_t)(nl - data->p) + 1;
		while (keep > 0 && keep < data->len && ((unsigned char)data->p[keep] & 0xc0) == 0x80)
			keep--;
	}
	view = json_pack("{s:s, s:O, s:O, s:s, s:O, s:O, s:I, s:I, s:s}", "action", "read_bytes",
			 "path", json_object_get(reply, "path"), "workspace_revision",
			 json_object_get(reply, "workspace_revision"), "content_sha256", sha ? sha : "",
			 "total_bytes", json_object_get(reply, "total_bytes"), "segment_end_offset",
			 json_object_get(reply, "segment_end_offset"), "byte_offset", (json_int_t)off,
			 "byte_count", (json_int_t)keep, "encoding", text ? "utf-8" : "base64");
	if (view && text) {
		json_object_set_new(view, "content", json_stringn(data->p, keep));
	} else if (view) {
		enc = malloc(4 * ((keep + 2) / 3) + 1);
		if (enc)
			EVP_EncodeBlock((unsigned char *)enc, (const unsigned char *)data->p, (int)keep);
		json_object_set_new(view, "content_base64", json_string(enc ? enc : ""));
	}
	cont = json_pack("{s:b}", "has_more", off + (int64_t)keep < end);
	if (cont && off + (int64_t)keep < end) {
		/* The host's byte continuation, its keys in its order. */
		json_t *c = json_pack("{s:O, s:I, s:s, s:I, s:I}", "path",
				      json_object_get(reply, "path"), "limit",
				      (json_int_t)(r->blim < BYTE_PAGE_NEXT ? r->blim : BYTE_PAGE_NEXT),
				      "expected_sha256", sha ? sha : "", "byte_offset",
				      (json_int_t)(off + (int64_t)keep), "byte_end_offset",
				      (json_int_t)end);
		char *raw = c ? json_dumps(c, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;

		token = raw ? b64url(raw, strlen(raw)) : NULL;
		json_object_set_new(cont, "next", json_pack("{s:s}", "continuation",
							     token ? token : ""));
		free(raw);
		json_decref(c);
	}
	if (view && cont)
		json_object_set_new(view, "continuation", cont);
	else
		json_decref(cont);
	*result = view ? sg_tool_result(view, NULL) : NULL;
	if (!*result)
		rc = sg_err_set(&t->op->err, SG_E_INTERNAL, "out of memory");
	free(token);
	free(enc);
	return rc;
}

/*
 * Whether path may be a bash run's full_log_ref: the environment's process
 * table, as the environment sees it, then a directory and a name.  The
 * host lets read_file open its session artifacts so (its ResolveReadPath);
 * sg-helper (fs read --full-log) takes only those last two, the log
 * directory's name and a log's, beneath the table.
 */
static bool full_log_ref(const struct sg_tool_call *t, const char *path)
{
	char dir[SG_PATH_MAX];
	const char *rest, *slash;
	int n = snprintf(dir, sizeof(dir), "%s/proc/",
			 t->s->env->ctl_dir ? t->s->env->ctl_dir : "");

	if (!t->s->env->ctl_dir || n <= 0 || (size_t)n >= sizeof(dir) ||
	    strncmp(path, dir, (size_t)n) != 0)
		return false;
	rest = path + n;
	slash = strchr(rest, '/');
	return slash && slash > rest && slash[1] && !strchr(slash + 1, '/');
}

sg_err sg_tool_read_file(struct sg_tool_call *t, json_t **result)
{
	struct read_args r = { 0 };
	struct sg_buf tail = SG_BUF_INIT(SG_ENVTOOL_REPLY);
	struct sg_strv argv = SG_STRV_INIT;
	const char *kind;
	json_t *reply = NULL;
	bool log;
	sg_err rc;

	*result = NULL;
	rc = read_args(t, &r);
	log = !rc && full_log_ref(t, r.path);
	if (!rc && (sg_strv_addv(&argv, (const char *[]){ "fs", "read", "--raw", NULL }) ||
		    (t->mode == SG_CONFINE_NONE && sg_strv_add(&argv, "--unconfined")) ||
		    (r.offset > 1 && (sg_strv_add(&argv, "--offset") ||
				      sg_strv_addf(&argv, "%lld", (long long)r.offset))) ||
		    (r.limit && (sg_strv_add(&argv, "--limit") ||
				 sg_strv_addf(&argv, "%lld", (long long)r.limit))) ||
		    (r.bytes && (sg_strv_add(&argv, "--byte-offset") ||
				 sg_strv_addf(&argv, "%lld", (long long)r.boff) ||
				 sg_strv_add(&argv, "--byte-limit") ||
				 sg_strv_addf(&argv, "%lld", (long long)r.blim) ||
				 sg_strv_add(&argv, "--byte-end") ||
				 sg_strv_addf(&argv, "%lld", (long long)r.bend))) ||
		    (log && sg_strv_add(&argv, "--full-log")) ||
		    sg_strv_addv(&argv, (const char *[]){ "--", r.path, NULL })))
		rc = sg_err_set(&t->op->err, SG_E_INTERNAL, "out of memory");
	if (!rc)
		rc = sg_envcall_tail(t->s, SG_CALL_ROOTED | (log ? SG_CALL_CTL : 0),
				     sg_strv_get(&argv), &reply, &tail, &t->op->cancel, &t->op->err);
	if (rc)
		goto out;
	sg_tool_revision(t, reply);
	kind = json_string_value(json_object_get(reply, "kind"));
	if (json_object_get(reply, "tool_error"))
		rc = helper_failed(t, reply);
	else if (kind && !strcmp(kind, "image"))
		rc = read_image(t, &r, reply, result);
	else if (kind && !strcmp(kind, "bytes")) {
		struct sg_buf window = SG_BUF_INIT(BYTE_WINDOW_MAX + 8);
		const char *b64 = json_string_value(json_object_get(reply, "data"));

		rc = b64 && unbase64(b64, &window)
			     ? read_bytes_page(t, &r, reply, &window, result)
			     : sg_err_set(&t->op->err, SG_E_INTERNAL,
					  "sg-helper's byte window reply is malformed");
		sg_buf_release(&window);
	}
	else
		rc = read_text(t, &r, reply, &tail);
out:
	json_decref(reply);
	json_decref(r.continuation);
	sg_buf_release(&tail);
	sg_strv_release(&argv);
	return rc;
}

/* ---- list_files ---- */

static const char *list_suggestion(int64_t total, int64_t returned, bool more)
{
	if (more)
		return "use page.next with the same list_files path for more entries, or narrow "
		       "the path";
	if (total == 0)
		return "try a parent directory or glob if the expected files are elsewhere";
	if (returned == 0)
		return "inspect a parent directory or use glob to locate files";
	return "use read_file on specific file paths or list_files on subdirectories before "
	       "editing";
}

/*
 * list_files' view of sg-helper's list reply (borrowed), as the host's
 * worker shows a page of offset: its counts, the page and its next
 * continuation bound to revision, and what to try next (new; NULL when
 * out of memory).
 */
static json_t *list_view(json_t *reply, json_t *entries, const char *revision, int64_t offset)
{
	int64_t visible, returned;
	bool more;
	json_t *page;

	visible = json_integer_value(json_object_get(reply, "visible_total"));
	returned = (int64_t)json_array_size(entries);
	more = json_is_true(json_object_get(reply, "has_more"));
	page = sg_tool_page(offset, returned, more, revision);
	return json_pack("{s:s, s:O, s:s, s:O, s:I, s:I, s:I, s:b, s:o, s:b, s:I, s:O, s:O,"
			 " s:[s]}",
			 "action", "list", "path", json_object_get(reply, "path"),
			 "workspace_revision", revision, "total", json_object_get(reply, "total"),
			 "visible_total", (json_int_t)visible, "offset", (json_int_t)offset,
			 "returned_count", (json_int_t)returned, "has_more", more, "page", page,
			 "truncated", more, "omitted_entry_count",
			 (json_int_t)(visible - offset - returned > 0 ? visible - offset - returned
								      : 0),
			 "omitted_protected", json_object_get(reply, "omitted_protected"),
			 "entries", entries, "next_suggestions",
			 list_suggestion(json_integer_value(json_object_get(reply, "total")),
					 returned, more));
}

sg_err sg_tool_list_files(struct sg_tool_call *t, json_t **result)
{
	const char *path = NULL, *expected = NULL, *wr, *listing;
	struct sg_strv argv = SG_STRV_INIT;
	json_t *reply = NULL, *entries, *view;
	char *revision = NULL;
	int64_t offset = 0;
	bool given;
	sg_err rc;

	*result = NULL;
	rc = sg_arg_str(t->a, "path", false, &path, &t->op->err);
	if (!rc)
		rc = sg_arg_str(t->a, "expected_revision", false, &expected, &t->op->err);
	if (!rc)
		rc = int_arg(t, t->a, "offset", &offset, &given);
	if (!rc && offset < 0)
		rc = sg_err_set(&t->op->err, SG_E_INVALID_ARGUMENT,
				"list_files offset must be non-negative");
	if (rc)
		return rc;
	if (expected && !expected[strspn(expected, " \t\r\n")])
		expected = NULL;
	if (offset > 0 && !expected)
		return sg_err_set(&t->op->err, SG_E_INVALID_ARGUMENT,
				  "list_files expected_revision is required when offset is non-zero");
	if (!path || !path[strspn(path, " \t\r\n")])
		path = ".";
	if (sg_strv_add(&argv, "list") || sg_strv_add(&argv, "--offset") ||
	    sg_strv_addf(&argv, "%lld", (long long)offset) ||
	    sg_strv_addv(&argv, (const char *[]){ "--", path, NULL }))
		rc = sg_err_set(&t->op->err, SG_E_INTERNAL, "out of memory");
	if (!rc)
		rc = sg_tool_fs(t, sg_strv_get(&argv), NULL, 0, &reply);
	if (rc)
		goto out;
	wr = json_string_value(json_object_get(reply, "workspace_revision"));
	listing = json_string_value(json_object_get(reply, "listing"));
	entries = json_object_get(reply, "entries");
	if (!wr || !listing || !json_is_array(entries)) {
		rc = sg_err_set(&t->op->err, SG_E_INTERNAL, "sg-helper's list reply is malformed");
		goto out;
	}
	/* The host binds a page to the workspace and to the listing itself. */
	revision = sg_tool_page_revision(wr, listing);
	if (!revision) {
		rc = sg_err_set(&t->op->err, SG_E_INTERNAL, "out of memory");
		goto out;
	}
	if (expected && !sg_tool_page_current(expected, revision)) {
		rc = sg_tool_fail(t, SG_E_INVALID_ARGUMENT,
				  "list_files continuation is stale: result revision changed from "
				  "\"%s\" to \"%s\"; restart at offset 0", expected, revision);
		goto out;
	}
	view = list_view(reply, entries, revision, offset);
	*result = view ? sg_tool_result(view, NULL) : NULL;
	if (!*result)
		rc = sg_err_set(&t->op->err, SG_E_INTERNAL, "out of memory");
out:
	free(revision);
	json_decref(reply);
	sg_strv_release(&argv);
	return rc;
}

/* ---- present_artifact ---- */

sg_err sg_tool_present_artifact(struct sg_tool_call *t, json_t **result)
{
	const char *path = NULL;
	json_t *part = NULL;
	sg_err rc;

	*result = NULL;
	rc = sg_arg_str(t->a, "path", true, &path, &t->op->err);
	if (!rc && !path[strspn(path, " \t\r\n")])
		rc = sg_err_set(&t->op->err, SG_E_INVALID_ARGUMENT, "present_artifact requires path");
	if (!rc)
		rc = sg_export_path(t->s, path, t->mode == SG_CONFINE_NONE, &part, &t->op->cancel,
				    &t->op->err);
	if (rc)
		return rc;
	*result = sg_tool_result(part, NULL);
	return *result ? SG_OK : sg_err_set(&t->op->err, SG_E_INTERNAL, "out of memory");
}
