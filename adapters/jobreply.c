/*
 * jobreply.c - the command line of `sg-helper job` and its reply, once for
 * every adapter that supervises remote commands with it (jobreply.h).
 */
#define _GNU_SOURCE /* memmem, getentropy */
#include "adapters/jobreply.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "adapters/adapter.h"
#include "base/cancel.h"
#include "base/limits.h"
#include "base/utf8.h"
#include "core/shquote.h"

/* Append one more quoted word to w. */
static sg_err job_word(struct sg_buf *w, const char *word)
{
	sg_err rc = w->len ? sg_buf_addc(w, ' ') : SG_OK;

	return rc ? rc : sg_shquote(w, word);
}

/* The option name and its value, both quoted. */
static sg_err job_opt(struct sg_buf *w, const char *name, const char *value)
{
	sg_err rc = job_word(w, name);

	return rc ? rc : job_word(w, value);
}

static sg_err job_opt_n(struct sg_buf *w, const char *name, long long v)
{
	char n[32];

	snprintf(n, sizeof(n), "%lld", v);
	return job_opt(w, name, n);
}

/* The words both lines begin with. */
static sg_err job_head(const struct sg_job_line *l, const struct sg_exec *x, bool attach,
		       struct sg_buf *w)
{
	sg_err rc = job_word(w, l->helper);

	if (!rc)
		rc = job_word(w, "job");
	if (!rc && attach)
		rc = job_word(w, "--attach");
	if (!rc)
		rc = job_opt(w, "--dir", l->dir);
	if (!rc)
		rc = job_opt(w, "--mark", l->mark);
	if (!rc)
		rc = job_opt_n(w, "--wait-ms", (long long)l->wait_ms);
	if (!rc)
		rc = job_opt_n(w, "--max-out", (long long)x->max_output);
	if (!rc)
		rc = job_opt_n(w, "--max-err", (long long)SG_HELPER_STDERR);
	if (!rc && l->keep_tail)
		rc = job_word(w, "--keep-tail");
	if (!rc && l->tie)
		rc = job_word(w, "--tie");
	if (!rc && l->rm && !attach)
		rc = job_word(w, "--rm");
	if (!rc && l->linger && !attach)
		rc = job_word(w, "--linger");
	return rc;
}

sg_err sg_job_words(const struct sg_job_line *l, const struct sg_exec *x,
		    const char *default_cwd, struct sg_buf *start, struct sg_buf *attach)
{
	sg_err rc;

	if (!x->argv || !x->argv[0])
		return SG_E_INVALID_ARGUMENT;
	rc = job_head(l, x, false, start);
	if (!rc && attach)
		rc = job_head(l, x, true, attach);
	if (!rc && x->timeout_ms > 0)
		rc = job_opt_n(start, "--timeout-ms", (long long)x->timeout_ms);
	if (!rc && (x->flags & SG_EXEC_MERGE))
		rc = job_word(start, "--merge");
	if (!rc && (x->flags & SG_EXEC_DETACHES))
		rc = job_word(start, "--detach");
	if (!rc)
		rc = job_opt(start, "--cwd", x->cwd ? x->cwd : default_cwd);
	if (!rc && l->stdin_vars)
		rc = job_opt(start, "--stdin-env", l->stdin_vars);
	if (!rc && l->stdin_file)
		rc = job_opt(start, "--stdin-file", l->stdin_file);
	if (!rc && l->gc && l->gc[0])
		rc = job_opt(start, "--gc", l->gc);
	if (!rc && l->bind)
		rc = job_opt(start, "--bind", l->bind);
	if (!rc && l->bind && l->bind_to)
		rc = job_opt(start, "--bind-to", l->bind_to);
	if (!rc && l->bind && l->tmp)
		rc = job_opt(start, "--tmp", l->tmp);
	if (!rc && l->netns)
		rc = job_word(start, "--netns");
	if (!rc && l->cgroups && l->cgroups[0])
		rc = job_opt(start, "--cgroups", l->cgroups);
	if (!rc && l->spec_stdin)
		return job_word(start, "--spec-stdin");
	if (!rc)
		rc = job_word(start, "--");
	for (size_t i = 0; !rc && x->envp && x->envp[i]; i++)
		if (strchr(x->envp[i], '='))
			rc = job_word(start, x->envp[i]);
	if (!rc)
		rc = job_word(start, "--");
	for (size_t i = 0; !rc && x->argv[i]; i++)
		rc = job_word(start, x->argv[i]);
	return rc;
}

