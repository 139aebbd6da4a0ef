/*
 * cloud.h - what the cloud adapters (daytona, vercel) share beyond HTTP
 * and cloudkit.h (names, tags, key=value replies): the part of a REST
 * client they all hold (URL, credential, headers) and its failure
 * sentences, URL encoding, scrubbing a secret out
 * of a provider's text, the one set-up script that prepares the inside of
 * a sandbox (root, sandgate's directories, sg-helper, the probe) and the
 * reading of its reply, and stdin carried in a command's variables.
 *
 * Invariants:
 *  - The set-up script takes its parameters only from variables (SG_ROOT,
 *    SG_SHA, SG_SWEEP, SG_UP, SG_PROBE), never spliced into its text, and
 *    prints key=value lines, then, after "probe<<", the probe's reply.
 *  - Strings returned as "new" are malloc'd and the caller frees them;
 *    nothing here keeps state of its own (a struct sg_rest is its
 *    caller's), so every function is thread-safe.
 */
#ifndef SG_CLOUD_H
#define SG_CLOUD_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "adapters/adapter.h"
#include "adapters/cloudkit.h"
#include "base/buf.h"
#include "base/strv.h"

/*
 * What a cloud provider's REST client holds the same in every adapter:
 * the API's base URL, the credential (kept only to scrub it out of
 * sentences) and the headers every call sends.
 */
struct sg_rest {
	char *api;              /* the base URL, without a trailing slash */
	char *secret;           /* the credential */
	struct sg_strv headers; /* Authorization: Bearer <secret>, then the provider's */
};

/*
 * Fill r (zeroed first) with url, secret and the provider's headers
 * (NULL-terminated).  SG_E_INTERNAL when out of memory, r released.
 */
sg_err sg_rest_init(struct sg_rest *r, const char *url, const char *secret,
		    const char *const *headers, struct sg_errinfo *err) SG_MUST_CHECK;

/* Wipe the secret and the headers, and free them; r zeroed. */
void sg_rest_release(struct sg_rest *r);

/*
 * The sentence for a call that failed with rc: one that could not be
 * built (inner NULL: too large for provider, or out of memory), or that
 * failed on the way (inner names the method and host; what says what it
 * was for, or the fallback).  Returns the code set.
 */
sg_err sg_rest_failed(sg_err rc, const char *provider, const char *what, const char *fallback,
		      const struct sg_errinfo *inner, struct sg_errinfo *err);

/* Append s to b percent-encoded for a URL's path or query. */
sg_err sg_cloud_urlenc(struct sg_buf *b, const char *s) SG_MUST_CHECK;

/* Remove every copy of secret from s, in place (NULL or "" secret: none). */
void sg_cloud_scrub(char *s, const char *secret);

/*
 * The persistent sandbox name that sessions of env's identity used
 * (env->persisted) is gone at the provider: SG_E_WORKSPACE_LOST, saying
 * how to start over, never a fresh empty workspace in its place.
 */
sg_err sg_cloud_lost(const struct sg_env *env, const char *name, struct sg_errinfo *err);

/*
 * The set-up script (run by sh with its stderr silenced by itself):
 * SG_ROOT binding.root, SG_SHA sg-helper's sha256, SG_SWEEP minutes after
 * which run/ leftovers go; SG_UP, when set, an uploaded copy of sg-helper
 * to install (install.h); SG_UPW, when set, a file that appears once that
 * copy is whole (an upload sent beside the script), waited for at most
 * SG_UPWAIT ms, after which the install fails saying so (install_error);
 * SG_PROBE, when set, runs `sg-helper probe` once
 * the helper is in place and prints its reply after a line "probe<<";
 * SG_HFAIL, when set, a file the script creates when it ends without
 * sg-helper in place (commands sent beside it wait for one or the other).
 * sandgate's files go to SG_BASE when set, else to $HOME/.sandgate, or
 * /tmp/.sandgate-<uid> when root would contain that: ctl/ (proc/, home/,
 * tmp/) and run/.  sg-helper is in place as soon as root and these
 * directories are (commands sent beside the script wait for nothing
 * else); the checks that need no program follow it.
 */
extern const char sg_cloud_setup_sh[];

/*
 * Shell text: poll until the test ready holds, every 4 ms for the first
 * 200 ms (what a first command waits for, sg-helper's install, takes a
 * few processes' time: the latency is the poll's), every 10 ms to the
 * first second and every tenth of a second after, counting the ms waited
 * in $w; each time the test give_up holds first, run on_give_up (which
 * leaves the loop: break or exit).  A sleep that cannot take a fraction
 * counts a whole second, so that the count stays true.
 */
#define SG_CLOUD_WAIT_SH(ready, give_up, on_give_up)                                  \
	"w=0\n"                                                                       \
	"until " ready "; do\n"                                                       \
	"  if " give_up "; then " on_give_up "; fi\n"                                 \
	"  if [ \"$w\" -lt 200 ]; then p=0.004 q=4; elif [ \"$w\" -lt 1000 ]; then p=0.01 q=10; " \
	"else p=0.1 q=100; fi\n"                                                      \
	"  if sleep \"$p\"; then w=$((w+q)); else sleep 1; w=$((w+1000)); fi\n"      \
	"done\n"

/*
 * The set-up script's variables (new; NULL when out of memory): root, the
 * sha256, the sweep in minutes, SG_PROBE, and, for a program uploaded
 * beside the set-up (up and mark not NULL), SG_UP, SG_UPW and SG_UPWAIT.
 */
json_t *sg_cloud_setup_vars(const char *root, const char *sha, int sweep_min, const char *up,
			    const char *mark, int64_t wait_ms);

/* What the set-up reply says (sg_cloud_setup_read). */
struct sg_cloud_setup {
	char *base_dir; /* sandgate's directory in the sandbox (new) */
	bool helper;    /* sg-helper was there, or the upload was installed */
};

/*
 * Read the set-up script's reply (modified: the probe is cut off it) for
 * env: env->probe (when the probe ran), env->ctl_dir, env->helper (at
 * base_dir/sg-helper-<sha>) and env->own_tmp are set; out->helper says
 * whether sg-helper is in place (a reply to a set-up given SG_UP is
 * checked as the installer's, install.h).  backend names the adapter in
 * sentences.  When !out->helper the caller installs it (install.h) and
 * clears env->probe, which then describes nothing.
 */
sg_err sg_cloud_setup_read(struct sg_env *env, char *reply, const char *sha, bool uploaded,
			   const char *backend, struct sg_cloud_setup *out,
			   struct sg_errinfo *err) SG_MUST_CHECK;

/*
 * Put x's stdin into vars as SG_IN0, SG_IN1... of at most each bytes,
 * cut between characters, and their names, comma-separated, into names.
 * False (vars and names untouched beyond what was added) when the stdin
 * cannot travel that way: more than total bytes, a NUL, or not UTF-8;
 * the caller then uploads it.  True also for an empty stdin (no names).
 */
bool sg_cloud_stdin_vars(const void *data, size_t len, size_t each, size_t total, json_t *vars,
			 struct sg_buf *names);

#endif
