"""Operators (issue 5): the state registry, `sandgate envs`, and no leaks.

The crash matrix kills the gateway with SIGKILL at each step of
provisioning, running and teardown (SANDGATE_TEST_CRASH_AT names the step,
docs/operators.md lists them); afterwards `sandgate envs gc` must leave
nothing behind, checked against what really exists: the local backend's
directories and processes, and every backend's own listing.

The host asks for the short lifetime in its own profile
(WUU_EXECUTION_PROFILE), as it does for a command backend.
"""

import json
import os
import signal
import subprocess
import tempfile
import time
import unittest

from sgclient import (BIN, CONFIG, PROFILE, GatewayTestCase, Gateway, Marker, profile_copy,
                      host_env, host_processes_matching, host_token, unique)

LIFETIME = 1  # seconds: what the host's profile asks for, so expiry comes quickly

# Behind relaying sandgates (tests/delegation/chain.py) the crash point is
# the innermost gateway's; the relay the test talks to reports its peer's
# death with a non-zero status of its own instead of dying by SIGKILL.
RELAYED = bool(os.environ.get("SG_CHAIN_BIN"))


def crashed(code):
    return code != 0 if RELAYED else code == -signal.SIGKILL


def envs(state_dir, *args):
    argv = [BIN, "envs", *args, "--state-dir", state_dir]
    if CONFIG:
        argv += ["--config", CONFIG]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout, p.stderr


def listed(state_dir):
    rc, out, err = envs(state_dir, "list", "--json")
    if rc != 0:
        raise AssertionError("envs list failed (%d): %s" % (rc, err))
    return json.loads(out)


