"""The modal backend against the fake Modal (run-against.sh modal).

Runs only where the suite itself runs on a modal profile against the fake
(SANDGATE_TEST_FAKE_URL is the fake's admin API); every check reads the
fake's own state and request log:
  - a simple command costs two router requests (TaskExecStart, one
    TaskExecStdioRead), and nothing else, sent side by side: one round
    trip;
  - the router's JWT is replaced before it expires;
  - an identity the state directory has no record of is created without
    a lookup first; a taken name is adopted only after the owner check;
  - a persistent workspace is snapshotted at shutdown and resumed from the
    snapshot; a snapshot Modal lost is workspace_lost;
  - every snapshot carries its lifetime (ttl_seconds), as the SDK's do:
    the profile's snapshot_ttl_seconds, else the SDK's 30 days; the fake
    refuses a snapshot without one, as the service may;
  - a create whose reply is lost (Modal committed it) is adopted, not
    made twice; one whose outcome stays unknown, or that is interrupted by
    EOF, is terminated by the gateway within its budget.
Class Modal runs with Modal's v2 sandboxes, as modal-js uses them by
default (SandboxCreateV2 gives the task and the router's access, so ready
takes two calls fewer); ModalV1 runs every test again with
MODAL_SANDBOX_V2=0, on the v1 calls.
"""

import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
import unittest
import urllib.request

from sgclient import (BIN, CONFIG, PROFILE, GatewayTestCase, host_env, registry_records,
                      unique)

FAKE = os.environ.get("SANDGATE_TEST_FAKE_URL")


def on_modal():
    if not FAKE or not CONFIG or not PROFILE:
        return False
    with open(CONFIG) as f:
        prof = json.load(f).get("profiles", {}).get(PROFILE, {})
    return prof.get("backend") == "modal"


