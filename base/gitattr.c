#include "base/gitattr.h"

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

/* git's global options that take the next word as their value. */
static const char *const global_with_value[] = {
	"-C", "-c", "--config-env", "--git-dir", "--namespace", "--super-prefix", "--work-tree",
	NULL,
};

/* commit's options that take the next word as their value. */
static const char *const commit_with_value[] = {
	"-m", "--message", "-F", "--file", "-C", "--reuse-message", "-c", "--reedit-message",
	"--fixup", "--squash", "--author", "--date", "--cleanup", "--trailer", "-t", "--template",
	"--pathspec-from-file", NULL,
};

/* a, or a long option a abbreviates, takes its value separately. */
static bool takes_value(const char *a, const char *const *list)
{
	size_t n = strlen(a);

	for (size_t i = 0; list[i]; i++) {
		if (strcmp(a, list[i]) == 0)
			return true;
		/* git accepts any unambiguous prefix of a long option. */
		if (list == commit_with_value && strncmp(list[i], "--", 2) == 0 && n > 2 &&
		    strncmp(list[i], a, n) == 0)
			return true;
	}
	return false;
}

/* --amend, an abbreviation of it down to --am, or --amend=... */
static bool is_amend(const char *a)
{
	size_t n = strlen(a);

	return (n >= 4 && n <= 7 && strncmp("--amend", a, n) == 0) ||
	       strncmp(a, "--amend=", 8) == 0;
}

/* The index of git's subcommand in args, or -1. */
static int subcommand_at(int n, char *const *args)
{
	for (int i = 0; i < n; i++) {
		if (takes_value(args[i], global_with_value)) {
			if (++i >= n)
				return -1;
			continue;
		}
		if (args[i][0] != '-')
			return i;
	}
	return -1;
}

int sg_gitattr_commit_args(int n, char *const *args, char **out)
{
	int sub = subcommand_at(n, args), paths = n, k = 0;

	if (sub < 0 || strcmp(args[sub], "commit") != 0)
		return -1;
	for (int i = sub + 1; i < n; i++) {
		if (is_amend(args[i]))
			return -1;
		if (strcmp(args[i], "--") == 0) {
			paths = i;
			break;
		}
		if (takes_value(args[i], commit_with_value) && ++i >= n)
			return -1;
	}
	for (int i = 0; i < sub; i++)
		out[k++] = args[i];
	out[k++] = "-c";
	out[k++] = SG_GIT_TRAILER_RULE;
	for (int i = sub; i < paths; i++)
		out[k++] = args[i];
	out[k++] = "--trailer";
	out[k++] = SG_GIT_TRAILER;
	for (int i = paths; i < n; i++)
		out[k++] = args[i];
	return k;
}
