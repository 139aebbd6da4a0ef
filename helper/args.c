#include "helper/internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/jw.h"

static bool is_flag(const char *flags, const char *name)
{
	size_t n = strlen(name);
	const char *p = flags;

	while (p && *p) {
		const char *end = strchr(p, ' ');
		size_t len = end ? (size_t)(end - p) : strlen(p);

		if (len == n && memcmp(p, name, n) == 0)
			return true;
		p = end ? end + 1 : NULL;
	}
	return false;
}

sg_err sg_args_parse(struct sg_args *a, int argc, char *const *argv,
		     const char *flags, struct sg_errinfo *err)
{
	memset(a, 0, sizeof(*a));
	for (int i = 0; i < argc; i++) {
		const char *s = argv[i];

		if (strcmp(s, "--") == 0) {
			a->rest = argv + i + 1;
			a->nrest = argc - i - 1;
			break;
		}
		if (strncmp(s, "--", 2) != 0 || s[2] == '\0') {
			if (a->npos == SG_ARGS_MAX)
				return sg_err_set(err, SG_E_INVALID_ARGUMENT,
						  "too many arguments");
			a->pos[a->npos++] = s;
			continue;
		}
		if (a->nopt == SG_ARGS_MAX)
			return sg_err_set(err, SG_E_INVALID_ARGUMENT,
					  "too many options");
		a->opt[a->nopt].name = s + 2;
		if (!is_flag(flags, s + 2)) {
			if (i + 1 >= argc)
				return sg_err_set(err, SG_E_INVALID_ARGUMENT,
						  "option %s needs a value", s);
			a->opt[a->nopt].value = argv[++i];
		}
		a->nopt++;
	}
	return SG_OK;
}

static int find(struct sg_args *a, const char *name)
{
	int found = -1;

	for (int i = 0; i < a->nopt; i++) {
		if (strcmp(a->opt[i].name, name) == 0) {
			a->opt[i].used = true;
			found = i;
		}
	}
	return found;
}

const char *sg_args_str(struct sg_args *a, const char *name, const char *def)
{
	int i = find(a, name);

	return i < 0 || !a->opt[i].value ? def : a->opt[i].value;
}

bool sg_args_flag(struct sg_args *a, const char *name)
{
	return find(a, name) >= 0;
}

sg_err sg_args_int(struct sg_args *a, const char *name, int64_t def,
		   int64_t max, int64_t *out, struct sg_errinfo *err)
{
	const char *s = sg_args_str(a, name, NULL);
	char *end;
	long long v;

	*out = def;
	if (!s)
		return SG_OK;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || end == s || *end || v < 0 || v > max)
		return sg_err_set(err, SG_E_INVALID_ARGUMENT,
				  "--%s must be an integer from 0 to %lld",
				  name, (long long)max);
	*out = v;
	return SG_OK;
}

sg_err sg_args_unused(const struct sg_args *a, struct sg_errinfo *err)
{
	for (int i = 0; i < a->nopt; i++)
		if (!a->opt[i].used)
			return sg_err_set(err, SG_E_INVALID_ARGUMENT,
					  "unknown option --%s",
					  a->opt[i].name);
	return SG_OK;
}
