/*
 * cloud.c - the cloud adapters' shared pieces (cloud.h).
 */
#define _GNU_SOURCE /* asprintf, getentropy */
#include "adapters/cloud.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/cancel.h"
#include "base/hex.h"
#include "base/utf8.h"
#include "core/digest.h"
#include "adapters/install.h"


sg_err sg_cloud_urlenc(struct sg_buf *b, const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	sg_err rc = SG_OK;

	for (const unsigned char *p = (const unsigned char *)s; !rc && *p; p++) {
		if ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
		    (*p >= '0' && *p <= '9') || strchr("-._~", *p))
			rc = sg_buf_addc(b, (char)*p);
		else
			rc = sg_buf_addf(b, "%%%c%c", hex[*p >> 4], hex[*p & 15]);
	}
	return rc;
}

sg_err sg_cloud_lost(const struct sg_env *env, const char *name, struct sg_errinfo *err)
{
	return sg_err_set(err, SG_E_WORKSPACE_LOST,
			  "persistent sandbox %s of identity \"%.40s\" is gone (removed outside sandgate?): its workspace is lost; `sandgate envs gc` forgets it, then a session starts empty",
			  name, env->identity);
}

void sg_cloud_scrub(char *s, const char *secret)
{
	static const char mark[] = "[redacted]";
	size_t n = secret ? strlen(secret) : 0, m = sizeof(mark) - 1;
	char *p = s;

	if (!s || n == 0)
		return;
	/* The search resumes after each replacement, so it always ends. */
	while ((p = strstr(p, secret))) {
		if (m <= n) {
			memcpy(p, mark, m);
			memmove(p + m, p + n, strlen(p + n) + 1);
			p += m;
		} else {
			memset(p, '*', n);
			p += n;
		}
	}
}

/*
 * The order is the first command's: while a set-up runs beside the first
 * commands (adapters/remote.h), they wait for sg-helper, so everything
 * that can follow the install does, and only what a command needs comes
 * before it (root, the directories, the program whole and checked).
 * Every process counts in a set-up request (docs/benchmarks.md, D6):
 * mkdir runs once and only when a directory is missing, chmod only for a
 * directory sandgate did not make private itself (after the install),
 * find only when run/ holds something, id only for an error.
 */
const char sg_cloud_setup_sh[] =
	"exec 2>/dev/null\n"
	/* Commands sent beside this script wait for sg-helper, or for this. */
	"[ -n \"${SG_HFAIL:-}\" ] && trap '[ -x \"$b/sg-helper-$SG_SHA\" ] || : >\"$SG_HFAIL\"' EXIT\n"
	"h=$HOME r=$SG_ROOT b=\n"
	"case $h in /*) ;; *) printf 'error=the sandbox user has no absolute HOME\\n'; exit 0 ;; esac\n"
	"b=$h/.sandgate\n"
	"case $b/ in \"${r%/}\"/*) b=/tmp/.sandgate-$(id -u) ;; esac\n"
	"[ -n \"${SG_BASE:-}\" ] && b=$SG_BASE\n"
	"case $b/ in \"${r%/}\"/*) printf 'error=root %s leaves no place outside it "
	"for the control directory\\n' \"$r\"; exit 0 ;; esac\n"
	"printf 'home=%s\\nbase=%s\\n' \"$h\" \"$b\"\n"
	/*
	 * Root and sandgate's directories in one mkdir, when any is missing:
	 * under the sandbox's own umask (root as the user would make it),
	 * so sandgate's are made private after the install, with an older
	 * one's or those an upload's extraction made (whatever modes it kept).
	 */
	"o=\n"
	"[ -d \"$b\" ] && o=1\n"
	"case ${SG_UP:-} in \"$b\"/*) o=1 ;; esac\n"
	"if ! { [ -d \"$r\" ] && [ -d \"$b/run\" ] && [ -d \"$b/ctl/proc\" ] && "
	"[ -d \"$b/ctl/home\" ] && [ -d \"$b/ctl/tmp\" ]; }; then\n"
	"  o=1\n"
	"  mkdir -p -- \"$r\" \"$b/ctl/proc\" \"$b/ctl/home\" \"$b/ctl/tmp\" \"$b/run\"\n"
	"  [ -d \"$r\" ] || { sudo -n mkdir -p -- \"$r\" && "
	"sudo -n chown \"$(id -u):$(id -g)\" -- \"$r\"; }\n"
	"  { [ -d \"$b/run\" ] && [ -d \"$b/ctl/proc\" ] && [ -d \"$b/ctl/home\" ] && "
	"[ -d \"$b/ctl/tmp\" ]; } || { printf 'error=cannot create %s\\n' \"$b\"; exit 0; }\n"
	"fi\n"
	"umask 077\n"
	/*
	 * An upload sent beside this script (vercel sends fs/write and this
	 * command at once) has landed when SG_UPW, the archive's last entry,
	 * exists: wait for it, at most SG_UPWAIT ms (SG_CLOUD_WAIT_SH).
	 */
	"if [ -n \"${SG_UPW:-}\" ]; then\n"
	SG_CLOUD_WAIT_SH("[ -e \"$SG_UPW\" ]", "[ \"$w\" -ge \"${SG_UPWAIT:-0}\" ]",
			 "printf 'install_error=sg-helper did not arrive within %s ms\\n' \"$w\"; SG_UP=; break")
	"fi\n"
	SG_INSTALL_ENSURE_SH
	/* After the install, which no command waits for any longer. */
	"if [ -n \"$o\" ]; then chmod 700 -- \"$b\" \"$b/ctl\" \"$b/run\" \"$b/ctl/proc\" "
	"\"$b/ctl/home\" \"$b/ctl/tmp\" || { printf 'error=cannot create %s\\n' \"$b\"; exit 0; }; fi\n"
	/* A marker in sandgate's own directory stays: one process less. */
	"case ${SG_UPW:-} in \"\"|\"$b\"/*) ;; *) rm -f -- \"$SG_UPW\" ;; esac\n"
	"for e in \"$b\"/run/* \"$b\"/run/.[!.]* \"$b\"/run/..?*; do\n"
	"  if [ -e \"$e\" ] || [ -L \"$e\" ]; then\n"
	"    find \"$b/run\" -mindepth 1 -maxdepth 1 -mmin +\"$SG_SWEEP\" -exec rm -rf -- {} +\n"
	"    break\n"
	"  fi\n"
	"done\n"
	"test -d \"$r\" && printf 'root=1\\n'\n"
	"test -w \"$r\" && printf 'rootw=1\\n'\n"
	"{ test -d \"$r\" && test -w \"$r\"; } || printf 'user=%s\\n' \"$(id -un)\"\n"
	"for t in sha256sum cut find; do\n"
	"  command -v \"$t\" >/dev/null || printf 'missing=%s\\n' \"$t\"\n"
	"done\n"
	"printf 'ok=1\\n'\n"
	SG_INSTALL_PROBE_SH;

