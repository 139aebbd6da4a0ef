/*
 * test_remote.c - the remote-adapter driver (adapters/remote.h) over a
 * scripted provider: an exec driven to its result (attaches, stdin in
 * variables or uploaded, words too long, a failed request and a cancel
 * that kill the job), the clean-up of a failed provision ("nothing
 * leaks"), a create that must not replace a lost workspace (unless the
 * adapter's snapshot records decided), an operator's destroy that checks
 * the owner tag, what this host keeps forgotten on removal (ops->forget),
 * a listing read page by page, and the control steps that wait on this
 * host for a set-up under way while commands wait for it in the sandbox.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "adapters/cloudkit.h"
#include "core/exec.h"
#include "adapters/remote.h"

#define FAKE_TRIPS 8  /* scripted trips of one exec at most */
#define FAKE_PAGES 3  /* pages the fake listing holds */

/* What the scripted provider answers, and what it was asked. */
static struct {
	enum sg_job_trip answer[FAKE_TRIPS]; /* per trip; REPLY sends reply[i] */
	const char *reply[FAKE_TRIPS];       /* "@" is the job's mark */
	int trips, kills, uploads, removes, creates, lookups, pages;
	bool attached[FAKE_TRIPS];
	bool start_had_in0;                  /* the start's variables held SG_IN0 */
	char command[64];                    /* the start's command text */
	char upload_path[256], killed[256], removed[128];
	size_t upload_len;
	sg_err remove_rc;
	const char *owner;                   /* the looked-up sandbox's managed-by tag */
	int stop_after;                      /* the list callback stops after this many */
	int listed;
	int forgets;                         /* ops->forget's calls */
	char forgot[64], forgot_in[64];      /* its identity, and the env's state_dir */
	bool setup_over[FAKE_TRIPS];         /* per trip: no set-up was under way */
	int scripts;                         /* ops->script's calls */
} F;

static struct sg_cancel *fake_cancel_on_trip; /* fired during the first trip */

/* The job's mark, read back from its words (SG_X, or the command's text). */
static void fake_mark(const struct sg_remote_job *j, char mark[SG_JOB_MARK_SIZE])
{
	const char *x = json_string_value(json_object_get(j->start, "SG_X"));
	const char *m = strstr(x ? x : j->command, "sgmk-");

	mark[0] = '\0';
	if (m && strlen(m) >= SG_JOB_MARK_SIZE - 1) {
		memcpy(mark, m, SG_JOB_MARK_SIZE - 1);
		mark[SG_JOB_MARK_SIZE - 1] = '\0';
	}
}

/* A scripted reply with each "@" replaced by the job's mark. */
static void fake_reply(const char *script, const char *mark, char *out, size_t n)
{
	size_t used = 0;

	for (const char *p = script; *p && used + SG_JOB_MARK_SIZE < n; p++) {
		if (*p == '@') {
			memcpy(out + used, mark, strlen(mark));
			used += strlen(mark);
		} else {
			out[used++] = *p;
		}
	}
	out[used] = '\0';
}

static enum sg_job_trip fake_trip(struct sg_remote *rm, struct sg_remote_job *j, bool attach,
				  struct sg_cancel *cancel, struct sg_errinfo *err)
{
	int n = F.trips++;
	char mark[SG_JOB_MARK_SIZE], text[256];

	assert_true(n < FAKE_TRIPS);
	F.attached[n] = attach;
	F.setup_over[n] = !rm->base.setup_later || atomic_load(&rm->later_ok) ||
			  atomic_load(&rm->base.setup_failed);
	if (!attach) {
		snprintf(F.command, sizeof(F.command), "%s", j->command);
		F.start_had_in0 = json_object_get(j->start, "SG_IN0") != NULL;
	}
	fake_mark(j, mark);
	if (fake_cancel_on_trip && n == 0)
		sg_cancel_fire(fake_cancel_on_trip, SG_E_CANCELLED);
	if (F.answer[n] != SG_JOB_TRIP_REPLY) {
		sg_err_set(err, SG_E_UNAVAILABLE, "the fake provider failed trip %d", n);
		return sg_cancel_check(cancel) ? SG_JOB_TRIP_FAILED : F.answer[n];
	}
	fake_reply(F.reply[n], mark, text, sizeof(text));
	assert_int_equal(sg_buf_adds(&j->reply, text), SG_OK);
	return SG_JOB_TRIP_REPLY;
}