sg_err sg_job_spec(const struct sg_exec *x, struct sg_buf *out)
{
	size_t n = 0;
	sg_err rc;

	if (!x->argv || !x->argv[0])
		return SG_E_INVALID_ARGUMENT;
	for (size_t i = 0; x->envp && x->envp[i]; i++)
		if (x->envp[i][0] != '=' && strchr(x->envp[i], '='))
			n += strlen(x->envp[i]) + 1;
	n += 3;
	for (size_t i = 0; x->argv[i]; i++)
		n += strlen(x->argv[i]) + 1;
	rc = sg_buf_addf(out, "%zu\n", n);
	for (size_t i = 0; !rc && x->envp && x->envp[i]; i++)
		if (x->envp[i][0] != '=' && strchr(x->envp[i], '='))
			rc = sg_buf_add(out, x->envp[i], strlen(x->envp[i]) + 1);
	if (!rc)
		rc = sg_buf_add(out, "--", 3);
	for (size_t i = 0; !rc && x->argv[i]; i++)
		rc = sg_buf_add(out, x->argv[i], strlen(x->argv[i]) + 1);
	if (!rc && x->stdin_data && x->stdin_len)
		rc = sg_buf_add(out, x->stdin_data, x->stdin_len);
	return rc;
}

void sg_job_mark(char mark[SG_JOB_MARK_SIZE])
{
	static const char hex[] = "0123456789abcdef";
	unsigned char rnd[8] = { 0 };

	/* Without entropy the mark is still unlikely to be printed by chance. */
	if (getentropy(rnd, sizeof(rnd)) != 0)
		for (size_t i = 0; i < sizeof(rnd); i++)
			rnd[i] = (unsigned char)(random() >> 7);
	memcpy(mark, "sgmk-", 5);
	for (size_t i = 0; i < sizeof(rnd); i++) {
		mark[5 + 2 * i] = hex[rnd[i] >> 4];
		mark[6 + 2 * i] = hex[rnd[i] & 15];
	}
	mark[SG_JOB_MARK_SIZE - 1] = '\0';
}

/*
 * The int after prefix at the start of s.  Not sscanf's %d: the reply
 * comes from inside the environment, and %d on a number out of int's
 * range is undefined behaviour.
 */
static bool field_int(const char *s, const char *prefix, int *n)
{
	size_t k = strlen(prefix);
	char *end;
	long v;

	if (strncmp(s, prefix, k) != 0)
		return false;
	errno = 0;
	v = strtol(s + k, &end, 10);
	if (end == s + k || errno != 0 || v < INT_MIN || v > INT_MAX)
		return false;
	*n = (int)v;
	return true;
}

/* "exit N", "signal N", x, timed out: the exec result's status fields. */
static void job_status(struct sg_job_reply *r, const char *line, size_t len)
{
	char x[32] = "", st[48] = "", to[8] = "";
	char *fields[] = { x, st, to };
	size_t sizes[] = { sizeof(x), sizeof(st), sizeof(to) };
	const char *p = line, *end = line + len;
	int n;

	for (int i = 0; i < 3; i++) {
		const char *bar = memchr(p, '|', (size_t)(end - p));
		size_t flen;

		if (!bar)
			break;
		flen = (size_t)(bar - p) < sizes[i] - 1 ? (size_t)(bar - p) : sizes[i] - 1;
		memcpy(fields[i], p, flen);
		fields[i][flen] = '\0';
		p = bar + 1;
		if (i == 2) {
			char size[64], *bar2;
			size_t slen = (size_t)(end - p) < sizeof(size) - 1 ? (size_t)(end - p)
									  : sizeof(size) - 1;

			memcpy(size, p, slen);
			size[slen] = '\0';
			r->out_size = strtoll(size, NULL, 10);
			/* The optional fifth field: stdout's lines (--keep-tail). */
			if ((bar2 = strchr(size, '|'))) {
				r->out_lines = strtoll(bar2 + 1, NULL, 10);
				r->has_lines = true;
			}
		}
	}
	r->exit_code = -1;
	r->signal = 0;
	r->lost = false;
	r->timed_out = to[0] == '1';
	if (r->timed_out)
		r->signal = 9;
	else if (field_int(st, "signal ", &n))
		r->signal = n;
	else if (field_int(st, "exit ", &n))
		r->exit_code = n;
	else if (field_int(x, "", &n))
		/* No wait status recorded: the group was killed by a cancel. */
		r->exit_code = n;
	else
		r->signal = 9, r->lost = true; /* killed before it wrote anything */
}

bool sg_job_ended(const char *text, size_t len, const char *mark)
{
	size_t mlen = strlen(mark), n = mlen + sizeof(" " SG_JOB_END "\n");

	return len >= n && text[len - n] == '\n' && memcmp(text + len - n + 1, mark, mlen) == 0 &&
	       memcmp(text + len - n + 1 + mlen, " " SG_JOB_END "\n", n - 1 - mlen) == 0;
}

