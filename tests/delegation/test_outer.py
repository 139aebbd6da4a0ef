"""The outer adapter (outer.py) keeps the delegation rules with a peer that
misbehaves: the grace at end of input, a peer that dies mid-request, a
cancel left unanswered.  The whole e2e suite through outer.py with sandgate
as the peer is run by run-through-outer.sh."""

import json
import os
import subprocess
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
OUTER = os.path.join(HERE, "outer.py")
FAKE = os.path.join(HERE, "fake_peer.py")

BINDING = {"version": 4, "root": "/workspace", "session": "s-1", "identity": "s-1"}
TOKEN = "3c" * 32


EXECUTE = {"call": {"id": "call_1", "name": "bash", "arguments": "{\"command\":\"true\"}",
                    "kind": "function"},
           "permission_mode": "standard", "actor": "s-1", "git_attribution_enabled": False}


class Outer:
    def __init__(self, mode, **env):
        e = dict(os.environ, SG_PEER_BIN=FAKE, FAKE_PEER_MODE=mode)
        e.update({k: str(v) for k, v in env.items()})
        self.proc = subprocess.Popen([sys.executable, OUTER, "serve"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=e)

    def send(self, rid, method, data=None, token=TOKEN):
        frame = {"token": token, "id": rid, "method": method}
        if data is not None:
            frame["data"] = data
        self.proc.stdin.write((json.dumps(frame) + "\n").encode())
        self.proc.stdin.flush()

    def read(self):
        return json.loads(self.proc.stdout.readline())


class OuterAdapter(unittest.TestCase):

    def test_binding_and_token_reach_the_peer_unchanged(self):
        o = Outer("")
        o.send("1", "initialize", BINDING)
        r = o.read()
        self.assertEqual(r["data"]["binding_seen"], BINDING)
        self.assertEqual(r["data"]["token_seen"], TOKEN)
        o.proc.stdin.close()
        self.assertEqual(o.proc.wait(10), 0)

    def test_peer_that_ignores_eof_is_killed_when_the_grace_runs_out(self):
        o = Outer("ignore-eof", SG_OUTER_GRACE_MS=500)
        o.send("1", "initialize", BINDING)
        o.read()
        t0 = time.monotonic()
        o.proc.stdin.close()
        rc = o.proc.wait(10)
        took = time.monotonic() - t0
        self.assertEqual(rc, 1, "a cleanup failure is reported")
        self.assertGreaterEqual(took, 0.5)
        self.assertLess(took, 3.0, "killed on time")
        self.assertIn(b"did not finish its cleanup within 500 ms", o.proc.stderr.read())

    def test_peer_dying_mid_request_answers_unavailable(self):
        o = Outer("die-on-execute")
        o.send("1", "initialize", BINDING)
        o.read()
        o.send("2", "execute", EXECUTE)
        r = o.read()
        self.assertEqual(r["id"], "2")
        self.assertTrue(r["error"].startswith("unavailable:"), r)
        self.assertNotEqual(o.proc.wait(10), 0)

    def test_unanswered_cancel_closes_the_peer(self):
        o = Outer("ignore-cancel", SG_OUTER_CANCEL_MS=300)
        o.send("1", "initialize", BINDING)
        o.read()
        o.send("2", "execute", EXECUTE)
        t0 = time.monotonic()
        o.send("2", "cancel")
        r = o.read()
        took = time.monotonic() - t0
        self.assertEqual(r["id"], "2")
        self.assertTrue(r["error"].startswith("unavailable:"), r)
        self.assertEqual(o.proc.stdout.readline(), b"", "the cancel has no reply of its own")
        self.assertGreaterEqual(took, 0.3)
        self.assertLess(took, 3.0)
        o.proc.stdin.close()
        self.assertNotEqual(o.proc.wait(10), 0, "a peer that was closed is a failure")


if __name__ == "__main__":
    unittest.main()