static void fake_kill(struct sg_remote *rm, const char *dir)
{
	(void)rm;
	F.kills++;
	snprintf(F.killed, sizeof(F.killed), "%s", dir);
}

static sg_err fake_upload(struct sg_remote *rm, const char *path, const void *data, size_t len,
			  unsigned mode, struct sg_cancel *cancel, struct sg_errinfo *err)
{
	(void)rm, (void)data, (void)mode, (void)cancel, (void)err;
	F.uploads++;
	F.upload_len = len;
	snprintf(F.upload_path, sizeof(F.upload_path), "%s", path);
	return SG_OK;
}

static sg_err fake_script(struct sg_remote *rm, const char *script, json_t *vars, char **reply,
			  struct sg_cancel *cancel, struct sg_errinfo *err)
{
	(void)rm, (void)script, (void)vars, (void)cancel, (void)err;
	F.scripts++;
	*reply = strdup("");
	return SG_OK;
}

static sg_err fake_remove(struct sg_remote *rm, const char *id, struct sg_cancel *cancel,
			  struct sg_errinfo *err)
{
	(void)rm, (void)cancel;
	F.removes++;
	snprintf(F.removed, sizeof(F.removed), "%s", id);
	return F.remove_rc ? sg_err_set(err, F.remove_rc, "the fake removal failed") : SG_OK;
}

static sg_err fake_create(struct sg_remote *rm, json_t **got, struct sg_cancel *cancel,
			  struct sg_errinfo *err)
{
	(void)cancel, (void)err;
	F.creates++;
	rm->fresh = true;
	snprintf(rm->base.id, sizeof(rm->base.id), "sb-1");
	*got = json_object();
	return SG_OK;
}

static sg_err fake_open(struct sg_remote *rm, const struct sg_profile *p, struct sg_errinfo *err)
{
	(void)rm, (void)p, (void)err;
	return SG_OK;
}

static void fake_close(struct sg_remote *rm)
{
	(void)rm;
}

static sg_err fake_lookup(struct sg_remote *rm, const char *id, json_t **got,
			  struct sg_cancel *cancel, struct sg_errinfo *err)
{
	(void)rm, (void)cancel;
	F.lookups++;
	if (strcmp(id, "gone") == 0)
		return SG_E_NOT_FOUND;
	(void)err;
	*got = json_pack("{s:s, s:{s:s?, s:s}}", "id", "real-id", "tags", SG_CLOUD_TAG_MANAGED,
			 F.owner, SG_CLOUD_TAG_IDENTITY, "bob");
	return SG_OK;
}

static const char *fake_tag(const json_t *got, const char *key)
{
	return json_string_value(json_object_get(json_object_get(got, "tags"), key));
}

static void fake_forget(struct sg_remote *rm, const char *identity)
{
	F.forgets++;
	snprintf(F.forgot, sizeof(F.forgot), "%s", identity);
	snprintf(F.forgot_in, sizeof(F.forgot_in), "%s",
		 rm->base.state_dir ? rm->base.state_dir : "(none)");
}

static const char *fake_id_of(const json_t *got)
{
	return json_string_value(json_object_get(got, "id"));
}

/* Page n holds items n*10 .. n*10+2; item 11 is not sandgate's. */
static sg_err fake_list_page(struct sg_remote *rm, const struct sg_profile *p, const char *cursor,
			     json_t **items, char **next, struct sg_cancel *cancel,
			     struct sg_errinfo *err)
{
	int page = cursor ? atoi(cursor) : 0;
	char buf[16];

	(void)rm, (void)p, (void)cancel, (void)err;
	F.pages++;
	*items = json_array();
	for (int i = 0; i < 3; i++)
		json_array_append_new(*items, json_integer(page * 10 + i));
	snprintf(buf, sizeof(buf), "%d", page + 1);
	*next = page + 1 < FAKE_PAGES ? strdup(buf) : NULL;
	return SG_OK;
}

static bool fake_info(const json_t *item, struct sg_env_info *info)
{
	if (json_integer_value(item) == 11)
		return false;
	snprintf(info->id, sizeof(info->id), "sb-%lld", (long long)json_integer_value(item));
	return true;
}

static int fake_listed(const struct sg_env_info *info, void *payload)
{
	(void)info, (void)payload;
	return ++F.listed >= F.stop_after;
}

