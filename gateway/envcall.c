/*
 * envcall.c - one sg-helper step in the environment, wherever it is.
 *
 * The same helper code answers in-process for environments on this host
 * and as a program inside remote ones; this file is the only place that
 * knows the difference, so the tools and the process methods are written
 * once against sg_envcall().
 */
#define _GNU_SOURCE /* O_PATH */
#include "gateway/session.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/exec.h"
#include "helper/helper.h"
#include "core/json.h"
#include "base/limits.h"
#include "base/log.h"

static bool in_process(const struct sg_session *s, unsigned how)
{
	unsigned caps = s->env->ad->caps;

	/* A process step must see the pids it records: inside the pid namespace. */
	if ((caps & SG_CAP_PID_NS) && (how & SG_CALL_CTL))
		return false;
	return (caps & SG_CAP_HOST_FS) && !(how & SG_CALL_EXEC);
}

/*
 * The environment's process table, <host_ctl>/proc, for one in-process
 * step: an O_PATH descriptor, reached without following a link at either
 * step (and made when it is missing, as `proc wait` would), or -1 with
 * err set.  The environment's commands write beneath ctl, so they can
 * put a link to a directory of this host where proc was: followed, the
 * gateway would list and read the records and spools it finds there and
 * write its own (the lock file, rewritten records) into it.  The step
 * is handed /proc/self/fd/N, the directory this resolved to once, so no
 * later swap redirects it either.  A proc that is not a directory leaves
 * the session without its process table.
 */
static int table_open(const struct sg_env *env, struct sg_errinfo *err)
{
	int flags = O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
	int ctl = open(env->host_ctl, flags), fd = -1, e;

	if (ctl >= 0) {
		fd = openat(ctl, "proc", flags);
		if (fd < 0 && errno == ENOENT && mkdirat(ctl, "proc", 0700) == 0) {
			fd = openat(ctl, "proc", flags);
			/* Remade by sandgate, it is still the environment's user's. */
			if (fd >= 0 && env->run_as &&
			    fchownat(ctl, "proc", env->run_uid, env->run_gid, AT_SYMLINK_NOFOLLOW)) {
				close(fd);
				fd = -1;
			}
		} else if (fd < 0 && errno == EEXIST) {
			fd = openat(ctl, "proc", flags);
		}
	}
	e = errno;
	if (ctl >= 0)
		close(ctl);
	if (fd < 0 && (e == ELOOP || e == ENOTDIR))
		sg_err_set(err, SG_E_UNAVAILABLE,
			   "the session's process table is unavailable: %s/proc is not a directory "
			   "(a command of the environment replaced it; a link there is not followed)",
			   env->host_ctl);
	else if (fd < 0)
		sg_err_set(err, SG_E_UNAVAILABLE,
			   "the session's process table is unavailable: cannot open %s/proc: %s",
			   env->host_ctl, strerror(e));
	return fd;
}

/*
 * The command words come first ("fs read"), then the options this file
 * adds, then the caller's own arguments: options must precede a `--`.
 * table: the descriptor --ctl names for an in-process step (table_open),
 * -1 otherwise; the caller closes it once the step has returned.  rootfd:
 * root's directory, for a step that acts as the environment's user, who
 * may not pass the directories above it; -1: --host-root names the path.
 */
static sg_err build_argv(struct sg_session *s, unsigned how, bool local,
			 const char *const *args, int rootfd, struct sg_strv *av, int *table,
			 struct sg_errinfo *err)
{
	const struct sg_env *env = s->env;
	size_t n = 0, words;
	sg_err rc = SG_OK;

	*table = -1;
	if (local && (how & SG_CALL_CTL) && (*table = table_open(env, err)) < 0)
		return err->code;

	while (args[n])
		n++;
	words = n >= 2 && strcmp(args[0], "probe") != 0 ? 2 : n;

