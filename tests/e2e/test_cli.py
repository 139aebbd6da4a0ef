"""The command line (issue 16): docs/cli.md's table, walked row by row.

For every command the table lists, the binary must agree: `--help` works
(exit 0, on stdout) and lists exactly the table's exit statuses, each of
those statuses is provoked for real by a scenario below, and `--json`
prints JSON where the table says it exists.  A status in the table without
a scenario fails the test, unless it is one that cannot be caused from
outside (UNPROVOKABLE, with the reason).

Also here: the wording of command-line mistakes, `config check` and
`serve` giving the same verdict, `serve` failing before it reads a frame,
and a request that fails validation answered with its own error when EOF
follows at once.
"""

import json
import os
import re
import shutil
import subprocess
import tempfile
import unittest

from sgclient import CONFIG, PROFILE, Gateway, host_token, unique
import sgclient

# The command line under test is sandgate's own: when the suite runs
# through the delegation wrapper (tests/delegation), SANDGATE_BIN is the
# wrapper and SG_PEER_BIN the real binary, whose exit statuses are the table's.
BIN = os.environ.get("SG_PEER_BIN") or sgclient.BIN

HERE = os.path.dirname(os.path.abspath(__file__))
CLI_MD = os.path.join(HERE, "..", "..", "docs", "cli.md")

# Statuses no outside action can cause: the test says so instead of
# pretending to cover them.
UNPROVOKABLE = {70: "an internal error (out of memory, a thread that cannot start)"}


def read_table():
    """[(command, has_json, [statuses])] from docs/cli.md's command table."""
    rows = []
    with open(CLI_MD) as f:
        text = f.read()
    section = text.split("## Commands", 1)[1].split("\n## ", 1)[0]
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 4 or not cells[0].startswith("`"):
            continue
        words = [w for w in cells[0].strip("`").split() if not re.match(r"^[A-Z\[]", w)]
        rows.append((" ".join(words), cells[2] == "yes",
                     [int(x) for x in cells[3].split(",")]))
    return rows