static struct sg_remote_ops fake_ops = {
	.provider = "the fake",
	.inline_max = 4096,
	.stdin_vars = 8192,
	.relays = true,
	.relay_wait_ms = 1000,
	.fails = 1,
	.kill_unseen = true,
	.list_pages = 10,
	.trip = fake_trip,
	.kill = fake_kill,
	.upload = fake_upload,
	.script = fake_script,
	.create = fake_create,
	.env_size = sizeof(struct sg_remote),
	.open = fake_open,
	.close = fake_close,
	.lookup = fake_lookup,
	.tag = fake_tag,
	.id_of = fake_id_of,
	.remove = fake_remove,
	.list_page = fake_list_page,
	.info = fake_info,
};

static const struct sg_profile fake_profile = { .name = "p", .backend = "fake" };
static const struct sg_adapter fake_adapter = { .name = "fake" };

static int setup(void **state)
{
	static struct sg_remote rm;
	struct sg_errinfo err = { 0 };

	memset(&F, 0, sizeof(F));
	memset(&rm, 0, sizeof(rm));
	fake_cancel_on_trip = NULL;
	fake_ops.words_in_text = false;
	fake_ops.snapshot_records = false;
	fake_ops.forget = NULL;
	rm.base.ad = &fake_adapter;
	rm.base.profile = &fake_profile;
	rm.base.root = "/w";
	rm.base.identity = "alice";
	rm.base.helper = "/h/sg-helper";
	assert_int_equal(sg_remote_init(&rm, &fake_ops, &err), SG_OK);
	assert_int_equal(sg_remote_dirs(&rm, SG_OK, strdup("/h/.sandgate"), &err), SG_OK);
	*state = &rm;
	return 0;
}

static int teardown(void **state)
{
	sg_remote_release(*state);
	return 0;
}

static const char *const fake_argv[] = { "echo", "hi", NULL };
static const char *const fake_envp[] = { "PATH=/bin", NULL };

static sg_err run(struct sg_remote *rm, struct sg_exec *x, struct sg_exec_result *out,
		  struct sg_cancel *cancel, struct sg_errinfo *err)
{
	x->argv = fake_argv;
	x->envp = fake_envp;
	x->max_output = 1024;
	sg_exec_result_init(out, x->max_output);
	return sg_remote_exec(&rm->base, x, out, cancel, err);
}

static void test_exec_attaches_until_done(void **state)
{
	struct sg_exec x = { .flags = SG_EXEC_DETACHES };
	struct sg_exec_result out;
	struct sg_errinfo err = { 0 };

	F.reply[0] = "\n@ pending\n";
	F.reply[1] = "\n@ pending\n";
	F.reply[2] = "hello\n@ done 0|exit 0|0|5\n";
	assert_int_equal(run(*state, &x, &out, NULL, &err), SG_OK);
	assert_int_equal(F.trips, 3);
	assert_false(F.attached[0]);
	assert_true(F.attached[1] && F.attached[2]);
	assert_string_equal(F.command, SG_JOB_EVAL);
	assert_int_equal(out.exit_code, 0);
	assert_int_equal(out.out.len, 5);
	assert_memory_equal(out.out.p, "hello", 5);
	assert_int_equal(F.kills, 0);
	sg_exec_result_release(&out);
}

static void test_exec_stdin_in_vars_or_uploaded(void **state)
{
	struct sg_remote *rm = *state;
	struct sg_exec x = { .stdin_data = "some text", .stdin_len = 9 };
	struct sg_exec_result out;
	struct sg_errinfo err = { 0 };
	char bin[16] = "a\0b";

	F.reply[0] = F.reply[1] = "\n@ done 0|exit 0|0|0\n";
	assert_int_equal(run(rm, &x, &out, NULL, &err), SG_OK);
	assert_true(F.start_had_in0);
	assert_int_equal(F.uploads, 0);
	sg_exec_result_release(&out);
	/* A NUL cannot travel in a variable: uploaded beside the job's files. */
	x.stdin_data = bin;
	x.stdin_len = sizeof(bin);
	F.trips = 0;
	assert_int_equal(run(rm, &x, &out, NULL, &err), SG_OK);
	assert_false(F.start_had_in0);
	assert_int_equal(F.uploads, 1);
	assert_int_equal(F.upload_len, sizeof(bin));
	assert_int_equal(strncmp(F.upload_path, "/h/.sandgate/run/", 17), 0);
	assert_non_null(strstr(F.upload_path, rm->nonce));
	assert_string_equal(F.upload_path + strlen(F.upload_path) - 3, ".up");
	sg_exec_result_release(&out);
}

