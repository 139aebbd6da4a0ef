/*
 * log.h - diagnostics on stderr.
 *
 * Invariants: logs go to fd 2 only (fd 1 carries the protocol); one line
 * per call, written with a single write(2) so lines from several threads
 * never interleave; never an argument's contents or a credential.
 */
#ifndef SG_LOG_H
#define SG_LOG_H

#include "base/err.h"

enum sg_log_level { SG_LOG_ERROR, SG_LOG_WARN, SG_LOG_INFO, SG_LOG_DEBUG };

/* Set the level; parse "error|warn|info|debug" (false when unknown). */
void sg_log_set_level(enum sg_log_level level);
_Bool sg_log_parse_level(const char *s, enum sg_log_level *out);

void sg_log(enum sg_log_level level, const char *func, const char *fmt, ...)
	SG_PRINTF(3, 4);

#define sg_log_err(...) sg_log(SG_LOG_ERROR, __func__, __VA_ARGS__)
#define sg_log_warn(...) sg_log(SG_LOG_WARN, __func__, __VA_ARGS__)
#define sg_log_info(...) sg_log(SG_LOG_INFO, __func__, __VA_ARGS__)
#define sg_log_debug(...) sg_log(SG_LOG_DEBUG, __func__, __VA_ARGS__)

#endif
