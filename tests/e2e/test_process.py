"""Processes as the host's worker keeps them: bash run_in_background and
promotion, the record (process.Process), the process methods, reads with
offsets, tails and long polls, stop, and the `process` events (protocol
section 4).  Every test here fails against the earlier dialect (process/event
frames, `exited`/`lost` statuses, list as {processes}, top-level read options).
"""

import json
import os
import re
import time
import unittest

from sgclient import (MiB, ROOT, SEC, SLACK, GatewayTestCase, Marker, live_checker, unique,
                      wait_gone)

# Keys every record carries (the host's process.Process; the rest are
# omitted when empty, as Go's omitempty does).
RECORD_KEYS = {"id", "owner_kind", "owner_id", "root_thread_id", "host_generation_id",
               "lifecycle", "completion_mode", "status", "pid", "pgid",
               "process_start_time", "tty", "log_path", "log_base_offset", "command", "cwd",
               "started_at", "updated_at", "stopped_at", "exit_code", "recheck_minutes"}
RECORD_OPTIONAL = {"last_error", "terminal_cause", "completion_delivered_at",
                   "completion_consumed_by", "next_recheck_at", "pending_recheck_at",
                   "operation_id"}
READ_KEYS = {"Process", "Output", "Truncated", "StartOffset", "EndOffset", "TotalBytes",
             "TimedOut", "Duration"}
EVENT_TYPES = {"started", "updated", "failed", "stopped", "cleaned_up", "recheck_due"}
STAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$")
ZERO_TIME = "0001-01-01T00:00:00Z"
PROC_ID = re.compile(r"^proc-[0-9a-f]{8}$")


def host_cmdlines_with(marker):
    """Command lines of this host's processes that hold marker."""
    found = []
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == os.getpid():
            continue
        try:
            with open("/proc/%s/cmdline" % d, "rb") as f:
                line = f.read().decode(errors="replace")
        except OSError:
            continue
        if marker in line:
            found.append(line)
    return found


