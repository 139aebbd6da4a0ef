/*
 * config.c - loading, validating and narrowing profiles (config.h).
 *
 * One table, fields[], names every field sandgate itself understands, with
 * its type and the rule by which the host's profile (WUU_EXECUTION_PROFILE,
 * protocol section 2) may narrow the operator's.  Loading checks every
 * profile against that table, so `sandgate config check` and startup
 * refuse the same files; building a profile re-checks the host's values
 * with the same code, then applies the narrowing rules, so a type error
 * reads the same wherever it comes from.  "The binding" below is that
 * narrowing object, whoever gives it (the host's profile, or relay.c's).
 *
 * A built profile owns everything it points to: a deep copy of the file's
 * profile object (profile->raw, whose strings the scalar fields point into),
 * a copy of the binding's network value when that is the one in force, and
 * the "NAME=value" strings.  It therefore outlives the config and the
 * binding's JSON, and sg_config_profile() only ever reads the config, so
 * several threads may build profiles from one config at once.
 */
#define _DEFAULT_SOURCE /* realpath */
#include "config/config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "base/limits.h"

/* What a field must hold. */
enum cfg_kind {
	CK_STRING,      /* a non-empty string */
	CK_PATH,        /* a non-empty string naming a file on this host */
	CK_BOOL,        /* true or false */
	CK_NETWORK,     /* "none", "default" or {"allow": [...]} */
	CK_CPUS,        /* a number, SG_CPUS_MIN..SG_CPUS_MAX */
	CK_MEMORY,      /* an integer, 1..SG_MEMORY_MB_MAX */
	CK_PORT,        /* 1..65535 */
	CK_LIFETIME,    /* 0..INT32_MAX seconds */
	CK_SHUTDOWN,    /* 0..INT32_MAX milliseconds */
	CK_FORWARD_ENV, /* [NAME...] or {NAME: value} */
	CK_BEST_EFFORT, /* [field...] */
	CK_HOST_SIDE,   /* the host's command-backend entry: never read */
};

/* How the binding may change a field (protocol 2 and 8.0). */
enum cfg_narrow {
	CN_EQUAL,   /* only repeat the profile's value */
	CN_LOWER,   /* lower it, or set it when the profile does not */
	CN_SHORTER, /* lifetime_seconds: lower it, 0 counting as the default */
	CN_NETWORK, /* only stricter: default > allow > none, allow lists shrink */
	CN_ALLOW,   /* ask for it only where the profile turns it on itself */
	CN_TAKE,    /* the binding's value replaces the profile's */
	CN_TURN_ON, /* may turn it on, never off */
	CN_SUBSET,  /* only drop entries */
	CN_IGNORE,  /* describes the host's side; not sandgate's business */
};

/*
 * Who honours a field.  CF_ADAPTER: only the backends whose adapter lists
 * it in its `fields` table (adapter.h); every other backend refuses it.
 * CF_ALL: the config layer or the gateway itself, for every backend.
 */
enum cfg_owner { CF_ADAPTER, CF_ALL };

struct cfg_field {
	const char *name;
	enum cfg_kind kind;
	enum cfg_narrow narrow;
	size_t off; /* of the struct sg_profile member; NO_MEMBER when none */
	enum cfg_owner owner;
};

#define NO_MEMBER SIZE_MAX
#define MEMBER(m) offsetof(struct sg_profile, m)

/*
 * worker and python are accepted and unused: the host documents them for its
 * own workers and SDK-based adapters, and sandgate needs neither.
 */
static const struct cfg_field fields[] = {
	{ "backend", CK_STRING, CN_IGNORE, MEMBER(backend), CF_ALL },
	{ "image", CK_STRING, CN_EQUAL, MEMBER(image), CF_ADAPTER },
	{ "snapshot", CK_STRING, CN_EQUAL, MEMBER(snapshot), CF_ADAPTER },
	/*
	 * A host's command-backend entry carries `workspace` as the root it
	 * binds, not as the backend's base directory: from a binding it is
	 * the host's side and ignored.
	 */
	{ "workspace", CK_STRING, CN_IGNORE, MEMBER(workspace), CF_ADAPTER },
	{ "user", CK_STRING, CN_EQUAL, MEMBER(user), CF_ADAPTER },
	{ "host_workspace", CK_PATH, CN_EQUAL, MEMBER(host_workspace), CF_ADAPTER },
	{ "host", CK_STRING, CN_EQUAL, MEMBER(host), CF_ADAPTER },
	{ "identity_file", CK_PATH, CN_EQUAL, MEMBER(identity_file), CF_ADAPTER },
	{ "known_hosts_file", CK_PATH, CN_EQUAL, MEMBER(known_hosts_file), CF_ADAPTER },
	/* The host's launch of its own worker: not sandgate's business. */
	{ "worker", CK_STRING, CN_IGNORE, NO_MEMBER, CF_ALL },
	{ "python", CK_STRING, CN_IGNORE, NO_MEMBER, CF_ALL },
	/*
	 * State left behind, and a filesystem other sessions see: the host
	 * may ask for them only where the operator's profile has them.
	 */
	{ "persistent", CK_BOOL, CN_ALLOW, MEMBER(persistent), CF_ADAPTER },
	{ "shared", CK_BOOL, CN_ALLOW, MEMBER(shared), CF_ADAPTER },
	{ "mount_read_only", CK_BOOL, CN_TURN_ON, MEMBER(mount_read_only), CF_ADAPTER },
	{ "network", CK_NETWORK, CN_NETWORK, NO_MEMBER, CF_ADAPTER },
	{ "cpus", CK_CPUS, CN_LOWER, NO_MEMBER, CF_ADAPTER },
	{ "memory_mb", CK_MEMORY, CN_LOWER, NO_MEMBER, CF_ADAPTER },
	{ "port", CK_PORT, CN_EQUAL, NO_MEMBER, CF_ADAPTER },
	/* The gateway's registry expires a detached environment by it. */
	{ "lifetime_seconds", CK_LIFETIME, CN_SHORTER, NO_MEMBER, CF_ALL },
	{ "shutdown_timeout_ms", CK_SHUTDOWN, CN_TAKE, NO_MEMBER, CF_ALL },
	/*
	 * The host's forward_env names variables of the host's own
	 * environment, whose values it sends in binding.environment.
	 */
	{ "forward_env", CK_FORWARD_ENV, CN_IGNORE, NO_MEMBER, CF_ALL },
	{ "best_effort", CK_BEST_EFFORT, CN_SUBSET, NO_MEMBER, CF_ALL },
	{ "command", CK_HOST_SIDE, CN_IGNORE, NO_MEMBER, CF_ALL },
	{ "shutdown_grace_ms", CK_HOST_SIDE, CN_IGNORE, NO_MEMBER, CF_ALL },
#ifdef SG_CONFIG_TEST_FIELD
	/* tests/unit/test_fields.c: a field no adapter declares. */
	SG_CONFIG_TEST_FIELD,
#endif
};

#define NFIELDS (sizeof(fields) / sizeof(fields[0]))

/* The config used when there is no file (config.h). */
static const char embedded[] =
	"{\"default\":\"local\",\"profiles\":{\"local\":{\"backend\":\"local\"}}}";

#define EMBEDDED_PATH "<embedded>"

/*
 * Profile names end up in provider tags, state file names and
 * struct sg_env_info.profile[64], so they are short and plain.
 */
#define NAME_MAX_LEN 63

/* How much of a user-supplied word a message quotes. */
#define SHOWN_MAX 40

