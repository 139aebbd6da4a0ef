/*
 * registry.c - records of environments under <state>/registry/.
 */
#define _GNU_SOURCE /* asprintf, O_CLOEXEC with dirfd helpers */
#include "gateway/registry.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/fsutil.h"
#include "base/log.h"
#include "base/slug.h"

/* A process's start time (field 22 of /proc/pid/stat), 0 if it is gone.
 * The command name may hold spaces, so fields are counted after ')'. */
static unsigned long long start_of(long pid)
{
	char path[64], buf[1024], *p;
	unsigned long long start = 0;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
	f = fopen(path, "re");
	if (!f)
		return 0;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	p = strrchr(buf, ')');
	for (int field = 2; p && field < 22; field++)
		p = strchr(p + 1, ' ');
	if (p)
		start = strtoull(p + 1, NULL, 10);
	return start;
}

unsigned long long sg_registry_self_start(void)
{
	return start_of((long)getpid());
}

bool sg_registry_alive(long pid, unsigned long long start_time)
{
	return pid > 0 && start_of(pid) == start_time && start_time != 0;
}

/* The registry directory, created on first use. */
static char *reg_dir(const char *state_dir)
{
	char *dir = NULL;

	if (asprintf(&dir, "%s/registry", state_dir) < 0)
		return NULL;
	if (mkdir(dir, 0700) && errno != EEXIST) {
		free(dir);
		return NULL;
	}
	return dir;
}

static char *record_path(const char *dir, const struct sg_reg_key *key)
{
	char *b = sg_slug(key->backend), *i = sg_slug(key->identity), *p = NULL;

	if (b && i && asprintf(&p, "%s/%s--%s.json", dir, b, i) < 0)
		p = NULL;
	free(b);
	free(i);
	return p;
}

/* Take the registry-wide lock; returns the fd to close, or -1. */
static int lock_dir(const char *dir)
{
	char *path = NULL;
	int fd = -1;

	if (asprintf(&path, "%s/.lock", dir) < 0)
		return -1;
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	free(path);
	if (fd >= 0 && flock(fd, LOCK_EX) != 0) {
		close(fd);
		fd = -1;
	}
	return fd;
}

/* Write j to path atomically: temp file, fsync, rename, fsync the dir. */
static sg_err write_atomic(const char *dir, const char *path, json_t *j,
			   struct sg_errinfo *err)
{
	char *tmp = NULL, *text = json_dumps(j, JSON_INDENT(1) | JSON_SORT_KEYS);
	size_t len = text ? strlen(text) : 0;
	sg_err rc = SG_OK;
	int fd = -1, dfd;

	if (!text || asprintf(&tmp, "%s.tmp.%ld", path, (long)getpid()) < 0) {
		tmp = NULL;
		rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
		goto out;
	}
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || write(fd, text, len) != (ssize_t)len || write(fd, "\n", 1) != 1 ||
	    fsync(fd) != 0 || close(fd) != 0 || rename(tmp, path) != 0) {
		rc = sg_err_set(err, SG_E_INTERNAL, "cannot write the registry record %s: %s",
				path, strerror(errno));
		if (fd >= 0)
			close(fd);
		unlink(tmp);
		goto out;
	}
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0) {
		fsync(dfd);
		close(dfd);
	}
out:
	free(text);
	free(tmp);
	return rc;
}

/*
 * A record is a few hundred bytes; one larger than this was not written
 * by sandgate, and reading it whole would let one bad file hold every
 * gateway that waits on the registry lock.
 */
#define REG_RECORD_MAX (1024 * 1024)

/* Move a record that cannot be used aside to <path>.corrupt and say why. */
static sg_err set_aside(const char *path, const char *why, struct sg_errinfo *err)
{
	char *aside = NULL;

	if (asprintf(&aside, "%s.corrupt", path) >= 0)
		rename(path, aside);
	free(aside);
	return sg_err_set(err, SG_E_INTERNAL,
			  "the registry record %s was corrupt (%s) and was moved aside to .corrupt",
			  path, why);
}

