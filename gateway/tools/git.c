/*
 * git.c - the git tool: `subcommand` and `args`, checked against what a
 * permission mode allows, run in the environment.
 */
#include "tool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../../adapters/exec.h"
#include "base/limits.h"

static sg_err strings_to_strv(json_t *arr, struct sg_strv *out)
{
	json_t *e;
	size_t i;

	json_array_foreach(arr, i, e) {
		if (sg_strv_add(out, json_string_value(e)))
			return SG_E_INTERNAL;
	}
	return SG_OK;
}


/* Whether a is one of list's options; an entry ending in '*' is a prefix. */
static bool git_opt_in(const char *a, const char *const *list)
{
	for (size_t i = 0; list[i]; i++) {
		size_t n = strlen(list[i]);

		if (list[i][n - 1] == '*' ? strncmp(a, list[i], n - 1) == 0
					  : strcmp(a, list[i]) == 0)
			return true;
	}
	return false;
}

/*
 * Whether every option in args[from..] is one of opts.  *words counts the
 * arguments that are not options (names, patterns, values); *lists says
 * whether one of `listing`, the options that put the subcommand in its
 * listing mode, appeared.
 */
static bool git_opts_only(json_t *args, size_t from, const char *const *opts,
			  const char *const *listing, size_t *words, bool *lists)
{
	*words = 0;
	*lists = false;
	for (size_t i = from; i < json_array_size(args); i++) {
		const char *a = json_string_value(json_array_get(args, i));

		if (a[0] != '-' || a[1] == '\0') {
			(*words)++;
			continue;
		}
		if (!git_opt_in(a, opts))
			return false;
		*lists |= git_opt_in(a, listing);
	}
	return true;
}

/*
 * Whether a `git grep` command line has -O / --open-files-in-pager, which
 * hands the matching files to a program the caller names (given the ELF
 * interpreter, it runs a workspace file).  git's option parser takes
 * short options bundled (-nO<prog>), long ones abbreviated (--open=), and
 * the value of -e, -f, -m and -A/-B/-C in the rest of a bundle or the next
 * argument, which is a pattern or a number, never an option.
 */
static bool git_grep_opens_pager(json_t *args, size_t sub)
{
	for (size_t i = sub + 1; i < json_array_size(args); i++) {
		const char *a = json_string_value(json_array_get(args, i));
		size_t n = strcspn(a, "=");

		if (strcmp(a, "--") == 0)
			return false;
		if (a[0] != '-' || a[1] == '\0')
			continue;
		if (a[1] == '-') {
			if (n > 2 && n - 2 <= strlen("open-files-in-pager") &&
			    strncmp(a + 2, "open-files-in-pager", n - 2) == 0)
				return true;
			continue;
		}
		for (const char *c = a + 1; *c; c++) {
			if (*c == 'O')
				return true;
			if (strchr("efmABC", *c)) {
				i += c[1] == '\0';
				break;
			}
		}
	}
	return false;
}

/*
 * NULL when a read_only git may run subcommand args[sub] with the rest of
 * args; otherwise the sentence that says why not.  Most reading
 * subcommands read in every form (their options that hand files to a
 * program are refused in git_read_only).  branch, tag, remote, stash,
 * config and help read only in some forms, and every argument decides:
 * `branch -v -D x` deletes, a bare `stash` stashes, `help log` starts man.
 */