static void test_exec_words_too_long(void **state)
{
	struct sg_remote *rm = *state;
	struct sg_exec x = { 0 };
	struct sg_exec_result out;
	struct sg_errinfo err = { 0 };
	const char *argv[] = { "echo", NULL, NULL };
	char *big = malloc(6000);

	memset(big, 'a', 5999);
	big[5999] = '\0';
	argv[1] = big;
	x.argv = argv;
	x.envp = fake_envp;
	x.max_output = 1024;
	sg_exec_result_init(&out, x.max_output);
	assert_int_equal(sg_remote_exec(&rm->base, &x, &out, NULL, &err), SG_E_TOO_LARGE);
	assert_int_equal(F.trips, 0);
	/* A provider that takes the words as the command's text. */
	fake_ops.words_in_text = true;
	F.reply[0] = "\n@ done 0|exit 0|0|0\n";
	assert_int_equal(sg_remote_exec(&rm->base, &x, &out, NULL, &err), SG_OK);
	assert_int_equal(strncmp(F.command, "exec ", 5), 0);
	sg_exec_result_release(&out);
	free(big);
}

static void test_exec_failed_request_kills_the_job(void **state)
{
	struct sg_exec x = { 0 };
	struct sg_exec_result out;
	struct sg_errinfo err = { 0 };

	F.answer[0] = SG_JOB_TRIP_FAILED;
	assert_int_equal(run(*state, &x, &out, NULL, &err), SG_E_UNAVAILABLE);
	assert_non_null(strstr(err.msg, "may have run"));
	assert_int_equal(F.kills, 1);
	assert_non_null(strstr(F.killed, "/h/.sandgate/run/"));
	sg_exec_result_release(&out);
}

static void test_exec_cancel_kills_the_job(void **state)
{
	struct sg_exec x = { 0 };
	struct sg_exec_result out;
	struct sg_errinfo err = { 0 };
	struct sg_cancel c;

	assert_int_equal(sg_cancel_init(&c), SG_OK);
	fake_cancel_on_trip = &c;
	F.answer[0] = SG_JOB_TRIP_FAILED;
	assert_int_equal(run(*state, &x, &out, &c, &err), SG_E_CANCELLED);
	assert_int_equal(F.kills, 1);
	sg_exec_result_release(&out);
	sg_cancel_release(&c);
}

static void test_failed_provision_leaves_nothing(void **state)
{
	struct sg_remote *rm = *state;
	struct sg_cancel c;

	/* Nothing made here: the adapter's own. */
	assert_false(sg_remote_failed(rm, SG_E_PROVIDER, NULL));
	assert_int_equal(F.removes, 0);
	rm->fresh = true;
	snprintf(rm->base.id, sizeof(rm->base.id), "sb-1");
	assert_false(sg_remote_failed(rm, SG_OK, NULL));
	/* Made here and failed: removed. */
	assert_true(sg_remote_failed(rm, SG_E_PROVIDER, NULL));
	assert_int_equal(F.removes, 1);
	assert_string_equal(F.removed, "sb-1");
	assert_false(rm->base.may_remain);
	/* A removal that fails leaves it on record. */
	F.remove_rc = SG_E_UNAVAILABLE;
	assert_true(sg_remote_failed(rm, SG_E_PROVIDER, NULL));
	assert_true(rm->base.may_remain);
	/* A cancel leaves it on record at once, without a removal. */
	rm->base.may_remain = false;
	assert_int_equal(sg_cancel_init(&c), SG_OK);
	sg_cancel_fire(&c, SG_E_CANCELLED);
	assert_true(sg_remote_failed(rm, SG_E_CANCELLED, &c));
	assert_int_equal(F.removes, 2);
	assert_true(rm->base.may_remain);
	sg_cancel_release(&c);
}

static void test_create_never_replaces_a_lost_workspace(void **state)
{
	struct sg_remote *rm = *state;
	struct sg_errinfo err = { 0 };
	json_t *got = NULL;
	bool made = true;

	rm->base.require_existing = true;
	assert_int_equal(sg_remote_create(rm, "sg-alice", &got, &made, NULL, &err),
			 SG_E_WORKSPACE_LOST);
	assert_false(made);
	rm->base.require_existing = false;
	rm->base.persisted = true;
	sg_err_clear(&err);
	assert_int_equal(sg_remote_create(rm, "sg-alice", &got, &made, NULL, &err),
			 SG_E_WORKSPACE_LOST);
	assert_false(made);
	assert_int_equal(F.creates, 0);
	rm->base.persisted = false;
	assert_int_equal(sg_remote_create(rm, "sg-alice", &got, &made, NULL, &err), SG_OK);
	assert_true(made);
	assert_int_equal(F.creates, 1);
	json_decref(got);
}

