"""Bounds on cpus and memory_mb (docs/protocol.md, profiles): a value outside
0.01..4096 CPUs or 1..16777216 MiB is refused with invalid_argument naming
the field, in the operator's profile and in the host's (WUU_EXECUTION_PROFILE)
alike, and `config check`, `serve` and `probe` reach the same verdict.

Before the bounds, a narrowing that lowered cpus to 0.001 made a CPU quota
the kernel rejects, and the best-effort fallback then dropped every limit
(memory_mb too); a huge memory_mb overflowed its byte count, and a huge
cpus was reported as a negative quota.  The gateway tests need the local
backend and, for the limits themselves, a host where this user can make
cgroups (as test_contain.py); elsewhere they are skipped.  The fallback
itself (a best-effort limit the kernel refuses is dropped alone) is
provoked on a host with v1's cpu controller, where a quota below a child
cgroup's is refused.
"""

import json
import os
import shutil
import subprocess
import tempfile
import unittest

from sgclient import (BIN, MiB, PROFILE, GatewayTestCase, cgroup_writable, host_env,
                      host_token, unique)

# The command line under test is sandgate's own, also when the suite runs
# through the delegation wrapper (tests/delegation), whose peer it is.
REAL = os.environ.get("SG_PEER_BIN") or BIN

# The bounds (base/limits.h), and values past them.
CPUS_MIN, CPUS_MAX = 0.01, 4096
MEMORY_MB_MAX = 16 * 1024 * 1024
OUT_OF_BOUNDS = [
    ("cpus", 0.001),
    ("cpus", 0.0099),
    ("cpus", 4097),
    ("cpus", 1e300),
    ("memory_mb", MEMORY_MB_MAX + 1),
    ("memory_mb", 2 ** 44),
]

# A command that fills n MiB (bytearray's zeroing touches every page).
def alloc(n):
    return "python3 -c \"b = bytearray(%d << 20); print('allocated %d MiB')\"" % (n, n)