struct sg_config {
	char *path;          /* as given, or EMBEDDED_PATH */
	char *dir;           /* the file's directory, absolute; NULL: embedded */
	json_t *root;        /* the whole document */
	json_t *profiles;    /* borrowed from root */
	const char *def;     /* a key of profiles */
	const char **names;  /* NULL-terminated; keys borrowed from root */
};

/* What messages call the host's profile: where it comes from. */
#define HOST_PROFILE "WUU_EXECUTION_PROFILE"

/* Where a value came from, for the message's prefix. */
struct cfg_where {
	const char *path;    /* NULL: the host's profile */
	const char *profile;
};

/* What sg_profile_free() releases; p comes first so the cast back is valid. */
struct cfg_box {
	struct sg_profile p;
	char *name;
	char *config_dir;     /* p.config_dir */
	json_t *raw;          /* deep copy of the file's profile object */
	json_t *bind_net;     /* deep copy of the binding's network, if in force */
	const char **allow;   /* p.network_allow */
	const char **best;    /* p.best_effort */
	char **env;           /* p.forward_env: "NAME=value" strings */
	size_t n_env;
};

/* ---- Messages -------------------------------------------------------- */

/*
 * A user-supplied word made fit to quote: clipped to SHOWN_MAX bytes, with
 * anything that is not printable ASCII (quotes and backslashes included)
 * shown as '?', so a message stays one clean line.
 */
static const char *shown(const char *s, char *out, size_t n)
{
	size_t i;

	for (i = 0; i < SHOWN_MAX && i + 4 < n && s[i]; i++) {
		unsigned char c = (unsigned char)s[i];

		out[i] = (c < 0x20 || c > 0x7e || c == '"' || c == '\\')
			? '?' : (char)c;
	}
	if (s[i]) {
		out[i++] = '.';
		out[i++] = '.';
		out[i++] = '.';
	}
	out[i] = '\0';
	return out;
}

/*
 * A field's value is wrong: `FILE: profile "P": field "F": WHY` for the
 * file, `WUU_EXECUTION_PROFILE: field "F": WHY` for the host's profile.
 */
static sg_err bad_field(struct sg_errinfo *err, sg_err code,
			const struct cfg_where *w, const char *field,
			const char *fmt, ...) SG_PRINTF(5, 6);

static sg_err bad_field(struct sg_errinfo *err, sg_err code,
			const struct cfg_where *w, const char *field,
			const char *fmt, ...)
{
	char why[SG_ERR_MSG];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	if (w->path)
		return sg_err_set(err, code,
				  "%s: profile \"%s\": field \"%s\": %s",
				  w->path, w->profile, field, why);
	return sg_err_set(err, code, HOST_PROFILE ": field \"%s\": %s", field, why);
}

/* "a, b, c" (clipped with "...") for messages that list the profiles. */
static void list_names(const struct sg_config *cfg, char *out, size_t n)
{
	size_t len = 0, k;
	char sh[SHOWN_MAX + 8];

	out[0] = '\0';
	for (size_t i = 0; cfg->names[i]; i++) {
		shown(cfg->names[i], sh, sizeof(sh));
		k = strlen(sh) + (i ? 2 : 0);
		if (len + k + 4 >= n) {
			snprintf(out + len, n - len, "...");
			return;
		}
		snprintf(out + len, n - len, "%s%s", i ? ", " : "", sh);
		len += k;
	}
}

/* ---- Small checks ---------------------------------------------------- */

static const struct cfg_field *field_find(const char *name)
{
	for (size_t i = 0; i < NFIELDS; i++)
		if (strcmp(fields[i].name, name) == 0)
			return &fields[i];
	return NULL;
}

static bool name_ok(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > NAME_MAX_LEN)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '.' || c == '_' ||
		      c == '-'))
			return false;
	}
	return true;
}

/* POSIX's portable variable names: a letter or '_', then alphanumerics. */
static bool env_name_ok(const char *s)
{
	if (!((s[0] >= 'A' && s[0] <= 'Z') || (s[0] >= 'a' && s[0] <= 'z') ||
	      s[0] == '_'))
		return false;
	for (size_t i = 1; s[i]; i++) {
		char c = s[i];

		if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
		      (c >= '0' && c <= '9') || c == '_'))
			return false;
	}
	return true;
}

/* A string jansson holds that has no NUL inside, so C sees all of it. */
static bool whole_string(const json_t *v)
{
	return json_is_string(v) &&
	       strlen(json_string_value(v)) == json_string_length(v);
}

static bool bare_address(const char *s)
{
	unsigned char a[16];

	return inet_pton(AF_INET, s, a) == 1 || inet_pton(AF_INET6, s, a) == 1;
}

/* Does the profile's allow entry `outer` admit everything `inner` does? */
static bool covers(const char *outer, const char *inner)
{
	struct sg_cidr o, i;
	size_t lo, li;

	if (sg_cidr_parse(outer, &o)) {
		if (!sg_cidr_parse(inner, &i) || i.family != o.family ||
		    i.prefix < o.prefix)
			return false;
		for (unsigned bit = 0; bit < o.prefix; bit++) {
			unsigned char m = (unsigned char)(0x80u >> (bit % 8));

			if ((o.addr[bit / 8] & m) != (i.addr[bit / 8] & m))
				return false;
		}
		return true;
	}
	if (sg_cidr_parse(inner, &i))
		return false;
	if (strcasecmp(outer, inner) == 0)
		return true;
	/* "*.example.com" admits "a.example.com" and "*.a.example.com". */
	if (strncmp(outer, "*.", 2) != 0)
		return false;
	lo = strlen(outer + 1); /* ".example.com" */
	li = strlen(inner);
	return li > lo && strcasecmp(inner + li - lo, outer + 1) == 0;
}

/* ---- Checking one value ---------------------------------------------- */

static sg_err check_int(const struct cfg_where *w, const char *field,
			const json_t *v, json_int_t lo, json_int_t hi,
			const char *rule, struct sg_errinfo *err)
{
	if (!json_is_integer(v) || json_integer_value(v) < lo ||
	    json_integer_value(v) > hi)
		return bad_field(err, SG_E_INVALID_ARGUMENT, w, field,
				 "must be %s", rule);
	return SG_OK;
}

static sg_err check_network(const struct cfg_where *w, const json_t *v,
			    struct sg_errinfo *err)
{
	const char *key, *s;
	char sh[SHOWN_MAX + 8];
	json_t *allow, *x;
	size_t i;

	if (json_is_string(v)) {
		s = json_string_value(v);
		/* "enabled" is the host's word for "default" (protocol 8.1). */
		if (strcmp(s, "none") == 0 || strcmp(s, "default") == 0 ||
		    strcmp(s, "enabled") == 0)
			return SG_OK;
	}
	if (!json_is_object(v))
		return bad_field(err, SG_E_INVALID_ARGUMENT, w, "network",
				 "must be \"none\", \"default\" (or \"enabled\") or "
				 "{\"allow\": [CIDR or domain, ...]}");
	json_object_foreach((json_t *)v, key, x) {
		if (strcmp(key, "allow") != 0)
			return bad_field(err, SG_E_INVALID_ARGUMENT, w,
					 "network",
					 "unknown key \"%s\" (only \"allow\")",
					 shown(key, sh, sizeof(sh)));
	}
	allow = json_object_get(v, "allow");
	if (!json_is_array(allow) || json_array_size(allow) == 0)
		return bad_field(err, SG_E_INVALID_ARGUMENT, w, "network",
				 "\"allow\" must list at least one CIDR or "
				 "domain (\"none\" allows nothing)");
	json_array_foreach(allow, i, x) {
		if (!whole_string(x) || !*json_string_value(x))
			return bad_field(err, SG_E_INVALID_ARGUMENT, w,
					 "network",
					 "\"allow\" entries must be non-empty "
					 "strings");
		s = json_string_value(x);
		if (bare_address(s))
			return bad_field(err, SG_E_INVALID_ARGUMENT, w,
					 "network",
					 "\"%s\" is an address; write it as a "
					 "CIDR with a prefix (\"%s/%d\")",
					 shown(s, sh, sizeof(sh)), sh,
					 strchr(s, ':') ? 128 : 32);
		if (sg_allow_kind(s) == SG_ALLOW_BAD)
			return bad_field(err, SG_E_INVALID_ARGUMENT, w,
					 "network",
					 "\"%s\" is neither a CIDR "
					 "(address/prefix) nor a domain name",
					 shown(s, sh, sizeof(sh)));
	}
	return SG_OK;
}

