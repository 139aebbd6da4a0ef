/*
 * main.c - sgbench's options and the order of a run: the gateway is
 * started and initialized once, the sets that fit its backend run on it,
 * then the report.  sgbench.h says what each set measures.
 */
#include "bench/sgbench.h"

/* The backend the profile o names, from the config file (new), or NULL. */
static char *profile_backend(const struct opts *o)
{
	const char *path = o->config ? o->config : getenv("SANDGATE_CONFIG");
	const char *name = o->profile, *b;
	json_t *cfg;
	char *out = NULL;

	if (!path || !*path)
		return NULL;
	cfg = json_load_file(path, 0, NULL);
	if (!cfg)
		return NULL;
	if (!name)
		name = json_string_value(json_object_get(cfg, "default"));
	b = json_string_value(json_object_get(
		json_object_get(json_object_get(cfg, "profiles"), name ? name : ""), "backend"));
	if (b)
		out = xasprintf("%s", b);
	json_decref(cfg);
	return out;
}

static int rm_entry(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(p) && errno != ENOENT ? -1 : 0;
}

static const char usage[] =
	"usage: sgbench [--sandgate PATH] [--config FILE] [--profile NAME]\n"
	"               [--state-dir DIR] [--json FILE] [--markdown FILE]\n"
	"               [--only stat,cmd,wake,export,ssh,daytona,cloud]\n"
	"               [--stat-n N] [--cmd-n N] [--wake-n N]\n"
	"               [--export-mib N] [--export-runs N]\n"
	"               [--ssh-n N] [--ssh-export-mib N] [--ssh-export-runs N]\n"
	"               [--rt-n N] [--dtn-n N] [--sdk-json FILE] [--keep]\n"
	"               [--fake-log URL] [--mix FILE] [--mix-runs N] [--cloud-n N]\n"
	"               [--fake-delay-ms N] [--ttfr-n N]\n"
	"\n"
	"Runs sandgate's benchmarks over pipes, on the profile --config and\n"
	"--profile name (else sandgate's default), and prints a table.  The\n"
	"sets default to stat,cmd,wake,export on the local backend and to ssh on\n"
	"the ssh backend, daytona on the daytona backend (against the fake on\n"
	"127.0.0.1 only; --sdk-json adds the official SDK's results from\n"
	"bench/daytona-sdk-bench.mjs), and stat on any other.  Defaults: sandgate\n"
	"from $SANDGATE,\n"
	"else next to this program or one directory up (a build tree); 2000 stat\n"
	"calls, 300 command runs of each kind, 200 wake-ups, 3 exports of 256 MiB\n"
	"of each kind; for ssh, 150 runs of each of the 5 kinds, 3 exports of\n"
	"64 MiB of each kind and 10 calls per tool counted; for daytona, 100 runs\n"
	"of each of the 3 operations and 10 calls per tool counted.  The cloud\n"
	"set (the default on the vercel and modal backends; --only cloud elsewhere)\n"
	"reads the fake's request log at --fake-log (on daytona, the profile's\n"
	"fake) and runs the mixed calls of --mix 3 times (--mix-runs) and 20 calls\n"
	"of each tool (--cloud-n); --sdk-json adds bench/<backend>-sdk-bench.mjs's\n"
	"results.  --fake-delay-ms says what delay the fake adds to each request:\n"
	"with 0, the mixed sequence and time to ready are given for information\n"
	"only, since their targets are set for a real round trip.  After the\n"
	"daytona and cloud sets, --ttfr-n (5) fresh sessions are timed from the\n"
	"gateway's spawn to the reply of their first bash \"true\" (0: none).\n";

/* An option with a value: a path or name, or a count, stored at off. */
struct opt_def {
	const char *name;
	bool count;
	size_t off;
};

#define OPT_TEXT(n, f) { n, false, offsetof(struct opts, f) }
#define OPT_COUNT(n, f) { n, true, offsetof(struct opts, f) }