class Processes(GatewayTestCase):
    shared_gateway = True

    def ended_event(self, pid, timeout=30):
        return self.gw.wait_event(
            lambda e: (e.get("Process") or {}).get("id") == pid
            and e.get("Type") in ("stopped", "failed"),
            timeout, "end event of %s" % pid)

    def quiet_stop(self, pid):
        self.addCleanup(lambda: self.gw.call("process/stop", {"id": pid}))

    def assertRecord(self, rec):
        keys = set(rec)
        self.assertEqual(RECORD_KEYS - keys, set(), "missing keys: %s" % json.dumps(rec))
        self.assertEqual(keys - RECORD_KEYS - RECORD_OPTIONAL, set(),
                         "keys the host's record has not: %s" % json.dumps(rec))
        self.assertRegex(rec["id"], PROC_ID)
        self.assertEqual(rec["root_thread_id"], self.gw.session)
        self.assertIn(rec["status"], ("starting", "running", "stopping", "stopped", "failed"))
        self.assertIn(rec["owner_kind"], ("main_agent", "subagent"))
        self.assertIn(rec["completion_mode"], ("resume", "detached"))
        self.assertRegex(rec["started_at"], STAMP)
        self.assertRegex(rec["updated_at"], STAMP)
        if rec["status"] in ("running", "starting"):
            self.assertEqual(rec["stopped_at"], ZERO_TIME)
            self.assertEqual(rec["exit_code"], -1)
        else:
            self.assertRegex(rec["stopped_at"], STAMP)
            self.assertNotEqual(rec["stopped_at"], ZERO_TIME)

    # ---- bash starts ---------------------------------------------------------

    def test_a_bash_call_starts_only_its_helper_and_the_supervisor(self):
        """Tasks per call (benchmark C4): above the command's shell stand
        only the supervisor that lets a foreground run be promoted and the
        helper the call ran.  Where the provider runs a command whoever
        reads its output (Vercel, Modal, Docker), the `sg-helper job` it
        started is that supervisor itself (--linger: the request ends at
        the reply's last line while the job supervises on), so one
        sg-helper stands there; on ssh and Daytona, whose request ends only
        with its process, the job still forks the supervisor: two.  Before,
        the clouds had two as well (and a runner and the spawner before
        that: four)."""
        walk = ("p=$PPID; n=0; while [ \"$p\" -gt 1 ] && "
                "tr '\\0' '\\n' </proc/$p/cmdline | head -n 1 | grep -q sg-helper; do "
                "n=$((n+1)); p=$(cut -d' ' -f4 /proc/$p/stat); done; echo $n")
        n = int(self.gw.sh_ok(walk).strip())
        self.assertGreaterEqual(n, 1, "the supervisor is an sg-helper process")
        if self.gw.backend in ("vercel", "modal", "docker"):
            self.assertEqual(n, 1, "sg-helper processes above the command")
        else:
            self.assertLessEqual(n, 2, "sg-helper processes above the command")

    def escape_started(self, command, **args):
        """A foreground bash whose command setsid's a marker away and
        waits; its request id, the marker and the process counter, once
        the marker runs."""
        count = live_checker(self.gw)
        if count is None:
            self.skipTest("this backend's processes cannot be seen from here")
        if self.gw.facts.get("observed", {}).get("child_subreaper") is False:
            # Observed, not assumed: gVisor's 2022 release refuses the
            # flag, so an escape is not the supervisor's to find there.
            self.skipTest("the facts say no child subreaper can be made here")
        m = Marker()
        args["command"] = command % m.command
        rid = self.gw.execute_req("bash", args)
        deadline = time.monotonic() + 10 * SLACK
        while count(m) == 0:
            self.assertLess(time.monotonic(), deadline, "the escape never started")
            time.sleep(0.05)
        return rid, m, count

    def test_a_cancelled_bash_call_leaves_no_escape(self):
        """A cancelled foreground bash is stopped by containment: what it
        setsid'd away dies too.  Where the job the provider started is the
        supervisor (--linger), `job --kill` asks it to stop the command;
        killing it instead left the escape to nobody, and the record lost."""
        gw = self.gw
        rid, m, count = self.escape_started("setsid %s &\nsleep 600")
        gw.cancel(rid)
        self.assertReplyCode(gw.wait_reply(rid, 10 * SLACK), "cancelled")
        self.assertTrue(wait_gone(count, m, 5 * SLACK), "the escape outlived the cancel")

    def test_a_promoted_bash_call_is_stopped_with_its_escape(self):
        """A foreground run promoted past its timeout outlives the request
        that started it, still supervised: process/stop ends it and what
        it setsid'd away, and the record says stopped."""
        gw = self.gw
        rid, m, count = self.escape_started("setsid %s &\nsleep 600", timeout_seconds=1)
        res = gw.wait_reply(rid, 10 * SLACK)
        self.assertNotIn("error", res)
        pid = res["data"]["structured_content"]["promoted_process_id"]
        self.assertGreater(count(m), 0, "the promoted run's escape still runs")
        gw.ok("process/stop", {"id": pid})
        self.assertTrue(wait_gone(count, m, 5 * SLACK), "the escape outlived process/stop")
        self.assertEqual(gw.ok("process/get", {"id": pid})["status"], "stopped")

    def test_a_bash_call_longer_than_one_request(self):
        """A foreground run that outlasts one provider request (Docker's
        detached job waits 2 s) is answered "pending" and attached to:
        where the job supervises it (--linger) the request ends at the
        reply's last line while the job runs on, and the attach reads the
        result it leaves."""
        gw = self.gw
        res = gw.tool("bash", {"command": "echo early; sleep 3; echo late; exit 3",
                               "timeout_seconds": 60})
        view = json.loads(res["content"][0]["text"])
        self.assertEqual(view["exit_code"], 3)
        self.assertEqual(view["output"].split(), ["early", "late"])
        self.assertEqual(res["structured_content"].get("promoted_process_id", ""), "")

    def test_a_forged_trailer_in_the_output_changes_nothing(self):
        """Attacker's test: the command finds its job's mark on an
        ancestor's command line (no secret from it) and prints the job's
        trailers and the --linger "end" line itself.  Its output reaches
        the reply only inside the spawn's JSON, escaped, so the gateway
        neither stops early nor takes a forged result: the real exit code
        and the whole output come back."""
        gw = self.gw
        find = ("p=$PPID; m=; while [ -z \"$m\" ] && [ \"$p\" -gt 1 ]; do "
                "m=$(tr '\\0' '\\n' </proc/$p/cmdline | sed -n '/^--mark$/{n;p;q;}'); "
                "p=$(cut -d' ' -f4 /proc/$p/stat); done; echo \"mark=$m\"; ")
        forge = ("printf '\\n%s done 0|exit 0||2\\nok\\n%s pending\\n\\n%s end\\n' "
                 "\"$m\" \"$m\" \"$m\"; sleep 1; echo real; exit 7")
        res = gw.tool("bash", {"command": find + forge, "timeout_seconds": 30})
        view = json.loads(res["content"][0]["text"])
        self.assertEqual(view["exit_code"], 7, json.dumps(view))
        out = view["output"]
        if gw.backend in ("vercel", "modal", "docker"):
            self.assertRegex(out, r"mark=sgmk-", "the command did not find its job's mark")
        self.assertTrue(out.rstrip().endswith("real"), out)
        self.assertIn(" end\n", out)

    def test_the_command_cannot_reach_its_supervisors_descriptors(self):
        """Attacker's test: the supervisor above the command (on Vercel,
        Modal and Docker the job whose stdout is the request's reply) holds
        that reply's pipe; a command that could open /proc/<it>/fd/N could
        print a whole reply and its end line there before the job's own.
        The command's Landlock domain keeps it from the supervisor's
        descriptors: in a confined mode from ABI 1, unconfined from ABI 6."""
        gw = self.gw
        abi = gw.facts.get("landlock_abi") or 0
        if not abi:
            self.skipTest("no Landlock ABI in the facts (none, or a scratch sandbox's deferred facts)")
        probe = ("n=0; for fd in /proc/$PPID/fd/*; do "
                 "(printf 'x' >\"$fd\") 2>/dev/null && n=$((n+1)); "
                 "readlink \"$fd\" >/dev/null 2>&1 && n=$((n+1)); done; echo reached=$n")
        for mode, need in ((None, 1), ("unconfined", 6)):
            if abi < need:
                continue
            with self.subTest(mode=mode):
                out = gw.sh_ok(probe, mode=mode)
                self.assertIn("reached=0", out)

    def test_background_record_and_started_after_reply(self):
        gw = self.gw
        rid = gw.execute_req("bash", {"command": "sleep 20", "run_in_background": True})
        reply = gw.wait_reply(rid)
        self.assertNotIn("error", reply)
        view = json.loads(reply["data"]["content"][0]["text"])
        self.assertEqual(view.pop("action"), "start")
        self.assertRecord(view)
        pid = view["id"]
        self.quiet_stop(pid)
        self.assertEqual((view["owner_kind"], view["owner_id"], view["lifecycle"]),
                         ("main_agent", gw.session, "managed"))
        self.assertIs(view["tty"], True)
        self.assertEqual(view["command"], "sleep 20")
        self.assertEqual(view["cwd"].rstrip("/"), ROOT.rstrip("/"))
        started = gw.wait_event(lambda e: e.get("Type") == "started"
                                and e["Process"]["id"] == pid, 10, "started event")
        self.assertLess(reply.seq, started.seq, "the reply is written before its started event")
        self.assertEqual(started["Cause"], "")
        self.assertEqual(started["Process"]["status"], "running")

    def test_subagent_owns_what_it_starts(self):
        gw = self.gw
        rec = gw.view("bash", {"command": "sleep 20", "run_in_background": True},
                      actor="sub-1")
        self.quiet_stop(rec["id"])
        self.assertEqual((rec["owner_kind"], rec["owner_id"], rec["root_thread_id"]),
                         ("subagent", "sub-1", gw.session))

    def test_foreground_past_its_timeout_is_promoted(self):
        gw = self.gw
        t0 = time.monotonic()
        res = gw.tool("bash", {"command": "echo early; sleep 4; echo late",
                               "timeout_seconds": 1})
        took = time.monotonic() - t0
        view = json.loads(res["content"][0]["text"])
        pid = res["structured_content"]["promoted_process_id"]
        self.assertRegex(pid, PROC_ID)
        self.assertEqual(view.get("promoted_process_id"), pid)
        self.assertIs(view["timed_out"], True)
        self.assertEqual(view["exit_code"], -1)
        self.assertIn("early", view["output"])
        self.assertLess(took, 1 + 3 * SLACK)
        # Not killed: it runs on, and ends on its own.
        rec = gw.ok("process/get", {"id": pid})
        self.assertRecord(rec)
        self.assertEqual(rec["status"], "running")
        self.assertEqual(rec["recheck_minutes"], 30)
        self.assertRegex(rec["next_recheck_at"], STAMP)
        self.assertIn(pid, [p["id"] for p in gw.ok("process/list")])
        ended = self.ended_event(pid, 20)
        self.assertEqual((ended["Type"], ended["Cause"]), ("stopped", "natural_exit"))
        out, _ = gw.read_all(pid)
        self.assertEqual(out, "early\nlate\n")

    def test_foreground_in_time_leaves_no_process(self):
        gw = self.gw
        before = {p["id"] for p in gw.ok("process/list")}
        res = gw.tool("bash", {"command": "echo out; echo err >&2; exit 3"})
        sc = res["structured_content"]
        self.assertEqual((sc["exit_code"], sc["stdout"], sc["stderr"]), (3, "out\n", "err\n"))
        self.assertEqual(sc["promoted_process_id"], "")
        self.assertEqual({p["id"] for p in gw.ok("process/list")}, before)
        # The tree's revision after the command, as the host's tools say it.
        first = gw.sh("true")["workspace_revision"]
        self.assertRegex(first, r"^fs:worktree:[0-9a-f]{16}$")
        second = gw.sh("echo x > %s.txt" % unique("rev"))["workspace_revision"]
        self.assertRegex(second, r"^fs:worktree:[0-9a-f]{16}$")
        self.assertNotEqual(first, second, "a command that wrote a file changed no revision")

    # ---- the methods ---------------------------------------------------------

    def test_list_is_an_array_oldest_first(self):
        gw = self.gw
        a = gw.start("sleep 20")["id"]
        self.quiet_stop(a)
        time.sleep(0.05)
        b = gw.start("sleep 20")["id"]
        self.quiet_stop(b)
        listing = gw.ok("process/list")
        self.assertIsInstance(listing, list)
        ids = [p["id"] for p in listing]
        self.assertLess(ids.index(a), ids.index(b))
        for rec in listing:
            self.assertRecord(rec)

    def test_start_v4_keeps_operation_id(self):
        gw = self.gw
        op = unique("op")
        reply = gw.call("process/start", {"command": "printf hello; exit 3",
                                          "operation_id": op})
        self.assertNotIn("error", reply)
        rec = reply["data"]
        self.assertRecord(rec)
        self.assertEqual(rec["operation_id"], op)
        self.assertEqual(rec["lifecycle"], "session")
        pid = rec["id"]
        started = gw.wait_event(lambda e: e.get("Type") == "started"
                                and e["Process"]["id"] == pid, 10, "started event")
        self.assertLess(reply.seq, started.seq)
        ended = self.ended_event(pid)
        self.assertEqual((ended["Type"], ended["Cause"]), ("failed", "natural_exit"))
        final = ended["Process"]
        self.assertEqual((final["status"], final["exit_code"], final["last_error"]),
                         ("failed", 3, "exit status 3"))
        self.assertEqual(final["operation_id"], op)
        by_id = {p["id"]: p for p in gw.ok("process/list")}
        self.assertEqual(by_id[pid]["operation_id"], op)
        out, _ = gw.read_all(pid)
        self.assertEqual(out, "hello")

    def test_a_start_that_fails_is_a_failed_record(self):
        gw = self.gw
        reply = gw.call("process/start", {"argv": ["/nonexistent/sg-e2e-program"]})
        rec = reply["data"]
        self.assertRecord(rec)
        self.assertEqual(rec["status"], "failed")
        self.assertIn("/nonexistent/sg-e2e-program", rec["last_error"])
        ev = gw.wait_event(lambda e: e["Process"]["id"] == rec["id"], 10, "its event")
        self.assertEqual(ev["Type"], "failed")
        self.assertLess(reply.seq, ev.seq)
        self.assertNotIn("started", [e["Type"] for e in gw.events_for(rec["id"])])

    def test_zero_exit_ends_stopped(self):
        gw = self.gw
        pid = gw.start("exit 0")["id"]
        ended = self.ended_event(pid)
        self.assertEqual((ended["Type"], ended["Cause"]), ("stopped", "natural_exit"))
        rec = gw.ok("process/get", {"id": pid})
        self.assertEqual((rec["status"], rec["exit_code"], rec["terminal_cause"]),
                         ("stopped", 0, "natural_exit"))
        self.assertNotIn("last_error", rec)
        self.assertIs(gw.ok("process/completion_pending", {"id": pid}), True)
        rec = gw.ok("process/completion_delivered", {"id": pid, "consumer": "thread-9"})
        self.assertEqual(rec["completion_consumed_by"], "thread-9")
        self.assertRegex(rec["completion_delivered_at"], STAMP)
        self.assertIs(gw.ok("process/completion_pending", {"id": pid}), False)

    def test_unknown_and_unsupported(self):
        gw = self.gw
        for method in ("process/get", "process/read", "process/stop", "process/write"):
            self.assertCode(gw.fail(method, {"id": "proc-00000000"}), "not_found", method)
        err = gw.fail("process/frobnicate", {"id": "proc-00000000"})
        self.assertIn("unknown remote process operation", err)

    def test_update_methods_send_updated(self):
        gw = self.gw
        pid = gw.start("sleep 20")["id"]
        self.quiet_stop(pid)
        rec = gw.ok("process/completion_mode", {"id": pid, "mode": "detached"})
        self.assertEqual(rec["completion_mode"], "detached")
        gw.wait_event(lambda e: e.get("Type") == "updated" and e["Process"]["id"] == pid
                      and e["Process"]["completion_mode"] == "detached", 10, "updated")
        rec = gw.ok("process/recheck", {"id": pid, "minutes": 5})
        self.assertEqual(rec["recheck_minutes"], 5)
        self.assertRegex(rec["next_recheck_at"], STAMP)
        self.assertCode(gw.fail("process/recheck", {"id": pid, "minutes": 1441}),
                        "invalid_argument")
        rec = gw.ok("process/recheck_delivered", {"id": pid})
        self.assertNotIn("pending_recheck_at", rec)
        self.assertIs(gw.ok("process/input_available", {"id": pid}), True)
        self.assertIs(gw.ok("process/completion_pending", {"id": pid}), False)

    def test_cleanup_stops_session_processes(self):
        gw = self.gw
        managed = gw.start("sleep 20")["id"]
        self.quiet_stop(managed)
        session = gw.ok("process/start", {"command": "sleep 20"})["id"]
        out = gw.ok("process/cleanup")
        self.assertEqual(set(out), {"Cleaned"})
        cleaned = {p["id"]: p for p in out["Cleaned"]}
        self.assertIn(session, cleaned)
        self.assertEqual(cleaned[session]["status"], "stopped")
        self.assertNotIn(managed, cleaned, "a managed process outlives process/cleanup")
        gw.wait_event(lambda e: e.get("Type") == "cleaned_up"
                      and e["Process"]["id"] == session, 10, "cleaned_up")

    # ---- reads ---------------------------------------------------------------

    def test_offsets_and_tail(self):
        gw = self.gw
        pid = gw.start("printf 0123456789")["id"]
        gw.wait_ended(pid)
        r = gw.read(pid, offset=0, max_bytes=4)
        self.assertEqual(set(r), READ_KEYS)
        self.assertEqual((r["Output"], r["StartOffset"], r["EndOffset"], r["TotalBytes"]),
                         ("0123", 0, 4, 10))
        self.assertIs(r["Truncated"], True, "more bytes follow the window")
        r = gw.read(pid, offset=4, max_bytes=100)
        self.assertEqual((r["Output"], r["StartOffset"], r["EndOffset"]), ("456789", 4, 10))
        self.assertIs(r["Truncated"], False)
        # OffsetBytes null: the tail, Truncated when older bytes exist.
        r = gw.read(pid, offset=None, max_bytes=3)
        self.assertEqual((r["Output"], r["StartOffset"]), ("789", 7))
        self.assertIs(r["Truncated"], True)
        r = gw.read(pid, offset=100)
        self.assertEqual((r["Output"], r["StartOffset"], r["EndOffset"]), ("", 10, 10))

    def test_options_are_nested_in_go_casing(self):
        gw = self.gw
        pid = gw.start("printf abcdef")["id"]
        gw.wait_ended(pid)
        r = gw.ok("process/read", {"id": pid, "options": {"MaxBytes": 2, "OffsetBytes": 1}})
        self.assertEqual(r["Output"], "bc")
        # Top-level options (the earlier dialect) are not options.
        r = gw.ok("process/read", {"id": pid, "MaxBytes": 2, "OffsetBytes": 1})
        self.assertEqual(r["Output"], "abcdef")

    def test_long_poll_returns_when_output_arrives(self):
        gw = self.gw
        pid = gw.start("sleep 0.5; printf late; sleep 20")["id"]
        self.quiet_stop(pid)
        t0 = time.monotonic()
        r = gw.read(pid, offset=0, wait_ns=10 * SEC)
        took = time.monotonic() - t0
        self.assertIn("late", r["Output"])
        self.assertIs(r["TimedOut"], False)
        self.assertLess(took, 3 * SLACK)
        self.assertIsInstance(r["Duration"], int)
        self.assertGreater(r["Duration"], 0.2 * SEC, "Duration is nanoseconds")

    def test_timed_out(self):
        gw = self.gw
        pid = gw.start("sleep 20")["id"]
        self.quiet_stop(pid)
        t0 = time.monotonic()
        r = gw.read(pid, offset=0, wait_ns=SEC * 3 // 10)
        took = time.monotonic() - t0
        self.assertIs(r["TimedOut"], True)
        self.assertEqual(r["Output"], "")
        self.assertGreaterEqual(took, 0.28)
        self.assertLess(took, 3 * SLACK)
        r = gw.read(pid, offset=0, wait_ns=0)
        self.assertIs(r["TimedOut"], False, "no wait, no timeout")

    def test_retention_drops_oldest(self):
        gw = self.gw
        total = 9 * MiB
        pid = gw.ok("process/start", {
            "command": "head -c %d /dev/zero | tr '\\000' x; printf END" % total})["id"]
        gw.wait_ended(pid, 60)
        r = gw.read(pid, offset=0)
        self.assertEqual(r["TotalBytes"], total + 3)
        self.assertGreaterEqual(r["StartOffset"], total + 3 - 8 * MiB)
        self.assertLessEqual(len(r["Output"]), 32 * 1024, "MaxBytes defaults to 32 KiB")
        self.assertEqual(r["Process"]["log_base_offset"], total + 3 - 8 * MiB)
        r = gw.read(pid, offset=None, max_bytes=5)
        self.assertEqual(r["Output"], "xxEND")

    def test_invalid_utf8(self):
        gw = self.gw
        pid = gw.ok("process/start", {"command": "printf 'a\\377b\\303'"})["id"]
        gw.wait_ended(pid)
        r = gw.read(pid, offset=0)
        self.assertEqual(r["Output"], "a\ufffdb\ufffd")
        self.assertEqual((r["EndOffset"], r["TotalBytes"]), (4, 4), "offsets count raw bytes")

    # ---- write, stop ---------------------------------------------------------

    def test_canceled_stdin_write_still_allows_stop(self):
        """The host's TestCanceledStdinWriteStillAllowsStop, replayed."""
        gw = self.gw
        rec = gw.start("stty raw -echo; echo READY; sleep 60")
        pid = rec["id"]
        self.quiet_stop(pid)
        r = gw.read(pid, offset=0, wait_ns=2 * SEC)
        self.assertIn("READY", r["Output"])
        rid = gw.request("process/write", {"id": pid, "input": "x" * 65536})
        time.sleep(0.2)
        self.assertFalse(gw.has_reply(rid), "64 KiB into a terminal nobody reads must block")
        gw.cancel(rid)
        t0 = time.monotonic()
        final = gw.stop(pid)
        self.assertLess(time.monotonic() - t0, 2 * 2 + 1)
        self.assertEqual(final["status"], "stopped")
        self.assertEqual(final["terminal_cause"], "requested_stop")
        # The connection still answers.
        self.assertEqual(gw.ok("process/get", {"id": pid})["status"], "stopped")

    def test_write_reaches_a_terminal(self):
        gw = self.gw
        pid = gw.start("read x; echo got-$x")["id"]
        rec = gw.ok("process/write", {"id": pid, "input": "ping\r"})
        self.assertRecord(rec)
        gw.wait_ended(pid)
        out, _ = gw.read_all(pid)
        self.assertIn("got-ping", out)
        self.assertIs(gw.ok("process/input_available", {"id": pid}), False)

    def test_resize_only_a_terminal(self):
        gw = self.gw
        pid = gw.start("stty -echo; read x; stty size; sleep 20")["id"]
        self.quiet_stop(pid)
        gw.ok("process/resize", {"id": pid, "cols": 132, "rows": 43})
        # The size is asked for only after the resize was answered.
        gw.ok("process/write", {"id": pid, "input": "\r"})
        deadline = time.monotonic() + 10 * SLACK
        out = ""
        while "43 132" not in out and time.monotonic() < deadline:
            out = gw.read(pid, offset=0, wait_ns=SEC)["Output"]
        self.assertIn("43 132", out)
        other = gw.ok("process/start", {"command": "sleep 20"})["id"]
        self.quiet_stop(other)
        self.assertCode(gw.fail("process/resize", {"id": other, "cols": 80, "rows": 24}),
                        "invalid_argument")

    def test_read_only_agents_only_read_and_list(self):
        # The host's worker counts the process tool's write, stop and
        # update as changes: a read-only agent may only look.
        rec = self.gw.start(command="sleep 30")
        for args in ({"action": "stop", "process_id": rec["id"]},
                     {"action": "write", "process_id": rec["id"], "input": "x"},
                     {"action": "update", "process_id": rec["id"], "recheck_minutes": 5}):
            err = self.gw.tool_error("process", args, mode="read_only")
            self.assertCode(err, "permission_denied")
        self.assertEqual(self.gw.view("process", {"action": "list"}, mode="read_only")["action"],
                         "list")
        self.gw.view("process", {"action": "read", "process_id": rec["id"]}, mode="read_only")
        self.assertEqual(self.gw.ok("process/get", {"id": rec["id"]})["status"], "running")
        self.gw.stop(rec["id"])

    def test_stop_sends_term_then_event(self):
        gw = self.gw
        pid = gw.start("sleep 20")["id"]
        gw.wait_event(lambda e: e.get("Type") == "started"
                      and e["Process"]["id"] == pid, 10, "started")
        t0 = time.monotonic()
        rec = gw.stop(pid)
        self.assertLess(time.monotonic() - t0, 1.5 * SLACK, "sleep dies on SIGTERM at once")
        self.assertRecord(rec)
        self.assertEqual((rec["status"], rec["terminal_cause"]), ("stopped", "requested_stop"))
        ev = self.ended_event(pid)
        self.assertEqual((ev["Type"], ev["Cause"]), ("stopped", "requested_stop"))
        for e in gw.events:
            self.assertEqual(set(e), {"Type", "Cause", "Process"})
            self.assertIn(e["Type"], EVENT_TYPES)

    def test_stop_kills_after_grace(self):
        gw = self.gw
        pid = gw.start("trap '' TERM HUP; echo ready; sleep 20")["id"]
        r = gw.read(pid, offset=0, wait_ns=10 * SEC)
        self.assertIn("ready", r["Output"])
        t0 = time.monotonic()
        rec = gw.stop(pid)
        took = time.monotonic() - t0
        self.assertGreaterEqual(took, 1.8, "the 2 s grace was not waited for")
        self.assertLess(took, 2 + 3 * SLACK)
        self.assertEqual(rec["status"], "stopped")

    def test_timeout_ms_ends_stopped(self):
        gw = self.gw
        t0 = time.monotonic()
        pid = gw.ok("process/start", {"command": "sleep 20", "timeout_ms": 300})["id"]
        rec = gw.wait_ended(pid, 10)
        self.assertLess(time.monotonic() - t0, 5 * SLACK)
        self.assertEqual(rec["status"], "stopped")

    def test_cwd_is_confined_unless_unconfined(self):
        gw = self.gw
        d = unique("cwd")
        gw.sh_ok("mkdir -p %s" % d)
        self.assertEqual(gw.sh_ok("pwd", cwd=d).strip(), ROOT.rstrip("/") + "/" + d)
        for bad in ("/tmp", "../"):
            self.assertCode(gw.tool_error("bash", {"command": "pwd", "cwd": bad}), "path_escape")
        self.assertEqual(gw.sh_ok("pwd", "unconfined", cwd="/tmp").strip(), "/tmp")

    def test_cancelled_foreground_command_is_stopped(self):
        gw = self.gw
        marker = unique("sg-e2e-cancel")
        rid = gw.execute_req("bash", {"command": "sleep 30; echo %s" % marker,
                                      "timeout_seconds": 60})
        time.sleep(0.5)
        gw.cancel(rid)
        t0 = time.monotonic()
        reply = gw.wait_reply(rid, timeout=30)
        self.assertLess(time.monotonic() - t0, 5 * SLACK)
        self.assertIn("error", reply)
        self.assertCode(reply["error"], "cancelled")
        # Not promoted, not running on: nothing of it is listed, and where
        # the environment's processes are this host's, none is left.
        self.assertNotIn(marker, json.dumps(gw.ok("process/list")))
        deadline = time.monotonic() + 5 * SLACK
        while host_cmdlines_with(marker) and time.monotonic() < deadline:
            time.sleep(0.1)
        self.assertEqual(host_cmdlines_with(marker), [], "the cancelled command runs on")

    def test_shutdown_stops_managed_processes_and_says_cleaned_up(self):
        gw = self.gateway()
        if os.environ.get("SG_PEER_BIN") and gw.backend != "local":
            self.skipTest("a delegated peer's budget (10 s with --peer) is shorter than a remote "
                          "backend's cleanup plan: its processes end with the environment")
        pid = gw.start("sleep 60")["id"]
        started = gw.ok("process/start", {"command": "sleep 60"})["id"]
        rc, err, took = gw.shutdown(30)
        self.assertEqual(rc, 0, err[-2000:])
        cleaned = {e["Process"]["id"]: e for e in gw.events if e["Type"] == "cleaned_up"}
        self.assertEqual(set(cleaned) & {pid, started}, {pid, started},
                         "version 4: every process the session controls is stopped")
        for e in cleaned.values():
            self.assertEqual(e["Cause"], "")
            self.assertIn(e["Process"]["status"], ("stopped", "failed"))

    def test_another_sessions_record_is_refused(self):
        gw = self.gw
        other = self.gateway()
        pid = other.start("sleep 20")["id"]
        self.addCleanup(lambda: other.call("process/stop", {"id": pid}))
        # Same environment root, other session: its records are not ours.
        err = gw.fail("process/get", {"id": pid})
        self.assertIn(err.split(":")[0], ("not_found", "permission_denied"))


# Once told its id (in a file go-forge in its directory), the process sets
# its own record's next_recheck_at in the past, as a record written minutes
# ago reads now: under the records' lock, without bumping the stamp
# counter, so no change wakes the watcher.  $PPID is its supervisor, whose
# argv names the records' directory: --ctl of `sg-helper proc spawn`, or
# on remote backends, where the spawn's words come on stdin of `sg-helper
# job`, proc/ beside its --tmp.
FORGE_DUE = r"""
arg() { tr '\0' '\n' </proc/$PPID/cmdline | sed -n "/^--$1\$/{n;p;q;}"; }
ctl=$(arg ctl)
[ -n "$ctl" ] || ctl=$(dirname "$(arg tmp)")/proc
[ -e "$ctl/.seq" ] || exit 3
: > armed
until [ -s go-forge ]; do sleep 0.1; done
python3 - "$ctl" "$(cat go-forge)" <<'PY' || exit 4
import fcntl, os, re, sys
ctl, pid = sys.argv[1:]
with open(os.path.join(ctl, ".seq"), "a") as lock:
    fcntl.flock(lock, fcntl.LOCK_EX)
    path = os.path.join(ctl, pid, "record.json")
    text = open(path).read()
    text, n = re.subn(r'"next_recheck_at":"[^"]*"',
                      '"next_recheck_at":"2001-01-01T00:00:00.000Z"', text)
    if n != 1:
        sys.exit(5)
    open(path + ".forged", "w").write(text)
    os.rename(path + ".forged", path)
PY
: > forged
exec sleep 60
"""


class Rechecks(GatewayTestCase):
    def wait_for_file(self, gw, pid, name):
        """Until the process made name; skipped when it ended first."""
        deadline = time.monotonic() + 10 * SLACK
        while name not in gw.sh_ok("ls").split():
            rec = gw.ok("process/get", {"id": pid})
            if rec["status"] != "running":
                self.skipTest("the process could not find or rewrite its record here "
                              "(exit %s)" % rec["exit_code"])
            self.assertLess(time.monotonic(), deadline, "no %s from the process" % name)
            time.sleep(0.2)

    def test_recheck_due_is_announced_at_the_watchers_next_wake(self):
        """A recheck that had fallen due was found by a `proc list` the
        watcher ran at most every 30 s beside its waits: on the ssh
        backend one more session, which benchmark S4 counted against a
        tenth of process/read calls.  The watcher's wait now marks and
        answers due records itself, so the event follows its next wake."""
        gw = self.gateway()
        if gw.sh("command -v python3 && command -v sed", "unconfined")["exit_code"] != 0:
            self.skipTest("no python3 or sed in the environment")
        pid = gw.start(FORGE_DUE, "unconfined")["id"]
        self.addCleanup(lambda: gw.call("process/stop", {"id": pid}))
        self.wait_for_file(gw, pid, "armed")
        rec = gw.ok("process/recheck", {"id": pid, "minutes": 5})
        self.assertNotIn("pending_recheck_at", rec)
        gw.sh_ok("echo %s > go-forge" % pid)
        self.wait_for_file(gw, pid, "forged")
        # Any change wakes the watcher: another process starts.
        other = gw.start("sleep 30")["id"]
        self.addCleanup(lambda: gw.call("process/stop", {"id": other}))
        due = gw.wait_event(lambda e: e.get("Type") == "recheck_due"
                            and e["Process"]["id"] == pid, 10 * SLACK, "recheck_due")
        self.assertEqual(due["Cause"], "")
        self.assertEqual(due["Process"]["status"], "running")
        self.assertRegex(due["Process"]["pending_recheck_at"], STAMP)
        self.assertEqual(gw.ok("process/get", {"id": pid})["pending_recheck_at"],
                         due["Process"]["pending_recheck_at"])
        # Marked pending, it is announced once, whatever wakes the watcher.
        gw.ok("process/stop", {"id": other})
        time.sleep(1)
        self.assertEqual([e for e in gw.events if e.get("Type") == "recheck_due"], [due])
        # Delivered, it is due again only after its minutes.
        rec = gw.ok("process/recheck_delivered", {"id": pid})
        self.assertNotIn("pending_recheck_at", rec)


if __name__ == "__main__":
    unittest.main()
