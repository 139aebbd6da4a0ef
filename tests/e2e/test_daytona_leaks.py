"""Nothing leaks at Daytona, nothing is adopted under weaker settings (attack review).

Real `sandgate serve` against the fake Daytona (tests/fakes/daytona/server.mjs)
with faults injected; every assertion about what remains is made on the
fake's own state (/__fake/state), never on what sandgate says.

  - a create that landed but whose reply is a 200 that cannot be read, a
    reply larger than any sandbox's, or a proxy's 408, is looked up by name,
    never forgotten;
  - after a create whose reply was lost, a lookup whose reply does not say
    whose the sandbox is (no labels) is not taken as "another's";
  - a stopped sandbox that a failed (or cancelled) initialize started is
    stopped again;
  - a persistent profile that adopts a sandbox made for a scratch session
    turns Daytona's auto-delete off, so the workspace is not deleted after
    the stop;
  - a flood of events for other sandboxes on Daytona's event stream, while
    initialize waits for `started`, does not grow sandgate's memory.

Needs node and the fake's bwrap mode; skipped otherwise.  Like
test_daytona_faults, these tests start their own fake and config.
"""

import json
import os
import subprocess
import time
import unittest

from sgclient import BIN, GatewayTestCase, proc_status, unique
from test_daytona_faults import OnFakeDaytona, have


@unittest.skipUnless(BIN and have("node") and have("bwrap") and have("nsenter"),
                     "needs SANDGATE_BIN, node, bwrap and nsenter")