static const struct opt_def opt_defs[] = {
	OPT_TEXT("--sandgate", sandgate), OPT_TEXT("--state-dir", state_dir),
	OPT_TEXT("--json", json_out), OPT_TEXT("--markdown", md_out),
	OPT_COUNT("--stat-n", stat_n), OPT_COUNT("--cmd-n", cmd_n),
	OPT_COUNT("--wake-n", wake_n), OPT_COUNT("--export-mib", export_mib),
	OPT_COUNT("--export-runs", export_runs), OPT_TEXT("--config", config),
	OPT_TEXT("--profile", profile), OPT_COUNT("--ssh-n", ssh_n),
	OPT_COUNT("--ssh-export-mib", ssh_export_mib),
	OPT_COUNT("--ssh-export-runs", ssh_export_runs), OPT_COUNT("--rt-n", rt_n),
	OPT_COUNT("--dtn-n", dtn_n), OPT_TEXT("--sdk-json", sdk_json),
	OPT_TEXT("--fake-log", fake_log), OPT_TEXT("--mix", mix),
	OPT_COUNT("--mix-runs", mix_runs), OPT_COUNT("--cloud-n", cloud_n),
	OPT_COUNT("--fake-delay-ms", fake_delay_ms), OPT_COUNT("--ttfr-n", ttfr_n),
};

static const struct opt_def *opt_find(const char *name)
{
	for (size_t i = 0; i < sizeof(opt_defs) / sizeof(opt_defs[0]); i++)
		if (strcmp(opt_defs[i].name, name) == 0)
			return &opt_defs[i];
	return NULL;
}

/* --only's list: the sets it names, in place of the backend's defaults. */
static void opt_only(struct opts *o, const char *v)
{
	o->only = true;
	o->do_stat = strstr(v, "stat") != NULL;
	o->do_cmd = strstr(v, "cmd") != NULL;
	o->do_wake = strstr(v, "wake") != NULL;
	o->do_export = strstr(v, "export") != NULL;
	o->do_ssh = strstr(v, "ssh") != NULL;
	o->do_dtn = strstr(v, "daytona") != NULL;
	o->do_cloud = strstr(v, "cloud") != NULL;
}

static void parse_opts(int argc, char **argv, struct opts *o)
{
	*o = (struct opts){ .stat_n = 2000, .cmd_n = 300, .wake_n = 200,
			    .export_mib = 256, .export_runs = 3, .ssh_n = 150,
			    .ssh_export_mib = 64, .ssh_export_runs = 3, .rt_n = 10,
			    .dtn_n = 100, .cloud_n = 20, .mix_runs = 3, .mix = SGBENCH_MIX,
			    .fake_delay_ms = -1, .ttfr_n = 5 };
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		const struct opt_def *d = opt_find(a);

		if (strcmp(a, "--keep") == 0) {
			o->keep = true;
			continue;
		}
		if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
			fputs(usage, stdout);
			exit(0);
		}
		if (!d && strcmp(a, "--only") != 0)
			die("unknown option %s\n%s", a, usage);
		if (!v)
			die("%s needs a value\n%s", a, usage);
		i++;
		if (!d)
			opt_only(o, v);
		else if (d->count)
			*(long *)((char *)o + d->off) = parse_count(v, a);
		else
			*(const char **)((char *)o + d->off) = v;
	}
	if (o->stat_n < 1 || o->cmd_n < 1 || o->wake_n < 1 || o->export_runs < 1 ||
	    o->export_mib < 1 || o->export_mib > 256 || o->ssh_n < 1 ||
	    o->ssh_export_runs < 1 || o->rt_n < 1 || o->ssh_export_mib > 256 ||
	    o->dtn_n < 1 || o->cloud_n < 1 || o->mix_runs < 1 || o->mix_runs > CL_RUNS_MAX ||
	    o->ttfr_n > TTFR_RUNS_MAX)
		die("counts must be at least 1 (--ttfr-n 0 to %d), export sizes at most 256 MiB and mixed runs at most %d",
		    TTFR_RUNS_MAX, CL_RUNS_MAX);
}