/*
 * Load a record; a missing one is NULL (no error); a corrupt one is moved
 * aside and reported.  Only a regular file of bounded size is read, opened
 * without following a link or waiting for a FIFO's writer: the registry
 * is a directory an operator edits by hand, and list and gc must go on to
 * the other records whatever one file is.
 */
static sg_err load(const char *path, json_t **out, struct sg_errinfo *err)
{
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	json_error_t je = { .text = "" };
	struct sg_buf raw = SG_BUF_INIT(REG_RECORD_MAX);
	struct stat st;
	sg_err rc = SG_OK;

	*out = NULL;
	if (fd < 0 && errno == ENOENT)
		return SG_OK;
	if (fd < 0 && errno != ELOOP && errno != ENXIO)
		return sg_err_set(err, SG_E_INTERNAL, "cannot read the registry record %s: %s",
				  path, strerror(errno));
	if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		rc = set_aside(path, "it is not a regular file", err);
		goto out;
	}
	/*
	 * One read for the whole record, not json_loadfd's read of a byte per
	 * call: a record of 800 bytes cost 800 reads of the kernel, several
	 * milliseconds of every initialize and shutdown.  The buffer's bound
	 * is the size check, whatever the file's size was at the fstat.
	 */
	rc = sg_read_all(fd, &raw);
	if (rc) {
		rc = rc == SG_E_TOO_LARGE
			     ? set_aside(path, "it is larger than a record can be", err)
			     : sg_err_set(err, SG_E_INTERNAL,
					  "cannot read the registry record %s: %s", path,
					  strerror(errno));
		goto out;
	}
	*out = json_loadb(raw.p, raw.len, 0, &je);
	if (*out && json_is_object(*out))
		goto out;
	json_decref(*out);
	*out = NULL;
	rc = set_aside(path, je.text[0] ? je.text : "it is not a JSON object", err);
out:
	if (fd >= 0)
		close(fd);
	sg_buf_release(&raw);
	return rc;
}

/*
 * Whether rec is the record its file name says: a string backend and
 * identity whose record_path is path.  A record copied or edited by hand
 * under another name would otherwise be removed, and its sessions
 * counted, under the name of the environment it names: gc would delete
 * that environment's record (and judge it by this one's sessions) while
 * this file stayed for ever.
 */
static bool named_by(json_t *rec, const char *dir, const char *path)
{
	struct sg_reg_key key = { json_string_value(json_object_get(rec, "backend")),
				  json_string_value(json_object_get(rec, "identity")) };
	char *want = key.backend && key.identity && key.backend[0] && key.identity[0]
			     ? record_path(dir, &key) : NULL;
	bool ok = want && strcmp(want, path) == 0;

	free(want);
	return ok;
}

/* Drop sessions whose gateway is dead; count the live ones but `self`. */
static int prune(json_t *rec, const char *self)
{
	json_t *sessions = json_object_get(rec, "sessions"), *s;
	int live = 0;

	for (size_t i = json_array_size(sessions); i > 0; i--) {
		const char *name;

		s = json_array_get(sessions, i - 1);
		name = json_string_value(json_object_get(s, "session"));
		if (!sg_registry_alive((long)json_integer_value(json_object_get(s, "pid")),
				       (unsigned long long)json_integer_value(
					       json_object_get(s, "pid_start")))) {
			json_array_remove(sessions, i - 1);
			continue;
		}
		if (!self || !name || strcmp(name, self) != 0)
			live++;
	}
	return live;
}

/*
 * The common read-modify-write: fn changes rec (it may be a new object).
 * *found (when not NULL) tells whether a record was there before.
 */
typedef sg_err (*edit_fn)(json_t *rec, void *arg, struct sg_errinfo *err);