static const char *git_refusal(json_t *args, size_t sub)
{
	static const char *const readers[] = {
		"status", "diff", "log", "show", "blame", "rev-parse", "ls-files",
		"grep", "describe", "shortlog", "cat-file", "ls-tree", "rev-list",
		"whatchanged", "name-rev", "merge-base", "show-ref", "count-objects",
		"annotate", "diff-tree", "diff-files", "diff-index", "for-each-ref",
		"var", "version", NULL
	};
	static const char *const branch_opts[] = {
		"--list", "-l", "-v", "-vv", "--verbose", "-a", "--all", "-r", "--remotes",
		"--show-current", "--contains*", "--no-contains*", "--merged*", "--no-merged*",
		"--points-at*", "--sort=*", "--format=*", "--color", "--color=*", "--no-color",
		"--column", "--column=*", "--no-column", "--abbrev=*", "--no-abbrev", "-i",
		"--ignore-case", "--omit-empty", NULL
	};
	static const char *const branch_listing[] = {
		"--list", "-l", "-v", "-vv", "--verbose", "--contains*", "--no-contains*",
		"--merged*", "--no-merged*", "--points-at*", NULL
	};
	/* Not tag's -v, which verifies: it runs gpg. */
	static const char *const tag_opts[] = {
		"--list", "-l", "-n*", "--contains*", "--no-contains*", "--merged*",
		"--no-merged*", "--points-at*", "--sort=*", "--format=*", "--color",
		"--color=*", "--no-color", "--column", "--column=*", "--no-column", "-i",
		"--ignore-case", "--omit-empty", NULL
	};
	static const char *const tag_listing[] = {
		"--list", "-l", "-n*", "--contains*", "--no-contains*", "--merged*",
		"--no-merged*", "--points-at*", NULL
	};
	static const char *const config_opts[] = {
		"-l", "--list", "--get", "--get-all", "--get-regexp", "-z", "--null",
		"--name-only", "--show-origin", "--show-scope", "--type=*", "--bool", "--int",
		"--bool-or-int", "--path", "--expiry-date", "--default=*", "--local",
		"--global", "--system", "--worktree", "--includes", "--no-includes", NULL
	};
	static const char *const config_listing[] = {
		"-l", "--list", "--get", "--get-all", "--get-regexp", NULL
	};
	static const char *const help_opts[] = {
		"-a", "--all", "-g", "--guides", "-c", "--config", "--no-external-commands",
		"--no-aliases", "--verbose", "--no-verbose", "--user-interfaces",
		"--developer-interfaces", NULL
	};
	static const char *const none[] = { NULL };
	const char *cmd = json_string_value(json_array_get(args, sub));
	const char *next = json_string_value(json_array_get(args, sub + 1));
	size_t words = 0;
	bool lists = false;

	for (size_t i = 0; readers[i]; i++)
		if (strcmp(cmd, readers[i]) == 0)
			return strcmp(cmd, "grep") == 0 && git_grep_opens_pager(args, sub)
				       ? "git grep -O (--open-files-in-pager) hands the matching "
					 "files to a program"
				       : NULL;
	if (strcmp(cmd, "branch") == 0 || strcmp(cmd, "tag") == 0) {
		bool tag = cmd[0] == 't';

		/* A name without a listing option creates. */
		if (git_opts_only(args, sub + 1, tag ? tag_opts : branch_opts,
				  tag ? tag_listing : branch_listing, &words, &lists) &&
		    (words == 0 || lists))
			return NULL;
		return "git branch and tag only list in read_only mode: a name only "
		       "after --list, --contains, --merged or --points-at (or branch's "
		       "-v, tag's -n), and no option that creates, deletes, moves or "
		       "verifies";
	}
	if (strcmp(cmd, "remote") == 0) {
		size_t i = sub + 1;
		const char *word;

		while ((word = json_string_value(json_array_get(args, i))) &&
		       (strcmp(word, "-v") == 0 || strcmp(word, "--verbose") == 0))
			i++;
		if (!word ||
		    (strcmp(word, "show") == 0 &&
		     git_opts_only(args, i + 1, (const char *const[]){ "-n", NULL }, none,
				   &words, &lists)) ||
		    (strcmp(word, "get-url") == 0 &&
		     git_opts_only(args, i + 1, (const char *const[]){ "--push", "--all", NULL },
				   none, &words, &lists)))
			return NULL;
		return "git remote only lists in read_only mode: `remote [-v]`, "
		       "`remote show` and `remote get-url`";
	}
	if (strcmp(cmd, "stash") == 0)
		return next && (strcmp(next, "list") == 0 || strcmp(next, "show") == 0)
			       ? NULL
			       : "git stash only lists in read_only mode: `stash list` and "
				 "`stash show`";
	if (strcmp(cmd, "config") == 0)
		return git_opts_only(args, sub + 1, config_opts, config_listing, &words,
				     &lists) && lists
			       ? NULL
			       : "git config only reads in read_only mode: --get, --get-all, "
				 "--get-regexp or --list, with display options";
	if (strcmp(cmd, "help") == 0)
		return git_opts_only(args, sub + 1, help_opts, none, &words, &lists) &&
				       words == 0
			       ? NULL
			       : "git help only lists in read_only mode (-a, -g, -c): a "
				 "manual page needs a viewer program";
	return "it may write";
}

