/*
 * gitwrap.c - the host's git attribution for commits that bash's commands
 * make (git_attribution_enabled).
 *
 * As the host's worker does, a command run with attribution finds a `git`
 * launcher first on its PATH, put there after its login profile ran: a
 * small shell script in the process directory that looks the real git up
 * on the PATH the command had and hands both to `sg-helper git-wrap`,
 * which adds the co-author trailer to a commit (base/gitattr.h) and execs
 * the real git.  Parsing git's command line in C at git's own argv
 * boundary, not rewriting the shell text, is what keeps `git -C d commit`
 * and quoting right.  The launcher refuses a "real git" that is itself
 * (a command that emptied its environment finds only the launcher), exit
 * 127, as the host's does.
 *
 * The command may rewrite the script (its directory is the command's
 * own): it then loses its own attribution, nothing more, since the script
 * runs with the command's rights.
 */
#define _GNU_SOURCE /* readlink under strict POSIX */

#include "helper/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fsutil.h"
#include "base/gitattr.h"
#include "base/limits.h"

/* The variable that keeps the command's own PATH for the launcher. */
#define GITWRAP_PATH_VAR "WUU_INTERNAL_GIT_ORIGINAL_PATH"
/* The launcher's directory under the process directory. */
#define GITWRAP_DIR "git-wrapper"
/* A launcher script with two quoted paths in it. */
#define GITWRAP_SCRIPT_MAX (4 * SG_PATH_MAX + 512)

/* s single-quoted for sh into b. */
static sg_err quote(struct sg_buf *b, const char *s)
{
	sg_err rc = sg_buf_addc(b, '\'');

	for (; !rc && *s; s++)
		rc = *s == '\'' ? sg_buf_adds(b, "'\\''") : sg_buf_addc(b, *s);
	return rc ? rc : sg_buf_addc(b, '\'');
}

/* The launcher's text: find the real git on the command's PATH, hand over. */
static sg_err script_text(struct sg_buf *b, const char *self, const char *script)
{
	sg_err rc = sg_buf_adds(b, "#!/bin/sh\n"
				   "real_git=$(PATH=\"${" GITWRAP_PATH_VAR ":-$PATH}\" command -v git)\n"
				   "if [ -z \"$real_git\" ]; then\n"
				   "  echo 'sandgate: git executable not found' >&2\n"
				   "  exit 127\n"
				   "fi\n"
				   "exec ");

	if (!rc)
		rc = quote(b, self);
	if (!rc)
		rc = sg_buf_adds(b, " git-wrap ");
	if (!rc)
		rc = quote(b, script);
	return rc ? rc : sg_buf_adds(b, " \"$real_git\" \"$@\"\n");
}

/* dir/git holds text, written beside and renamed over unless it already does. */
static sg_err script_install(const char *dir, const char *path, const struct sg_buf *text,
			     struct sg_errinfo *err)
{
	char tmp[SG_PATH_MAX], have[GITWRAP_SCRIPT_MAX];
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, have, sizeof(have)) : -1;
	sg_err rc = SG_OK;

	if (fd >= 0)
		close(fd);
	if (n == (ssize_t)text->len && memcmp(have, text->p, text->len) == 0)
		return SG_OK;
	/* Named for this process: two commands may install at once. */
	if (snprintf(tmp, sizeof(tmp), "%s/.git.%ld", dir, (long)getpid()) >= (int)sizeof(tmp))
		return sg_err_set(err, SG_E_INTERNAL, "the git launcher's path is too long");
	unlink(tmp); /* left by a helper killed midway with this pid */
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0700);
	if (fd < 0)
		return sg_err_set(err, SG_E_INTERNAL, "cannot write the git launcher: %s",
				  strerror(errno));
	if (sg_write_all(fd, text->p, text->len) || rename(tmp, path) < 0)
		rc = sg_err_set(err, SG_E_INTERNAL, "cannot write the git launcher: %s",
				strerror(errno));
	close(fd);
	if (rc)
		unlink(tmp);
	return rc;
}

sg_err sg_gitwrap_command(const char *ctl, const char *command, char **text,
			  struct sg_errinfo *err)
{
	char self[SG_PATH_MAX], dir[SG_PATH_MAX], script[SG_PATH_MAX];
	struct sg_buf b = SG_BUF_INIT(GITWRAP_SCRIPT_MAX), t = SG_BUF_INIT(SG_MAX_FRAME);
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	sg_err rc = SG_OK;

	*text = NULL;
	if (n <= 0 || (size_t)n >= sizeof(self) - 1)
		return sg_err_set(err, SG_E_INTERNAL, "cannot find sg-helper's own path for git");
	self[n] = '\0';
	if (snprintf(dir, sizeof(dir), "%s/" GITWRAP_DIR, ctl) >= (int)sizeof(dir) ||
	    snprintf(script, sizeof(script), "%s/git", dir) >= (int)sizeof(script))
		return sg_err_set(err, SG_E_INTERNAL, "the git launcher's path is too long");
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return sg_err_set(err, SG_E_INTERNAL, "cannot create %s: %s", dir,
				  strerror(errno));
	rc = script_text(&b, self, script);
	if (!rc)
		rc = script_install(dir, script, &b, err);
	/* Run after the login profile, so that its PATH is the one kept. */
	if (!rc)
		rc = sg_buf_adds(&t, "export " GITWRAP_PATH_VAR "=\"$PATH\"\nexport PATH=");
	if (!rc)
		rc = quote(&t, dir);
	if (!rc)
		rc = sg_buf_addf(&t, ":\"$PATH\"\n%s", command);
	if (!rc)
		*text = sg_buf_take(&t, NULL);
	if (rc && !err->code)
		sg_err_set(err, rc, "the command with git attribution does not fit");
	sg_buf_release(&b);
	sg_buf_release(&t);
	return rc;
}

/* real must be named git and must not be the launcher. */
static const char *real_git_wrong(const char *launcher, const char *real)
{
	const char *base = strrchr(real, '/');
	struct stat a, b;

	if (strcmp(base ? base + 1 : real, "git") != 0)
		return "executable name is not git";
	if (stat(launcher, &a) < 0)
		return "cannot inspect the launcher";
	if (stat(real, &b) < 0)
		return "cannot inspect the git executable";
	if (a.st_dev == b.st_dev && a.st_ino == b.st_ino)
		return "resolved to the git launcher itself";
	return NULL;
}

int sg_helper_gitwrap(int argc, char *const *argv)
{
	char **av;
	const char *why;
	int n;

	if (argc < 3 || !argv[1][0] || !argv[2][0]) {
		fputs("sandgate: git-wrap needs the launcher's and the real git's paths\n", stderr);
		return 127;
	}
	why = real_git_wrong(argv[1], argv[2]);
	if (why) {
		fprintf(stderr, "sandgate: the git launcher rejected %s: %s\n", argv[2], why);
		return 127;
	}
	av = calloc((size_t)argc + SG_GIT_TRAILER_WORDS, sizeof(*av));
	if (!av) {
		fputs("sandgate: out of memory\n", stderr);
		return 126;
	}
	av[0] = argv[2];
	n = sg_gitattr_commit_args(argc - 3, argv + 3, av + 1);
	if (n < 0)
		memcpy(av + 1, argv + 3, (size_t)(argc - 3) * sizeof(*av));
	execv(argv[2], av);
	fprintf(stderr, "sandgate: run git: %s\n", strerror(errno));
	free(av);
	return 126;
}
