/*
 * local.c - the local backend: environments on this machine.
 *
 * The zero-configuration default and the contract's reference
 * implementation.  An environment is a directory under the state dir
 * (<state>/local/<identity>/) holding the workspace (or the profile's
 * host_workspace) and the control directory.  Commands run under
 * bubblewrap: the workspace appears at binding.root, the host's OS
 * directories read-only, nothing else of the host (no home, no state dir),
 * a private /tmp, and no network with `network: "none"`.  CPU, memory and
 * pids limits are cgroup limits the command joins before it starts, and
 * the same cgroups are how teardown kills everything a session started
 * (cgroup.h), not its process groups.  Every claim is enforced or
 * refused: without bubblewrap there is no private view, so network
 * isolation and a root that differs from the workspace's real path are
 * refused; without a writable cgroup, cpus, memory_mb and pids_max are,
 * and the default pids limit and the containment are reported missing.
 *
 * Because the files are on this host, the adapter sets SG_CAP_HOST_FS and
 * the gateway runs file tools in-process against host_root; only commands
 * (and sg-helper steps that must observe the inside) go through exec().
 */
#define _GNU_SOURCE /* asprintf, nftw's FTW_ACTIONRETVAL-free use, O_PATH */
#include "adapters/adapter.h"

#include <dirent.h>
#include <errno.h>
#include <stdatomic.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/crash.h"
#include "base/fsutil.h"
#include "base/limits.h"
#include "base/log.h"
#include "base/slug.h"
#include "base/strv.h"
#include "core/digest.h"
#include "core/exec.h"
#include "adapters/hostutil.h"
#include "core/path.h"
#include "helper/helper.h"
#include "adapters/local/cgroup.h"
#include "adapters/local/sandbox.h"

/*
 * The longest environment name (env_name): "local-" and it fit an id
 * (struct sg_env's id[128]) and the cgroup prefix (cgroup.h, 150 bytes).
 */
#define SG_LOCAL_NAME_MAX 120
_Static_assert(SG_LOCAL_NAME_MAX == 120, "local_list spells the bound as %.120s");

/* Where the sandbox shows sandgate's own parts. */
#define SANDBOX_HELPER "/run/sandgate/sg-helper"
#define SANDBOX_CTL "/run/sandgate/ctl"

struct local_env {
	struct sg_host_env h; /* first; h.dir is <base>/local/<slug> */
	char *bwrap;        /* bubblewrap's path, or NULL */
	char *slug;         /* the environment's name, its cgroups' prefix */
	struct sg_cgroup cg; /* this session's cgroups */
	struct sg_sandbox sb; /* who commands run as, what bubblewrap binds */
};

/*
 * The profile fields the local backend honours (adapter.h); the config
 * layer refuses every other one.  network "none" needs bubblewrap, and
 * cpus and memory_mb a writable cgroup hierarchy: validate() refuses them
 * where this host lacks those, unless best_effort lists them.
 */
static const struct sg_field local_fields[] = {
	SG_FIELD("workspace"), SG_FIELD("host_workspace"),
	SG_FIELD("mount_read_only"), SG_FIELD("persistent"), SG_FIELD("shared"),
	SG_FIELD_BEST_EFFORT("network"), SG_FIELD_BEST_EFFORT("cpus"),
	SG_FIELD_BEST_EFFORT("memory_mb"),
	/* The local backend's own: a cgroup's pids.max (docs/operators.md). */
	{ "pids_max", SG_FIELD_INT, SG_FIELD_PARTIAL, 1, SG_LOCAL_PIDS_CEILING, NULL },
	SG_FIELDS_END,
};

/*
 * The profile's pids_max: 0 when unset.  The config layer checked it
 * against the table's range.
 */
static int64_t pids_max_of(const struct sg_profile *p)
{
	return sg_profile_int(p, "pids_max", 0);
}

static sg_err local_validate(const struct sg_profile *p, struct sg_errinfo *err)
{
	char *bwrap = NULL;
	sg_err rc = SG_OK;

	if (p->network == SG_NET_ALLOW && !sg_profile_best_effort(p, "network"))
		return sg_err_set(err, SG_E_UNSUPPORTED,
				  "network allow lists (profile \"%s\") cannot be enforced by the local backend; use \"none\" or \"default\"",
				  p->name);
	if (p->network == SG_NET_NONE && !(bwrap = sg_exec_which("bwrap")) &&
	    !sg_profile_best_effort(p, "network"))
		rc = sg_err_set(err, SG_E_UNSUPPORTED,
				"network \"none\" (profile \"%s\") needs bubblewrap on this host (apt-get install bubblewrap)",
				p->name);
	free(bwrap);
	if (rc)
		return rc;
	if ((p->cpus > 0 && !sg_profile_best_effort(p, "cpus")) ||
	    (p->memory_mb > 0 && !sg_profile_best_effort(p, "memory_mb")) ||
	    (pids_max_of(p) > 0 && !sg_profile_best_effort(p, "pids_max"))) {
		if (!sg_cgroup_writable())
			return sg_err_set(err, SG_E_UNSUPPORTED,
					  "field \"%s\" (profile \"%s\") needs a writable cgroup hierarchy, and this host has none for sandgate",
					  p->cpus > 0 ? "cpus" : p->memory_mb > 0 ? "memory_mb" : "pids_max",
					  p->name);
	}
	return SG_OK;
}