/* $SANDGATE, else sandgate next to this program or one directory up. */
static char *find_sandgate(void)
{
	const char *env = getenv("SANDGATE");
	char self[PATH_MAX], *slash;
	ssize_t n;

	if (env && *env)
		return strdup(env);
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0)
		return NULL;
	self[n] = '\0';
	for (int up = 0; up < 2; up++) {
		char *p;

		slash = strrchr(self, '/');
		if (!slash)
			return NULL;
		*slash = '\0';
		p = xasprintf("%s/sandgate", self);
		if (access(p, X_OK) == 0)
			return p;
		free(p);
	}
	return NULL;
}


/* Everything one run holds, from the options to the report. */
struct run {
	struct opts o;
	struct results r;
	struct ssh_target t;
	struct fake fk;       /* the fake Daytona (port 0: not used) */
	struct dtn_log dl;
	struct cl_src cs;     /* the cloud set's fake log (port 0: not used) */
	struct cl_calls cc;
	long long since, cl_since; /* the fakes' last logged requests before initialize */
	int64_t init_ns;
	char *sandgate, *state, *workspace;
	struct gw g;
};

/* The sandgate program and the state directory (--state-dir, else a new one). */
static void run_paths(struct run *u)
{
	static char tmpl[] = "/tmp/sgbench-XXXXXX";

	u->sandgate = u->o.sandgate ? strdup(u->o.sandgate) : find_sandgate();
	if (!u->sandgate || access(u->sandgate, X_OK))
		die("sandgate not found: pass --sandgate PATH");
	if (u->o.state_dir) {
		if (mkdir(u->o.state_dir, 0700) && errno != EEXIST)
			die("%s: %s", u->o.state_dir, strerror(errno));
		u->state = strdup(u->o.state_dir);
	} else {
		if (!mkdtemp(tmpl))
			die("mkdtemp: %s", strerror(errno));
		u->state = strdup(tmpl);
	}
	if (!u->state)
		die("out of memory");
	state_for_errors = u->state;
}

/*
 * The daytona and cloud sets count initialize's requests too, so the
 * fakes' logs are marked before it; the backend is read from the config.
 */
static void run_marks(struct run *u)
{
	char *pbackend = profile_backend(&u->o);
	bool daytona = pbackend && strcmp(pbackend, "daytona") == 0;
	bool cloud = pbackend && (strcmp(pbackend, "modal") == 0 ||
				  strcmp(pbackend, "vercel") == 0);

	if (u->o.do_dtn || (!u->o.only && daytona)) {
		fake_load(&u->fk, &u->o);
		u->since = fake_last_seq(&u->fk);
	}
	if (u->o.do_cloud || (!u->o.only && cloud)) {
		if (u->o.fake_log) {
			cl_src_parse(&u->cs, u->o.fake_log);
		} else if (daytona) {
			fake_load(&u->cs.f, &u->o);
			u->cs.path = xasprintf("/__fake/requests");
		} else {
			die("the cloud set needs --fake-log http://127.0.0.1:PORT/PATH (the fake's request log)");
		}
		u->cl_since = cl_last_seq(&u->cs);
	}
	free(pbackend);
}

/* The sets that fit the backend, unless --only named them; stat alone fits any. */
static void run_pick(struct run *u, const char *backend)
{
	struct opts *o = &u->o;

	u->r.local = strcmp(backend, "local") == 0;
	/* Issue 39: on Modal, sandgate's own share is held to the SDK's. */
	u->r.cl.own_vs_sdk = strcmp(backend, "modal") == 0;
	if (!o->only) {
		o->do_stat = o->do_cmd = o->do_wake = o->do_export = u->r.local;
		o->do_ssh = strcmp(backend, "ssh") == 0;
		o->do_dtn = strcmp(backend, "daytona") == 0;
		o->do_cloud = strcmp(backend, "modal") == 0 || strcmp(backend, "vercel") == 0;
		if (!u->r.local && !o->do_ssh && !o->do_dtn && !o->do_cloud)
			o->do_stat = true;
	}
	if (o->do_cloud && !u->cs.f.port)
		die("the cloud set needs --fake-log http://127.0.0.1:PORT/PATH (the fake's request log)");
	if (o->do_dtn && strcmp(backend, "daytona") != 0)
		die("the daytona set needs a profile on the daytona backend, not %s", backend);
	if (o->do_dtn && !u->fk.port)
		die("the daytona set needs --config FILE (to find the fake's address)");
	if (!u->r.local && (o->do_cmd || o->do_wake || o->do_export))
		die("cmd, wake and export measure the local backend; the profile is on %s",
		    backend);
	if (o->do_ssh && strcmp(backend, "ssh") != 0)
		die("the ssh set needs a profile on the ssh backend, not %s", backend);
}

