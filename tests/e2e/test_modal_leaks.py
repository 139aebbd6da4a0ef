"""Nothing leaks at the fake Modal, and nothing fails open (run-against.sh modal).

Runs only where test_modal.py runs (the suite on a modal profile against
the fake, SANDGATE_TEST_FAKE_URL its admin API); every check reads the
fake's own state, its request log or the state registry:
  - a create that Modal carried out but whose reply is hostile (a message
    prefix announcing 4 GiB, a message that is no protobuf) is looked up
    and adopted or settled, never forgotten;
  - a failure after the create (the router unreachable, the first
    TaskExecStart refused or hanging until EOF) terminates the sandbox or
    leaves it on record for the shutdown, which removes it;
  - a terminate that keeps failing after a failed initialize is settled
    by the shutdown within its budget;
  - a terminate whose replies are all lost at shutdown is checked with
    Modal before anything is reported as remaining;
  - a snapshot that fails at shutdown keeps the running sandbox and its
    files for the next session, and says so;
  - Modal's refusals (RESOURCE_EXHAUSTED) and outages (UNAVAILABLE) are
    retried a bounded number of times, and a shutdown whose terminate
    hangs ends within its budget;
  - hostile router replies fail the command, not the gateway;
  - a gateway SIGKILLed mid-create leaves a record `envs gc` settles;
  - a running sandbox made under other limits (network, cpus, memory)
    is not adopted: Modal cannot change them;
  - cpus and memory_mb are sent as Modal's limits, not only as requests.
Class ModalLeaks runs on v2 sandboxes, ModalLeaksV1 again on the v1 calls
(MODAL_SANDBOX_V2=0), as test_modal.py does.
"""

import calendar
import glob
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
import unittest

import test_modal as tm
from sgclient import (BIN, CONFIG, PROFILE, GatewayTestCase, host_env, registry_records,
                      unique)

admin = tm.admin


