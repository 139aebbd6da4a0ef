/*
 * err.h - sandgate's error codes and the protocol's error words.
 *
 * Invariants: SG_OK is 0 and every error is a small positive code generated
 * from SG_ERR_MAP, so the enum, the wire word and the default sentence can
 * never drift apart.  The detail sentence of a failure lives in a struct
 * sg_errinfo owned by the failing operation, never in global state, and
 * never contains a credential.
 */
#ifndef SG_ERR_H
#define SG_ERR_H

#include <stdarg.h>
#include <stddef.h>

#define SG_MUST_CHECK __attribute__((warn_unused_result))
#define SG_PRINTF(f, a) __attribute__((format(printf, f, a)))

/* X(enum suffix, protocol word) in the order of docs/protocol.md section 3. */
#define SG_ERR_MAP(X)                                                       \
	X(NOT_INITIALIZED, "not_initialized")                               \
	X(BAD_TOKEN, "bad_token")                                           \
	X(BINDING_CONFLICT, "binding_conflict")                             \
	X(INIT_FAILED, "init_failed")                                       \
	X(INVALID_REQUEST, "invalid_request")                               \
	X(UNKNOWN_METHOD, "unknown_method")                                 \
	X(INVALID_ARGUMENT, "invalid_argument")                             \
	X(NOT_FOUND, "not_found")                                           \
	X(PERMISSION, "permission_denied")                                  \
	X(PATH_ESCAPE, "path_escape")                                       \
	X(TOO_LARGE, "too_large")                                           \
	X(CANCELLED, "cancelled")                                           \
	X(TIMEOUT, "timeout")                                               \
	X(UNSUPPORTED, "unsupported")                                       \
	X(UNAVAILABLE, "unavailable")                                       \
	X(WORKSPACE_LOST, "workspace_lost")                                 \
	X(PROVIDER, "provider_error")                                       \
	X(INTERNAL, "internal")

typedef enum sg_err {
	SG_OK = 0,
#define SG_ERR_ENUM(name, word) SG_E_##name,
	SG_ERR_MAP(SG_ERR_ENUM)
#undef SG_ERR_ENUM
	SG_E__COUNT
} sg_err;

/* The failure of one operation: a code and one sentence. */
struct sg_errinfo {
	sg_err code;
	char msg[256]; /* SG_ERR_MSG; "" when none was set */
};

/* The protocol word for a code ("path_escape"); "internal" for a bad code. */
const char *sg_err_word(sg_err code);

/* The code for a protocol word, or SG_E_INTERNAL when the word is unknown. */
sg_err sg_err_from_word(const char *word);

/*
 * Record a failure on e and return code, the one passed, always, so callers
 * can write `return sg_err_set(e, SG_E_NOT_FOUND, "%s does not exist",
 * path);` and get what they wrote.  The first failure wins on e: a code and
 * sentence already recorded are never overwritten, so the sentence always
 * names the innermost cause, and e->code may then differ from the value
 * returned.  What is sent to the host is e's (sg_err_format).  e may be
 * NULL.
 */
sg_err sg_err_set(struct sg_errinfo *e, sg_err code, const char *fmt, ...)
	SG_PRINTF(3, 4);
sg_err sg_err_vset(struct sg_errinfo *e, sg_err code, const char *fmt,
		   va_list ap) SG_PRINTF(3, 0);

/* Forget a recorded failure (e.g. after a retry succeeded). */
void sg_err_clear(struct sg_errinfo *e);

/*
 * Format the protocol's error string "<word>: <sentence>" into out (size n,
 * always terminated).  A missing sentence becomes a generic one for the code.
 */
void sg_err_format(const struct sg_errinfo *e, char *out, size_t n);

#endif