/*
 * Make this session's cgroups: the limits the profile asks for, the
 * default pids limit, and the containment teardown kills with.  Facts
 * report what was requested, what the kernel was told, and what the
 * cgroup files hold when read back.  A limit the profile asked for that
 * cannot be set is refused (unless best-effort); the default pids limit
 * and the containment are reported missing where the host has no
 * writable cgroup, since refusing them would refuse every local
 * environment on such a host.
 */
static sg_err setup_limits(struct local_env *le, const char *name, json_t *applied,
			   json_t *observed, struct sg_errinfo *err)
{
	const struct sg_profile *p = le->h.base.profile;
	struct sg_cgroup_want want = {
		.cpus = p->cpus,
		.memory_mb = p->memory_mb,
		.pids_max = pids_max_of(p),
		.pids_max_explicit = pids_max_of(p) > 0 && !sg_profile_best_effort(p, "pids_max"),
	};
	struct sg_errinfo soft = { 0 };
	sg_err rc;

	if (want.pids_max <= 0)
		want.pids_max = SG_LOCAL_PIDS_DEFAULT;
	rc = sg_cgroup_make(&le->cg, name, &want, applied, observed, &soft);
	if (rc) {
		/*
		 * sg_cgroup_make tries every limit and applies those the
		 * kernel takes, so a limit asked for and missing from
		 * applied is one that failed.  Only those are dropped, and
		 * only when best-effort: a limit that could be set is never
		 * lifted because another one could not.
		 */
		bool cpus_failed = want.cpus > 0 && !json_object_get(applied, "cpus");
		bool memory_failed = want.memory_mb > 0 && !json_object_get(applied, "memory_mb");

		if (rc != SG_E_UNSUPPORTED || (!cpus_failed && !memory_failed) ||
		    (want.pids_max_explicit && !json_object_get(applied, "pids_max")) ||
		    (cpus_failed && !sg_profile_best_effort(p, "cpus")) ||
		    (memory_failed && !sg_profile_best_effort(p, "memory_mb")))
			return sg_err_set(err, rc, "%s", soft.msg);
		sg_log_warn("%s; the environment runs without %s (best-effort)", soft.msg,
			    cpus_failed && memory_failed ? "cpus and memory_mb"
			    : cpus_failed ? "cpus" : "memory_mb");
		if (cpus_failed)
			want.cpus = 0;
		if (memory_failed)
			want.memory_mb = 0;
		json_object_clear(applied);
		json_object_clear(observed);
		/* The limits kept were taken a moment ago; if they are not
		 * now, the environment would run without them, so refuse. */
		rc = sg_cgroup_make(&le->cg, name, &want, applied, observed, &soft);
		if (rc)
			return sg_err_set(err, rc, "%s", soft.msg);
	}
	if (!le->cg.dirs.n)
		sg_log_warn("no writable cgroup on this host: no pids limit, and a process that "
			    "leaves its process group (setsid) can outlive the session");
	return SG_OK;
}

/*
 * Paths the sandbox can never show the workspace at.  The list is compared
 * literally, so a root spelled another way ("//run", "/./usr",
 * "/x/../proc") is refused as well: initialize already refuses such a
 * root, and this check must not rest on that alone.
 */
static bool root_allowed(const char *root)
{
	static const char *const sysdirs[] = { "/usr", "/etc", "/bin", "/sbin",
					      "/lib", "/lib32", "/lib64", "/libx32",
					      "/proc", "/dev", "/tmp", "/run", "/opt",
					      "/sys", NULL };

	if (root[0] != '/' || strcmp(root, "/") == 0 || !sg_path_normalised(root))
		return false;
	for (size_t i = 0; sysdirs[i]; i++) {
		size_t n = strlen(sysdirs[i]);

		if (strncmp(root, sysdirs[i], n) == 0 && (root[n] == '\0' || root[n] == '/'))
			return false;
	}
	return true;
}

