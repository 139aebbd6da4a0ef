/*
 * fake.h - an in-process adapter for unit tests, with fault injection.
 *
 * `sg_adapter_fake` (backend "fake") is registered only in test builds
 * (tests/fake/registry.c compiles adapters/registry.c again with it
 * added).  Its environments are directories on this host, like local's
 * without bubblewrap: the workspace is binding.root itself, the control
 * directory <state_dir>/fake/<identity slug>/ctl; commands run unconfined
 * with sg_exec_run().  `sg_adapter_fake_remote` (backend "fake_remote",
 * tests/fake/remote.c) is the toy cloud backend of adapters/README.md's
 * walk-through, built on the remote driver (adapters/remote.h): its
 * provider is a directory of sandboxes on this host, sg-helper is
 * installed in each, and every sg-helper step runs as a program through
 * exec and sg-helper job, as on a cloud, so a test can put a wrapper
 * (SG_HELPER) between the gateway and what it reads.  Both declare every
 * field config.c knows (sg_fake_fields), so a test can narrow any of
 * them, and one of their own, `fake_knob` (1..10).  It reads
 * two credential variables, as a cloud adapter reads its API key and URL:
 * $SG_FAKE_TOKEN, renamed by its own field `fake_token_env` (and reported
 * by probe), and $SG_FAKE_URL.
 *
 * Faults are set in sg_fake before a session starts and read by the
 * adapter's methods on the gateway's worker threads; counters record what
 * the gateway asked for, so a test can check that every provisioned
 * environment was torn down and released.  sg_fake_reset() clears both.
 */
#ifndef SG_TEST_FAKE_H
#define SG_TEST_FAKE_H

#include <stdatomic.h>

#include "adapters/adapter.h"

struct sg_fake {
	/* ---- faults (atomic: a test may change them mid-session) ---- */
	atomic_int exec_fail_at;    /* the Nth exec (1-based) fails; 0: none */
	atomic_int exec_fail_code;  /* its sg_err; 0: SG_E_UNAVAILABLE */
	_Atomic int64_t provision_delay_ms; /* provision waits (cancellable) */
	atomic_int provision_fail;  /* provision fails after creating: an
				       sg_err; 0: no */
	atomic_bool lost;           /* the environment is gone: exec fails
				       SG_E_WORKSPACE_LOST */
	_Atomic int64_t teardown_delay_ms; /* teardown waits (cancellable) */
	/* ---- what happened ---- */
	atomic_int provisions, execs, teardowns, releases;
	atomic_int removed;         /* teardowns with SG_FATE_REMOVE */
	atomic_int teardown_cancelled; /* teardowns cut short by the budget */
};

extern struct sg_fake sg_fake;
extern const struct sg_field sg_fake_fields[];
extern const struct sg_adapter sg_adapter_fake;
extern const struct sg_adapter sg_adapter_fake_remote;

void sg_fake_reset(void);
/* Accepts every value: the fakes enforce nothing. */
sg_err sg_fake_validate(const struct sg_profile *p, struct sg_errinfo *err);

#endif
