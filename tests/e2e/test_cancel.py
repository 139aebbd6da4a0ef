"""cancel (protocol-v4.md section 5 and 10)."""

import time
import unittest

from sgclient import SEC, SLACK, GatewayTestCase, Marker, live_checker, wait_gone


class Cancel(GatewayTestCase):
    shared_gateway = True

    def test_cancel_running_command(self):
        gw = self.gw
        count = live_checker(gw)
        m = Marker()
        rid = gw.execute_req("run_command", {"command": m.command})
        if count is not None:
            deadline = time.monotonic() + 10
            while count(m) == 0:
                self.assertLess(time.monotonic(), deadline, "the command never started")
                time.sleep(0.05)
        else:
            time.sleep(0.5)
        self.assertFalse(gw.has_reply(rid))
        t0 = time.monotonic()
        creply = gw.call("cancel", {"id": rid}, timeout=10)
        self.assertEqual(creply.get("data"), {"cancelled": True})
        r = gw.wait_reply(rid, 10)
        self.assertLess(time.monotonic() - t0, 5 * SLACK, "cancel took too long")
        self.assertReplyCode(r, "cancelled")
        self.assertGreater(r.seq, creply.seq, "the terminal reply comes after the cancel reply")
        if count is not None:
            self.assertTrue(wait_gone(count, m, 1.0),
                            "the cancelled command's child is still running")
        # Exactly one reply: nothing more arrives for rid.
        time.sleep(0.2)
        self.assertFalse(gw.has_reply(rid), "a second reply to a cancelled request")

    def test_cancel_unknown_or_finished(self):
        gw = self.gw
        self.assertEqual(gw.ok("cancel", {"id": 987654321}), {"cancelled": False})
        self.assertEqual(gw.ok("cancel", {"id": "never-sent"}), {"cancelled": False})
        done = gw.execute_req("stat_path", {"path": "."})
        gw.wait_reply(done)
        self.assertEqual(gw.ok("cancel", {"id": done}), {"cancelled": False})

    def test_cancel_long_poll_and_string_ids(self):
        gw = self.gw
        pid = gw.start(command="sleep 20")["id"]
        try:
            rid = gw.request("process/read", {"id": pid, "OffsetBytes": 0, "Wait": 20 * SEC},
                             id="read-" + pid)
            time.sleep(0.2)
            self.assertFalse(gw.has_reply(rid))
            t0 = time.monotonic()
            self.assertEqual(gw.ok("cancel", {"id": rid}), {"cancelled": True})
            r = gw.wait_reply(rid, 10)
            self.assertReplyCode(r, "cancelled")
            self.assertLess(time.monotonic() - t0, 3 * SLACK)
            self.assertEqual(r["id"], rid, "the string id is echoed unchanged")
            # Cancelling a read does not touch the process.
            self.assertEqual(gw.ok("process/get", {"id": pid})["status"], "running")
        finally:
            gw.ok("process/stop", {"id": pid, "grace_ms": 0})


if __name__ == "__main__":
    unittest.main()
