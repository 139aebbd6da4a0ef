/*
 * registry.c - the adapter registry of test builds: the generated list
 * plus the fake adapter (tests/fake/fake.h).  Linked into every unit test
 * ahead of sg_core, so its sg_adapter_find() is the one used.
 */
#define SG_TEST_ADAPTERS(X) X(fake)
#include "adapters/registry.c"
