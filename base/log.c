#include "base/log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static atomic_int level = SG_LOG_WARN;
static const char *const names[] = { "error", "warn", "info", "debug" };

void sg_log_set_level(enum sg_log_level l)
{
	atomic_store(&level, (int)l);
}

_Bool sg_log_parse_level(const char *s, enum sg_log_level *out)
{
	for (int i = 0; i < 4; i++) {
		if (strcmp(s, names[i]) == 0) {
			*out = (enum sg_log_level)i;
			return 1;
		}
	}
	return 0;
}

void sg_log(enum sg_log_level l, const char *func, const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	int n;

	if ((int)l > atomic_load(&level))
		return;
	n = snprintf(line, sizeof(line), "sandgate: %s: %s: ", names[l], func);
	va_start(ap, fmt);
	n += vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
	va_end(ap);
	if (n >= (int)sizeof(line) - 1)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	/* A failed diagnostic has nowhere else to go. */
	if (write(2, line, (size_t)n) < 0)
		return;
}
