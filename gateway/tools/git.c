/*
 * git.c - the host's git tool: `subcommand` and `args`, checked against
 * the host's allow-list (git.go), run as `git --no-optional-locks ...` in
 * root, and answered with the host's view.
 *
 * Invariants:
 * - Every mode runs only what the host's allow-list admits: the read
 *   queries, with their flags checked where the host checks them, and the
 *   restricted writes add (literal paths), restore --staged, commit (an
 *   explicit message) and push (plain, or -u origin <current branch>).
 *   Anything else is an error reply, as the host's refusal is.
 * - read_only refuses the writes, and keeps sandgate's defence against a
 *   repository whose configuration runs programs (a standard-mode agent
 *   may have written it): git is started through `sg-helper confine
 *   --git`, which lets it execute only itself; its configuration is read
 *   first and refused when it names a program; the command line turns
 *   the program-running keys off; diffs are shown without external
 *   drivers or textconv.
 * - sg_tool_git_read_only() decides, from the arguments alone, what a
 *   relayed read_only call may run: the same checks, before the peer.
 */
#define _GNU_SOURCE /* asprintf */
#include "gateway/tools/tool.h"

#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/exec.h"
#include "helper/fs.h"
#include "core/json.h"
#include "base/gitattr.h"
#include "base/limits.h"
#include "base/sha256.h"
#include "base/utf8.h"

/* The host's gitTimeout: a git that runs longer is killed, exit 124. */
#define GIT_TIMEOUT_MS 30000
/* The host's maxShellOutputBytes: the output a view shows. */
#define GIT_OUTPUT_MAX (30 * SG_KiB)
/* Room for the marker sg_exec_text puts between a long output's ends. */
#define GIT_MARK_ROOM 512
/* Characters the host refuses in an argument (shellMetacharacters). */
#define GIT_METACHARS ";&|$`><()"
/*
 * The git form of workspace_revision (sg_tool_revision): how long its
 * `git status` may take (sandgate's revision budget, the fs form's too),
 * the status output it reads whole (a longer one keeps the fs form), and
 * how much of HEAD and of the digest the host shows.
 */
#define GIT_REVISION_TIMEOUT_MS 2000
#define GIT_REVISION_OUTPUT_MAX (8 * SG_MiB)
#define GIT_REVISION_HEAD 12
#define GIT_REVISION_DIGEST 16
/* The host's read-only refusal (tools.c says it for the other tools). */
#define GIT_READ_ONLY "this agent is read-only; it may observe but not modify"

/* What a flag of a policied subcommand takes. */
enum git_flag_arg { GF_NONE, GF_STRING, GF_NUMBER };

struct git_flag {
	const char *name;
	enum git_flag_arg arg;
};

/* A subcommand whose every flag is checked (the host's subcommandPolicy). */
struct git_policy {
	const char *name;
	const struct git_flag *flags;
	bool (*dangerous)(json_t *args, size_t from);
};

/* One call, once parsed: the subcommand (perhaps two words) and its args. */
struct git_call {
	char sub[64];
	const char *given;       /* `subcommand` as the caller wrote it */
	json_t *args;            /* borrowed from t->a, or NULL */
	size_t from;             /* args[from..] follow the subcommand */
	const struct git_policy *policy;
};

static const char *const git_plain[] = {
	"log", "show", "diff", "blame", "reflog", "stash list", "stash show", "ls-files",
	"ls-remote", "rev-parse", "rev-list", "describe", "cat-file", "for-each-ref", "grep",
	"worktree list", "merge-base", "shortlog", "add", "restore --staged", "commit", "push",
	NULL
};

/* The subcommands that change the repository (refused in read_only). */
static const char *const git_writes[] = { "add", "restore --staged", "commit", "push", NULL };

static const struct git_flag branch_flags[] = {
	{ "-l", GF_NONE }, { "--list", GF_NONE }, { "-a", GF_NONE }, { "--all", GF_NONE },
	{ "-r", GF_NONE }, { "--remotes", GF_NONE }, { "-v", GF_NONE }, { "-vv", GF_NONE },
	{ "--verbose", GF_NONE }, { "--color", GF_NONE }, { "--no-color", GF_NONE },
	{ "--column", GF_NONE }, { "--no-column", GF_NONE }, { "--abbrev", GF_NUMBER },
	{ "--no-abbrev", GF_NONE }, { "--contains", GF_STRING }, { "--no-contains", GF_STRING },
	{ "--merged", GF_NONE }, { "--no-merged", GF_NONE }, { "--points-at", GF_STRING },
	{ "--sort", GF_STRING }, { "--show-current", GF_NONE }, { "-i", GF_NONE },
	{ "--ignore-case", GF_NONE }, { NULL, GF_NONE }
};

static const struct git_flag tag_flags[] = {
	{ "-l", GF_NONE }, { "--list", GF_NONE }, { "-n", GF_NUMBER },
	{ "--contains", GF_STRING }, { "--no-contains", GF_STRING }, { "--merged", GF_STRING },
	{ "--no-merged", GF_STRING }, { "--sort", GF_STRING }, { "--format", GF_STRING },
	{ "--points-at", GF_STRING }, { "--column", GF_NONE }, { "--no-column", GF_NONE },
	{ "-i", GF_NONE }, { "--ignore-case", GF_NONE }, { NULL, GF_NONE }
};

static const struct git_flag remote_flags[] = {
	{ "-v", GF_NONE }, { "--verbose", GF_NONE }, { NULL, GF_NONE }
};

static const struct git_flag remote_show_flags[] = { { "-n", GF_NONE }, { NULL, GF_NONE } };

/*
 * config --list takes every flag config --get takes but --default, which
 * stands first so that the list's policy can begin just past it.
 */
static const struct git_flag config_get_flags[] = {
	{ "--default", GF_STRING }, { "--local", GF_NONE }, { "--global", GF_NONE },
	{ "--system", GF_NONE }, { "--worktree", GF_NONE }, { "--type", GF_STRING },
	{ "--bool", GF_NONE }, { "--int", GF_NONE }, { "--bool-or-int", GF_NONE },
	{ "--path", GF_NONE }, { "--expiry-date", GF_NONE }, { "-z", GF_NONE },
	{ "--null", GF_NONE }, { "--name-only", GF_NONE }, { "--show-origin", GF_NONE },
	{ "--show-scope", GF_NONE }, { NULL, GF_NONE }
};

static const struct git_flag status_flags[] = {
	{ "--short", GF_NONE }, { "-s", GF_NONE }, { "--branch", GF_NONE }, { "-b", GF_NONE },
	{ "--porcelain", GF_NONE }, { "--long", GF_NONE }, { "--verbose", GF_NONE },
	{ "-v", GF_NONE }, { "--untracked-files", GF_STRING }, { "-u", GF_STRING },
	{ "--ignored", GF_NONE }, { "--ignore-submodules", GF_STRING }, { "--column", GF_NONE },
	{ "--no-column", GF_NONE }, { "--ahead-behind", GF_NONE },
	{ "--no-ahead-behind", GF_NONE }, { "--renames", GF_NONE }, { "--no-renames", GF_NONE },
	{ "--find-renames", GF_STRING }, { "-M", GF_STRING }, { NULL, GF_NONE }
};

static const char *arg_at(json_t *args, size_t i)
{
	return json_string_value(json_array_get(args, i));
}

static bool is_one_of(const char *s, const char *const *list)
{
	for (size_t i = 0; list[i]; i++)
		if (strcmp(s, list[i]) == 0)
			return true;
	return false;
}

/* A bundle of short flags ("-lv") that holds letter c, not "--" or "-x=". */
static bool bundle_has(const char *a, char c)
{
	return strlen(a) > 2 && a[0] == '-' && a[1] != '-' && !strchr(a, '=') &&
	       strchr(a + 1, c);
}

/*
 * branch and tag create, delete or move with a name, unless a listing
 * flag came first: a name is a pattern only after -l/--list (and, for
 * branch, the commit after --merged/--no-merged).  takes[] are the flags
 * whose value is the next argument.
 */
static bool names_without_list(json_t *args, size_t from, const char *const *takes,
			       const char *const *optional)
{
	bool list = false, dashdash = false;
	const char *last = "";

	for (size_t i = from; i < json_array_size(args); i++) {
		const char *a = arg_at(args, i);

		if (strcmp(a, "--") == 0 && !dashdash) {
			dashdash = true;
			last = "";
			continue;
		}
		if (!dashdash && a[0] == '-') {
			list |= strcmp(a, "--list") == 0 || strcmp(a, "-l") == 0 ||
				bundle_has(a, 'l');
			last = strchr(a, '=') ? "" : a;
			if (!strchr(a, '=') && is_one_of(a, takes))
				i++;
			continue;
		}
		if (!list && !(optional && is_one_of(last, optional)))
			return true;
	}
	return false;
}

static bool branch_dangerous(json_t *args, size_t from)
{
	static const char *const takes[] = { "--contains", "--no-contains", "--points-at",
					     "--sort", NULL };
	static const char *const optional[] = { "--merged", "--no-merged", NULL };

	return names_without_list(args, from, takes, optional);
}

static bool tag_dangerous(json_t *args, size_t from)
{
	static const char *const takes[] = { "--contains", "--no-contains", "--merged",
					     "--no-merged", "--points-at", "--sort", "--format",
					     "-n", NULL };

	return names_without_list(args, from, takes, NULL);
}

/* `remote` only lists: nothing but -v. */
static bool remote_dangerous(json_t *args, size_t from)
{
	for (size_t i = from; i < json_array_size(args); i++)
		if (strcmp(arg_at(args, i), "-v") != 0 && strcmp(arg_at(args, i), "--verbose") != 0)
			return true;
	return false;
}

