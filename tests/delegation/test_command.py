"""sandgate's `command` backend (gateway/relay.c) with a peer that speaks the
host's wire and misbehaves on purpose (command_peer.py): what the peer sees,
the host's frames relayed unchanged both ways (requests with the host's ids,
the cancel with no reply, tool callbacks and the host's callback requests,
process events), the grace at end of input (a version-3 host's 3 s
included), a peer that dies mid-request, the checks of its initialize reply,
and `config check` of a chain's budgets.  The whole e2e suite through chains
of sandgates is run by run-chain.sh."""

import json
import os
import select
import subprocess
import sys
import tempfile
import time
import unittest

from scratch import setUpModule, tearDownModule  # noqa: F401

HERE = os.path.dirname(os.path.abspath(__file__))
PEER = os.path.join(HERE, "command_peer.py")
BIN = os.environ.get("SANDGATE_BIN", "")

TOKEN = "5e" * 32
BINDING = {"version": 4, "root": "/workspace", "session": "s-1", "identity": "s-1"}


def profile(mode, log=None, **extra):
    p = {"backend": "command", "command": [sys.executable, PEER, mode] + ([log] if log else []),
         "env": {"ONLY_THIS": "1"}}
    p.update(extra)
    return p


class Gate:
    """`sandgate serve` on a config whose profile is a command backend; the
    test writes the host's frames and reads sandgate's lines as they are."""

    def __init__(self, prof, env=None, args=()):
        if not BIN:
            raise unittest.SkipTest("SANDGATE_BIN is not set")
        self.dir = tempfile.mkdtemp(prefix="sg-cmd-")
        self.state = os.path.join(self.dir, "state")
        os.mkdir(self.state)
        self.config = os.path.join(self.dir, "config.json")
        with open(self.config, "w") as f:
            json.dump({"default": "p", "profiles": {"p": prof}}, f)
        e = dict(os.environ)
        e.update(env or {})
        self.proc = subprocess.Popen(
            [BIN, "serve", "--config", self.config, "--state-dir", self.state] + list(args),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=e)
        self.buf = b""

    def write(self, frame):
        self.proc.stdin.write((json.dumps(frame) + "\n").encode())
        self.proc.stdin.flush()
        return frame

    def send(self, rid, method, data=None, token=TOKEN):
        frame = {"token": token, "id": rid, "method": method}
        if data is not None:
            frame["data"] = data
        return self.write(frame)

    def line(self, timeout=20):
        """The next line as text, or None when none came within timeout."""
        end = time.monotonic() + timeout
        while b"\n" not in self.buf:
            left = end - time.monotonic()
            if left <= 0 or not select.select([self.proc.stdout], [], [], left)[0]:
                return None
            chunk = os.read(self.proc.stdout.fileno(), 65536)
            if not chunk:
                return ""
            self.buf += chunk
        text, self.buf = self.buf.split(b"\n", 1)
        return text.decode()

    def read(self, timeout=20):
        text = self.line(timeout)
        if not text:
            raise AssertionError("no line from sandgate (%r): %s" % (text, self.stderr()))
        return json.loads(text)

    def stderr(self):
        if self.proc.poll() is None:
            return "(running)"
        return self.proc.stderr.read().decode()

    def init(self, token=TOKEN, **over):
        b = dict(BINDING, **over)
        self.send("1", "initialize", b, token=token)
        return self.read()

    def close(self, timeout=20):
        self.proc.stdin.close()
        rc = self.proc.wait(timeout)
        err = self.proc.stderr.read().decode()
        self.proc.stdout.close()
        self.proc.stderr.close()
        return rc, err

    def registry(self):
        d = os.path.join(self.state, "registry")
        out = []
        for n in sorted(os.listdir(d)) if os.path.isdir(d) else []:
            if n.endswith(".json"):
                with open(os.path.join(d, n)) as f:
                    out.append(json.load(f))
        return out


def execute(tool, mode=None, actor="s-1", **args):
    return {"call": {"id": "call_1", "name": tool, "arguments": json.dumps(args),
                     "kind": "function"},
            "permission_mode": mode or "standard", "actor": actor,
            "git_attribution_enabled": False}


def logged(log):
    with open(log) as f:
        return [json.loads(l) for l in f]


