"""Requests run concurrently: a waiting request never holds others back
(docs/protocol.md sections 8 and 9)."""

import json
import time
import unittest

from sgclient import SEC, SLACK, GatewayTestCase


class Concurrency(GatewayTestCase):
    shared_gateway = True

    def timed_stat(self):
        t0 = time.monotonic()
        self.gw.tool_ok("stat_path", {"path": "."})
        return time.monotonic() - t0

    def test_long_read_does_not_delay_execute(self):
        gw = self.gw
        self.timed_stat()  # warm up
        pid = gw.start(command="sleep 20")["id"]
        try:
            rid = gw.request("process/read", {"id": pid, "OffsetBytes": 0, "Wait": 5 * SEC})
            time.sleep(0.1)
            took = self.timed_stat()
            self.assertLess(took, 0.5 * SLACK, "stat_path took %.3f s behind a long poll" % took)
            self.assertFalse(gw.has_reply(rid), "the long poll returned early")
        finally:
            gw.ok("process/stop", {"id": pid, "grace_ms": 0})
        r = gw.wait_reply(rid, 10)
        self.assertNotIn("error", r)

    def test_back_to_back_requests_are_not_serialised(self):
        # A long poll and a stat written in one go: the stat must not queue
        # behind the poll (a pool that counts a waking worker as idle twice
        # would run them one after the other).
        gw = self.gw
        pid = gw.start(command="sleep 20")["id"]
        try:
            for _ in range(5):
                rid, sid = gw.new_id(), gw.new_id()
                read = {"id": rid, "method": "process/read", "token": gw.token,
                        "data": {"id": pid, "OffsetBytes": 0, "Wait": 3 * SEC}}
                stat = {"id": sid, "method": "execute", "token": gw.token,
                        "data": {"tool": "stat_path",
                                 "call": {"id": "c", "arguments": json.dumps({"path": "."})}}}
                gw.expect_sent(rid)
                gw.expect_sent(sid)
                t0 = time.monotonic()
                gw.send_raw((json.dumps(read) + "\n" + json.dumps(stat) + "\n").encode())
                r = gw.wait_reply(sid, 10)
                took = time.monotonic() - t0
                self.assertNotIn("error", r)
                self.assertLess(took, 0.5 * SLACK,
                                "stat_path took %.3f s behind a long poll sent with it" % took)
                self.assertFalse(gw.has_reply(rid), "the long poll returned early")
                gw.ok("cancel", {"id": rid})
                gw.wait_reply(rid, 10)
        finally:
            gw.ok("process/stop", {"id": pid, "grace_ms": 0})

    def test_many_long_polls_do_not_starve(self):
        gw = self.gw
        pids = [gw.start(command="sleep 20")["id"] for _ in range(12)]
        try:
            rids = [gw.request("process/read", {"id": p, "OffsetBytes": 0, "Wait": 5 * SEC})
                    for p in pids]
            time.sleep(0.2)
            took = self.timed_stat()
            self.assertLess(took, 0.5 * SLACK, "stat_path took %.3f s behind 12 long polls" % took)
            self.assertFalse(any(gw.has_reply(r) for r in rids))
        finally:
            for p in pids:
                gw.ok("process/stop", {"id": p, "grace_ms": 0})
        for r in rids:
            self.assertNotIn("error", gw.wait_reply(r, 10))

    def test_parallel_processes_each_get_events(self):
        gw = self.gw
        pids = [gw.start(command="printf %d" % i)["id"] for i in range(6)]
        for i, pid in enumerate(pids):
            ev = gw.wait_event(lambda e, pid=pid: e["data"].get("Type") == "exited"
                               and e["data"]["Process"]["id"] == pid, 20, "exit of " + pid)
            self.assertEqual(ev["data"]["Process"]["exit_code"], 0)
            out, _ = gw.read_all(pid)
            self.assertEqual(out, str(i))
            types = [e["data"]["Type"] for e in gw.events_for(pid)]
            self.assertEqual(types, ["started", "exited"])


if __name__ == "__main__":
    unittest.main()