/* `remote show` names exactly one remote, a plain name. */
static bool remote_show_dangerous(json_t *args, size_t from)
{
	const char *name = NULL;
	size_t names = 0;

	for (size_t i = from; i < json_array_size(args); i++)
		if (strcmp(arg_at(args, i), "-n") != 0) {
			name = arg_at(args, i);
			names++;
		}
	if (names != 1 || !*name)
		return true;
	for (const char *p = name; *p; p++)
		if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-", *p))
			return true;
	return false;
}

/* `config --list` takes no key. */
static bool config_list_dangerous(json_t *args, size_t from)
{
	for (size_t i = from; i < json_array_size(args); i++)
		if (arg_at(args, i)[0] != '-')
			return true;
	return false;
}

static const struct git_policy git_policies[] = {
	{ "branch", branch_flags, branch_dangerous },
	{ "tag", tag_flags, tag_dangerous },
	{ "remote", remote_flags, remote_dangerous },
	{ "remote show", remote_show_flags, remote_show_dangerous },
	{ "config --get", config_get_flags, NULL },
	{ "config --get-all", config_get_flags, NULL },
	{ "config --list", config_get_flags + 1, config_list_dangerous },
	{ "status", status_flags, NULL },
	{ NULL, NULL, NULL }
};

static const struct git_policy *policy_of(const char *sub)
{
	for (size_t i = 0; git_policies[i].name; i++)
		if (strcmp(git_policies[i].name, sub) == 0)
			return &git_policies[i];
	return NULL;
}

static bool known_sub(const char *sub)
{
	return is_one_of(sub, git_plain) || policy_of(sub);
}

static const struct git_flag *flag_of(const struct git_policy *p, const char *name, size_t n)
{
	for (size_t i = 0; p->flags[i].name; i++)
		if (strlen(p->flags[i].name) == n && strncmp(p->flags[i].name, name, n) == 0)
			return &p->flags[i];
	return NULL;
}

/* Every flag of a policied subcommand in its list (validateSubcommandFlags). */
static sg_err check_flags(struct sg_tool_call *t, const struct git_call *g)
{
	size_t n = json_array_size(g->args);

	for (size_t i = g->from; i < n; i++) {
		const char *a = arg_at(g->args, i), *eq = strchr(a, '=');
		size_t len = eq ? (size_t)(eq - a) : strlen(a);
		const struct git_flag *f;

		if (strcmp(a, "--") == 0)
			break;
		if (a[0] != '-')
			continue;
		f = flag_of(g->policy, a, len);
		if (!f && len > 2 && a[1] != '-' && !eq) {
			/* A bundle of short flags, each taking no value. */
			for (const char *c = a + 1; *c; c++) {
				char one[3] = { '-', *c, '\0' };
				const struct git_flag *b = flag_of(g->policy, one, 2);

				if (!b || b->arg != GF_NONE)
					return sg_err_set(&t->op->err, SG_E_PERMISSION,
							  "git %s flag \"%s\" is not allowed in "
							  "restricted mode", g->sub, one);
			}
			continue;
		}
		if (!f)
			return sg_err_set(&t->op->err, SG_E_PERMISSION,
					  "git %s flag \"%.*s\" is not allowed in restricted mode",
					  g->sub, (int)len, a);
		if (f->arg == GF_NONE && eq)
			return sg_err_set(&t->op->err, SG_E_INVALID_ARGUMENT,
					  "git %s flag \"%.*s\" does not accept a value", g->sub,
					  (int)len, a);
		if (f->arg != GF_NONE && !eq)
			i++;
		if (f->arg == GF_NUMBER) {
			const char *v = eq ? eq + 1 : arg_at(g->args, i);
			char *end = NULL;

			if (v && *v && (strtol(v, &end, 10), *end != '\0'))
				return sg_err_set(&t->op->err, SG_E_INVALID_ARGUMENT,
						  "git %s flag \"%.*s\" requires a numeric value, "
						  "got \"%s\"", g->sub, (int)len, a, v);
		}
	}
	if (g->policy->dangerous && g->policy->dangerous(g->args, g->from))
		return sg_err_set(&t->op->err, SG_E_PERMISSION,
				  "git %s: operation not allowed in restricted mode", g->sub);
	return SG_OK;
}

/* add and restore --staged: literal workspace paths, nothing else. */
static sg_err check_paths(struct sg_tool_call *t, const struct git_call *g)
{
	size_t paths = 0;
	bool dashdash = false;

	for (size_t i = g->from; i < json_array_size(g->args); i++) {
		const char *raw = arg_at(g->args, i), *a = raw + strspn(raw, " \t\r\n");
		size_t n = strlen(a);

		if (strcmp(raw, "--") == 0) {
			if (dashdash)
				return sg_err_set(&t->op->err, SG_E_INVALID_ARGUMENT,
						  "git %s accepts at most one -- path separator",
						  g->sub);
			dashdash = true;
			continue;
		}
		while (n && strchr(" \t\r\n", a[n - 1]))
			n--;
		if (!n)
			return sg_err_set(&t->op->err, SG_E_INVALID_ARGUMENT,
					  "git %s requires non-empty explicit path arguments", g->sub);
		if (a[0] == '-')
			return sg_err_set(&t->op->err, SG_E_PERMISSION,
					  "git %s only accepts explicit file or directory paths; "
					  "flag \"%.*s\" is not allowed", g->sub, (int)n, a);
		if (a[0] == '/')
			return sg_err_set(&t->op->err, SG_E_INVALID_ARGUMENT,
					  "git %s requires workspace-relative paths, got absolute "
					  "path \"%.*s\"", g->sub, (int)n, a);
		if (strpbrk(a, "*?[") || a[0] == ':' || strstr(a, ":("))
			return sg_err_set(&t->op->err, SG_E_PERMISSION,
					  "git %s only accepts literal paths from git status; "
					  "wildcard or pathspec magic \"%.*s\" is not allowed",
					  g->sub, (int)n, a);
		if (strcmp(g->sub, "add") == 0 && sg_fs_sensitive(a))
			return sg_err_set(&t->op->err, SG_E_PERMISSION,
					  "git add refuses sensitive path \"%.*s\" (%s). Ask the user "
					  "for explicit secret handling before staging", (int)n, a,
					  sg_fs_sensitive(a));
		/* ".", "..", "./", "../x": root, the current directory, or above. */
		if ((n == 1 && a[0] == '.') || (n >= 2 && a[0] == '.' && a[1] == '/' &&
						!a[2 + strspn(a + 2, "/.")]) ||
		    (n >= 2 && strncmp(a, "..", 2) == 0 && (n == 2 || a[2] == '/')))
			return sg_err_set(&t->op->err, SG_E_PERMISSION,
					  "git %s requires explicit workspace paths; root, "
					  "current-directory, and parent traversal pathspecs are "
					  "not allowed", g->sub);
		paths++;
	}
	if (!paths)
		return sg_err_set(&t->op->err, SG_E_INVALID_ARGUMENT,
				  "git %s requires at least one explicit file or directory path "
				  "from git status", g->sub);
	return SG_OK;
}

/* A message file of commit -F: a literal workspace path, never stdin. */
static sg_err check_message_file(struct sg_tool_call *t, const char *flag, const char *v)
{
	v += strspn(v, " \t\r\n");
	if (!*v)
		return sg_err_set(&t->op->err, SG_E_INVALID_ARGUMENT,
				  "git commit flag \"%s\" requires a non-empty message file", flag);
	if (strcmp(v, "-") == 0)
		return sg_err_set(&t->op->err, SG_E_PERMISSION,
				  "git commit flag \"%s\" cannot read the message from stdin in "
				  "restricted mode", flag);
	if (v[0] == '/' || strcmp(v, ".") == 0 || strncmp(v, "..", 2) == 0)
		return sg_err_set(&t->op->err, SG_E_PERMISSION,
				  "git commit flag \"%s\" requires a workspace-relative message "
				  "file, got \"%s\"", flag, v);
	if (strpbrk(v, "*?[") || v[0] == ':' || strstr(v, ":("))
		return sg_err_set(&t->op->err, SG_E_PERMISSION,
				  "git commit flag \"%s\" requires a literal message file path, "
				  "got \"%s\"", flag, v);
	if (sg_fs_sensitive(v))
		return sg_err_set(&t->op->err, SG_E_PERMISSION,
				  "git commit refuses message file \"%s\" (%s). Ask the user for "
				  "explicit secret handling before committing", v, sg_fs_sensitive(v));
	return SG_OK;
}