json_t *sg_cloud_setup_vars(const char *root, const char *sha, int sweep_min, const char *up,
			    const char *mark, int64_t wait_ms)
{
	char sweep[16], wait[24];
	json_t *vars;

	snprintf(sweep, sizeof(sweep), "%d", sweep_min);
	snprintf(wait, sizeof(wait), "%lld", (long long)wait_ms);
	vars = json_pack("{s:s, s:s, s:s, s:s}", "SG_ROOT", root, "SG_SHA", sha, "SG_SWEEP", sweep,
			 "SG_PROBE", "1");
	if (vars && up && mark &&
	    (json_object_set_new(vars, "SG_UP", json_string(up)) ||
	     json_object_set_new(vars, "SG_UPW", json_string(mark)) ||
	     json_object_set_new(vars, "SG_UPWAIT", json_string(wait)))) {
		json_decref(vars);
		vars = NULL;
	}
	return vars;
}

/* Every "missing=<tool>" of the set-up reply, as "a, b". */
static void sg_cloud_missing(const char *reply, char *out, size_t n)
{
	size_t used = 0;

	out[0] = '\0';
	for (const char *p = reply; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
		if (strncmp(p, "missing=", 8) == 0) {
			const char *e = strchr(p, '\n');
			int k = snprintf(out + used, n - used, "%s%.*s", used ? ", " : "",
					 (int)(e ? e - p - 8 : (long)strlen(p + 8)), p + 8);

			if (k < 0 || (size_t)k >= n - used)
				break;
			used += (size_t)k;
		}
	}
}

sg_err sg_cloud_setup_read(struct sg_env *env, char *reply, const char *sha, bool uploaded,
			   const char *backend, struct sg_cloud_setup *out,
			   struct sg_errinfo *err)
{
	char missing[200], *e = NULL, *user = NULL, *probe;
	sg_err rc = SG_OK;