class CommandBackend(unittest.TestCase):

    def test_peer_sees_only_the_listed_environment(self):
        # The attacker's test: a credential in sandgate's own environment
        # must not reach the peer; only `env` (and PATH) does.
        g = Gate(profile("plain"), env={"DAYTONA_API_KEY": "dtn-secret-1", "SG_OWN_SECRET": "s2"})
        r = g.init()
        seen = r["data"]["environ_seen"]
        # LC_CTYPE is Python's own (PEP 538 sets it in a C locale).
        self.assertEqual(set(seen) - {"LC_CTYPE"}, {"ONLY_THIS", "PATH"}, seen)
        self.assertNotIn("dtn-secret-1", json.dumps(seen))
        self.assertEqual(g.close()[0], 0)

    def test_the_hosts_frames_reach_the_peer_unchanged(self):
        # Both versions the host speaks: the binding as sent, the token,
        # the host's string ids, and the version echoed back.
        for version in (3, 4):
            log = tempfile.mktemp(prefix="sg-peer-log-")
            g = Gate(profile("plain", log))
            b = dict(BINDING, version=version, environment={"GITHUB_TOKEN": "gh-1"},
                     remove_workspace_on_exit=True)
            init = g.send("1", "initialize", b)
            r = g.read()
            self.assertEqual(r["id"], "1")
            self.assertEqual(r["data"]["version"], version)
            self.assertEqual(r["data"]["binding_seen"], b)
            self.assertEqual(r["data"]["token_seen"], TOKEN)
            ex = g.send("2", "execute", execute("read_file", path="a.txt"))
            lst = g.send("3", "process/list")
            got = {}
            for _ in range(2):
                m = g.read()
                got[m["id"]] = m
            self.assertEqual(got["2"], {"id": "2", "data": {"echo": "execute"}})
            self.assertEqual(got["3"], {"id": "3", "data": {"echo": "process/list"}})
            self.assertEqual(g.close()[0], 0)
            frames = logged(log)
            self.assertEqual(frames[0], init)
            # Two requests in flight are relayed by their own workers, so
            # the peer may see them in either order, as a host may.
            by_id = {f["id"]: f for f in frames[1:3]}
            self.assertEqual(by_id["2"], ex)
            self.assertEqual({k: v for k, v in by_id["3"].items() if k != "data"}, lst)
            self.assertIn(by_id["3"].get("data"), (None, {}))

    def test_sandgate_checks_stay_in_front(self):
        log = tempfile.mktemp(prefix="sg-peer-log-")
        g = Gate(profile("plain", log))
        g.init()
        g.send("2", "execute", execute("read_file", path="a"), token="f" * 64)
        r = g.read()
        self.assertEqual(r["id"], "2")
        self.assertIn("error", r, "a frame with another token is not relayed")
        g.send("3", "export/open", {"path": "a"})
        r = g.read()
        self.assertEqual(r["id"], "3")
        self.assertIn("error", r, "a method the peer does not offer is not run here either")
        g.send("4", "execute", execute("read_file", path="a"))
        self.assertEqual(g.read()["data"], {"echo": "execute"})
        self.assertEqual(g.close()[0], 0)
        self.assertEqual([f["method"] for f in logged(log)], ["initialize", "execute"],
                         "refused frames never reach the peer")

    def test_peer_that_ignores_eof_is_killed_when_the_grace_runs_out(self):
        g = Gate(profile("ignore-eof", shutdown_grace_ms=500))
        g.init()
        t0 = time.monotonic()
        rc, err = g.close()
        took = time.monotonic() - t0
        self.assertNotEqual(rc, 0, "a cleanup failure is reported")
        self.assertGreaterEqual(took, 0.5)
        self.assertLess(took, 4.0, "killed on time")
        self.assertIn("did not finish its cleanup within 500 ms", err)
        recs = g.registry()
        self.assertEqual(len(recs), 1, recs)
        self.assertEqual(recs[0]["status"], "cleanup-pending")
        self.assertEqual(recs[0]["backend"], "command")

    def test_a_version_3_host_gets_its_exit_inside_3_seconds(self):
        # A version-3 host kills its command backend 3 s after EOF; the
        # peer's 10 s grace is cut so that sandgate exits before that.
        g = Gate(profile("ignore-eof"))
        self.assertIn("data", g.init(version=3))
        t0 = time.monotonic()
        rc, err = g.close()
        took = time.monotonic() - t0
        self.assertLess(took, 3.0, "exited inside the host's grace: %.2f s" % took)
        self.assertNotEqual(rc, 0, "the peer was killed, which is a cleanup failure")
        self.assertIn("did not finish its cleanup", err)

    def test_peer_dying_mid_request_answers_unavailable(self):
        g = Gate(profile("die-on-execute"))
        g.init()
        g.send("2", "execute", execute("read_file", path="a"))
        r = g.read()
        self.assertEqual(r["id"], "2")
        self.assertTrue(r["error"].startswith("unavailable:"), r)
        self.assertIn("exit status 3", r["error"])
        # Never replaced: the connection ends with its peer.
        self.assertEqual(g.line(), "")
        rc = g.proc.wait(20)
        self.assertNotEqual(rc, 0)
        self.assertIn("cleanup failed", g.proc.stderr.read().decode())

    def test_the_hosts_cancel_is_forwarded_and_has_no_reply(self):
        log = tempfile.mktemp(prefix="sg-peer-log-")
        g = Gate(profile("hold", log))
        g.init()
        g.send("7", "execute", execute("read_file", path="a"))
        time.sleep(0.3)
        cancel = g.send("7", "cancel")
        r = g.read()
        self.assertEqual(r, {"id": "7", "error": "cancelled: the peer stopped it"},
                         "the target's one reply, the peer's text unchanged")
        self.assertIsNone(g.line(timeout=1.0), "the cancel itself has no reply")
        # The connection stays usable.
        g.send("8", "process/list")
        self.assertEqual(g.read(), {"id": "8", "data": {"echo": "process/list"}})
        self.assertEqual(g.close()[0], 0)
        cancels = [f for f in logged(log) if f["method"] == "cancel"]
        self.assertEqual(cancels, [cancel], "the host's cancel frame, as it was")

    def test_a_cancel_of_nothing_in_flight_is_a_no_op(self):
        log = tempfile.mktemp(prefix="sg-peer-log-")
        g = Gate(profile("plain", log))
        g.init()
        g.send("42", "cancel")
        self.assertIsNone(g.line(timeout=0.5))
        g.send("43", "process/list")
        self.assertEqual(g.read()["id"], "43")
        self.assertEqual(g.close()[0], 0)

    def test_unanswered_cancel_closes_the_peer(self):
        g = Gate(profile("ignore-cancel"), env={"SANDGATE_TEST_RELAY_CANCEL_MS": "300"})
        g.init()
        g.send("2", "execute", execute("read_file", path="a"))
        time.sleep(0.2)
        t0 = time.monotonic()
        g.send("2", "cancel")
        r = g.read()
        took = time.monotonic() - t0
        self.assertEqual(r["id"], "2")
        self.assertTrue(r["error"].startswith("unavailable:"), r)
        self.assertGreaterEqual(took, 0.3)
        self.assertLess(took, 3.0)
        self.assertEqual(g.line(), "", "the connection ends with its peer")
        self.assertNotEqual(g.proc.wait(20), 0)
        self.assertIn("not answering a cancelled request", g.proc.stderr.read().decode())

    def test_events_follow_their_reply_unchanged(self):
        g = Gate(profile("event"))
        g.init()
        g.send("2", "process/start", {"command": "true"})
        first, second = g.read(), g.read()
        self.assertEqual(first["id"], "2")
        self.assertEqual(second, {"method": "process", "id": "",
                                  "data": {"Type": "started", "Cause": "",
                                           "Process": first["data"]}})
        self.assertEqual(g.close()[0], 0)

    def test_tool_callbacks_go_to_the_host_and_its_callbacks_to_the_peer(self):
        log = tempfile.mktemp(prefix="sg-peer-log-")
        g = Gate(profile("callback", log))
        g.init()
        g.send("20", "run_code", {"program": {"code": "return 1", "tools": []},
                                  "timeout_ms": 0, "permission_mode": "standard",
                                  "actor": "s-1", "git_attribution_enabled": False})
        tool = g.read()
        self.assertEqual(tool, {"method": "tool", "parent_id": "20", "id": "cb-20",
                                "data": {"id": "1", "name": "read_file",
                                         "arguments": json.dumps({"path": "a.txt"}),
                                         "kind": "function"}},
                         "the orphan callback (parent not in flight) was dropped")
        answer = {"id": "cb-20", "data": {"content": [{"type": "text", "text": "hi"}]}}
        cb = g.send("cb-20", "callback", answer)
        r = g.read()
        self.assertEqual(r["id"], "20")
        self.assertEqual(r["data"]["Value"], answer)
        self.assertIsNone(g.line(timeout=0.5), "a callback has no reply")
        self.assertEqual(g.close()[0], 0)
        self.assertIn(cb, logged(log), "the host's callback frame, as it was")

    def test_stray_replies_never_reach_the_host(self):
        g = Gate(profile("stray"))
        r = g.init()
        self.assertEqual(r["id"], "1")
        g.send("2", "process/list")
        self.assertEqual(g.read(), {"id": "2", "data": {"echo": "process/list"}})
        self.assertIsNone(g.line(timeout=0.5))
        self.assertEqual(g.close()[0], 0)

    def test_a_peer_that_does_not_echo_the_version_is_refused(self):
        for mode, word in (("wrong-version", "version 4"), ("no-capability", "process.start.v1")):
            g = Gate(profile(mode))
            r = g.init()
            self.assertIn(word, r.get("error", ""), r)
            g.send("2", "execute", execute("read_file", path="a"))
            self.assertIn("error", g.read())
            g.close()
        # A version-3 binding asks for no version-4 capability.
        g = Gate(profile("no-capability"))
        r = g.init(version=3)
        self.assertEqual(r["data"]["version"], 3, r)
        self.assertEqual(g.close()[0], 0)

    def test_the_workspace_is_the_binding_root(self):
        g = Gate(profile("plain", workspace="/srv/w"))
        r = g.init()
        self.assertTrue(r["error"].startswith("unsupported:"), r)
        self.assertIn("/srv/w", r["error"])
        r = g.init(root="/srv/w")
        self.assertIn("data", r, "the refusal left the connection usable")
        self.assertEqual(g.close()[0], 0)

    def test_the_host_cannot_change_the_peer_or_its_settings(self):
        # The attacker's test: the command profile's own fields, in the
        # host's profile (WUU_EXECUTION_PROFILE) or as forwarded variables
        # in the binding's environment, must not start another peer or
        # change its settings.  The host's launch fields are ignored, the
        # others refused naming the field before the peer starts; a
        # forwarded variable reaches the peer only inside its initialize.
        d = tempfile.mkdtemp(prefix="sg-cmd-bind-")
        pwned = os.path.join(d, "pwned")
        log = os.path.join(d, "peer.log")
        evil = ["/bin/sh", "-c", "touch %s" % pwned]
        asks = {"command": evil, "backend": "local", "shutdown_grace_ms": 1,
                "env": {"ONLY_THIS": "1", "LD_PRELOAD": "/x.so"},
                "capabilities": ["x.unheard.v9"], "workspace": "/etc"}
        for field, value in asks.items():
            g = Gate(profile("plain", log, shutdown_grace_ms=5000),
                     env={"WUU_EXECUTION_PROFILE": json.dumps({field: value})})
            r = g.init()
            if "error" in r:
                self.assertIn(field, r["error"])
                self.assertFalse(os.path.exists(log), "%s started the peer" % field)
            else:
                seen = r["data"]["environ_seen"]
                self.assertEqual(set(seen) - {"LC_CTYPE"}, {"ONLY_THIS", "PATH"}, (field, seen))
            self.assertEqual(g.close()[0], 0)
            if os.path.exists(log):
                os.unlink(log)
        self.assertFalse(os.path.exists(pwned), "the host's command ran")
        for field in ("env", "capabilities"):
            g = Gate(profile("plain", log, shutdown_grace_ms=5000),
                     env={"WUU_EXECUTION_PROFILE": json.dumps({field: asks[field]})})
            r = g.init()
            self.assertIn("error", r, "WUU_EXECUTION_PROFILE %s was accepted: %s" % (field, r))
            g.close()
        prof = profile("plain", log, shutdown_grace_ms=5000)
        g = Gate(prof)
        r = g.init(environment={"LD_PRELOAD": "/x.so", "PATH": "/evil", "backend": "local",
                                "command": "touch %s" % pwned})
        self.assertIn("data", r, r)
        seen = r["data"]["environ_seen"]
        self.assertEqual(set(seen) - {"LC_CTYPE"}, {"ONLY_THIS", "PATH"}, seen)
        self.assertNotEqual(seen["PATH"], "/evil")
        self.assertEqual(g.close()[0], 0)
        self.assertEqual([f["method"] for f in logged(log)], ["initialize"])
        self.assertEqual(logged(log)[0]["data"]["environment"]["LD_PRELOAD"], "/x.so",
                         "the forwarded variables reach the peer in its initialize")
        self.assertFalse(os.path.exists(pwned))

    def test_a_peer_that_cannot_start_is_not_retried(self):
        g = Gate({"backend": "command", "command": ["/nonexistent/peer"]})
        r = g.init()
        self.assertTrue(r["error"].startswith("unavailable:"), r)
        self.assertIn("/nonexistent/peer", r["error"])
        self.assertEqual(g.line(), "", "not retried: the connection ends")
        self.assertNotEqual(g.proc.wait(20), 0)


