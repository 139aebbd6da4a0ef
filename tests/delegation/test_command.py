"""sandgate's `command` backend (gateway/relay.c) with a peer that
misbehaves on purpose (command_peer.py): what the peer sees, the grace at
end of input, a peer that dies mid-request, cancels, the checks of its
initialize reply, and `config check` of a chain's budgets.  The whole e2e
suite through chains of sandgates is run by run-chain.sh."""

import json
import os
import subprocess
import sys
import tempfile
import time
import unittest

from scratch import setUpModule, tearDownModule  # noqa: F401

HERE = os.path.dirname(os.path.abspath(__file__))
PEER = os.path.join(HERE, "command_peer.py")
BIN = os.environ.get("SANDGATE_BIN", "")

BINDING = {"version": 4, "root": "/workspace", "session": "s-1", "identity": None}


def profile(mode, log=None, **extra):
    p = {"backend": "command", "command": [sys.executable, PEER, mode] + ([log] if log else []),
         "env": {"ONLY_THIS": "1"}}
    p.update(extra)
    return p


class Gate:
    """`sandgate serve` on a config whose profile is a command backend."""

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

    def send(self, rid, method, data=None, token="tok"):
        frame = {"id": rid, "method": method, "token": token, "data": data or {}}
        self.proc.stdin.write((json.dumps(frame) + "\n").encode())
        self.proc.stdin.flush()

    def read(self):
        line = self.proc.stdout.readline()
        if not line:
            raise AssertionError("sandgate closed its output: %s" % self.proc.stderr.read())
        return json.loads(line)

    def init(self, **over):
        b = dict(BINDING, **over)
        self.send(1, "initialize", b)
        return self.read()

    def close(self, timeout=20):
        self.proc.stdin.close()
        rc = self.proc.wait(timeout)
        return rc, self.proc.stderr.read().decode()

    def registry(self):
        d = os.path.join(self.state, "registry")
        out = []
        for n in sorted(os.listdir(d)) if os.path.isdir(d) else []:
            if n.endswith(".json"):
                with open(os.path.join(d, n)) as f:
                    out.append(json.load(f))
        return out