static void test_snapshot_records_leave_the_loss_to_the_adapter(void **state)
{
	struct sg_remote *rm = *state;
	struct sg_errinfo err = { 0 };
	json_t *got = NULL;
	bool made = false;

	/* Modal's persistent workspace is its snapshot: the sandbox is made again. */
	fake_ops.snapshot_records = true;
	rm->base.require_existing = true;
	rm->base.persisted = true;
	assert_int_equal(sg_remote_create(rm, "sg-alice", &got, &made, NULL, &err), SG_OK);
	assert_true(made);
	assert_int_equal(F.creates, 1);
	json_decref(got);
}

static void test_removal_forgets_what_this_host_keeps(void **state)
{
	struct sg_remote *rm = *state;
	struct sg_errinfo err = { 0 };

	fake_ops.forget = fake_forget;
	rm->opened = true;
	snprintf(rm->base.id, sizeof(rm->base.id), "sb-1");
	rm->base.state_dir = "/state";
	/* A detach keeps everything. */
	assert_int_equal(sg_remote_teardown(&rm->base, SG_FATE_DETACH, NULL, &err), SG_OK);
	assert_int_equal(F.forgets, 0);
	assert_int_equal(sg_remote_teardown(&rm->base, SG_FATE_REMOVE, NULL, &err), SG_OK);
	assert_int_equal(F.forgets, 1);
	assert_string_equal(F.forgot, "alice");
	assert_string_equal(F.removed, "sb-1");
	/* An operator's destroy: the identity of the sandbox's tag, in its state dir. */
	F.owner = "someone-else";
	assert_int_equal(sg_remote_destroy(&fake_ops, &fake_profile, "/ops", "x", NULL, &err),
			 SG_E_PERMISSION);
	assert_int_equal(F.forgets, 1);
	F.owner = SG_CLOUD_MANAGER;
	sg_err_clear(&err);
	assert_int_equal(sg_remote_destroy(&fake_ops, &fake_profile, "/ops", "x", NULL, &err),
			 SG_OK);
	assert_int_equal(F.forgets, 2);
	assert_string_equal(F.forgot, "bob");
	assert_string_equal(F.forgot_in, "/ops");
	/* A removal that failed forgets nothing more. */
	F.remove_rc = SG_E_UNAVAILABLE;
	assert_int_equal(sg_remote_destroy(&fake_ops, &fake_profile, "/ops", "x", NULL, &err),
			 SG_E_UNAVAILABLE);
	assert_int_equal(F.forgets, 2);
}

static void test_destroy_checks_the_owner(void **state)
{
	struct sg_errinfo err = { 0 };

	(void)state;
	F.owner = "someone-else";
	assert_int_equal(sg_remote_destroy(&fake_ops, &fake_profile, NULL, "x", NULL, &err),
			 SG_E_PERMISSION);
	F.owner = NULL;
	sg_err_clear(&err);
	assert_int_equal(sg_remote_destroy(&fake_ops, &fake_profile, NULL, "x", NULL, &err),
			 SG_E_PERMISSION);
	assert_int_equal(F.removes, 0);
	sg_err_clear(&err);
	assert_int_equal(sg_remote_destroy(&fake_ops, &fake_profile, NULL, "gone", NULL, &err),
			 SG_E_NOT_FOUND);
	assert_non_null(strstr(err.msg, "there is no sandbox gone"));
	F.owner = SG_CLOUD_MANAGER;
	assert_int_equal(sg_remote_destroy(&fake_ops, &fake_profile, NULL, "x", NULL, &err), SG_OK);
	assert_int_equal(F.removes, 1);
	assert_string_equal(F.removed, "real-id");
}

static void test_list_reads_pages_until_told_to_stop(void **state)
{
	struct sg_errinfo err = { 0 };

	(void)state;
	F.stop_after = 100;
	assert_int_equal(sg_remote_list(&fake_ops, &fake_profile, fake_listed, NULL, NULL, &err),
			 SG_OK);
	assert_int_equal(F.pages, FAKE_PAGES);
	assert_int_equal(F.listed, FAKE_PAGES * 3 - 1); /* item 11 is not sandgate's */
	F.pages = F.listed = 0;
	F.stop_after = 4;
	assert_int_equal(sg_remote_list(&fake_ops, &fake_profile, fake_listed, NULL, NULL, &err),
			 SG_OK);
	assert_int_equal(F.listed, 4);
	assert_int_equal(F.pages, 2);
}

