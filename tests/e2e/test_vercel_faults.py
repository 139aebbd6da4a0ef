"""The vercel backend against its fake, with faults (issue 12).

Every assertion about what exists is made on the fake Vercel's own state
(/__fake/state) or its request log (/__fake/requests), never on what
sandgate says:

  - one provider request per read_file, write_file, list_files, bash and
    process/read;
  - persistence by identity: write, exit, resume with
    require_existing_workspace, read back; an expired snapshot is then
    workspace_lost, never a fresh sandbox;
  - a session that stops mid-session (its timeout) is resumed and the call
    repeated once, files intact;
  - a command stream cut mid-line is a provider_error;
  - a create answered 429 (Retry-After) or whose reply is lost (then 409)
    leaves exactly one sandbox;
  - initialize of an identity the state directory never knew takes two
    round trips (the create; sg-helper's upload beside the set-up); a
    known one looks up first; a sandbox of that name is adopted only with
    our tags; the set-up waits for a slow upload, and a failed upload stops
    it and removes the sandbox;
  - 422 sandbox_stopping is waited out;
  - a non-persistent sandbox is deleted at shutdown.

These tests start their own fake and config, whatever SANDGATE_TEST_CONFIG
says, and run only in the direct e2e run and on the vercel profile (not
again under every other backend's suite).  Needs node and bwrap.
"""

import json
import os
import shutil
import subprocess
import tempfile
import time
import unittest
import urllib.request

from fakeserver import VercelFake as Fake, have
from sgclient import BIN, PROFILE, GatewayTestCase, registry_records, unique


@unittest.skipUnless(BIN and have("node") and have("bwrap") and have("nsenter"),
                     "needs SANDGATE_BIN, node, bwrap and nsenter")
@unittest.skipUnless(PROFILE in (None, "", "vercel"),
                     "runs in the direct e2e run and on the vercel profile only")
