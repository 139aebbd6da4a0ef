"""A Daytona create whose outcome is unknown leaks nothing (issue 9, item 3).

The fake Daytona (tests/fakes/daytona/server.mjs) runs on loopback with faults
injected; every assertion about what remains is made on the fake's own state
(/__fake/state), never on what sandgate says.  The matrix:

  - EOF while a slow create is on its way: sandgate finds the sandbox by its
    name once the create lands (within the shutdown budget), deletes it,
    drops the record and exits 0;
  - `cancel` of that initialize, then EOF: the same;
  - the create lands but its reply is lost, and every lookup fails: sandgate
    cannot know in time, so it keeps the registry record as cleanup-pending,
    exits non-zero saying what may remain, and a plain `sandgate envs gc`
    removes the sandbox once Daytona answers again;
  - the same with a slow delete that outlasts the budget, then `envs gc`.

The rule is the gateway's, for every cloud adapter; Daytona is the one that
exists today.  Needs node and the fake's bwrap mode (root here); skipped
otherwise.  These tests start their own fake and config, whatever
SANDGATE_TEST_CONFIG says.
"""

import datetime
import json
import os
import shutil
import subprocess
import tempfile
import time
import unittest

from fakeserver import FakeServer
from sgclient import BIN, GatewayTestCase, registry_records, unique

KEY = "fault-key-" + unique("k")


def have(prog):
    return shutil.which(prog) is not None


class Fake(FakeServer):
    """The fake Daytona on a free loopback port; stopped by closing its stdin."""

    def __init__(self):
        super().__init__("daytona", "--exec-mode", "bwrap", "--exec-limit-ms", "5000",
                         "--transition-ms", "40", "--api-key", KEY)

    def sandboxes(self):
        """Every sandbox the fake still has, in whatever state."""
        return self.admin("GET", "/__fake/state")["sandboxes"]