class Operators(GatewayTestCase):
    def state(self):
        d = tempfile.mkdtemp(prefix="sg-e2e-ops-")
        self.addCleanup(lambda: subprocess.run(["rm", "-rf", d]))
        return d

    def binding(self):
        return {"identity": unique("ops")}

    def host(self, **fields):
        """The host's profile: the short lifetime, and fields."""
        return host_env(dict({"lifetime_seconds": LIFETIME}, **fields))

    def left_behind(self, state, b):
        """A gateway that ends its session cleanly and keeps its
        environment, as the binding asks (remove_workspace_on_exit false);
        the environment's id.  Through a relay the peer keeps it too."""
        gw = Gateway(state_dir=state, env_extra=self.host())
        self.addCleanup(gw.cleanup)
        env_id = gw.initialize(**dict(b, remove_workspace_on_exit=False))["environment"]["id"]
        gw.shutdown()
        return env_id

    def assertNothingLeft(self, state_dir, marker=None):
        self.assertEqual(listed(state_dir), [], "envs list still shows environments")
        local = os.path.join(state_dir, "local")
        if os.path.isdir(local):
            self.assertEqual(os.listdir(local), [], "local environment directories remain")
        reg = os.path.join(state_dir, "registry")
        if os.path.isdir(reg):
            self.assertEqual([f for f in os.listdir(reg) if f.endswith(".json")], [],
                             "registry records remain")
        # A backend's real state where the test can see it directly: the ssh
        # harness's workspace directory on this machine.
        real = os.environ.get("SANDGATE_TEST_REAL_WORKSPACE")
        if real and os.path.isdir(real):
            left = [e for e in os.listdir(real)
                    if os.path.exists(os.path.join(real, e, "env.json"))]
            self.assertEqual(left, [], "environments remain on the backend itself")
        fake = os.environ.get("SANDGATE_TEST_FAKE_URL")
        if fake:
            import urllib.request
            with urllib.request.urlopen(fake + "/__fake/state", timeout=30) as r:
                state = json.load(r)
            if "runningSessions" in state:
                # The fake Vercel: named sandboxes (this file's are "sg-ops-…").
                alive = [s["name"] for s in state.get("sandboxes", [])
                         if s["name"].startswith("sg-ops")]
            else:
                # Daytona's fake says "state", Modal's "running".
                alive = [s["id"] for s in state.get("sandboxes", [])
                         if s.get("state") not in ("destroyed", "destroying")
                         and s.get("running", True)]
            self.assertEqual(alive, [], "sandboxes remain at the provider")
        # The singularity backend's real state: the runtime's instances
        # (this file's identities are "ops-…", so their instances "sg-ops-…").
        runtime = os.environ.get("SANDGATE_TEST_APPTAINER")
        if runtime:
            r = subprocess.run([runtime, "instance", "list", "--json"], capture_output=True,
                               text=True, timeout=120)
            names = [i["instance"] for i in json.loads(r.stdout)["instances"]]
            self.assertEqual([n for n in names if n.startswith("sg-ops")], [],
                             "instances remain at the runtime")
        if marker is not None and (not PROFILE or PROFILE == "local"):
            deadline = time.monotonic() + 5
            while host_processes_matching(marker.needle) and time.monotonic() < deadline:
                time.sleep(0.1)
            self.assertEqual(host_processes_matching(marker.needle), [],
                             "a process of the crashed session is still running")

    def crash(self, point):
        state = self.state()
        b = self.binding()
        marker = None
        env = self.host()
        if point != "running":
            env["SANDGATE_TEST_CRASH_AT"] = point
        gw = Gateway(state_dir=state, env_extra=env)
        self.addCleanup(gw.cleanup)
        if point in ("provision:intent", "adapter:created", "provision:created", "ready"):
            gw.request("initialize", gw.make_binding(**b), token=host_token())
            code, _ = gw.wait_exit(60)
            self.assertTrue(crashed(code), "the gateway did not stop at %s (%s)" % (point, code))
        else:
            gw.initialize(**b)
            marker = Marker()
            gw.start(marker.command)
            if point == "running":
                gw.proc.kill()
                gw.wait_exit(30)
            else:
                gw.close_stdin()
                code, _ = gw.wait_exit(60)
                self.assertTrue(crashed(code),
                                "the gateway did not stop at %s (%s)" % (point, code))
        time.sleep(LIFETIME + 0.5)
        rc, out, err = envs(state, "gc")
        self.assertEqual(rc, 0, "envs gc failed: %s %s" % (out, err))
        self.assertNothingLeft(state, marker)

    def test_crash_at_intent(self):
        self.crash("provision:intent")

    def test_crash_inside_the_adapter_after_its_create(self):
        # Every adapter names the moment its remote resource first exists.
        self.crash("adapter:created")

    def test_crash_after_create(self):
        self.crash("provision:created")

    def test_crash_before_ready(self):
        self.crash("ready")

    def test_crash_while_running(self):
        self.crash("running")

    def test_crash_during_teardown(self):
        self.crash("teardown:detached")

    def shared_pair(self, state):
        """Two gateways whose profile is shared (the host's profile asks for
        it, which only an operator's shared profile allows): the profile
        under test made shared, in a copy of its config beside the original
        (relative paths in it stay right), or the embedded local one."""
        cfg, name = profile_copy(self, shared=True)
        kw = {"env_extra": self.host(shared=True), "config": cfg, "profile": name}
        one = Gateway(state_dir=state, **kw)
        two = Gateway(state_dir=state, **kw)
        self.addCleanup(one.cleanup)
        self.addCleanup(two.cleanup)
        return one, two

    def test_shared_identity_removed_by_the_last_to_leave(self):
        state = self.state()
        b = self.binding()
        one, two = self.shared_pair(state)
        binding, token = one.make_binding(**b), host_token()
        r = one.call("initialize", binding, token=token)
        if CONFIG and "error" in r and "shared" in r["error"]:
            self.skipTest("the profile under test offers no sharing: " + r["error"])
        self.assertIn("data", r, r.get("error"))
        one.token, one.binding, one.init_reply = token, binding, r["data"]
        two.initialize(**b)
        one.write("shared.txt", "from one\n")
        self.assertEqual(two.view("read_file", {"path": "shared.txt"}).structured["text"],
                         "from one\n")
        rows = listed(state)
        self.assertEqual(len(rows), 1)
        self.assertEqual(rows[0]["live_sessions"], 2)
        code, _, _ = one.shutdown()
        self.assertEqual(code, 0)
        # The other session still works in the same environment.
        self.assertEqual(two.view("read_file", {"path": "shared.txt"}).structured["text"],
                         "from one\n")
        self.assertEqual(len(listed(state)), 1)
        code, _, _ = two.shutdown()
        self.assertEqual(code, 0)
        self.assertNothingLeft(state)

    def test_unshared_identity_in_use_is_refused(self):
        state = self.state()
        b = self.binding()
        one = Gateway(state_dir=state)
        two = Gateway(state_dir=state)
        self.addCleanup(one.cleanup)
        self.addCleanup(two.cleanup)
        one.initialize(**b)
        err = two.fail("initialize", two.make_binding(**b), token=host_token())
        self.assertCode(err, "unavailable")
        one.shutdown()

    def test_envs_list_show_rm_in_both_formats(self):
        state = self.state()
        env_id = self.left_behind(state, self.binding())
        rows = listed(state)
        self.assertEqual([r["id"] for r in rows], [env_id])
        row = rows[0]
        for key in ("id", "backend", "profile", "state", "created", "expires",
                    "persistent", "live_sessions"):
            self.assertIn(key, row)
        self.assertEqual(row["live_sessions"], 0)
        rc, out, _ = envs(state, "list")
        self.assertEqual(rc, 0)
        header = out.splitlines()[0].split()
        self.assertEqual(header, ["ID", "BACKEND", "PROFILE", "STATE", "AGE", "EXPIRY",
                                  "RESOURCES", "SESSIONS"])
        self.assertIn(env_id, out)
        rc, out, _ = envs(state, "show", env_id, "--json")
        self.assertEqual(rc, 0)
        self.assertEqual(json.loads(out)["id"], env_id)
        rc, out, _ = envs(state, "show", env_id)
        self.assertEqual(rc, 0)
        self.assertIn("id             " + env_id, out.splitlines())
        # The exit statuses of docs/cli.md: 66 no such ID, 64 usage.
        self.assertEqual(envs(state, "show", "no-such-env")[0], 66)
        self.assertEqual(envs(state, "rm", "no-such-env")[0], 66)
        self.assertEqual(envs(state, "frobnicate")[0], 64)
        rc, out, err = envs(state, "gc", "--dry-run")
        self.assertEqual(rc, 0)
        self.assertEqual(len(listed(state)), 1, "--dry-run removed something")
        rc, out, err = envs(state, "rm", env_id)
        self.assertEqual(rc, 0, err)
        self.assertNothingLeft(state)

    def test_orphan_is_listed_and_collected(self):
        # An environment the registry does not know (its record lost) is
        # still found through the backend's own listing, and gc removes it
        # once it is past its expiry.
        state = self.state()
        env_id = self.left_behind(state, self.binding())
        reg = os.path.join(state, "registry")
        for f in os.listdir(reg):
            if f.endswith(".json"):
                os.unlink(os.path.join(reg, f))
        rows = listed(state)
        self.assertEqual([(r["id"], r["state"]) for r in rows], [(env_id, "orphan")])
        rc, out, err = envs(state, "gc", "--older-than", "0s")
        self.assertEqual(rc, 0, err)
        self.assertNothingLeft(state)

    def test_corrupt_record_is_kept_aside(self):
        state = self.state()
        reg = os.path.join(state, "registry")
        os.makedirs(reg)
        with open(os.path.join(reg, "local--broken.json"), "w") as f:
            f.write("{not json")
        rc, out, err = envs(state, "list", "--json")
        self.assertEqual(rc, 0)
        self.assertIn("corrupt", err)
        self.assertTrue(os.path.exists(os.path.join(reg, "local--broken.json.corrupt")))