class VercelFaults(GatewayTestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.fake = Fake()
        cls.dir = tempfile.mkdtemp(prefix="sg-e2e-vfault-")
        cls.config = os.path.join(cls.dir, "config.json")
        with open(cls.config, "w") as f:
            json.dump({"default": "v", "profiles": {
                "v": {"backend": "vercel", "team": "team_fake", "project": "prj_fake",
                      "api_url": cls.fake.base},
                "vp": {"backend": "vercel", "team": "team_fake", "project": "prj_fake",
                       "api_url": cls.fake.base, "persistent": True}}}, f)
        cls.env = {"VERCEL_TOKEN": "test-token"}

    @classmethod
    def tearDownClass(cls):
        cls.fake.stop()
        shutil.rmtree(cls.dir, ignore_errors=True)
        super().tearDownClass()

    def setUp(self):
        self.fake.admin("POST", "/__fake/reset")

    def start(self, profile="v", **binding):
        return self.gateway(config=self.config, profile=profile, env_extra=self.env,
                            binding=binding)

    def sandboxes(self):
        return self.fake.state()["sandboxes"]

    def routes(self, since):
        time.sleep(0.3)
        return [r["route"] for r in self.fake.requests(since)]

    def test_one_request_per_call(self):
        gw = self.start()
        gw.tool_ok("write_file", {"path": "a.txt", "content": "one\n"})
        pid = gw.start("echo hi; sleep 0.2")["id"]
        gw.wait_ended(pid)
        calls = [("read_file", {"path": "a.txt"}), ("write_file", {"path": "b.txt", "content": "x"}),
                 ("list_files", {"path": "."}), ("bash", {"command": "true"})]
        for tool, args in calls:
            seq = self.fake.last_seq()
            gw.tool_ok(tool, args)
            self.assertEqual(self.routes(seq), ["runCommand"], tool)
        seq = self.fake.last_seq()
        gw.read(pid)
        self.assertEqual(self.routes(seq), ["runCommand"], "process/read")

    def test_command_longer_than_one_request_wait(self):
        # One command request waits 50 s in the sandbox (SG_VERCEL_WAIT_MS);
        # a command given longer must run to its end in one call, not be
        # killed at the request's wait and called timed out.
        gw = self.start()
        v = gw.sh("sleep 52; echo finished", timeout_seconds=90)
        self.assertIs(v["timed_out"], False, v)
        self.assertEqual(v["exit_code"], 0, v)
        self.assertIn("finished", v["output"])

    def test_non_persistent_deleted_at_shutdown(self):
        gw = self.start()
        gw.sh_ok("echo x > f")
        self.assertEqual(len(self.sandboxes()), 1)
        rc, err, _ = gw.shutdown(timeout=60)
        self.assertEqual(rc, 0, err[-2000:])
        st = self.fake.state()
        self.assertEqual(st["sandboxes"], [])
        self.assertEqual(st["runningSessions"], [])

    def test_version_3_hands_a_slow_delete_to_a_reaper(self):
        # A version-3 host kills its command backend 3 s after EOF: the
        # delete, slower than that, goes on in a detached reaper (on record
        # before it starts) that removes the sandbox within the budget.
        gw = self.start(version=3)
        self.assertEqual(gw.init_reply["version"], 3)
        self.assertEqual(len(self.sandboxes()), 1)
        self.fake.fault({"method": "DELETE", "path": "^/v2/sandboxes/[^/]+$",
                         "action": "delay", "delayMs": 8000})
        rc, err, took = gw.shutdown(timeout=30)
        self.assertLess(took, 3.0, "exited inside the host's 3 s: %.2f s\n%s" % (took, err))
        self.assertEqual(rc, 0, err[-2000:])
        recs = registry_records(gw.state_dir)
        self.assertEqual([(r["status"], "reaper" in r, "removing" in r) for r in recs],
                         [("cleanup-pending", True, True)], "the reaper's job is on record")
        self.assertEqual(len(self.sandboxes()), 1, "the delete is still on its way")
        deadline = time.monotonic() + 30
        while (self.sandboxes() or registry_records(gw.state_dir)) and \
                time.monotonic() < deadline:
            time.sleep(0.2)
        self.assertEqual(self.sandboxes(), [], "sandboxes left at the provider")
        self.assertEqual(registry_records(gw.state_dir), [], "registry records left")

    def test_persistence_by_identity(self):
        ident = unique("vp")
        gw = self.start("vp", identity=ident, remove_workspace_on_exit=False)
        gw.tool_ok("write_file", {"path": "keep.txt", "content": "kept\n"})
        rc, err, _ = gw.shutdown(timeout=60)
        self.assertEqual(rc, 0, err[-2000:])
        st = self.fake.state()
        self.assertEqual(st["runningSessions"], [], "a kept sandbox still runs")
        self.assertEqual(len(st["sandboxes"]), 1)
        gw2 = self.start("vp", identity=ident, require_existing_workspace=True,
                         remove_workspace_on_exit=False)
        self.assertEqual(gw2.sh_ok("cat keep.txt"), "kept\n")
        rc, err, _ = gw2.shutdown(timeout=60)
        self.assertEqual(rc, 0, err[-2000:])
        # The snapshot expires: the workspace is lost, never silently fresh.
        snap = self.sandboxes()[0]["currentSnapshotId"]
        self.fake.admin("POST", "/__fake/snapshots/%s/expire" % snap)
        gw3 = self.gateway(init=False, config=self.config, profile="vp", env_extra=self.env)
        r = gw3.call("initialize", gw3.make_binding(identity=ident,
                                                    require_existing_workspace=True),
                     token="tok-" + unique(), timeout=120)
        self.assertReplyCode(r, "workspace_lost")
        self.assertEqual(self.fake.state()["runningSessions"], [])

    def test_stopped_mid_session_resumes_once(self):
        gw = self.start("vp")
        gw.tool_ok("write_file", {"path": "f.txt", "content": "before\n"})
        sid = self.fake.state()["runningSessions"][0]
        seq = self.fake.last_seq()
        self.fake.admin("POST", "/__fake/sessions/%s/expire" % sid)
        self.assertEqual(gw.sh_ok("cat f.txt").strip(), "before")
        # Every call that met the stop (this one, and the gateway's own
        # that ran beside it) got 410, or 422 when it came while the stop
        # was still under way, and was repeated after one resume. Which of
        # the two it met is timing: under load a call of the gateway's own
        # can meet the stop first and resume before this one is sent.
        routes = [(r["route"], r["status"]) for r in self.fake.requests(seq)]
        met = {("runCommand", 410), ("runCommand", 422)} & set(routes)
        self.assertTrue(met, "no call met the stop: %r" % routes)
        # One resume; a call that came while the stop was still under way
        # (422 sandbox_stopping, timing) may have resumed on its own GET
        # before the other call saw the 410.
        others = [r for r in routes if r[0] != "runCommand"]
        self.assertEqual(set(others), {("getSandbox", 200)}, routes)
        self.assertLessEqual(len(others), 1 + (("runCommand", 422) in routes), routes)
        self.assertGreaterEqual(routes.count(("runCommand", 200)),
                                routes.count(("runCommand", 410))
                                + routes.count(("runCommand", 422)), routes)
        self.assertNotEqual(self.fake.state()["runningSessions"], [sid])

    def test_cut_stream_is_provider_error(self):
        gw = self.start()
        # A new sandbox's set-up and the process watcher's first command
        # leave beside the first call: let them pass, so the fault meets
        # this call's own command.
        gw.sh_ok("true")
        self.fake.fault({"method": "POST", "path": "/cmd$", "action": "cut", "bytes": 60})
        r = gw.execute("bash", {"command": "echo hello"})
        self.assertReplyCode(r, "provider_error")
        self.assertIn("cut mid-line", r["error"])
        # The next call is whole again.
        self.assertEqual(gw.sh_ok("echo again").strip(), "again")

    def test_create_rate_limited_then_reply_lost(self):
        self.fake.fault({"method": "POST", "path": "^/v3/sandboxes$", "status": 429,
                         "retryAfter": 1},
                        {"method": "POST", "path": "^/v3/sandboxes$", "action": "drop",
                         "after": True})
        gw = self.start()
        gw.sh_ok("true")
        self.assertEqual(len(self.sandboxes()), 1, "exactly one sandbox")
        creates = [r for r in self.fake.requests() if r["route"] == "createSandbox"]
        self.assertEqual([r["status"] for r in creates], [429, 0, 409])

    def test_stopping_is_waited_out(self):
        gw = self.start("vp")
        gw.tool_ok("write_file", {"path": "g.txt", "content": "g\n"})
        self.fake.admin("POST", "/__fake/config", {"stopMs": 1500})
        sid = self.fake.state()["runningSessions"][0]
        # A stop in progress: the next command meets 422 sandbox_stopping.
        req = urllib.request.Request(
            self.fake.base + "/v2/sandboxes/sessions/%s/stop?teamId=team_fake" % sid,
            data=b"", method="POST", headers={"Authorization": "Bearer test-token"})
        import threading
        t = threading.Thread(target=lambda: urllib.request.urlopen(req, timeout=30).read())
        t.start()
        try:
            # The command must meet the stop under way, however late a loaded
            # machine serves the stop: wait until the fake says so.
            deadline = time.monotonic() + 20
            while self.session_status(sid) == "running" and time.monotonic() < deadline:
                time.sleep(0.02)
            self.assertIn(self.session_status(sid), ("stopping", "snapshotting"))
            self.assertEqual(gw.sh_ok("cat g.txt").strip(), "g")
        finally:
            t.join()
            self.fake.admin("POST", "/__fake/config", {"stopMs": 0})

    def session_status(self, sid):
        for sb in self.fake.state()["sandboxes"]:
            for ss in sb["sessions"]:
                if ss["id"] == sid:
                    return ss["status"]
        return None

    def api(self, method, path, body=None):
        """One call on the fake's Vercel API, as a client of our own."""
        sep = "&" if "?" in path else "?"
        req = urllib.request.Request(
            self.fake.base + path + sep + "teamId=team_fake",
            data=json.dumps(body).encode() if body is not None else b"", method=method,
            headers={"Authorization": "Bearer test-token", "Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as r:
            return json.loads(r.read() or b"null")

    def init_fails(self, profile="v", **binding):
        gw = self.gateway(init=False, config=self.config, profile=profile, env_extra=self.env)
        return gw.call("initialize", gw.make_binding(**binding), token="tok-" + unique(),
                       timeout=120)

    def test_fresh_identity_two_round_trips(self):
        # A state directory that never knew the identity: no lookup, the
        # create, then sg-helper's upload beside the set-up command, which
        # initialize no longer waits for (a new scratch sandbox).
        gw = self.start()
        self.assertEqual(gw.sh_ok("echo ready").strip(), "ready")
        reqs = [(r["route"], r["status"]) for r in self.fake.requests()]
        self.assertEqual(reqs[0], ("createSandbox", 200), reqs)
        self.assertIn(("writeFiles", 200), reqs[1:3], reqs)
        self.assertIn(("runCommand", 200), reqs[1:3], reqs)
        self.assertFalse(gw.init_reply["environment"]["resumed"])
        self.assertEqual(gw.facts["helper_install"]["requests"], 1)
        self.assertEqual(gw.sh_ok("echo ready").strip(), "ready")

    def test_known_identity_looks_up_unknown_adopts_after_conflict(self):
        ident = unique("vk")
        state = tempfile.mkdtemp(prefix="sg-e2e-vstate-")
        self.addCleanup(shutil.rmtree, state, True)
        keep = {"identity": ident, "remove_workspace_on_exit": False}
        gw = self.gateway(config=self.config, profile="vp", env_extra=self.env, state_dir=state,
                          binding=keep)
        gw.tool_ok("write_file", {"path": "k.txt", "content": "kept\n"})
        rc, err, _ = gw.shutdown(timeout=60)
        self.assertEqual(rc, 0, err[-2000:])
        # The same state directory knows the identity: a lookup (it
        # resumes the sandbox) and no create.
        seq = self.fake.last_seq()
        gw2 = self.gateway(config=self.config, profile="vp", env_extra=self.env,
                           state_dir=state, binding=keep)
        routes = self.routes(seq)
        self.assertEqual(routes[0], "getSandbox", routes)
        self.assertNotIn("createSandbox", routes)
        rc, err, _ = gw2.shutdown(timeout=60)
        self.assertEqual(rc, 0, err[-2000:])
        # Another state directory never knew it: the create meets 409 and
        # the sandbox is adopted by its tags, its files intact.
        seq = self.fake.last_seq()
        gw3 = self.start("vp", **keep)
        reqs = [(r["route"], r["status"]) for r in self.fake.requests(seq)]
        self.assertEqual(reqs[:2], [("createSandbox", 409), ("getSandbox", 200)], reqs)
        self.assertTrue(gw3.init_reply["environment"]["resumed"])
        self.assertIn("kept", gw3.sh_ok("cat k.txt"))
        self.assertEqual(len(self.sandboxes()), 1)

    def test_foreign_sandbox_of_that_name_is_never_adopted(self):
        ident = unique("vf")
        gw = self.start("vp", identity=ident, remove_workspace_on_exit=False)
        name = gw.init_reply["environment"]["id"]
        rc, err, _ = gw.shutdown(timeout=60)
        self.assertEqual(rc, 0, err[-2000:])
        self.api("PATCH", "/v2/sandboxes/%s?projectId=prj_fake" % name,
                 {"tags": {"managed-by": "someone-else"}})
        seq = self.fake.last_seq()
        r = self.init_fails("vp", identity=ident, remove_workspace_on_exit=False)
        self.assertReplyCode(r, "provider_error")
        self.assertIn("not sandgate's", r["error"])
        routes = self.routes(seq)
        self.assertEqual(routes[:2], ["createSandbox", "getSandbox"], routes)
        for never in ("deleteSandbox", "updateSandbox", "writeFiles", "runCommand"):
            self.assertNotIn(never, routes)
        sbs = self.sandboxes()
        self.assertEqual([(s["name"], s["tags"]) for s in sbs], [(name, {"managed-by": "someone-else"})])

    def test_setup_waits_for_a_slow_upload(self):
        # The set-up command runs while sg-helper is still on its way: it
        # waits for the marker that follows the program in the archive.
        self.fake.fault({"method": "POST", "path": "/fs/write$", "action": "delay",
                         "delayMs": 1500})
        gw = self.start()
        self.assertEqual(gw.sh_ok("echo ok").strip(), "ok")

    def test_failed_upload_stops_the_setup_and_cleans_up(self):
        # A new scratch sandbox answers initialize after its create; the
        # upload fails beside the first command, which must never run
        # (sg-helper never arrived) and fails with the upload's error.
        self.fake.fault({"method": "POST", "path": "/fs/write$", "status": 403})
        gw = self.start()
        t0 = time.monotonic()
        r = gw.execute("bash", {"command": "echo ran > /tmp/ran"})
        took = time.monotonic() - t0
        self.assertIn("writing a file in the sandbox", r.get("error", ""), r)
        # The set-up was stopped, not left to wait the upload out (30 s).
        self.assertLess(took, 20, "the first command took %.1f s" % took)
        r = gw.execute("bash", {"command": "echo ran > /tmp/ran"})
        self.assertIn("writing a file in the sandbox", r.get("error", ""), r)
        rc, err, _ = gw.shutdown(timeout=60)
        self.assertEqual(rc, 0, err[-2000:])
        time.sleep(0.3)
        st = self.fake.state()
        self.assertEqual(st["sandboxes"], [])
        self.assertEqual(st["runningSessions"], [])
        self.assertIn("deleteSandbox", [r["route"] for r in self.fake.requests()])

    def test_credentials_refused_clearly(self):
        # serve refuses the profile at startup, naming the variables.
        r = subprocess.run([BIN, "config", "check", "--config", self.config, "--profile", "v"],
                           env=dict(os.environ, VERCEL_TOKEN="", VERCEL_OIDC_TOKEN=""),
                           capture_output=True, text=True, timeout=60)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("VERCEL_TOKEN", r.stdout + r.stderr)
        self.assertIn("VERCEL_OIDC_TOKEN", r.stdout + r.stderr)
        self.assertEqual(self.sandboxes(), [])


if __name__ == "__main__":
    unittest.main()