class OnFakeDaytona:
    """A fake Daytona for the class, a config whose profile `cloud` uses it,
    and a fresh state directory per test.  A mixin, also used by
    tests/delegation/test_budget.py."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.fake = Fake()
        cls.dir = tempfile.mkdtemp(prefix="sg-e2e-dtfault-")
        cls.config = os.path.join(cls.dir, "config.json")
        with open(cls.config, "w") as f:
            json.dump({"default": "cloud", "profiles": {"cloud": {
                "backend": "daytona", "image": "debian:12", "api_url_env": "SG_DT_URL",
                "api_key_env": "SG_DT_KEY", "toolbox_timeout_ms": 5000}}}, f)
        cls.env = {"SG_DT_URL": cls.fake.base + "/api", "SG_DT_KEY": KEY}

    @classmethod
    def tearDownClass(cls):
        cls.fake.stop()
        shutil.rmtree(cls.dir, ignore_errors=True)
        super().tearDownClass()

    def setUp(self):
        self.fake.admin("POST", "/__fake/reset")
        self.state = tempfile.mkdtemp(prefix="sg-e2e-dtstate-")
        self.addCleanup(shutil.rmtree, self.state, True)

    def records(self):
        return registry_records(self.state)


@unittest.skipUnless(BIN and have("node") and have("bwrap") and have("nsenter"),
                     "needs SANDGATE_BIN, node, bwrap and nsenter")
class UnknownCreateOutcome(OnFakeDaytona, GatewayTestCase):

    def start(self, budget_ms, init=False):
        return self.gateway(init=init, config=self.config, profile="cloud",
                            env_extra=self.env, budget_ms=budget_ms, state_dir=self.state)

    def envs_gc(self):
        env = dict(os.environ, **self.env)
        return subprocess.run([BIN, "envs", "gc", "--config", self.config,
                               "--state-dir", self.state],
                              env=env, capture_output=True, text=True, timeout=120)

    def slow_create(self, ms):
        self.fake.fault({"method": "POST", "path": "^/api/sandbox$", "action": "delay",
                         "delayMs": ms})

    def wait_create_sent(self, gw):
        """Wait until the create is on its way.

        The fake logs a request when it ends, so the slow create itself
        cannot be seen, and a fresh state directory sends no lookup before
        it; the gateway's progress line, written just before, can.
        """
        gw.wait_stderr("creating sandbox")
        time.sleep(0.3)
        return time.monotonic()

    def wait_landed(self, deadline):
        """Wait (until deadline) for the slow create to have landed or been removed."""
        while time.monotonic() < deadline:
            time.sleep(0.2)

    def assertNothingLeft(self):
        self.assertEqual([(s["name"], s["state"]) for s in self.fake.sandboxes()], [],
                         "sandboxes left at the provider")
        self.assertEqual(self.records(), [], "registry records left")

    def test_eof_during_slow_create(self):
        self.slow_create(2500)
        gw = self.start(budget_ms=15000)
        gw.request("initialize", gw.make_binding(), token="tok-" + unique())
        t0 = self.wait_create_sent(gw)
        rc, err, _ = gw.shutdown(timeout=30)
        # Had sandgate left early, the create lands now; wait for it.
        self.wait_landed(t0 + 3.5)
        self.assertNothingLeft()
        self.assertEqual(rc, 0, err[-2000:])

    def test_cancel_during_slow_create(self):
        self.slow_create(2500)
        gw = self.start(budget_ms=15000)
        token = "tok-" + unique()
        rid = gw.request("initialize", gw.make_binding(), token=token)
        t0 = self.wait_create_sent(gw)
        gw.cancel(rid)
        r = gw.wait_reply(rid, 30)
        self.assertReplyCode(r, "cancelled")
        rc, err, _ = gw.shutdown(timeout=30)
        self.wait_landed(t0 + 3.5)
        self.assertNothingLeft()
        self.assertEqual(rc, 0, err[-2000:])

    def unknown_then_gc(self, budget_ms, extra_faults=()):
        """The create's outcome stays unknown past the budget; gc clears it."""
        # A fresh state directory creates with no lookup first; the create
        # lands, its reply is lost, and every lookup and listing fails.
        self.fake.fault({"method": "POST", "path": "^/api/sandbox$", "action": "drop",
                         "after": True},
                        {"method": "GET", "path": "^/api/sandbox", "status": 500,
                         "count": 100000}, *extra_faults)
        gw = self.start(budget_ms=budget_ms)
        r = gw.call("initialize", gw.make_binding(), token="tok-" + unique(), timeout=120)
        self.assertIn("error", r)
        rc, err, _ = gw.shutdown(timeout=60)
        self.assertNotEqual(rc, 0, "sandgate said all was clean: " + err[-2000:])
        self.assertIn("may remain", err)
        self.assertIn("sandgate envs gc", err)
        self.assertEqual(len(self.fake.sandboxes()), 1, "the create did land")
        recs = self.records()
        self.assertEqual([r["status"] for r in recs], ["cleanup-pending"])
        # Daytona answers again: a plain gc removes it.
        self.fake.admin("DELETE", "/__fake/faults")
        g = self.envs_gc()
        self.assertEqual(g.returncode, 0, g.stdout + g.stderr)
        self.assertNothingLeft()

    def test_cancel_while_setup_waits_for_upload(self):
        # sg-helper's upload is slow; the set-up sent beside it, and the
        # first command (a new scratch sandbox answers initialize after its
        # start), wait for it in the sandbox.  A cancel of the command is
        # answered once the set-up has its outcome (it gives up on the
        # upload after half of toolbox_timeout_ms, 2.5 s here: the gateway
        # then knows no process of the command can run), not after the
        # upload, and the sandbox does not stay.
        self.fake.fault({"method": "POST", "path": "/files/bulk-upload$", "action": "delay",
                         "delayMs": 9000})
        gw = self.start(budget_ms=15000, init=True)
        rid = gw.execute_req("bash", {"command": "echo ran"})
        time.sleep(0.3)
        t0 = time.monotonic()
        gw.cancel(rid)
        r = gw.wait_reply(rid, 30)
        self.assertReplyCode(r, "cancelled")
        self.assertLess(time.monotonic() - t0, 6.0, "the cancel waited for the upload")
        rc, err, _ = gw.shutdown(timeout=30)
        self.wait_landed(t0 + 9.5)
        self.assertNothingLeft()
        self.assertEqual(rc, 0, err[-2000:])

    def test_create_reply_lost_and_lookups_fail(self):
        self.unknown_then_gc(budget_ms=3000)

    def test_eof_during_slow_create_then_slow_delete(self):
        # Found in time, but its delete outlasts the budget: the record stays.
        self.slow_create(1500)
        self.fake.fault({"method": "DELETE", "path": "^/api/sandbox/", "action": "delay",
                         "delayMs": 6000})
        gw = self.start(budget_ms=4000)
        gw.request("initialize", gw.make_binding(), token="tok-" + unique())
        self.wait_create_sent(gw)
        rc, err, took = gw.shutdown(timeout=60)
        self.assertNotEqual(rc, 0, "sandgate said all was clean: " + err[-2000:])
        self.assertLess(took, 4 + 3, "the shutdown budget was not kept")
        self.assertIn("may remain", err)
        self.assertEqual([r["status"] for r in self.records()], ["cleanup-pending"])
        # The slow delete lands in the end; gc then only drops the record.
        time.sleep(6.5)
        g = self.envs_gc()
        self.assertEqual(g.returncode, 0, g.stdout + g.stderr)
        self.assertNothingLeft()