	if (!local)
		rc = sg_strv_add(av, env->helper);
	for (size_t i = 0; !rc && i < words; i++)
		rc = sg_strv_add(av, args[i]);
	if (!rc && (how & SG_CALL_ROOTED)) {
		rc = sg_strv_add(av, "--root");
		if (!rc)
			rc = sg_strv_add(av, env->root);
		if (!rc && local)
			rc = sg_strv_add(av, "--host-root");
		if (!rc && local && rootfd >= 0)
			rc = sg_strv_addf(av, "/proc/self/fd/%d", rootfd);
		else if (!rc && local)
			rc = sg_strv_add(av, env->host_root);
	}
	/*
	 * A read-only workspace is refused by the helper too, so no writing
	 * fs command reaches it by another path (sg-helper fs --read-only).
	 */
	if (!rc && (how & SG_CALL_ROOTED) && s->profile->mount_read_only &&
	    strcmp(args[0], "fs") == 0)
		rc = sg_strv_add(av, "--read-only");
	if (!rc && (how & SG_CALL_CTL))
		rc = sg_strv_add(av, "--ctl");
	if (!rc && (how & SG_CALL_CTL) && local)
		rc = sg_strv_addf(av, "/proc/self/fd/%d", *table);
	else if (!rc && (how & SG_CALL_CTL))
		rc = sg_strv_addf(av, "%s/proc", env->ctl_dir);
	/*
	 * Run on this host, a stop signals only process groups whose leader
	 * sees the control directory where the environment's processes see
	 * it (sg-helper proc stop --seen-as): the records it reads are the
	 * environment's to write, and could name any process of the host.
	 */
	if (!rc && local && (how & SG_CALL_CTL) && n >= 2 && strcmp(args[0], "proc") == 0 &&
	    (strcmp(args[1], "stop") == 0 || strcmp(args[1], "stop-all") == 0))
		rc = sg_strv_add(av, "--seen-as") || sg_strv_addf(av, "%s/proc", env->ctl_dir);
	for (size_t i = words; !rc && i < n; i++)
		rc = sg_strv_add(av, args[i]);
	if (rc)
		sg_err_set(err, rc, "out of memory building a helper call");
	return rc;
}

sg_err sg_envcall_reply(const char *p, size_t n, json_t **out, struct sg_errinfo *err)
{
	json_t *j = NULL, *e;

	*out = NULL;
	if (sg_json_parse(p, n, SG_JSON_ALLOW_NUL, &j, NULL) || !json_is_object(j)) {
		json_decref(j);
		return sg_err_set(err, SG_E_INTERNAL,
				  "the environment helper gave an unreadable reply");
	}
	e = json_object_get(j, "error");
	if (json_is_string(e)) {
		const char *msg = json_string_value(json_object_get(j, "message"));
		sg_err code = sg_err_from_word(json_string_value(e));

		sg_err_set(err, code, "%s", msg ? msg : "the step failed");
		json_decref(j);
		return code;
	}
	*out = j;
	return SG_OK;
}

/* The exec path of a step: the program inside the environment. */
static sg_err run_exec(struct sg_session *s, const struct sg_strv *av,
		       const char *const *envp, unsigned flags, int64_t timeout_ms,
		       const void *in, size_t inlen, struct sg_exec_result *r,
		       struct sg_cancel *cancel, struct sg_errinfo *err)
{
	struct sg_exec x = {
		.argv = sg_strv_get(av),
		.envp = envp,
		.stdin_data = in,
		.stdin_len = inlen,
		.timeout_ms = timeout_ms,
		.max_output = SG_ENVTOOL_REPLY,
		.flags = flags,
	};
	sg_err rc = s->env->ad->exec(s->env, &x, r, cancel, err);

	if (!rc && r->timed_out)
		rc = sg_err_set(err, SG_E_TIMEOUT,
				"the environment helper did not answer within %lld ms",
				(long long)timeout_ms);
	else if (!rc && (r->exit_code != 0 || r->truncated))
		rc = sg_err_set(err, SG_E_INTERNAL,
				"the environment helper failed (exit %d): %.160s",
				r->exit_code, r->err.p);
	return rc;
}

sg_err sg_envcall_spawn(struct sg_session *s, const char *const *args,
			const char *const *envp, json_t **out,
			struct sg_cancel *cancel, struct sg_errinfo *err)
{
	return sg_envcall_spawn_for(s, args, envp, 0, out, cancel, err);
}

sg_err sg_envcall_spawn_for(struct sg_session *s, const char *const *args,
			    const char *const *envp, int64_t wait_ms, json_t **out,
			    struct sg_cancel *cancel, struct sg_errinfo *err)
{
	struct sg_strv av = SG_STRV_INIT;
	struct sg_exec_result r;
	int table;
	sg_err rc;