/*
 * `-c` keys a read_only git may set: display and diff settings that
 * neither write nor run a program.  Everything else stays refused, above
 * all the keys that name a program (core.pager, core.fsmonitor,
 * diff.external, core.sshCommand, core.hooksPath, alias.*, *.textconv,
 * filter.*, credential.*, ...): an allow-list cannot miss one.
 */
static bool git_key_harmless(const char *kv)
{
	static const char *const keys[] = {
		"color.ui", "color.diff", "color.status", "color.branch", "color.grep",
		"core.quotepath", "core.abbrev", "core.safecrlf", "core.autocrlf",
		"diff.noprefix", "diff.renames", "diff.mnemonicprefix", "diff.context",
		"diff.algorithm", "diff.indentheuristic", "diff.relative",
		"diff.interhunkcontext", "diff.suppressblankempty", "diff.statgraphwidth",
		"log.decorate", "log.date", "log.abbrevcommit", "log.follow",
		"log.showroot", "log.mailmap", "grep.linenumber", "grep.extendedregexp",
		"grep.patterntype", "status.short", "status.branch",
		"status.showuntrackedfiles", "blame.date", "i18n.logoutputencoding",
		"format.pretty", "pager.log", "pager.diff", "pager.show", NULL
	};
	size_t n = strcspn(kv, "=");

	for (size_t i = 0; keys[i]; i++)
		if (strlen(keys[i]) == n && strncasecmp(keys[i], kv, n) == 0) {
			/* pager.<cmd> may only turn the pager off. */
			if (strncasecmp(kv, "pager.", 6) == 0)
				return kv[n] == '=' && (strcmp(kv + n + 1, "false") == 0 ||
							strcmp(kv + n + 1, "0") == 0);
			return true;
		}
	return false;
}

/*
 * git's global options, before the subcommand, in read_only mode: the
 * ones that can neither write nor run a program.  `-C DIR` must stay
 * inside root (resolved in the environment, like every path); the rest
 * are refused with the reason.  *sub is the subcommand's index in args.
 */