/*
 * The environment's name: its directory under <base>/local, its id after
 * "local-", and its cgroups' prefix (new string, or NULL).  The slug of
 * the identity when it is short enough to be all three whole; a longer
 * one keeps a readable head and gets '~' and 16 hex digits of the
 * identity's SHA-256.  An identity may be 128 bytes, whose slug is up to
 * three times that: cut to fit the id, two identities with one head named
 * one directory, and `envs gc` removing one removed the other's.  sg_slug
 * writes '~' as "%7E", so no short name is ever a long one's.
 */
static char *env_name(const char *identity)
{
	char *s = sg_slug(identity), sum[65], *name = NULL;

	if (!s || strlen(s) <= SG_LOCAL_NAME_MAX)
		return s;
	if (sg_sha256_hex(identity, strlen(identity), sum) &&
	    asprintf(&name, "%.*s~%.16s", SG_LOCAL_NAME_MAX - 17, s, sum) < 0)
		name = NULL;
	free(s);
	return name;
}

/*
 * Who the environment's commands run as, their files theirs, and the
 * descriptors bubblewrap binds (sandbox.h).  A workspace sandgate made is
 * given to the environment's user whole (once: an older sandgate left it
 * root's); a host_workspace is never changed, its owner is that user.
 */
static sg_err sandbox_setup(struct local_env *le, const char *name, const char *ctl,
			    struct sg_errinfo *err)
{
	const struct sg_profile *p = le->h.base.profile;
	sg_err rc = sg_sandbox_pick(&le->sb, name, le->h.workspace, p->host_workspace != NULL,
				    p->mount_read_only, err);

	if (!rc && !p->host_workspace)
		rc = sg_sandbox_own(&le->sb, le->h.workspace, err);
	if (!rc)
		rc = sg_sandbox_own(&le->sb, ctl, err);
	if (!rc)
		rc = sg_sandbox_open(&le->sb, le->h.dir, le->h.workspace, ctl, le->h.base.helper_host,
				     SANDBOX_CTL, err);
	return rc;
}

/*
 * The environment's directory and whether it is resumed, once bubblewrap's
 * presence says which roots and networks can be honoured.
 */
static sg_err local_locate(struct local_env *le, const char *name, struct sg_errinfo *err)
{
	struct sg_env *env = &le->h.base;
	const struct sg_profile *p = env->profile;
	sg_err rc = SG_OK;

	if (!name || asprintf(&le->h.dir, "%s/local/%s",
			      p->workspace ? p->workspace : env->state_dir, name) < 0) {
		le->h.dir = NULL;
		rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
		goto out;
	}
	le->bwrap = sg_exec_which("bwrap");
	if (!le->bwrap && p->network == SG_NET_NONE && !sg_profile_best_effort(p, "network")) {
		rc = sg_err_set(err, SG_E_UNSUPPORTED, "network \"none\" needs bubblewrap");
		goto out;
	}
	if (le->bwrap && !root_allowed(env->root)) {
		rc = sg_err_set(err, SG_E_INVALID_ARGUMENT,
				"root %s is not a normalised path or would hide one of the OS directories inside the sandbox",
				env->root);
		goto out;
	}
	rc = sg_host_find_env(&le->h, err);
out:
	return rc;
}

/*
 * The workspace (the profile's host_workspace, or one under the directory)
 * and the control directory's path.  Without bubblewrap a command runs as
 * sandgate's user on this host itself: where that is root, no command may
 * run at all, and root can only be the workspace's own path.
 */
static sg_err local_workspace(struct local_env *le, char **ctl, struct sg_errinfo *err)
{
	struct sg_env *env = &le->h.base;
	sg_err rc = SG_OK;

	rc = sg_host_workspace(&le->h, err);
	if (rc)
		goto out;
	if (asprintf(ctl, "%s/ctl", le->h.dir) < 0) {
		*ctl = NULL;
		rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
		goto out;
	}
	if (!le->bwrap && geteuid() == 0) {
		rc = sg_err_set(err, SG_E_UNSUPPORTED,
				"sandgate runs as root and bubblewrap is not installed: a command would run as root on this host (install bubblewrap, or run sandgate as an ordinary user)");
		goto out;
	}
	if (!le->bwrap && strcmp(env->root, le->h.workspace) != 0)
		rc = sg_err_set(err, SG_E_UNSUPPORTED,
				"commands can see the workspace at %s only through bubblewrap, which is not installed (install bubblewrap, or set host_workspace to %s)",
				env->root, env->root);
out:
	return rc;
}

/*
 * The directories on disk, the control directory and, with bubblewrap, the
 * sandbox's user and descriptors.  A resumed environment that must exist
 * still needs its workspace.
 */
static sg_err local_create(struct local_env *le, const char *name, const char *ctl,
			   struct sg_errinfo *err)
{
	struct sg_env *env = &le->h.base;
	struct stat st;
	sg_err rc;