class ChainBudget(unittest.TestCase):
    """`config check` refuses a chain whose outer budget is too short."""

    def check(self, profiles, inner=None):
        if not BIN:
            raise unittest.SkipTest("SANDGATE_BIN is not set")
        d = tempfile.mkdtemp(prefix="sg-chaincheck-")
        if inner is not None:
            with open(os.path.join(d, "inner.json"), "w") as f:
                json.dump(inner, f)
        for p in profiles.values():
            if isinstance(p.get("command"), list):
                p["command"] = [a.replace("INNER", os.path.join(d, "inner.json"))
                                for a in p["command"]]
        path = os.path.join(d, "outer.json")
        with open(path, "w") as f:
            json.dump({"default": next(iter(profiles)), "profiles": profiles}, f)
        r = subprocess.run([BIN, "config", "check", "--config", path],
                           capture_output=True, text=True, timeout=30)
        return r.returncode, r.stdout + r.stderr

    def test_default_sizes_pass(self):
        rc, out = self.check({"c": {"backend": "command", "command": [BIN, "serve", "--peer"]}})
        self.assertEqual(rc, 0, out)

    def test_grace_plus_drain_must_fit(self):
        rc, out = self.check({"c": {"backend": "command", "command": ["/bin/cat"],
                                    "shutdown_grace_ms": 90000, "shutdown_timeout_ms": 120000}})
        self.assertNotEqual(rc, 0, out)
        self.assertIn("125000", out)
        rc, out = self.check({"c": {"backend": "command", "command": ["/bin/cat"],
                                    "shutdown_grace_ms": 90000, "shutdown_timeout_ms": 150000}})
        self.assertEqual(rc, 0, out)

    def test_an_inner_sandgate_budget_counts(self):
        inner = {"default": "l", "profiles": {"l": {"backend": "local",
                                                    "shutdown_timeout_ms": 90000}}}
        rc, out = self.check({"c": {"backend": "command",
                                    "command": [BIN, "serve", "--peer", "--config", "INNER"]}},
                             inner)
        self.assertNotEqual(rc, 0, out)
        self.assertIn("125000", out)

    def test_a_three_level_chain_is_checked_inside(self):
        # The middle gateway relays too; its own budget is too short for
        # its grace plus the drain.
        inner = {"default": "m", "profiles": {"m": {
            "backend": "command", "command": ["/bin/cat"], "shutdown_grace_ms": 30000,
            "shutdown_timeout_ms": 40000}}}
        rc, out = self.check({"c": {"backend": "command",
                                    "command": [BIN, "serve", "--peer", "--config", "INNER"],
                                    "shutdown_grace_ms": 50000, "shutdown_timeout_ms": 200000}},
                             inner)
        self.assertNotEqual(rc, 0, out)
        self.assertIn("\"m\"", out)

    def test_unknown_and_malformed_fields_are_refused(self):
        rc, out = self.check({"c": {"backend": "command", "command": ["/bin/cat"],
                                    "comand": ["x"]}})
        self.assertNotEqual(rc, 0, out)
        self.assertIn("comand", out)
        rc, out = self.check({"c": {"backend": "command", "command": ["/bin/cat"],
                                    "cpus": 2}})
        self.assertNotEqual(rc, 0, out)
        self.assertIn("cpus", out)
        rc, out = self.check({"c": {"backend": "command", "command": "/bin/cat"}})
        self.assertNotEqual(rc, 0, out)
        rc, out = self.check({"c": {"backend": "command", "command": ["/bin/cat"],
                                    "env": {"A": 1}}})
        self.assertNotEqual(rc, 0, out)


if __name__ == "__main__":
    unittest.main()
