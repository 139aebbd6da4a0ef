"""The bash tool, the host's only command tool (protocol section 3; the host's
tool_bash.go in reference/host-wire.md section 3.2): a fresh login shell per
call in `cwd`, the host's non-interactive environment, a non-zero exit as a
normal result, output bounded in the view (30 KiB) and in
structured_content (64 KiB a stream), a foreground command past its
timeout promoted to a managed process instead of killed, run_in_background,
the permission modes, and what commands never see."""

import time
import unittest

from sgclient import (CANARY_NAME, ROOT, GatewayTestCase, Marker, live_checker, unique,
                      wait_gone)

KiB = 1024
OUTPUT_MAX = 30 * KiB      # the view's output (maxShellOutputBytes)
STREAM_MAX = 64 * KiB      # structured stdout and stderr, each


class Bash(GatewayTestCase):
    shared_gateway = True

    def test_exit_codes_are_results(self):
        gw = self.gw
        v = gw.sh("true")
        self.assertEqual(v["exit_code"], 0)
        self.assertIs(v["timed_out"], False)
        self.assertIs(v["truncated"], False)
        self.assertIsInstance(v["duration_ms"], int)
        # A command that ran and failed is a normal result, not an error reply.
        res = gw.tool_ok("bash", {"command": "echo partial; exit 3"})
        v = gw.view("bash", {"command": "echo partial; exit 3"})
        self.assertEqual(v["exit_code"], 3)
        self.assertIn("partial", v["output"])
        self.assertEqual(res["structured_content"]["exit_code"], 3)
        self.assertEqual(res["structured_content"]["promoted_process_id"], "")

    def test_stdout_and_stderr(self):
        res = self.gw.tool_ok("bash", {"command": "echo to-out; echo to-err >&2; echo again"})
        sc = res["structured_content"]
        self.assertEqual(sc["stdout"].split(), ["to-out", "again"])
        self.assertEqual(sc["stderr"].split(), ["to-err"])
        v = self.gw.sh("echo to-out; echo to-err >&2; echo again")
        for word in ("to-out", "to-err", "again"):
            self.assertIn(word, v["output"])

    def test_a_login_shell_of_its_own_per_call(self):
        gw = self.gw
        self.assertEqual(gw.sh_ok("shopt -q login_shell && echo login").strip(), "login")
        gw.sh_ok("export SG_E2E_LEFT=1; cd /; sg_e2e_fn() { :; }")
        self.assertEqual(gw.sh_ok("printf '[%s]' \"$SG_E2E_LEFT\"; type sg_e2e_fn >/dev/null "
                                  "2>&1 || printf gone; pwd"),
                         "[]gone" + ROOT.rstrip("/") + "\n", "a fresh shell per call")

    def test_quoting_is_the_shells(self):
        out = self.gw.sh_ok("printf '%s|' '$HOME' '`id`' 'a;b' '*'")
        self.assertEqual(out, "$HOME|`id`|a;b|*|")

    def test_missing_program_is_a_result(self):
        v = self.gw.sh("/nonexistent/sg-e2e-program")
        self.assertEqual(v["exit_code"], 127)

    def test_bad_arguments_are_error_replies(self):
        gw = self.gw
        self.assertTrue(gw.tool_error("bash", {}))
        self.assertTrue(gw.tool_error("bash", {"command": ["echo", "hi"]}))
        # The legacy `action` key is refused with a hint, as the host does.
        self.assertTrue(gw.tool_error("bash", {"command": "true", "action": "start"}))

    def test_cwd(self):
        gw = self.gw
        d = unique("cwd")
        gw.sh_ok("mkdir -p %s" % d)
        self.assertEqual(gw.sh_ok("pwd", cwd=d).strip(), ROOT.rstrip("/") + "/" + d)
        self.assertEqual(gw.sh_ok("pwd").strip(), ROOT.rstrip("/"), "default cwd is root")
        self.assertTrue(gw.tool_error("bash", {"command": "pwd", "cwd": "../.."}),
                        "a cwd outside root in standard mode")

    def test_the_hosts_non_interactive_environment(self):
        out = self.gw.sh_ok("printf '%s\\n' \"$GIT_PAGER\" \"$GIT_TERMINAL_PROMPT\" \"$PAGER\" "
                            "\"$EDITOR\" \"$NO_COLOR\"")
        self.assertEqual(out.split("\n")[:5], ["cat", "0", "cat", "true", "1"])

    def test_timeout_promotes_instead_of_killing(self):
        gw = self.gw
        t0 = time.monotonic()
        res = gw.tool_ok("bash", {"command": "echo begun; sleep 20; echo finished",
                                  "timeout_seconds": 1})
        took = time.monotonic() - t0
        self.assertLess(took, 10, "a 1 s timeout took %.1f s" % took)
        sc = res["structured_content"]
        self.assertIs(sc["timed_out"], True)
        pid = sc["promoted_process_id"]
        self.assertTrue(pid.startswith("proc-"), sc)
        rec = gw.ok("process/get", {"id": pid})
        self.assertEqual((rec["status"], rec["lifecycle"]), ("running", "managed"),
                         "promoted, not killed")
        self.assertIn("begun", gw.read(pid, offset=0, wait_ns=5 * 10**9)["Output"])
        final = gw.stop(pid)
        self.assertIn(final["status"], ("stopped", "failed"))

    def test_output_is_bounded(self):
        gw = self.gw
        res = gw.tool_ok("bash", {"command": "head -c 3000000 /dev/zero | tr '\\000' a; "
                                             "echo; echo tail-marker"})
        v = gw.sh("head -c 3000000 /dev/zero | tr '\\000' a; echo; echo tail-marker")
        self.assertIs(v["truncated"], True)
        self.assertEqual(v["exit_code"], 0, "the command itself still ran to the end")
        self.assertLessEqual(len(v["output"].encode()), OUTPUT_MAX + 1024)
        sc = res["structured_content"]
        self.assertIs(sc["stdout_truncated"], True)
        self.assertLessEqual(len(sc["stdout"].encode()), STREAM_MAX + 1024)
        v = gw.sh("head -c 20000 /dev/zero | tr '\\000' b")
        self.assertIs(v["truncated"], False)
        self.assertEqual(v["output"], "b" * 20000)

    def test_gateway_environment_never_reaches_commands(self):
        out = self.gw.sh_ok("env")
        names = {line.split("=", 1)[0] for line in out.splitlines() if "=" in line}
        self.assertNotIn(CANARY_NAME, names)
        self.assertNotIn(self.gw.canary, out)

    def test_duration(self):
        v = self.gw.sh("sleep 0.3")
        self.assertGreaterEqual(v["duration_ms"], 250)
        self.assertLess(v["duration_ms"], 10000)

    def test_leftovers_in_process_group_are_killed(self):
        gw = self.gw
        m = Marker()
        t0 = time.monotonic()
        # The background sleeper even keeps the output pipe open.
        v = gw.sh("%s & echo started" % m.command)
        took = time.monotonic() - t0
        self.assertEqual(v["exit_code"], 0)
        self.assertIn("started", v["output"])
        self.assertLess(took, 10, "the command's exit ends the call (%.1f s)" % took)
        count = live_checker(gw)
        if count is None:
            self.skipTest("processes are not observable on this backend")
        self.assertTrue(wait_gone(count, m, 2.0), "a background child survived its command")

    def test_read_only_never_writes(self):
        gw = self.gw
        d = unique("ro")
        gw.sh_ok("mkdir -p %s && printf original > %s/keep.txt" % (d, d))
        attempts = ["echo x > %s/new.txt" % d, "rm -f %s/keep.txt" % d,
                    "echo changed > %s/keep.txt" % d, "mkdir %s/newdir" % d]
        refused = 0
        for cmd in attempts:
            r = gw.execute("bash", {"command": cmd}, "read_only")
            if "error" in r:
                refused += 1
        self.assertIn(refused, (0, len(attempts)), "either confined or refused, consistently")
        self.assertEqual(gw.sh_ok("cat %s/keep.txt; ls %s" % (d, d)), "originalkeep.txt\n")
        if refused == 0:
            # Confined, not refused: reading still works.
            self.assertEqual(gw.sh_ok("cat %s/keep.txt" % d, "read_only"), "original")

    def test_concurrent_commands_run_in_parallel(self):
        # A rendezvous, not a stopwatch: each command waits until all three
        # have started, which only happens when they run side by side. Serial
        # commands would each give up alone; a loaded machine only slows them.
        gw = self.gw
        d = unique("rdv")
        gw.sh_ok("mkdir -p %s" % d)
        meet = ("touch %s/%%d; for k in $(seq 300); do "
                "[ $(ls %s | wc -l) -ge 3 ] && { echo met%%d; exit 0; }; sleep 0.1; done; "
                "echo alone%%d" % (d, d))
        ids = [gw.execute_req("bash", {"command": meet % (i, i, i)}) for i in range(3)]
        for i, rid in enumerate(ids):
            r = gw.wait_reply(rid, 60)
            self.assertIn("met%d" % i, r["data"]["structured_content"]["stdout"],
                          "command %d never saw the other two running: not concurrent" % i)

    def test_run_in_background_starts_a_managed_process(self):
        gw = self.gw
        rec = gw.start("echo hi; sleep 0.2")
        self.assertEqual((rec["lifecycle"], rec["owner_kind"], rec["root_thread_id"]),
                         ("managed", "main_agent", gw.session))
        self.assertEqual(rec["exit_code"], -1)
        final = gw.wait_ended(rec["id"])
        self.assertEqual((final["status"], final["exit_code"]), ("stopped", 0))
        self.assertIn("hi", gw.read(rec["id"], offset=0)["Output"])


class ForwardedEnvironment(GatewayTestCase):

    def test_binding_environment_reaches_commands(self):
        # binding.environment is the variables the host forwards.
        gw = self.gateway(binding={"environment": {"SG_E2E_FWD": "fwd-value"}})
        self.assertEqual(gw.sh_ok("printf %s \"$SG_E2E_FWD\""), "fwd-value")
        self.assertNotIn(gw.canary, gw.sh_ok("env"))


if __name__ == "__main__":
    unittest.main()