	if (sg_mkdir_p(le->h.dir, 0700) || sg_mkdir_p(le->h.workspace, 0755)) {
		rc = sg_err_set(err, SG_E_INTERNAL, "cannot create %s: %s", le->h.dir,
				strerror(errno));
		goto out;
	}
	sg_crashpoint("adapter:created");
	if (env->resumed && env->require_existing && !env->profile->host_workspace &&
	    stat(le->h.workspace, &st) != 0) {
		rc = sg_err_set(err, SG_E_WORKSPACE_LOST, "the workspace %s is gone",
				le->h.workspace);
		goto out;
	}
	rc = sg_host_make_ctl(ctl, err);
	if (!rc && le->bwrap)
		rc = sandbox_setup(le, name, ctl, err);
out:
	return rc;
}

/*
 * The limits asked for, and the cgroups that apply them.  A crashed
 * gateway's processes are left alone here: a host that reconnects with the
 * same session finds them (protocol section 8).  They die when the
 * environment is removed (teardown, envs gc/rm); only the empty cgroups of
 * dead gateways go now.
 */
static sg_err local_limits(struct local_env *le, const char *name, json_t *requested,
			   json_t *applied, json_t *observed, struct sg_errinfo *err)
{
	const struct sg_profile *p = le->h.base.profile;
	char cgname[200];

	if (p->cpus > 0)
		json_object_set_new(requested, "cpus", json_real(p->cpus));
	if (p->memory_mb > 0)
		json_object_set_new(requested, "memory_mb", json_integer(p->memory_mb));
	if (pids_max_of(p) > 0)
		json_object_set_new(requested, "pids_max", json_integer(pids_max_of(p)));
	sg_cgroup_sweep();
	snprintf(cgname, sizeof(cgname), "%.150s-%ld", name, (long)getpid());
	return setup_limits(le, cgname, applied, observed, err);
}

/*
 * What the gateway sees: the helper and control directory as commands see
 * them, the user they run as, and the facts.  Takes name and *ctl.
 * Contained only inside bubblewrap: without it commands run as this user
 * on the host, and one that may write cgroup files can leave.  Whether the
 * host's files are out of reach is the probe's to observe (it tries them
 * from inside), not this adapter's to claim.
 */
static sg_err local_publish(struct local_env *le, char *name, char **ctl,
			    json_t *requested, json_t *applied, json_t *observed,
			    struct sg_errinfo *err)
{
	struct sg_env *env = &le->h.base;

	env->helper = strdup(le->bwrap ? SANDBOX_HELPER : env->helper_host);
	env->ctl_dir = strdup(le->bwrap ? SANDBOX_CTL : *ctl);
	env->own_tmp = le->bwrap; /* the bind in the bwrap argv */
	env->host_root = strdup(le->h.workspace);
	env->host_ctl = *ctl;
	*ctl = NULL;
	env->run_as = le->sb.drop;
	env->run_uid = le->sb.uid;
	env->run_gid = le->sb.gid;
	env->facts = json_pack(
		"{s:{s:b}, s:{s:O, s:O}, s:O, s:s, s:s}", "isolation",
		"processes_die_with_session",
		le->cg.dirs.n > 0 && le->bwrap, "resources", "requested", requested, "applied", applied,
		"observed", observed, "safety_class",
		le->bwrap ? "container" : "trusted_local", "mechanism",
		le->bwrap ? "bubblewrap" : "none");
	le->slug = name;
	if (!env->helper || !env->ctl_dir || !env->host_root || !env->facts)
		return sg_err_set(err, SG_E_INTERNAL, "out of memory");
	return SG_OK;
}

static sg_err local_provision(struct sg_env *env, struct sg_cancel *cancel,
			      struct sg_errinfo *err)
{
	struct local_env *le = (struct local_env *)env;
	json_t *applied = json_object(), *requested = json_object(), *observed = json_object();
	char *name = env_name(env->identity), *ctl = NULL;
	bool fresh = false;
	sg_err rc;

	(void)cancel; /* nothing here blocks for long */
	rc = local_locate(le, name, err);
	if (!rc)
		rc = local_workspace(le, &ctl, err);
	if (rc)
		goto out;
	fresh = !env->resumed;
	rc = local_create(le, name, ctl, err);
	if (rc)
		goto out;
	snprintf(env->id, sizeof(env->id), "local-%s", name);
	rc = local_limits(le, name, requested, applied, observed, err);
	if (!rc && fresh)
		rc = sg_host_write_marker(&le->h, NULL, err);
	if (rc)
		goto out;
	rc = local_publish(le, name, &ctl, requested, applied, observed, err);
	name = NULL;
out:
	if (rc)
		sg_cgroup_kill(&le->cg);
	/* A failed create leaves nothing behind. */
	if (rc && fresh && le->h.dir)
		sg_host_rm_tree(le->h.dir);
	json_decref(applied);
	json_decref(requested);
	json_decref(observed);
	free(name);
	free(ctl);
	return rc;
}

