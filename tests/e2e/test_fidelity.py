"""The host's behaviours sandgate lacked after issue 35 (the fidelity gaps),
each checked against the host's code, driven as the host drives them
(hostdriver.py):

- a process being stopped reads `stopping` until its end
  (internal/process/manager.go: Stop saves `stopping` before its signals;
  the wait moves `stopping` to `stopped`);
- `workspace_revision` takes the host's git form in a git repository
  (internal/tools: workspaceRevision runs `git status --porcelain=v2 -z
  --branch`: "git:" + HEAD's first 12 hex digits + ":worktree:" + 16 hex
  digits of the SHA-256 of the status records).

Runs on every backend (tests/e2e/run-against.sh BACKEND test_fidelity).
"""

import base64
import hashlib
import json
import threading
import time
import unittest

import hostdriver as hd
from hostdriver import CallError, Ctx

SLACK = hd.SLACK


class FidelityCase(hd.HostTestCase):
    def view(self, env, name, arguments, mode="unconfined"):
        return json.loads(hd.text_projection(env.execute(name, arguments, actor="a",
                                                         mode=mode)))


class Stopping(FidelityCase):
    def test_a_process_being_stopped_reads_stopping_until_it_ends(self):
        """The host's Stop saves `stopping` before it signals, and a
        process/get or process/list meanwhile shows it; the end moves it
        to `stopped` (requested_stop), whatever the exit."""
        env = self.environment(session="stopping")
        result = env.execute("bash", {"command": "trap '' TERM; echo READY; sleep 60",
                                      "run_in_background": True},
                             actor="a", mode="unconfined")
        pid = json.loads(hd.text_projection(result))["id"]
        client = env.client
        raw = client.call("process/read", {"id": pid, "options": {
            "OffsetBytes": 0, "Wait": int(2e9 * SLACK)}}, Ctx(10 * SLACK))
        self.assertIn("READY", json.dumps(raw))
        before = client.call("process/get", {"id": pid}, Ctx(10 * SLACK))
        self.assertEqual(before["status"], "running")

        final = {}

        def stop():
            final["rec"] = client.call("process/stop", {"id": pid},
                                       Ctx((2 + 5 + 5) * SLACK))

        t = threading.Thread(target=stop)
        t.start()
        seen, listed = set(), set()
        # The group ignores TERM: the stop waits its 2 s grace before KILL.
        deadline = time.monotonic() + 10 * SLACK
        while t.is_alive() and time.monotonic() < deadline:
            rec = client.call("process/get", {"id": pid}, Ctx(10 * SLACK))
            seen.add(rec["status"])
            for r in client.call("process/list", None, Ctx(10 * SLACK)):
                if r["id"] == pid:
                    listed.add(r["status"])
            if "stopping" in seen and "stopping" in listed:
                break
            time.sleep(0.05)
        t.join(20 * SLACK)
        self.assertIn("stopping", seen, "process/get during the stop: %s" % seen)
        self.assertIn("stopping", listed, "process/list during the stop: %s" % listed)
        rec = final["rec"]
        self.assertEqual(rec["status"], "stopped")
        self.assertEqual(rec["terminal_cause"], "requested_stop")
        after = client.call("process/get", {"id": pid}, Ctx(10 * SLACK))
        self.assertEqual(after["status"], "stopped")