/* Values are never quoted: a forward_env value may be a credential. */
static sg_err check_forward_env(const struct cfg_where *w, const json_t *v,
				struct sg_errinfo *err)
{
	char sh[SHOWN_MAX + 8];
	const char *key, *s;
	json_t *x;
	size_t i, j;

	if (json_is_array(v)) {
		json_array_foreach(v, i, x) {
			if (!whole_string(x))
				return bad_field(err, SG_E_INVALID_ARGUMENT,
						 w, "forward_env",
						 "entry %zu must be a variable "
						 "name", i);
			s = json_string_value(x);
			if (!env_name_ok(s))
				return bad_field(err, SG_E_INVALID_ARGUMENT,
						 w, "forward_env",
						 "\"%s\" is not a valid variable "
						 "name",
						 shown(s, sh, sizeof(sh)));
			for (j = 0; j < i; j++)
				if (strcmp(json_string_value(
					    json_array_get(v, j)), s) == 0)
					return bad_field(
						err, SG_E_INVALID_ARGUMENT, w,
						"forward_env",
						"lists %s twice", s);
		}
		return SG_OK;
	}
	if (!json_is_object(v))
		return bad_field(err, SG_E_INVALID_ARGUMENT, w, "forward_env",
				 "must be a list of variable names or an "
				 "object of names to string values");
	json_object_foreach((json_t *)v, key, x) {
		if (!env_name_ok(key))
			return bad_field(err, SG_E_INVALID_ARGUMENT, w,
					 "forward_env",
					 "\"%s\" is not a valid variable name",
					 shown(key, sh, sizeof(sh)));
		if (!whole_string(x))
			return bad_field(err, SG_E_INVALID_ARGUMENT, w,
					 "forward_env",
					 "the value of %s must be a string "
					 "without NUL bytes", key);
	}
	return SG_OK;
}

/*
 * best_effort names fields: one sandgate knows or one this profile sets (a
 * backend's own).  prof is NULL for the binding, whose list is then checked
 * against the profile's by the narrowing rule instead.
 */
static sg_err check_best_effort(const struct cfg_where *w, const json_t *v,
				const json_t *prof, struct sg_errinfo *err)
{
	char sh[SHOWN_MAX + 8];
	const struct cfg_field *f;
	const char *s;
	json_t *x;
	size_t i;

	if (!json_is_array(v))
		return bad_field(err, SG_E_INVALID_ARGUMENT, w, "best_effort",
				 "must be a list of field names");
	json_array_foreach(v, i, x) {
		if (!whole_string(x))
			return bad_field(err, SG_E_INVALID_ARGUMENT, w,
					 "best_effort",
					 "entry %zu must be a field name", i);
		s = json_string_value(x);
		f = field_find(s);
		if (f && (f->kind == CK_HOST_SIDE || f->kind == CK_BEST_EFFORT ||
			  strcmp(s, "backend") == 0))
			return bad_field(err, SG_E_INVALID_ARGUMENT, w,
					 "best_effort",
					 "\"%s\" cannot be best-effort", s);
		if (!f && prof && !json_object_get(prof, s))
			return bad_field(err, SG_E_INVALID_ARGUMENT, w,
					 "best_effort",
					 "\"%s\" is not a field of this profile",
					 shown(s, sh, sizeof(sh)));
	}
	return SG_OK;
}

/* One known field's value, by the rules of its kind. */
static sg_err check_value(const struct cfg_field *f, const json_t *v,
			  const struct cfg_where *w, const json_t *prof,
			  struct sg_errinfo *err)
{
	sg_err rc;

	switch (f->kind) {
	case CK_STRING:
	case CK_PATH:
		if (!whole_string(v) || !*json_string_value(v))
			return bad_field(err, SG_E_INVALID_ARGUMENT, w, f->name,
					 "must be a non-empty string");
		return SG_OK;
	case CK_BOOL:
		if (!json_is_boolean(v))
			return bad_field(err, SG_E_INVALID_ARGUMENT, w, f->name,
					 "must be true or false");
		return SG_OK;
	case CK_NETWORK:
		return check_network(w, v, err);
	case CK_CPUS:
		if (!json_is_number(v) || !(json_number_value(v) > 0) ||
		    !isfinite(json_number_value(v)))
			return bad_field(err, SG_E_INVALID_ARGUMENT, w, f->name,
					 "must be a positive number");
		/*
		 * Bounded here, for every backend and for profiles and
		 * bindings alike: a binding may lower cpus below the
		 * smallest quota the kernel takes, and a huge value does
		 * not fit the quota's integer.
		 */
		if (json_number_value(v) < SG_CPUS_MIN ||
		    json_number_value(v) > SG_CPUS_MAX)
			return bad_field(err, SG_E_INVALID_ARGUMENT, w, f->name,
					 "must be a number from %g to %d",
					 SG_CPUS_MIN, SG_CPUS_MAX);
		return SG_OK;
	case CK_MEMORY:
		rc = check_int(w, f->name, v, 1, INT64_MAX,
			       "a positive integer", err);
		/* Backends count it in bytes (a cgroup's memory.max): keep
		 * that inside 64 bits. */
		if (!rc && json_integer_value(v) > SG_MEMORY_MB_MAX)
			return bad_field(err, SG_E_INVALID_ARGUMENT, w, f->name,
					 "must be an integer from 1 to %lld",
					 SG_MEMORY_MB_MAX);
		return rc;
	case CK_PORT:
		return check_int(w, f->name, v, 1, 65535,
				 "an integer from 1 to 65535", err);
	case CK_LIFETIME:
		/* Adapters turn it into milliseconds: keep that in range. */
		return check_int(w, f->name, v, 0, INT32_MAX,
				 "an integer from 0 to 2147483647", err);
	case CK_SHUTDOWN:
		/* The host's own bounds (its documentation of the field). */
		return check_int(w, f->name, v, 0, INT32_MAX,
				 "an integer from 0 to 2147483647", err);
	case CK_FORWARD_ENV:
		return check_forward_env(w, v, err);
	case CK_BEST_EFFORT:
		return check_best_effort(w, v, prof, err);
	case CK_HOST_SIDE:
		return SG_OK;
	}
	return sg_err_set(err, SG_E_INTERNAL, "field kind %d", (int)f->kind);
}

/* ---- Loading --------------------------------------------------------- */