/*
 * bubblewrap's options for one command, which travel in a memory file
 * (options_file) rather than its argv: a command reads its pid 1's argv in
 * /proc/1/cmdline, and there it showed the workspace's and the state
 * directory's paths on this host.
 */
static sg_err sandbox_options(struct local_env *le, const struct sg_exec *x,
			      struct sg_strv *opts)
{
	const struct sg_env *env = &le->h.base;
	const struct sg_profile *p = env->profile;
	bool detaches = x->flags & SG_EXEC_DETACHES;
	bool ro = p->mount_read_only || x->confine == SG_CONFINE_READ_ONLY;
	/*
	 * A user namespace of its own, in which no command can make another
	 * (each one it made would be kernel surface to attack from).
	 */
	sg_err rc = sg_strv_addv(opts, (const char *[]){ "--unshare-user", "--disable-userns",
							 NULL });

	/*
	 * A command that leaves a daemon behind (sg-helper's supervisor) must
	 * not live in a pid namespace that dies with it, nor die with us.
	 */
	if (!rc && !detaches)
		rc = sg_strv_addv(opts, (const char *[]){ "--die-with-parent",
							   "--unshare-pid", "--new-session", NULL });
	if (!rc)
		rc = sg_strv_addv(opts, (const char *[]){ "--unshare-ipc", "--unshare-uts",
							   "--unshare-cgroup-try", "--hostname",
							   "sandgate", "--cap-drop", "ALL", NULL });
	if (!rc && p->network == SG_NET_NONE)
		rc = sg_strv_add(opts, "--unshare-net");
	if (!rc)
		rc = sg_sandbox_binds(&le->sb, opts, env->root, ro, SANDBOX_HELPER, SANDBOX_CTL);
	if (!rc)
		rc = sg_strv_addv(opts, (const char *[]){ "--clearenv", "--chdir",
							   x->cwd ? x->cwd : env->root, NULL });
	return rc;
}

/*
 * bubblewrap's options, then the command's variables as its
 * `--setenv NAME VALUE` arguments, in a memory file for `--args 3`: -1
 * and errno when it cannot be made.  The variables never travel in the
 * environment of the processes that run on this host outside the sandbox
 * (bubblewrap, sg-helper cgroup-exec): a request's LD_PRELOAD would load a
 * library of its choosing into them.  Nor in their argv, which other users
 * of this host may read.
 */
static int options_file(const struct sg_strv *opts, const char *const *envp)
{
	int fd = memfd_create("sandgate-args", MFD_CLOEXEC);
	struct sg_buf b = SG_BUF_INIT(SG_MAX_FRAME);
	bool ok = fd >= 0;

	for (size_t i = 0; ok && i < opts->n; i++)
		ok = !sg_buf_add(&b, opts->v[i], strlen(opts->v[i]) + 1);
	for (size_t i = 0; ok && envp && envp[i]; i++) {
		const char *eq = strchr(envp[i], '=');

		if (eq)
			ok = !sg_buf_add(&b, "--setenv", sizeof("--setenv")) &&
			     !sg_buf_add(&b, envp[i], (size_t)(eq - envp[i])) &&
			     !sg_buf_addc(&b, '\0') && !sg_buf_add(&b, eq + 1, strlen(eq + 1) + 1);
	}
	if (ok && b.len)
		ok = sg_write_all(fd, b.p, b.len) == 0 && lseek(fd, 0, SEEK_SET) == 0;
	if (!ok && fd >= 0) {
		int e = errno;

		close(fd);
		fd = -1;
		errno = e;
	}
	sg_buf_release(&b);
	return fd;
}

/*
 * Replace bubblewrap's flattened status (128+N for a signal) with what
 * `sg-helper status` saw, when it wrote it.  The file lies in the
 * environment's /tmp, where its commands write too: it is opened without
 * following a link or waiting for a FIFO's writer, and only a regular
 * file's few bytes are read.
 */
static void read_status(const char *file, struct sg_exec_result *out)
{
	int fd = open(file, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	char line[32], *end;
	struct stat st;
	ssize_t n = -1;
	long v;

	if (fd < 0)
		return;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode))
		n = read(fd, line, sizeof(line) - 1);
	close(fd);
	if (n <= 0)
		return;
	line[n] = '\0';
	errno = 0;
	if (strncmp(line, "signal ", 7) == 0) {
		v = strtol(line + 7, &end, 10);
		if (end != line + 7 && errno == 0 && v > 0 && v < 128) {
			out->signal = (int)v;
			out->exit_code = -1;
		}
	} else if (strncmp(line, "exit ", 5) == 0) {
		v = strtol(line + 5, &end, 10);
		if (end != line + 5 && errno == 0 && v >= 0 && v <= 255) {
			out->signal = 0;
			out->exit_code = (int)v;
		}
	}
}