void sg_job_parse(const char *text, size_t len, const char *mark, struct sg_job_reply *r)
{
	size_t mlen = strlen(mark);
	const char *hit = NULL, *p, *word, *eol;

	memset(r, 0, sizeof(*r));
	r->exit_code = -1;
	/* A --linger job's last line only says the reply is whole. */
	if (sg_job_ended(text, len, mark))
		len -= mlen + sizeof(" " SG_JOB_END "\n");
	for (p = len ? memmem(text, len, mark, mlen) : NULL; p;
	     p = memmem(p + 1, len - (size_t)(p + 1 - text), mark, mlen))
		hit = p;
	if (!hit || hit == text || hit[-1] != '\n')
		return;
	r->head_len = (size_t)(hit - 1 - text);
	word = hit + mlen;
	eol = memchr(word, '\n', len - (size_t)(word - text));
	if (!eol)
		eol = text + len;
	if ((size_t)(eol - word) > 6 && memcmp(word, " " SG_JOB_DONE " ", 6) == 0) {
		r->state = SG_JOB_IS_DONE;
		job_status(r, word + 6, (size_t)(eol - word - 6));
		r->err_at = eol < text + len ? (size_t)(eol + 1 - text) : len;
	} else if ((size_t)(eol - word) == 8 && memcmp(word, " " SG_JOB_PENDING, 8) == 0) {
		r->state = SG_JOB_IS_PENDING;
	} else if ((size_t)(eol - word) == 8 && memcmp(word, " " SG_JOB_MISSING, 8) == 0) {
		r->state = SG_JOB_IS_MISSING;
	} else {
		r->state = SG_JOB_BAD;
	}
}

void sg_job_status(const struct sg_job_reply *r, size_t max_output,
		   struct sg_exec_result *out)
{
	out->exit_code = r->exit_code;
	out->signal = r->signal;
	out->timed_out = r->timed_out;
	if ((unsigned long long)r->out_size > max_output)
		out->truncated = true;
	if (r->lost && !out->err.len)
		sg_buf_add_clipped(&out->err, "sandgate: the command was killed\n", 33);
}

size_t sg_job_tail(const struct sg_job_reply *r, const char *text, size_t max_output,
		   struct sg_exec_result *out)
{
	size_t keep = r->head_len, head = max_output - max_output / 2;

	if (!out->keep_tail || !r->has_lines || (unsigned long long)r->out_size <= max_output)
		return keep;
	/* sg-helper job sent the head, then the tail (--keep-tail). */
	out->truncated = true;
	out->total = (uint64_t)r->out_size;
	out->lines = (uint64_t)r->out_lines;
	if (keep > head) {
		sg_buf_add_clipped(&out->tail, text + head, keep - head);
		keep = head;
	}
	return keep;
}

void sg_job_result(const struct sg_job_reply *r, const char *text, size_t len,
		   size_t max_output, struct sg_exec_result *out)
{
	size_t keep = sg_job_tail(r, text, max_output, out);

	if (keep > max_output)
		keep = sg_utf8_clip(text, keep, max_output);
	if (sg_buf_add_clipped(&out->out, text, keep))
		out->truncated = true;
	if (r->err_at < len)
		sg_buf_add_clipped(&out->err, text + r->err_at, len - r->err_at);
	sg_job_status(r, max_output, out);
}

/* ---- The driver ------------------------------------------------------------ */

/* A drive's state between its trips (sg_job_drive). */
struct drive {
	const struct sg_job_driver *d;
	struct sg_cancel *cancel;
	struct sg_errinfo *err;
	int64_t start; /* the drive's start (sg_now_ms), for pending_ms */
	int fails;     /* failed trips, or replies without a trailer, in a row */
	int missing;   /* replies that found the job's files gone */
	bool attach;   /* the next trip attaches instead of starting */
	bool seen;     /* something showed that the start arrived */
};

/* What a trip's outcome asks of the drive next. */
enum drive_next {
	DRIVE_AGAIN,     /* another trip */
	DRIVE_END,       /* the drive is over, with its result in *rc */
	DRIVE_CANCELLED, /* the token fired: the job is killed (drive_cancelled) */
};

/*
 * A trip that failed: retried after a backoff, the start sent again only
 * while nothing showed it arrived; after d->fails in a row, the error.
 */
static enum drive_next drive_failed(struct drive *s, const struct sg_errinfo *once, sg_err *rc)
{
	const struct sg_job_driver *d = s->d;

	if (sg_cancel_check(s->cancel))
		return DRIVE_CANCELLED;
	if (++s->fails >= d->fails) {
		/*
		 * A request may have reached the sandbox and only its reply
		 * got lost: never assume it did not run.
		 */
		*rc = sg_err_set(s->err, once->code ? once->code : SG_E_UNAVAILABLE,
				 "%s; the command may have run (no reply came back)", once->msg);
		if (s->seen || d->kill_unseen)
			d->kill(d->ctx);
		return DRIVE_END;
	}
	if ((*rc = sg_cancel_sleep(s->cancel, d->backoff_ms * s->fails)))
		return DRIVE_CANCELLED;
	s->attach = s->seen;
	return DRIVE_AGAIN;
}