static sg_err check_profile(const char *path, const char *name,
			    const json_t *prof, struct sg_errinfo *err)
{
	const struct cfg_where w = { path, name };
	const struct cfg_field *f;
	const char *key;
	json_t *v;
	sg_err rc;

	if (!json_is_object(prof))
		return sg_err_set(err, SG_E_INVALID_ARGUMENT,
				  "%s: profile \"%s\": must be an object",
				  path, name);
	if (!json_object_get(prof, "backend"))
		return bad_field(err, SG_E_INVALID_ARGUMENT, &w, "backend",
				 "is required (the adapter's name, e.g. "
				 "\"local\")");
	json_object_foreach((json_t *)prof, key, v) {
		f = field_find(key);
		if (!f)
			continue; /* a backend's own field, for its validate() */
		rc = check_value(f, v, &w, prof, err);
		if (rc)
			return rc;
	}
	return SG_OK;
}

static sg_err read_file(const char *path, json_t **out,
			struct sg_errinfo *err)
{
	json_error_t je;
	struct stat st;
	sg_err rc;
	FILE *fp;

	*out = NULL;
	fp = fopen(path, "r");
	if (!fp) {
		if (errno == ENOENT || errno == ENOTDIR)
			return sg_err_set(err, SG_E_NOT_FOUND,
					  "%s: no such file", path);
		return sg_err_set(err, SG_E_INVALID_ARGUMENT,
				  "%s: cannot open: %s", path,
				  strerror(errno));
	}
	if (fstat(fileno(fp), &st) != 0 || !S_ISREG(st.st_mode)) {
		rc = sg_err_set(err, SG_E_INVALID_ARGUMENT,
				"%s: not a regular file", path);
		goto out;
	}
	*out = json_loadf(fp, JSON_REJECT_DUPLICATES, &je);
	if (!*out) {
		rc = sg_err_set(err, SG_E_INVALID_ARGUMENT, "%s:%d:%d: %s",
				path, je.line, je.column, je.text);
		goto out;
	}
	rc = SG_OK;
out:
	fclose(fp);
	return rc;
}

/*
 * The absolute directory of the file at path (new), which relative path
 * fields are taken from.  Resolved once, at load: the config is read-only
 * afterwards, and a later chdir of the caller changes nothing.
 */
static sg_err file_dir(const char *path, char **out, struct sg_errinfo *err)
{
	char *real = realpath(path, NULL);
	char *slash = real ? strrchr(real, '/') : NULL;

	if (!slash) {
		free(real);
		return sg_err_set(err, SG_E_INVALID_ARGUMENT, "%s: cannot resolve: %s",
				  path, strerror(errno ? errno : ENOENT));
	}
	/* realpath's result is absolute: "/c.json" leaves "/". */
	slash[slash == real ? 1 : 0] = '\0';
	*out = real;
	return SG_OK;
}

/* The top level: {"default"?: NAME, "profiles": {NAME: {...}, ...}}. */
static sg_err check_top(struct sg_config *cfg, struct sg_errinfo *err)
{
	char sh[SHOWN_MAX + 8], list[160];
	const char *key, *path = cfg->path;
	json_t *v, *def;
	size_t n = 0;
	sg_err rc;

	if (!json_is_object(cfg->root))
		return sg_err_set(err, SG_E_INVALID_ARGUMENT,
				  "%s: the top level must be an object", path);
	json_object_foreach(cfg->root, key, v) {
		if (strcmp(key, "default") != 0 && strcmp(key, "profiles") != 0)
			return sg_err_set(err, SG_E_INVALID_ARGUMENT,
					  "%s: unknown top-level key \"%s\" "
					  "(only \"default\" and \"profiles\")",
					  path, shown(key, sh, sizeof(sh)));
	}
	cfg->profiles = json_object_get(cfg->root, "profiles");
	if (!json_is_object(cfg->profiles))
		return sg_err_set(err, SG_E_INVALID_ARGUMENT,
				  "%s: \"profiles\" must be an object of named "
				  "profiles", path);
	if (json_object_size(cfg->profiles) == 0)
		return sg_err_set(err, SG_E_INVALID_ARGUMENT,
				  "%s: \"profiles\" is empty; define at least "
				  "one profile", path);
	cfg->names = calloc(json_object_size(cfg->profiles) + 1,
			    sizeof(*cfg->names));
	if (!cfg->names)
		return sg_err_set(err, SG_E_INTERNAL, "out of memory");
	json_object_foreach(cfg->profiles, key, v) {
		if (!name_ok(key))
			return sg_err_set(err, SG_E_INVALID_ARGUMENT,
					  "%s: profile name \"%s\" must be 1 "
					  "to %d letters, digits, '.', '_' or "
					  "'-'", path,
					  shown(key, sh, sizeof(sh)),
					  NAME_MAX_LEN);
		rc = check_profile(path, key, v, err);
		if (rc)
			return rc;
		cfg->names[n++] = key;
	}

	def = json_object_get(cfg->root, "default");
	if (def) {
		if (!whole_string(def))
			return sg_err_set(err, SG_E_INVALID_ARGUMENT,
					  "%s: \"default\" must be a profile's "
					  "name", path);
		if (!json_object_get(cfg->profiles, json_string_value(def))) {
			list_names(cfg, list, sizeof(list));
			return sg_err_set(err, SG_E_INVALID_ARGUMENT,
					  "%s: \"default\" names no profile: "
					  "\"%s\" (profiles: %s)", path,
					  shown(json_string_value(def), sh,
						sizeof(sh)), list);
		}
		cfg->def = json_object_iter_key(json_object_iter_at(
			cfg->profiles, json_string_value(def)));
	} else if (n == 1) {
		cfg->def = cfg->names[0];
	} else if (json_object_get(cfg->profiles, "local")) {
		cfg->def = json_object_iter_key(
			json_object_iter_at(cfg->profiles, "local"));
	} else {
		list_names(cfg, list, sizeof(list));
		return sg_err_set(err, SG_E_INVALID_ARGUMENT,
				  "%s: no \"default\" and no profile named "
				  "\"local\" to fall back on; set \"default\" "
				  "(profiles: %s)", path, list);
	}
	return SG_OK;
}

sg_err sg_config_load(const char *path, struct sg_config **out,
		      struct sg_errinfo *err)
{
	struct sg_config *cfg;
	json_error_t je;
	sg_err rc;

	*out = NULL;
	cfg = calloc(1, sizeof(*cfg));
	if (!cfg)
		return sg_err_set(err, SG_E_INTERNAL, "out of memory");
	cfg->path = strdup(path ? path : EMBEDDED_PATH);
	if (!cfg->path) {
		rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
		goto out;
	}
	if (path) {
		rc = read_file(path, &cfg->root, err);
		if (!rc)
			rc = file_dir(path, &cfg->dir, err);
		if (rc)
			goto out;
	} else {
		cfg->root = json_loads(embedded, JSON_REJECT_DUPLICATES, &je);
		if (!cfg->root) {
			rc = sg_err_set(err, SG_E_INTERNAL,
					"%s: %s", EMBEDDED_PATH, je.text);
			goto out;
		}
	}
	rc = check_top(cfg, err);
	if (rc)
		goto out;
	*out = cfg;
	cfg = NULL;
	rc = SG_OK;
out:
	sg_config_free(cfg);
	return rc;
}

void sg_config_free(struct sg_config *cfg)
{
	if (!cfg)
		return;
	free(cfg->names);
	json_decref(cfg->root);
	free(cfg->path);
	free(cfg->dir);
	free(cfg);
}

const char *sg_config_path(const struct sg_config *cfg)
{
	return cfg->path;
}

const char *sg_config_default(const struct sg_config *cfg)
{
	return cfg->def;
}

const char *const *sg_config_names(const struct sg_config *cfg)
{
	return cfg->names;
}

/* ---- Narrowing ------------------------------------------------------- */

