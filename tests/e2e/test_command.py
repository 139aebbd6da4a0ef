"""run_command (docs/protocol.md section 7.7)."""

import time
import unittest

from sgclient import (CANARY_NAME, CONFIG, MiB, ROOT, GatewayTestCase, Marker,
                      live_checker, unique, wait_gone)

# The minimal environment commands see (section 10), plus the working
# directory variables a sandbox runtime or shell sets (no secret in them).
MINIMAL_ENV = {"PATH", "HOME", "USER", "LOGNAME", "TMPDIR", "TZ", "LANG",
               "PWD", "OLDPWD", "SHLVL", "_"}


def env_names(text):
    return {line.split("=", 1)[0] for line in text.splitlines() if "=" in line}


class Command(GatewayTestCase):
    shared_gateway = True

    def test_exit_codes(self):
        gw = self.gw
        res = gw.sh("true")
        self.assertIs(res["is_error"], False)
        self.assertEqual(res["metadata"]["exit_code"], 0)
        res = gw.sh("echo partial; exit 3")
        self.assertIs(res["is_error"], True)
        self.assertEqual(res["metadata"]["exit_code"], 3)
        self.assertIn("partial", res["content"])
        md = res["metadata"]
        self.assertIs(md["timed_out"], False)
        self.assertIs(md["truncated"], False)
        self.assertIsInstance(md["duration_ms"], int)

    def test_stdout_and_stderr_combined(self):
        res = self.gw.sh("echo to-out; echo to-err >&2; echo again")
        self.assertEqual(res["content"].split(), ["to-out", "to-err", "again"])

    def test_argv_without_shell(self):
        gw = self.gw
        res = gw.tool_ok("run_command", {"argv": ["printf", "%s", "a b"]})
        self.assertEqual(res["content"], "a b")
        res = gw.tool_ok("run_command", {"argv": ["printf", "%s|", "$HOME", "`id`", "a;b", "*"]})
        self.assertEqual(res["content"], "$HOME|`id`|a;b|*|")

    def test_argv_program_names_with_odd_characters(self):
        # A program whose name holds '=' or starts with '-' is a program,
        # never an assignment or an option of whatever wraps the command
        # (env(1) on the singularity backend read "./a=b" as a variable).
        gw = self.gw
        gw.sh_ok("printf '#!/bin/sh\\necho ran \"$@\"\\n' >a=b && cp a=b ./-x && chmod +x a=b ./-x")
        res = gw.tool_ok("run_command", {"argv": ["./a=b", "one"]})
        self.assertEqual(res["content"], "ran one\n")
        res = gw.tool_ok("run_command", {"argv": ["./-x", "two"]})
        self.assertEqual(res["content"], "ran two\n")

    def test_missing_program_is_tool_error(self):
        res = self.gw.tool("run_command", {"argv": ["/nonexistent/sg-e2e-program"]})
        self.assertIs(res["is_error"], True)
        self.assertNotEqual(res["metadata"].get("exit_code"), 0)

    def test_bad_arguments(self):
        gw = self.gw
        self.assertCode(gw.tool_error("run_command", {}), "invalid_argument", "no command")
        self.assertCode(gw.tool_error("run_command", {"argv": []}), "invalid_argument",
                        "empty argv")
        self.assertCode(gw.tool_error("run_command", {"argv": "echo hi"}), "invalid_argument",
                        "argv not a list")

    def test_cwd_and_stdin(self):
        gw = self.gw
        d = unique("cwd")
        gw.tool_ok("make_dir", {"path": d})
        self.assertEqual(gw.sh_ok("pwd", cwd=d).strip(), ROOT.rstrip("/") + "/" + d)
        self.assertEqual(gw.sh_ok("pwd").strip(), ROOT.rstrip("/"), "default cwd is root")
        res = gw.tool_ok("run_command", {"argv": ["cat"], "stdin": "line one\nline two"})
        self.assertEqual(res["content"], "line one\nline two")
        res = gw.tool_ok("run_command", {"command": "wc -c"})
        self.assertEqual(res["content"].strip(), "0", "no stdin means empty stdin")

    def test_timeout(self):
        t0 = time.monotonic()
        # 1.5 s: long enough for a loaded machine to start the shell, far
        # shorter than the command.
        res = self.gw.tool("run_command", {"command": "echo begun; sleep 20", "timeout_ms": 1500})
        took = time.monotonic() - t0
        self.assertIs(res["metadata"]["timed_out"], True)
        self.assertIs(res["is_error"], True)
        self.assertIn("begun", res["content"])
        self.assertLess(took, 10, "a 1.5 s timeout took %.1f s" % took)
        self.assertGreaterEqual(res["metadata"]["duration_ms"], 1450)

    def test_signal(self):
        res = self.gw.sh("kill -KILL $$")
        self.assertIs(res["is_error"], True)
        self.assertIn(res["metadata"]["signal"], ("SIGKILL", 9))

    def test_output_truncation(self):
        gw = self.gw
        res = gw.sh("head -c 3000000 /dev/zero | tr '\\000' a; echo; echo tail-marker")
        md = res["metadata"]
        self.assertIs(md["truncated"], True)
        self.assertLessEqual(len(res["content"].encode()), MiB + 4096,
                             "output kept per call is bounded by 1 MiB")
        self.assertGreater(len(res["content"]), 512 * 1024)
        self.assertEqual(md["exit_code"], 0, "the command itself still ran to the end")
        res = gw.sh("head -c 100000 /dev/zero | tr '\\000' b")
        self.assertIs(res["metadata"]["truncated"], False)
        self.assertEqual(res["content"], "b" * 100000)

    def test_env_reaches_command_but_gateway_env_does_not(self):
        gw = self.gw
        res = gw.tool_ok("run_command", {"argv": ["env"], "env": {"SG_E2E_GIVEN": "given value"}})
        names = env_names(res["content"])
        self.assertIn("SG_E2E_GIVEN=given value", res["content"].splitlines())
        self.assertNotIn(CANARY_NAME, names)
        self.assertNotIn(gw.canary, res["content"])
        if CONFIG is None:
            extra = names - MINIMAL_ENV - {"SG_E2E_GIVEN"}
            self.assertEqual(extra, set(), "commands see only the minimal environment")
        res = gw.tool_ok("run_command", {"command": "printf %s \"$SG_E2E_GIVEN\"",
                                         "env": {"SG_E2E_GIVEN": "via shell"}})
        self.assertEqual(res["content"], "via shell")
        out = gw.sh_ok("env")
        self.assertNotIn(gw.canary, out)
        self.assertNotIn("SG_E2E_GIVEN", out, "a request's env does not persist")

    def test_duration(self):
        res = self.gw.sh("sleep 0.3")
        self.assertGreaterEqual(res["metadata"]["duration_ms"], 250)
        self.assertLess(res["metadata"]["duration_ms"], 10000)

    def test_leftovers_in_process_group_are_killed(self):
        gw = self.gw
        m = Marker()
        t0 = time.monotonic()
        # The background sleeper even keeps the output pipe open.
        res = gw.sh("%s & echo started" % m.command)
        took = time.monotonic() - t0
        self.assertEqual(res["metadata"]["exit_code"], 0)
        self.assertIn("started", res["content"])
        self.assertLess(took, 10, "the command's exit ends the call (%.1f s)" % took)
        count = live_checker(gw)
        if count is None:
            self.skipTest("processes are not observable on this backend")
        self.assertTrue(wait_gone(count, m, 2.0), "a background child survived its command")

    def test_read_only_never_writes(self):
        gw = self.gw
        d = unique("ro")
        gw.write(d + "/keep.txt", "original")
        attempts = ["echo x > %s/new.txt" % d, "rm -f %s/keep.txt" % d,
                    "echo changed > %s/keep.txt" % d, "mkdir %s/newdir" % d]
        refused = 0
        for cmd in attempts:
            r = gw.execute("run_command", {"command": cmd}, "read_only")
            if "error" in r:
                self.assertCode(r["error"], "permission_denied", cmd)
                refused += 1
            else:
                self.assertIs(r["data"]["is_error"], True, "%s in read_only succeeded" % cmd)
        self.assertIn(refused, (0, len(attempts)), "either confined or refused, consistently")
        self.assertEqual(gw.tool_ok("read_file", {"path": d + "/keep.txt"})["content"],
                         "original")
        for gone in ("new.txt", "newdir"):
            self.assertTrue(gw.tool("stat_path", {"path": d + "/" + gone})["is_error"], gone)
        if refused == 0:
            # Confined, not refused: reading still works.
            res = gw.tool_ok("run_command", {"command": "cat %s/keep.txt" % d}, "read_only")
            self.assertEqual(res["content"], "original")

    def test_concurrent_commands_run_in_parallel(self):
        gw = self.gw
        t0 = time.monotonic()
        ids = [gw.execute_req("run_command", {"command": "sleep 1; echo done%d" % i})
               for i in range(3)]
        for i, rid in enumerate(ids):
            r = gw.wait_reply(rid, 30)
            self.assertIn("done%d" % i, r["data"]["content"])
        took = time.monotonic() - t0
        self.assertLess(took, 2.5, "three 1 s commands took %.1f s: not concurrent" % took)


class ForwardEnv(GatewayTestCase):

    def test_forward_env_reaches_commands(self):
        gw = self.gateway(binding={"environment": {"forward_env": {"SG_E2E_FWD": "fwd-value"}}})
        res = gw.tool_ok("run_command", {"argv": ["env"]})
        self.assertIn("SG_E2E_FWD=fwd-value", res["content"].splitlines())
        self.assertNotIn(gw.canary, res["content"])


if __name__ == "__main__":
    unittest.main()
