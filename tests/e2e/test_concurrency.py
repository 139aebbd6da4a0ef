"""Requests run concurrently: a waiting request never holds others back, and
every reply goes to its own request (protocol-v4 sections 1 and 5)."""

import json
import threading
import time
import unittest

from sgclient import SEC, GatewayTestCase


def poll(pid, seconds):
    """process/read's data for a long poll on pid's output."""
    return {"id": pid, "options": {"OffsetBytes": 0, "Wait": seconds * SEC}}


class Concurrency(GatewayTestCase):
    shared_gateway = True

    def timed_list(self):
        t0 = time.monotonic()
        self.gw.view("list_files", {})
        return time.monotonic() - t0

    def test_long_read_does_not_delay_execute(self):
        gw = self.gw
        self.timed_list()  # warm up
        pid = gw.start("sleep 120")["id"]
        try:
            # Judged by order: the list answers while the poll still waits.
            rid = gw.request("process/read", poll(pid, 30))
            time.sleep(0.1)
            took = self.timed_list()
            self.assertFalse(gw.has_reply(rid),
                             "list_files (%.3f s) came after the long poll" % took)
        finally:
            gw.stop(pid)
        self.assertNotIn("error", gw.wait_reply(rid, 10))

    def test_back_to_back_requests_are_not_serialised(self):
        # A long poll and a list written in one go: the list must not queue
        # behind the poll (a pool that counts a waking worker as idle twice
        # would run them one after the other).
        gw = self.gw
        pid = gw.start("sleep 120")["id"]
        try:
            for _ in range(5):
                rid, lid = gw.new_id(), gw.new_id()
                read = {"token": gw.token, "id": rid, "method": "process/read",
                        "data": poll(pid, 30)}
                ls = {"token": gw.token, "id": lid, "method": "execute",
                      "data": {"call": {"id": "c", "name": "list_files", "arguments": "{}",
                                        "kind": "function"},
                               "permission_mode": "standard", "actor": gw.session}}
                gw.expect_sent(rid)
                gw.expect_sent(lid)
                t0 = time.monotonic()
                gw.send_raw((json.dumps(read) + "\n" + json.dumps(ls) + "\n").encode())
                r = gw.wait_reply(lid, 25)
                took = time.monotonic() - t0
                self.assertNotIn("error", r)
                self.assertFalse(gw.has_reply(rid),
                                 "list_files (%.3f s) came after a long poll sent with it"
                                 % took)
                gw.cancel(rid)
                self.assertReplyCode(gw.wait_reply(rid, 10), "cancelled")
        finally:
            gw.stop(pid)

    def test_many_long_polls_do_not_starve(self):
        # Judged by order, not by a stopwatch: a list sent behind twelve
        # long polls must answer while every poll still waits.  Queued
        # behind them it could only come after their 30 s; under gVisor's
        # ptrace platform on a loaded machine a list alone takes seconds,
        # so how long it takes is not this test's to judge.
        gw = self.gw
        pids = [gw.start("sleep 120")["id"] for _ in range(12)]
        try:
            rids = [gw.request("process/read", poll(p, 30)) for p in pids]
            time.sleep(0.2)
            took = self.timed_list()
            answered = [r for r in rids if gw.has_reply(r)]
            self.assertEqual(answered, [], "list_files (%.3f s) came after long polls" % took)
        finally:
            for p in pids:
                gw.stop(p)
        for r in rids:
            self.assertNotIn("error", gw.wait_reply(r, 10))

    def test_concurrent_replies_stay_with_their_caller(self):
        # The host's client test: 16 callers at once, each its own reply.
        gw = self.gw
        names = ["c%02d.txt" % i for i in range(16)]
        for n in names:
            gw.write(n, n)
        got, errors = {}, []

        def caller(n):
            try:
                got[n] = gw.tool_ok("read_file", {"path": n})["structured_content"]["text"]
            except Exception as e:  # reported below, on the test's thread
                errors.append(e)

        threads = [threading.Thread(target=caller, args=(n,)) for n in names]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        self.assertEqual(errors, [])
        self.assertEqual(got, {n: n for n in names})

    def test_parallel_processes_each_get_events(self):
        gw = self.gw
        pids = [gw.start("printf %d" % i)["id"] for i in range(6)]
        for i, pid in enumerate(pids):
            ev = gw.wait_event(lambda e, pid=pid: e["Type"] == "stopped"
                               and e["Process"]["id"] == pid, 20, "end of " + pid)
            self.assertEqual(ev["Cause"], "natural_exit")
            self.assertEqual(ev["Process"]["exit_code"], 0)
            out, _ = gw.read_all(pid)
            self.assertEqual(out, str(i))
            types = [e["Type"] for e in gw.events_for(pid)]
            self.assertEqual(types[0], "started")
            self.assertEqual(types[-1], "stopped")


if __name__ == "__main__":
    unittest.main()