	memset(out, 0, sizeof(*out));
	/* The probe's reply, when it ran, is the rest after "probe<<". */
	if ((probe = strstr(reply, "\nprobe<<\n")) || strncmp(reply, "probe<<\n", 8) == 0) {
		char *text = probe ? probe + 9 : reply + 8;

		free(env->probe);
		if (!(env->probe = strdup(text))) {
			rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
			goto out;
		}
		*(probe ? probe + 1 : reply) = '\0';
	}
	if ((e = sg_cloud_kv(reply, "error"))) {
		rc = sg_err_set(err, strstr(e, "no place") ? SG_E_INVALID_ARGUMENT : SG_E_PROVIDER,
				"preparing the sandbox failed: %s", e);
		goto out;
	}
	if (!sg_cloud_flag(reply, "ok") || !(out->base_dir = sg_cloud_kv(reply, "base"))) {
		rc = sg_err_set(err, SG_E_PROVIDER,
				"preparing the sandbox failed: no reply from its shell");
		goto out;
	}
	sg_cloud_missing(reply, missing, sizeof(missing));
	if (missing[0]) {
		rc = sg_err_set(err, SG_E_UNSUPPORTED,
				"the sandbox's image lacks %s, which the %s backend needs (coreutils, util-linux)",
				missing, backend);
		goto out;
	}
	user = sg_cloud_kv(reply, "user");
	if (!sg_cloud_flag(reply, "root")) {
		rc = sg_err_set(err, SG_E_PERMISSION,
				"root %s cannot be created in the sandbox (user %s, and sudo -n did not help)",
				env->root, user ? user : "?");
		goto out;
	}
	if (!sg_cloud_flag(reply, "rootw")) {
		rc = sg_err_set(err, SG_E_PERMISSION,
				"root %s exists in the sandbox but user %s cannot write to it",
				env->root, user ? user : "?");
		goto out;
	}
	if (asprintf(&env->ctl_dir, "%s/ctl", out->base_dir) < 0) {
		env->ctl_dir = NULL;
		rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
		goto out;
	}
	if (asprintf(&env->helper, "%s/sg-helper-%s", out->base_dir, sha) < 0) {
		env->helper = NULL;
		rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
		goto out;
	}
	/* A sandbox is a machine of its own: its /tmp is nobody else's. */
	env->own_tmp = true;
	if (sg_cloud_flag(reply, "helper")) {
		out->helper = true;
	} else if (uploaded) {
		rc = sg_install_check_reply(reply, "the sandbox", err);
		out->helper = rc == SG_OK;
	}
out:
	free(e);
	free(user);
	return rc;
}

bool sg_cloud_stdin_vars(const void *data, size_t len, size_t each, size_t total, json_t *vars,
			 struct sg_buf *names)
{
	const char *in = data;

	if (!data || len == 0)
		return true;
	if (len > total || memchr(data, 0, len) || !sg_utf8_valid(data, len))
		return false;
	for (size_t at = 0, part = 0; at < len; part++) {
		size_t n = sg_utf8_clip(in + at, len - at, each);
		char name[32];

		snprintf(name, sizeof(name), "SG_IN%zu", part);
		if ((names->len && sg_buf_addc(names, ',')) || sg_buf_adds(names, name) ||
		    /* checked above: UTF-8, no NUL */
		    json_object_set_new(vars, name, json_stringn_nocheck(in + at, n)))
			return false;
		at += n;
	}
	return true;
}

sg_err sg_rest_init(struct sg_rest *r, const char *url, const char *secret,
		    const char *const *headers, struct sg_errinfo *err)
{
	size_t n;
	sg_err rc = SG_OK;

	memset(r, 0, sizeof(*r));
	r->api = strdup(url);
	r->secret = strdup(secret);
	if (!r->api || !r->secret)
		rc = SG_E_INTERNAL;
	n = r->api ? strlen(r->api) : 0;
	while (n > 0 && r->api[n - 1] == '/')
		r->api[--n] = '\0';
	if (!rc)
		rc = sg_strv_addf(&r->headers, "Authorization: Bearer %s", secret);
	if (!rc)
		rc = sg_strv_addv(&r->headers, headers);
	if (rc) {
		sg_rest_release(r);
		return sg_err_set(err, SG_E_INTERNAL, "out of memory");
	}
	return SG_OK;
}

void sg_rest_release(struct sg_rest *r)
{
	if (r->secret) {
		/* Not a guarantee against every copy, but no stale secret here. */
		memset(r->secret, 0, strlen(r->secret));
		free(r->secret);
	}
	for (size_t i = 0; i < r->headers.n; i++)
		memset(r->headers.v[i], 0, strlen(r->headers.v[i]));
	free(r->api);
	sg_strv_release(&r->headers);
	memset(r, 0, sizeof(*r));
}

sg_err sg_rest_failed(sg_err rc, const char *provider, const char *what, const char *fallback,
		      const struct sg_errinfo *inner, struct sg_errinfo *err)
{
	if (inner)
		return sg_err_set(err, rc, "%s: %s", what ? what : fallback, inner->msg);
	if (rc == SG_E_TOO_LARGE)
		return sg_err_set(err, rc, "the request to %s is too large", provider);
	return sg_err_set(err, SG_E_INTERNAL, "out of memory");
}
