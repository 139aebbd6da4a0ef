/*
 * registry.c - the adapter registry of test builds: the generated list
 * plus the fake adapters (tests/fake/fake.h).  Linked into every unit test
 * ahead of sg_core, so its sg_adapter_find() is the one used.
 */
#define SG_TEST_ADAPTERS(X) X(fake) X(fake_remote)
#include "adapters/registry.c"