/* A set-up under way that ends after 200 ms, well or with slow_rc. */
static sg_err slow_rc;

static sg_err slow_setup(struct sg_remote *rm, const char *fail, struct sg_cancel *stop,
			 struct sg_errinfo *err)
{
	(void)rm, (void)fail;
	if (sg_cancel_sleep(stop, 200))
		return sg_err_set(err, SG_E_CANCELLED, "stopped");
	return slow_rc ? sg_err_set(err, slow_rc, "the fake set-up failed") : SG_OK;
}

/* sg_remote_setup_begin replaces the env's paths with its own (malloc). */
static void begin_slow_setup(struct sg_remote *rm, sg_err rc)
{
	struct sg_errinfo err = { 0 };

	slow_rc = rc;
	rm->base.helper = strdup("/h/sg-helper");
	assert_int_equal(sg_remote_setup_begin(rm, "abc", slow_setup, &err), SG_OK);
	assert_true(rm->base.setup_later);
}

static void end_slow_setup(struct sg_remote *rm)
{
	sg_leg_end(&rm->later, SG_E_CANCELLED);
	free(rm->base.helper);
	free(rm->base.ctl_dir);
	rm->base.helper = rm->base.ctl_dir = NULL;
}

/*
 * While a set-up is under way, a command leaves at once and waits for
 * sg-helper in the sandbox; a control step (the process watcher's wait)
 * waits on this host until the set-up has ended, and then needs no wait.
 */
static void test_control_steps_wait_for_the_setup(void **state)
{
	struct sg_remote *rm = *state;
	struct sg_exec cmd = { 0 }, ctl = { .flags = SG_EXEC_CONTROL };
	struct sg_exec_result out;
	struct sg_errinfo err = { 0 };

	begin_slow_setup(rm, SG_OK);
	F.reply[0] = "hello\n@ done 0|exit 0|0|5\n";
	F.reply[1] = "hello\n@ done 0|exit 0|0|5\n";
	assert_int_equal(run(rm, &cmd, &out, NULL, &err), SG_OK);
	sg_exec_result_release(&out);
	assert_false(F.setup_over[0]);
	assert_int_equal(strncmp(F.command, "h=", 2), 0);
	assert_int_equal(run(rm, &ctl, &out, NULL, &err), SG_OK);
	sg_exec_result_release(&out);
	assert_int_equal(F.trips, 2);
	assert_true(F.setup_over[1]);
	assert_string_equal(F.command, SG_JOB_EVAL);
	end_slow_setup(rm);
}

/* A control step after a set-up that failed fails with its error, sending nothing. */
static void test_control_steps_fail_with_the_setup(void **state)
{
	struct sg_remote *rm = *state;
	struct sg_exec ctl = { .flags = SG_EXEC_CONTROL };
	struct sg_exec_result out;
	struct sg_errinfo err = { 0 };

	begin_slow_setup(rm, SG_E_PROVIDER);
	assert_int_equal(run(rm, &ctl, &out, NULL, &err), SG_E_PROVIDER);
	sg_exec_result_release(&out);
	assert_int_equal(F.trips, 0);
	assert_non_null(strstr(err.msg, "the fake set-up failed"));
	/* The commands waiting in the sandbox were told to give up. */
	assert_int_equal(F.scripts, 1);
	end_slow_setup(rm);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_exec_attaches_until_done, setup, teardown),
		cmocka_unit_test_setup_teardown(test_exec_stdin_in_vars_or_uploaded, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_exec_words_too_long, setup, teardown),
		cmocka_unit_test_setup_teardown(test_exec_failed_request_kills_the_job, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_exec_cancel_kills_the_job, setup, teardown),
		cmocka_unit_test_setup_teardown(test_failed_provision_leaves_nothing, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_create_never_replaces_a_lost_workspace, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_snapshot_records_leave_the_loss_to_the_adapter,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_removal_forgets_what_this_host_keeps, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_destroy_checks_the_owner, setup, teardown),
		cmocka_unit_test_setup_teardown(test_control_steps_wait_for_the_setup, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_control_steps_fail_with_the_setup, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_list_reads_pages_until_told_to_stop, setup,
						teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