@unittest.skipUnless(BIN and have("node") and have("bwrap") and have("nsenter"),
                     "needs SANDGATE_BIN, node, bwrap and nsenter")
class HostGrace(OnFakeDaytona, GatewayTestCase):
    """A version-3 host kills its command backend 3 s after EOF: a delete
    slower than that goes to a detached reaper, which removes the sandbox
    within the profile's budget; version 4 keeps its 60 s and deletes
    inline."""

    SLOW_DELETE_MS = 8000

    def slow_delete(self):
        self.fake.fault({"method": "DELETE", "path": "^/api/sandbox/", "action": "delay",
                         "delayMs": self.SLOW_DELETE_MS})

    def assertNothingLeft(self, within):
        deadline = time.monotonic() + within
        while (self.fake.sandboxes() or self.records()) and time.monotonic() < deadline:
            time.sleep(0.2)
        self.assertEqual([(s["name"], s["state"]) for s in self.fake.sandboxes()], [],
                         "sandboxes left at the provider")
        self.assertEqual(self.records(), [], "registry records left")

    def test_version_3_hands_a_slow_delete_to_a_reaper(self):
        gw = self.gateway(config=self.config, profile="cloud", env_extra=self.env,
                          state_dir=self.state, binding={"version": 3})
        self.assertEqual(gw.init_reply["version"], 3)
        self.assertEqual(len(self.fake.sandboxes()), 1)
        self.slow_delete()
        rc, err, took = gw.shutdown(timeout=30)
        self.assertLess(took, 3.0, "exited inside the host's 3 s: %.2f s\n%s" % (took, err))
        self.assertEqual(rc, 0, err[-2000:])
        self.assertIn("reaper", err)
        recs = self.records()
        self.assertEqual(len(recs), 1, "the reaper's job is in the registry")
        self.assertEqual(recs[0]["status"], "cleanup-pending")
        # Bounded by the budget (60 s, or a peer's 10 s through a relay),
        # not by the host's window.
        self.assertGreater(recs[0]["reaper"]["budget_ms"], 3000)
        self.assertIn("removing", recs[0], "claimed by the live reaper")
        self.assertEqual(len(self.fake.sandboxes()), 1, "the delete is still on its way")
        self.assertNothingLeft(within=self.SLOW_DELETE_MS / 1000 + 20)

    def test_version_3_with_a_command_in_flight(self):
        # A command still running at EOF is cancelled and answered, and the
        # slow delete still goes to the reaper: out in under 3 s.
        gw = self.gateway(config=self.config, profile="cloud", env_extra=self.env,
                          state_dir=self.state, binding={"version": 3})
        rid = gw.execute_req("bash", {"command": "echo started; sleep 30"})
        time.sleep(1.0)
        self.slow_delete()
        rc, err, took = gw.shutdown(timeout=30)
        self.assertLess(took, 3.0, "past the host's 3 s: %.2f s\n%s" % (took, err[-2000:]))
        self.assertEqual(rc, 0, err[-2000:])
        self.assertTrue(gw.has_reply(rid), "the command in flight was never answered")
        self.assertNothingLeft(within=self.SLOW_DELETE_MS / 1000 + 20)

    def test_what_a_reaper_cannot_finish_is_left_to_gc(self):
        # The reaper is bounded by the budget (4 s here); a delete that
        # hangs past it leaves the record cleanup-pending, unclaimed, and
        # a plain `sandgate envs gc` removes the sandbox once Daytona
        # answers again.
        gw = self.gateway(config=self.config, profile="cloud", env_extra=self.env,
                          state_dir=self.state, budget_ms=4000, binding={"version": 3})
        self.fake.fault({"method": "DELETE", "path": "^/api/sandbox/", "action": "delay",
                         "delayMs": 60000})
        rc, err, took = gw.shutdown(timeout=30)
        self.assertLess(took, 3.0, err)
        self.assertEqual(rc, 0, err[-2000:])
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and \
                any("removing" in r for r in self.records()):
            time.sleep(0.2)
        recs = self.records()
        self.assertEqual([(r["status"], "removing" in r) for r in recs],
                         [("cleanup-pending", False)], "the reaper gave up and said so")
        with open(os.path.join(self.state, "reaper.log")) as f:
            self.assertIn("sandgate envs gc", f.read())
        self.assertEqual(len(self.fake.sandboxes()), 1)
        self.fake.admin("DELETE", "/__fake/faults")
        env = dict(os.environ, **self.env)
        g = subprocess.run([BIN, "envs", "gc", "--config", self.config, "--state-dir",
                            self.state], env=env, capture_output=True, text=True, timeout=120)
        self.assertEqual(g.returncode, 0, g.stdout + g.stderr)
        self.assertNothingLeft(within=10)

    def test_version_3_eof_during_slow_create(self):
        # The initialize is still creating when a version-3 host closes
        # stdin: the gateway exits inside 3 s, and the create that lands
        # later is found by its tags and deleted by a reaper.
        self.fake.fault({"method": "POST", "path": "^/api/sandbox$", "action": "delay",
                         "delayMs": 2500})
        gw = self.gateway(init=False, config=self.config, profile="cloud",
                          env_extra=self.env, state_dir=self.state)
        gw.request("initialize", gw.make_binding(version=3), token="a1" * 32)
        gw.wait_stderr("creating sandbox")
        time.sleep(0.3)
        rc, err, took = gw.shutdown(timeout=30)
        self.assertLess(took, 3.0, "past the host's 3 s: %.2f s\n%s" % (took, err[-2000:]))
        self.assertEqual(rc, 0, err[-2000:])
        recs = self.records()
        self.assertEqual([(r["status"], "reaper" in r, "removing" in r) for r in recs],
                         [("cleanup-pending", True, True)], "the reaper's job is on record")
        time.sleep(2.5)  # the create lands
        self.assertNothingLeft(within=20)
        deletes = [r for r in self.fake.admin("GET", "/__fake/requests")["requests"]
                   if r.get("route") == "deleteSandbox"]
        self.assertTrue(deletes, "the landed sandbox was never deleted")

    def test_version_4_keeps_its_budget_and_deletes_inline(self):
        gw = self.gateway(config=self.config, profile="cloud", env_extra=self.env,
                          state_dir=self.state)
        self.assertEqual(gw.init_reply["version"], 4)
        self.slow_delete()
        rc, err, took = gw.shutdown(timeout=60)
        self.assertEqual(rc, 0, err[-2000:])
        self.assertGreaterEqual(took, self.SLOW_DELETE_MS / 1000, "the delete was waited for")
        self.assertNotIn("reaper", err)
        self.assertNothingLeft(within=0)


