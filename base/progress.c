/* progress.c - long provider waits on stderr (progress.h). */
#include "base/progress.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/cancel.h"

enum mode { MODE_UNSET, MODE_OFF, MODE_LINE, MODE_LOG, MODE_JSON };

struct step {
	const char *name; /* NULL: no open step */
	int64_t t0;
	char text[160];
};

static atomic_int mode_cache = MODE_UNSET;
static _Thread_local struct step cur;

/* Decided once; two threads deciding at once reach the same answer. */
static enum mode mode(void)
{
	int m = atomic_load(&mode_cache);
	const char *v;

	if (m != MODE_UNSET)
		return (enum mode)m;
	v = getenv("SANDGATE_PROGRESS");
	if (v && strcmp(v, "off") == 0)
		m = MODE_OFF;
	else if (v && strcmp(v, "line") == 0)
		m = MODE_LINE;
	else if (v && strcmp(v, "log") == 0)
		m = MODE_LOG;
	else if (v && strcmp(v, "json") == 0)
		m = MODE_JSON;
	else
		m = isatty(2) ? MODE_LINE : MODE_LOG;
	atomic_store(&mode_cache, m);
	return (enum mode)m;
}

static void emit(const char *line, int n)
{
	/* A progress line that cannot be written has nowhere else to go. */
	if (n > 0 && write(2, line, (size_t)n) < 0)
		return;
}

/* Text made safe for a JSON string: quotes, backslashes and controls go. */
static void plain(char *s)
{
	for (; *s; s++)
		if (*s == '"' || *s == '\\' || (unsigned char)*s < 0x20)
			*s = ' ';
}

/* One event of the open step; `ok` is read for "end" only. */
static void report(const char *event, bool ok)
{
	char line[320];
	int64_t ms = sg_now_ms() - cur.t0;
	int n = 0;

	switch (mode()) {
	case MODE_LINE:
		/* \r and erase-to-end keep one line on the terminal. */
		n = snprintf(line, sizeof(line), "\r\033[Ksandgate: %s: %s (%lld.%lld s)%s",
			     cur.name, strcmp(event, "end") == 0 ? (ok ? "done" : "failed")
								  : cur.text,
			     (long long)(ms / 1000), (long long)(ms % 1000 / 100),
			     strcmp(event, "end") == 0 ? "\n" : "");
		break;
	case MODE_LOG:
		if (strcmp(event, "end") == 0)
			n = snprintf(line, sizeof(line), "sandgate: %s: %s in %lld.%03lld s\n",
				     cur.name, ok ? "done" : "failed", (long long)(ms / 1000),
				     (long long)(ms % 1000));
		else
			n = snprintf(line, sizeof(line), "sandgate: %s: %s\n", cur.name, cur.text);
		break;
	case MODE_JSON:
		n = snprintf(line, sizeof(line),
			     "{\"progress\":\"%s\",\"event\":\"%s\",\"ms\":%lld,\"ok\":%s,\"text\":\"%s\"}\n",
			     cur.name, event, (long long)ms, ok ? "true" : "false", cur.text);
		break;
	default:
		return;
	}
	if (n >= (int)sizeof(line))
		n = (int)sizeof(line) - 1;
	emit(line, n);
}

void sg_progress_begin(const char *step, const char *fmt, ...)
{
	va_list ap;

	if (cur.name)
		sg_progress_end(SG_OK);
	cur.name = step;
	cur.t0 = sg_now_ms();
	va_start(ap, fmt);
	vsnprintf(cur.text, sizeof(cur.text), fmt, ap);
	va_end(ap);
	plain(cur.text);
	report("begin", true);
}

void sg_progress_update(const char *fmt, ...)
{
	char text[sizeof(cur.text)];
	va_list ap;

	if (!cur.name)
		return;
	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	plain(text);
	/* A log line per change, not per poll; the terminal line always
	 * moves on (its clock advances). */
	if (strcmp(text, cur.text) == 0 && mode() != MODE_LINE)
		return;
	memcpy(cur.text, text, sizeof(text));
	report("update", true);
}

void sg_progress_end(sg_err rc)
{
	if (!cur.name)
		return;
	report("end", rc == SG_OK);
	cur.name = NULL;
}