class Dir(unittest.TestCase):
    def setUp(self):
        if not BIN:
            self.skipTest("SANDGATE_BIN is not set")
        self.dir = tempfile.mkdtemp(prefix="sg-e2e-bounds-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.xdg = os.path.join(self.dir, "xdg")
        os.makedirs(self.xdg)
        self.state = os.path.join(self.dir, "state")

    def config(self, profile, name="config.json"):
        path = os.path.join(self.dir, name)
        with open(path, "w") as f:
            json.dump({"default": "p", "profiles": {"p": dict(backend="local", **profile)}}, f)
        return path

    def run_bin(self, *args, stdin=b""):
        e = dict(os.environ)
        e.pop("SANDGATE_CONFIG", None)
        e["XDG_CONFIG_HOME"] = self.xdg
        return subprocess.run([REAL] + list(args), input=stdin, capture_output=True,
                              env=e, timeout=120)


class ProfileVerdict(Dir):
    """A profile's value outside the bounds: config check, serve (before
    any frame) and probe all refuse it, naming the field; the bounds
    themselves pass.  best_effort keeps the verdict independent of whether
    this host has cgroups."""

    BE = {"best_effort": ["cpus", "memory_mb"]}

    def test_out_of_bounds_refused_everywhere(self):
        init = (b'{"token":"%s","id":"1","method":"initialize","data":{"version":4,'
                b'"root":"/workspace","session":"s"}}\n' % host_token().encode())
        for field, value in OUT_OF_BOUNDS:
            with self.subTest(field=field, value=value):
                cfg = self.config(dict({field: value}, **self.BE))
                want = b'field "%s": must be' % field.encode()
                r = self.run_bin("config", "check", "--config", cfg, "--profile", "p")
                self.assertEqual(r.returncode, 78, r.stdout + r.stderr)
                self.assertIn(want, r.stdout + r.stderr)
                r = self.run_bin("config", "check", "--config", cfg, "--json")
                self.assertEqual(r.returncode, 78, r.stdout + r.stderr)
                self.assertIs(json.loads(r.stdout)["ok"], False, r.stdout)
                r = self.run_bin("serve", "--config", cfg, "--profile", "p",
                                 "--state-dir", self.state, stdin=init)
                self.assertEqual(r.returncode, 78, r.stderr)
                self.assertEqual(r.stdout, b"", "no frame was answered")
                self.assertIn(want, r.stderr)
                r = self.run_bin("probe", "--config", cfg, "--profile", "p",
                                 "--state-dir", self.state)
                self.assertEqual(r.returncode, 78, r.stdout + r.stderr)
                self.assertIn(want, r.stdout + r.stderr)

    def test_the_bounds_themselves_pass(self):
        for field, value in (("cpus", CPUS_MIN), ("cpus", CPUS_MAX),
                             ("memory_mb", 1), ("memory_mb", MEMORY_MB_MAX)):
            with self.subTest(field=field, value=value):
                cfg = self.config(dict({field: value}, **self.BE))
                r = self.run_bin("config", "check", "--config", cfg, "--profile", "p")
                self.assertEqual(r.returncode, 0, r.stdout + r.stderr)


@unittest.skipUnless(not PROFILE or PROFILE == "local", "needs the local backend")
class HostProfileBounds(Dir, GatewayTestCase):
    """A value outside the bounds in the host's profile (WUU_EXECUTION_PROFILE,
    which narrows the operator's) is invalid_argument naming the field; the
    gateway keeps answering (a second initialize is refused alike), and a
    session without it gets every limit of the profile."""

    LIMITED = {"cpus": 2, "memory_mb": 128, "best_effort": ["cpus", "memory_mb"]}

    def limited_gateway(self, profile, host=None):
        env = host_env(dict({"backend": "command", "command": ["sandgate", "serve"]},
                            **host)) if host is not None else None
        return self.gateway(init=False, config=self.config(profile), profile="p",
                            state_dir=self.state, env_extra=env)

    def refuse(self, profile, field, value):
        gw = self.limited_gateway(profile, {field: value})
        for _ in range(2):
            r = gw.call("initialize", gw.make_binding(), token=host_token(), timeout=60)
            self.assertReplyCode(r, "invalid_argument", "%s %r" % (field, value))
            self.assertIn('field "%s"' % field, r["error"])

    def test_out_of_bounds_refused_on_an_open_profile(self):
        # Nothing in the profile to lower: the host's value would apply.
        for field, value in OUT_OF_BOUNDS:
            with self.subTest(field=field, value=value):
                self.refuse({}, field, value)
        self.limited_gateway({}).initialize()

    def test_a_refused_lowering_drops_nothing(self):
        if not cgroup_writable():
            self.skipTest("this user cannot make cgroups here")
        self.refuse(self.LIMITED, "cpus", 0.001)
        gw = self.limited_gateway(self.LIMITED)
        gw.initialize()
        res = gw.facts["resources"]
        applied, observed = res["applied"], gw.facts["observed"]
        self.assertEqual(applied.get("cpus"), 2, json.dumps(gw.facts))
        self.assertEqual(applied.get("memory_mb"), 128, json.dumps(gw.facts))
        self.assertEqual(observed.get("memory_limit_bytes"), 128 * MiB, json.dumps(gw.facts))
        self.assertIn("pids_max", applied, json.dumps(gw.facts))
        small = gw.sh(alloc(16))
        self.assertIn("allocated 16 MiB", small["output"], "the positive control did not run")
        big = gw.sh(alloc(512))
        self.assertNotIn("allocated", big["output"], "the 128 MiB limit was lifted")

    def test_lowering_to_the_minimum_keeps_every_limit(self):
        if not cgroup_writable():
            self.skipTest("this user cannot make cgroups here")
        gw = self.limited_gateway(self.LIMITED, {"cpus": CPUS_MIN})
        gw.initialize()
        applied, observed = gw.facts["resources"]["applied"], gw.facts["observed"]
        self.assertAlmostEqual(applied.get("cpus"), CPUS_MIN, places=6, msg=json.dumps(gw.facts))
        self.assertAlmostEqual(observed.get("cpu_limit"), CPUS_MIN, places=6,
                               msg=json.dumps(gw.facts))
        self.assertEqual(applied.get("memory_mb"), 128, json.dumps(gw.facts))
        self.assertEqual(observed.get("memory_limit_bytes"), 128 * MiB, json.dumps(gw.facts))
        self.assertIn("pids_max", applied, json.dumps(gw.facts))

    def test_largest_cpus_is_reported_as_asked(self):
        if not cgroup_writable():
            self.skipTest("this user cannot make cgroups here")
        gw = self.limited_gateway({}, {"cpus": CPUS_MAX})
        gw.initialize()
        applied = gw.facts["resources"]["applied"]
        self.assertEqual(applied.get("cpus"), CPUS_MAX, json.dumps(gw.facts))


@unittest.skipUnless(not PROFILE or PROFILE == "local", "needs the local backend")
class Fallback(Dir, GatewayTestCase):
    """A best-effort limit the kernel refuses is dropped alone: the
    others stay applied and enforced."""

    CPU = "/sys/fs/cgroup/cpu"

    def test_a_refused_cpu_quota_drops_only_cpus(self):
        if os.geteuid() != 0 or not cgroup_writable():
            self.skipTest("needs root and a writable cgroup hierarchy")
        if (os.path.exists("/sys/fs/cgroup/cgroup.controllers") or
                not os.path.exists(os.path.join(self.CPU, "cpu.cfs_quota_us"))):
            self.skipTest("needs v1's cpu controller at %s" % self.CPU)
        made = []

        def unmake():
            for d in reversed(made):
                try:
                    os.rmdir(d)
                except OSError:
                    pass
        # Registered before the gateway's cleanup, so it runs after it.
        self.addCleanup(unmake)
        profile = {"cpus": 2, "memory_mb": 128, "best_effort": ["cpus", "memory_mb"]}
        gw = self.gateway(init=False, config=self.config(profile), profile="p",
                          state_dir=self.state)
        ident = unique("bounds")
        # The session's cpu cgroup, made first with a child holding 3 CPUs:
        # v1 refuses the session's own quota of 2 below it (EINVAL).
        session = os.path.join(self.CPU, "sandgate", "%s-%d" % (ident, gw.proc.pid))
        child = os.path.join(session, "blocker")
        for d in (os.path.dirname(session), session, child):
            if not os.path.isdir(d):
                os.mkdir(d)
                made.append(d)
        with open(os.path.join(child, "cpu.cfs_quota_us"), "w") as f:
            f.write("300000")
        gw.initialize(identity=ident)
        applied, observed = gw.facts["resources"]["applied"], gw.facts["observed"]
        if "cpus" in applied:
            self.skipTest("this kernel took a quota below a child's: %s" % json.dumps(applied))
        self.assertEqual(applied.get("memory_mb"), 128, json.dumps(gw.facts))
        self.assertEqual(observed.get("memory_limit_bytes"), 128 * MiB, json.dumps(gw.facts))
        self.assertIn("pids_max", applied, json.dumps(gw.facts))
        self.assertIn("runs without cpus (best-effort)", gw.stderr_text())
        small = gw.sh(alloc(16))
        self.assertIn("allocated 16 MiB", small["output"], "the positive control did not run")
        big = gw.sh(alloc(512))
        self.assertNotIn("allocated", big["output"], "the 128 MiB limit was dropped with cpus")


if __name__ == "__main__":
    unittest.main()