	*out = NULL;
	sg_exec_result_init(&r, SG_ENVTOOL_REPLY);
	/*
	 * Never in-process: the spawn runs in the environment and names the
	 * table where its processes see it (no descriptor of ours), which
	 * the supervisor it leaves behind keeps using.
	 */
	rc = build_argv(s, SG_CALL_CTL, false, args, -1, &av, &table, err);
	/*
	 * The spawn is not cancelled (proc.c says why), so its reply is
	 * awaited for a bounded time: the helper answering it is the
	 * environment's, which may never answer at all.
	 */
	if (!rc)
		rc = run_exec(s, &av, envp, SG_EXEC_DETACHES, SG_PROC_SPAWN_MS + wait_ms, NULL, 0,
			      &r, cancel, err);
	if (!rc)
		rc = sg_envcall_reply(r.out.p, r.out.len, out, err);
	sg_exec_result_release(&r);
	sg_strv_release(&av);
	return rc;
}

/*
 * An in-process step acts as the environment's user (sg_env.run_as): this
 * thread's file system ids become theirs, which also takes the thread's
 * capabilities to override file permissions away until they are given
 * back.  Both calls are per thread on Linux, so the gateway's other
 * threads keep their own.  *saved: the ids to give back; false when the
 * thread's ids could not be set, and the step must not run.
 */
static bool become_env_user(const struct sg_env *env, uid_t *saved_uid, gid_t *saved_gid)
{
	*saved_gid = (gid_t)setfsgid(env->run_gid);
	*saved_uid = (uid_t)setfsuid(env->run_uid);
	/* setfsuid answers the old id whatever happened: ask again. */
	return (uid_t)setfsuid((uid_t)-1) == env->run_uid &&
	       (gid_t)setfsgid((gid_t)-1) == env->run_gid;
}

static void become_self(uid_t uid, gid_t gid)
{
	setfsuid(uid);
	setfsgid(gid);
}

/* Run one step, leaving the helper's output in r->out; timeout_ms 0: none. */
static sg_err run_step(struct sg_session *s, unsigned how, const char *const *args,
		       const void *in, size_t inlen, int64_t timeout_ms,
		       struct sg_exec_result *r, struct sg_cancel *cancel,
		       struct sg_errinfo *err)
{
	bool local = in_process(s, how), as_user = local && s->env->run_as, became = false;
	struct sg_strv av = SG_STRV_INIT;
	uid_t uid = 0;
	gid_t gid = 0;
	int table = -1, rootfd = -1;
	sg_err rc = SG_OK;