class FullLog(FidelityCase):
    """The host's read_file opens its session artifacts, a bash run's
    full_log_ref among them (internal/tools/env.go ResolveReadPath: an
    absolute path under the session directory is readable by the
    read-only tools)."""

    def run_bash(self, env, command, mode="standard"):
        return env.execute("bash", {"command": command}, actor="a", mode=mode)

    def test_read_file_opens_a_bash_runs_full_log(self):
        env = self.environment(session="fulllog")
        ran = self.run_bash(env, "echo out-line; echo err-line >&2; exit 3")
        data = ran["structured_content"]
        ref = data["full_log_ref"]
        for mode in ("standard", "read_only", "unconfined"):
            read = env.execute("read_file", {"path": ref}, actor="a", mode=mode)
            sc = read["structured_content"]
            self.assertEqual(sc["text"], "out-line\nerr-line\n", mode)
            self.assertEqual(sc["content_sha256"], data["full_log_sha256"], mode)
            self.assertEqual(sc["path"], ref, mode)
        page = env.execute("read_file", {"path": ref, "offset": 2, "limit": 1}, actor="a")
        self.assertEqual(page["structured_content"]["text"], "err-line\n")

    def test_the_log_is_masked_as_bash_shows_it(self):
        env = self.environment(session="fulllogmask")
        secret = "sk-" + "Q" * 40
        # The command line does not hold the secret: only its output does.
        ran = self.run_bash(env, "echo api_key=sk-$(head -c 40 /dev/zero | tr '\\0' Q)")
        self.assertNotIn(secret, json.dumps(ran))
        self.assertIn("[REDACTED]", ran["structured_content"]["stdout"])
        read = env.execute("read_file", {"path": ran["structured_content"]["full_log_ref"]},
                           actor="a")
        self.assertNotIn(secret, json.dumps(read))
        self.assertIn("REDACTED", read["structured_content"]["text"])

    def test_a_link_planted_among_the_logs_is_not_followed(self):
        """The log directory is the environment's to write: a name there
        that is a link (or a file with a second name) is no log, and is
        read by the mode's ordinary rules (outside the root: refused)."""
        env = self.environment(session="fulllogattack")
        ref = self.run_bash(env, "true")["structured_content"]["full_log_ref"]
        logs = ref.rsplit("/", 1)[0]
        ln = self.run_bash(env, "ln -s /etc/passwd %s/proc-0000link.log && "
                           "echo secret-word > s.txt && ln s.txt %s/proc-0000hard.log; "
                           "ls %s" % (logs, logs, logs), mode="unconfined")
        listing = ln["structured_content"]["stdout"]
        if "proc-0000link.log" not in listing:
            self.skipTest("the environment's commands cannot write its log directory here")
        with self.assertRaises(CallError) as cm:
            env.execute("read_file", {"path": logs + "/proc-0000link.log"}, actor="a")
        self.assertIn("path_escape", str(cm.exception))
        self.assertNotIn("root:", str(cm.exception))
        if "proc-0000hard.log" in listing:
            with self.assertRaises(CallError) as cm:
                env.execute("read_file", {"path": logs + "/proc-0000hard.log"}, actor="a")
            self.assertIn("path_escape", str(cm.exception))
        # Only the log directory itself: its parent stays outside the root.
        with self.assertRaises(CallError) as cm:
            env.execute("read_file", {"path": logs + "/../" + ref.rsplit("/", 1)[1]},
                        actor="a")
        self.assertIn("path_escape", str(cm.exception))


PATCH = ("*** Begin Patch\n*** Update File: a.txt\n@@\n-one\n+two\n*** End Patch\n")