static sg_err git_globals(struct sg_tool_call *t, json_t *args, const char *cwd, size_t *sub)
{
	static const char *const plain[] = {
		"--no-pager", "-P", "--no-optional-locks", "--literal-pathspecs",
		"--glob-pathspecs", "--noglob-pathspecs", "--icase-pathspecs",
		"--no-replace-objects", "--no-advice", NULL
	};
	size_t i = 0, n = json_array_size(args);
	sg_err rc = SG_OK;

	for (; i < n && !rc; i++) {
		const char *a = json_string_value(json_array_get(args, i));
		bool known = false;

		if (a[0] != '-')
			break;
		for (size_t k = 0; plain[k]; k++)
			known |= strcmp(a, plain[k]) == 0;
		if (known)
			continue;
		if ((strcmp(a, "-C") == 0 || strcmp(a, "-c") == 0) && i + 1 == n)
			return sg_err_set(&t->op->err, SG_E_INVALID_ARGUMENT,
					  "git %s needs a value", a);
		if (strcmp(a, "-C") == 0) {
			const char *dir = json_string_value(json_array_get(args, ++i));
			struct sg_buf joined = SG_BUF_INIT(2 * SG_PATH_MAX + 2);
			char *where = NULL;

			/* Relative to cwd, as git reads it; outside root is path_escape. */
			if (sg_buf_addf(&joined, "%s%s%s", cwd && dir[0] != '/' ? cwd : "",
					cwd && dir[0] != '/' ? "/" : "", dir))
				rc = sg_err_set(&t->op->err, SG_E_INVALID_ARGUMENT,
						"git -C: the path is too long");
			/* Relayed (no environment here), the peer resolves it. */
			if (!rc && t->s->env)
				rc = sg_envcall_resolve(t->s, joined.p, false, &where,
							&t->op->cancel, &t->op->err);
			sg_buf_release(&joined);
			free(where);
		} else if (strcmp(a, "-c") == 0) {
			const char *kv = json_string_value(json_array_get(args, ++i));

			if (!git_key_harmless(kv))
				rc = sg_err_set(&t->op->err, SG_E_PERMISSION,
						"git -c %.*s is not allowed in read_only mode: only "
						"display settings (color.*, core.quotepath, diff.*, "
						"log.* and the like) are; a key that can run a program "
						"or write never is",
						(int)strcspn(kv, "="), kv);
		} else {
			rc = sg_err_set(&t->op->err, SG_E_PERMISSION,
					"git option %.64s is not allowed in read_only mode "
					"(allowed before the subcommand: -C DIR inside the "
					"workspace, -c with a display setting, --no-pager, "
					"--no-optional-locks, --literal-pathspecs)", a);
		}
	}
	*sub = i;
	if (!rc && i == n)
		rc = sg_err_set(&t->op->err, SG_E_INVALID_ARGUMENT,
				"`args` names no git subcommand after its options");
	return rc;
}

/*
 * Whether a configuration entry (as `git config --list -z` gives it:
 * section[.subsection].name, section and name in lower case) makes a
 * read-only git subcommand run a program: fsmonitor hooks, pagers,
 * external diff and textconv commands, filters (which `status` runs on
 * changed files), merge drivers, editors, ssh and proxy commands, signing
 * programs, hooks.  A deny-list has to be complete, so it errs wide: any
 * key whose last part names a command, a program or a helper.  Values that
 * turn a feature off ("false", a pager.<cmd> boolean) are harmless.
 */
static bool git_entry_runs_program(const char *key, const char *value)
{
	static const char *const sections[] = { "filter", "gpg", "man", "browser",
						"difftool", "mergetool", NULL };
	static const char *const names[] = {
		"fsmonitor", "pager", "sshcommand", "gitproxy", "askpass", "editor",
		"hookspath", "external", "textconv", "command", "cmd", "driver",
		"program", "uploadpack", "receivepack", "process", "clean", "smudge",
		"proxycommand", "viewer", "tool", NULL
	};
	static const char *const off[] = { "false", "no", "off", "0", "", NULL };
	const char *dot = strchr(key, '.'), *last = strrchr(key, '.');
	size_t slen = dot ? (size_t)(dot - key) : strlen(key);
	bool hit = false;

	for (size_t i = 0; sections[i] && !hit; i++)
		hit = strlen(sections[i]) == slen && strncmp(key, sections[i], slen) == 0;
	for (size_t i = 0; names[i] && !hit && last; i++)
		hit = strcmp(last + 1, names[i]) == 0;
	/* pager.<cmd> and core.fsmonitor may be set to false. */
	if (hit && (strncmp(key, "pager.", 6) == 0 || strcmp(key, "core.fsmonitor") == 0) &&
	    value) {
		for (size_t i = 0; off[i]; i++)
			if (strcasecmp(value, off[i]) == 0)
				return false;
		if (strncmp(key, "pager.", 6) == 0 &&
		    (strcasecmp(value, "true") == 0 || strcasecmp(value, "yes") == 0 ||
		     strcasecmp(value, "on") == 0 || strcmp(value, "1") == 0))
			return false;
	}
	return hit;
}

