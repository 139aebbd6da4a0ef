/*
 * crash.h - named crash points, for the crash-matrix tests.
 *
 * sg_crashpoint("provision:created") kills this process with SIGKILL when
 * the environment variable SANDGATE_TEST_CRASH_AT names that point, and
 * does nothing otherwise.  The tests use it to stop a gateway at an exact
 * step of provisioning, running or teardown and then check that
 * `sandgate envs gc` leaves nothing behind.  The points are listed in
 * docs/operators.md; every adapter marks "adapter:created", the moment
 * its remote resource first exists inside provision().
 */
#ifndef SG_CRASH_H
#define SG_CRASH_H

void sg_crashpoint(const char *name);

#endif