/*
 * What runs on this host before the command: sg-helper cgroup-exec, which
 * joins the session's cgroups and, where sandgate is root, shows bubblewrap
 * the descriptors it binds and becomes the environment's user; then
 * bubblewrap reading its options from descriptor 3.
 */
static sg_err host_argv(struct local_env *le, struct sg_strv *av)
{
	sg_err rc = SG_OK;

	if (le->cg.procs.n || le->sb.drop) {
		rc = sg_strv_addv(av, (const char *[]){ le->h.base.helper_host, "cgroup-exec",
							 NULL });
		if (!rc && le->sb.drop)
			rc = sg_strv_add(av, "--user") ||
			     sg_strv_addf(av, "%lu:%lu", (unsigned long)le->sb.uid,
					  (unsigned long)le->sb.gid);
		if (!rc && le->sb.drop && le->bwrap)
			rc = sg_strv_add(av, "--stage") ||
			     sg_strv_addf(av, "%d:%d", SG_SANDBOX_FD_ARGS + 1, SG_SANDBOX_FD_END - 1);
		if (!rc)
			rc = sg_strv_addv(av, sg_strv_get(&le->cg.procs));
		if (!rc)
			rc = sg_strv_add(av, "--");
	}
	if (!rc && le->bwrap)
		rc = sg_strv_addv(av, (const char *[]){ le->bwrap, "--args", "3", "--", NULL });
	return rc;
}

/*
 * What runs inside before the command, naming the status file (new
 * string, *status) that `sg-helper status` writes there.
 *
 * The status file's name is not guessable: a command could otherwise put
 * a FIFO or a link where the next command's status goes.
 *
 * Every command under bubblewrap, even a `full` one that sandgate does not
 * confine, starts in the environment's scope (--scope here, confine --mode
 * scope for a background process).  A background process keeps the host's
 * pid namespace (its supervisor must outlive the call), a command with
 * network the host's abstract unix sockets: in the scope it sets no setuid
 * or setgid bit, and from Landlock ABI 6 it cannot signal, or reach an
 * abstract unix socket of, a process outside the environment, sandgate and
 * its host included (docs/security.md).
 */
static sg_err sandbox_prefix(struct local_env *le, const struct sg_exec *x,
			     struct sg_strv *av, char **status)
{
	static atomic_ulong serial;
	unsigned long k = atomic_fetch_add(&serial, 1);
	uint64_t nonce = 0;
	char name[96];

	if (x->flags & SG_EXEC_DETACHES)
		return sg_strv_addv(av, (const char *[]){ SANDBOX_HELPER, "confine", "--mode",
							   "scope", "--", NULL });
	if (getentropy(&nonce, sizeof(nonce)) != 0)
		nonce = (uint64_t)sg_now_ms() * 2654435761u;
	snprintf(name, sizeof(name), "/tmp/.status-%ld-%lu-%016llx", (long)getpid(), k,
		 (unsigned long long)nonce);
	if (asprintf(status, "%s%s", le->h.base.host_ctl, name) < 0) {
		*status = NULL;
		return SG_E_INTERNAL;
	}
	return sg_strv_addv(av, (const char *[]){ SANDBOX_HELPER, "status", "--scope", "--file",
						   NULL }) ||
	       sg_strv_addf(av, SANDBOX_CTL "%s", name) || sg_strv_add(av, "--");
}

static sg_err local_exec(struct sg_env *env, const struct sg_exec *x,
			 struct sg_exec_result *out, struct sg_cancel *cancel,
			 struct sg_errinfo *err)
{
	struct local_env *le = (struct local_env *)env;
	struct sg_strv av = SG_STRV_INIT, opts = SG_STRV_INIT;
	int fds[SG_SANDBOX_NFDS];
	char *status = NULL;
	sg_err rc = host_argv(le, &av);