static sg_err edit(const char *state_dir, const struct sg_reg_key *key,
		   bool create, bool *found, edit_fn fn, void *arg, struct sg_errinfo *err)
{
	char *dir = reg_dir(state_dir), *path = NULL;
	json_t *rec = NULL;
	int lock = -1;
	sg_err rc = SG_OK;

	if (!dir || !(path = record_path(dir, key))) {
		rc = sg_err_set(err, SG_E_INTERNAL, "cannot use the registry under %s: %s",
				state_dir, strerror(errno));
		goto out;
	}
	lock = lock_dir(dir);
	if (lock < 0) {
		rc = sg_err_set(err, SG_E_INTERNAL, "cannot lock the registry under %s",
				state_dir);
		goto out;
	}
	rc = load(path, &rec, err);
	if (!rc && rec && !named_by(rec, dir, path)) {
		json_decref(rec);
		rec = NULL;
		rc = set_aside(path, "its backend and identity do not name this file", err);
	}
	if (rc)
		goto out;
	if (found)
		*found = rec != NULL;
	if (!rec) {
		if (!create)
			goto out;
		rec = json_pack("{s:s, s:s, s:I, s:s, s:[]}", "backend", key->backend,
				"identity", key->identity, "created", (json_int_t)time(NULL),
				"status", SG_REG_PROVISIONING, "sessions");
	}
	rc = fn(rec, arg, err);
	if (!rc)
		rc = write_atomic(dir, path, rec, err);
out:
	if (lock >= 0)
		close(lock);
	json_decref(rec);
	free(path);
	free(dir);
	return rc;
}

/* Attach a session and merge fields, or (attach false) only merge them,
 * and only when no other live session is attached.  With join, a session
 * that finds others attached joins only a shared record (sg_registry_join). */
struct merge_arg {
	const char *session;
	json_t *fields;
	bool attach, join;
	int others;
	bool persisted; /* the record, before the merge, as sg_registry_join says */
};

/*
 * Whether a live `sandgate envs` is removing rec's environment; a claim
 * whose process has died is dropped.
 */
static bool being_removed(json_t *rec, long long *pid)
{
	json_t *claim = json_object_get(rec, "removing");

	if (!claim)
		return false;
	*pid = json_integer_value(json_object_get(claim, "pid"));
	if (sg_registry_alive((long)*pid, (unsigned long long)json_integer_value(
						  json_object_get(claim, "pid_start"))))
		return true;
	json_object_del(rec, "removing");
	return false;
}

static sg_err do_merge(json_t *rec, void *p, struct sg_errinfo *err)
{
	struct merge_arg *a = p;
	long long remover = 0;
	const char *st;
	bool joining;

	if (a->attach && being_removed(rec, &remover))
		return sg_err_set(err, SG_E_UNAVAILABLE,
				  "the environment is being removed (sandgate envs, pid %lld); "
				  "start the session again once that has finished", remover);
	a->others = prune(rec, a->session);
	st = json_string_value(json_object_get(rec, "status"));
	a->persisted = json_is_true(json_object_get(rec, "persistent")) && st &&
		       (strcmp(st, SG_REG_ACTIVE) == 0 || strcmp(st, SG_REG_KEPT) == 0 ||
			strcmp(st, SG_REG_KEEP_FAILED) == 0);
	joining = a->join && a->others > 0;
	if (joining && (!json_is_true(json_object_get(rec, "shared")) ||
			!json_is_true(json_object_get(a->fields, "shared"))))
		return sg_err_set(err, SG_E_UNAVAILABLE,
				  "the environment is in use by another live session and is not shared");
	if (a->fields && (a->attach || !a->others)) {
		const char *k;
		json_t *v;

		/* A joiner keeps the holder's "shared" (sg_registry_join). */
		json_object_foreach(a->fields, k, v)
			if (!joining || strcmp(k, "shared") != 0)
				json_object_set(rec, k, v);
	}
	if (a->attach)
		json_array_append_new(json_object_get(rec, "sessions"),
				      json_pack("{s:s, s:I, s:I, s:I}", "session", a->session,
						"pid", (json_int_t)getpid(), "pid_start",
						(json_int_t)sg_registry_self_start(), "since",
						(json_int_t)time(NULL)));
	return SG_OK;
}

