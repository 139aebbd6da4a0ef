/*
 * registry.c - the compiled-in adapters, found by name.
 *
 * A static, NULL-terminated list (curl's available_backends idea),
 * generated: CMake writes sg_adapters.h from the backends it builds
 * (SG_BACKENDS in the top CMakeLists.txt, each switched by SG_WITH_<NAME>),
 * as one X-macro list SG_ADAPTERS(X) calling X(name) per backend.  A
 * backend left out of the build is therefore neither compiled nor
 * referenced, and registering one touches no file here.  A test build may
 * compile this file again with SG_TEST_ADAPTERS(X) defined, adding
 * adapters that exist only in tests (tests/fake/).
 *
 * sg_adapter_find checks, once, that every listed adapter keeps the
 * contract's rules: a unique name, the mandatory methods and field table,
 * and capability bits that match the optional methods present.
 */
#include "adapters/adapter.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "sg_adapters.h"

#ifndef SG_TEST_ADAPTERS
#define SG_TEST_ADAPTERS(X)
#endif

#define SG_ADAPTER_DECL(name) extern const struct sg_adapter sg_adapter_##name;
SG_ADAPTERS(SG_ADAPTER_DECL)
SG_TEST_ADAPTERS(SG_ADAPTER_DECL)
#undef SG_ADAPTER_DECL

#define SG_ADAPTER_ENTRY(name) &sg_adapter_##name,
static const struct sg_adapter *const adapters[] = {
	SG_ADAPTERS(SG_ADAPTER_ENTRY)
	SG_TEST_ADAPTERS(SG_ADAPTER_ENTRY)
	NULL,
};
#undef SG_ADAPTER_ENTRY

static void check_contract(void)
{
	for (size_t i = 0; adapters[i]; i++) {
		const struct sg_adapter *a = adapters[i];

		assert(a->name && a->env_size >= sizeof(struct sg_env));
		assert(a->fields && a->validate && a->provision && a->exec &&
		       a->teardown && a->release);
		assert(!(a->caps & SG_CAP_FILES) == !a->get_file);
		assert(!(a->caps & SG_CAP_LIST) == !(a->list && a->destroy));
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