	/* Opened as sandgate, which may pass the state directory. */
	if (as_user && (how & SG_CALL_ROOTED) &&
	    (rootfd = open(s->env->host_root, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
		rc = sg_err_set(err, SG_E_UNAVAILABLE, "the workspace %s cannot be opened: %s",
				s->env->host_root, strerror(errno));
	if (!rc)
		rc = build_argv(s, how, local, args, rootfd, &av, &table, err);
	if (!rc && as_user) {
		became = true;
		if (!become_env_user(s->env, &uid, &gid))
			rc = sg_err_set(err, SG_E_INTERNAL,
					"cannot act as the environment's user (uid %lu) on this host",
					(unsigned long)s->env->run_uid);
	}

	if (!rc && local) {
		/* sg_helper_run's argv, like the program's, omits argv[0]. */
		int status = sg_helper_run((int)av.n, av.v, in, inlen, &r->out, cancel);

		if (status != 0)
			rc = sg_err_set(err, SG_E_INTERNAL,
					"the environment helper failed (status %d) on `%s %s`",
					status, args[0], args[1] ? args[1] : "");
	} else if (!rc) {
		rc = run_exec(s, &av, sg_strv_get(&s->base_env),
			      (how & SG_CALL_CTL) ? SG_EXEC_CONTROL : 0, timeout_ms, in, inlen, r,
			      cancel, err);
	}
	/* An in-process step forks nothing that outlives it: done with the table. */
	if (table >= 0)
		close(table);
	if (rootfd >= 0)
		close(rootfd);
	if (became)
		become_self(uid, gid);
	sg_strv_release(&av);
	return rc;
}

static sg_err call(struct sg_session *s, unsigned how, const char *const *args,
		   const void *in, size_t inlen, int64_t timeout_ms, json_t **out,
		   struct sg_cancel *cancel, struct sg_errinfo *err)
{
	struct sg_exec_result r;
	sg_err rc;

	*out = NULL;
	sg_exec_result_init(&r, SG_ENVTOOL_REPLY);
	rc = run_step(s, how, args, in, inlen, timeout_ms, &r, cancel, err);
	if (!rc)
		rc = sg_envcall_reply(r.out.p, r.out.len, out, err);
	sg_exec_result_release(&r);
	return rc;
}

sg_err sg_envcall(struct sg_session *s, unsigned how,
		  const char *const *args, const void *in, size_t inlen,
		  json_t **out, struct sg_cancel *cancel,
		  struct sg_errinfo *err)
{
	return call(s, how, args, in, inlen, 0, out, cancel, err);
}

sg_err sg_envcall_within(struct sg_session *s, unsigned how, const char *const *args,
			 int64_t timeout_ms, json_t **out, struct sg_cancel *cancel,
			 struct sg_errinfo *err)
{
	return call(s, how, args, NULL, 0, timeout_ms, out, cancel, err);
}

sg_err sg_envcall_tail(struct sg_session *s, unsigned how, const char *const *args,
		       json_t **out, struct sg_buf *tail, struct sg_cancel *cancel,
		       struct sg_errinfo *err)
{
	struct sg_exec_result r;
	const char *nl;
	sg_err rc;

	*out = NULL;
	sg_exec_result_init(&r, SG_ENVTOOL_REPLY);
	rc = run_step(s, how, args, NULL, 0, 0, &r, cancel, err);
	if (rc)
		goto out;
	/*
	 * The program ends its output with a newline of its own (the
	 * in-process call does not): it is not part of the tail.
	 */
	if (!in_process(s, how) && r.out.len && r.out.p[r.out.len - 1] == '\n')
		r.out.p[--r.out.len] = '\0';
	/*
	 * The JSON is the last line (the helper escapes newlines in strings),
	 * after the tail: a helper streams the tail before it knows the
	 * reply (its digest comes at the end of the read).
	 */
	nl = memrchr(r.out.p, '\n', r.out.len);
	rc = nl ? sg_envcall_reply(nl + 1, r.out.len - (size_t)(nl + 1 - r.out.p), out, err)
		: sg_envcall_reply(r.out.p, r.out.len, out, err);
	/* The tail is the output's head: keep it where it is rather than copy a megabyte. */
	if (!rc && nl) {
		sg_buf_truncate(&r.out, (size_t)(nl - r.out.p));
		if (tail->len == 0 && tail->max >= r.out.max) {
			struct sg_buf empty = *tail;

			*tail = r.out;
			r.out = empty;
		} else if (sg_buf_add(tail, r.out.p, r.out.len)) {
			rc = sg_err_set(err, SG_E_TOO_LARGE, "the helper's reply is too large");
		}
	}
out:
	sg_exec_result_release(&r);
	return rc;
}

sg_err sg_envcall_resolve(struct sg_session *s, const char *path,
			  bool for_write, char **out, struct sg_cancel *cancel,
			  struct sg_errinfo *err)
{
	const char *args[] = { "fs", "resolve", for_write ? "--for-write" : path,
			       for_write ? path : NULL, NULL };
	json_t *reply = NULL;
	const char *abs;
	sg_err rc;

	*out = NULL;
	rc = sg_envcall(s, SG_CALL_ROOTED, args, NULL, 0, &reply, cancel, err);
	if (rc)
		return rc;
	abs = json_string_value(json_object_get(reply, "path"));
	if (!abs) {
		const char *te = json_string_value(json_object_get(reply, "tool_error"));

		rc = sg_err_set(err, SG_E_NOT_FOUND, "%s",
				te ? te : "the path could not be resolved");
	} else if (!(*out = strdup(abs))) {
		rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
	}
	json_decref(reply);
	return rc;
}

/* Set name=value in env, replacing an earlier value of the same name. */
static sg_err env_set(json_t *env, const char *name, size_t nlen,
		      const char *value)
{
	char key[256];

	if (nlen >= sizeof(key))
		return SG_E_INVALID_ARGUMENT;
	memcpy(key, name, nlen);
	key[nlen] = '\0';
	return json_object_set_new(env, key, json_string(value)) ? SG_E_INTERNAL : SG_OK;
}

sg_err sg_envcall_command_env(struct sg_session *s, json_t *extra,
			      struct sg_strv *out, struct sg_errinfo *err)
{
	json_t *env = json_object(), *v;
	const char *const *fwd = s->profile->forward_env;
	const char *k;
	sg_err rc = SG_OK;

	if (!env)
		return sg_err_set(err, SG_E_INTERNAL, "out of memory");
	/*
	 * First, so that what follows wins: the host's forwarded variables
	 * (names and values checked at initialize) may not move HOME, TMPDIR
	 * or PATH out of the environment's layout, nor replace what the
	 * operator forwards.
	 */
	if (json_is_object(s->forwarded) && json_object_update(env, s->forwarded))
		rc = SG_E_INTERNAL;
	for (size_t i = 0; !rc && i < s->base_env.n; i++) {
		const char *kv = s->base_env.v[i], *eq = strchr(kv, '=');

		rc = env_set(env, kv, (size_t)(eq - kv), eq + 1);
	}
	for (size_t i = 0; !rc && fwd && fwd[i]; i++) {
		const char *eq = strchr(fwd[i], '=');

		rc = env_set(env, fwd[i], (size_t)(eq - fwd[i]), eq + 1);
	}
	if (!rc && extra) {
		json_object_foreach(extra, k, v) {
			rc = env_set(env, k, strlen(k), json_string_value(v));
			if (rc)
				break;
		}
	}
	json_object_foreach(env, k, v) {
		if (rc)
			break;
		rc = sg_strv_addf(out, "%s=%s", k, json_string_value(v));
	}
	json_decref(env);
	if (rc)
		return sg_err_set(err, rc == SG_E_INVALID_ARGUMENT ? rc : SG_E_INTERNAL,
				  "an environment variable name is too long or memory ran out");
	return SG_OK;
}

sg_err sg_envcall_can_confine(struct sg_session *s, enum sg_confine mode,
			      struct sg_errinfo *err)
{
	/*
	 * Unseen (the probe did not run at initialize): `sg-helper confine`
	 * checks the ABI itself and runs nothing it cannot confine.
	 */
	if (mode == SG_CONFINE_NONE || s->landlock_abi >= 3 || s->landlock_abi == SG_LANDLOCK_UNSEEN)
		return SG_OK;
	/* sg-helper confine checks the mounts again at every command. */
	if (mode == SG_CONFINE_STANDARD && s->standard_by_mounts)
		return SG_OK;
	return sg_err_set(err, SG_E_PERMISSION,
			  "permission mode %s needs commands confined, and this environment cannot (Landlock ABI %d; 3 or newer is needed)",
			  sg_confine_word(mode), s->landlock_abi);
}

sg_err sg_envcall_confine(struct sg_session *s, enum sg_confine mode,
			  const char *const *argv, struct sg_strv *out,
			  struct sg_errinfo *err)
{
	const char *word = sg_confine_word(mode);
	sg_err rc = sg_envcall_can_confine(s, mode, err);

	if (rc)
		return rc;
	if (mode != SG_CONFINE_NONE) {
		rc = sg_strv_add(out, s->env->helper);
		if (!rc)
			rc = sg_strv_add(out, "confine");
		if (!rc)
			rc = sg_strv_add(out, "--mode");
		if (!rc)
			rc = sg_strv_add(out, word);
		if (!rc)
			rc = sg_strv_add(out, "--root");
		if (!rc)
			rc = sg_strv_add(out, s->root);
		/* Standard mode may also write the environment's private
		 * HOME and TMPDIR, which live outside root, and its /tmp. */
		if (!rc && mode == SG_CONFINE_STANDARD)
			rc = sg_strv_add(out, "--allow-write");
		if (!rc && mode == SG_CONFINE_STANDARD)
			rc = sg_strv_addf(out, "%s/tmp", s->env->ctl_dir);
		if (!rc && mode == SG_CONFINE_STANDARD)
			rc = sg_strv_add(out, "--allow-write");
		if (!rc && mode == SG_CONFINE_STANDARD)
			rc = sg_strv_addf(out, "%s/home", s->env->ctl_dir);
		/* Tools that hard-code /tmp, where it is the environment's. */
		if (!rc && mode == SG_CONFINE_STANDARD && s->env->own_tmp)
			rc = sg_strv_addv(out, (const char *[]){ "--allow-write", "/tmp", NULL });
		if (!rc)
			rc = sg_strv_add(out, "--");
	}
	if (!rc)
		rc = sg_strv_addv(out, argv);
	return rc ? sg_err_set(err, SG_E_INTERNAL, "out of memory") : SG_OK;
}