def admin(method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(FAKE + path, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        text = r.read()
    return json.loads(text) if text else None


def sandboxes(name=None):
    return [s for s in admin("GET", "/__fake/state")["sandboxes"]
            if name is None or s["name"] == name]


def running(name=None):
    return [s for s in sandboxes(name) if s["running"]]


@unittest.skipUnless(on_modal(), "runs under run-against.sh modal (the fake Modal)")
class Modal(GatewayTestCase):
    V2 = "V2"  # the suffix of the sandbox calls this class's gateways make

    def gateway(self, init=True, **kw):
        kw["env_extra"] = dict(kw.get("env_extra") or {},
                               MODAL_SANDBOX_V2="1" if self.V2 else "0")
        return super().gateway(init, **kw)

    def rpc(self, name):
        """The name of a sandbox call as this class's gateways send it."""
        return name + self.V2

    def setUp(self):
        admin("POST", "/__fake/faults/clear")
        self.state = tempfile.mkdtemp(prefix="sg-e2e-modal-")
        self.addCleanup(shutil.rmtree, self.state, True)

    def tearDown(self):
        admin("POST", "/__fake/faults/clear")
        super().tearDown()

    def ident_sandboxes(self, ident, only_running=True):
        out = []
        for s in sandboxes():
            tags = {t["tagName"]: t["tagValue"] for t in s["tags"]}
            if tags.get("sandgate.identity") == ident and (s["running"] or not only_running):
                out.append(s)
        return out

    def test_two_router_requests_per_command(self):
        gw = self.gateway(state_dir=self.state)
        gw.sh_ok("true")
        admin("POST", "/__fake/log/clear")
        for _ in range(3):
            gw.sh_ok("echo hi; echo err >&2")
        calls = [c for c in admin("GET", "/__fake/log")]
        router = [c["method"] for c in calls if c["server"] == "router"]
        control = [c["method"] for c in calls if c["server"] == "control"]
        self.assertEqual(router, ["TaskExecStart", "TaskExecStdioRead"] * 3, calls)
        self.assertEqual(control, [], "a command made control-plane calls")
        # One round trip: with every request held 300 ms, each read arrives
        # while its start is still held (it left beside it, not after).
        admin("POST", "/__fake/delay", {"ms": 300})
        self.addCleanup(admin, "POST", "/__fake/delay", {"ms": 0})
        admin("POST", "/__fake/log/clear")
        gw.sh_ok("echo hi")
        router = [c for c in admin("GET", "/__fake/log") if c["server"] == "router"]
        self.assertEqual([c["method"] for c in router], ["TaskExecStart", "TaskExecStdioRead"], router)
        start, read = router
        self.assertLess(read["t_ms"] - read["serving_ms"], start["t_ms"] - 250, router)
        # The reply still tells stdout from stderr and gives the exit code.
        res = gw.tool_ok("bash", {"command": "echo out; echo err >&2; exit 3"})
        self.assertEqual(res["structured_content"]["exit_code"], 3)
        self.assertEqual(res["structured_content"]["stdout"], "out\n")
        self.assertEqual(res["structured_content"]["stderr"], "err\n")

    def test_a_read_that_overtakes_its_start_is_sent_again(self):
        # The read leaves beside the start; one that reaches the router
        # first finds no exec (the fake says NOT_FOUND; Modal may say
        # something else).  Nothing was read, so it is sent again once the
        # start has answered, and the command's result is whole.
        gw = self.gateway(state_dir=self.state)
        gw.sh_ok("true")
        for code in (5, 2):
            admin("POST", "/__fake/log/clear")
            admin("POST", "/__fake/faults", {"method": "TaskExecStdioRead", "kind": "status",
                                             "code": code, "message": "no such exec"})
            self.assertEqual(gw.sh_ok("echo again"), "again\n")
            router = sorted((c["method"], c["status"]) for c in admin("GET", "/__fake/log")
                            if c["server"] == "router")
            self.assertEqual(router, [("TaskExecStart", 0), ("TaskExecStdioRead", 0),
                                      ("TaskExecStdioRead", code)], (code, router))

    def test_export_cut_short_is_an_error(self):
        # The fake keeps at most 64 MiB of an exec's output and drops the
        # rest, as a router that cuts a stream short would: the export
        # must fail, not hand out a shorter file as the whole one.
        gw = self.gateway(state_dir=self.state)
        gw.sh_ok("head -c %d /dev/zero > long.bin" % (65 * 1024 * 1024))
        r = gw.execute("present_artifact", {"path": "long.bin"}, timeout=300)
        if "error" not in r:
            # Snapshotted inside the environment: the cut shows when read.
            token = json.loads(r["data"]["content"][0]["text"])["execution_export"]
            offset, err = 0, None
            while err is None:
                c = gw.call("export/read", {"token": token, "offset": offset}, timeout=300)
                if "error" in c:
                    err = c["error"]
                elif c["data"]["eof"]:
                    self.fail("a cut export was handed out whole (%d bytes)" % offset)
                else:
                    offset += len(base64.b64decode(c["data"]["data"]))
        else:
            err = r["error"]
        self.assertIn("cut its output short", err)
        # One within the limit exports whole: after the path's checks (two
        # helper jobs), one exec of its own, whose stderr and exit status
        # are read apart from the bytes.
        gw.sh_ok("printf abc > short.bin")
        admin("POST", "/__fake/log/clear")
        ex = gw.view("present_artifact", {"path": "short.bin"})
        self.assertEqual(ex["size"], 3)
        router = [c["method"] for c in admin("GET", "/__fake/log") if c["server"] == "router"]
        self.assertEqual(router[-4:], ["TaskExecStart", "TaskExecStdioRead",
                                       "TaskExecStdioRead", "TaskExecWait"], router)

    def test_v2_create_gives_the_router(self):
        # SandboxCreateV2 answers with the task and the router's access:
        # initialize asks for neither, and no v1 sandbox call is made.
        if not self.V2:
            self.skipTest("v2 only")
        admin("POST", "/__fake/log/clear")
        self.gateway(state_dir=self.state)
        control = [c["method"] for c in admin("GET", "/__fake/log") if c["server"] == "control"]
        self.assertIn("SandboxCreateV2", control)
        for m in ("SandboxGetTaskId", "SandboxGetTaskIdV2", "TaskGetCommandRouterAccess",
                  "SandboxGetCommandRouterAccess", "SandboxCreate"):
            self.assertNotIn(m, control)
        self.assertFalse([m for m in control if m.startswith("Sandbox") and
                          not m.endswith("V2")], control)

    def test_router_token_refreshed_before_expiry(self):
        # Router JWTs that live 33 s: the adapter reopens the router once
        # fewer than 30 s (SG_MODAL_ROUTER_REFRESH_S) remain, 2-3 s after
        # it was opened, while the old token is still valid.
        admin("POST", "/__fake/token-ttl", {"router_s": 33})
        self.addCleanup(admin, "POST", "/__fake/token-ttl", {"router_s": 3600})
        gw = self.gateway(state_dir=self.state)
        gw.sh_ok("true")
        # The router in use was opened before now: due within 3 s.
        time.sleep(3.2)
        admin("POST", "/__fake/log/clear")
        gw.sh_ok("echo after")
        calls = admin("GET", "/__fake/log")
        access = "SandboxGetCommandRouterAccess" if self.V2 else "TaskGetCommandRouterAccess"
        self.assertEqual([c["method"] for c in calls],
                         [self.rpc("SandboxGetTaskId"), access,
                          "TaskExecStart", "TaskExecStdioRead"], calls)
        self.assertEqual([c["status"] for c in calls], [0] * 4, calls)
        # The new token serves the next command without a refresh.
        admin("POST", "/__fake/log/clear")
        gw.sh_ok("echo again")
        self.assertEqual([c["method"] for c in admin("GET", "/__fake/log")],
                         ["TaskExecStart", "TaskExecStdioRead"])

    def test_unrecorded_identity_creates_without_lookup(self):
        # A state directory with no record of the identity creates at
        # once; a taken name then leads to the lookup and the owner check
        # (adopted when it is this identity's), and a recorded identity
        # looks up first and creates nothing.
        ident = unique("fresh")
        b = {"identity": ident, "remove_workspace_on_exit": False}

        look, create = self.rpc("SandboxGetFromName"), self.rpc("SandboxCreate")

        def control():
            return [c["method"] for c in admin("GET", "/__fake/log")
                    if c["server"] == "control" and c["method"] in (look, create)]

        admin("POST", "/__fake/log/clear")
        gw = self.gateway(state_dir=self.state, binding=b)
        self.assertEqual(control(), [create])
        gw.write("mark.txt", "kept\n")
        rc, err, _ = gw.shutdown(timeout=60)
        self.assertEqual(rc, 0, err[-2000:])
        other = tempfile.mkdtemp(prefix="sg-e2e-modal-other-")
        self.addCleanup(shutil.rmtree, other, True)
        admin("POST", "/__fake/log/clear")
        gw2 = self.gateway(state_dir=other, binding=b)
        self.assertEqual(control(), [create, look])
        self.assertEqual(gw2.sh_ok("cat mark.txt"), "kept\n")
        rc, err, _ = gw2.shutdown(timeout=60)
        self.assertEqual(rc, 0, err[-2000:])
        admin("POST", "/__fake/log/clear")
        gw3 = self.gateway(state_dir=self.state,
                           binding=dict(b, remove_workspace_on_exit=True))
        self.assertEqual(control(), [look])
        self.assertEqual(gw3.sh_ok("cat mark.txt"), "kept\n")
        rc, err, _ = gw3.shutdown(timeout=60)
        self.assertEqual(rc, 0, err[-2000:])
        self.assertEqual(self.ident_sandboxes(ident), [])

    def test_persistent_snapshot_resume_and_lost(self):
        ident = unique("persist")
        b = {"identity": ident, "remove_workspace_on_exit": False}
        keep = self.profile_config(persistent=True)
        gw = self.gateway(state_dir=self.state, binding=b, config=keep)
        gw.write("kept.txt", "survives\n")
        rc, err, _ = gw.shutdown(timeout=120)
        self.assertEqual(rc, 0, err[-2000:])
        self.assertEqual(self.ident_sandboxes(ident), [], "the sandbox still runs")
        snaps = [i for i in admin("GET", "/__fake/state")["images"] if i["snapshot"]]
        self.assertTrue(snaps, "no snapshot was taken")
        # Resumed from the snapshot: the file is there.
        gw2 = self.gateway(state_dir=self.state, binding=b, config=keep)
        self.assertEqual(gw2.sh_ok("cat kept.txt"), "survives\n")
        self.assertTrue(gw2.init_reply.get("resumed", True))
        [sb] = self.ident_sandboxes(ident)
        self.assertIn(sb["imageId"], [i["id"] for i in snaps])
        rc, err, _ = gw2.shutdown(timeout=120)
        self.assertEqual(rc, 0, err[-2000:])
        # Modal loses the snapshot: workspace_lost, and nothing is created.
        image = [s for s in self.ident_sandboxes(ident, only_running=False)][0]
        latest = [i for i in admin("GET", "/__fake/state")["images"] if i["snapshot"]][-1]
        admin("POST", "/__fake/images/%s/delete" % latest["id"])
        gw3 = self.gateway(init=False, state_dir=self.state, config=keep)
        r = gw3.call("initialize", gw3.make_binding(**b), token="tok-" + unique(), timeout=120)
        self.assertReplyCode(r, ("workspace_lost", "init_failed"))
        self.assertEqual(self.ident_sandboxes(ident), [])
        self.assertTrue(image)

    def ttl_config(self, ttl):
        """A copy of the suite's config whose persistent profile sets snapshot_ttl_seconds."""
        return self.profile_config(persistent=True, snapshot_ttl_seconds=ttl)

    def profile_config(self, **fields):
        """A copy of the suite's config whose profile sets fields."""
        with open(CONFIG) as f:
            conf = json.load(f)
        conf["profiles"][PROFILE].update(fields)
        d = tempfile.mkdtemp(prefix="sg-e2e-modal-ttl-")
        self.addCleanup(shutil.rmtree, d, True)
        path = os.path.join(d, "config.json")
        with open(path, "w") as f:
            json.dump(conf, f)
        return path

    def kept_snapshot(self, **kw):
        """A persistent session kept at shutdown: the snapshot it left."""
        before = {i["id"] for i in admin("GET", "/__fake/state")["images"]}
        b = {"identity": unique("ttl"), "remove_workspace_on_exit": False}
        kw.setdefault("config", self.profile_config(persistent=True))
        gw = self.gateway(state_dir=self.state, binding=b, **kw)
        gw.write("kept.txt", "survives\n")
        rc, err, _ = gw.shutdown(timeout=120)
        self.assertEqual(rc, 0, err[-2000:])
        self.assertEqual(self.ident_sandboxes(b["identity"]), [], "the sandbox still runs")
        new = [i for i in admin("GET", "/__fake/state")["images"]
               if i["snapshot"] and i["id"] not in before]
        self.assertEqual(len(new), 1, "the workspace was not saved: %s" % err[-2000:])
        return new[0]

    def test_snapshot_carries_its_lifetime(self):
        # The fake refuses a snapshot without ttl_seconds (INVALID_ARGUMENT),
        # as the SDK's always sending one suggests Modal may: without it
        # the workspace would be left unsaved.  The SDK's default is 30 days.
        self.assertEqual(self.kept_snapshot()["ttlSeconds"], 30 * 24 * 3600)
        # The profile's choice, and -1 only when the operator asks for none.
        self.assertEqual(self.kept_snapshot(config=self.ttl_config(3600))["ttlSeconds"], 3600)
        self.assertEqual(self.kept_snapshot(config=self.ttl_config(-1))["ttlSeconds"], -1)
        # Under a second, or not a number of seconds, is refused by name.
        for bad in (0, -2, "7d"):
            r = subprocess.run([BIN, "config", "check", "--config", self.ttl_config(bad)],
                               capture_output=True, text=True, timeout=60)
            self.assertNotEqual(r.returncode, 0, (bad, r.stdout, r.stderr))
            self.assertIn("snapshot_ttl_seconds", r.stdout + r.stderr, bad)

    def test_lost_create_reply_is_adopted(self):
        # Modal makes the sandbox; its answer is lost; the retry meets
        # ALREADY_EXISTS and adopts it by its create tag.
        admin("POST", "/__fake/faults", {"method": self.rpc("SandboxCreate"),
                                         "kind": "lose-reply"})
        ident = unique("lost")
        gw = self.gateway(state_dir=self.state, binding={"identity": ident})
        self.assertEqual(gw.sh_ok("echo ok").strip(), "ok")
        self.assertEqual(len(self.ident_sandboxes(ident)), 1)
        creates = [c for c in admin("GET", "/__fake/log")
                   if c["method"] == self.rpc("SandboxCreate")]
        self.assertGreaterEqual(len(creates), 2, "the create was not retried")
        rc, err, _ = gw.shutdown(timeout=60)
        self.assertEqual(rc, 0, err[-2000:])
        self.assertEqual(self.ident_sandboxes(ident), [])

    def test_unknown_create_outcome_is_settled(self):
        # The create lands, its answer is lost, and whose it is cannot be
        # told (every tag lookup of the call and its retries fails):
        # initialize fails, and shutdown finds the sandbox by its tags and
        # terminates it within the budget.
        admin("POST", "/__fake/faults", [
            {"method": self.rpc("SandboxCreate"), "kind": "lose-reply"},
            {"method": self.rpc("SandboxTagsGet"), "kind": "status", "code": 14, "times": 4}])
        ident = unique("unknown")
        gw = self.gateway(init=False, state_dir=self.state, budget_ms=30000)
        r = gw.call("initialize", gw.make_binding(identity=ident), token="tok-" + unique(),
                    timeout=120)
        self.assertIn("error", r)
        self.assertEqual(len(self.ident_sandboxes(ident)), 1, "the create did land")
        rc, err, _ = gw.shutdown(timeout=60)
        self.assertEqual(self.ident_sandboxes(ident), [], err[-2000:])
        self.assertEqual(rc, 0, err[-2000:])
        reg = os.path.join(self.state, "registry")
        left = [f for f in os.listdir(reg) if f.endswith(".json")] if os.path.isdir(reg) else []
        self.assertEqual(left, [], "registry records remain")

    def test_eof_during_create_leaves_nothing(self):
        admin("POST", "/__fake/faults", {"method": self.rpc("SandboxCreate"),
                                         "kind": "serve-then-hang"})
        ident = unique("eof")
        gw = self.gateway(init=False, state_dir=self.state, budget_ms=20000)
        gw.request("initialize", gw.make_binding(identity=ident), token="tok-" + unique())
        deadline = time.monotonic() + 60
        while not self.ident_sandboxes(ident) and time.monotonic() < deadline:
            time.sleep(0.1)
        self.assertTrue(self.ident_sandboxes(ident), "the create never landed")
        rc, err, _ = gw.shutdown(timeout=60)
        self.assertEqual(self.ident_sandboxes(ident), [], err[-2000:])
        self.assertEqual(rc, 0, err[-2000:])

    def test_network_none_is_blocked(self):
        gw = self.gateway(state_dir=self.state,
                          env_extra=host_env({"backend": "command", "network": "none"}))
        [sb] = [s for s in running() if any(t["tagValue"] == gw.session for t in s["tags"])]
        self.assertEqual(sb["network"]["type"], 2)  # BLOCKED
        out = gw.sh_ok("cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d ' '")
        self.assertEqual(out.split(), ["lo"])


    def test_version_3_hands_a_slow_terminate_to_a_reaper(self):
        # A version-3 host kills its command backend 3 s after EOF: a
        # terminate slower than that goes on in a detached reaper (on record
        # before it starts) that ends the sandbox within the budget.
        ident = unique("v3")
        gw = self.gateway(state_dir=self.state, binding={"version": 3, "identity": ident})
        self.assertEqual(gw.init_reply["version"], 3)
        self.assertEqual(len(self.ident_sandboxes(ident)), 1)
        admin("POST", "/__fake/faults", [{"method": self.rpc("SandboxTerminate"),
                                          "kind": "delay", "delayMs": 8000}])
        rc, err, took = gw.shutdown(timeout=30)
        self.assertLess(took, 3.0, "exited inside the host's 3 s: %.2f s\n%s" % (took, err))
        self.assertEqual(rc, 0, err[-2000:])
        recs = registry_records(self.state)
        self.assertEqual([(r["status"], "reaper" in r, "removing" in r) for r in recs],
                         [("cleanup-pending", True, True)], "the reaper's job is on record")
        self.assertEqual(len(self.ident_sandboxes(ident)), 1, "the terminate is on its way")
        deadline = time.monotonic() + 30
        while (self.ident_sandboxes(ident) or registry_records(self.state)) and \
                time.monotonic() < deadline:
            time.sleep(0.2)
        self.assertEqual(self.ident_sandboxes(ident), [], "a sandbox still runs at the provider")
        self.assertEqual(registry_records(self.state), [], "registry records left")


class ModalV1(Modal):
    """Every test again on Modal's v1 sandbox calls (MODAL_SANDBOX_V2=0)."""
    V2 = ""

    def test_snapshot_carries_its_lifetime(self):
        self.skipTest("the snapshot is the router's call, the same for v1 and v2 sandboxes")

    def test_ready_in_two_calls_fewer_on_v2(self):
        # v1 asks for the task and the router's access after the create;
        # v2's create answers with both (Modal.test_v2_create_gives_the_router).
        admin("POST", "/__fake/log/clear")
        self.gateway(state_dir=self.state)
        control = [c["method"] for c in admin("GET", "/__fake/log") if c["server"] == "control"]
        self.assertIn("SandboxCreate", control)
        self.assertIn("SandboxGetTaskId", control)
        self.assertIn("TaskGetCommandRouterAccess", control)
        self.assertFalse([m for m in control if m.endswith("V2")], control)


if __name__ == "__main__":
    unittest.main()
