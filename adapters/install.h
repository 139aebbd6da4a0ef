/*
 * install.h - putting sg-helper into an environment, once per version: the
 * one installer every remote adapter uses (ssh and daytona today).
 *
 * The program is kept in the environment as <dir>/sg-helper-<sha256>, so
 * the name is the version and the checksum at once: a resumed environment
 * (or another environment of the same login, on ssh) finds it there and
 * nothing is sent again.  A copy is only ever renamed into place after its
 * sha256 was computed *in the environment* and matched; a partial or
 * corrupted transfer is removed, never run.
 *
 * How the bytes travel is the adapter's: on its command's stdin (one
 * request: ssh), or through its native file transfer first and then one
 * command that verifies and renames (daytona; and that command can be
 * folded into the adapter's own set-up request, see SG_INSTALL_SH).
 *
 * Invariants: the shell texts below take their parameters only from the
 * shell variables named in their comments, never spliced into the text;
 * they print key=value lines and nothing else on stdout.
 */
#ifndef SG_INSTALL_H
#define SG_INSTALL_H

#include <stdint.h>

#include "adapters/adapter.h"

/*
 * Shell text: the sha256 line of file f ("<hex>  f", or "<hex> *f"), for
 * "${v%% *}" to cut to the digest without another process.  Needs
 * sha256sum, shasum or openssl in the environment.  Where sha256sum is
 * found, the command substitution's subshell becomes it (exec): one
 * process, not two (a set-up request counts them).
 */
#define SG_INSTALL_SUM_SH(f)                                                  \
	"$(command -v sha256sum >/dev/null && exec sha256sum \"" f "\" 2>/dev/null; " \
	"shasum -a 256 \"" f "\" 2>/dev/null || "                                \
	"openssl dgst -sha256 -r \"" f "\" 2>/dev/null)"

/*
 * Shell text: with $d (the directory) and $s (the sha256), prints
 * "helper=1" when $d/sg-helper-$s is there, executable, with that
 * checksum.  Sets k.
 */
#define SG_INSTALL_CHECK_SH                                                   \
	"if [ -f \"$d/sg-helper-$s\" ] && [ -x \"$d/sg-helper-$s\" ]; then "       \
	"k=" SG_INSTALL_SUM_SH("$d/sg-helper-$s") "; "                          \
	"[ \"${k%% *}\" = \"$s\" ] && printf 'helper=1\\n'; fi\n"

/*
 * Shell text: with $d, $s and $u (the uploaded copy's path, or "-" when
 * the program comes on stdin), puts the program at $d/sg-helper-$s after
 * checking its sha256 there; prints "installed=1" and sets i=1, or prints
 * "install_error=" and a sentence.  The upload is removed either way.
 * Sets t and c.  Every step that needs no process of its own has none
 * (a set-up request counts them, docs/benchmarks.md): an upload that
 * arrives executable (vercel's is packed 0700) is not chmod'ed again, and
 * one that arrived inside $d (a set-up whose directory was chosen before
 * the upload left) is checked where it lies: $d is private, so nothing
 * can change it between the check and the rename.  Elsewhere (/tmp) it is
 * first moved into $d, and the check is made on that copy.
 */
#define SG_INSTALL_SH                                                         \
	"[ -d \"$d\" ] || ( umask 077; mkdir -p \"$d\" ) 2>/dev/null\n"          \
	"t=$d/.sg-helper-$s.$$\n"                                               \
	"case $u in -) cat >\"$t\" ;; \"$d\"/*) t=$u; [ -f \"$t\" ] ;; *) mv -f -- \"$u\" \"$t\" ;; esac " \
	"2>/dev/null || { rm -f -- \"$t\"; printf 'install_error=cannot write %s\\n' \"$t\"; }\n" \
	"if [ -f \"$t\" ]; then\n"                                              \
	"  c=" SG_INSTALL_SUM_SH("$t") "; c=${c%% *}\n"                       \
	"  if [ \"$c\" != \"$s\" ]; then rm -f -- \"$t\"; printf 'install_error=the "   \
	"copy sent has the sha256 \"%s\", not %s (the environment needs sha256sum, "  \
	"shasum or openssl)\\n' \"$c\" \"$s\"\n"                                \
	"  elif { [ -x \"$t\" ] || chmod 700 \"$t\"; } && mv -f -- \"$t\" \"$d/sg-helper-$s\"; then " \
	"i=1; printf 'installed=1\\n'\n"                                         \
	"  else rm -f -- \"$t\"; printf 'install_error=cannot install %s\\n' \"$d/sg-helper-$s\"; fi\n" \
	"fi\n"

/*
 * Shell text in an adapter's set-up script, as soon as sandgate's
 * directory $b (holding ctl/home and ctl/tmp) exists: with the variables
 * SG_SHA and SG_UP (an uploaded copy, "-" for the program on stdin, or
 * unset), prints "helper=1" when $b/sg-helper-<sha> is there, else
 * installs it from SG_UP (SG_INSTALL_SH's lines).  Sets d, s, u, hc and i
 * for SG_INSTALL_PROBE_SH.
 */
#define SG_INSTALL_ENSURE_SH                                                  \
	"d=$b s=$SG_SHA u=${SG_UP:-} hc= i=\n"                                   \
	"if [ -f \"$d/sg-helper-$s\" ]; then hc=$(" SG_INSTALL_CHECK_SH "); fi\n" \
	"[ -n \"$hc\" ] && printf '%s\\n' \"$hc\"\n"                               \
	"if [ -z \"$hc\" ] && [ -n \"$u\" ]; then\n" SG_INSTALL_SH "fi\n"

