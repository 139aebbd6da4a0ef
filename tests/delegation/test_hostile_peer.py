"""sandgate's `command` backend (gateway/relay.c) against a peer that
attacks it (hostile_peer.py): what the peer inherits, floods that must not
grow sandgate's memory without bound, events that are not this
connection's, replies nobody asked for, and the token of a retried
initialize.  Each test failed on the relay before its fix
(docs/delegation.md, "A hostile peer")."""

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import unittest

from scratch import setUpModule, tearDownModule  # noqa: F401

HERE = os.path.dirname(os.path.abspath(__file__))
PEER = os.path.join(HERE, "hostile_peer.py")
BIN = os.environ.get("SANDGATE_BIN", "")

BINDING = {"version": 4, "root": "/workspace", "session": "s-1", "identity": "s-1"}
TOKEN = "7a" * 32


class Gate:
    """`sandgate serve` on a command profile whose peer is hostile_peer.py."""

    def __init__(self, mode, count=0, pass_fds=(), env=None, **extra):
        if not BIN:
            raise unittest.SkipTest("SANDGATE_BIN is not set")
        self.dir = tempfile.mkdtemp(prefix="sg-hostile-")
        state = os.path.join(self.dir, "state")
        os.mkdir(state)
        config = os.path.join(self.dir, "config.json")
        prof = {"backend": "command", "command": [sys.executable, PEER, mode, str(count)],
                "shutdown_grace_ms": 1000}
        prof.update(extra)
        with open(config, "w") as f:
            json.dump({"default": "p", "profiles": {"p": prof}}, f)
        e = dict(os.environ)
        e.update(env or {})
        self.proc = subprocess.Popen(
            [BIN, "serve", "--config", config, "--state-dir", state],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            pass_fds=pass_fds, env=e)
        # stderr is drained aside, so that a peer flooding it never blocks.
        self.err = []
        self.err_thread = threading.Thread(target=lambda: self.err.append(self.proc.stderr.read()))
        self.err_thread.start()

    def send(self, rid, method, data=None, token=TOKEN):
        frame = {"token": token, "id": rid, "method": method, "data": data or {}}
        self.proc.stdin.write((json.dumps(frame) + "\n").encode())
        self.proc.stdin.flush()

    def read(self):
        line = self.proc.stdout.readline()
        if not line:
            raise AssertionError("sandgate closed its output")
        return json.loads(line)

    def init(self, token=TOKEN, **over):
        self.send("1", "initialize", dict(BINDING, **over), token=token)
        return self.read()

    def rss_kib(self):
        with open("/proc/%d/status" % self.proc.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def close(self, timeout=30):
        self.proc.stdin.close()
        rest = self.proc.stdout.read()
        rc = self.proc.wait(timeout)
        self.err_thread.join(timeout)
        return rc, rest, b"".join(self.err).decode(errors="replace")

    def peers(self):
        """sandgate's children: the peer, when it is still running."""
        pids = []
        try:
            for tid in os.listdir("/proc/%d/task" % self.proc.pid):
                with open("/proc/%d/task/%s/children" % (self.proc.pid, tid)) as f:
                    pids += [int(p) for p in f.read().split()]
        except OSError:
            pass
        return pids

    def kill(self):
        # A failed test must not leave a peer behind: one that ignores
        # EOF outlives a sandgate killed here, and holds sandgate's stderr.
        if self.proc.poll() is None:
            for pid in self.peers():
                try:
                    os.kill(pid, 9)
                except OSError:
                    pass
            self.proc.kill()
            self.proc.wait()
        self.err_thread.join(5)
        for f in (self.proc.stdin, self.proc.stdout):
            if not f.closed:
                f.close()


def execute():
    return {"call": {"id": "call_1", "name": "read_file", "arguments": json.dumps({"path": "a"}),
                     "kind": "function"},
            "permission_mode": "standard", "actor": "s-1", "git_attribution_enabled": False}


def run_code():
    return {"program": {"code": "return 1", "tools": []}, "timeout_ms": 0,
            "permission_mode": "standard", "actor": "s-1", "git_attribution_enabled": False}


class HostilePeer(unittest.TestCase):

    def test_peer_inherits_no_descriptor_of_sandgate(self):
        # A descriptor sandgate inherited (a host's credential channel, a
        # socket) is sandgate's, not the peer's: the peer gets 0, 1, 2.
        r, w = os.pipe()
        os.set_inheritable(w, True)
        g = Gate("plain", pass_fds=(w,))
        try:
            os.close(w)
            seen = g.init()["data"]["fds_seen"]
            # The peer's own listing holds one descriptor: the directory.
            self.assertLessEqual(set(seen) - {"0", "1", "2"}, {"3"}, seen)
            self.assertEqual(len(seen), 4, seen)
            self.assertEqual(g.close()[0], 0)
        finally:
            os.close(r)
            g.kill()

    def test_callback_flood_while_the_host_reads_slowly(self):
        # 1000 tool callbacks with 64 KiB ids (64 MiB) while the host reads
        # nothing for 4 s, then as many orphans: sandgate holds the peer
        # back instead of queueing them all, drops the orphans, and every
        # live one reaches the host whole.
        n = 1000
        g = Gate("callback-flood", n)
        try:
            self.assertIn("data", g.init())
            g.send("20", "run_code", run_code())
            base = g.rss_kib()
            peak = base
            until = time.monotonic() + 4
            while time.monotonic() < until and g.proc.poll() is None:
                peak = max(peak, g.rss_kib())
                time.sleep(0.1)
            self.assertLess(peak - base, 64 * 1024,
                            "sandgate queued the callbacks of a peer without bound")
            for i in range(n):
                m = g.read()
                self.assertEqual((m["method"], m["parent_id"]), ("tool", "20"))
                self.assertTrue(m["id"].endswith("-%d" % i), m["id"][-16:])
            t0 = time.monotonic()
            rc, rest, err = g.close()
            self.assertLess(time.monotonic() - t0, 10, "shutdown stays within the grace")
            # The program never finished: its reply says the peer is gone.
            lines = [json.loads(l) for l in rest.splitlines()]
            self.assertEqual([(m["id"], m["error"].split(":")[0]) for m in lines],
                             [("20", "unavailable")], "no orphan callback reached the host")
            self.assertNotEqual(rc, 0)
        finally:
            g.kill()

    def test_event_flood_while_the_host_reads_slowly(self):
        # 300 events of 1 MiB while the host reads nothing for 3 s: the
        # peer is made to wait (its stdout pipe fills) instead of sandgate
        # holding 300 MiB for the host.
        g = Gate("event-flood", 300)
        try:
            self.assertIn("data", g.init())
            base = g.rss_kib()
            peak = base
            until = time.monotonic() + 3
            while time.monotonic() < until:
                peak = max(peak, g.rss_kib())
                time.sleep(0.1)
            self.assertLess(peak - base, 96 * 1024,
                            "sandgate buffered the peer's events without bound")
            # Nothing is lost: every event reaches the host, whole, then
            # the reply to a request sent after them.
            got = 0
            for _ in range(300):
                m = g.read()
                self.assertEqual((m["method"], m["id"]), ("process", ""))
                self.assertEqual(len(m["data"]["Process"]["pad"]), 1 << 20)
                got += 1
            self.assertEqual(got, 300)
            g.send("2", "execute", execute())
            self.assertEqual(g.read(), {"id": "2", "data": {"echo": "execute"}})
            self.assertEqual(g.close()[0], 0)
        finally:
            g.kill()

    def test_events_of_another_session_or_before_initialize_are_dropped(self):
        g = Gate("foreign-events")
        try:
            first = g.init()
            self.assertEqual(first["id"], "1", "no event before the initialize reply")
            g.send("2", "process/start", {"command": "true"})
            reply = g.read()
            self.assertEqual(reply["id"], "2")
            ev = g.read()
            self.assertEqual(ev["method"], "process")
            self.assertEqual(ev["data"]["Process"]["id"], "p-mine",
                             "an event for another session's process is not this connection's")
            rc, rest, err = g.close()
            self.assertEqual(rc, 0)
            self.assertEqual(rest, b"", "nothing else reaches the host")
        finally:
            g.kill()

    def test_replies_nobody_waits_for_are_dropped(self):
        g = Gate("junk-replies")
        try:
            g.init()
            g.send("2", "execute", execute())
            self.assertEqual(g.read(), {"id": "2", "data": {"echo": "first"}})
            g.send("3", "execute", execute())
            self.assertEqual(g.read(), {"id": "3", "data": {"echo": "first"}})
            rc, rest, _ = g.close()
            self.assertEqual(rest, b"", "no duplicate, stray or late reply reaches the host")
            self.assertEqual(rc, 0)
        finally:
            g.kill()

    def test_stderr_flood_does_not_touch_the_wire(self):
        g = Gate("stderr-flood")
        try:
            g.init()
            g.send("2", "execute", execute())
            self.assertEqual(g.read(), {"id": "2", "data": {"echo": "execute"}})
            rc, rest, err = g.close()
            self.assertEqual((rc, rest), (0, b""))
            self.assertGreaterEqual(len(err), 32 << 20)
        finally:
            g.kill()

    def test_a_retried_initialize_forwards_its_own_token(self):
        # The peer refused the first initialize, leaving the connection
        # usable; the retry's token is the one the peer must be bound with.
        g = Gate("refuse-first")
        try:
            first, second = "1f" * 32, "2e" * 32
            r = g.init(token=first)
            self.assertTrue(r["error"].startswith("unsupported:"), r)
            r = g.init(token=second)
            self.assertEqual(r["data"]["token_seen"], second)
            g.send("2", "execute", execute(), token=second)
            self.assertEqual(g.read(), {"id": "2", "data": {"echo": "execute"}})
            self.assertEqual(g.close()[0], 0)
        finally:
            g.kill()


if __name__ == "__main__":
    unittest.main()