/* default (0) < allow (1) < none (2): higher is stricter. */
static int strictness(const json_t *net)
{
	if (!net || json_is_object(net))
		return net ? 1 : 0;
	return strcmp(json_string_value(net), "none") == 0 ? 2 : 0;
}

static const char *net_word(const json_t *net)
{
	return json_is_string(net) ? json_string_value(net) : "allow";
}

static sg_err narrow_network(const json_t *pv, const json_t *bv,
			     struct sg_errinfo *err)
{
	char sh[SHOWN_MAX + 8];
	json_t *pa, *ba, *x, *y;
	size_t i, j;
	bool ok;

	if (strictness(bv) < strictness(pv))
		return sg_err_set(err, SG_E_PERMISSION,
				  HOST_PROFILE ": field \"network\": \"%s\" is wider "
				  "than the operator's profile's \"%s\"",
				  net_word(bv), net_word(pv));
	if (strictness(bv) != 1 || strictness(pv) != 1)
		return SG_OK;
	pa = json_object_get(pv, "allow");
	ba = json_object_get(bv, "allow");
	json_array_foreach(ba, i, x) {
		ok = false;
		json_array_foreach(pa, j, y)
			if (covers(json_string_value(y), json_string_value(x)))
				ok = true;
		if (!ok)
			return sg_err_set(err, SG_E_PERMISSION,
					  HOST_PROFILE ": field \"network\": allows "
					  "\"%s\", which the operator's allow list "
					  "does not",
					  shown(json_string_value(x), sh,
						sizeof(sh)));
	}
	return SG_OK;
}

static bool array_has(const json_t *a, const char *s)
{
	json_t *x;
	size_t i;

	json_array_foreach(a, i, x)
		if (json_is_string(x) && strcmp(json_string_value(x), s) == 0)
			return true;
	return false;
}

/* A profile's lifetime_seconds in force: absent or 0 is the default. */
static json_int_t lifetime_of(const json_t *v)
{
	return json_integer_value(v) > 0 ? json_integer_value(v) : SG_LIFETIME_DEFAULT_S;
}

/* A number the host's profile may only lower (pv: the operator's, or NULL). */
static sg_err narrow_lower(const char *key, const json_t *pv, const json_t *bv,
			   struct sg_errinfo *err)
{
	if (!pv || json_number_value(bv) <= json_number_value(pv))
		return SG_OK;
	if (json_is_integer(bv) && json_is_integer(pv))
		return sg_err_set(err, SG_E_PERMISSION,
				  HOST_PROFILE ": field \"%s\": %lld exceeds the operator's profile's %lld",
				  key, (long long)json_integer_value(bv),
				  (long long)json_integer_value(pv));
	return sg_err_set(err, SG_E_PERMISSION,
			  HOST_PROFILE ": field \"%s\": %g exceeds the operator's profile's %g", key,
			  json_number_value(bv), json_number_value(pv));
}

/*
 * One field of the host's profile (bv, under key) against the operator's
 * (pv, or NULL where it does not set it): may the host's have it?  f is
 * the field's entry (NULL for a field the table does not know, which
 * must be equal).
 */
static sg_err narrow_field(const struct cfg_field *f, const char *key, json_t *pv, json_t *bv,
			   struct sg_errinfo *err)
{
	char sh[SHOWN_MAX + 8];
	json_t *x;
	size_t i;
	sg_err rc;

	switch (f ? f->narrow : CN_EQUAL) {
	case CN_EQUAL:
		if (!pv)
			return sg_err_set(err, SG_E_PERMISSION,
					  HOST_PROFILE ": field \"%s\": "
					  "the operator's profile does not "
					  "set it, and the host's may not "
					  "add it",
					  shown(key, sh, sizeof(sh)));
		if (!json_equal(pv, bv))
			return sg_err_set(err, SG_E_PERMISSION,
					  HOST_PROFILE ": field \"%s\": "
					  "differs from the operator's "
					  "profile, which the host's may "
					  "only narrow",
					  shown(key, sh, sizeof(sh)));
		break;
	case CN_LOWER:
		return narrow_lower(key, pv, bv, err);
	case CN_SHORTER:
		if (json_integer_value(bv) <= lifetime_of(pv))
			break;
		return sg_err_set(err, SG_E_PERMISSION,
				  HOST_PROFILE ": field \"%s\": %lld exceeds the "
				  "operator's profile's %lld", key,
				  (long long)json_integer_value(bv),
				  (long long)lifetime_of(pv));
	case CN_NETWORK:
		rc = narrow_network(pv, bv, err);
		if (rc)
			return rc;
		break;
	case CN_ALLOW:
		if (json_is_true(bv) && !json_is_true(pv))
			return sg_err_set(err, SG_E_PERMISSION,
					  HOST_PROFILE ": field \"%s\": the "
					  "operator's profile is not %s, and "
					  "the host's may not make it so",
					  key, key);
		break;
	case CN_TURN_ON:
		if (json_is_true(pv) && !json_is_true(bv))
			return sg_err_set(err, SG_E_PERMISSION,
					  HOST_PROFILE ": field \"%s\": "
					  "false would lift the operator's "
					  "profile's", key);
		break;
	case CN_SUBSET:
		json_array_foreach(bv, i, x)
			if (!array_has(pv, json_string_value(x)))
				return sg_err_set(
					err, SG_E_PERMISSION,
					HOST_PROFILE ": field \"%s\": "
					"adds \"%s\", which the operator's "
					"profile does not mark best-effort",
					key,
					shown(json_string_value(x), sh,
					      sizeof(sh)));
		break;
	case CN_TAKE:
	case CN_IGNORE:
		break;
	}
	return SG_OK;
}

/*
 * Check the binding against the profile prof: types first
 * (SG_E_INVALID_ARGUMENT), then that it only narrows (SG_E_PERMISSION).
 */
static sg_err narrow_check(const json_t *prof, const json_t *env,
			   struct sg_errinfo *err)
{
	static const struct cfg_where bw = { NULL, NULL };
	const struct cfg_field *f;
	const char *key;
	json_t *bv;
	sg_err rc;

	json_object_foreach((json_t *)env, key, bv) {
		f = field_find(key);
		if (f && f->narrow == CN_IGNORE)
			continue;
		if (f) {
			rc = check_value(f, bv, &bw, NULL, err);
			if (rc)
				return rc;
		}
		rc = narrow_field(f, key, json_object_get(prof, key), bv, err);
		if (rc)
			return rc;
	}
	return SG_OK;
}

/* ---- Fields per backend ---------------------------------------------- */

/*
 * The one place a profile's fields meet its backend's table (adapter.h):
 * every field is either the config layer's or the gateway's own (CF_ALL),
 * or declared by the backend's adapter, or refused here.  `config check`,
 * serve's initialize and probe all build profiles through
 * sg_config_profile(), so they give the same answer for the same profile.
 */

/* The `select` pseudo-backend's own field (docs/operators.md). */
static const struct sg_field select_fields[] = {
	SG_FIELD_OWN_ARRAY("candidates"), SG_FIELDS_END,
};

/*
 * The `command` backend's (gateway/relay.c, docs/delegation.md): `command`
 * and `shutdown_grace_ms` are the config layer's fields, which relay.c
 * reads; `workspace` is the root its peer serves; `env` the peer's whole
 * environment; `capabilities` what its initialize reply must offer.
 */
static const struct sg_field command_fields[] = {
	SG_FIELD("workspace"), SG_FIELD_OWN_OBJECT("env"),
	SG_FIELD_OWN_ARRAY("capabilities"), SG_FIELDS_END,
};