/*
 * The flags that keep a read_only git from handing a file to a program the
 * configuration names (diff.external, a diff driver's command or
 * textconv), and in *at the index in args they go before: right after the
 * subcommand (after `stash show` / `stash list`).  NULL when the
 * subcommand shows no diff.  git_exec_only's rule stops such a program
 * from starting, all but one: the ELF interpreter stays executable because
 * git needs it, and given a workspace file as its argument it would load
 * and run that file.  These flags take the argument away.
 */
static const char *const *git_no_programs(json_t *args, size_t sub, size_t *at)
{
	static const char *const both[] = { "--no-ext-diff", "--no-textconv", NULL };
	static const char *const textconv[] = { "--no-textconv", NULL };
	static const char *const diffs[] = { "diff", "log", "show", "whatchanged",
					     "diff-tree", "diff-files", "diff-index", NULL };
	const char *cmd = json_string_value(json_array_get(args, sub));
	const char *next = json_string_value(json_array_get(args, sub + 1));

	*at = sub + 1;
	for (size_t i = 0; diffs[i]; i++)
		if (strcmp(cmd, diffs[i]) == 0)
			return both;
	if (strcmp(cmd, "blame") == 0 || strcmp(cmd, "annotate") == 0 ||
	    strcmp(cmd, "grep") == 0)
		return textconv;
	if (strcmp(cmd, "stash") == 0 && next &&
	    (strcmp(next, "show") == 0 || strcmp(next, "list") == 0)) {
		*at = sub + 2;
		return both;
	}
	return NULL;
}

/*
 * Start a read_only git's argv in av: `sg-helper confine --git`, inside
 * the confinement exec_argv adds, so that git may execute only itself,
 * its exec-path helpers and the ELF interpreter.  A program the
 * configuration names (a filter, textconv, diff command, pager, hook) then
 * fails to start, even one added after git_config_guard read the files:
 * this, not the guard, is what makes the race between the two harmless.
 */
static sg_err git_exec_only(struct sg_tool_call *t, struct sg_strv *av)
{
	if (sg_strv_addv(av, (const char *[]){ t->s->env->helper, "confine", "--mode",
						"read_only", "--root", t->s->root, "--git",
						"--", NULL }))
		return sg_err_set(&t->op->err, SG_E_INTERNAL, "out of memory");
	return SG_OK;
}

/*
 * In read_only mode, refuse a git whose configuration (the repository's
 * own, its includes, the environment's ~/.gitconfig and /etc/gitconfig,
 * all writable by a standard-mode agent before) would make it run a
 * program: `git [GLOBALS] config --list -z` is read first, with the
 * caller's -C and -c, in the same confinement.  This gives the clear
 * sentence when the files stay as they are; when they change between this
 * read and the run (filter and diff drivers have names the repository
 * chooses, so no -c override covers them), git_exec_only's Landlock rule
 * still keeps git from starting the program.
 */