static sg_err merge(const char *state_dir, const struct sg_reg_key *key, struct merge_arg *a,
		    int *others_out, bool *found, struct sg_errinfo *err)
{
	sg_err rc = edit(state_dir, key, a->attach, found, do_merge, a, err);

	*others_out = a->others;
	return rc;
}

sg_err sg_registry_attach(const char *state_dir, const struct sg_reg_key *key,
			  const char *session, json_t *fields, int *others_out, bool *known_out,
			  struct sg_errinfo *err)
{
	struct merge_arg a = { .session = session, .fields = fields, .attach = true };

	if (known_out)
		*known_out = true; /* until the registry says otherwise */
	return merge(state_dir, key, &a, others_out, known_out, err);
}

sg_err sg_registry_join(const char *state_dir, const struct sg_reg_key *key,
			const char *session, json_t *fields, int *others_out, bool *known_out,
			bool *persisted_out, struct sg_errinfo *err)
{
	struct merge_arg a = { .session = session, .fields = fields, .attach = true,
			       .join = true };
	sg_err rc;

	if (known_out)
		*known_out = true; /* until the registry says otherwise */
	rc = merge(state_dir, key, &a, others_out, known_out, err);
	*persisted_out = a.persisted;
	return rc;
}

sg_err sg_registry_update_if_last(const char *state_dir, const struct sg_reg_key *key,
				  const char *session, json_t *fields, int *others_out,
				  struct sg_errinfo *err)
{
	struct merge_arg a = { .session = session, .fields = fields };

	return merge(state_dir, key, &a, others_out, NULL, err);
}

static sg_err do_update(json_t *rec, void *p, struct sg_errinfo *err)
{
	(void)err;
	json_object_update(rec, p);
	return SG_OK;
}

sg_err sg_registry_update(const char *state_dir, const struct sg_reg_key *key,
			  json_t *fields, struct sg_errinfo *err)
{
	return edit(state_dir, key, false, NULL, do_update, fields, err);
}

struct detach_arg {
	const char *session;
	int others;
};

static sg_err do_detach(json_t *rec, void *p, struct sg_errinfo *err)
{
	struct detach_arg *d = p;
	json_t *sessions = json_object_get(rec, "sessions");

	(void)err;
	for (size_t i = json_array_size(sessions); i > 0; i--) {
		json_t *s = json_array_get(sessions, i - 1);
		const char *name = json_string_value(json_object_get(s, "session"));

		if (name && strcmp(name, d->session) == 0 &&
		    json_integer_value(json_object_get(s, "pid")) == getpid())
			json_array_remove(sessions, i - 1);
	}
	d->others = prune(rec, NULL);
	return SG_OK;
}

sg_err sg_registry_detach(const char *state_dir, const struct sg_reg_key *key,
			  const char *session, int *others_out,
			  struct sg_errinfo *err)
{
	struct detach_arg d = { session, 0 };
	sg_err rc = edit(state_dir, key, false, NULL, do_detach, &d, err);

	*others_out = d.others;
	return rc;
}

struct claim_arg {
	bool force;
	const bool *found; /* edit() sets it before do_claim runs */
	json_t *copy;      /* the claimed record, when asked for (new) */
};

static sg_err do_claim(json_t *rec, void *p, struct sg_errinfo *err)
{
	struct claim_arg *a = p;
	long long other = 0;
	int live = prune(rec, NULL);

	if (being_removed(rec, &other) && other != (long long)getpid())
		return sg_err_set(err, SG_E_UNAVAILABLE,
				  "another sandgate envs (pid %lld) is removing it", other);
	if (live > 0 && !a->force)
		return sg_err_set(err, SG_E_UNAVAILABLE,
				  "%d live session%s attached since the listing", live,
				  live == 1 ? " has" : "s have");
	/* An orphan's record, made by the claim: what to look for if this dies. */
	if (!*a->found)
		json_object_set_new(rec, "status", json_string(SG_REG_CLEANUP));
	json_object_set_new(rec, "removing",
			    json_pack("{s:I, s:I}", "pid", (json_int_t)getpid(), "pid_start",
				      (json_int_t)sg_registry_self_start()));
	a->copy = json_deep_copy(rec);
	return SG_OK;
}