/* Levenshtein distance, for names of at most NAME_MAX_LEN bytes. */
static size_t distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b), row[NAME_MAX_LEN + 2];

	if (la > NAME_MAX_LEN || lb > NAME_MAX_LEN)
		return SIZE_MAX;
	for (size_t j = 0; j <= lb; j++)
		row[j] = j;
	for (size_t i = 1; i <= la; i++) {
		size_t diag = row[0], up;

		row[0] = i;
		for (size_t j = 1; j <= lb; j++) {
			up = row[j];
			row[j] = diag + (a[i - 1] != b[j - 1]);
			if (up + 1 < row[j])
				row[j] = up + 1;
			if (row[j - 1] + 1 < row[j])
				row[j] = row[j - 1] + 1;
			diag = up;
		}
	}
	return row[lb];
}

/*
 * The known name closest to key, among the fields this backend accepts,
 * when it is close enough to be a slip (at most a third of the letters
 * differ); NULL otherwise.
 */
static void consider(const char *key, const char *name, size_t *best,
		     const char **pick)
{
	size_t d = distance(key, name);

	if (d < *best || (d == *best && !*pick)) {
		*best = d;
		*pick = name;
	}
}

static const char *closest(const char *key, const struct sg_field *own)
{
	size_t best = strlen(key) / 3 + 1;
	const char *pick = NULL;

	if (best > 3)
		best = 3;
	for (size_t i = 0; i < NFIELDS; i++)
		consider(key, fields[i].name, &best, &pick);
	for (const struct sg_field *f = own; f->name; f++)
		if (f->type != SG_FIELD_ENV)
			consider(key, f->name, &best, &pick);
	return pick;
}

/* A backend's own field's value, by the type its table gives. */
static sg_err check_own(const struct sg_field *af, const json_t *v,
			const struct cfg_where *w, struct sg_errinfo *err)
{
	switch (af->type) {
	case SG_FIELD_STRING:
		if (!whole_string(v) || !*json_string_value(v))
			return bad_field(err, SG_E_INVALID_ARGUMENT, w, af->name,
					 "must be a non-empty string");
		return SG_OK;
	case SG_FIELD_INT:
		if (!json_is_integer(v) || json_integer_value(v) < af->min ||
		    json_integer_value(v) > af->max)
			return bad_field(err, SG_E_INVALID_ARGUMENT, w, af->name,
					 "must be an integer from %lld to %lld",
					 (long long)af->min, (long long)af->max);
		return SG_OK;
	case SG_FIELD_ARRAY:
		if (!json_is_array(v))
			return bad_field(err, SG_E_INVALID_ARGUMENT, w, af->name,
					 "must be a list");
		return SG_OK;
	case SG_FIELD_OBJECT:
		if (!json_is_object(v))
			return bad_field(err, SG_E_INVALID_ARGUMENT, w, af->name,
					 "must be an object");
		return SG_OK;
	case SG_FIELD_GENERIC:
	case SG_FIELD_ENV:
		break;
	}
	return bad_field(err, SG_E_INTERNAL, w, af->name,
			 "the backend declares it, but sandgate does not know it");
}

/* Is key one this backend accepts, given best_effort be?  Else refused. */
static sg_err check_key(const char *key, const json_t *v, const json_t *be,
			const char *backend, const struct sg_field *own,
			const struct cfg_where *w, struct sg_errinfo *err)
{
	const struct cfg_field *f = field_find(key);
	const struct sg_field *af = sg_field_in(own, key);
	const char *hint;

	if (f && f->owner == CF_ALL)
		return SG_OK;
	if (af)
		return f ? SG_OK : check_own(af, v, w, err);
	if (f) {
		if (array_has(be, key))
			return SG_OK;
		return bad_field(err, SG_E_UNSUPPORTED, w, key,
				 "the %s backend cannot enforce it (list it in "
				 "best_effort to accept it unenforced)", backend);
	}
	hint = closest(key, own);
	if (hint)
		return bad_field(err, SG_E_INVALID_ARGUMENT, w, key,
				 "unknown field; did you mean %s?", hint);
	return bad_field(err, SG_E_INVALID_ARGUMENT, w, key,
			 "unknown field for the %s backend", backend);
}

/*
 * Every field of the profile prof and every field the binding env adds,
 * against the backend's table own; then best_effort's names.
 */
static sg_err check_backend_fields(const char *path, const char *name,
				   const json_t *prof, const json_t *env,
				   const char *backend,
				   const struct sg_field *own,
				   struct sg_errinfo *err)
{
	const struct cfg_where pw = { path, name }, bw = { NULL, NULL };
	char sh[SHOWN_MAX + 8];
	const json_t *be = NULL;
	const struct cfg_field *f;
	const struct sg_field *af;
	const char *key, *s;
	json_t *v;
	size_t i;
	sg_err rc;

	if (env)
		be = json_object_get(env, "best_effort");
	if (!be)
		be = json_object_get(prof, "best_effort");
	json_object_foreach((json_t *)prof, key, v) {
		rc = check_key(key, v, be, backend, own, &pw, err);
		if (rc)
			return rc;
	}
	json_object_foreach((json_t *)env, key, v) {
		f = field_find(key);
		if (json_object_get(prof, key) || (f && f->narrow == CN_IGNORE))
			continue;
		rc = check_key(key, v, be, backend, own, &bw, err);
		if (rc)
			return rc;
	}
	json_array_foreach(json_object_get(prof, "best_effort"), i, v) {
		s = json_string_value(v);
		f = field_find(s);
		af = sg_field_in(own, s);
		if (!f && !af)
			return check_key(s, NULL, NULL, backend, own, &pw, err);
		if (af && !(af->flags & SG_FIELD_PARTIAL) &&
		    !(f && f->owner == CF_ALL))
			return bad_field(err, SG_E_INVALID_ARGUMENT, &pw,
					 "best_effort",
					 "\"%s\" cannot be best-effort: the %s "
					 "backend always enforces it",
					 shown(s, sh, sizeof(sh)), backend);
	}
	return SG_OK;
}

/* The profile's backend, built into this sandgate, and its field table. */
static sg_err backend_table(const char *path, const char *name,
			    const char *backend, const struct sg_field **own,
			    struct sg_errinfo *err)
{
	const struct cfg_where w = { path, name };
	const struct sg_adapter *const *all = sg_adapter_all();
	const struct sg_adapter *ad;
	char sh[SHOWN_MAX + 8], list[160];
	size_t len = 0;

	if (strcmp(backend, "select") == 0) {
		*own = select_fields;
		return SG_OK;
	}
	if (strcmp(backend, "command") == 0) {
		*own = command_fields;
		return SG_OK;
	}
	ad = sg_adapter_find(backend);
	if (ad) {
		*own = ad->fields;
		return SG_OK;
	}
	list[0] = '\0';
	for (size_t i = 0; all[i] && len + 2 < sizeof(list); i++)
		len += (size_t)snprintf(list + len, sizeof(list) - len, "%s%s",
					i ? ", " : "", all[i]->name);
	return bad_field(err, SG_E_UNSUPPORTED, &w, "backend",
			 "\"%s\" is not built into this sandgate (built: %s)",
			 shown(backend, sh, sizeof(sh)), list);
}

/* ---- Building -------------------------------------------------------- */

/* The value in force: the binding's where it may change the field. */
static json_t *in_force(const struct cfg_field *f, json_t *prof,
			json_t *env)
{
	json_t *bv = env ? json_object_get(env, f->name) : NULL;

	if (bv && f->narrow != CN_EQUAL && f->narrow != CN_IGNORE &&
	    f->narrow != CN_ALLOW)
		return bv;
	return json_object_get(prof, f->name);
}