/* commit: an explicit message (-m, --message, -F, --file), few flags. */
static sg_err check_commit(struct sg_tool_call *t, const struct git_call *g)
{
	static const char *const blocked[] = {
		"--no-verify", "--gpg-sign", "--no-gpg-sign", "-S", "--signoff", "--fixup",
		"--squash", "-C", "-c", "--author", "--date", "--allow-empty",
		"--allow-empty-message", "-e", "--edit", NULL
	};
	size_t n = json_array_size(g->args);
	bool message = false;
	sg_err rc = SG_OK;

	for (size_t i = g->from; i < n && !rc; i++) {
		const char *a = arg_at(g->args, i);

		for (size_t k = 0; blocked[k]; k++) {
			size_t bl = strlen(blocked[k]);

			if (strcmp(a, blocked[k]) == 0 || (strncmp(a, blocked[k], bl) == 0 &&
							   a[bl] == '='))
				return sg_err_set(&t->op->err, SG_E_PERMISSION,
						  "git commit flag \"%s\" is not allowed in "
						  "restricted mode", blocked[k]);
		}
		if (strcmp(a, "-m") == 0 || strcmp(a, "--message") == 0 ||
		    strcmp(a, "-F") == 0 || strcmp(a, "--file") == 0) {
			if (i + 1 >= n)
				return sg_err_set(&t->op->err, SG_E_INVALID_ARGUMENT,
						  "git commit flag \"%s\" requires a %s", a,
						  a[1] == 'F' || a[2] == 'f' ? "message file"
									     : "message");
			if (a[1] == 'F' || a[2] == 'f')
				rc = check_message_file(t, a, arg_at(g->args, i + 1));
			message = true;
			i++;
		} else if ((strncmp(a, "-m", 2) == 0) || strncmp(a, "--message=", 10) == 0) {
			message = true;
		} else if (strncmp(a, "--file=", 7) == 0) {
			rc = check_message_file(t, "--file", a + 7);
			message = true;
		} else if (strcmp(a, "--amend") != 0) {
			return sg_err_set(&t->op->err, a[0] == '-' ? SG_E_PERMISSION
								  : SG_E_INVALID_ARGUMENT,
					  a[0] == '-' ? "git commit flag \"%s\" is not allowed in "
							"restricted mode"
						      : "git commit only supports explicit "
							"non-interactive message flags; unexpected arg "
							"\"%s\"", a);
		}
	}
	if (!rc && !message)
		rc = sg_err_set(&t->op->err, SG_E_INVALID_ARGUMENT,
				"git commit requires an explicit message via -m/--message or "
				"-F/--file");
	return rc;
}

/* push: no arguments, or -u/--set-upstream origin <branch>. */
static sg_err check_push(struct sg_tool_call *t, const struct git_call *g)
{
	size_t n = json_array_size(g->args) - g->from;
	const char *first = arg_at(g->args, g->from);

	if (n == 0 || (n == 3 && (strcmp(first, "-u") == 0 ||
				  strcmp(first, "--set-upstream") == 0)))
		return SG_OK;
	for (size_t i = g->from; i < json_array_size(g->args); i++) {
		const char *a = arg_at(g->args, i);

		if (strcmp(a, "--force") == 0 || strcmp(a, "--force-with-lease") == 0 ||
		    strcmp(a, "-f") == 0 || strncmp(a, "--force=", 8) == 0 ||
		    strncmp(a, "--delete", 8) == 0 || strcmp(a, "--tags") == 0)
			return sg_err_set(&t->op->err, SG_E_PERMISSION,
					  "git push flag \"%s\" is not allowed in restricted mode", a);
		if (a[0] == ':')
			return sg_err_set(&t->op->err, SG_E_PERMISSION,
					  "git push refspec \"%s\" is not allowed in restricted mode",
					  a);
	}
	return sg_err_set(&t->op->err, SG_E_PERMISSION,
			  "git push only supports: no args, -u origin <current-branch>, or "
			  "--set-upstream origin <current-branch>");
}

/* cat-file: one metadata mode (-t, -s, -e), never an object's content. */
static sg_err check_cat_file(struct sg_tool_call *t, const struct git_call *g)
{
	bool mode = false;

	for (size_t i = g->from; i < json_array_size(g->args); i++) {
		const char *a = arg_at(g->args, i);

		if (strcmp(a, "-t") == 0 || strcmp(a, "-s") == 0 || strcmp(a, "-e") == 0) {
			if (mode)
				return sg_err_set(&t->op->err, SG_E_INVALID_ARGUMENT,
						  "git cat-file accepts exactly one metadata mode");
			mode = true;
		} else if (a[0] == '-') {
			return sg_err_set(&t->op->err, SG_E_PERMISSION,
					  "git cat-file flag \"%s\" is not allowed; only -t, -s, "
					  "and -e metadata modes are allowed", a);
		}
	}
	if (!mode)
		return sg_err_set(&t->op->err, SG_E_PERMISSION,
				  "git cat-file only allows -t, -s, and -e metadata modes");
	return SG_OK;
}

/* The other plain subcommands: no configuration overrides, no --no-index. */
static sg_err check_overrides(struct sg_tool_call *t, const struct git_call *g)
{
	for (size_t i = g->from; i < json_array_size(g->args); i++) {
		const char *a = arg_at(g->args, i);

		if (strncmp(a, "-c", 2) == 0 || strcmp(a, "--config-env") == 0 ||
		    strncmp(a, "--config-env=", 13) == 0 || strcmp(a, "--exec-path") == 0 ||
		    strncmp(a, "--exec-path=", 12) == 0 || strcmp(a, "--no-index") == 0)
			return sg_err_set(&t->op->err, SG_E_PERMISSION,
					  "git global config overrides are not allowed");
	}
	return SG_OK;
}

/* Whether args[i] is commit's message, where the host allows metacharacters. */
static bool is_message(const struct git_call *g, size_t i)
{
	const char *a = arg_at(g->args, i), *prev = i > g->from ? arg_at(g->args, i - 1) : "";

	if (strcmp(g->sub, "commit") != 0)
		return false;
	return strcmp(prev, "-m") == 0 || strcmp(prev, "--message") == 0 ||
	       (strncmp(a, "-m", 2) == 0 && a[2]) || strncmp(a, "--message=", 10) == 0;
}

/* The checks every argument passes (validateGlobalGitArgs). */
static sg_err check_globals(struct sg_tool_call *t, const struct git_call *g)
{
	bool paths = strcmp(g->sub, "add") == 0 || strcmp(g->sub, "restore --staged") == 0;

	for (size_t i = g->from; i < json_array_size(g->args); i++) {
		const char *a = arg_at(g->args, i), *bad;

		if (strcmp(a, "--config-env") == 0 || strncmp(a, "--config-env=", 13) == 0 ||
		    strcmp(a, "--exec-path") == 0 || strncmp(a, "--exec-path=", 12) == 0)
			return sg_err_set(&t->op->err, SG_E_PERMISSION,
					  "git arg \"%s\" is not allowed", a);
		bad = strpbrk(a, GIT_METACHARS);
		if (bad && !is_message(g, i) &&
		    !(paths && strcmp(a, "--") != 0 && a[strspn(a, " \t\r\n")] != '-'))
			return sg_err_set(&t->op->err, SG_E_PERMISSION,
					  "git arg \"%.200s\" contains blocked metacharacter \"%c\"",
					  a, *bad);
	}
	return SG_OK;
}

/*
 * Whether a `git grep` command line has -O / --open-files-in-pager, which
 * hands the matching files to a program the caller names (given the ELF
 * interpreter, it runs a workspace file).  git's option parser takes
 * short options bundled (-nO<prog>), long ones abbreviated (--open=), and
 * the value of -e, -f, -m and -A/-B/-C in the rest of a bundle or the next
 * argument, which is a pattern or a number, never an option.
 */
