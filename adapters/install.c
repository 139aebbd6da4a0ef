/*
 * install.c - sg-helper into an environment, once per version (install.h).
 */
#define _GNU_SOURCE /* asprintf */
#include "install.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "adapters/digest.h"
#include "base/limits.h"
#include "base/log.h"

sg_err sg_helper_bin_open(const char *path, struct sg_helper_bin *b, struct sg_errinfo *err)
{
	struct stat st;
	sg_err rc = SG_OK;

	memset(b, 0, sizeof(*b));
	b->fd = path ? open(path, O_RDONLY | O_CLOEXEC) : -1;
	if (b->fd < 0 || fstat(b->fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size == 0 ||
	    st.st_size > (off_t)SG_HELPER_BIN_MAX) {
		rc = sg_err_set(err, SG_E_INTERNAL, "sg-helper (%s) cannot be read: %s",
				path ? path : "not built",
				b->fd < 0 ? strerror(errno) : "not a regular file of a sane size");
		goto out;
	}
	b->size = (int64_t)st.st_size;
	rc = sg_sha256_fd_hex(b->fd, "sg-helper", b->sha, err);
out:
	if (rc)
		sg_helper_bin_close(b);
	return rc;
}

sg_err sg_helper_bin_load(struct sg_helper_bin *b, struct sg_errinfo *err)
{
	size_t got = 0;

	if (b->data)
		return SG_OK;
	b->data = malloc((size_t)b->size);
	if (!b->data)
		return sg_err_set(err, SG_E_INTERNAL, "out of memory");
	while (got < (size_t)b->size) {
		ssize_t n = pread(b->fd, (char *)b->data + got, (size_t)b->size - got, (off_t)got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			free(b->data);
			b->data = NULL;
			return sg_err_set(err, SG_E_INTERNAL, "cannot read sg-helper: %s",
					  n < 0 ? strerror(errno) : "it shrank");
		}
		got += (size_t)n;
	}
	return SG_OK;
}

void sg_helper_bin_close(struct sg_helper_bin *b)
{
	if (b->fd >= 0)
		close(b->fd);
	b->fd = -1;
	free(b->data);
	b->data = NULL;
}

char *sg_install_upload_path(const struct sg_install *in, const struct sg_helper_bin *b)
{
	char *p = NULL;

	if (asprintf(&p, "%s/.sg-helper-%s.up-%s", in->dir, b->sha, in->nonce) < 0)
		return NULL;
	return p;
}

/* The value of key in key=value lines (new), or NULL. */
static char *install_kv(const char *text, const char *key)
{
	size_t kn = strlen(key);

	for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
		if (strncmp(l, key, kn) == 0 && l[kn] == '=')
			return strndup(l + kn + 1, strcspn(l + kn + 1, "\n"));
	return NULL;
}

sg_err sg_install_check_reply(const char *reply, const char *where, struct sg_errinfo *err)
{
	char *e = install_kv(reply, "install_error"), *ok = install_kv(reply, "installed");
	sg_err rc = SG_OK;

	if (e || !ok || strcmp(ok, "1") != 0)
		rc = sg_err_set(err, SG_E_PROVIDER, "sg-helper could not be installed on %s: %s",
				where, e ? e : "the install step printed nothing");
	free(e);
	free(ok);
	return rc;
}

sg_err sg_install_helper(const struct sg_install *in, struct sg_helper_bin *b,
			 struct sg_install_cost *cost, struct sg_cancel *cancel,
			 struct sg_errinfo *err)
{
	static const char script[] = SG_INSTALL_SH;
	int64_t t0 = sg_now_ms();
	char *up = NULL, *reply = NULL;
	sg_err rc;

	memset(cost, 0, sizeof(*cost));
	if (in->upload) {
		if (!(up = sg_install_upload_path(in, b))) {
			rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
			goto out;
		}
		rc = in->upload(in->ctx, up, b->fd, cancel, err);
		cost->requests++;
		if (rc)
			goto out;
		rc = in->run(in->ctx, script, in->dir, b->sha, up, NULL, 0, &reply, cancel, err);
	} else {
		rc = sg_helper_bin_load(b, err);
		if (!rc)
			rc = in->run(in->ctx, script, in->dir, b->sha, "-", b->data, (size_t)b->size,
				     &reply, cancel, err);
	}
	cost->requests++;
	cost->bytes = b->size;
	if (!rc)
		rc = sg_install_check_reply(reply, "the environment", err);
out:
	cost->ms = sg_now_ms() - t0;
	if (!rc)
		sg_log_info("sg-helper %.12s installed in %s: %lld bytes, %d request%s, %lld ms",
			    b->sha, in->dir, (long long)cost->bytes, cost->requests,
			    cost->requests == 1 ? "" : "s", (long long)cost->ms);
	free(up);
	free(reply);
	return rc;
}