/* The ssh set's target: the profile's host, and where the workspace is on it. */
static void run_ssh_target(struct run *u, json_t *env)
{
	json_t *facts = json_object_get(json_object_get(env, "facts"), "ssh");
	const char *dir = json_string_value(json_object_get(facts, "directory"));

	if (!dir)
		die("the initialize reply has no facts.ssh.directory");
	ssh_target_load(&u->t, &u->o);
	u->t.directory = xasprintf("%s", dir);
	if (json_is_string(json_object_get(facts, "view")))
		u->r.sh.view = xasprintf("%s", json_string_value(json_object_get(facts, "view")));
}

/* The gateway started and initialized, its windows logged for the fakes. */
static void run_initialize(struct run *u)
{
	int64_t t0_ms, t0_us;
	const char *backend;
	struct stat st;
	json_t *f, *env;

	gw_start(&u->g, &u->o, u->sandgate, u->state, "gateway.log", environ);
	t0_ms = wall_ms(false);
	t0_us = wall_us();
	u->init_ns = now_ns();
	f = gw_initialize(&u->g);
	u->init_ns = now_ns() - u->init_ns;
	if (u->fk.port)
		dtn_add(&u->dl, DK_C_INIT, t0_ms, wall_ms(true));
	if (u->cs.f.port)
		cl_add(&u->cc, CK_INIT, t0_us, now_ns() - u->init_ns);
	env = json_object_get(reply_data(f, "initialize"), "environment");
	backend = json_string_value(json_object_get(env, "backend"));
	if (!backend)
		die("the initialize reply names no backend");
	run_pick(u, backend);
	if (u->o.do_ssh)
		run_ssh_target(u, env);
	json_decref(f);
	if (u->r.local) {
		u->workspace = xasprintf("%s/local/%s/workspace", u->state, SESSION);
		if (stat(u->workspace, &st) || !S_ISDIR(st.st_mode))
			die("the local workspace is not at %s", u->workspace);
	}
}

/* The local backend's sets. */
static void run_local(struct run *u)
{
	const struct opts *o = &u->o;
	struct results *r = &u->r;

	if (o->do_stat) {
		fprintf(stderr, "sgbench: list_files x %ld\n", o->stat_n);
		r->st = bench_stat(&u->g, o->stat_n);
		r->stat = true;
	}
	if (o->do_cmd) {
		fprintf(stderr, "sgbench: bash true and bash -l -c true x %ld\n", o->cmd_n);
		r->cmd_r = bench_cmd(&u->g, u->state, o->cmd_n);
		r->cmd = true;
	}
	if (o->do_wake) {
		fprintf(stderr, "sgbench: process/read wake-ups x %ld\n", o->wake_n);
		r->wk = bench_wake(&u->g, u->workspace, o->wake_n);
		r->wake = true;
	}
	if (o->do_export) {
		fprintf(stderr, "sgbench: export of %ld MiB x %ld x 2 kinds\n",
			o->export_mib, o->export_runs);
		r->ex = bench_export(&u->g, u->workspace, (size_t)o->export_mib * MiB,
				     (int)o->export_runs);
		r->export = true;
	}
}