	memcpy(fds, le->sb.fds, sizeof(fds));
	fds[0] = -1;
	if (!rc && le->bwrap)
		rc = sandbox_prefix(le, x, &av, &status) || sandbox_options(le, x, &opts);
	if (!rc)
		rc = sg_strv_addv(&av, x->argv);
	if (rc) {
		rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
		goto out;
	}
	if (le->bwrap && (fds[0] = options_file(&opts, x->envp)) < 0) {
		rc = sg_err_set(err, SG_E_INTERNAL, "cannot pass the command's options: %s",
				strerror(errno));
		goto out;
	}
	{
		struct sg_child c;

		sg_host_child(&c, x);
		c.argv = sg_strv_get(&av);
		/* Under bubblewrap, the processes on this host get no variables. */
		c.envp = le->bwrap ? NULL : x->envp;
		c.pass_fds = fds;
		c.npass = le->bwrap ? SG_SANDBOX_NFDS : 0;
		/* Without bubblewrap, root is the workspace's real path. */
		c.cwd = le->bwrap ? NULL : (x->cwd ? x->cwd : env->root);
		rc = sg_exec_run(&c, out, cancel, err);
	}
	if (status && !rc)
		read_status(status, out);
out:
	if (status)
		unlink(status);
	if (fds[0] >= 0)
		close(fds[0]);
	free(status);
	sg_strv_release(&opts);
	sg_strv_release(&av);
	return rc;
}

/*
 * The environment's process spool, <dir>/ctl/proc, opened as an O_PATH
 * descriptor without following a link at any step; -1 with errno when it
 * is not a directory there.  The environment's commands write beneath ctl
 * (it is /run/sandgate/ctl inside), so they can put a link to another
 * environment's spool where theirs was.  Followed, that spool's records
 * would pass the --seen-as check, since every environment's processes see
 * their own spool at the same place, and removing this environment would
 * stop the other's processes.
 */
static int open_spool(const char *dir)
{
	int flags = O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
	int d = open(dir, flags), c = d >= 0 ? openat(d, "ctl", flags) : -1;
	int p = c >= 0 ? openat(c, "proc", flags) : -1, e = errno;

	if (c >= 0)
		close(c);
	if (d >= 0)
		close(d);
	errno = e;
	return p;
}

/*
 * Stop every process still supervised in an environment's spool (a
 * crashed gateway leaves them running), so none outlives its files.
 * sandboxed: its commands ran under bubblewrap, so a group is signalled
 * only when it sees the spool where the sandbox shows it (sg-helper proc
 * stop-all --seen-as): the records are the environment's to write.  A
 * spool the environment replaced by a link or a file stops nothing: its
 * processes die with its cgroups (sg_cgroup_kill_env).
 */
static sg_err stop_processes(const char *dir, bool sandboxed, struct sg_errinfo *err)
{
	struct sg_buf out = SG_BUF_INIT(SG_ENVTOOL_REPLY);
	char ctl[64];
	json_t *reply = NULL;
	int spool = open_spool(dir);
	sg_err rc = SG_OK;

	if (spool < 0) {
		if (errno != ENOENT && errno != ELOOP && errno != ENOTDIR)
			rc = sg_err_set(err, SG_E_INTERNAL, "cannot open the processes of %s: %s",
					dir, strerror(errno));
		else
			sg_log_warn("%s/ctl/proc is not a directory; its processes are stopped with "
				    "its cgroups only", dir);
		goto out;
	}
	/* The helper runs in this process: the descriptor is the spool. */
	snprintf(ctl, sizeof(ctl), "/proc/self/fd/%d", spool);
	{
		char *const argv[] = { "proc", "stop-all", "--ctl", ctl, "--grace-ms", "0",
				       "--seen-as", SANDBOX_CTL "/proc", NULL };

		sg_helper_run(sandboxed ? 8 : 6, argv, NULL, 0, &out, NULL);
	}
	reply = json_loadb(out.p, out.len, 0, NULL);
	if (!json_is_true(json_object_get(reply, "ok")))
		rc = sg_err_set(err, SG_E_INTERNAL, "cannot stop the processes of %s: %s", dir,
				json_string_value(json_object_get(reply, "message"))
					? json_string_value(json_object_get(reply, "message"))
					: "no reply");
out:
	if (spool >= 0)
		close(spool);
	json_decref(reply);
	sg_buf_release(&out);
	return rc;
}

static sg_err local_teardown(struct sg_env *env, enum sg_fate fate,
			     struct sg_cancel *cancel, struct sg_errinfo *err)
{
	struct local_env *le = (struct local_env *)env;
	sg_err rc = SG_OK;

	(void)cancel;
	/*
	 * Everything this session started dies with it, whatever it did with
	 * sessions, process groups or signals: its cgroups are killed, then
	 * removed.  A resumed session makes new ones.
	 */
	if (!sg_cgroup_kill(&le->cg))
		rc = sg_err_set(err, SG_E_INTERNAL,
				"processes of %s could not all be killed (see the log)", env->id);
	/* Processes of earlier, crashed sessions die with the environment. */
	if (!rc && fate == SG_FATE_REMOVE && le->h.dir)
		rc = stop_processes(le->h.dir, le->bwrap != NULL, err);
	if (!rc && fate == SG_FATE_REMOVE && le->slug)
		sg_cgroup_kill_env(le->slug);
	if (!rc && fate == SG_FATE_REMOVE && le->h.dir)
		rc = sg_host_remove(le->h.dir, err);
	return rc;
}