class ThenRun(FidelityCase):
    """apply_patch's then_run as the host's worker runs it
    (internal/tools/tool_apply_patch_fusion.go, executionworker/server.go):
    the patch and the command are nested calls back to the host, whose
    Execute gives them no handler (internal/executionenv/client.go:
    "parent execution scope is closed"); a host that routes them runs
    both and gets the patch's result with the command's outcome."""

    def setup_file(self, env):
        env.execute("write_file", {"path": "a.txt", "content": "one\n"}, actor="a")

    def fused(self, env, arguments, calls=None, mode="standard"):
        """execute apply_patch; with calls (a list), nested calls are run
        as the host's tool runtime runs them: through the environment, a
        tool's failure becoming an is_error result."""
        handler = None
        if calls is not None:
            def handler(ctx, call):
                calls.append((call.get("id"), call.get("name"),
                              json.loads(call.get("arguments") or "{}")))
                try:
                    return env.execute(call["name"], call["arguments"], actor="a",
                                       mode=mode, ctx=ctx)
                except CallError as e:
                    return {"content": [{"type": "text", "text": str(e)}], "is_error": True}
        client = env.connect()
        req = {"call": {"name": "apply_patch", "arguments": json.dumps(arguments)},
               "permission_mode": mode, "actor": "a"}
        return client.call("execute", req, Ctx(60 * SLACK), handler=handler)

    def read(self, env):
        return env.execute("read_file", {"path": "a.txt"}, actor="a")["structured_content"]["text"]

    def test_the_hosts_execute_gives_nested_calls_no_scope(self):
        env = self.environment(session="thenrun-noscope")
        self.setup_file(env)
        r = self.fused(env, {"patchText": PATCH, "then_run": {"command": "cat a.txt"}})
        self.assertEqual(r.get("is_error"), True, r)
        self.assertEqual(r["content"], [{"type": "text", "text":
                         "Patch outcome unavailable: parent execution scope is closed. "
                         "then_run was not started. Recover the tool records and inspect "
                         "files before retrying the patch."}])
        self.assertEqual(self.read(env), "one\n")

    def test_a_routed_then_run_applies_then_runs(self):
        env = self.environment(session="thenrun-ok")
        self.setup_file(env)
        calls = []
        r = self.fused(env, {"patchText": PATCH, "then_run": {"command": "cat a.txt",
                                                               "timeout_seconds": 30}}, calls)
        self.assertEqual([(c[0], c[1]) for c in calls], [("patch", "apply_patch"),
                                                         ("then_run", "bash")])
        self.assertEqual(calls[0][2], {"patchText": PATCH, "patch": "", "patch_text": "",
                                       "dry_run": False, "dryRun": False})
        self.assertEqual(calls[1][2], {"command": "cat a.txt", "timeout_seconds": 30})
        self.assertNotIn("is_error", r)
        self.assertEqual(r["content"][0]["text"], "Success. Updated the following files:\nM a.txt")
        head, _, rest = r["content"][1]["text"].partition("\n")
        self.assertEqual(head, "[then_run:completed] Patch applied and retained.")
        self.assertEqual(json.loads(rest)["output"], "two\n")
        sc = r["structured_content"]
        self.assertEqual(sc["files"][0]["path"], "a.txt")
        self.assertEqual(sc["then_run"]["status"], "completed")
        self.assertEqual(sc["then_run"]["result"]["structured_content"]["stdout"], "two\n")
        self.assertEqual(self.read(env), "two\n")

    def test_a_failed_command_keeps_the_patch(self):
        env = self.environment(session="thenrun-fail")
        self.setup_file(env)
        r = self.fused(env, {"patchText": PATCH, "then_run": {"command": "exit 3"}}, [])
        self.assertIs(r.get("is_error"), True)
        self.assertTrue(r["content"][1]["text"].startswith(
            "[then_run:failed] Patch applied and retained.\n"), r["content"][1]["text"])
        self.assertEqual(r["structured_content"]["then_run"]["status"], "failed")
        self.assertEqual(self.read(env), "two\n")

    def test_a_failed_patch_skips_the_command(self):
        env = self.environment(session="thenrun-skip")
        env.execute("write_file", {"path": "a.txt", "content": "other\n"}, actor="a")
        calls = []
        r = self.fused(env, {"patchText": PATCH, "then_run": {"command": "touch ran"}}, calls)
        self.assertEqual([c[1] for c in calls], ["apply_patch"])
        self.assertIs(r.get("is_error"), True)
        self.assertEqual(r["content"][-1]["text"],
                         "[then_run:skipped] The patch failed; the command was not run.")
        with self.assertRaises(CallError):
            env.execute("read_file", {"path": "ran"}, actor="a")

    def test_then_run_is_checked_as_the_host_checks_it(self):
        env = self.environment(session="thenrun-args")
        self.setup_file(env)
        cases = [
            ({"dry_run": True, "then_run": {"command": "true"}},
             "then_run cannot be combined with dry_run"),
            ({"then_run": {"command": "  "}}, "then_run requires command"),
            ({"then_run": {"command": "true", "timeout_seconds": 0}},
             "then_run timeout_seconds must be between 1 and 3600"),
            ({"then_run": {"command": "true", "scope": "all"}},
             "then_run scope must be targeted, affected, or full"),
            ({"then_run": {"command": "true", "run_in_background": True}},
             'invalid then_run: json: unknown field "run_in_background"'),
        ]
        for extra, want in cases:
            args = {"patchText": PATCH}
            args.update(extra)
            with self.assertRaises(CallError, msg=want) as cm:
                self.fused(env, args, [])
            self.assertEqual(str(cm.exception), "invalid_argument: " + want)
        self.assertEqual(self.read(env), "one\n")


def host_git_revision(status):
    """internal/tools workspaceRevision, from `git status --porcelain=v2 -z
    --branch` output (bytes): None where the host falls back to its
    filesystem form."""
    head, records = "", b""
    for rec in status.split(b"\0"):
        if not rec:
            continue
        if rec.startswith(b"# branch.oid "):
            head = rec[len(b"# branch.oid "):].decode().strip()
            continue
        if rec.startswith(b"# "):
            continue
        records += rec + b"\0"
    head = "".join(c for c in head.lower() if c in "0123456789abcdef")
    if not head:
        return None
    return "git:%s:worktree:%s" % (head[:12], hashlib.sha256(records).hexdigest()[:16])


