"""The vercel backend against its fake, with faults (issue 12).

Every assertion about what exists is made on the fake Vercel's own state
(/__fake/state) or its request log (/__fake/requests), never on what
sandgate says:

  - one provider request per read_file, write_file, stat_path, run_command
    and process/read;
  - persistence by identity: write, exit, resume with
    require_existing_workspace, read back; an expired snapshot is then
    workspace_lost, never a fresh sandbox;
  - a session that stops mid-session (its timeout) is resumed and the call
    repeated once, files intact;
  - a command stream cut mid-line is a provider_error;
  - a create answered 429 (Retry-After) or whose reply is lost (then 409)
    leaves exactly one sandbox;
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

from fakeserver import FakeServer
from sgclient import BIN, PROFILE, GatewayTestCase, unique



def have(prog):
    return shutil.which(prog) is not None


class Fake(FakeServer):
    """The fake Vercel, with its files in a directory of its own."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="sg-e2e-vfake-")
        super().__init__("vercel", "--exec-mode", "bwrap", "--state-dir", self.dir)

    def state(self):
        return self.admin("GET", "/__fake/state")

    def requests(self, since=0):
        return self.admin("GET", "/__fake/requests?since=%d" % since)["requests"]

    def last_seq(self):
        # An entry is logged as its answer ends, a moment after the client
        # has read it: let the log catch up first.
        time.sleep(0.3)
        reqs = self.requests()
        return reqs[-1]["seq"] if reqs else 0

    def stop(self):
        super().stop()
        shutil.rmtree(self.dir, ignore_errors=True)


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
        pid = gw.start(command="echo hi; sleep 0.2")["id"]
        gw.wait_ended(pid)
        calls = [("read_file", {"path": "a.txt"}), ("write_file", {"path": "b.txt", "content": "x"}),
                 ("stat_path", {"path": "a.txt"}), ("run_command", {"command": "true"})]
        for tool, args in calls:
            seq = self.fake.last_seq()
            gw.tool_ok(tool, args)
            self.assertEqual(self.routes(seq), ["runCommand"], tool)
        seq = self.fake.last_seq()
        gw.read(pid)
        self.assertEqual(self.routes(seq), ["runCommand"], "process/read")

    def test_non_persistent_deleted_at_shutdown(self):
        gw = self.start()
        gw.sh_ok("echo x > f")
        self.assertEqual(len(self.sandboxes()), 1)
        rc, err, _ = gw.shutdown(timeout=60)
        self.assertEqual(rc, 0, err[-2000:])
        st = self.fake.state()
        self.assertEqual(st["sandboxes"], [])
        self.assertEqual(st["runningSessions"], [])

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
        self.assertEqual(gw2.tool_ok("read_file", {"path": "keep.txt"})["content"].strip()
                         .splitlines()[-1].split("\t")[-1].strip(), "kept")
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
        # that ran beside it) got 410 and was repeated after one resume.
        routes = [(r["route"], r["status"]) for r in self.fake.requests(seq)]
        self.assertIn(("runCommand", 410), routes)
        # One resume; a call that came while the stop was still under way
        # (422 sandbox_stopping, timing) may have resumed on its own GET
        # before the other call saw the 410.
        others = [r for r in routes if r[0] != "runCommand"]
        self.assertEqual(set(others), {("getSandbox", 200)}, routes)
        self.assertLessEqual(len(others), 1 + (("runCommand", 422) in routes), routes)
        self.assertGreaterEqual(routes.count(("runCommand", 200)),
                                routes.count(("runCommand", 410)), routes)
        self.assertNotEqual(self.fake.state()["runningSessions"], [sid])

    def test_cut_stream_is_provider_error(self):
        gw = self.start()
        self.fake.fault({"method": "POST", "path": "/cmd$", "action": "cut", "bytes": 60})
        r = gw.execute("run_command", {"command": "echo hello"})
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
            import time
            time.sleep(0.3)
            self.assertEqual(gw.sh_ok("cat g.txt").strip(), "g")
        finally:
            t.join()
            self.fake.admin("POST", "/__fake/config", {"stopMs": 0})

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