/* <base>/local, where this profile's environments live (new). */
static char *envs_dir(const struct sg_profile *p, const char *state_dir)
{
	char *d = NULL;

	return asprintf(&d, "%s/local", p->workspace ? p->workspace : state_dir) < 0 ? NULL : d;
}

/*
 * Every environment directory with sandgate's marker, orphans included:
 * the directories are the truth, not the registry.
 */
static sg_err local_list(const struct sg_profile *p, const char *state_dir,
			 sg_env_list_cb cb, void *payload, struct sg_cancel *cancel,
			 struct sg_errinfo *err)
{
	char *base = envs_dir(p, state_dir);
	DIR *d = base ? opendir(base) : NULL;
	struct dirent *de;
	sg_err rc = SG_OK;

	(void)cancel;
	if (!d) {
		free(base);
		return errno == ENOENT ? SG_OK
				       : sg_err_set(err, SG_E_INTERNAL, "cannot list %s", state_dir);
	}
	while ((de = readdir(d))) {
		struct sg_env_info info = { 0 };
		json_t *m;
		char *marker = NULL;
		struct stat st;

		if (de->d_name[0] == '.' ||
		    asprintf(&marker, "%s/%s/env.json", base, de->d_name) < 0)
			continue;
		m = json_load_file(marker, 0, NULL);
		/* No name sandgate makes is longer (env_name); a cut id would
		 * name another directory, which rm and gc would then remove. */
		if (strlen(de->d_name) > SG_LOCAL_NAME_MAX) {
			free(marker);
			json_decref(m);
			continue;
		}
		/* At most SG_LOCAL_NAME_MAX bytes (checked above), spelled so
		 * that the compiler sees the bound too. */
		snprintf(info.id, sizeof(info.id), "local-%.120s", de->d_name);
		snprintf(info.state, sizeof(info.state), "%s", m ? "present" : "unmarked");
		sg_host_copy_field(info.identity, sizeof(info.identity), m, "identity");
		sg_host_copy_field(info.session, sizeof(info.session), m, "session");
		sg_host_copy_field(info.profile, sizeof(info.profile), m, "profile");
		info.created = json_integer_value(json_object_get(m, "created"));
		if (!info.created && stat(marker, &st) == 0)
			info.created = st.st_mtime;
		/* Unmarked: a gateway may be between its mkdir and its marker. */
		marker[strlen(marker) - strlen("/env.json")] = '\0';
		if (!info.created && stat(marker, &st) == 0)
			info.created = st.st_mtime;
		info.persistent = json_is_true(json_object_get(m, "persistent"));
		json_decref(m);
		free(marker);
		if (cb(&info, payload))
			break;
	}
	closedir(d);
	free(base);
	return rc;
}

static sg_err local_destroy(const struct sg_profile *p, const char *state_dir,
			    const char *id, struct sg_cancel *cancel,
			    struct sg_errinfo *err)
{
	char *base = envs_dir(p, state_dir), *dir = NULL, *bwrap;
	sg_err rc = SG_OK;

	(void)cancel;
	if (strncmp(id, "local-", 6) != 0 || strchr(id + 6, '/') || id[6] == '.' || !id[6] ||
	    strlen(id + 6) > SG_LOCAL_NAME_MAX) {
		rc = sg_err_set(err, SG_E_INVALID_ARGUMENT, "%s is not a local environment id", id);
		goto out;
	}
	if (!base || asprintf(&dir, "%s/%s", base, id + 6) < 0) {
		dir = NULL;
		rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
		goto out;
	}
	if (access(dir, F_OK) != 0) {
		rc = sg_err_set(err, SG_E_NOT_FOUND, "no local environment %s", id);
		goto out;
	}
	bwrap = sg_exec_which("bwrap");
	rc = stop_processes(dir, bwrap != NULL, err);
	free(bwrap);
	/* And whatever escaped their process groups (a crashed gateway's). */
	if (!rc)
		sg_cgroup_kill_env(id + 6);
	if (!rc)
		rc = sg_host_remove(dir, err);
out:
	free(base);
	free(dir);
	return rc;
}

static void local_release(struct sg_env *env)
{
	struct local_env *le = (struct local_env *)env;

	sg_host_release(&le->h);
	free(le->bwrap);
	free(le->slug);
	sg_cgroup_release(&le->cg);
	sg_sandbox_close(&le->sb);
}

const struct sg_adapter sg_adapter_local = {
	.name = "local",
	.caps = SG_CAP_HOST_FS | SG_CAP_LIST,
	SG_HOST_METHODS(local),
};