/* A reply without a trailer: attach again, d->fails times in a row at most. */
static enum drive_next drive_no_trailer(struct drive *s, const char *text, sg_err *rc)
{
	s->seen = true;
	s->attach = true;
	if (++s->fails >= s->d->fails) {
		*rc = sg_err_set(s->err, SG_E_PROVIDER,
				 "the sandbox gave no result for the command: %.200s",
				 text ? text : "");
		s->d->kill(s->d->ctx);
		return DRIVE_END;
	}
	return DRIVE_AGAIN;
}

/*
 * The job is still running: attach again, unless it is pending past
 * d->pending_ms (then killed, a timeout) or the token fired.
 */
static enum drive_next drive_pending(struct drive *s, struct sg_exec_result *out, sg_err *rc)
{
	const struct sg_job_driver *d = s->d;

	s->attach = true;
	if (d->pending_ms > 0 && sg_now_ms() - s->start > d->pending_ms) {
		/* The job's own timer should have ended it. */
		d->kill(d->ctx);
		out->timed_out = true;
		out->signal = 9;
		*rc = SG_OK;
		return DRIVE_END;
	}
	if ((*rc = sg_cancel_check(s->cancel)))
		return DRIVE_CANCELLED;
	return DRIVE_AGAIN;
}

/* A trip's reply read back: the result, or what the drive does next. */
static enum drive_next drive_reply(struct drive *s, const char *text, size_t len,
				   size_t max_output, struct sg_exec_result *out, sg_err *rc)
{
	struct sg_job_reply jr;

	sg_job_parse(text ? text : "", len, s->d->mark, &jr);
	if (jr.state == SG_JOB_NONE)
		return drive_no_trailer(s, text, rc);
	s->seen = true;
	s->fails = 0;
	if (jr.state == SG_JOB_IS_PENDING)
		return drive_pending(s, out, rc);
	if (jr.state == SG_JOB_IS_MISSING) {
		if (++s->missing > 3) {
			*rc = sg_err_set(s->err, SG_E_PROVIDER,
					 "the command's state in the sandbox disappeared");
			return DRIVE_END;
		}
		s->attach = false;
		s->seen = false;
		return DRIVE_AGAIN;
	}
	if (jr.state != SG_JOB_IS_DONE) {
		*rc = sg_err_set(s->err, SG_E_PROVIDER, "the sandbox gave an unreadable result");
		s->d->kill(s->d->ctx);
		return DRIVE_END;
	}
	sg_job_result(&jr, text, len, max_output, out);
	*rc = SG_OK;
	return DRIVE_END;
}

/* The token fired: the job is killed, and err says why. */
static sg_err drive_cancelled(struct drive *s)
{
	sg_err rc = sg_cancel_check(s->cancel) ? sg_cancel_check(s->cancel) : SG_E_CANCELLED;

	s->d->kill(s->d->ctx);
	sg_err_clear(s->err);
	sg_err_set(s->err, rc, "the command was %s in the sandbox",
		   rc == SG_E_TIMEOUT ? "stopped by a deadline" : "cancelled");
	return rc;
}

sg_err sg_job_drive(const struct sg_job_driver *d, size_t max_output,
		    struct sg_exec_result *out, struct sg_cancel *cancel, struct sg_errinfo *err)
{
	struct drive s = { .d = d, .cancel = cancel, .err = err, .start = sg_now_ms() };
	enum drive_next next = DRIVE_AGAIN;
	sg_err rc = SG_OK;

	while (next == DRIVE_AGAIN) {
		struct sg_errinfo once = { 0 };
		const char *text = NULL;
		size_t len = 0;
		enum sg_job_trip t = d->trip(d->ctx, s.attach, &text, &len, cancel, &once);

		if (t == SG_JOB_TRIP_LIVES) {
			s.seen = true;
			s.attach = true;
		} else if (t == SG_JOB_TRIP_RESTART) {
			s.attach = false;
			s.seen = false;
		} else if (t == SG_JOB_TRIP_FATAL) {
			rc = sg_err_set(err, once.code ? once.code : SG_E_PROVIDER, "%s", once.msg);
			next = DRIVE_END;
		} else if (t == SG_JOB_TRIP_FAILED) {
			next = drive_failed(&s, &once, &rc);
		} else {
			next = drive_reply(&s, text, len, max_output, out, &rc);
		}
	}
	if (next == DRIVE_CANCELLED)
		rc = drive_cancelled(&s);
	return rc;
}