static sg_err git_config_guard(struct sg_tool_call *t, json_t *args, size_t sub, const char *cwd,
			       json_t *env)
{
	struct sg_strv av = SG_STRV_INIT;
	struct sg_exec_result r;
	sg_err rc;

	sg_exec_result_init(&r, SG_GIT_CONFIG_MAX);
	rc = git_exec_only(t, &av);
	if (rc)
		goto out;
	rc = sg_strv_add(&av, "git") ? SG_E_INTERNAL : SG_OK;
	for (size_t i = 0; !rc && i < sub; i++)
		rc = sg_strv_add(&av, json_string_value(json_array_get(args, i)))
			     ? SG_E_INTERNAL : SG_OK;
	if (!rc)
		rc = sg_strv_addv(&av, (const char *[]){ "config", "--list", "-z", NULL })
			     ? SG_E_INTERNAL : SG_OK;
	if (rc) {
		rc = sg_err_set(&t->op->err, SG_E_INTERNAL, "out of memory");
		goto out;
	}
	rc = sg_tool_exec(t, sg_strv_get(&av), cwd, env, NULL, 0, SG_COMMAND_TIMEOUT_MS, false,
		       &r);
	if (rc)
		goto out;
	if (r.exit_code != 0 || r.signal || r.truncated || r.timed_out) {
		rc = sg_err_set(&t->op->err, SG_E_PERMISSION,
				"read_only git reads the configuration first and could not "
				"(exit %d%s): %.200s", r.exit_code,
				r.truncated ? ", more than the limit" : "",
				r.err.p ? r.err.p : "");
		goto out;
	}
	/* Entries are KEY NUL or KEY LF VALUE NUL. */
	for (size_t at = 0; at < r.out.len && !rc;) {
		/* p[len] is 0 (buf.h), so the last entry ends too. */
		char *e = r.out.p + at, *nl;
		size_t n = strlen(e);

		nl = strchr(e, '\n');
		if (nl)
			*nl = '\0';
		if (git_entry_runs_program(e, nl ? nl + 1 : NULL))
			rc = sg_err_set(&t->op->err, SG_E_PERMISSION,
					"git's configuration sets %.100s, which runs a program; "
					"read_only git refuses to run with it (remove it in "
					"standard mode, or use standard mode)", e);
		at += n + 1;
	}
out:
	sg_exec_result_release(&r);
	sg_strv_release(&av);
	return rc;
}

/*
 * In read_only mode, git runs only reading subcommands after harmless
 * global options (protocol section 10); SG_E_PERMISSION otherwise.
 */
static sg_err git_read_only(struct sg_tool_call *t, json_t *args, const char *cwd, size_t *sub)
{
	const char *why;
	sg_err rc;

	*sub = 0;
	rc = git_globals(t, args, cwd, sub);
	if (rc)
		return rc;
	why = git_refusal(args, *sub);
	if (why)
		return sg_err_set(&t->op->err, SG_E_PERMISSION,
				  "git %.64s is not allowed in read_only mode: %s",
				  json_string_value(json_array_get(args, *sub)), why);
	/*
	 * --ext-diff and --textconv (and their abbreviations) would undo
	 * git_no_programs' flags, and --submodule=diff runs a git in each
	 * submodule that has neither; a pathspec that happens to look like
	 * them is refused too, which costs nothing.
	 */
	for (size_t i = *sub + 1; i < json_array_size(args); i++) {
		const char *a = json_string_value(json_array_get(args, i));
		bool sub_diff = strncmp(a, "--sub", 5) == 0 && strcmp(a, "--submodule") != 0 &&
				strcmp(a, "--submodule=log") != 0 &&
				strcmp(a, "--submodule=short") != 0;

		if (strncmp(a, "--ext", 5) == 0 || strncmp(a, "--textc", 7) == 0 || sub_diff)
			return sg_err_set(&t->op->err, SG_E_PERMISSION,
					  "git option %.64s is not allowed in read_only mode: it "
					  "hands files to a program the configuration names", a);
	}
	return SG_OK;
}

/* git's `args` and `cwd`, checked; borrowed from t->a. */
static sg_err git_args(struct sg_tool_call *t, json_t **args, const char **cwd)
{
	sg_err rc = sg_arg_str(t->a, "cwd", false, cwd, &t->op->err);

	if (!rc)
		rc = sg_arg_strings(t->a, "args", args, &t->op->err);
	if (!rc && (!*args || json_array_size(*args) == 0))
		rc = sg_err_set(&t->op->err, SG_E_INVALID_ARGUMENT,
				"`args` must be a non-empty array (the argv after `git`)");
	return rc;
}

/*
 * Run git and give the host's view of it: exit code, output (stdout and
 * stderr merged, bounded), whether it timed out.
 */