/* A NULL-terminated array of the strings in a (borrowed from a). */
static const char **string_array(const json_t *a)
{
	const char **v;
	json_t *x;
	size_t i;

	v = calloc(json_array_size(a) + 1, sizeof(*v));
	if (!v)
		return NULL;
	json_array_foreach(a, i, x)
		v[i] = json_string_value(x);
	return v;
}

static sg_err fill_network(struct cfg_box *b, json_t *net, json_t *prof,
			   struct sg_errinfo *err)
{
	b->p.network = SG_NET_DEFAULT;
	if (json_is_object(net)) {
		/* The binding's JSON is the caller's: keep our own copy. */
		if (net != json_object_get(prof, "network")) {
			b->bind_net = json_deep_copy(net);
			if (!b->bind_net)
				return sg_err_set(err, SG_E_INTERNAL,
						  "out of memory");
			net = b->bind_net;
		}
		b->p.network = SG_NET_ALLOW;
		b->allow = string_array(json_object_get(net, "allow"));
	} else {
		if (net && strcmp(json_string_value(net), "none") == 0)
			b->p.network = SG_NET_NONE;
		b->allow = calloc(1, sizeof(*b->allow));
	}
	if (!b->allow)
		return sg_err_set(err, SG_E_INTERNAL, "out of memory");
	b->p.network_allow = b->allow;
	return SG_OK;
}

/*
 * best_effort in force, pointing into raw: a binding's list is a subset of
 * the profile's (checked), so its names are found there.
 */
static sg_err fill_best_effort(struct cfg_box *b, json_t *be, json_t *prof,
			       struct sg_errinfo *err)
{
	json_t *pbe = json_object_get(prof, "best_effort"), *x, *y;
	size_t i, j, n = 0;

	b->best = calloc(json_array_size(be) + 1, sizeof(*b->best));
	if (!b->best)
		return sg_err_set(err, SG_E_INTERNAL, "out of memory");
	json_array_foreach(be, i, x)
		json_array_foreach(pbe, j, y)
			if (strcmp(json_string_value(x),
				   json_string_value(y)) == 0) {
				b->best[n++] = json_string_value(y);
				break;
			}
	b->p.best_effort = b->best;
	return SG_OK;
}

/* One variable to forward; both strings borrowed for the build. */
struct cfg_var {
	const char *name, *value;
};

/*
 * Add fe's variables to vars (a later name replaces an earlier one).  A list
 * of names takes the values from this process's environment: the host's
 * rule is that a listed variable that is missing blocks startup.
 */
static void put_var(struct cfg_var *vars, size_t *n, const char *name,
		    const char *value)
{
	size_t k;

	for (k = 0; k < *n; k++)
		if (strcmp(vars[k].name, name) == 0)
			break;
	vars[k].name = name;
	vars[k].value = value;
	if (k == *n)
		(*n)++;
}

/*
 * Whether a compiled-in adapter reads name from sandgate's environment,
 * by default or for one of cfg's profiles (a daytona profile's own
 * api_key_env, say).  The adapters declare these in their field tables
 * (SG_FIELD_ENV, SG_FIELD_OWN_ENV), so a new adapter's secrets are
 * refused here too.
 */
static bool reads_var(const struct sg_adapter *ad, const json_t *raw, const char *name)
{
	const char *names[SG_CREDENTIAL_ENV_MAX];
	size_t n = sg_adapter_credential_env(ad, raw, names, SG_CREDENTIAL_ENV_MAX);

	for (size_t i = 0; i < n; i++)
		if (strcmp(names[i], name) == 0)
			return true;
	return false;
}

static bool is_credential(const struct sg_config *cfg, const char *name)
{
	const struct sg_adapter *const *all = sg_adapter_all();
	const char *key, *backend;
	json_t *prof;

	for (size_t a = 0; all[a]; a++) {
		if (reads_var(all[a], NULL, name))
			return true;
		json_object_foreach(cfg->profiles, key, prof) {
			backend = json_string_value(json_object_get(prof, "backend"));
			if (backend && strcmp(backend, all[a]->name) == 0 &&
			    reads_var(all[a], prof, name))
				return true;
		}
	}
	return false;
}

/*
 * Add the operator's forward_env variables.  A list takes values from this
 * process's environment, but never a variable an adapter reads as its
 * credential.
 */
static sg_err add_vars(struct cfg_var *vars, size_t *n, const json_t *fe,
		       const struct cfg_where *w, const struct sg_config *cfg,
		       struct sg_errinfo *err)
{
	const char *name, *value;
	json_t *x;
	size_t i;

	if (json_is_object(fe)) {
		json_object_foreach((json_t *)fe, name, x)
			put_var(vars, n, name, json_string_value(x));
		return SG_OK;
	}
	json_array_foreach(fe, i, x) {
		name = json_string_value(x);
		if (is_credential(cfg, name))
			return bad_field(err, SG_E_PERMISSION, w, "forward_env",
					 "%s holds a backend's credential and is never "
					 "forwarded to commands", name);
		value = getenv(name);
		if (!value)
			return bad_field(err, SG_E_INVALID_ARGUMENT, w,
					 "forward_env",
					 "variable %s is not set", name);
		put_var(vars, n, name, value);
	}
	return SG_OK;
}

static size_t fe_size(const json_t *fe)
{
	return json_is_array(fe) ? json_array_size(fe) : json_object_size(fe);
}

/*
 * The operator's forward_env only: the host's names variables of the host's
 * own environment, whose values it sends in binding.environment (fields[]).
 */
static sg_err fill_forward_env(struct cfg_box *b, const struct sg_config *cfg,
			       json_t *prof, struct sg_errinfo *err)
{
	const struct cfg_where pw = { cfg->path, b->name };
	json_t *pfe = json_object_get(prof, "forward_env");
	struct cfg_var *vars;
	size_t n = 0, ln, lv;
	sg_err rc;

	vars = calloc(fe_size(pfe) + 1, sizeof(*vars));
	b->env = calloc(fe_size(pfe) + 1, sizeof(*b->env));
	if (!vars || !b->env) {
		rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
		goto out;
	}
	rc = add_vars(vars, &n, pfe, &pw, cfg, err);
	if (rc)
		goto out;
	for (size_t i = 0; i < n; i++) {
		ln = strlen(vars[i].name);
		lv = strlen(vars[i].value);
		b->env[i] = malloc(ln + lv + 2);
		if (!b->env[i]) {
			rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
			goto out;
		}
		b->n_env = i + 1;
		memcpy(b->env[i], vars[i].name, ln);
		b->env[i][ln] = '=';
		memcpy(b->env[i] + ln + 1, vars[i].value, lv + 1);
	}
	b->p.forward_env = (const char *const *)b->env;
	rc = SG_OK;
out:
	free(vars);
	return rc;
}

/*
 * A path field's value in force, taken from the config file's directory
 * when relative (sg_profile_path).  The result replaces the value in raw
 * too, where adapters and probe read it.
 */
static sg_err fill_path(struct cfg_box *b, const struct cfg_field *f,
			json_t *v, struct sg_errinfo *err)
{
	char *path = sg_profile_path(&b->p, json_string_value(v));
	json_t *abs = path ? json_string(path) : NULL;

	free(path);
	if (!abs || json_object_set_new(b->raw, f->name, abs))
		return sg_err_set(err, SG_E_INTERNAL, "out of memory");
	*(const char **)((char *)&b->p + f->off) = json_string_value(abs);
	return SG_OK;
}