class ProviderSelection(GatewayTestCase):
    def test_first_candidate_meeting_its_requirements_is_bound(self):
        if CONFIG:
            self.skipTest("selection is exercised with its own local config")
        d = tempfile.mkdtemp(prefix="sg-e2e-select-")
        self.addCleanup(lambda: subprocess.run(["rm", "-rf", d]))
        cfg = os.path.join(d, "config.json")
        with open(cfg, "w") as f:
            json.dump({"default": "auto", "profiles": {
                "auto": {"backend": "select", "candidates": [
                    {"profile": "future", "require": {"toolchains": {"git": ">=99"}}},
                    {"profile": "sealed", "require": {"isolation": "required",
                                                      "network_isolated": True}}]},
                "future": {"backend": "local"},
                "sealed": {"backend": "local", "network": "none"}}}, f)
        state = os.path.join(d, "state")
        gw = Gateway(state_dir=state, config=cfg, profile="auto")
        self.addCleanup(gw.cleanup)
        env = gw.initialize()["environment"]
        self.assertEqual(env["profile"], "sealed")
        sel = env["facts"]["selection"]
        self.assertEqual([c["profile"] for c in sel], ["future", "sealed"])
        self.assertFalse(sel[0]["chosen"])
        self.assertIn("git", sel[0]["reason"])
        self.assertTrue(sel[1]["chosen"])
        self.assertTrue(env["facts"]["isolation"]["network_isolated"])
        # The skipped candidate left nothing behind.
        self.assertEqual(len(os.listdir(os.path.join(state, "local"))), 1)
        gw.shutdown()

    def select_gateway(self, toolchains):
        """A gateway on a select profile of one local candidate that
        requires the toolchains given (name -> version rule)."""
        d = tempfile.mkdtemp(prefix="sg-e2e-select-")
        self.addCleanup(lambda: subprocess.run(["rm", "-rf", d]))
        cfg = os.path.join(d, "config.json")
        with open(cfg, "w") as f:
            json.dump({"default": "auto", "profiles": {
                "auto": {"backend": "select", "candidates": [
                    {"profile": "here", "require": {"toolchains": toolchains}}]},
                "here": {"backend": "local"}}}, f)
        gw = Gateway(state_dir=os.path.join(d, "state"), config=cfg, profile="auto")
        self.addCleanup(gw.cleanup)
        return gw

    def test_toolchains_are_probed_only_when_asked(self):
        """Toolchains cost the probe's time and nothing in the host reads
        them: a plain initialize has none, `serve --toolchains` and a
        candidate that requires one have them observed."""
        if CONFIG:
            self.skipTest("selection is exercised with its own local config")
        gw = Gateway()
        self.addCleanup(gw.cleanup)
        facts = gw.initialize()["environment"]["facts"]
        self.assertNotIn("toolchains", facts)
        self.assertIn("isolation", facts)
        gw.shutdown()
        gw = Gateway(extra_args=["--toolchains"])
        self.addCleanup(gw.cleanup)
        self.assertRegex(gw.initialize()["environment"]["facts"]["toolchains"].get("git", ""),
                         r"^\d+\.")
        gw.shutdown()
        gw = self.select_gateway({"git": ">=1"})
        env = gw.initialize()["environment"]
        self.assertEqual(env["profile"], "here")
        self.assertIn("git", env["facts"]["toolchains"])
        gw.shutdown()

    def test_no_candidate_fits(self):
        if CONFIG:
            self.skipTest("selection is exercised with its own local config")
        gw = self.select_gateway({"nonexistent-tool": "*"})
        err = gw.fail("initialize", gw.make_binding(), token=host_token())
        self.assertCode(err, "unavailable")
        self.assertIn("nonexistent-tool", err)


if __name__ == "__main__":
    unittest.main()