@unittest.skipUnless(tm.on_modal(), "runs under run-against.sh modal (the fake Modal)")
class ModalLeaks(GatewayTestCase):
    V2 = "V2"

    # The helpers of test_modal.Modal that need no super().
    rpc = tm.Modal.rpc
    setUp = tm.Modal.setUp
    ident_sandboxes = tm.Modal.ident_sandboxes

    def gateway(self, init=True, **kw):
        kw["env_extra"] = dict(kw.get("env_extra") or {},
                               MODAL_SANDBOX_V2="1" if self.V2 else "0")
        return super().gateway(init, **kw)

    def tearDown(self):
        admin("POST", "/__fake/faults/clear")
        super().tearDown()
        # What a test leaves on record on purpose (a terminate that hung
        # past the budget) is settled here, so that the suites after this
        # one, sharing the fake, find no sandbox of ours still running.
        if self.records():
            g = self.sandgate("envs", "gc")
            self.assertEqual(g.returncode, 0, g.stdout + g.stderr)

    def faults(self, *fs):
        admin("POST", "/__fake/faults", list(fs))

    def init_call(self, gw, timeout=120, **over):
        """initialize's reply; gw is usable as after gw.initialize when it succeeded."""
        binding, token = gw.make_binding(**over), "tok-" + unique()
        r = gw.call("initialize", binding, token=token, timeout=timeout)
        if "error" not in r:
            gw.token, gw.binding, gw.init_reply = token, binding, r["data"]
        return r

    def records(self):
        return registry_records(self.state)

    def wait_faults_taken(self, timeout=60):
        """Until every queued fault has met its call (a hanging call is logged only at its end)."""
        deadline = time.monotonic() + timeout
        while admin("GET", "/__fake/state")["faults"] and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertEqual(admin("GET", "/__fake/state")["faults"], [], "the faults were never met")

    def calls(self, method):
        return [c for c in admin("GET", "/__fake/log") if c["method"] == method]

    # ---- hostile create replies ------------------------------------------

    def check_hostile_create(self, kind):
        self.faults({"method": self.rpc("SandboxCreate"), "kind": kind})
        ident = unique("garble")
        gw = self.gateway(init=False, state_dir=self.state, budget_ms=20000)
        r = self.init_call(gw, identity=ident)
        self.assertEqual(len(self.ident_sandboxes(ident)), 1, "the create did land")
        if "error" in r:
            # Not adopted: then it must be on record for the shutdown.
            self.assertTrue(self.records(), "a landed sandbox was forgotten: %s" % r["error"])
        else:
            # Adopted: the create tag proved it this session's.
            self.assertEqual(gw.sh_ok("echo ok").strip(), "ok")
        rc, err, took = gw.shutdown(timeout=60)
        self.assertEqual(self.ident_sandboxes(ident), [], err[-2000:])
        self.assertEqual(rc, 0, err[-2000:])
        self.assertEqual(self.records(), [])

    def test_create_reply_with_a_huge_message_is_settled(self):
        self.check_hostile_create("serve-then-huge")

    def test_create_reply_that_is_no_protobuf_is_settled(self):
        self.check_hostile_create("serve-then-garbage")

    def test_unreadable_owner_tags_after_a_lost_create_are_settled(self):
        # The create lands and its reply is lost; the lookup finds the name
        # but every reply about its tags is no protobuf.  That proves
        # nothing about the owner: the sandbox stays on record and the
        # shutdown removes it.
        self.faults({"method": self.rpc("SandboxCreate"), "kind": "lose-reply"},
                    {"method": self.rpc("SandboxTagsGet"), "kind": "serve-then-garbage"})
        ident = unique("tags")
        gw = self.gateway(init=False, state_dir=self.state, budget_ms=20000)
        r = self.init_call(gw, identity=ident)
        self.assertIn("error", r)
        self.assertEqual(len(self.ident_sandboxes(ident)), 1, "the create did land")
        self.assertTrue(self.records(), "a landed sandbox was forgotten: %s" % r["error"])
        rc, err, _ = gw.shutdown(timeout=60)
        self.assertEqual(self.ident_sandboxes(ident), [], err[-2000:])
        self.assertEqual(rc, 0, err[-2000:])
        self.assertEqual(self.records(), [])

    # ---- failures after the create ------------------------------------------

    def test_router_refused_after_create_terminates(self):
        # The sandbox exists, but its first exec is refused: initialize
        # fails and the sandbox is terminated before the reply.
        self.faults({"method": "TaskExecStart", "kind": "status", "code": 9})
        ident = unique("norouter")
        gw = self.gateway(init=False, state_dir=self.state)
        r = self.init_call(gw, identity=ident)
        self.assertIn("error", r)
        self.assertIn("FAILED_PRECONDITION", r["error"])
        self.assertEqual(len(self.ident_sandboxes(ident, only_running=False)), 1)
        self.assertEqual(self.ident_sandboxes(ident), [])
        self.assertEqual(self.records(), [])
        rc, err, _ = gw.shutdown(timeout=60)
        self.assertEqual(rc, 0, err[-2000:])

    def test_router_hanging_then_eof_leaves_nothing(self):
        self.faults({"method": "TaskExecStart", "kind": "hang"})
        ident = unique("hang")
        gw = self.gateway(init=False, state_dir=self.state, budget_ms=15000)
        gw.request("initialize", gw.make_binding(identity=ident), token="tok-" + unique())
        self.wait_faults_taken()
        self.assertEqual(len(self.ident_sandboxes(ident)), 1)
        rc, err, took = gw.shutdown(timeout=60)
        self.assertEqual(self.ident_sandboxes(ident), [], err[-2000:])
        self.assertEqual(rc, 0, err[-2000:])
        self.assertLess(took, 15 + 5)
        self.assertEqual(self.records(), [])

    def test_terminate_failing_after_failed_init_is_settled(self):
        self.faults({"method": "TaskExecStart", "kind": "status", "code": 9},
                    {"method": self.rpc("SandboxTerminate"), "kind": "status", "code": 14,
                     "times": 4})
        ident = unique("noterm")
        gw = self.gateway(init=False, state_dir=self.state, budget_ms=20000)
        r = self.init_call(gw, identity=ident)
        self.assertIn("error", r)
        self.assertEqual(len(self.ident_sandboxes(ident)), 1)
        self.assertTrue(self.records(), "a sandbox that may remain is not on record")
        rc, err, _ = gw.shutdown(timeout=60)
        self.assertEqual(self.ident_sandboxes(ident), [], err[-2000:])
        self.assertEqual(rc, 0, err[-2000:])
        self.assertEqual(self.records(), [])

    def test_cancel_or_eof_at_each_step_of_initialize(self):
        # Each call of a fresh initialize hangs in turn; the initialize is
        # cancelled (or stdin closes) while it waits.  Whatever was made by
        # then is removed by the shutdown, within its budget, with exit 0.
        # A create that hangs unanswered may still land: the shutdown looks
        # for it for its whole budget, then says it may remain (exit 69)
        # and leaves the record for `envs gc`; one that landed is removed.
        create = self.rpc("SandboxCreate")
        steps = [("AuthTokenGet", "hang"), ("AppGetOrCreate", "hang"),
                 ("ImageGetOrCreate", "hang"), (create, "hang"), (create, "serve-then-hang"),
                 ("TaskExecStart", "hang"), ("TaskExecStdinWrite", "hang"),
                 ("TaskExecStdioRead", "hang")]
        if not self.V2:
            steps[5:5] = [(self.rpc("SandboxGetTaskId"), "hang"),
                          ("TaskGetCommandRouterAccess", "hang")]
        for how in ("cancel", "eof"):
            for method, kind in steps:
                with self.subTest(how=how, step=method, kind=kind):
                    admin("POST", "/__fake/faults/clear")
                    shutil.rmtree(os.path.join(self.state, "registry"), True)
                    ident = unique("step")
                    unknown = method == create and kind == "hang"
                    gw = self.gateway(init=False, state_dir=self.state,
                                      budget_ms=4000 if unknown else 15000)
                    token = "tok-" + unique()
                    self.faults({"method": method, "kind": kind})
                    rid = gw.request("initialize", gw.make_binding(identity=ident),
                                     token=token)
                    self.wait_faults_taken()
                    if how == "cancel":
                        gw.cancel(rid, token=token)
                        self.assertReplyCode(gw.wait_reply(rid, 30), "cancelled")
                    rc, err, took = gw.shutdown(timeout=60)
                    self.assertEqual(self.ident_sandboxes(ident), [], err[-2000:])
                    self.assertLess(took, 15 + 5)
                    if unknown:
                        self.assertEqual(rc, 69, err[-2000:])
                        self.assertIn("may remain", err)
                        [rec] = self.records()
                        self.assertEqual(rec["status"], "cleanup-pending", rec)
                        continue
                    self.assertEqual(rc, 0, err[-2000:])
                    self.assertEqual(self.records(), [])

    def sandgate(self, *args):
        env = dict(os.environ, MODAL_SANDBOX_V2="1" if self.V2 else "0")
        return subprocess.run([BIN, *args, "--state-dir", self.state, "--config", CONFIG],
                              capture_output=True, text=True, timeout=120, env=env)

    def test_sigkill_during_create_then_gc(self):
        # The gateway dies while Modal is creating (the create landed, no
        # reply yet): the record of the intent is all that is left, and
        # `envs gc` finds the sandbox by its tags and terminates it.
        ident = unique("killed")
        self.faults({"method": self.rpc("SandboxCreate"), "kind": "serve-then-hang"})
        gw = self.gateway(init=False, state_dir=self.state)
        gw.request("initialize", gw.make_binding(identity=ident), token="tok-" + unique())
        self.wait_faults_taken()
        deadline = time.monotonic() + 30
        while not self.ident_sandboxes(ident) and time.monotonic() < deadline:
            time.sleep(0.05)
        gw.proc.kill()
        gw.proc.wait(10)
        self.assertEqual(len(self.ident_sandboxes(ident)), 1)
        self.assertEqual(len(self.records()), 1)
        g = self.sandgate("envs", "gc")
        self.assertEqual(g.returncode, 0, g.stdout + g.stderr)
        self.assertEqual(self.ident_sandboxes(ident), [], g.stdout + g.stderr)
        self.assertEqual(self.records(), [])

    # ---- shutdown ---------------------------------------------------------------

    def test_terminate_replies_lost_at_shutdown_are_checked(self):
        # Every reply of the terminate is lost, but Modal carried it out:
        # asked, Modal says the sandbox has ended, so nothing remains and
        # nothing is reported as remaining.
        ident = unique("lostterm")
        gw = self.gateway(state_dir=self.state, binding={"identity": ident})
        self.faults({"method": self.rpc("SandboxTerminate"), "kind": "lose-reply", "times": 4})
        rc, err, _ = gw.shutdown(timeout=60)
        self.assertEqual(self.ident_sandboxes(ident), [])
        self.assertEqual(rc, 0, err[-2000:])
        self.assertNotIn("may remain", err)
        self.assertEqual(self.records(), [])

    def test_terminate_hanging_at_shutdown_keeps_the_budget(self):
        ident = unique("slowterm")
        gw = self.gateway(state_dir=self.state, budget_ms=4000, binding={"identity": ident})
        self.faults({"method": self.rpc("SandboxTerminate"), "kind": "hang", "times": 10})
        rc, err, took = gw.shutdown(timeout=60)
        self.assertLess(took, 4 + 3, err[-2000:])
        self.assertEqual(rc, 69, err[-2000:])
        self.assertIn("may remain", err)
        [rec] = self.records()
        self.assertEqual(rec.get("status"), "cleanup-pending", rec)
        admin("POST", "/__fake/faults/clear")
        g = self.sandgate("envs", "gc")
        self.assertEqual(g.returncode, 0, g.stdout + g.stderr)
        self.assertEqual(self.ident_sandboxes(ident), [], g.stdout + g.stderr)

    def test_snapshot_failing_at_shutdown_keeps_the_sandbox(self):
        ident, b, gw = self.persistent_session("nosnap", "survives\n")
        self.fail_the_keep(gw)
        self.assertEqual(len(self.ident_sandboxes(ident)), 1, "the only copy was terminated")
        # gc leaves the only copy of a persistent workspace alone: its
        # keep failed, nothing about it is left to clean up.
        g = self.sandgate("envs", "gc")
        self.assertEqual(g.returncode, 0, g.stdout + g.stderr)
        self.assertIn("only copy of its workspace", g.stderr)
        self.assertEqual(len(self.ident_sandboxes(ident)), 1, "gc removed the only copy: " + g.stderr)
        self.assertEqual(len(self.records()), 1)
        gw2 = self.gateway(config=self.keep(), state_dir=self.state, binding=b)
        self.assertEqual(gw2.sh_ok("cat kept.txt"), "survives\n")
        rc, err, _ = gw2.shutdown(timeout=120)
        self.assertEqual(rc, 0, err[-2000:])
        self.assertEqual(self.ident_sandboxes(ident), [])

    def keep(self):
        """A copy of the suite's config whose profile is persistent (this test's)."""
        if not getattr(self, "_keep", None):
            self._keep = tm.Modal.profile_config(self, persistent=True)
        return self._keep

    def persistent_session(self, prefix, text):
        """A persistent session of a new identity that wrote kept.txt: ident, binding, gw."""
        ident = unique(prefix)
        b = {"identity": ident, "remove_workspace_on_exit": False}
        gw = self.gateway(config=self.keep(), state_dir=self.state, binding=b)
        gw.write("kept.txt", text)
        return ident, b, gw

    def fail_the_keep(self, gw):
        """gw's snapshot fails at shutdown: exit 69, the record keep-pending."""
        self.faults({"method": "TaskSnapshotFilesystem", "kind": "status", "code": 13,
                     "times": 4})
        rc, err, _ = gw.shutdown(timeout=120)
        self.assertEqual(rc, 69, err[-2000:])
        [rec] = self.records()
        self.assertEqual(rec.get("status"), "keep-pending", rec)
        admin("POST", "/__fake/faults/clear")

    def keep_fails_then_times_out(self, gw, ident):
        """gw's keep fails at shutdown, then Modal's timeout ends its sandbox."""
        self.fail_the_keep(gw)
        [sb] = self.ident_sandboxes(ident)
        admin("POST", "/__fake/sandboxes/%s/expire" % sb["id"])
        self.assertEqual(self.ident_sandboxes(ident), [])
        return sb["id"]

    def live_record(self):
        [live] = glob.glob(os.path.join(self.state, "modal", "*.live"))
        return live

    def test_keep_failed_then_timed_out_is_workspace_lost(self):
        # A session's keep fails, then Modal's timeout ends the sandbox that
        # held its work.  The next session must not be handed the previous
        # snapshot as if it were the workspace: workspace_lost, naming that
        # snapshot's time and the one act that accepts it.
        ident, b, gw = self.persistent_session("lostkeep", "first\n")
        t0 = time.time()
        rc, err, _ = gw.shutdown(timeout=120)
        t1 = time.time()
        self.assertEqual(rc, 0, err[-2000:])
        gw2 = self.gateway(config=self.keep(), state_dir=self.state, binding=b)
        self.assertTrue(gw2.init_reply["environment"]["resumed"])
        gw2.write("kept.txt", "second\n")
        sb = self.keep_fails_then_times_out(gw2, ident)
        # Refused every time, until the older snapshot is accepted.
        for attempt in range(2):
            gw3 = self.gateway(config=self.keep(), init=False, state_dir=self.state)
            r = self.init_call(gw3, **b)
            self.assertReplyCode(r, "workspace_lost", attempt)
            self.assertIn(sb, r["error"])
            m = re.search(r"snapshot of (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)", r["error"])
            self.assertTrue(m, r["error"])
            when = calendar.timegm(time.strptime(m.group(1), "%Y-%m-%dT%H:%M:%SZ"))
            self.assertTrue(int(t0) <= when <= t1, (t0, m.group(1), t1))
            live = self.live_record()
            self.assertIn("delete " + live, r["error"])
            self.assertEqual(self.ident_sandboxes(ident), [], "something was resumed")
            _, err, _ = gw3.shutdown(timeout=60)
            self.assertIn("to start over instead", err)
        # Deleting the record accepts the older snapshot.
        os.unlink(live)
        gw4 = self.gateway(config=self.keep(), state_dir=self.state, binding=dict(b, remove_workspace_on_exit=True))
        self.assertTrue(gw4.init_reply["environment"]["resumed"])
        self.assertEqual(gw4.sh_ok("cat kept.txt"), "first\n")
        rc, err, _ = gw4.shutdown(timeout=120)
        self.assertEqual(rc, 0, err[-2000:])
        self.assertEqual(self.ident_sandboxes(ident), [])
        self.assertEqual(glob.glob(os.path.join(self.state, "modal", "*")), [])

    def test_live_record_older_than_its_snapshot_is_no_loss(self):
        # A gateway that died after recording the snapshot and before
        # forgetting .live leaves both: the snapshot, recorded later, holds
        # the work, so the next session resumes it instead of refusing.
        ident, b, gw = self.persistent_session("livecrash", "kept\n")
        sid = gw.init_reply["environment"]["id"]
        rc, err, _ = gw.shutdown(timeout=120)
        self.assertEqual(rc, 0, err[-2000:])
        [image] = glob.glob(os.path.join(self.state, "modal", "*.image"))
        live = image[:-len("image")] + "live"
        with open(live, "w") as f:
            f.write(sid + "\n")
        at = os.stat(image).st_mtime_ns - 10**9
        os.utime(live, ns=(at, at))
        gw2 = self.gateway(config=self.keep(), state_dir=self.state, binding=dict(b, remove_workspace_on_exit=True))
        self.assertTrue(gw2.init_reply["environment"]["resumed"])
        self.assertEqual(gw2.sh_ok("cat kept.txt"), "kept\n")
        rc, err, _ = gw2.shutdown(timeout=120)
        self.assertEqual(rc, 0, err[-2000:])
        self.assertEqual(glob.glob(os.path.join(self.state, "modal", "*")), [])

    def test_keep_failed_before_any_snapshot_is_workspace_lost(self):
        # The same before the first snapshot: no silent fresh, empty workspace.
        ident, b, gw = self.persistent_session("lostfirst", "only\n")
        sb = self.keep_fails_then_times_out(gw, ident)
        gw2 = self.gateway(config=self.keep(), init=False, state_dir=self.state)
        r = self.init_call(gw2, **b)
        self.assertReplyCode(r, "workspace_lost")
        self.assertIn(sb, r["error"])
        self.assertIn("first snapshot", r["error"])
        self.assertEqual(self.ident_sandboxes(ident), [], "a fresh sandbox was made")
        gw2.shutdown(timeout=60)
        os.unlink(self.live_record())
        gw3 = self.gateway(config=self.keep(), state_dir=self.state, binding=dict(b, remove_workspace_on_exit=True))
        self.assertFalse(gw3.init_reply["environment"]["resumed"])
        self.assertEqual(gw3.sh_ok("ls"), "")
        rc, err, _ = gw3.shutdown(timeout=120)
        self.assertEqual(rc, 0, err[-2000:])
        self.assertEqual(self.ident_sandboxes(ident), [])

    def test_another_sandbox_under_the_name_is_not_the_lost_one(self):
        # The sandbox that held the work ended, and another of the identity
        # (made from another state directory) now runs under its name: it
        # is not the workspace either, so the loss is told, not adopted.
        ident = unique("lostother")
        b = {"identity": ident, "remove_workspace_on_exit": False}
        gw = self.gateway(config=self.keep(), state_dir=self.state, binding=b)
        sb = self.keep_fails_then_times_out(gw, ident)
        other = tempfile.mkdtemp(prefix="sg-e2e-modal-other-")
        self.addCleanup(shutil.rmtree, other, True)
        gw2 = self.gateway(state_dir=other, binding={"identity": ident,
                                                      "remove_workspace_on_exit": False})
        rc, err, _ = gw2.shutdown(timeout=60)
        self.assertEqual(rc, 0, err[-2000:])
        [sb2] = self.ident_sandboxes(ident)
        gw3 = self.gateway(config=self.keep(), init=False, state_dir=self.state)
        r = self.init_call(gw3, **b)
        self.assertReplyCode(r, "workspace_lost")
        self.assertIn(sb, r["error"])
        self.assertIn(sb2["id"], r["error"])
        gw3.shutdown(timeout=60)
        self.assertEqual([s["id"] for s in self.ident_sandboxes(ident)], [sb2["id"]])
        admin("POST", "/__fake/sandboxes/%s/expire" % sb2["id"])

    def test_keep_pending_whose_sandbox_ended_is_listed_vanished(self):
        # keep-pending says the sandbox was left as it was; once Modal no
        # longer has it, the listing says what is observed, and gc drops
        # the record.  The loss is still told at the next initialize.
        ident = unique("vanish")
        b = {"identity": ident, "remove_workspace_on_exit": False}
        gw = self.gateway(config=self.keep(), state_dir=self.state, binding=b)
        sb = self.keep_fails_then_times_out(gw, ident)
        ls = self.sandgate("envs", "list", "--json")
        self.assertEqual(ls.returncode, 0, ls.stdout + ls.stderr)
        [env] = [e for e in json.loads(ls.stdout) if e.get("identity") == ident]
        self.assertEqual(env["state"], "vanished", env)
        g = self.sandgate("envs", "gc", "--json")
        self.assertEqual(g.returncode, 0, g.stdout + g.stderr)
        self.assertIn(sb, [e["id"] for e in json.loads(g.stdout)["removed"]], g.stdout)
        self.assertEqual(self.records(), [])
        gw2 = self.gateway(config=self.keep(), init=False, state_dir=self.state)
        self.assertReplyCode(self.init_call(gw2, **b), "workspace_lost")
        gw2.shutdown(timeout=60)
        self.assertEqual(self.ident_sandboxes(ident), [])

    # ---- retries and hostile router replies -------------------------------------

    def test_retries_are_bounded(self):
        # UNAVAILABLE for good: the first try and three retries, then give up.
        self.faults({"method": "AppGetOrCreate", "kind": "status", "code": 14, "times": 100})
        admin("POST", "/__fake/log/clear")
        gw = self.gateway(init=False, state_dir=self.state)
        t0 = time.monotonic()
        r = self.init_call(gw)
        self.assertReplyCode(r, "unavailable")
        self.assertLess(time.monotonic() - t0, 10)
        self.assertEqual(len(self.calls("AppGetOrCreate")), 4)
        # RESOURCE_EXHAUSTED (Modal's quota) is a refusal: not retried,
        # nothing made, nothing kept on record.
        admin("POST", "/__fake/faults/clear")
        self.faults({"method": self.rpc("SandboxCreate"), "kind": "status", "code": 8})
        admin("POST", "/__fake/log/clear")
        ident = unique("quota")
        gw = self.gateway(init=False, state_dir=self.state)
        r = self.init_call(gw, identity=ident)
        self.assertReplyCode(r, "unavailable")
        self.assertEqual(len(self.calls(self.rpc("SandboxCreate"))), 1)
        self.assertEqual(self.ident_sandboxes(ident), [])
        self.assertEqual(self.records(), [])

    def test_hostile_router_replies_fail_the_command_only(self):
        gw = self.gateway(state_dir=self.state)
        for kind in ("serve-then-huge", "serve-then-garbage"):
            for method in ("TaskExecStart", "TaskExecStdioRead"):
                self.faults({"method": method, "kind": kind})
                t0 = time.monotonic()
                res = gw.execute("bash", {"command": "echo hi"}, timeout=120)
                self.assertLess(time.monotonic() - t0, 100, (kind, method))
                self.assertIn("error", res, (kind, method, res))
                admin("POST", "/__fake/faults/clear")
                self.assertEqual(gw.sh_ok("echo again").strip(), "again")

    # ---- settings --------------------------------------------------------------------

    def test_sandbox_under_other_limits_is_not_adopted(self):
        # A kept sandbox of the identity runs with Modal's open network; a
        # later session of the identity asks for no network.  Modal cannot
        # change a running sandbox's network, so adopting it would run the
        # session with the network open while its facts said blocked:
        # refused, naming the limits, and the sandbox is left as it was.
        ident = unique("limits")
        gw = self.gateway(state_dir=self.state,
                          binding={"identity": ident, "remove_workspace_on_exit": False})
        rc, err, _ = gw.shutdown(timeout=60)
        self.assertEqual(rc, 0, err[-2000:])
        [sb] = self.ident_sandboxes(ident)
        self.assertEqual(sb["network"]["type"], 1)  # OPEN
        for env in ({"network": "none"}, {"cpus": 1}, {"memory_mb": 512}):
            with self.subTest(env=env):
                gw2 = self.gateway(init=False, state_dir=self.state,
                                   env_extra=host_env(dict(env, backend="command")))
                r = self.init_call(gw2, identity=ident, remove_workspace_on_exit=False)
                self.assertReplyCode(r, "unsupported")
                self.assertIn("limits", r["error"])
                gw2.shutdown(timeout=60)
                self.assertEqual([s["id"] for s in self.ident_sandboxes(ident)], [sb["id"]])
        # The same limits adopt it, files and all.
        gw3 = self.gateway(state_dir=self.state, binding={"identity": ident})
        self.assertTrue(gw3.init_reply["environment"]["resumed"])
        rc, err, _ = gw3.shutdown(timeout=60)
        self.assertEqual(rc, 0, err[-2000:])
        self.assertEqual(self.ident_sandboxes(ident), [])

    def test_cpus_and_memory_are_limits(self):
        gw = self.gateway(state_dir=self.state, env_extra=host_env(
            {"backend": "command", "cpus": 1.5, "memory_mb": 768}))
        [sb] = [s for s in tm.running() if any(t["tagValue"] == gw.session for t in s["tags"])]
        res = sb["resources"]
        self.assertEqual(res.get("milliCpu"), 1500, res)
        self.assertEqual(res.get("milliCpuMax"), 1500, res)
        self.assertEqual(res.get("memoryMb"), 768, res)
        self.assertEqual(res.get("memoryMbMax"), 768, res)


class ModalLeaksV1(ModalLeaks):
    """Every test again on Modal's v1 sandbox calls (MODAL_SANDBOX_V2=0)."""
    V2 = ""


if __name__ == "__main__":
    unittest.main()
