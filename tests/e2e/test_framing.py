"""Framing (docs/protocol.md sections 1 and 11)."""

import json
import time
import unittest

from sgclient import SEC, MiB, GatewayTestCase, unique

MAX_FRAME = 16 * MiB


class Malformed(GatewayTestCase):

    def assertShutsDownSilently(self, gw, raw, what):
        before = len(gw.messages)
        gw.send_raw(raw)
        rc, err = gw.wait_exit(20)
        self.assertEqual(gw.messages[before:], [], "%s: no reply to a malformed frame" % what)
        self.assertEqual(rc, 0, "%s: exit status; stderr tail:\n%s" % (what, err[-2000:]))

    def test_malformed_frames_shut_down(self):
        for raw in (b"not json\n", b"[1,2]\n", b"\"str\"\n", b"\n",
                    b"{\"method\":\"process/list\",\"data\":{}}\n",
                    b"{\"id\":1.5,\"method\":\"process/list\"}\n",
                    b"{\"id\":true,\"method\":\"process/list\"}\n",
                    b"{\"id\":null,\"method\":\"process/list\"}\n",
                    b"{\"id\":{},\"method\":\"process/list\"}\n",
                    b"{\"id\":1,\"method\":\"process/list\"\n"):
            with self.subTest(frame=raw):
                gw = self.gateway(init=False)
                self.assertShutsDownSilently(gw, raw, repr(raw))

    def test_malformed_frame_after_initialize(self):
        gw = self.gateway()
        self.assertShutsDownSilently(gw, b"{oops}\n", "after initialize")

    def test_oversized_frame_shuts_down(self):
        gw = self.gateway()
        rid = "too-big"
        head = json.dumps({"id": rid, "method": "no/such", "token": gw.token})[:-1]
        pad = MAX_FRAME + 1 - len(head) - len(',"data":{"pad":""}}\n')
        frame = (head + ',"data":{"pad":"' + "a" * pad + '"}}\n').encode()
        self.assertEqual(len(frame), MAX_FRAME + 1)
        gw.expect_sent(rid)
        before = len(gw.messages)
        gw.send_raw(frame)  # may fail half way: the gateway stops reading
        rc, err = gw.wait_exit(30)
        self.assertEqual(gw.messages[before:], [], "no reply to an oversized frame")
        self.assertEqual(rc, 0, err[-2000:])

    def test_frame_of_exactly_16_mib_is_accepted(self):
        gw = self.gateway()
        rid = "edge"
        head = json.dumps({"id": rid, "method": "no/such", "token": gw.token})[:-1]
        pad = MAX_FRAME - len(head) - len(',"data":{"pad":""}}\n')
        frame = (head + ',"data":{"pad":"' + "a" * pad + '"}}\n').encode()
        self.assertEqual(len(frame), MAX_FRAME)
        gw.expect_sent(rid)
        self.assertTrue(gw.send_raw(frame))
        self.assertReplyCode(gw.wait_reply(rid, 30), "unknown_method")
        self.assertIn("processes", gw.ok("process/list", {}))

    def test_fifteen_mib_write_file(self):
        gw = self.gateway()
        size = 15 * MiB
        name = unique("big") + ".txt"
        res = gw.tool_ok("write_file", {"path": name, "content": "x" * size}, timeout=120)
        self.assertEqual(res["metadata"]["bytes_written"], size)
        self.assertEqual(gw.tool_ok("stat_path", {"path": name})["metadata"]["size"], size)

    def test_unterminated_last_line_is_ignored(self):
        gw = self.gateway()
        gw.expect_sent(77)
        line = json.dumps({"id": 77, "method": "process/list", "token": gw.token, "data": {}})
        gw.send_raw(line.encode())
        rc, err, _ = gw.shutdown()
        self.assertEqual(rc, 0, err[-2000:])
        self.assertFalse(gw.has_reply(77), "an unterminated last line must not run")


class Requests(GatewayTestCase):
    shared_gateway = True

    def test_id_without_method(self):
        gw = self.gw
        gw.expect_sent(41)
        gw.send_raw(b'{"id":41,"token":"%s","data":{}}\n' % gw.token.encode())
        self.assertReplyCode(gw.wait_reply(41), "invalid_request")
        gw.expect_sent("s41")
        gw.send_raw(b'{"id":"s41"}\n')
        self.assertReplyCode(gw.wait_reply("s41"), "invalid_request")
        self.assertIn("processes", gw.ok("process/list", {}), "the connection lives on")

    def test_unknown_method(self):
        self.assertCode(self.gw.fail("frobnicate", {}), "unknown_method")

    def test_ids_are_echoed_unchanged(self):
        gw = self.gw
        for rid in (0, -7, 2**53 + 1, 2**62, "", "ïd ☃ \"q\"", "12"):
            r = gw.call("process/list", {}, id=rid)
            self.assertEqual(r["id"], rid)
            self.assertIs(type(r["id"]), type(rid))
            self.assertIn("processes", r["data"])

    def test_string_and_integer_ids_are_distinct(self):
        gw = self.gw
        pid = gw.start(command="sleep 20")["id"]
        try:
            slow = gw.request("process/read", {"id": pid, "Wait": SEC}, id=31)
            fast = gw.call("process/list", {}, id="31", timeout=10)
            self.assertNotIn("error", fast, "\"31\" is not the in-flight 31")
            r = gw.wait_reply(slow, 10)
            self.assertNotIn("error", r)
            self.assertIs(r["id"], 31)
            self.assertIs(r["data"]["TimedOut"], True)
        finally:
            gw.ok("process/stop", {"id": pid, "grace_ms": 0})

    def test_duplicate_in_flight_id(self):
        gw = self.gw
        rid = unique("dup")
        gw.execute_req("run_command", {"command": "sleep 0.8; echo first"}, id=rid)
        time.sleep(0.1)
        gw.execute_req("stat_path", {"path": "."}, id=rid)
        first = gw.wait_reply(rid, 10)
        self.assertReplyCode(first, "invalid_request", "duplicate id")
        second = gw.wait_reply(rid, 30)
        self.assertNotIn("error", second)
        self.assertIn("first", second["data"]["content"])
        # Once answered, the id may be used again.
        self.assertNotIn("error", gw.execute("stat_path", {"path": "."}, id=rid))

    def test_pipelined_and_split_writes(self):
        gw = self.gw
        lines = []
        for i in range(40):
            lines.append(json.dumps({"id": "pipe-%d" % i, "method": "process/list",
                                     "token": gw.token, "data": {}}))
            gw.expect_sent("pipe-%d" % i)
        gw.send_raw(("\n".join(lines) + "\n").encode())
        for i in range(40):
            self.assertIn("processes", gw.wait_reply("pipe-%d" % i, 30)["data"])
        frame = json.dumps({"id": "split", "method": "process/list", "token": gw.token,
                            "data": {}}).encode() + b"\n"
        gw.expect_sent("split")
        gw.send_raw(frame[:10])
        time.sleep(0.15)
        self.assertFalse(gw.has_reply("split"))
        gw.send_raw(frame[10:])
        self.assertIn("processes", gw.wait_reply("split", 10)["data"])


if __name__ == "__main__":
    unittest.main()
