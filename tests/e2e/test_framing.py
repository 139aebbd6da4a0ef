"""Framing (protocol-v4 sections 1 and 9)."""

import json
import os
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
        # What the host's own decoder could not have written: not JSON, not
        # an object, an id of another type than string or integer.
        for raw in (b"not json\n", b"[1,2]\n", b"\"str\"\n", b"\n",
                    b"{\"id\":1.5,\"method\":\"process/list\"}\n",
                    b"{\"id\":true,\"method\":\"process/list\"}\n",
                    b"{\"id\":{},\"method\":\"process/list\"}\n",
                    b"{\"id\":[\"1\"],\"method\":\"process/list\"}\n",
                    b"{\"id\":\"1\",\"id\":\"2\",\"method\":\"process/list\"}\n",
                    b"{\"id\":\"1\",\"method\":\"process/list\"\n"):
            with self.subTest(frame=raw):
                if b'"id":"1","id"' in raw and os.environ.get("SG_PEER_BIN") and \
                        not os.environ.get("SG_CHAIN_RELAYS"):
                    # The host's outer adapter (outer.py) decodes and
                    # re-encodes each frame: a duplicate key never reaches
                    # sandgate, and what the outer makes of it is its own.
                    continue
                gw = self.gateway(init=False)
                self.assertShutsDownSilently(gw, raw, repr(raw))

    def test_malformed_frame_after_initialize(self):
        gw = self.gateway()
        self.assertShutsDownSilently(gw, b"{oops}\n", "after initialize")

    def test_malformed_frame_cancels_what_is_in_flight(self):
        gw = self.gateway()
        pid = gw.start("sleep 20")["id"]
        rid = gw.request("process/read", {"id": pid, "options": {
            "OffsetBytes": 0, "Wait": 20 * SEC}})
        time.sleep(0.2)
        t0 = time.monotonic()
        gw.send_raw(b"{oops}\n")
        rc, err = gw.wait_exit(20)
        self.assertLess(time.monotonic() - t0, 10, "the long poll held the shutdown")
        self.assertEqual(rc, 0, err[-2000:])
        r = [m for m in gw.messages if m.get("id") == rid]
        self.assertTrue(all("error" in m for m in r), "the poll was not run to its end")

    def test_oversized_frame_shuts_down(self):
        gw = self.gateway()
        rid = "too-big"
        head = json.dumps({"token": gw.token, "id": rid, "method": "no/such"})[:-1]
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
        head = json.dumps({"token": gw.token, "id": rid, "method": "no/such"})[:-1]
        pad = MAX_FRAME - len(head) - len(',"data":{"pad":""}}\n')
        frame = (head + ',"data":{"pad":"' + "a" * pad + '"}}\n').encode()
        self.assertEqual(len(frame), MAX_FRAME)
        gw.expect_sent(rid)
        self.assertTrue(gw.send_raw(frame))
        self.assertReplyCode(gw.wait_reply(rid, 30), "unknown_method")
        self.assertIsInstance(gw.ok("process/list"), list)

    def test_fifteen_mib_write_file(self):
        gw = self.gateway()
        size = 15 * MiB
        name = unique("big") + ".txt"
        v = gw.view("write_file", {"path": name, "content": "x" * size}, timeout=120)
        self.assertEqual(v["written_bytes"], size)

    def test_unterminated_last_line_is_ignored(self):
        gw = self.gateway()
        gw.expect_sent("77")
        line = json.dumps({"token": gw.token, "id": "77", "method": "process/list"})
        gw.send_raw(line.encode())
        rc, err, _ = gw.shutdown()
        self.assertEqual(rc, 0, err[-2000:])
        self.assertFalse(gw.has_reply("77"), "an unterminated last line must not run")


