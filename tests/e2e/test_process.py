"""Processes: start, read with offsets and long polls, stop, events, list
(docs/protocol.md section 8)."""

import json
import re
import time
import unittest

from sgclient import MiB, ROOT, SEC, SLACK, GatewayTestCase, unique

RECORD_KEYS = {"id", "operation_id", "root_thread_id", "command", "argv", "cwd", "status",
               "pid", "exit_code", "signal", "started_at", "ended_at", "managed"}
READ_KEYS = {"Process", "Output", "StartOffset", "EndOffset", "TotalBytes", "Truncated",
             "TimedOut", "Duration"}
STAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$")


class Processes(GatewayTestCase):
    shared_gateway = True

    def stop(self, pid, grace_ms=None):
        data = {"id": pid}
        if grace_ms is not None:
            data["grace_ms"] = grace_ms
        return self.gw.ok("process/stop", data)

    def ended_event(self, pid, timeout=30):
        return self.gw.wait_event(
            lambda e: e["data"].get("Process", {}).get("id") == pid
            and e["data"].get("Type") in ("exited", "stopped", "lost"),
            timeout, "end event of %s" % pid)

    def assertRecord(self, rec):
        self.assertEqual(set(rec) & RECORD_KEYS, RECORD_KEYS, json.dumps(rec))
        self.assertIsInstance(rec["id"], str)
        self.assertEqual(rec["root_thread_id"], self.gw.session)
        self.assertIn(rec["status"], ("running", "exited", "stopped", "failed", "lost"))
        self.assertRegex(rec["started_at"], STAMP)
        if rec["status"] in ("exited", "stopped"):
            self.assertRegex(rec["ended_at"], STAMP)

    # ---- start, events, records ---------------------------------------------

    def test_start_reply_then_events(self):
        gw = self.gw
        op = unique("op")
        reply = gw.call("process/start", {"command": "printf hello; exit 3",
                                          "operation_id": op})
        self.assertNotIn("error", reply)
        rec = reply["data"]
        self.assertRecord(rec)
        self.assertEqual(rec["operation_id"], op)
        self.assertEqual(rec["command"], "printf hello; exit 3")
        self.assertIsNone(rec["argv"])
        self.assertEqual(rec["cwd"].rstrip("/"), ROOT.rstrip("/"))
        self.assertIs(rec["managed"], True)
        self.assertIn(rec["status"], ("running", "exited"))
        self.assertIsInstance(rec["pid"], int)
        pid = rec["id"]
        started = gw.wait_event(lambda e: e["data"].get("Type") == "started"
                                and e["data"]["Process"]["id"] == pid, 10, "started event")
        self.assertLess(reply.seq, started.seq, "the reply is written before its started event")
        self.assertIsInstance(started["data"].get("Cause"), str)
        self.assertNotIn("id", started)
        ended = self.ended_event(pid)
        self.assertEqual(ended["data"]["Type"], "exited")
        self.assertTrue(ended["data"]["Cause"])
        final = ended["data"]["Process"]
        self.assertEqual(final["status"], "exited")
        self.assertEqual(final["exit_code"], 3)
        self.assertEqual(final["operation_id"], op)
        self.assertRegex(final["ended_at"], STAMP)
        got = gw.ok("process/get", {"id": pid})
        self.assertRecord(got)
        self.assertEqual((got["status"], got["exit_code"], got["operation_id"]),
                         ("exited", 3, op))
        out, _ = gw.read_all(pid)
        self.assertEqual(out, "hello")

    def test_argv_record(self):
        gw = self.gw
        rec = gw.start(argv=["printf", "%s", "a b"])
        self.assertIsNone(rec["command"])
        self.assertEqual(rec["argv"], ["printf", "%s", "a b"])
        out, last = gw.read_all(rec["id"])
        self.assertEqual(out, "a b")
        self.assertEqual(last["Process"]["argv"], ["printf", "%s", "a b"])

    def test_list_keeps_operation_id(self):
        gw = self.gw
        ops = [unique("op") for _ in range(2)]
        pids = [gw.start(command="true", operation_id=op)["id"] for op in ops]
        pids.append(gw.start(command="true")["id"])
        listing = gw.ok("process/list", {})["processes"]
        by_id = {p["id"]: p for p in listing}
        for pid, op in zip(pids, ops + [None]):
            self.assertIn(pid, by_id)
            self.assertEqual(by_id[pid]["operation_id"], op)
        for rec in listing:
            self.assertRecord(rec)

    def test_unknown_ids(self):
        gw = self.gw
        for method in ("process/get", "process/read", "process/stop"):
            self.assertCode(gw.fail(method, {"id": "p-no-such-e2e"}), "not_found", method)

    def test_spawn_failure_is_a_failed_record(self):
        gw = self.gw
        rec = gw.start(argv=["/nonexistent/sg-e2e-program"])
        self.assertEqual(rec["status"], "failed")
        time.sleep(0.3)
        self.assertEqual(gw.events_for(rec["id"]), [], "a failed spawn has no events")

    def test_env_and_cwd(self):
        gw = self.gw
        d = unique("pcwd")
        gw.tool_ok("make_dir", {"path": d})
        rec = gw.start(command="pwd; printf %s \"$SG_E2E_P\"; env", cwd=d,
                       env={"SG_E2E_P": "pval"})
        out, _ = gw.read_all(rec["id"])
        lines = out.splitlines()
        self.assertEqual(lines[0], ROOT.rstrip("/") + "/" + d)
        self.assertTrue(lines[1].startswith("pval"))
        self.assertNotIn(gw.canary, out)

    def test_interleaved_stream(self):
        out, _ = self.gw.read_all(self.gw.start(command="echo a; echo b >&2; echo c")["id"])
        self.assertEqual(out, "a\nb\nc\n")

    # ---- reads -------------------------------------------------------------

    def test_offsets(self):
        gw = self.gw
        pid = gw.start(command="printf 0123456789")["id"]
        gw.wait_ended(pid)
        r = gw.read(pid, offset=0, max_bytes=4)
        self.assertEqual(set(r), READ_KEYS)
        self.assertEqual((r["Output"], r["StartOffset"], r["EndOffset"], r["TotalBytes"]),
                         ("0123", 0, 4, 10))
        self.assertIs(r["Truncated"], False)
        self.assertIs(r["TimedOut"], False)
        r = gw.read(pid, offset=4, max_bytes=100)
        self.assertEqual((r["Output"], r["StartOffset"], r["EndOffset"]), ("456789", 4, 10))
        r = gw.read(pid, offset=7)  # MaxBytes 0 means the default
        self.assertEqual(r["Output"], "789")
        r = gw.read(pid, offset=100)
        self.assertEqual((r["Output"], r["StartOffset"], r["EndOffset"], r["TotalBytes"]),
                         ("", 10, 10, 10), "past TotalBytes: an empty window at TotalBytes")

    def test_long_poll_returns_when_output_arrives(self):
        gw = self.gw
        pid = gw.start(command="sleep 0.5; printf late; sleep 20")["id"]
        try:
            t0 = time.monotonic()
            r = gw.read(pid, offset=0, wait_ns=10 * SEC)
            took = time.monotonic() - t0
            self.assertEqual(r["Output"], "late")
            self.assertIs(r["TimedOut"], False)
            self.assertLess(took, 3 * SLACK, "long poll held %.1f s after output came" % took)
            self.assertIsInstance(r["Duration"], int)
            self.assertGreater(r["Duration"], 0.2 * SEC, "Duration is nanoseconds")
            self.assertLess(r["Duration"], (took + 0.5) * SEC)
        finally:
            self.stop(pid, 0)

    def test_timed_out(self):
        gw = self.gw
        pid = gw.start(command="sleep 20")["id"]
        try:
            t0 = time.monotonic()
            r = gw.read(pid, offset=0, wait_ns=SEC * 3 // 10)
            took = time.monotonic() - t0
            self.assertIs(r["TimedOut"], True)
            self.assertEqual(r["Output"], "")
            self.assertEqual(r["Process"]["status"], "running")
            self.assertGreaterEqual(took, 0.28)
            self.assertLess(took, 3 * SLACK)
            self.assertIsInstance(r["Duration"], int)
            self.assertGreaterEqual(r["Duration"], 0.28 * SEC)
            self.assertLess(r["Duration"], 3 * SLACK * SEC)
            r = gw.read(pid, offset=0, wait_ns=0)
            self.assertIs(r["TimedOut"], True, "also with Wait 0")
        finally:
            self.stop(pid, 0)

    def test_ended_process_answers_at_once(self):
        gw = self.gw
        pid = gw.start(command="printf x")["id"]
        gw.wait_ended(pid)
        t0 = time.monotonic()
        r = gw.read(pid, offset=1, wait_ns=10 * SEC)
        self.assertLess(time.monotonic() - t0, 2 * SLACK)
        self.assertIs(r["TimedOut"], False)
        self.assertEqual(r["Output"], "")

    def test_min_dwell_batches(self):
        gw = self.gw
        pid = gw.start(command="printf a; sleep 0.2; printf b; sleep 20")["id"]
        try:
            r = gw.read(pid, offset=0, wait_ns=5 * SEC, min_dwell_ns=SEC)
            self.assertEqual(r["Output"], "ab")
            self.assertLess(r["Duration"], 4 * SEC)
        finally:
            self.stop(pid, 0)

    def test_retention_drops_oldest(self):
        gw = self.gw
        total = 9 * MiB
        pid = gw.start(command="head -c %d /dev/zero | tr '\\000' x; printf END" % total)["id"]
        gw.wait_ended(pid, 60)
        r = gw.read(pid, offset=0)
        self.assertEqual(r["TotalBytes"], total + 3)
        self.assertIs(r["Truncated"], True)
        self.assertGreater(r["StartOffset"], 0)
        self.assertGreaterEqual(r["StartOffset"], total + 3 - 8 * MiB)
        self.assertEqual(r["EndOffset"] - r["StartOffset"], len(r["Output"]))
        self.assertLessEqual(len(r["Output"]), 64 * 1024, "MaxBytes defaults to 64 KiB")
        r = gw.read(pid, offset=total - 2)
        self.assertEqual(r["Output"], "xxEND")
        self.assertIs(r["Truncated"], False)

    def test_invalid_utf8(self):
        gw = self.gw
        pid = gw.start(command="printf 'a\\377b\\303'")["id"]
        gw.wait_ended(pid)
        r = gw.read(pid, offset=0)
        self.assertEqual(r["Output"], "a\ufffdb\ufffd")
        self.assertEqual((r["EndOffset"], r["TotalBytes"]), (4, 4), "offsets count raw bytes")
        r = gw.read(pid, offset=2)
        self.assertEqual((r["Output"], r["StartOffset"]), ("b\ufffd", 2))

    def test_no_split_characters(self):
        gw = self.gw
        # a b EURO(3 bytes) c d GRINNING FACE(4 bytes)
        pid = gw.start(command="printf 'ab\\342\\202\\254cd\\360\\237\\230\\200'")["id"]
        gw.wait_ended(pid)
        cases = [  # offset, MaxBytes -> Output, EndOffset
            (0, 3, "ab", 2), (0, 4, "ab", 2), (0, 5, "ab\u20ac", 5),
            (2, 1, "\u20ac", 5),  # smaller than the character: it comes whole
            (2, 3, "\u20ac", 5), (5, 3, "cd", 7), (7, 2, "\U0001F600", 11),
            (6, 4, "d", 7), (0, 100, "ab\u20accd\U0001F600", 11)]
        for off, mx, want, end in cases:
            r = gw.read(pid, offset=off, max_bytes=mx)
            self.assertEqual((r["Output"], r["EndOffset"]), (want, end),
                             "offset %d MaxBytes %d" % (off, mx))

    # ---- stop ---------------------------------------------------------------

    def test_stop_sends_sigterm(self):
        gw = self.gw
        pid = gw.start(command="sleep 20")["id"]
        gw.wait_event(lambda e: e["data"].get("Type") == "started"
                      and e["data"]["Process"]["id"] == pid, 10, "started")
        t0 = time.monotonic()
        rec = self.stop(pid)
        self.assertLess(time.monotonic() - t0, 1.5 * SLACK, "sleep dies on SIGTERM at once")
        self.assertEqual(rec["status"], "stopped")
        self.assertEqual(rec["signal"], "SIGTERM")
        self.assertRegex(rec["ended_at"], STAMP)
        ev = self.ended_event(pid)
        self.assertEqual(ev["data"]["Type"], "stopped")
        self.assertTrue(ev["data"]["Cause"])
        self.assertEqual(ev["data"]["Process"]["status"], "stopped")
        self.assertEqual(gw.ok("process/get", {"id": pid})["status"], "stopped")

    def test_stop_kills_after_grace(self):
        gw = self.gw
        pid = gw.start(command="trap '' TERM; echo ready; sleep 20")["id"]
        r = gw.read(pid, offset=0, wait_ns=10 * SEC)
        self.assertIn("ready", r["Output"])
        t0 = time.monotonic()
        rec = self.stop(pid, 400)
        took = time.monotonic() - t0
        self.assertGreaterEqual(took, 0.35, "grace_ms was not waited for")
        self.assertLess(took, 5 * SLACK)
        self.assertEqual(rec["status"], "stopped")
        self.assertEqual(rec["signal"], "SIGKILL")
        ev = self.ended_event(pid)
        self.assertEqual(ev["data"]["Type"], "stopped")

    def test_stop_ended_process_returns_final_record(self):
        gw = self.gw
        pid = gw.start(command="exit 0")["id"]
        gw.wait_ended(pid)
        rec = self.stop(pid)
        self.assertEqual((rec["status"], rec["exit_code"]), ("exited", 0))

    def test_timeout_ms_ends_stopped(self):
        gw = self.gw
        t0 = time.monotonic()
        pid = gw.start(command="sleep 20", timeout_ms=300)["id"]
        rec = gw.wait_ended(pid, 10)
        self.assertLess(time.monotonic() - t0, 5 * SLACK)
        self.assertEqual(rec["status"], "stopped")


if __name__ == "__main__":
    unittest.main()
