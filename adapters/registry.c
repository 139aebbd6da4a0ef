/*
 * registry.c - the compiled-in adapters, found by name.
 *
 * A static, NULL-terminated list (curl's available_backends idea): each
 * adapter is listed under its SG_WITH_<NAME> switch, so a backend left out
 * of the build is neither compiled nor referenced.  sg_adapter_find checks,
 * once, that every listed adapter keeps the contract's rules: a unique
 * name, the mandatory methods, and capability bits that match the optional
 * methods present.
 */
#include "adapter.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "sg_config.h"

#ifdef SG_WITH_LOCAL
extern const struct sg_adapter sg_adapter_local;
#endif
#ifdef SG_WITH_SSH
extern const struct sg_adapter sg_adapter_ssh;
#endif
#ifdef SG_WITH_DAYTONA
extern const struct sg_adapter sg_adapter_daytona;
#endif
#ifdef SG_WITH_SINGULARITY
extern const struct sg_adapter sg_adapter_singularity;
#endif

static const struct sg_adapter *const adapters[] = {
#ifdef SG_WITH_LOCAL
	&sg_adapter_local,
#endif
#ifdef SG_WITH_SSH
	&sg_adapter_ssh,
#endif
#ifdef SG_WITH_DAYTONA
	&sg_adapter_daytona,
#endif
#ifdef SG_WITH_SINGULARITY
	&sg_adapter_singularity,
#endif
	NULL,
};


static void check_contract(void)
{
	for (size_t i = 0; adapters[i]; i++) {
		const struct sg_adapter *a = adapters[i];

		assert(a->name && a->env_size >= sizeof(struct sg_env));
		assert(a->validate && a->provision && a->exec && a->teardown);
		assert(!(a->caps & SG_CAP_FILES) == !(a->get_file && a->put_file));
		assert(!(a->caps & SG_CAP_LIST) == !(a->list && a->destroy));
		assert(!(a->caps & SG_CAP_PROBE) == !a->probe);
		for (size_t j = 0; j < i; j++)
			assert(strcmp(adapters[j]->name, a->name) != 0);
		(void)a;
	}
}

const struct sg_adapter *sg_adapter_find(const char *name)
{
	static bool checked;

	if (!checked) {
		check_contract();
		checked = true;
	}
	for (size_t i = 0; name && adapters[i]; i++)
		if (strcmp(adapters[i]->name, name) == 0)
			return adapters[i];
	return NULL;
}

const struct sg_adapter *const *sg_adapter_all(void)
{
	return adapters;
}