sg_err sg_registry_claim_copy(const char *state_dir, const struct sg_reg_key *key, bool force,
			      bool *made, json_t **rec, struct sg_errinfo *err)
{
	bool found = true;
	struct claim_arg a = { force, &found, NULL };
	sg_err rc = edit(state_dir, key, true, &found, do_claim, &a, err);

	*made = !rc && !found;
	if (rec && !rc)
		*rec = a.copy;
	else
		json_decref(a.copy);
	return rc;
}

sg_err sg_registry_claim(const char *state_dir, const struct sg_reg_key *key, bool force,
			 bool *made, struct sg_errinfo *err)
{
	return sg_registry_claim_copy(state_dir, key, force, made, NULL, err);
}

static sg_err do_unclaim(json_t *rec, void *p, struct sg_errinfo *err)
{
	(void)p;
	(void)err;
	if (json_integer_value(json_object_get(json_object_get(rec, "removing"), "pid")) ==
	    (json_int_t)getpid())
		json_object_del(rec, "removing");
	return SG_OK;
}

void sg_registry_unclaim(const char *state_dir, const struct sg_reg_key *key, bool made)
{
	struct sg_errinfo err = { 0 };

	if (made ? sg_registry_remove(state_dir, key, &err)
		 : edit(state_dir, key, false, NULL, do_unclaim, NULL, &err))
		sg_log_warn("%s", err.msg);
}

sg_err sg_registry_remove(const char *state_dir, const struct sg_reg_key *key,
			  struct sg_errinfo *err)
{
	char *dir = reg_dir(state_dir), *path = dir ? record_path(dir, key) : NULL;
	int lock = dir ? lock_dir(dir) : -1;
	sg_err rc = SG_OK;

	if (!path || lock < 0 || (unlink(path) && errno != ENOENT))
		rc = sg_err_set(err, SG_E_INTERNAL, "cannot remove the registry record of %s",
				key->identity);
	if (lock >= 0)
		close(lock);
	free(path);
	free(dir);
	return rc;
}

sg_err sg_registry_list(const char *state_dir, json_t **out,
			json_t **corrupt_out, struct sg_errinfo *err)
{
	char *dir = reg_dir(state_dir);
	json_t *all = json_array(), *corrupt = json_array();
	struct dirent *de;
	DIR *d = dir ? opendir(dir) : NULL;
	int lock = dir ? lock_dir(dir) : -1;
	sg_err rc = SG_OK;

	*out = NULL;
	*corrupt_out = NULL;
	if (!d || lock < 0) {
		rc = sg_err_set(err, SG_E_INTERNAL, "cannot read the registry under %s",
				state_dir);
		goto out;
	}
	while ((de = readdir(d))) {
		size_t n = strlen(de->d_name);
		struct sg_errinfo e = { 0 };
		char *path = NULL;
		json_t *rec = NULL;

		if (n < 6 || strcmp(de->d_name + n - 5, ".json") != 0 ||
		    asprintf(&path, "%s/%s", dir, de->d_name) < 0)
			continue;
		if (!load(path, &rec, &e) && rec && !named_by(rec, dir, path)) {
			json_decref(rec);
			rec = NULL;
			set_aside(path, "its backend and identity do not name this file", &e);
		}
		if (e.msg[0])
			json_array_append_new(corrupt, json_string(e.msg));
		if (rec) {
			json_object_set_new(rec, "file", json_string(path));
			json_object_set_new(rec, "live_sessions", json_integer(prune(rec, NULL)));
			json_array_append_new(all, rec);
		}
		free(path);
	}
	*out = all;
	*corrupt_out = corrupt;
	all = corrupt = NULL;
out:
	if (d)
		closedir(d);
	if (lock >= 0)
		close(lock);
	json_decref(all);
	json_decref(corrupt);
	free(dir);
	return rc;
}