@unittest.skipUnless(BIN and have("node") and have("bwrap") and have("nsenter"),
                     "needs SANDGATE_BIN, node, bwrap and nsenter")
class TimeToReady(OnFakeDaytona, GatewayTestCase):
    """What a fresh initialize asks of Daytona (docs/benchmarks.md, D6)."""

    def test_fresh_initialize_requests(self):
        seq = self.fake.admin("GET", "/__fake/requests")["requests"]
        seq = seq[-1]["seq"] if seq else 0
        gw = self.gateway(config=self.config, profile="cloud", env_extra=self.env,
                          state_dir=self.state)
        self.assertFalse(gw.init_reply["environment"]["resumed"])
        # The set-up goes on beside the first command: count after it.
        self.assertEqual(gw.sh_ok("echo ready").strip(), "ready")
        reqs = [r for r in self.fake.admin("GET", "/__fake/requests?since=%d" % seq)["requests"]
                if r.get("route") != "socketIo"]
        routes = [r.get("route") for r in reqs]
        # The registry knew nothing of the identity: the create comes first,
        # no lookup by name.  The create's reply stands for the first poll
        # and the event stream ends the wait: one GET at most, when the
        # stream came up after the wait began (a change may have been
        # missed).  Inside the sandbox exactly the upload and the one
        # set-up request that installs sg-helper and runs its probe, sent
        # side by side (either may be logged first).
        self.assertEqual(routes[0], "createSandbox", routes)
        self.assertEqual(routes.count("createSandbox"), 1, routes)
        self.assertFalse([r for r in reqs if r.get("status") == 404], routes)
        # Beyond that one, only the once-a-second poll of a slow start.
        ts = {r.get("route"): datetime.datetime.fromisoformat(r["ts"].replace("Z", "+00:00"))
              for r in reqs}
        waited = max(0.0, (ts["bulkUpload"] - ts["createSandbox"]).total_seconds())
        self.assertLessEqual(routes.count("getSandbox"), 1 + int(waited), routes)
        inside = [x for x in routes if x not in ("createSandbox", "getSandbox")]
        self.assertEqual(inside.count("bulkUpload"), 1, routes)
        self.assertGreaterEqual(inside.count("execute"), 2, routes)
        # Side by side: the set-up began before the upload was answered.
        up = [r for r in reqs if r.get("route") == "bulkUpload"][0]
        ex = [r for r in reqs if r.get("route") == "execute"][0]
        up_end = ts["bulkUpload"] + datetime.timedelta(milliseconds=up["durationMs"])
        self.assertLess(datetime.datetime.fromisoformat(ex["ts"].replace("Z", "+00:00")),
                        up_end, (up, ex))
        gw.shutdown()

    def test_recorded_identity_looks_up_first(self):
        # A persistent profile keeps the record: the next initialize of the
        # identity in this state directory looks it up and resumes it.
        cfg = os.path.join(self.state, "persistent.json")
        with open(cfg, "w") as f:
            json.dump({"default": "keep", "profiles": {"keep": {
                "backend": "daytona", "image": "debian:12", "api_url_env": "SG_DT_URL",
                "api_key_env": "SG_DT_KEY", "toolbox_timeout_ms": 5000,
                "persistent": True}}}, f)
        binding = {"identity": unique("ident"), "remove_workspace_on_exit": False}
        gw = self.gateway(config=cfg, profile="keep", env_extra=self.env,
                          state_dir=self.state, binding=binding)
        first = gw.init_reply["environment"]["id"]
        rc, err, _ = gw.shutdown(timeout=60)
        self.assertEqual(rc, 0, err[-2000:])
        self.assertEqual(len(self.records()), 1)
        seq = self.fake.admin("GET", "/__fake/requests")["requests"][-1]["seq"]
        gw = self.gateway(config=cfg, profile="keep", env_extra=self.env,
                          state_dir=self.state, binding=binding)
        self.assertTrue(gw.init_reply["environment"]["resumed"])
        self.assertEqual(gw.init_reply["environment"]["id"], first)
        routes = [r.get("route") for r in
                  self.fake.admin("GET", "/__fake/requests?since=%d" % seq)["requests"]
                  if r.get("route") != "socketIo"]
        self.assertEqual(routes[0], "getSandbox", routes)
        self.assertNotIn("createSandbox", routes)


if __name__ == "__main__":
    unittest.main()