/*
 * Shell text ending an adapter's set-up script, after SG_INSTALL_ENSURE_SH:
 * with $r (binding.root) and SG_PROBE set and sg-helper in place, a line
 * "probe<<" followed by `sg-helper probe`'s reply, run in $r with the
 * minimal environment the gateway gives commands.
 */
#define SG_INSTALL_PROBE_SH                                                   \
	"if [ -n \"$hc$i\" ] && [ -n \"${SG_PROBE:-}\" ] && cd -- \"$r\"; then\n"  \
	"  printf 'probe<<\\n'\n"                                                  \
	"  exec env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin " \
	"HOME=\"$b/ctl/home\" TMPDIR=\"$b/ctl/tmp\" LANG=C.UTF-8 \"$d/sg-helper-$s\" probe\n" \
	"fi\n"

/* The program on this host: its bytes' source and its checksum. */
struct sg_helper_bin {
	int fd;        /* open, read-only; -1 when closed */
	int64_t size;
	char sha[65];  /* lower-case hex */
	void *data;    /* all of it, read by sg_helper_bin_load (malloc) */
};

/* Open path and compute its sha256 (streamed).  Closed with _close. */
sg_err sg_helper_bin_open(const char *path, struct sg_helper_bin *b, struct sg_errinfo *err)
	SG_MUST_CHECK;
/* Read the whole program into b->data, for an adapter that sends it on stdin. */
sg_err sg_helper_bin_load(struct sg_helper_bin *b, struct sg_errinfo *err) SG_MUST_CHECK;
void sg_helper_bin_close(struct sg_helper_bin *b);

/* What an install cost, for the benchmarks (facts.helper_install). */
struct sg_install_cost {
	int64_t bytes;    /* of the program sent */
	int requests;     /* provider requests the install added */
	int64_t ms;
};

/* How one adapter carries an install (all callbacks get ctx). */
struct sg_install {
	void *ctx;
	const char *dir;   /* where the program lives in the environment */
	const char *nonce; /* makes the upload's temporary name unique */
	/*
	 * Run script in the environment with the shell variables d, s and u
	 * set to dir, the sha256 and upload ("-": send in, inlen on stdin);
	 * its stdout into *reply (new).  Mandatory.
	 */
	sg_err (*run)(void *ctx, const char *script, const char *dir, const char *sha,
		      const char *upload, const void *in, size_t inlen, char **reply,
		      struct sg_cancel *cancel, struct sg_errinfo *err);
	/* Optional native transfer: the program's bytes from fd to path. */
	sg_err (*upload)(void *ctx, const char *path, int fd, struct sg_cancel *cancel,
			 struct sg_errinfo *err);
};

/*
 * The upload's temporary path for in and b (new), for an adapter that
 * uploads first and folds the install into a request of its own.
 */
char *sg_install_upload_path(const struct sg_install *in, const struct sg_helper_bin *b);

/*
 * Install b at in->dir/sg-helper-<sha>: with in->upload, the native
 * transfer and then one run of SG_INSTALL_SH; without, one run with the
 * program on stdin.  *cost receives what it took.
 */
sg_err sg_install_helper(const struct sg_install *in, struct sg_helper_bin *b,
			 struct sg_install_cost *cost, struct sg_cancel *cancel,
			 struct sg_errinfo *err) SG_MUST_CHECK;

/*
 * sg-helper sent beside the set-up command that installs it, for a
 * provider whose upload and command are two requests (daytona, vercel):
 * both go out at once, each on a thread of its own, so they cost one round
 * trip, not two.  The upload's last file is a marker that the set-up waits
 * for (bounded: SG_UPW and SG_UPWAIT, adapters/cloud.h) before it installs
 * the program sent before it.
 */
struct sg_install_beside {
	void *ctx;
	/* Send the program, then the marker.  stop fires when it is not needed. */
	sg_err (*upload)(void *ctx, struct sg_cancel *stop, struct sg_errinfo *err);
	/* Run the set-up; *reply (new) is what it printed. */
	sg_err (*setup)(void *ctx, char **reply, struct sg_cancel *stop,
			struct sg_errinfo *err);
};

/*
 * Where a copy sent beside the set-up goes: *up (new) is
 * sg_install_upload_path's, *mark (new) the marker after it, "<up>.ok".
 */
sg_err sg_install_beside_paths(const struct sg_install *in, const struct sg_helper_bin *b,
			       char **up, char **mark, struct sg_errinfo *err) SG_MUST_CHECK;

/*
 * Run b's upload and set-up side by side; *reply (new) is the set-up's
 * reply, *upload_ms what the upload took.  The calling thread only
 * coordinates: it passes cancel on to both, stops the set-up when the
 * upload failed (nothing else would end the script's wait early) and the
 * upload when the set-up ended without sg-helper in place.  An error is
 * the cause: the upload's when the set-up was stopped for it or ended
 * without the program, else the set-up's; a reply that says why the
 * install failed is returned for the caller to read.
 */
sg_err sg_install_run_beside(const struct sg_install_beside *b, char **reply,
			     int64_t *upload_ms, struct sg_cancel *cancel,
			     struct sg_errinfo *err) SG_MUST_CHECK;

/*
 * Read an install's reply (from SG_INSTALL_SH, alone or inside an
 * adapter's script): SG_OK for installed=1, SG_E_PROVIDER with the
 * sentence otherwise; where names the environment in it.
 */
sg_err sg_install_check_reply(const char *reply, const char *where, struct sg_errinfo *err)
	SG_MUST_CHECK;

#endif
