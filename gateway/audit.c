/*
 * audit.c - the audit log (audit.h).
 */
#include "gateway/audit.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gateway/session.h"

struct sg_audit {
	FILE *f;
	pthread_mutex_t lock;
};

sg_err sg_audit_open(const char *path, struct sg_audit **out, struct sg_errinfo *err)
{
	struct sg_audit *a = calloc(1, sizeof(*a));

	*out = NULL;
	if (!a)
		return sg_err_set(err, SG_E_INTERNAL, "out of memory");
	a->f = fopen(path, "ae");
	if (!a->f) {
		int e = errno;

		free(a);
		return sg_err_set(err, SG_E_INVALID_ARGUMENT,
				  "cannot open the audit log %s: %s", path, strerror(e));
	}
	pthread_mutex_init(&a->lock, NULL);
	*out = a;
	return SG_OK;
}

void sg_audit_write(struct sg_audit *a, const struct sg_op *op, sg_err rc)
{
	char ts[32];
	time_t now = time(NULL);
	struct tm tm;
	json_t *line;
	char *text;

	if (!a)
		return;
	gmtime_r(&now, &tm);
	strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%SZ", &tm);
	line = json_pack("{s:s, s:s, s:s?, s:s, s:I}", "ts", ts, "method",
			 op->method, "tool", op->tool, "outcome",
			 rc ? sg_err_word(rc) : op->tool_failed ? "is_error" : "ok",
			 "duration_ms", (json_int_t)((sg_now_ns() - op->start_ns) / 1000000));
	text = json_dumps(line, JSON_COMPACT);
	json_decref(line);
	if (!text)
		return;
	pthread_mutex_lock(&a->lock);
	fprintf(a->f, "%s\n", text);
	fflush(a->f);
	pthread_mutex_unlock(&a->lock);
	free(text);
}

void sg_audit_close(struct sg_audit *a)
{
	if (!a)
		return;
	fclose(a->f);
	pthread_mutex_destroy(&a->lock);
	free(a);
}