static sg_err git_run(struct sg_tool_call *t, const char *const *argv, const char *cwd,
		      json_t *env, json_t **result)
{
	struct sg_exec_result r;
	struct sg_buf text = SG_BUF_INIT(t->s->tool_output + SG_KiB);
	const char *sub = json_string_value(json_object_get(t->a, "subcommand"));
	sg_err rc;

	sg_exec_result_init(&r, t->s->tool_output);
	r.keep_tail = true;
	rc = sg_tool_exec(t, argv, cwd, env, NULL, 0, SG_COMMAND_TIMEOUT_MS, true, &r);
	if (!rc && sg_exec_text(&r, &text))
		rc = sg_err_set(&t->op->err, SG_E_INTERNAL, "out of memory");
	if (!rc)
		*result = sg_tool_result(
			json_pack("{s:s, s:s, s:I, s:o, s:b}", "action", sub ? sub : "git",
				  "subcommand", sub ? sub : "", "exit_code",
				  (json_int_t)(r.timed_out ? 124 : r.signal ? -1 : r.exit_code),
				  "output", sg_json_text(text.p, text.len), "timed_out",
				  r.timed_out),
			NULL);
	sg_buf_release(&text);
	sg_exec_result_release(&r);
	return rc;
}

sg_err sg_tool_git(struct sg_tool_call *t, json_t **result)
{
	const char *cwd = NULL;
	json_t *args = NULL, *env;
	struct sg_strv av = SG_STRV_INIT;
	size_t sub = 0, at = 0;
	sg_err rc;

	rc = git_args(t, &args, &cwd);
	if (!rc && t->mode == SG_CONFINE_READ_ONLY)
		rc = git_read_only(t, args, cwd, &sub);
	if (rc)
		return rc;
	env = json_pack("{s:s}", "GIT_TERMINAL_PROMPT", "0");
	if (t->mode == SG_CONFINE_READ_ONLY) {
		json_object_set_new(env, "GIT_OPTIONAL_LOCKS", json_string("0"));
		json_object_set_new(env, "GIT_PAGER", json_string("cat"));
		rc = git_config_guard(t, args, sub, cwd, env);
		if (!rc)
			rc = git_exec_only(t, &av);
	}
	if (!rc)
		rc = sg_strv_add(&av, "git");
	/*
	 * The command line outranks every configuration file, so these keys
	 * stay off even if the files change after the guard read them (and
	 * reach the gits started in submodules, through the environment):
	 * diff.submodule=short keeps a diff from starting one.
	 */
	if (!rc && t->mode == SG_CONFINE_READ_ONLY)
		rc = sg_strv_addv(&av, (const char *[]){
			"-c", "core.fsmonitor=false", "-c", "core.pager=cat",
			"-c", "core.hooksPath=/dev/null", "-c", "core.sshCommand=false",
			"-c", "core.askPass=false", "-c", "credential.helper=",
			"-c", "protocol.allow=never", "-c", "gpg.program=false",
			"-c", "log.showSignature=false", "-c", "diff.submodule=short",
			NULL });
	if (!rc && t->mode == SG_CONFINE_READ_ONLY) {
		const char *const *flags = git_no_programs(args, sub, &at);

		for (size_t i = 0; !rc && i < json_array_size(args); i++) {
			if (i == at && flags)
				rc = sg_strv_addv(&av, flags) ? SG_E_INTERNAL : SG_OK;
			if (!rc)
				rc = sg_strv_add(&av, json_string_value(json_array_get(args, i)))
					     ? SG_E_INTERNAL : SG_OK;
		}
		if (!rc && flags && at == json_array_size(args))
			rc = sg_strv_addv(&av, flags) ? SG_E_INTERNAL : SG_OK;
	} else if (!rc) {
		rc = strings_to_strv(args, &av);
	}
	if (!rc)
		rc = git_run(t, sg_strv_get(&av), cwd, env, result);
	json_decref(env);
	sg_strv_release(&av);
	return rc;
}

sg_err sg_tool_git_read_only(struct sg_tool_call *t)
{
	const char *cwd = NULL;
	json_t *args = NULL;
	size_t sub;
	sg_err rc = git_args(t, &args, &cwd);

	return rc ? rc : git_read_only(t, args, cwd, &sub);
}