class CliTestCase(unittest.TestCase):
    def setUp(self):
        if not BIN:
            self.skipTest("SANDGATE_BIN is not set")
        self.dir = tempfile.mkdtemp(prefix="sg-e2e-cli-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.xdg = os.path.join(self.dir, "xdg")
        os.makedirs(self.xdg)
        self.state = os.path.join(self.dir, "state")

    def run_bin(self, *args, stdin=b"", env=None, timeout=120):
        e = dict(os.environ)
        e.pop("SANDGATE_CONFIG", None)
        e["XDG_CONFIG_HOME"] = self.xdg
        e.update(env or {})
        return subprocess.run([BIN] + list(args), input=stdin, capture_output=True,
                              env=e, timeout=timeout)

    def config(self, profiles, name="config.json", default=None):
        path = os.path.join(self.dir, name)
        body = {"profiles": profiles}
        if default:
            body["default"] = default
        with open(path, "w") as f:
            json.dump(body, f)
        return path

    def unreachable_ssh(self):
        # Port 1 on loopback: refused at once, nothing public is reached.
        return self.config({"lab": {"backend": "ssh", "host": "127.0.0.1", "port": 1,
                                    "workspace": "/tmp/sg-e2e-nowhere"}},
                           name="ssh.json")

    def kept_env(self):
        """A kept local environment made under profile "p" (persistent): its
        id, the config, and a config without "p" (so removing it fails)."""
        cfg = self.config({"p": {"backend": "local", "persistent": True}}, name="p.json")
        gw = Gateway(state_dir=self.state, config=cfg, profile="p")
        self.addCleanup(gw.cleanup)
        env_id = gw.initialize(identity=unique("cli"),
                               remove_workspace_on_exit=None)["environment"]["id"]
        gw.shutdown()
        other = self.config({"q": {"backend": "local"}}, name="q.json")
        self.addCleanup(lambda: self.run_bin("envs", "rm", env_id, "--config", cfg,
                                             "--state-dir", self.state))
        return env_id, cfg, other

    def blocked_state(self):
        # A state directory that cannot be made: its parent is a file.
        blocker = os.path.join(self.dir, "file")
        open(blocker, "w").close()
        return os.path.join(blocker, "state")

    # ---- one scenario per (command, status): the argv that must end so ----

    def scenario(self, cmd, code):
        """Run the scenario for cmd ending with code; the CompletedProcess."""
        words = cmd.split()
        s = ["--state-dir", self.state]
        if code == 64:
            return self.run_bin(*words, "--no-such-option")
        if cmd == "serve":
            if code == 0:
                return self.run_bin("serve", *s)
            if code == 69:
                return self.serve_cleanup_fails()
            if code == 73:
                return self.run_bin("serve", "--state-dir", self.blocked_state())
            if code == 78:
                return self.run_bin("serve", "--profile", "nosuch", *s)
        if cmd == "config check":
            if code == 0:
                return self.run_bin("config", "check")
            if code == 78:
                return self.run_bin("config", "check", "--config",
                                    self.config({"bad": {"backend": "local", "cpus": -1}}))
        if cmd in ("envs list", "envs show", "envs rm", "envs gc"):
            if code == 0:
                return self.run_bin(*words, *(["x"] if cmd in ("envs show", "envs rm")
                                              else []), *s) if cmd not in (
                    "envs show", "envs rm") else self.envs_ok(cmd)
            if code == 66:
                return self.run_bin(*words, "no-such-env", *s)
            if code == 69:
                if cmd in ("envs list", "envs show"):
                    return self.run_bin(*words, *(["x"] if cmd == "envs show" else []),
                                        "--config", self.unreachable_ssh(), *s)
                env_id, _, other = self.kept_env()
                args = [env_id] if cmd == "envs rm" else ["--older-than", "0s"]
                return self.run_bin(*words, *args, "--config", other, *s)
            if code == 73:
                return self.run_bin(*words, *(["x"] if cmd in ("envs show", "envs rm") else []),
                                    "--state-dir", self.blocked_state())
            if code == 78:
                return self.run_bin(*words, *(["x"] if cmd in ("envs show", "envs rm") else []),
                                    "--config", os.path.join(self.dir, "missing.json"), *s)
        if cmd == "probe":
            if code == 0:
                return self.run_bin("probe", *s)
            if code == 69:
                return self.run_bin("probe", "--config", self.unreachable_ssh(), *s)
            if code == 73:
                return self.run_bin("probe", "--state-dir", self.blocked_state())
            if code == 78:
                return self.run_bin("probe", "--profile", "nosuch", *s)
        if cmd == "help" and code == 0:
            return self.run_bin("help", "envs", "gc")
        if cmd == "version" and code == 0:
            return self.run_bin("version")
        return None

    def envs_ok(self, cmd):
        env_id, cfg, _ = self.kept_env()
        return self.run_bin(*cmd.split(), env_id, "--config", cfg, "--state-dir", self.state)

    def serve_cleanup_fails(self):
        # A process that ignores SIGTERM and a 1 ms budget: the shutdown
        # cannot stop it in time, says so, and exits 69.
        saved, sgclient.BIN = sgclient.BIN, BIN  # serve's own status, not a wrapper's
        try:
            gw = Gateway(state_dir=self.state, budget_ms=1, config=None, profile=None)
        finally:
            sgclient.BIN = saved
        self.addCleanup(gw.cleanup)
        gw.initialize()
        gw.start("trap '' TERM; sleep 30")
        code, err, _ = gw.shutdown(timeout=60)
        return subprocess.CompletedProcess(gw.argv, code, b"", err.encode()
                                           if isinstance(err, str) else err)


class Table(CliTestCase):
    def test_every_row(self):
        rows = read_table()
        self.assertGreaterEqual(len(rows), 9, "docs/cli.md lost its command table")
        for cmd, has_json, codes in rows:
            with self.subTest(command=cmd):
                r = self.run_bin(*cmd.split(), "--help")
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertTrue(r.stdout.startswith(b"usage: sandgate " + cmd.encode()),
                                r.stdout[:200])
                self.assertEqual(r.stderr, b"")
                listed = [int(x) for x in re.findall(
                    rb"^  (\d+) ", r.stdout.split(b"exit status:")[1], re.M)]
                self.assertEqual(listed, codes, "docs/cli.md and --help disagree")
                self.assertEqual(b"--json" in r.stdout, has_json, "--json in --help")
                for code in codes:
                    if code in UNPROVOKABLE:
                        continue
                    p = self.scenario(cmd, code)
                    self.assertIsNotNone(p, "no scenario provokes %d for %s" % (code, cmd))
                    self.assertEqual(p.returncode, code, "%s -> %d: stderr %s" % (
                        cmd, code, p.stderr[-600:]))
                    if code != 0 and cmd != "serve":
                        self.assertTrue(p.stderr.strip() or p.stdout.strip(),
                                        "%s exited %d without a word" % (cmd, code))

    def test_json_where_the_table_says(self):
        env_id, cfg, _ = self.kept_env()
        s = ["--state-dir", self.state]
        runs = {
            "config check": self.run_bin("config", "check", "--json"),
            "envs list": self.run_bin("envs", "list", "--json", *s),
            "envs show": self.run_bin("envs", "show", env_id, "--json", *s),
            "envs gc": self.run_bin("envs", "gc", "--dry-run", "--json", *s),
            "probe": self.run_bin("probe", "--json", *s),
            "version": self.run_bin("version", "--json"),
            "envs rm": self.run_bin("envs", "rm", env_id, "--json", "--config", cfg, *s),
        }
        for cmd, has_json, _ in read_table():
            if not has_json:
                continue
            with self.subTest(command=cmd):
                self.assertIn(cmd, runs, "no --json run for " + cmd)
                r = runs[cmd]
                self.assertEqual(r.returncode, 0, r.stderr[-600:])
                json.loads(r.stdout)
        self.assertEqual(json.loads(runs["envs show"].stdout)["id"], env_id)
        self.assertEqual(json.loads(runs["envs rm"].stdout)["removed"], [env_id])
        self.assertEqual(json.loads(runs["envs list"].stdout)[0]["id"], env_id)
        version = json.loads(runs["version"].stdout)
        self.assertIn("local", version["backends"])
        probe = json.loads(runs["probe"].stdout)
        self.assertTrue(probe["reachable"])
        self.assertIn("initialize_ms", probe["timings"])
        self.assertIn("first_command_ms", probe["timings"])


class Progress(CliTestCase):
    def test_probe_shows_where_time_went(self):
        # Provider waits exist on remote backends only: this runs under
        # run-against.sh ssh|daytona, where the profile is one.
        if not CONFIG or not PROFILE:
            self.skipTest("the local backend has no provider waits; "
                          "tests/e2e/run-against.sh ssh|daytona runs this")
        r = self.run_bin("probe", "--config", CONFIG, "--profile", PROFILE, "--json",
                         "--state-dir", self.state, env={"SANDGATE_PROGRESS": "log"},
                         timeout=600)
        self.assertEqual(r.returncode, 0, r.stderr[-1000:])
        timings = json.loads(r.stdout)["timings"]
        steps = timings["steps"]
        self.assertTrue({"connect", "create"} & set(steps), steps)
        self.assertTrue(all(s["ok"] and s["ms"] >= 0 for s in steps.values()), steps)
        self.assertGreater(timings["initialize_ms"], 0)
        self.assertIn("first_command_ms", timings)
        # Plain log lines on a pipe: one when a step opens, one when it ends.
        step = sorted(steps)[0]
        self.assertRegex(r.stderr.decode(), r"sandgate: %s: done in \d+\.\d{3} s" % step)


class Wording(CliTestCase):
    def test_mistakes_are_named(self):
        cases = [
            ((), b"no command given"),
            (("bogus",), b"unknown command 'bogus'"),
            (("--bogus",), b"unknown option '--bogus'"),
            (("config",), b"needs a subcommand"),
            (("config", "bogus"), b"unknown command 'config bogus'"),
            (("envs", "frobnicate"), b"unknown command 'envs frobnicate'"),
            (("envs", "show"), b"sandgate envs show: needs ID"),
            (("envs", "gc", "--older-than", "5x"), b"'5x' is not a duration"),
            (("serve", "--max-output", "12"), b"--max-output must be"),
            (("serve", "--config"), b"option '--config' needs a value"),
            (("probe", "--bogus"), b"sandgate probe: unknown option '--bogus'"),
            (("help", "bogus"), b"unknown command 'bogus'"),
        ]
        for args, words in cases:
            with self.subTest(args=args):
                r = self.run_bin(*args)
                self.assertEqual(r.returncode, 64)
                self.assertIn(words, r.stderr)
                self.assertIn(b"--help' for usage", r.stderr)
                self.assertEqual(r.stdout, b"")

    def test_group_help(self):
        for group in ("config", "envs"):
            r = self.run_bin(group, "--help")
            self.assertEqual(r.returncode, 0)
            self.assertIn(b"sandgate " + group.encode() + b" ", r.stdout)

    def test_version_names_the_backends(self):
        r = self.run_bin("--version")
        self.assertEqual(r.returncode, 0)
        self.assertRegex(r.stdout.decode(), r"^sandgate \S+ \(protocol 4; backends: .*local")


class Verdict(CliTestCase):
    def test_select_is_checked_like_serve_serves_it(self):
        good = self.config({"auto": {"backend": "select", "candidates": [
            {"profile": "here", "require": {"toolchains": {"sh": "*"}}}]},
            "here": {"backend": "local"}}, name="good.json", default="auto")
        r = self.run_bin("config", "check", "--config", good, "--json")
        self.assertEqual(r.returncode, 0, r.stdout)
        self.assertTrue(all(p["ok"] for p in json.loads(r.stdout)["profiles"]))
        self.assertEqual(r.stderr, b"", "the report belongs on stdout")
        bad = self.config({"auto": {"backend": "select", "candidates": [
            {"profile": "nowhere"}]}, "here": {"backend": "local"}}, name="bad.json",
            default="auto")
        r = self.run_bin("config", "check", "--config", bad, "--profile", "auto")
        self.assertEqual(r.returncode, 78)
        self.assertIn(b"nowhere", r.stdout)
        # The same verdict from serve (before any frame) and probe.
        r = self.run_bin("serve", "--config", bad, "--profile", "auto",
                         "--state-dir", self.state)
        self.assertEqual(r.returncode, 78)
        self.assertIn(b"nowhere", r.stderr)
        r = self.run_bin("probe", "--config", bad, "--profile", "auto",
                         "--state-dir", self.state)
        self.assertEqual(r.returncode, 78)
        r = self.run_bin("serve", "--config", good, "--profile", "auto",
                         "--state-dir", self.state)
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_serve_fails_before_reading_a_frame(self):
        init = (b'{"token":"%s","id":"1","method":"initialize","data":{"version":4,'
                b'"root":"/workspace","session":"s"}}\n' % host_token().encode())
        r = self.run_bin("serve", "--profile", "nosuch", "--state-dir", self.state,
                         stdin=init)
        self.assertEqual(r.returncode, 78)
        self.assertEqual(r.stdout, b"", "no frame was answered")
        self.assertIn(b"nosuch", r.stderr)


class EofRace(CliTestCase):
    def piped(self, frames, runs=15):
        data = b"".join(json.dumps(f).encode() + b"\n" for f in frames)
        out = []
        for _ in range(runs):
            r = self.run_bin("serve", "--state-dir", self.state, stdin=data, timeout=60)
            self.assertEqual(r.returncode, 0, r.stderr[-500:])
            out.append({json.loads(l)["id"]: json.loads(l) for l in r.stdout.splitlines()})
        return out

    def test_validation_error_survives_eof(self):
        tok = host_token()
        frames = [{"token": tok, "id": "1", "method": "initialize",
                   "data": {"version": 2, "root": "/workspace", "session": "s"}},
                  {"token": tok, "id": "2", "method": "initialize",
                   "data": {"version": 4, "root": "relative/dir", "session": "s"}}]
        for replies in self.piped(frames):
            self.assertTrue(replies["1"]["error"].startswith("unsupported:"), replies["1"])
            self.assertTrue(replies["2"]["error"].startswith("invalid_argument:"), replies["2"])

    def test_requests_needing_no_provider_are_answered(self):
        # On a bound session, requests written together with EOF: those
        # that need no provider work get their own answers, not `cancelled`.
        for _ in range(8):
            gw = Gateway(state_dir=self.state, config=None, profile=None)
            self.addCleanup(gw.cleanup)
            gw.initialize()
            frames = [{"token": gw.token, "id": "l", "method": "process/list"},
                      {"token": gw.token, "id": "g", "method": "process/get",
                       "data": {"id": "proc-00000000"}},
                      {"token": gw.token, "id": "x", "method": "execute",
                       "data": {"call": {"id": "c", "name": "no_such_tool",
                                         "arguments": "{}", "kind": "function"},
                                "permission_mode": "standard", "actor": gw.session}},
                      {"token": gw.token, "id": "r", "method": "export/read",
                       "data": {"token": "no-such-export", "offset": 0}}]
            for f in frames:
                gw.expect_sent(f["id"])
            gw.send_raw(b"".join(json.dumps(f).encode() + b"\n" for f in frames))
            code, err, _ = gw.shutdown()
            self.assertEqual(code, 0, err[-500:])
            self.assertIn("data", gw.wait_reply("l", 5))
            for rid in ("g", "x", "r"):
                reply = gw.wait_reply(rid, 5)
                self.assertNotIn("cancelled", reply.get("error", ""), reply)


if __name__ == "__main__":
    unittest.main()