static bool grep_opens_pager(const struct git_call *g)
{
	for (size_t i = g->from; i < json_array_size(g->args); i++) {
		const char *a = arg_at(g->args, i);
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
 * read_only's own refusals, after the allow-list: the writes, and the
 * options that hand files to a program (a pager through grep -O, external
 * diff drivers and textconv that git_no_programs' flags would not cover,
 * a git started in each submodule).
 */
static sg_err check_read_only(struct sg_tool_call *t, const struct git_call *g)
{
	if (is_one_of(g->sub, git_writes))
		return sg_err_set(&t->op->err, SG_E_PERMISSION, "git %s writes: %s", g->sub,
				  GIT_READ_ONLY);
	if (strcmp(g->sub, "grep") == 0 && grep_opens_pager(g))
		return sg_err_set(&t->op->err, SG_E_PERMISSION,
				  "git grep -O (--open-files-in-pager) is not allowed in read_only "
				  "mode: it hands the matching files to a program");
	for (size_t i = g->from; i < json_array_size(g->args); i++) {
		const char *a = arg_at(g->args, i);
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

/*
 * Why a path an argument may name is sensitive, or NULL
 * (sensitiveGitPathCandidates): the argument itself unless an option,
 * what follows a REV: prefix, and what follows pathspec magic; the path
 * found is left in one (cap bytes).
 */
static const char *sensitive_in(const char *arg, char *one, size_t cap)
{
	const char *colon, *why;
	size_t lead = strspn(arg, " \t\r\n\"'"), n = strlen(arg + lead);

	while (n && strchr(" \t\r\n\"'", arg[lead + n - 1]))
		n--;
	if (!n || n >= cap)
		return NULL;
	memcpy(one, arg + lead, n);
	one[n] = '\0';
	if (strcmp(one, "--") == 0 || (strncmp(one, "--", 2) == 0 && !strchr(one, '=')))
		return NULL;
	colon = strrchr(one, ':');
	if (colon && colon[1] && (why = sg_fs_sensitive(colon + 1))) {
		memmove(one, colon + 1, strlen(colon + 1) + 1);
		return why;
	}
	if (strncmp(one, ":(", 2) == 0 && strchr(one, ')') && strchr(one, ')')[1] &&
	    (why = sg_fs_sensitive(strchr(one, ')') + 1))) {
		memmove(one, strchr(one, ')') + 1, strlen(strchr(one, ')') + 1) + 1);
		return why;
	}
	return one[0] != '-' ? sg_fs_sensitive(one) : NULL;
}

/*
 * The subcommands that print file content refuse to name a sensitive path
 * (validateSensitiveGitContentArgs); unconfined lifts this, as the host's
 * unconfined lifts its read gate.
 */
static sg_err check_content_args(struct sg_tool_call *t, const struct git_call *g)
{
	static const char *const readers[] = { "diff", "show", "blame", "grep", "cat-file",
					       "stash show", "log", NULL };
	char one[SG_PATH_MAX + 1];

	if (t->mode == SG_CONFINE_NONE || !is_one_of(g->sub, readers))
		return SG_OK;
	for (size_t i = g->from; i < json_array_size(g->args); i++) {
		const char *why = sensitive_in(arg_at(g->args, i), one, sizeof(one));

		if (why)
			return sg_err_set(&t->op->err, SG_E_PERMISSION,
					  "git %s refuses to inspect sensitive path \"%.200s\" (%s). "
					  "Use metadata-safe git commands or ask the user for explicit "
					  "secret handling", g->sub, one, why);
	}
	return SG_OK;
}

/*
 * Parse and check a call the way the host does (parseGitInvocation): the
 * subcommand, joined with the first argument when only the two words
 * together name an allowed form ("stash" + ["list"]), then the checks.
 */
static sg_err git_parse(struct sg_tool_call *t, struct git_call *g)
{
	const char *given = NULL, *first;
	size_t lead, n;
	sg_err rc;

	memset(g, 0, sizeof(*g));
	rc = sg_arg_str(t->a, "subcommand", false, &given, &t->op->err);
	if (!rc)
		rc = sg_arg_strings(t->a, "args", &g->args, &t->op->err);
	if (rc)
		return rc;
	g->given = given;
	lead = given ? strspn(given, " \t\r\n") : 0;
	n = given ? strlen(given + lead) : 0;
	while (n && strchr(" \t\r\n", given[lead + n - 1]))
		n--;
	if (!n)
		return sg_err_set(&t->op->err, SG_E_INVALID_ARGUMENT, "git requires subcommand");
	if (n >= sizeof(g->sub))
		return sg_err_set(&t->op->err, SG_E_PERMISSION,
				  "git subcommand \"%.64s\" is not allowed in restricted mode", given);
	memcpy(g->sub, given + lead, n);
	g->sub[n] = '\0';
	first = arg_at(g->args, 0);
	if (!known_sub(g->sub) && first && n + 1 + strlen(first) < sizeof(g->sub)) {
		char both[sizeof(g->sub)];

		memcpy(both, g->sub, n);
		both[n] = ' ';
		memcpy(both + n + 1, first, strlen(first) + 1);
		if (known_sub(both)) {
			memcpy(g->sub, both, sizeof(both));
			g->from = 1;
		}
	}
	g->policy = policy_of(g->sub);
	rc = check_globals(t, g);
	if (rc)
		return rc;
	if (g->policy)
		rc = check_flags(t, g);
	else if (!is_one_of(g->sub, git_plain))
		rc = sg_err_set(&t->op->err, SG_E_PERMISSION,
				"git subcommand \"%.64s\" is not allowed in restricted mode", given);
	else if (strcmp(g->sub, "add") == 0 || strcmp(g->sub, "restore --staged") == 0)
		rc = check_paths(t, g);
	else if (strcmp(g->sub, "commit") == 0)
		rc = check_commit(t, g);
	else if (strcmp(g->sub, "push") == 0)
		rc = check_push(t, g);
	else if (strcmp(g->sub, "cat-file") == 0)
		rc = check_cat_file(t, g);
	else
		rc = check_overrides(t, g);
	if (!rc)
		rc = check_content_args(t, g);
	if (!rc && t->mode == SG_CONFINE_READ_ONLY)
		rc = check_read_only(t, g);
	return rc;
}

/* ---- running git ---- */

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
static bool entry_runs_program(const char *key, const char *value)
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
	static const char *const on[] = { "true", "yes", "on", "1", NULL };
	const char *dot = strchr(key, '.'), *last = strrchr(key, '.');
	size_t slen = dot ? (size_t)(dot - key) : strlen(key);
	bool hit = false;

	for (size_t i = 0; sections[i] && !hit; i++)
		hit = strlen(sections[i]) == slen && strncmp(key, sections[i], slen) == 0;
	for (size_t i = 0; names[i] && !hit && last; i++)
		hit = strcmp(last + 1, names[i]) == 0;
	/* pager.<cmd> and core.fsmonitor may be set to false. */
	if (hit && value &&
	    (strncmp(key, "pager.", 6) == 0 || strcmp(key, "core.fsmonitor") == 0)) {
		for (size_t i = 0; off[i]; i++)
			if (strcasecmp(value, off[i]) == 0)
				return false;
		for (size_t i = 0; on[i] && strncmp(key, "pager.", 6) == 0; i++)
			if (strcasecmp(value, on[i]) == 0)
				return false;
	}
	return hit;
}

/*
 * Start a read_only git's argv in av: `sg-helper confine --git`, inside
 * the confinement sg_tool_exec adds, so that git may execute only itself,
 * its exec-path helpers and the ELF interpreter.  A program the
 * configuration names (a filter, textconv, diff command, pager, hook) then
 * fails to start, even one added after git_config_guard read the files:
 * this, not the guard, is what makes the race between the two harmless.
 */
static bool add_exec_only(struct sg_tool_call *t, struct sg_strv *av)
{
	return sg_strv_addv(av, (const char *[]){ t->s->env->helper, "confine", "--mode",
						   "read_only", "--root", t->s->root, "--git",
						   "--", NULL }) == 0;
}

/*
 * The command line outranks every configuration file, so these keys stay
 * off even if the files change after the guard read them (and reach the
 * gits started in submodules, through the environment):
 * diff.submodule=short keeps a diff from starting one.
 */
static bool add_overrides(struct sg_strv *av)
{
	return sg_strv_addv(av, (const char *[]){
		"-c", "core.fsmonitor=false", "-c", "core.pager=cat",
		"-c", "core.hooksPath=/dev/null", "-c", "core.sshCommand=false",
		"-c", "core.askPass=false", "-c", "credential.helper=",
		"-c", "protocol.allow=never", "-c", "gpg.program=false",
		"-c", "log.showSignature=false", "-c", "diff.submodule=short",
		NULL }) == 0;
}

/* Run one git command line for the tool, output bounded, within the host's time. */
static sg_err git_exec(struct sg_tool_call *t, struct sg_strv *av, json_t *env, bool merge,
		       size_t max, struct sg_exec_result *r)
{
	sg_exec_result_init(r, max);
	r->keep_tail = merge;
	return sg_tool_exec(t, sg_strv_get(av), NULL, env, NULL, 0, GIT_TIMEOUT_MS, merge, r);
}

/*
 * `git WORDS...` as av, in read_only mode inside the confinement that lets
 * git run only itself, with the overriding keys unless `bare` (the guard
 * reads the configuration as the files have it).
 */
static sg_err git_argv(struct sg_tool_call *t, const char *const *words, bool bare,
		       struct sg_strv *av)
{
	bool ro = t->mode == SG_CONFINE_READ_ONLY, ok = true;

	if (ro)
		ok = add_exec_only(t, av);
	ok = ok && sg_strv_add(av, "git") == 0;
	if (ro && !bare)
		ok = ok && add_overrides(av);
	ok = ok && sg_strv_addv(av, words) == 0;
	return ok ? SG_OK : sg_err_set(&t->op->err, SG_E_INTERNAL, "out of memory");
}

/*
 * In read_only mode, refuse a git whose configuration (the repository's
 * own, its includes, the environment's ~/.gitconfig and /etc/gitconfig,
 * all writable by a standard-mode agent before) would make it run a
 * program: `git config --list -z` is read first, in the same confinement.
 * This gives the clear sentence when the files stay as they are; when they
 * change between this read and the run (filter and diff drivers have names
 * the repository chooses, so no -c override covers them), add_exec_only's
 * Landlock rule still keeps git from starting the program.
 */
static sg_err git_config_guard(struct sg_tool_call *t, json_t *env)
{
	struct sg_strv av = SG_STRV_INIT;
	struct sg_exec_result r;
	sg_err rc;

	rc = git_argv(t, (const char *[]){ "config", "--list", "-z", NULL }, true, &av);
	if (!rc)
		rc = git_exec(t, &av, env, false, SG_GIT_CONFIG_MAX, &r);
	else
		sg_exec_result_init(&r, 0);
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
	/* Entries are KEY NUL or KEY LF VALUE NUL; p[len] is 0 (buf.h). */
	for (size_t at = 0; at < r.out.len && !rc;) {
		char *e = r.out.p + at, *nl;
		size_t n = strlen(e);

		nl = strchr(e, '\n');
		if (nl)
			*nl = '\0';
		if (entry_runs_program(e, nl ? nl + 1 : NULL))
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
 * The flags that keep a read_only git from handing a file to a program the
 * configuration names (diff.external, a diff driver's command or
 * textconv), for the subcommands that show diffs or file content.  The
 * exec-only rule stops such a program from starting, all but one: the ELF
 * interpreter stays executable because git needs it, and given a
 * workspace file as its argument it would load and run that file.  These
 * flags take the argument away.  NULL when there is nothing to show.
 */
static const char *const *no_program_flags(const char *sub)
{
	static const char *const both[] = { "--no-ext-diff", "--no-textconv", NULL };
	static const char *const textconv[] = { "--no-textconv", NULL };
	static const char *const diffs[] = { "diff", "log", "show", "stash show",
					     "stash list", NULL };

	if (is_one_of(sub, diffs))
		return both;
	if (strcmp(sub, "blame") == 0 || strcmp(sub, "grep") == 0)
		return textconv;
	return NULL;
}

/* The words after `git` for a call (gitExecute), the pathspecs literal. */
static sg_err git_words(struct sg_tool_call *t, const struct git_call *g, struct sg_strv *w)
{
	bool add = strcmp(g->sub, "add") == 0, restore = strcmp(g->sub, "restore --staged") == 0;
	bool commit = strcmp(g->sub, "commit") == 0, ok = true;
	const char *const *flags = t->mode == SG_CONFINE_READ_ONLY ? no_program_flags(g->sub)
								  : NULL;
	size_t n = json_array_size(g->args), dashdash = n;
	char sub[sizeof(g->sub)], *save = NULL;

	ok = sg_strv_add(w, "--no-optional-locks") == 0;
	if (add || restore)
		ok = ok && sg_strv_add(w, "--literal-pathspecs") == 0;
	if (commit && t->git_attribution)
		ok = ok && sg_strv_addv(w, (const char *[]){ "-c", SG_GIT_TRAILER_RULE, NULL }) == 0;
	memcpy(sub, g->sub, sizeof(sub));
	for (char *word = strtok_r(sub, " ", &save); ok && word; word = strtok_r(NULL, " ", &save))
		ok = sg_strv_add(w, word) == 0;
	if (flags)
		ok = ok && sg_strv_addv(w, flags) == 0;
	if (add || restore)
		ok = ok && sg_strv_add(w, "--") == 0;
	/* The trailer goes before commit's pathspecs (gitattribution). */
	for (size_t i = g->from; commit && i < n && dashdash == n; i++)
		if (strcmp(arg_at(g->args, i), "--") == 0)
			dashdash = i;
	for (size_t i = g->from; ok && i < n; i++) {
		if (commit && t->git_attribution && i == dashdash)
			ok = sg_strv_addv(w, (const char *[]){ "--trailer", SG_GIT_TRAILER, NULL }) == 0;
		if ((add || restore) && strcmp(arg_at(g->args, i), "--") == 0)
			continue;
		ok = ok && sg_strv_add(w, arg_at(g->args, i)) == 0;
	}
	if (ok && commit && t->git_attribution && dashdash == n)
		ok = sg_strv_addv(w, (const char *[]){ "--trailer", SG_GIT_TRAILER, NULL }) == 0;
	return ok ? SG_OK : sg_err_set(&t->op->err, SG_E_INTERNAL, "out of memory");
}

/*
 * status's words: porcelain v1 with NULs, and of the caller's flags only
 * those that change what it reports (gitStatus).
 */
static sg_err status_words(struct sg_tool_call *t, const struct git_call *g, struct sg_strv *w)
{
	static const char *const pairs[] = { "-u", "--untracked-files", "--ignore-submodules",
					     "--find-renames", "-M", NULL };
	static const char *const single[] = { "--renames", "--no-renames", "--ignored", NULL };
	static const char *const joined[] = { "--untracked-files=", "--ignore-submodules=",
					      "--find-renames=", "-M", NULL };
	bool ok = sg_strv_addv(w, (const char *[]){ "--no-optional-locks", "status",
						     "--porcelain=v1", "-z", NULL }) == 0;

	for (size_t i = g->from; ok && i < json_array_size(g->args); i++) {
		const char *a = arg_at(g->args, i), *next = arg_at(g->args, i + 1);
		bool keep = is_one_of(a, single);

		for (size_t k = 0; joined[k] && !keep; k++)
			keep = strncmp(a, joined[k], strlen(joined[k])) == 0;
		if (is_one_of(a, pairs)) {
			ok = !next || (sg_strv_add(w, a) == 0 && sg_strv_add(w, next) == 0);
			i++;
		} else if (keep) {
			ok = sg_strv_add(w, a) == 0;
		}
	}
	return ok ? SG_OK : sg_err_set(&t->op->err, SG_E_INTERNAL, "out of memory");
}

/* What one git command printed, exit code and all (runGit's core). */
struct git_out {
	int exit_code;
	bool timed_out, truncated;
	bool redacted;           /* a sensitive file's diff or grep lines were masked */
	struct sg_buf text;      /* what the view shows as output */
	struct sg_buf stdout_;   /* stdout alone (status parses it) */
};

/* Run words (after `git`) and keep its output the host's way. */
static sg_err git_run(struct sg_tool_call *t, const char *const *words, json_t *env, bool split,
		      struct git_out *o)
{
	struct sg_strv av = SG_STRV_INIT;
	struct sg_exec_result r;
	sg_err rc = git_argv(t, words, false, &av);

	sg_exec_result_init(&r, 0);
	if (!rc)
		rc = git_exec(t, &av, env, !split, split ? SG_TOOL_OUTPUT : GIT_OUTPUT_MAX - GIT_MARK_ROOM,
			      &r);
	if (rc)
		goto out;
	o->timed_out = r.timed_out;
	o->exit_code = r.timed_out ? 124 : r.signal ? -1 : r.exit_code;
	if (split) {
		/* stdout then stderr, as the host joins them. */
		if (sg_buf_add(&o->stdout_, r.out.p, r.out.len) ||
		    sg_buf_add(&o->text, r.out.p, r.out.len) ||
		    sg_buf_add(&o->text, r.err.p, r.err.len))
			o->truncated = true;
		o->truncated |= r.truncated;
	} else if (sg_exec_text(&r, &o->text)) {
		rc = sg_err_set(&t->op->err, SG_E_INTERNAL, "out of memory");
	} else {
		o->truncated = r.truncated;
	}
out:
	sg_exec_result_release(&r);
	sg_strv_release(&av);
	return rc;
}

/* A path token of a diff header ("a/x", "\"b/y\"", /dev/null), into one. */
static const char *diff_path(const char *s, size_t n, char *one, size_t cap)
{
	while (n && strchr(" \t\"'", *s))
		s++, n--;
	while (n && strchr(" \t\r\"'", s[n - 1]))
		n--;
	if (n >= 2 && (s[0] == 'a' || s[0] == 'b') && s[1] == '/')
		s += 2, n -= 2;
	if (n >= cap || (n == 9 && memcmp(s, "/dev/null", 9) == 0))
		n = 0;
	memcpy(one, s, n);
	one[n] = '\0';
	return n ? sg_fs_sensitive(one) : NULL;
}

/* Why a diff block's line (n bytes) names a sensitive path (gitDiffPathCandidates). */
static const char *diff_line_sensitive(const char *l, size_t n, char *one, size_t cap)
{
	const char *why = NULL, *sp;

	while (n && (*l == ' ' || *l == '\t'))
		l++, n--;
	if (n > 11 && memcmp(l, "diff --git ", 11) == 0) {
		const char *a = l + 11, *end = l + n;

		sp = memchr(a, ' ', (size_t)(end - a));
		if (sp) {
			const char *b = sp + 1, *sp2 = memchr(b, ' ', (size_t)(end - b));

			why = diff_path(a, (size_t)(sp - a), one, cap);
			if (!why)
				why = diff_path(b, (size_t)((sp2 ? sp2 : end) - b), one, cap);
		}
	} else if (n > 4 && (memcmp(l, "--- ", 4) == 0 || memcmp(l, "+++ ", 4) == 0)) {
		sp = memchr(l + 4, ' ', n - 4);
		why = diff_path(l + 4, (size_t)((sp ? sp : l + n) - (l + 4)), one, cap);
	} else if (n > 12 && memcmp(l, "rename from ", 12) == 0) {
		why = diff_path(l + 12, n - 12, one, cap);
	} else if (n > 10 && memcmp(l, "rename to ", 10) == 0) {
		why = diff_path(l + 10, n - 10, one, cap);
	}
	return why;
}

/* ---- credential values in git's output (the host's gitSecretValuePatterns) ---- */

static bool word_ch(unsigned char c)
{
	return (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') || c == '_';
}

static bool space_ch(unsigned char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

/* Whether p[0..n) starts with lower-case word w, in any case; its length or 0. */
static size_t ci_word(const char *p, size_t n, const char *w)
{
	size_t k = strlen(w);

	if (k > n)
		return 0;
	for (size_t i = 0; i < k; i++)
		if ((char)(((unsigned char)p[i] >= 'A' && (unsigned char)p[i] <= 'Z')
				   ? p[i] - 'A' + 'a' : p[i]) != w[i])
			return 0;
	return k;
}

static size_t span(const char *p, size_t n, bool (*in)(unsigned char))
{
	size_t i = 0;

	while (i < n && in((unsigned char)p[i]))
		i++;
	return i;
}

static bool bearer_ch(unsigned char c)
{
	return word_ch(c) ? c != '_' : c != '\0' && strchr(".~+/=-", c) != NULL;
}

static bool value_ch(unsigned char c)
{
	return !space_ch(c) && c != '"' && c != '\'' && c != ',' && c != ';';
}

/* "bearer" spaces token: its length from p, or 0. */
static size_t bearer_at(const char *p, size_t n)
{
	size_t i = ci_word(p, n, "bearer"), sp, tok;

	if (!i)
		return 0;
	sp = span(p + i, n - i, space_ch);
	tok = sp ? span(p + i + sp, n - i - sp, bearer_ch) : 0;
	return tok ? i + sp + tok : 0;
}

/* "authorization" [:=] "bearer" token (the first pattern). */
static size_t auth_bearer_at(const char *p, size_t n)
{
	size_t i = ci_word(p, n, "authorization"), b;

	if (!i)
		return 0;
	i += span(p + i, n - i, space_ch);
	if (i >= n || (p[i] != ':' && p[i] != '='))
		return 0;
	i++;
	i += span(p + i, n - i, space_ch);
	b = bearer_at(p + i, n - i);
	return b ? i + b : 0;
}

/* One of the host's keys, as its alternation takes it first; its length. */
static size_t secret_key_at(const char *p, size_t n)
{
	static const char *const two[][2] = { { "api", "key" }, { "access", "token" },
					      { "refresh", "token" } };
	static const char *const one[] = { "authorization", "password", "secret", NULL };

	for (size_t k = 0; k < sizeof(two) / sizeof(two[0]); k++) {
		size_t i = ci_word(p, n, two[k][0]), j;

		if (!i)
			continue;
		if (i < n && (p[i] == '_' || p[i] == '-') && ci_word(p + i + 1, n - i - 1, two[k][1]))
			return i + 1 + strlen(two[k][1]);
		if ((j = ci_word(p + i, n - i, two[k][1])) != 0)
			return i + j;
	}
	for (size_t k = 0; one[k]; k++)
		if (ci_word(p, n, one[k]))
			return strlen(one[k]);
	return 0;
}

/* key [:=] ["']value (the third pattern). */
static size_t key_value_at(const char *p, size_t n)
{
	size_t i = secret_key_at(p, n), v;

	if (!i)
		return 0;
	i += span(p + i, n - i, space_ch);
	if (i >= n || (p[i] != ':' && p[i] != '='))
		return 0;
	i++;
	i += span(p + i, n - i, space_ch);
	if (i < n && (p[i] == '"' || p[i] == '\''))
		i++;
	v = span(p + i, n - i, value_ch);
	return v ? i + v : 0;
}

static bool user_ch(unsigned char c)
{
	return !space_ch(c) && c != '/' && c != ':' && c != '@';
}

static bool pass_ch(unsigned char c)
{
	return !space_ch(c) && c != '/' && c != '@';
}

/* scheme://user:password@ (the fourth pattern). */
static size_t url_at(const char *p, size_t n)
{
	static const char *const schemes[] = { "https://", "http://", "ssh://", "git://", NULL };
	size_t i = 0, u, w;

	for (size_t k = 0; schemes[k] && !i; k++)
		i = ci_word(p, n, schemes[k]);
	if (!i)
		return 0;
	u = span(p + i, n - i, user_ch);
	if (!u || i + u >= n || p[i + u] != ':')
		return 0;
	i += u + 1;
	w = span(p + i, n - i, pass_ch);
	return w && i + w < n && p[i + w] == '@' ? i + w + 1 : 0;
}

/* The host's replacement for a match m (n bytes). */
static bool secret_put(struct sg_buf *out, const char *m, size_t n)
{
	const char *sep = memchr(m, ':', n), *scheme = memmem(m, n, "://", 3);
	size_t k;

	if (n > 7 && ci_word(m, n, "bearer ") == 7)
		return sg_buf_adds(out, "Bearer [REDACTED]") == 0;
	if (scheme && memchr(m, '@', n))
		return sg_buf_add(out, m, (size_t)(scheme - m) + 3) == 0 &&
		       sg_buf_adds(out, "[REDACTED]@") == 0;
	if (!sep)
		sep = memchr(m, '=', n);
	if (!sep)
		return sg_buf_adds(out, "[REDACTED]") == 0;
	k = (size_t)(sep - m);
	while (k && space_ch((unsigned char)m[k - 1]))
		k--;
	return sg_buf_add(out, m, k) == 0 && sg_buf_addc(out, *sep) == 0 &&
	       sg_buf_adds(out, "[REDACTED]") == 0;
}

/*
 * One of the host's patterns over o->text (at_word: it starts at a word
 * boundary), each match replaced; linear, no regular expression.
 */
static void secret_pass(struct git_out *o, size_t (*at)(const char *, size_t), bool at_word)
{
	struct sg_buf out = SG_BUF_INIT(o->text.max);
	const char *p = o->text.p;
	size_t n = o->text.len, i = 0, start = 0;
	bool hit = false, ok = true;

	while (ok && i < n) {
		size_t m = (!at_word || i == 0 || !word_ch((unsigned char)p[i - 1]))
				   ? at(p + i, n - i) : 0;

		if (!m) {
			i++;
			continue;
		}
		ok = sg_buf_add(&out, p + start, i - start) == 0 && secret_put(&out, p + i, m);
		hit = true;
		i += m;
		start = i;
	}
	ok = ok && sg_buf_add(&out, p + start, n - start) == 0;
	if (ok && hit) {
		sg_buf_reset(&o->text);
		o->redacted = sg_buf_add(&o->text, out.p, out.len) == 0;
	}
	sg_buf_release(&out);
}

/*
 * Mask what the host masks in every mode (sanitizeGitOutput): each diff
 * block ("diff --git" to the next) that touches a sensitive path becomes
 * two lines saying so, and a `git grep` line in a sensitive file keeps
 * only its path.
 */
static void git_sanitize(const char *sub, struct git_out *o)
{
	static const char *const diffs[] = { "diff", "show", "log", "stash show", NULL };
	bool diff = is_one_of(sub, diffs), grep = strcmp(sub, "grep") == 0;
	struct sg_buf out = SG_BUF_INIT(o->text.max);
	char one[SG_PATH_MAX + 1];
	const char *p = o->text.p, *end;
	bool skip = false, ok = true;

	if ((!diff && !grep) || !p)
		return;
	end = p + o->text.len;
	while (ok && p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p)), *why = NULL;
		size_t n = nl ? (size_t)(nl - p) + 1 : (size_t)(end - p);

		if (diff && n > 11 && memcmp(p, "diff --git ", 11) == 0) {
			skip = false;
			/* The block's header lines decide; look ahead to its end. */
			for (const char *q = p; q < end && !why;) {
				const char *qn = memchr(q, '\n', (size_t)(end - q));
				size_t qlen = qn ? (size_t)(qn - q) : (size_t)(end - q);

				if (q != p && qlen >= 11 && memcmp(q, "diff --git ", 11) == 0)
					break;
				why = diff_line_sensitive(q, qlen, one, sizeof(one));
				q = qn ? qn + 1 : end;
			}
			if (why) {
				skip = o->redacted = true;
				ok = sg_buf_addf(&out, "diff --git [REDACTED sensitive path]\n"
						 "[REDACTED git diff for sensitive path \"%s\" (%s)]\n",
						 one, why) == 0;
			}
		} else if (grep && memchr(p, ':', n)) {
			size_t k = (size_t)((const char *)memchr(p, ':', n) - p);

			if (k && k < sizeof(one)) {
				memcpy(one, p, k);
				one[k] = '\0';
				why = sg_fs_sensitive(one);
			}
			if (why) {
				o->redacted = true;
				ok = sg_buf_addf(&out, "%s:[REDACTED git grep output for sensitive path "
						 "(%s)]%s", one, why, nl ? "\n" : "") == 0;
				p += n;
				continue;
			}
		}
		if (!skip)
			ok = sg_buf_add(&out, p, n) == 0;
		p += n;
	}
	if (ok && o->redacted) {
		sg_buf_reset(&o->text);
		ok = sg_buf_add(&o->text, out.p, out.len) == 0;
	}
	sg_buf_release(&out);
}

/* Every mask the host puts on git's output, in its order. */
static void git_mask(const char *sub, struct git_out *o)
{
	git_sanitize(sub, o);
	if (!o->text.p)
		return;
	secret_pass(o, auth_bearer_at, true);
	secret_pass(o, bearer_at, true);
	secret_pass(o, key_value_at, true);
	secret_pass(o, url_at, false);
}

/*
 * The output the view shows: whole, or (status, whose stdout is read
 * whole to be parsed) its first GIT_OUTPUT_MAX bytes, cut on a character.
 */
static json_t *git_output(struct git_out *o)
{
	size_t n = o->text.len;

	if (n > GIT_OUTPUT_MAX) {
		n = sg_utf8_clip(o->text.p, n, GIT_OUTPUT_MAX);
		o->truncated = true;
	}
	return sg_json_text(o->text.p, n);
}

static void git_out_init(struct git_out *o)
{
	memset(o, 0, sizeof(*o));
	sg_buf_init(&o->text, SG_TOOL_OUTPUT + SG_KiB);
	sg_buf_init(&o->stdout_, SG_TOOL_OUTPUT);
}

static void git_out_release(struct git_out *o)
{
	sg_buf_release(&o->text);
	sg_buf_release(&o->stdout_);
}

/* A porcelain status letter in the host's words (statusDescription). */
static const char *status_word(char c)
{
	switch (c) {
	case 'A': return "added";
	case 'M': return "modified";
	case 'D': return "deleted";
	case 'R': return "renamed";
	case 'C': return "copied";
	case 'T': return "type_changed";
	case 'U': return "unmerged";
	default: return "unknown";
	}
}

/*
 * `git status --porcelain=v1 -z` (p, n bytes) into view's staged,
 * unstaged and untracked.  A rename or copy names its source in the next
 * NUL-separated field, which is skipped.
 */
static void status_parse(const char *p, size_t n, json_t *view)
{
	json_t *staged = json_array(), *unstaged = json_array(), *untracked = json_array();
	size_t at = 0;

	while (at < n) {
		const char *rec = p + at;
		size_t len = strnlen(rec, n - at);

		at += len + 1;
		if (len < 4)
			continue;
		if (rec[0] == 'R' || rec[0] == 'C' || rec[1] == 'R' || rec[1] == 'C')
			at += strnlen(p + at, at < n ? n - at : 0) + 1;
		if (rec[0] == '?' && rec[1] == '?') {
			json_array_append_new(untracked, sg_json_text(rec + 3, len - 3));
			continue;
		}
		if (rec[0] == '!' && rec[1] == '!')
			continue;
		if (rec[0] != ' ' && rec[0] != '?')
			json_array_append_new(staged,
					      json_pack("{s:o, s:s}", "file",
							sg_json_text(rec + 3, len - 3), "status",
							status_word(rec[0])));
		if (rec[1] != ' ' && rec[1] != '?')
			json_array_append_new(unstaged,
					      json_pack("{s:o, s:s}", "file",
							sg_json_text(rec + 3, len - 3), "status",
							status_word(rec[1])));
	}
	json_object_set_new(view, "staged", staged);
	json_object_set_new(view, "unstaged", unstaged);
	json_object_set_new(view, "untracked", untracked);
}

/* The host's next_suggestions after status (gitStatusNextSuggestions). */
static const char *status_suggestion(json_t *view, int exit_code, bool timed_out)
{
	if (timed_out)
		return "retry git status with narrower flags or inspect repository state with git diff";
	if (exit_code != 0)
		return "inspect git status output and resolve repository errors before continuing";
	if (!json_array_size(json_object_get(view, "staged")) &&
	    !json_array_size(json_object_get(view, "unstaged")) &&
	    !json_array_size(json_object_get(view, "untracked")))
		return "working tree is clean; use prior validation evidence before finishing";
	if (json_array_size(json_object_get(view, "unstaged")) ||
	    json_array_size(json_object_get(view, "untracked")))
		return "run git diff or read_file relevant paths before deciding what to stage, "
		       "commit, or report";
	return "review staged changes with git diff --cached before committing";
}

/* The host's next_suggestions after any other subcommand (gitNextSuggestions). */
static const char *git_suggestion(const char *sub, int exit_code, bool timed_out)
{
	static const char *const evidence[] = { "diff", "show", "log", "blame", "grep", NULL };

	if (timed_out)
		return "retry with a narrower git command or inspect repository state with git status";
	if (exit_code != 0)
		return "inspect the git output, then correct the command or run git status before "
		       "retrying";
	if (is_one_of(sub, evidence))
		return "use this git output as evidence, or read_file relevant paths before editing";
	if (strcmp(sub, "add") == 0)
		return "review staged changes with git diff --cached before committing";
	if (strcmp(sub, "restore --staged") == 0)
		return "run git status to confirm the index now matches the intended staging set";
	if (strcmp(sub, "commit") == 0)
		return "confirm git status is clean or contains only intentional remaining changes";
	if (strcmp(sub, "push") == 0)
		return "confirm the remote update succeeded and report the pushed branch";
	return "use this git output as evidence for the next action";
}

/* The host's action word: lower case, runs of other characters made '_'. */
static void git_action(const char *sub, char *out, size_t cap)
{
	size_t n = 0;
	bool gap = false;

	for (const char *p = sub; *p && n + 2 < cap; p++) {
		char c = (char)(*p >= 'A' && *p <= 'Z' ? *p - 'A' + 'a' : *p);
		bool word = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');

		if (word && gap && n)
			out[n++] = '_';
		if (word)
			out[n++] = c;
		gap = !word;
	}
	out[n] = '\0';
	if (!n)
		snprintf(out, cap, "git");
}

/* push's arguments, checked against the branch checked out now. */
static sg_err push_branch(struct sg_tool_call *t, const struct git_call *g, json_t *env)
{
	struct git_out o;
	sg_err rc;
	size_t n;

	if (json_array_size(g->args) == g->from)
		return SG_OK;
	git_out_init(&o);
	rc = git_run(t, (const char *[]){ "--no-optional-locks", "rev-parse", "--abbrev-ref",
					  "HEAD", NULL }, env, true, &o);
	n = o.stdout_.len;
	while (n && (o.stdout_.p[n - 1] == '\n' || o.stdout_.p[n - 1] == ' '))
		n--;
	if (!rc && (o.exit_code != 0 || !n || (n == 4 && memcmp(o.stdout_.p, "HEAD", 4) == 0)))
		rc = sg_err_set(&t->op->err, SG_E_INVALID_ARGUMENT,
				"git push requires a checked-out branch");
	if (!rc && strcmp(arg_at(g->args, g->from + 1), "origin") != 0)
		rc = sg_err_set(&t->op->err, SG_E_PERMISSION,
				"git push only allows remote \"origin\" in restricted mode");
	if (!rc && (strlen(arg_at(g->args, g->from + 2)) != n ||
		    memcmp(arg_at(g->args, g->from + 2), o.stdout_.p, n) != 0))
		rc = sg_err_set(&t->op->err, SG_E_PERMISSION,
				"git push only allows current branch \"%.*s\", got \"%s\"",
				(int)n, o.stdout_.p, arg_at(g->args, g->from + 2));
	git_out_release(&o);
	return rc;
}

/*
 * The first sensitive path among NUL-separated names p[0..n) (porcelain
 * records when `porcelain`: "XY PATH", a rename's source in the next
 * field), or NULL; *why its reason.
 */
static const char *first_sensitive(const char *p, size_t n, bool porcelain, const char **why)
{
	for (size_t at = 0; at < n;) {
		const char *rec = p + at, *name = porcelain ? rec + 3 : rec;
		size_t len = strnlen(rec, n - at);

		at += len + 1;
		if (porcelain && len < 4)
			continue;
		if ((*why = sg_fs_sensitive(name)) != NULL)
			return name;
		if (porcelain && (rec[0] == 'R' || rec[0] == 'C' || rec[1] == 'R' || rec[1] == 'C') &&
		    at < n) {
			name = p + at;
			at += strnlen(name, n - at) + 1;
			if ((*why = sg_fs_sensitive(name)) != NULL)
				return name;
		}
	}
	return NULL;
}

/*
 * What add would stage and what commit would record, checked for
 * sensitive paths in every mode, unconfined included, as the host checks
 * them (rejectSensitiveStagePathspecs, rejectSensitiveStagedCommitPaths):
 * a directory named to add may hold a .env.
 */
static sg_err staging_guard(struct sg_tool_call *t, const struct git_call *g, json_t *env)
{
	bool add = strcmp(g->sub, "add") == 0;
	struct sg_strv w = SG_STRV_INIT;
	const char *path, *why = NULL;
	struct git_out o;
	bool ok;
	sg_err rc;

	if (!add && strcmp(g->sub, "commit") != 0)
		return SG_OK;
	git_out_init(&o);
	ok = add ? sg_strv_addv(&w, (const char *[]){ "--no-optional-locks", "--literal-pathspecs",
						      "status", "--porcelain=v1", "-z",
						      "--untracked-files=all", "--", NULL }) == 0
		 : sg_strv_addv(&w, (const char *[]){ "--no-optional-locks", "diff", "--cached",
						      "--name-only", "-z", NULL }) == 0;
	for (size_t i = g->from; ok && add && i < json_array_size(g->args); i++)
		if (strcmp(arg_at(g->args, i), "--") != 0)
			ok = sg_strv_add(&w, arg_at(g->args, i)) == 0;
	rc = ok ? git_run(t, sg_strv_get(&w), env, true, &o)
		: sg_err_set(&t->op->err, SG_E_INTERNAL, "out of memory");
	if (!rc && (o.exit_code != 0 || o.truncated))
		rc = sg_err_set(&t->op->err, SG_E_INVALID_ARGUMENT,
				"inspect %s: git exited %d: %.200s",
				add ? "paths before git add" : "staged paths before commit",
				o.exit_code, o.text.p ? o.text.p + o.stdout_.len : "");
	path = rc ? NULL : first_sensitive(o.stdout_.p, o.stdout_.len, add, &why);
	if (path && add)
		rc = sg_err_set(&t->op->err, SG_E_PERMISSION,
				"git add refuses sensitive path \"%.200s\" (%s). Ask the user for "
				"explicit secret handling before staging", path, why);
	else if (path)
		rc = sg_err_set(&t->op->err, SG_E_PERMISSION,
				"git commit refuses staged sensitive path \"%.200s\" (%s). Ask the "
				"user for explicit secret handling before committing", path, why);
	git_out_release(&o);
	sg_strv_release(&w);
	return rc;
}

/* After a write, what the host adds: the commit made, or the index now. */
static void git_after(struct sg_tool_call *t, const struct git_call *g, json_t *env,
		      json_t *view)
{
	bool commit = strcmp(g->sub, "commit") == 0;
	struct git_out o;

	if (!commit && strcmp(g->sub, "add") != 0 && strcmp(g->sub, "restore --staged") != 0)
		return;
	git_out_init(&o);
	if (commit && !git_run(t, (const char *[]){ "--no-optional-locks", "log", "-1",
						    "--format=%H%x00%s", NULL }, env, true, &o) &&
	    o.exit_code == 0 && memchr(o.stdout_.p, '\0', o.stdout_.len)) {
		size_t h = strlen(o.stdout_.p), s = o.stdout_.len - h - 1;
		const char *subj = o.stdout_.p + h + 1;

		while (s && (subj[s - 1] == '\n' || subj[s - 1] == ' '))
			s--;
		json_object_set_new(view, "commit_sha", sg_json_text(o.stdout_.p, h));
		json_object_set_new(view, "commit_subject", sg_json_text(subj, s));
	} else if (!commit && !git_run(t, (const char *[]){ "--no-optional-locks", "status",
							    "--porcelain=v1", "-z", NULL },
				       env, true, &o) && o.exit_code == 0) {
		status_parse(o.stdout_.p, o.stdout_.len, view);
	}
	git_out_release(&o);
}

/* The tree's revision after the command, from the helper ("" if none). */
static void git_revision(struct sg_tool_call *t, json_t *view)
{
	json_t *reply = NULL;
	const char *rev = NULL;
	struct sg_errinfo keep = t->op->err;

	if (!sg_tool_fs(t, (const char *[]){ "revision", NULL }, NULL, 0, &reply))
		rev = json_string_value(json_object_get(reply, "workspace_revision"));
	/* A revision that could not be read is the host's "", not a failure. */
	t->op->err = keep;
	json_object_set_new(view, "workspace_revision", json_string(rev ? rev : ""));
	json_decref(reply);
}

/* The non-interactive environment git runs in (the host's). */
static json_t *git_env(struct sg_tool_call *t)
{
	json_t *env = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "GIT_TERMINAL_PROMPT", "0",
				"GIT_PAGER", "cat", "PAGER", "cat", "GIT_EDITOR", "true",
				"EDITOR", "true", "NO_COLOR", "1");

	if (env && t->mode == SG_CONFINE_READ_ONLY)
		json_object_set_new(env, "GIT_OPTIONAL_LOCKS", json_string("0"));
	return env;
}

/*
 * The host's git revision from `git status --porcelain=v2 -z --branch`
 * (workspaceRevision): "git:" + the first 12 of HEAD's hex digits (of the
 * `# branch.oid` record, its non-hex characters dropped) + ":worktree:" +
 * 16 hex digits of the SHA-256 of every other record that does not open
 * with "# ", each with its NUL.  false when HEAD has no hex digit at all
 * (the host then keeps its filesystem form).  An unborn branch's
 * "(initial)" keeps its one hex letter, "a", as the host's does.
 */
static bool revision_of_status(const char *p, size_t n, char *out, size_t cap)
{
	static const char oid[] = "# branch.oid ";
	char head[GIT_REVISION_HEAD + 1] = "", hex[2 * SG_SHA256_LEN + 1];
	size_t nh = 0;
	struct sg_sha256 h;

	sg_sha256_init(&h);
	for (size_t at = 0; at < n;) {
		const char *rec = p + at, *nul = memchr(rec, '\0', n - at);
		size_t len = nul ? (size_t)(nul - rec) : n - at;

		at += len + 1;
		if (len >= sizeof(oid) - 1 && memcmp(rec, oid, sizeof(oid) - 1) == 0) {
			nh = 0;
			for (size_t i = sizeof(oid) - 1; i < len && nh < GIT_REVISION_HEAD; i++)
				if (isxdigit((unsigned char)rec[i]))
					head[nh++] = (char)tolower((unsigned char)rec[i]);
			head[nh] = '\0';
		} else if (len && !(len >= 2 && rec[0] == '#' && rec[1] == ' ')) {
			sg_sha256_update(&h, rec, len);
			sg_sha256_update(&h, "", 1);
		}
	}
	sg_sha256_final_hex(&h, hex);
	return nh && snprintf(out, cap, "git:%s:worktree:%.*s", head, GIT_REVISION_DIGEST, hex) <
			     (int)cap;
}

/*
 * The last git revision this process computed and what it was computed
 * from: the root, the tree's own digest and the helper's digest of what
 * git reads beside the tree (fs.h).  While neither digest moves, git's
 * answer stands and no git runs: a tool call in an unchanged repository
 * costs no process.  One entry: a gateway serves one session's root.
 */
static pthread_mutex_t revision_lock = PTHREAD_MUTEX_INITIALIZER;
static char revision_key[SG_PATH_MAX + 128];
static char revision_value[64];

/* The cache key of a reply, or false when it cannot be cached. */
static bool revision_key_of(struct sg_tool_call *t, json_t *reply, char *key, size_t n)
{
	const char *fs = json_string_value(json_object_get(reply, "workspace_revision"));
	const char *meta = json_string_value(json_object_get(reply, "workspace_git"));

	return fs && *fs && meta && *meta &&
	       snprintf(key, n, "%s\n%s\n%s", t->s->root, fs, meta) < (int)n;
}

void sg_tool_revision(struct sg_tool_call *t, json_t *reply)
{
	static const char *const words[] = { "--no-optional-locks", "status", "--porcelain=v2",
					     "-z", "--branch", NULL };
	struct sg_tool_call ro = *t;
	struct sg_errinfo keep = t->op->err;
	struct sg_strv av = SG_STRV_INIT;
	struct sg_exec_result r;
	char rev[64] = "", key[sizeof(revision_key)];
	json_t *env, *mark;
	bool cached;

	/* write and edit put the revision in the view they hand over whole. */
	if (!json_object_get(reply, "workspace_git") &&
	    json_is_object(json_object_get(reply, "view")))
		reply = json_object_get(reply, "view");
	mark = json_object_get(reply, "workspace_git");
	if (!mark)
		return;
	cached = revision_key_of(t, reply, key, sizeof(key));
	json_object_del(reply, "workspace_git");
	pthread_mutex_lock(&revision_lock);
	if (cached && strcmp(key, revision_key) == 0)
		memcpy(rev, revision_value, sizeof(rev));
	pthread_mutex_unlock(&revision_lock);
	if (rev[0]) {
		json_object_set_new(reply, "workspace_revision", json_string(rev));
		return;
	}
	/*
	 * Whatever the agent's mode, this git is sandgate's own look: read
	 * only, and inside the rule that lets git execute nothing but itself,
	 * so a repository's configured programs (an fsmonitor, a clean
	 * filter) never start.  Where that confinement cannot be had, the
	 * tree's own form stands.
	 */
	ro.mode = SG_CONFINE_READ_ONLY;
	env = git_env(&ro);
	sg_exec_result_init(&r, GIT_REVISION_OUTPUT_MAX);
	if (env && !git_argv(&ro, words, false, &av) &&
	    !sg_tool_exec(&ro, sg_strv_get(&av), NULL, env, NULL, 0, GIT_REVISION_TIMEOUT_MS,
			  false, &r) &&
	    r.exit_code == 0 && !r.signal && !r.timed_out && !r.truncated &&
	    revision_of_status(r.out.p, r.out.len, rev, sizeof(rev))) {
		json_object_set_new(reply, "workspace_revision", json_string(rev));
		pthread_mutex_lock(&revision_lock);
		if (cached) {
			memcpy(revision_key, key, sizeof(revision_key));
			memcpy(revision_value, rev, sizeof(revision_value));
		}
		pthread_mutex_unlock(&revision_lock);
	}
	/* The revision is telemetry: its failure is never the tool's. */
	t->op->err = keep;
	sg_exec_result_release(&r);
	sg_strv_release(&av);
	json_decref(env);
}

/*
 * The host's view of a run (runGit, gitStatus): what it printed, status's
 * lists, what a write left (the commit, the index), the tree's revision
 * and the next step.  NULL when out of memory.
 */
static json_t *git_view(struct sg_tool_call *t, const struct git_call *g, struct git_out *o,
			json_t *env)
{
	bool status = strcmp(g->sub, "status") == 0;
	char action[64];
	json_t *view;

	git_action(g->sub, action, sizeof(action));
	git_mask(g->sub, o);
	view = json_pack("{s:s, s:s, s:i, s:o, s:b}", "action", action, "subcommand", g->sub,
			 "exit_code", o->exit_code, "output", git_output(o), "timed_out",
			 o->timed_out);
	if (!view)
		return NULL;
	if (status)
		status_parse(o->stdout_.p, o->stdout_.len, view);
	else if (o->exit_code == 0 && !o->timed_out)
		git_after(t, g, env, view);
	git_revision(t, view);
	json_object_set_new(view, "next_suggestions",
			    json_pack("[s]", status ? status_suggestion(view, o->exit_code,
									 o->timed_out)
						    : git_suggestion(g->sub, o->exit_code,
								     o->timed_out)));
	if (o->truncated)
		json_object_set_new(view, "truncated", json_true());
	if (o->redacted)
		json_object_set_new(view, "redacted", json_true());
	return view;
}

sg_err sg_tool_git(struct sg_tool_call *t, json_t **result)
{
	struct sg_strv words = SG_STRV_INIT;
	struct git_call g;
	struct git_out o;
	json_t *env = NULL;
	bool status;
	sg_err rc;

	*result = NULL;
	git_out_init(&o);
	rc = git_parse(t, &g);
	if (rc)
		goto out;
	if (is_one_of(g.sub, git_writes) && t->s->profile->mount_read_only) {
		rc = sg_err_set(&t->op->err, SG_E_PERMISSION,
				"git %s writes, and the workspace is mounted read-only "
				"(mount_read_only)", g.sub);
		goto out;
	}
	status = strcmp(g.sub, "status") == 0;
	env = git_env(t);
	if (!env) {
		rc = sg_err_set(&t->op->err, SG_E_INTERNAL, "out of memory");
		goto out;
	}
	if (t->mode == SG_CONFINE_READ_ONLY)
		rc = git_config_guard(t, env);
	if (!rc && strcmp(g.sub, "push") == 0)
		rc = push_branch(t, &g, env);
	if (!rc)
		rc = staging_guard(t, &g, env);
	if (!rc)
		rc = status ? status_words(t, &g, &words) : git_words(t, &g, &words);
	if (!rc)
		rc = git_run(t, sg_strv_get(&words), env, status, &o);
	if (rc)
		goto out;
	*result = sg_tool_result(git_view(t, &g, &o, env), NULL);
	if (!*result)
		rc = sg_err_set(&t->op->err, SG_E_INTERNAL, "out of memory");
out:
	json_decref(env);
	git_out_release(&o);
	sg_strv_release(&words);
	return rc;
}

sg_err sg_tool_git_read_only(struct sg_tool_call *t)
{
	struct git_call g;

	return git_parse(t, &g);
}