/* The ssh set's timed part, over this program's own ControlMaster. */
static void run_ssh(struct run *u)
{
	const struct opts *o = &u->o;

	ssh_master_open(&u->t, u->state);
	fprintf(stderr, "sgbench: ssh: bash, read_file and their raw clients x %ld\n", o->ssh_n);
	ssh_compare(&u->g, &u->t, o->ssh_n, &u->r.sh);
	if (o->ssh_export_mib > 0) {
		fprintf(stderr, "sgbench: ssh: export of %ld MiB x %ld x 2 kinds\n",
			o->ssh_export_mib, o->ssh_export_runs);
		ssh_export(&u->g, &u->t, (size_t)o->ssh_export_mib * MiB,
			   (int)o->ssh_export_runs, &u->r.sh);
	}
	ssh_master_close(&u->t, u->state);
}

/* Every set the run picked, then the gateway stopped. */
static void run_sets(struct run *u)
{
	/* 5a: idle, once the initialize's threads have settled. */
	sleep_ms(300);
	if (!read_rss(u->g.pid, &u->r.idle_rss_kib, &u->r.idle_hwm_kib))
		die("cannot read the gateway's /proc status");
	run_local(u);
	if (u->o.do_ssh)
		run_ssh(u);
	if (u->o.do_dtn) {
		u->r.dt.init_ms = (double)u->init_ns / 1e6;
		bench_daytona(&u->g, &u->fk, &u->dl, u->since, &u->o, &u->r.dt);
		u->r.dtn = true;
	}
	if (u->o.do_cloud) {
		u->r.cl.init_ms = (double)u->init_ns / 1e6;
		u->r.cl.delay_ms = u->o.fake_delay_ms;
		bench_cloud(&u->g, &u->cs, &u->cc, u->cl_since, &u->o, &u->r.cl);
		u->r.cloud = true;
	}
	u->r.events = u->g.events;
	u->r.gateway_status = gw_stop(&u->g);
	/* After the main session, whose sandbox is gone: one sandbox at a time. */
	if ((u->o.do_dtn || u->o.do_cloud) && u->o.ttfr_n > 0) {
		bench_ttfr(&u->o, u->sandgate, u->state, &u->r.tf);
		u->r.ttfr = true;
	}
	if (u->o.do_ssh) {
		/* After the timed session: the counting client slows every call. */
		fprintf(stderr, "sgbench: ssh: client runs per tool call x %ld\n", u->o.rt_n);
		ssh_round_trips(&u->o, u->sandgate, u->state, u->o.rt_n, &u->r.sh);
		u->r.ssh = true;
	}
}

/* The table and details to stdout, and to --markdown and --json. */
static void run_report(const struct run *u)
{
	report_markdown(stdout, &u->r);
	fputc('\n', stdout);
	report_details(stdout, &u->r);
	if (u->o.md_out) {
		FILE *m = fopen(u->o.md_out, "we");

		if (!m)
			die("%s: %s", u->o.md_out, strerror(errno));
		report_markdown(m, &u->r);
		fputc('\n', m);
		fputs("```\n", m);
		report_details(m, &u->r);
		fputs("```\n", m);
		fclose(m);
	}
	if (u->o.json_out)
		write_json(u->o.json_out, &u->r);
}

static void run_free(struct run *u)
{
	ssh_target_free(&u->t);
	free(u->r.sh.raw_login);
	free(u->r.sh.raw_true);
	free(u->r.sh.raw_cat);
	free(u->r.sh.view);
	free(u->workspace);
	free(u->state);
	free(u->sandgate);
	free(u->r.cmd_r.argv_text);
	free(u->r.dt.url);
	json_decref(u->r.dt.sdk);
	free(u->fk.url);
	free(u->dl.v);
	free(u->cs.f.url);
	free(u->cs.path);
	free(u->cc.v);
	json_decref(u->r.cl.sdk);
}

int main(int argc, char **argv)
{
	static struct run u;

	parse_opts(argc, argv, &u.o);
	signal(SIGPIPE, SIG_IGN);
	run_paths(&u);
	run_marks(&u);
	run_initialize(&u);
	run_sets(&u);
	run_report(&u);
	if (!u.o.keep)
		nftw(u.state, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	else
		fprintf(stderr, "sgbench: state kept in %s\n", u.state);
	run_free(&u);
	return 0;
}