class DaytonaLeaks(OnFakeDaytona, GatewayTestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.profiles = os.path.join(cls.dir, "profiles.json")
        base = {"backend": "daytona", "image": "debian:12", "api_url_env": "SG_DT_URL",
                "api_key_env": "SG_DT_KEY", "toolbox_timeout_ms": 5000}
        with open(cls.profiles, "w") as f:
            json.dump({"default": "keep", "profiles": {
                "keep": dict(base, persistent=True),
                "scratch": dict(base, persistent=False)}}, f)

    def start(self, config=None, profile="cloud", budget_ms=15000):
        return self.gateway(init=False, config=config or self.config, profile=profile,
                            env_extra=self.env, budget_ms=budget_ms, state_dir=self.state)

    def assertNothingLeft(self):
        self.assertEqual([(s["name"], s["state"]) for s in self.fake.sandboxes()], [],
                         "sandboxes left at the provider")
        self.assertEqual(self.records(), [], "registry records left")

    def statuses(self, binding):
        """The statuses of the registry records of the binding's identity."""
        return [r.get("status") for r in self.records() if r.get("identity") == binding["identity"]]

    def settled_state(self, name, want, within=10.0):
        """The state of sandbox `name` once it is `want`, or after `within` s."""
        deadline = time.monotonic() + within
        while True:
            st = [s["state"] for s in self.fake.sandboxes() if s["name"] == name]
            if (st and st[0] == want) or time.monotonic() > deadline:
                return st[0] if st else None
            time.sleep(0.2)

    # ---- a create whose reply says nothing readable -------------------------

    def create_answered(self, **fault):
        """The create lands; its reply is replaced by `fault`."""
        self.fake.fault(dict({"method": "POST", "path": "^/api/sandbox$", "action": "status",
                              "after": True}, **fault))
        gw = self.start()
        gw.call("initialize", gw.make_binding(), token="tok-" + unique(), timeout=120)
        rc, err, _ = gw.shutdown(timeout=60)
        self.assertNothingLeft()
        self.assertEqual(rc, 0, err[-2000:])

    def test_create_answered_200_that_cannot_be_read(self):
        self.create_answered(status=200, body="<html>upstream says hello</html>")

    def test_create_reply_larger_than_any_sandbox(self):
        self.create_answered(status=200, body="x" * (5 * 1024 * 1024))

    def test_create_answered_408_by_a_proxy(self):
        self.create_answered(status=408, body={"message": "proxy gave up"})

    def test_unreadable_owner_lookup_after_a_lost_create(self):
        # The create lands and its reply is lost; the one lookup by name that
        # follows answers a sandbox with no labels.  That is no owner, and the
        # sandbox this initialize made must be settled, not forgotten.
        self.fake.fault({"method": "POST", "path": "^/api/sandbox$", "action": "drop",
                         "after": True},
                        {"method": "GET", "path": "^/api/sandbox/sg-", "status": 200,
                         "body": {"id": "whatever", "state": "started"}})
        gw = self.start()
        r = gw.call("initialize", gw.make_binding(), token="tok-" + unique(), timeout=120)
        self.assertIn("error", r)
        rc, err, _ = gw.shutdown(timeout=60)
        self.assertNothingLeft()
        self.assertEqual(rc, 0, err[-2000:])

    # ---- a resumed sandbox whose initialize fails ---------------------------

    def kept_sandbox(self, profile="keep"):
        """A sandbox of a new identity, kept (stopped) by a first session."""
        binding = {"identity": unique("ident"), "remove_workspace_on_exit": False}
        gw = self.gateway(config=self.profiles, profile=profile, env_extra=self.env,
                          state_dir=self.state, binding=binding)
        name = gw.init_reply["environment"]["facts"]["daytona"]["name"]
        rc, err, _ = gw.shutdown(timeout=60)
        self.assertEqual(rc, 0, err[-2000:])
        self.assertEqual(self.settled_state(name, "stopped"), "stopped")
        return binding, name

    def test_keep_whose_replies_are_lost_is_looked_up(self):
        # Every reply to the stop is lost, though the stop lands: a
        # lookup finds the sandbox stopping or stopped, so the keep
        # succeeded; it used to be reported failed (exit 69, keep-pending).
        binding = {"identity": unique("ident"), "remove_workspace_on_exit": False}
        gw = self.gateway(config=self.profiles, profile="keep", env_extra=self.env,
                          state_dir=self.state, binding=binding, budget_ms=30000)
        name = gw.init_reply["environment"]["facts"]["daytona"]["name"]
        self.fake.fault({"method": "POST", "path": "/stop$", "action": "drop",
                         "after": True, "count": 100})
        rc, err, _ = gw.shutdown(timeout=90)
        self.fake.admin("DELETE", "/__fake/faults")
        self.assertEqual(self.settled_state(name, "stopped"), "stopped")
        self.assertEqual(rc, 0, err[-2000:])
        self.assertEqual(self.statuses(binding), ["kept"], err[-2000:])

    def test_failed_setup_after_a_start_stops_the_sandbox(self):
        binding, name = self.kept_sandbox()
        self.fake.fault({"method": "POST", "path": "/process/execute$", "status": 500,
                         "count": 100})
        gw = self.start(config=self.profiles, profile="keep")
        r = gw.call("initialize", gw.make_binding(**binding), token="tok-" + unique(),
                    timeout=120)
        self.assertIn("error", r)
        self.fake.admin("DELETE", "/__fake/faults")
        rc, err, _ = gw.shutdown(timeout=60)
        self.assertEqual(self.settled_state(name, "stopped"), "stopped",
                         "the sandbox the failed initialize started still runs")

    def test_sandbox_that_cannot_be_stopped_again_is_keep_pending(self):
        # The failed initialize started the kept sandbox, and its stop never
        # reaches Daytona: the sandbox runs on, so the record must not say
        # kept.  keep-pending, until the next session resumes and stops it.
        binding, name = self.kept_sandbox()
        self.fake.fault({"method": "POST", "path": "/process/execute$", "status": 500,
                         "count": 100},
                        {"method": "POST", "path": "/stop$", "action": "drop", "count": 100})
        gw = self.start(config=self.profiles, profile="keep")
        r = gw.call("initialize", gw.make_binding(**binding), token="tok-" + unique(),
                    timeout=120)
        self.assertIn("error", r)
        self.assertEqual(self.settled_state(name, "started", within=1), "started")
        self.assertEqual(self.statuses(binding), ["keep-pending"],
                         gw.stderr_text()[-2000:])
        self.fake.admin("DELETE", "/__fake/faults")
        gw.shutdown(timeout=60)
        gw2 = self.gateway(config=self.profiles, profile="keep", env_extra=self.env,
                           state_dir=self.state, binding=binding)
        self.assertTrue(gw2.init_reply["environment"]["resumed"])
        rc, err, _ = gw2.shutdown(timeout=60)
        self.assertEqual(rc, 0, err[-2000:])
        self.assertEqual(self.settled_state(name, "stopped"), "stopped")
        self.assertEqual(self.statuses(binding), ["kept"])

    def test_cancel_during_setup_after_a_start_stops_the_sandbox(self):
        binding, name = self.kept_sandbox()
        self.fake.fault({"method": "POST", "path": "/process/execute$", "action": "delay",
                         "delayMs": 4000})
        gw = self.start(config=self.profiles, profile="keep")
        token = "tok-" + unique()
        rid = gw.request("initialize", gw.make_binding(**binding), token=token)
        gw.wait_stderr("preparing sandbox")
        gw.cancel(rid, token=token)
        self.assertReplyCode(gw.wait_reply(rid, 30), "cancelled")
        gw.shutdown(timeout=60)
        self.assertEqual(self.settled_state(name, "stopped"), "stopped",
                         "the sandbox the cancelled initialize started still runs")

    # ---- a persistent profile adopting a scratch session's sandbox ----------

    def test_persistent_profile_turns_off_auto_delete(self):
        binding, name = self.kept_sandbox(profile="scratch")
        before = [s for s in self.fake.sandboxes() if s["name"] == name][0]
        self.assertGreater(before["autoDeleteInterval"], 0)
        gw = self.gateway(config=self.profiles, profile="keep", env_extra=self.env,
                          state_dir=self.state, binding=binding)
        self.assertTrue(gw.init_reply["environment"]["resumed"])
        after = [s for s in self.fake.sandboxes() if s["name"] == name][0]
        self.assertEqual(after["autoDeleteInterval"], -1,
                         "Daytona would delete the persistent workspace after its stop")
        self.assertEqual(gw.facts["daytona"]["auto_delete_minutes"], -1)
        rc, err, _ = gw.shutdown(timeout=60)
        self.assertEqual(rc, 0, err[-2000:])

    def test_lost_persistent_sandbox_is_workspace_lost(self):
        # The persistent sandbox sessions used is deleted outside sandgate.
        # The next session must not get a fresh, empty workspace in its
        # place, even without require_existing_workspace: workspace_lost,
        # until `envs gc` forgets the record.
        binding, name = self.kept_sandbox()
        self.fake.admin("DELETE", "/__fake/sandboxes/%s" % name)
        gw = self.start(config=self.profiles, profile="keep")
        r = gw.call("initialize", gw.make_binding(**binding), token="tok-" + unique(),
                    timeout=120)
        self.assertReplyCode(r, "workspace_lost")
        self.assertIn("envs gc", r["error"])
        self.assertEqual([s["name"] for s in self.fake.sandboxes()], [],
                         "a fresh sandbox took the lost one's place")
        gw.shutdown(timeout=60)
        # The record stays for `envs gc` to forget, as the error says: a
        # failed initialize used to remove it, though it did not make it.
        self.assertEqual(len(self.records()), 1, "the lost workspace's record was dropped")
        env = dict(os.environ, **self.env)
        g = subprocess.run([BIN, "envs", "gc", "--config", self.profiles,
                            "--state-dir", self.state],
                           env=env, capture_output=True, text=True, timeout=120)
        self.assertEqual(g.returncode, 0, g.stdout + g.stderr)
        self.assertEqual(self.records(), [], g.stdout + g.stderr)
        gw2 = self.gateway(config=self.profiles, profile="keep", env_extra=self.env,
                           state_dir=self.state, binding=dict(binding, remove_workspace_on_exit=True))
        self.assertFalse(gw2.init_reply["environment"]["resumed"])
        rc, err, _ = gw2.shutdown(timeout=60)
        self.assertEqual(rc, 0, err[-2000:])

    # ---- the event stream ---------------------------------------------------

    def test_event_flood_is_bounded(self):
        # The sandbox is held in building_snapshot, so initialize waits on
        # the event stream; meanwhile the stream carries 200 events of
        # 256 KiB, each for a sandbox of another session.
        self.fake.admin("POST", "/__fake/config",
                        {"stateDelayMs": {"building_snapshot": 6000}})
        gw = self.start()
        rid = gw.request("initialize", gw.make_binding(), token="tok-" + unique())
        for _ in range(300):
            st = self.fake.admin("GET", "/__fake/state")
            if st["socketIoClients"] and st["sandboxes"]:
                break
            time.sleep(0.05)
        else:
            self.fail("initialize never listened to the event stream")
        before = proc_status(gw.proc.pid, "VmRSS")
        sent = self.fake.admin("POST", "/__fake/events/flood", {"count": 200, "bytes": 256 * 1024})
        self.assertGreaterEqual(sent["clients"], 1)
        time.sleep(1.5)
        grown = proc_status(gw.proc.pid, "VmRSS") - before
        r = gw.wait_reply(rid, 60)
        self.assertNotIn("error", r)
        rc, err, _ = gw.shutdown(timeout=60)
        self.assertEqual(rc, 0, err[-2000:])
        self.assertNothingLeft()
        # A sanitizer's own memory is not sandgate's (tests/CMakeLists.txt).
        if not os.environ.get("SG_SANITIZED"):
            self.assertLess(grown, 24 * 1024, "sandgate kept the flood: %d KiB more" % grown)

    def test_late_started_event_does_not_end_a_start(self):
        # A kept sandbox is started again and held in `starting`; meanwhile
        # the stream delivers, late, the `started` event of its first start
        # (from before the stop).  The wait must not take it for this
        # start: the set-up would then run against a toolbox that is not
        # up (the fake answers 400) and the initialize fail.
        binding, name = self.kept_sandbox()
        self.fake.admin("POST", "/__fake/config", {"stateDelayMs": {"starting": 3000}})
        gw = self.start(config=self.profiles, profile="keep")
        gw.token = "tok-" + unique()
        binding = gw.make_binding(**binding)
        gw.binding = binding
        rid = gw.request("initialize", binding)
        for _ in range(300):
            st = self.fake.admin("GET", "/__fake/state")
            if st["socketIoClients"] and [s for s in st["sandboxes"]
                                          if s["name"] == name and s["state"] == "starting"]:
                break
            time.sleep(0.05)
        else:
            self.fail("the kept sandbox was never started again with the stream listening")
        time.sleep(0.3)
        stale = self.fake.admin("POST", "/__fake/sandboxes/%s/replay" % name,
                                {"newState": "started"})
        self.assertEqual(stale["sandbox"]["state"], "started")
        r = gw.wait_reply(rid, 60)
        self.assertNotIn("error", r, gw.stderr_text()[-3000:])
        self.assertTrue(r["data"]["environment"]["resumed"])
        self.assertEqual(gw.sh_ok("echo up").strip(), "up")
        rc, err, _ = gw.shutdown(timeout=60)
        self.assertEqual(rc, 0, err[-2000:])


if __name__ == "__main__":
    unittest.main()
