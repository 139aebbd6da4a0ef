/*
 * cloudkit.c - names, tags and set-up replies shared by the cloud
 * adapters (cloudkit.h).
 */
#define _GNU_SOURCE /* asprintf, getentropy */
#include "adapters/cloudkit.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/hex.h"
#include "base/cancel.h"
#include "core/digest.h"

void sg_cloud_random_hex(char *out, size_t n)
{
	unsigned char b[32];

	if (n > sizeof(b))
		n = sizeof(b);
	if (getentropy(b, n) != 0) {
		/* Uniqueness is what matters here, not secrecy. */
		uint64_t t = (uint64_t)sg_now_ns() ^ ((uint64_t)getpid() << 32);

		for (size_t i = 0; i < n; i++)
			b[i] = (unsigned char)(t >> (8 * (i % 8))) ^ (unsigned char)i;
	}
	sg_hex(b, n, out);
}

char *sg_cloud_name(const char *identity)
{
	char digest[65], slug[SG_CLOUD_NAME_SLUG + 1], *name = NULL;
	size_t n = 0;

	if (!sg_sha256_hex(identity, strlen(identity), digest))
		return NULL;
	for (const char *p = identity; *p && n < SG_CLOUD_NAME_SLUG; p++) {
		char c = *p;

		if (c >= 'A' && c <= 'Z')
			c = (char)(c - 'A' + 'a');
		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')))
			c = '-';
		if (c == '-' && (n == 0 || slug[n - 1] == '-'))
			continue;
		slug[n++] = c;
	}
	while (n > 0 && slug[n - 1] == '-')
		n--;
	slug[n] = '\0';
	if (asprintf(&name, "sg-%s%s%.12s", slug, n ? "-" : "", digest) < 0)
		return NULL;
	return name;
}

char *sg_cloud_kv(const char *text, const char *key)
{
	size_t k = strlen(key);

	for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
		if (strncmp(p, key, k) == 0 && p[k] == '=') {
			const char *v = p + k + 1, *e = strchr(v, '\n');

			return strndup(v, e ? (size_t)(e - v) : strlen(v));
		}
	}
	return NULL;
}

bool sg_cloud_flag(const char *text, const char *key)
{
	char *v = sg_cloud_kv(text, key);
	bool on = v && strcmp(v, "1") == 0;

	free(v);
	return on;
}

void sg_cloud_tags_fill(const struct sg_env *env, const char *create_id,
			struct sg_cloud_tags *t)
{
	const struct sg_profile *p = env->profile;
	time_t now = time(NULL);

	snprintf(t->created, sizeof(t->created), "%lld", (long long)now);
	snprintf(t->expires, sizeof(t->expires), "%lld",
		 (long long)now + (long long)p->lifetime_seconds);
	t->n = 0;
#define SG_CLOUD_PUT(k, v) (t->key[t->n] = (k), t->value[t->n++] = (v))
	SG_CLOUD_PUT(SG_CLOUD_TAG_MANAGED, SG_CLOUD_MANAGER);
	SG_CLOUD_PUT(SG_CLOUD_TAG_IDENTITY, env->identity);
	SG_CLOUD_PUT(SG_CLOUD_TAG_SESSION, env->session);
	SG_CLOUD_PUT(SG_CLOUD_TAG_PROFILE, p->name);
	SG_CLOUD_PUT(SG_CLOUD_TAG_CREATED, t->created);
	SG_CLOUD_PUT(SG_CLOUD_TAG_EXPIRES, t->expires);
	SG_CLOUD_PUT(SG_CLOUD_TAG_PERSISTENT, p->persistent ? "true" : "false");
	SG_CLOUD_PUT(SG_CLOUD_TAG_CREATE, create_id);
#undef SG_CLOUD_PUT
}

static void copy(char *dst, size_t n, const char *src)
{
	snprintf(dst, n, "%s", src ? src : "");
}

void sg_cloud_info(const char *id, const char *state,
		   const char *(*get)(const void *src, const char *key),
		   const void *src, struct sg_env_info *info)
{
	const char *per = get(src, SG_CLOUD_TAG_PERSISTENT);
	const char *created = get(src, SG_CLOUD_TAG_CREATED);
	const char *expires = get(src, SG_CLOUD_TAG_EXPIRES);

	memset(info, 0, sizeof(*info));
	copy(info->id, sizeof(info->id), id);
	copy(info->state, sizeof(info->state), state);
	copy(info->identity, sizeof(info->identity), get(src, SG_CLOUD_TAG_IDENTITY));
	copy(info->session, sizeof(info->session), get(src, SG_CLOUD_TAG_SESSION));
	copy(info->profile, sizeof(info->profile), get(src, SG_CLOUD_TAG_PROFILE));
	info->created = created ? strtoll(created, NULL, 10) : 0;
	info->expires = expires ? strtoll(expires, NULL, 10) : 0;
	info->persistent = per && strcmp(per, "true") == 0;
}