def execute(tool, mode=None, **args):
    d = {"tool": tool, "call": {"id": "c", "arguments": json.dumps(args)}}
    if mode:
        d["permission_mode"] = mode
    return d


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

    def test_binding_and_token_reach_the_peer_unchanged(self):
        g = Gate(profile("plain"))
        b = dict(BINDING, environment={"cpus": 1}, remove_workspace_on_exit=True)
        g.send(1, "initialize", b, token="secret-token")
        r = g.read()
        self.assertEqual(r["data"]["binding_seen"], b)
        self.assertEqual(r["data"]["token_seen"], "secret-token")
        self.assertEqual(g.close()[0], 0)

    def test_sandgate_checks_stay_in_front(self):
        log = tempfile.mktemp(prefix="sg-peer-log-")
        audit = tempfile.mktemp(prefix="sg-audit-")
        g = Gate(profile("plain", log), args=["--audit-log", audit])
        g.init()
        g.send(2, "execute", execute("write_file", mode="read_only", path="a", content="x"))
        r = g.read()
        self.assertTrue(r["error"].startswith("permission_denied:"), r)
        g.send(3, "execute", execute("peer_tool", mode="read_only"))
        self.assertTrue(g.read()["error"].startswith("permission_denied:"))
        g.send(4, "execute", execute("git", mode="read_only", args=["commit", "-m", "x"]))
        self.assertTrue(g.read()["error"].startswith("permission_denied:"))
        g.send(5, "execute", execute("read_file", mode="read_only", path="a"))
        self.assertEqual(g.read()["data"], {"echo": "execute"})
        g.send(6, "execute", execute("read_file"), token="wrong")
        self.assertTrue(g.read()["error"].startswith("bad_token:"))
        g.send(7, "export/open", {"path": "a"})
        self.assertTrue(g.read()["error"].startswith("unknown_method:"),
                        "a method the peer does not offer is not run here either")
        self.assertEqual(g.close()[0], 0)
        with open(log) as f:
            methods = [json.loads(l)["method"] for l in f]
        self.assertEqual(methods, ["initialize", "execute"], "refused requests never reach the peer")
        with open(audit) as f:
            lines = [(l["method"], l.get("tool"), l["outcome"]) for l in map(json.loads, f)]
        self.assertEqual(lines, [("initialize", None, "ok"),
                                 ("execute", "write_file", "permission_denied"),
                                 ("execute", "peer_tool", "permission_denied"),
                                 ("execute", "git", "permission_denied"),
                                 ("execute", "read_file", "ok")],
                         "the audit log sees relayed calls; bad_token and unknown_method "
                         "never reach a worker")

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

    def test_peer_dying_mid_request_answers_unavailable(self):
        g = Gate(profile("die-on-execute"))
        g.init()
        g.send(2, "execute", execute("read_file", path="a"))
        r = g.read()
        self.assertEqual(r["id"], 2)
        self.assertTrue(r["error"].startswith("unavailable:"), r)
        self.assertIn("exit status 3", r["error"])
        # Never replaced: the connection ends with its peer.
        self.assertEqual(g.proc.stdout.readline(), b"")
        rc = g.proc.wait(20)
        self.assertNotEqual(rc, 0)
        self.assertIn("cleanup failed", g.proc.stderr.read().decode())

    def test_cancel_is_forwarded(self):
        log = tempfile.mktemp(prefix="sg-peer-log-")
        g = Gate(profile("hold", log))
        g.init()
        g.send("x", "execute", execute("read_file", path="a"))
        time.sleep(0.3)
        g.send(3, "cancel", {"id": "x"})
        got = {}
        for _ in range(2):
            r = g.read()
            got[r["id"]] = r
        self.assertEqual(got[3]["data"], {"cancelled": True})
        self.assertTrue(got["x"]["error"].startswith("cancelled:"), got)
        self.assertEqual(g.close()[0], 0)
        with open(log) as f:
            frames = [json.loads(l) for l in f]
        ex = [f for f in frames if f["method"] == "execute"][0]
        cancels = [f for f in frames if f["method"] == "cancel"]
        self.assertEqual(len(cancels), 1)
        self.assertEqual(cancels[0]["data"], {"id": ex["id"]}, "the peer's own id is cancelled")
        self.assertEqual(cancels[0]["token"], "tok")

    def test_unanswered_cancel_closes_the_peer(self):
        g = Gate(profile("ignore-cancel"), env={"SANDGATE_TEST_RELAY_CANCEL_MS": "300"})
        g.init()
        g.send(2, "execute", execute("read_file", path="a"))
        time.sleep(0.2)
        t0 = time.monotonic()
        g.send(3, "cancel", {"id": 2})
        got = {}
        for _ in range(2):
            r = g.read()
            got[r["id"]] = r
        took = time.monotonic() - t0
        self.assertEqual(got[3]["data"], {"cancelled": True})
        self.assertTrue(got[2]["error"].startswith("unavailable:"), got)
        self.assertGreaterEqual(took, 0.3)
        self.assertLess(took, 3.0)
        self.assertEqual(g.proc.stdout.readline(), b"", "the connection ends with its peer")
        self.assertNotEqual(g.proc.wait(20), 0)
        self.assertIn("closed for not answering a cancel", g.proc.stderr.read().decode())

    def test_events_follow_their_reply(self):
        g = Gate(profile("event"))
        g.init()
        g.send(2, "process/start", {"command": "true"})
        first, second = g.read(), g.read()
        self.assertEqual(first["id"], 2)
        self.assertEqual(second["method"], "process/event")
        self.assertEqual(g.close()[0], 0)

    def test_a_peer_of_another_version_is_refused(self):
        for mode, word in (("version-3", "version 4"), ("no-capability", "process.start.v1")):
            g = Gate(profile(mode))
            r = g.init()
            self.assertTrue(r["error"].startswith("unsupported:"), r)
            self.assertIn(word, r["error"])
            g.send(2, "execute", execute("read_file", path="a"))
            self.assertTrue(g.read()["error"].startswith("init_failed:"))
            g.close()

    def test_the_workspace_is_the_binding_root(self):
        g = Gate(profile("plain", workspace="/srv/w"))
        r = g.init()
        self.assertTrue(r["error"].startswith("unsupported:"), r)
        self.assertIn("/srv/w", r["error"])
        r = g.init(root="/srv/w")
        self.assertIn("data", r, "the refusal left the connection usable")
        self.assertEqual(g.close()[0], 0)

    def test_a_binding_cannot_change_the_peer_or_its_settings(self):
        # The attacker's test: the command profile's own fields in a
        # binding were accepted and ignored (the real peer ran), where
        # docs/security.md promises a refusal unless they repeat the
        # profile's value.  Each is refused before the peer starts.
        d = tempfile.mkdtemp(prefix="sg-cmd-bind-")
        pwned = os.path.join(d, "pwned")
        log = os.path.join(d, "peer.log")
        evil = ["/bin/sh", "-c", "touch %s" % pwned]
        asks = {"command": evil, "backend": "local", "shutdown_grace_ms": 1,
                "env": {"ONLY_THIS": "1", "LD_PRELOAD": "/x.so"},
                "capabilities": [], "workspace": "/etc"}
        for field, value in asks.items():
            g = Gate(profile("plain", log, shutdown_grace_ms=5000))
            r = g.init(environment={field: value})
            self.assertIn("error", r, "environment.%s was accepted: %s" % (field, r))
            self.assertTrue(r["error"].startswith("permission_denied:"), r)
            self.assertIn(field, r["error"])
            self.assertEqual(g.close()[0], 0)
            self.assertFalse(os.path.exists(log), "environment.%s started the peer" % field)
        self.assertFalse(os.path.exists(pwned), "the binding's command ran")
        # Repeating the profile's own values changes nothing and is fine;
        # variables for commands (what a host's binding.environment holds)
        # reach neither the peer's argv nor its environment.
        prof = profile("plain", log, shutdown_grace_ms=5000)
        g = Gate(prof)
        same = {k: prof[k] for k in ("command", "backend", "shutdown_grace_ms", "env")}
        r = g.init(environment=dict(same, LD_PRELOAD="/x.so", PATH="/evil"))
        self.assertIn("data", r, r)
        seen = r["data"]["environ_seen"]
        self.assertEqual(set(seen) - {"LC_CTYPE"}, {"ONLY_THIS", "PATH"}, seen)
        self.assertNotEqual(seen["PATH"], "/evil")
        self.assertEqual(g.close()[0], 0)
        with open(log) as f:
            self.assertEqual([json.loads(l)["method"] for l in f], ["initialize"])
        self.assertFalse(os.path.exists(pwned))

    def test_a_peer_that_cannot_start_is_not_retried(self):
        g = Gate({"backend": "command", "command": ["/nonexistent/peer"]})
        r = g.init()
        self.assertTrue(r["error"].startswith("unavailable:"), r)
        self.assertIn("/nonexistent/peer", r["error"])
        self.assertEqual(g.proc.stdout.readline(), b"", "not retried: the connection ends")
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