/* Everything but forward_env, from the values in force. */
static sg_err fill_fields(struct cfg_box *b, json_t *prof, json_t *env,
			  struct sg_errinfo *err)
{
	json_t *v;
	sg_err rc;

	for (size_t i = 0; i < NFIELDS; i++) {
		const struct cfg_field *f = &fields[i];

		v = in_force(f, prof, env);
		switch (f->kind) {
		case CK_STRING:
			if (v && f->off != NO_MEMBER)
				*(const char **)((char *)&b->p + f->off) =
					json_string_value(v);
			break;
		case CK_PATH:
			if (v) {
				rc = fill_path(b, f, v, err);
				if (rc)
					return rc;
			}
			break;
		case CK_BOOL:
			*(bool *)((char *)&b->p + f->off) = json_is_true(v);
			break;
		case CK_NETWORK:
			rc = fill_network(b, v, prof, err);
			if (rc)
				return rc;
			break;
		case CK_CPUS:
			b->p.cpus = v ? json_number_value(v) : 0;
			break;
		case CK_MEMORY:
			b->p.memory_mb = v ? (int64_t)json_integer_value(v) : 0;
			break;
		case CK_PORT:
			b->p.port = v ? (int)json_integer_value(v) : 0;
			break;
		case CK_LIFETIME:
			b->p.lifetime_seconds =
				v ? (int64_t)json_integer_value(v) : 0;
			if (b->p.lifetime_seconds == 0)
				b->p.lifetime_seconds = SG_LIFETIME_DEFAULT_S;
			break;
		case CK_SHUTDOWN:
			b->p.shutdown_timeout_ms =
				v ? (int64_t)json_integer_value(v) : 0;
			break;
		case CK_BEST_EFFORT:
			rc = fill_best_effort(b, v, prof, err);
			if (rc)
				return rc;
			break;
		case CK_FORWARD_ENV:
		case CK_HOST_SIDE:
			break;
		}
	}
	return SG_OK;
}

/* What the host's Go encoder leaves out: a field at its zero value. */
static bool zero_value(const json_t *v)
{
	return json_is_null(v) || json_is_false(v) ||
	       (json_is_string(v) && json_string_length(v) == 0) ||
	       (json_is_number(v) && json_number_value(v) == 0) ||
	       (json_is_array(v) && json_array_size(v) == 0);
}

sg_err sg_config_host_profile(const char *text, json_t **out, struct sg_errinfo *err)
{
	const struct cfg_field *f;
	json_error_t je;
	const char *key;
	json_t *prof, *v, *tmp;

	*out = NULL;
	if (!text || !*text)
		return SG_OK;
	prof = json_loads(text, JSON_REJECT_DUPLICATES, &je);
	if (!json_is_object(prof)) {
		json_decref(prof);
		return sg_err_set(err, SG_E_INVALID_ARGUMENT,
				  HOST_PROFILE ": not a JSON object (%s)",
				  je.text[0] ? je.text : "another JSON value");
	}
	json_object_foreach_safe(prof, tmp, key, v) {
		f = field_find(key);
		/*
		 * A zero value asks for nothing (the host's encoder omits it),
		 * and a field describing the host's own launch of this backend
		 * is not a request to it.
		 */
		if (zero_value(v) || (f && f->narrow == CN_IGNORE))
			json_object_del(prof, key);
		/* The host's word for the backend's own network. */
		else if (strcmp(key, "network") == 0 && json_is_string(v) &&
			 strcmp(json_string_value(v), "enabled") == 0)
			json_object_set_new(prof, key, json_string("default"));
	}
	*out = prof;
	return SG_OK;
}

sg_err sg_config_profile(const struct sg_config *cfg, const char *name,
			 json_t *environment, struct sg_profile **out,
			 struct sg_errinfo *err)
{
	char sh[SHOWN_MAX + 8], list[160];
	const struct sg_field *own = NULL;
	struct cfg_box *b = NULL;
	json_t *prof;
	sg_err rc;

	*out = NULL;
	if (!name)
		name = cfg->def;
	prof = json_object_get(cfg->profiles, name);
	if (!prof) {
		list_names(cfg, list, sizeof(list));
		return sg_err_set(err, SG_E_NOT_FOUND,
				  "no profile \"%s\" in %s (profiles: %s)",
				  shown(name, sh, sizeof(sh)), cfg->path,
				  list);
	}
	if (environment && !json_is_object(environment))
		return sg_err_set(err, SG_E_INVALID_ARGUMENT,
				  HOST_PROFILE ": must be an object");
	b = calloc(1, sizeof(*b));
	if (!b)
		return sg_err_set(err, SG_E_INTERNAL, "out of memory");
	b->name = strdup(name);
	b->raw = json_deep_copy(prof);
	if (!b->name || !b->raw) {
		rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
		goto out;
	}
	b->p.name = b->name;
	b->p.raw = b->raw;
	if (cfg->dir) {
		b->config_dir = strdup(cfg->dir);
		if (!b->config_dir) {
			rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
			goto out;
		}
		b->p.config_dir = b->config_dir;
	}
	if (environment) {
		rc = narrow_check(b->raw, environment, err);
		if (rc)
			goto out;
	}
	rc = backend_table(cfg->path, b->name,
			   json_string_value(json_object_get(b->raw, "backend")),
			   &own, err);
	if (!rc)
		rc = check_backend_fields(cfg->path, b->name, b->raw, environment,
					  json_string_value(json_object_get(
						  b->raw, "backend")),
					  own, err);
	if (rc)
		goto out;
	rc = fill_fields(b, b->raw, environment, err);
	if (rc)
		goto out;
	rc = fill_forward_env(b, cfg, b->raw, err);
	if (rc)
		goto out;
	*out = &b->p;
	b = NULL;
	rc = SG_OK;
out:
	sg_profile_free(b ? &b->p : NULL);
	return rc;
}

void sg_profile_free(struct sg_profile *p)
{
	struct cfg_box *b = (struct cfg_box *)p;

	if (!b)
		return;
	for (size_t i = 0; i < b->n_env; i++) {
		/* The values may be credentials: do not leave them in the heap. */
		volatile char *s = b->env[i];

		while (*s)
			*s++ = '\0';
		free(b->env[i]);
	}
	free(b->env);
	free(b->allow);
	free(b->best);
	json_decref(b->bind_net);
	json_decref(b->raw);
	free(b->config_dir);
	free(b->name);
	free(b);
}

/* ---- The default path ------------------------------------------------ */

static char *join(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	char *s = malloc(la + lb + 1);

	if (!s)
		return NULL;
	memcpy(s, a, la);
	memcpy(s + la, b, lb + 1);
	return s;
}

char *sg_config_default_path(void)
{
	const char *explicit = getenv("SANDGATE_CONFIG");
	const char *xdg = getenv("XDG_CONFIG_HOME");
	const char *home = getenv("HOME");
	struct stat st;
	char *path;

	/*
	 * A file named explicitly is returned even when it is missing, so the
	 * load reports it instead of quietly running the embedded default.
	 */
	if (explicit && *explicit)
		return strdup(explicit);
	/* The XDG spec says a relative XDG_CONFIG_HOME is to be ignored. */
	if (xdg && xdg[0] == '/')
		path = join(xdg, "/sandgate/config.json");
	else if (home && *home)
		path = join(home, "/.config/sandgate/config.json");
	else
		return NULL;
	if (path && stat(path, &st) != 0) {
		free(path);
		path = NULL;
	}
	return path;
}