class GitRevision(FidelityCase):
    SETUP = ("git init -q && git config user.email t@example.com && "
             "git config user.name t && printf 'one\\n' > a.txt && git add a.txt && "
             "git commit -qm one")

    def git_environment(self, **kw):
        """The environment, initialized; the test is skipped where git cannot
        run read_only (the revision's git then never runs, and the tree's
        own form stands: gateway/tools/git.c)."""
        env = self.environment(**kw)
        env.execute("list_files", {}, actor="a")
        facts = ((env.init_reply or {}).get("environment") or {}).get("facts") or {}
        if ((facts.get("confinement") or {}).get("read_only")) == "refused":
            self.skipTest("read_only commands are refused in this environment (no Landlock), "
                          "so the workspace revision keeps the tree's own form")
        return env

    def status(self, env):
        out = hd.text_projection(env.execute("bash", {
            # No optional locks: this look must not refresh the index, which
            # would move what the revision's cache watches.
            "command": "git rev-parse HEAD && "
                       "git --no-optional-locks status --porcelain=v2 -z --branch | base64 -w0"},
            actor="a", mode="unconfined"))
        lines = json.loads(out)["output"].split("\n")
        return lines[0].strip(), base64.b64decode(lines[1])

    def test_a_git_workspace_reports_the_hosts_git_revision(self):
        env = self.git_environment(session="gitrev")
        self.view(env, "bash", {"command": self.SETUP})
        head, status = self.status(env)
        clean = host_git_revision(status)
        self.assertEqual(clean, "git:%s:worktree:%s" % (head[:12],
                                                        hashlib.sha256(b"").hexdigest()[:16]),
                         "the tree is clean after the commit: %r" % status)
        self.assertEqual(self.view(env, "read_file", {"path": "a.txt"})["workspace_revision"],
                         clean)
        self.assertEqual(self.view(env, "git", {"subcommand": "log", "args": ["-1"]})
                         ["workspace_revision"], clean)

        wrote = self.view(env, "write_file", {"path": "b.txt", "content": "two\n"})
        dirty = host_git_revision(b"# branch.oid " + head.encode() + b"\0? b.txt\0")
        self.assertEqual(wrote["workspace_revision"], dirty)
        self.assertEqual(host_git_revision(self.status(env)[1]), dirty)
        self.assertEqual(self.view(env, "bash", {"command": "true"})["workspace_revision"],
                         dirty)
        listed = self.view(env, "list_files", {})
        self.assertTrue(listed["workspace_revision"].startswith(dirty + ";result:"),
                        listed["workspace_revision"])
        found = self.view(env, "grep", {"pattern": "two"})
        self.assertTrue(found["workspace_revision"].startswith(dirty + ";result:"),
                        found["workspace_revision"])
        # read_only agents see the same revision (the git run is sandgate's).
        self.assertEqual(self.view(env, "read_file", {"path": "a.txt"}, mode="read_only")
                         ["workspace_revision"], dirty)

    def test_the_revision_follows_what_git_sees(self):
        """git's answer is reused while neither the tree nor git's own
        files move; staging, committing and a change where the tree's own
        digest does not look (vendor/) each give git's new answer."""
        env = self.git_environment(session="gitrevmove")
        self.view(env, "bash", {"command": self.SETUP + " && mkdir .github && "
                                "echo on > .github/ci.yml && git add .github && "
                                "git commit -qm ci"})
        # The dot directory the tree's digest skips is watched for git's
        # sake; vendor/ is not, so from there on every call asks git.
        steps = ["echo two > b.txt", "git add b.txt", "git commit -qm b",
                 "echo off >> .github/ci.yml", "git checkout -q -b other",
                 "mkdir vendor && echo v > vendor/v.txt && git add vendor && git commit -qm v",
                 "echo w >> vendor/v.txt"]
        seen = set()
        for step in steps:
            self.view(env, "bash", {"command": step})
            got = self.view(env, "read_file", {"path": "a.txt"})["workspace_revision"]
            want = host_git_revision(self.status(env)[1])
            self.assertEqual(got, want, "after %r" % step)
            seen.add(got)
        # The branch switch moves no commit and no file: git's answer stays.
        self.assertEqual(len(seen), 6, seen)

    def test_an_unborn_branch_keeps_the_hosts_one_hex_letter(self):
        """The host trims "(initial)" to its hex characters: "a"."""
        env = self.git_environment(session="gitunborn")
        self.view(env, "bash", {"command": "git init -q"})
        rev = self.view(env, "list_files", {})["workspace_revision"]
        self.assertTrue(rev.startswith("git:a:worktree:"), rev)

    def test_a_workspace_without_git_keeps_the_filesystem_form(self):
        env = self.environment(session="fsrev")
        wrote = self.view(env, "write_file", {"path": "x.txt", "content": "x"})
        self.assertRegex(wrote["workspace_revision"], r"^fs:worktree:[0-9a-f]{16}$")


if __name__ == "__main__":
    unittest.main()
