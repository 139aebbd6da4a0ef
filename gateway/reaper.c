/*
 * reaper.c - a removal that outlives its gateway (reaper.h).
 *
 * The gateway side (sg_reaper_start) prepares everything before fork, so
 * the child makes only async-signal-safe calls until execve.  The reaper
 * side (sg_reaper_main) claims the record, says so on the handshake pipe,
 * and removes the environment by its recorded id within its deadline.
 */
#define _GNU_SOURCE /* pipe2, environ */
#include "gateway/reaper.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/fsutil.h"
#include "base/log.h"
#include "gateway/budget.h"
#include "gateway/cli.h"
#include "gateway/envs.h"

/*
 * What the reaper writes on its stdout once it holds the claim, or when it
 * leaves the environment to whoever attached or claimed it meanwhile.
 */
#define CLAIMED "claimed\n"
#define CEDED "ceded\n"

/* The sandgate program, once main() allowed reapers ("" before). */
static char reaper_exe[PATH_MAX];

void sg_reaper_enable(void)
{
	ssize_t n = readlink("/proc/self/exe", reaper_exe, sizeof(reaper_exe) - 1);

	reaper_exe[n > 0 ? n : 0] = '\0';
}

/* In the child: only async-signal-safe calls until execve. */
static void reaper_child(int null, int report, int log, const char *exe, char *const *argv)
{
	struct sigaction dfl = { .sa_handler = SIG_DFL };
	sigset_t none;

	/* Out of the host's process group and session: its signals are not ours. */
	setsid();
	sigaction(SIGPIPE, &dfl, NULL);
	sigaction(SIGTERM, &dfl, NULL);
	sigaction(SIGINT, &dfl, NULL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	if (dup2(null, 0) < 0 || dup2(report, 1) < 0 || dup2(log >= 0 ? log : null, 2) < 0)
		_exit(127);
	sg_close_from(3, -1);
	execve(exe, argv, environ);
	_exit(127);
}

enum claim { CLAIM_NONE, CLAIM_TAKEN, CLAIM_CEDED };

/* Wait up to ms for the reaper's one line on fd. */
static enum claim await_claim(int fd, int64_t ms)
{
	char buf[16] = { 0 };
	size_t got = 0;
	int64_t until = sg_now_ms() + ms;

	while (got < sizeof(buf) - 1 && !memchr(buf, '\n', got)) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		int64_t left = until - sg_now_ms();
		ssize_t n;

		if (left <= 0 || poll(&pfd, 1, (int)left) <= 0)
			return CLAIM_NONE;
		n = read(fd, buf + got, sizeof(buf) - 1 - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return CLAIM_NONE;
		got += (size_t)n;
	}
	if (strcmp(buf, CLAIMED) == 0)
		return CLAIM_TAKEN;
	return strcmp(buf, CEDED) == 0 ? CLAIM_CEDED : CLAIM_NONE;
}

sg_err sg_reaper_start(const struct sg_session *s, const struct sg_reg_key *key,
		       int64_t until_ms, int64_t wait_ms, struct sg_errinfo *err)
{
	const char *config = sg_config_path(s->cfg);
	const char *exe = reaper_exe;
	char until[32], *log_path = NULL;
	char *argv[] = { "sandgate", "__reap", (char *)s->state_dir, NULL,
			 (char *)key->backend, (char *)key->identity, until, NULL };
	int rep[2] = { -1, -1 }, null = -1, log = -1;
	enum claim word;
	pid_t pid;
	sg_err rc = SG_OK;

	/* The embedded default config names no file: "-" says so. */
	argv[3] = (char *)(config && config[0] != '<' ? config : "-");
	snprintf(until, sizeof(until), "%lld", (long long)until_ms);
	if (!exe[0])
		return sg_err_set(err, SG_E_UNAVAILABLE,
				  "no reaper outside the sandgate program (or its executable is gone)");
	if (asprintf(&log_path, "%s/reaper.log", s->state_dir) < 0)
		return sg_err_set(err, SG_E_INTERNAL, "out of memory");
	log = open(log_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null < 0 || pipe2(rep, O_CLOEXEC)) {
		rc = sg_err_set(err, SG_E_INTERNAL, "cannot start the reaper: %s", strerror(errno));
		goto out;
	}
	pid = fork();
	if (pid < 0) {
		rc = sg_err_set(err, SG_E_UNAVAILABLE, "cannot start the reaper: fork: %s",
				strerror(errno));
		goto out;
	}
	if (pid == 0)
		reaper_child(null, rep[1], log, exe, argv);
	close(rep[1]);
	rep[1] = -1;
	word = await_claim(rep[0], wait_ms);
	if (word == CLAIM_TAKEN)
		sg_log_info("the reaper (pid %d) removes environment %s/%s", (int)pid,
			    key->backend, key->identity);
	else if (word == CLAIM_CEDED)
		sg_log_info("environment %s/%s was attached or claimed meanwhile; the reaper left it",
			    key->backend, key->identity);
	else
		rc = sg_err_set(err, SG_E_UNAVAILABLE,
				"the reaper (pid %d) did not claim the environment within %lld ms (see %s)",
				(int)pid, (long long)wait_ms, log_path);
out:
	for (int k = 0; k < 2; k++)
		if (rep[k] >= 0)
			close(rep[k]);
	if (null >= 0)
		close(null);
	if (log >= 0)
		close(log);
	free(log_path);
	return rc;
}

/* ---- the reaper's side ----------------------------------------------- */

struct deadline {
	struct sg_cancel token, done;
	int64_t until;
	pthread_t thread;
	bool running;
};

static void *deadline_main(void *arg)
{
	struct deadline *d = arg;

	if (sg_cancel_sleep(&d->done, d->until - sg_now_ms()) == SG_OK)
		sg_cancel_fire_with(&d->token, SG_E_TIMEOUT, "the reaper's deadline passed");
	return NULL;
}

/*
 * Remove the claimed record's environment by its id, within d's token:
 * the resource first, then the record.  A resource that is gone already
 * counts as removed.  A record without an id is a create whose outcome is
 * unknown: the environment is looked for by its tags (sg_envs_settle),
 * which also settles the record.
 */
static sg_err reap(const char *state_dir, const char *config, const struct sg_reg_key *key,
		   json_t *rec, struct deadline *d, struct sg_errinfo *err)
{
	const char *id = json_string_value(json_object_get(rec, "id"));
	const char *profile = json_string_value(json_object_get(rec, "profile"));
	const struct sg_adapter *ad = sg_adapter_find(key->backend);
	struct sg_config *cfg = NULL;
	struct sg_profile *p = NULL;
	int64_t t0;
	sg_err rc;

	if (!ad || !ad->destroy)
		return sg_err_set(err, SG_E_UNSUPPORTED, "backend %s cannot remove environments here",
				  key->backend);
	rc = sg_config_load(strcmp(config, "-") == 0 ? NULL : config, &cfg, err);
	if (!rc && !id) {
		rc = sg_envs_settle(cfg, state_dir, rec, &d->token, err);
		goto out;
	}
	if (!rc)
		rc = sg_config_profile(cfg, profile, NULL, &p, err);
	if (rc)
		goto out;
	t0 = sg_now_ms();
	rc = ad->destroy(p, state_dir, id, &d->token, err);
	if (!rc)
		sg_budget_record(state_dir, ad->name, SG_BUDGET_REMOVE, sg_now_ms() - t0);
	if (rc == SG_E_NOT_FOUND) {
		sg_err_clear(err);
		rc = SG_OK;
	}
	if (!rc)
		rc = sg_registry_remove(state_dir, key, err);
out:
	sg_profile_free(p);
	sg_config_free(cfg);
	return rc;
}

/* What the reaper could not finish stays for `envs gc`, and says why. */
static void leave_for_gc(const char *state_dir, const struct sg_reg_key *key,
			 const struct sg_errinfo *why)
{
	struct sg_errinfo err = { 0 };
	json_t *fields = json_pack("{s:s, s:s}", "status", SG_REG_CLEANUP, "error", why->msg);

	if (sg_registry_update(state_dir, key, fields, &err))
		sg_log_warn("%s", err.msg);
	json_decref(fields);
}

int sg_reaper_main(int argc, char **argv)
{
	struct deadline d = { 0 };
	struct sg_errinfo err = { 0 };
	struct sg_reg_key key;
	json_t *rec = NULL;
	bool made = false;
	int null, status = SG_EXIT_OK;
	sg_err rc;

	if (argc != 7)
		return SG_EXIT_USAGE;
	key.backend = argv[4];
	key.identity = argv[5];
	d.until = strtoll(argv[6], NULL, 10);
	rc = sg_registry_claim_copy(argv[2], &key, false, &made, &rec, &err);
	if (rc) {
		/* A session attached since, or another remover: it is theirs now. */
		fprintf(stderr, "sandgate reaper: %s/%s: %s; left to it\n", key.backend,
			key.identity, err.msg);
		(void)sg_write_all(1, CEDED, sizeof(CEDED) - 1);
		return SG_EXIT_OK;
	}
	if (sg_write_all(1, CLAIMED, sizeof(CLAIMED) - 1))
		sg_log_warn("the gateway did not wait for the claim");
	null = open("/dev/null", O_WRONLY | O_CLOEXEC);
	if (null >= 0) {
		dup2(null, 1);
		close(null);
	}
	if (made) {
		/* No record: the environment was removed meanwhile. */
		sg_registry_unclaim(argv[2], &key, made);
		goto out;
	}
	if (sg_cancel_init(&d.token) || sg_cancel_init(&d.done)) {
		status = SG_EXIT_SOFTWARE;
		goto out;
	}
	sg_cancel_set_quit(d.until);
	d.running = pthread_create(&d.thread, NULL, deadline_main, &d) == 0;
	rc = reap(argv[2], argv[3], &key, rec, &d, &err);
	if (rc) {
		fprintf(stderr,
			"sandgate reaper: environment %s (%s) could not be removed: %s: %s; it may remain: run `sandgate envs gc`\n",
			json_string_value(json_object_get(rec, "id")), key.backend, sg_err_word(rc),
			err.msg);
		sg_registry_unclaim(argv[2], &key, false);
		leave_for_gc(argv[2], &key, &err);
		status = SG_EXIT_UNAVAILABLE;
	}
	sg_cancel_fire(&d.done, SG_E_CANCELLED);
	if (d.running)
		pthread_join(d.thread, NULL);
	sg_cancel_release(&d.token);
	sg_cancel_release(&d.done);
out:
	json_decref(rec);
	return status;
}