class Requests(GatewayTestCase):
    shared_gateway = True

    def test_frame_without_id_is_answered_under_the_empty_id(self):
        # The host's worker answers "missing or duplicate request id" under
        # the id it read, "" for none, and serves on.
        gw = self.gw
        for raw in (b'{"token":"%s","method":"process/list"}\n',
                    b'{"token":"%s","id":null,"method":"process/list"}\n',
                    b'{"token":"%s","id":"","method":"process/list"}\n'):
            before = len(gw.messages)
            gw.expect_sent("")
            gw.send_raw(raw % gw.token.encode())
            r = gw.wait_reply("", 10)
            self.assertReplyCode(r, "invalid_request")
            self.assertEqual(r["id"], "")
            self.assertEqual(len(gw.messages), before + 1)
        self.assertIsInstance(gw.ok("process/list"), list, "the connection lives on")

    def test_id_without_method(self):
        gw = self.gw
        gw.expect_sent("41")
        gw.send_raw(b'{"token":"%s","id":"41","data":{}}\n' % gw.token.encode())
        self.assertReplyCode(gw.wait_reply("41"), "invalid_request")
        self.assertIsInstance(gw.ok("process/list"), list, "the connection lives on")

    def test_unknown_method(self):
        self.assertCode(self.gw.fail("frobnicate", {}), "unknown_method")
        err = self.gw.fail("process/frobnicate", {})
        self.assertCode(err, "unknown_method")
        self.assertIn("unknown remote process operation", err)

    def test_ids_are_echoed_with_their_json_type(self):
        gw = self.gw
        for rid in ("1", "12", "ïd ☃ \"q\"", 0, -7, 2**53 + 1, 2**62):
            r = gw.call("process/list", id=rid)
            self.assertEqual(r["id"], rid)
            self.assertIs(type(r["id"]), type(rid))
            self.assertIsInstance(r["data"], list)

    def test_every_frame_needs_the_token(self):
        gw = self.gw
        for token in ("0" * 64, None, ""):
            err = gw.fail("process/list", token=token)
            self.assertCode(err, "bad_token", "token %r" % token)
        self.assertIsInstance(gw.ok("process/list"), list, "the connection lives on")

    def test_callback_nobody_waits_for_is_dropped(self):
        gw = self.gw
        before = len(gw.messages)
        gw.answer_tool({"id": "no-such-call"}, result={"content": []})
        gw.answer_tool({"id": "no-such-call-2"}, error="boom")
        time.sleep(0.3)
        self.assertEqual(gw.messages[before:], [], "a callback was answered")
        self.assertIsInstance(gw.ok("process/list"), list)

    def test_string_and_integer_ids_are_distinct(self):
        gw = self.gw
        pid = gw.start("sleep 20")["id"]
        try:
            slow = gw.request("process/read", {"id": pid, "options": {
                "OffsetBytes": 0, "Wait": SEC}}, id=31)
            fast = gw.call("process/list", id="31", timeout=10)
            self.assertNotIn("error", fast, "\"31\" is not the in-flight 31")
            r = gw.wait_reply(slow, 10)
            self.assertNotIn("error", r)
            self.assertIs(r["id"], 31)
            self.assertIs(r["data"]["TimedOut"], True)
        finally:
            gw.stop(pid)

    def test_duplicate_in_flight_id(self):
        gw = self.gw
        rid = unique("dup")
        gw.execute_req("bash", {"command": "sleep 0.8; echo first"}, id=rid)
        time.sleep(0.1)
        gw.request("process/list", id=rid)
        first = gw.wait_reply(rid, 10)
        self.assertReplyCode(first, "invalid_request", "duplicate id")
        second = gw.wait_reply(rid, 30)
        self.assertNotIn("error", second)
        self.assertIn("first", json.loads(second["data"]["content"][0]["text"])["output"])
        # Once answered, the id may be used again.
        self.assertNotIn("error", gw.call("process/list", id=rid))

    def test_pipelined_and_split_writes(self):
        gw = self.gw
        lines = []
        for i in range(40):
            lines.append(json.dumps({"token": gw.token, "id": "pipe-%d" % i,
                                     "method": "process/list"}))
            gw.expect_sent("pipe-%d" % i)
        gw.send_raw(("\n".join(lines) + "\n").encode())
        for i in range(40):
            self.assertIsInstance(gw.wait_reply("pipe-%d" % i, 30)["data"], list)
        frame = json.dumps({"token": gw.token, "id": "split",
                            "method": "process/list"}).encode() + b"\n"
        gw.expect_sent("split")
        gw.send_raw(frame[:10])
        time.sleep(0.15)
        self.assertFalse(gw.has_reply("split"))
        gw.send_raw(frame[10:])
        self.assertIsInstance(gw.wait_reply("split", 10)["data"], list)


if __name__ == "__main__":
    unittest.main()
