"""Shutdown budgets are planned, not hoped for (docs/delegation.md).

Through outer.py, with sandgate as the peer on the fake Daytona: when the
outer's grace is shorter than a slow provider's delete, the outer kills
sandgate mid-delete, and what remains is still in the state registry
(sandgate marked its record before the delete started), so a later
`sandgate envs gc` removes it.  When sandgate's own budget is shorter than
its plan, it says so on stderr before it starts, and the record says so too.

`config check` and `probe` report the budget each profile needs and warn
where the configured one is shorter.

Assertions about what remains are made on the fake's own state
(/__fake/state).  Needs SANDGATE_BIN; the Daytona part needs node, bwrap
and nsenter (skipped otherwise).  About 25 s.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
E2E = os.path.join(HERE, "..", "e2e")
sys.path.insert(0, E2E)

from sgclient import BIN, unique  # noqa: E402
import test_daytona_faults as dtf  # noqa: E402

OUTER = os.path.join(HERE, "outer.py")


def have(prog):
    return shutil.which(prog) is not None


def run(*args, env=None, timeout=120):
    e = dict(os.environ, **(env or {}))
    e.pop("SANDGATE_CONFIG", None)
    return subprocess.run([BIN] + list(args), env=e, capture_output=True, text=True,
                          timeout=timeout)


@unittest.skipUnless(BIN and have("node") and have("bwrap") and have("nsenter"),
                     "needs SANDGATE_BIN, node, bwrap and nsenter")
class GraceShorterThanDelete(dtf.OnFakeDaytona, unittest.TestCase):

    def through_outer(self, grace_ms, *peer_args):
        """A session through outer.py: initialize, then a delete slower than
        the grace, then EOF.  Returns (outer's status, its stderr, seconds
        from EOF to its exit)."""
        env = dict(os.environ, SG_PEER_BIN=BIN, SG_OUTER_GRACE_MS=str(grace_ms), **self.env)
        env.pop("SANDGATE_CONFIG", None)
        p = subprocess.Popen([sys.executable, OUTER, "serve", "--config", self.config,
                              "--state-dir", self.state] + list(peer_args),
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, env=env)
        init = {"token": "c4" * 32, "id": "1", "method": "initialize",
                "data": {"version": 4, "root": "/workspace", "session": unique("s"),
                         "identity": unique("i"), "remove_workspace_on_exit": True}}
        p.stdin.write((json.dumps(init) + "\n").encode())
        p.stdin.flush()
        reply = json.loads(p.stdout.readline())
        self.assertIn("data", reply, reply)
        self.assertEqual([s["state"] for s in self.fake.sandboxes()], ["started"])
        # The provider's delete now takes far longer than the grace.
        self.fake.fault({"method": "DELETE", "path": "^/api/sandbox/", "action": "delay",
                         "delayMs": 60000})
        t0 = time.monotonic()
        p.stdin.close()
        rc = p.wait(60)
        took = time.monotonic() - t0
        err = p.stderr.read().decode()
        p.stdout.close()
        p.stderr.close()
        return rc, err, took

    def gc_clears_it(self):
        # The provider answers again: a plain gc finds the record and
        # removes the sandbox and the record.
        self.fake.admin("DELETE", "/__fake/faults")
        g = run("envs", "gc", "--config", self.config, "--state-dir", self.state,
                env=self.env)
        self.assertEqual(g.returncode, 0, g.stdout + g.stderr)
        self.assertIn("its cleanup did not finish", g.stdout)
        deadline = time.monotonic() + 10
        while self.fake.sandboxes() and time.monotonic() < deadline:
            time.sleep(0.1)
        self.assertEqual(self.fake.sandboxes(), [], "sandboxes left at the provider")
        self.assertEqual(self.records(), [], "registry records left")

    def test_short_budget_is_said_and_recorded_before_the_kill(self):
        # The peer's own budget (10 s with --peer) is shorter than its plan
        # (a Daytona delete is 30 s until measured); the outer's grace is
        # shorter still.
        rc, err, took = self.through_outer(1500)
        self.assertEqual(rc, 1, err)
        self.assertLess(took, 1.5 + 5, "killed on time")
        self.assertIn("did not finish its cleanup within 1500 ms", err)
        self.assertRegex(err, r"sandgate: the shutdown budget \(10000 ms\) is shorter than "
                              r"its cleanup needs \(\d+ ms\) for environment \S+ \(daytona")
        self.assertIn("sandgate envs gc", err)
        self.assertEqual(len(self.fake.sandboxes()), 1, "the delete never finished")
        recs = self.records()
        self.assertEqual([r["status"] for r in recs], ["cleanup-pending"])
        self.assertEqual(recs[0]["budget"]["given_ms"], 10000)
        self.assertGreater(recs[0]["budget"]["needs_ms"], 10000)
        self.gc_clears_it()

    def test_grace_shorter_than_a_budget_that_fits(self):
        # sandgate's own budget covers its plan, but the outer's grace does
        # not: the record was marked before the delete started anyway.
        rc, err, took = self.through_outer(1500, "--shutdown-budget-ms", "60000")
        self.assertEqual(rc, 1, err)
        self.assertNotIn("is shorter than its cleanup needs", err)
        self.assertEqual(len(self.fake.sandboxes()), 1)
        recs = self.records()
        self.assertEqual([r["status"] for r in recs], ["cleanup-pending"])
        self.assertIn("stopped while removing it", recs[0]["error"])
        self.gc_clears_it()


@unittest.skipUnless(BIN, "needs SANDGATE_BIN")
class Reports(unittest.TestCase):

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="sg-deleg-report-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.config = os.path.join(self.dir, "config.json")
        with open(self.config, "w") as f:
            json.dump({"default": "quick", "profiles": {
                "quick": {"backend": "local", "shutdown_timeout_ms": 1500},
                "roomy": {"backend": "local"},
                "cloud": {"backend": "daytona", "image": "debian:12",
                          "api_key_env": "SG_DT_KEY", "shutdown_timeout_ms": 90000,
                          "shutdown_grace_ms": 60000}}}, f)
        self.env = {"SG_DT_KEY": "k", "XDG_CONFIG_HOME": self.dir}
        self.state = os.path.join(self.dir, "state")

    def test_config_check_reports_and_warns(self):
        r = run("config", "check", "--config", self.config, "--state-dir", self.state,
                env=self.env)
        self.assertEqual(r.returncode, 0, "warnings leave the verdict alone: " + r.stdout)
        self.assertEqual(r.stderr, "")
        out = r.stdout
        self.assertIn('profile "quick" (local): ok\n  shutdown needs 8000 ms: '
                      'stop processes 3000 ms (default)', out)
        self.assertIn("  command backend budget 1500 ms (shutdown_timeout_ms): too short", out)
        self.assertIn("  warning: as a command backend the shutdown budget is 1500 ms "
                      "(shutdown_timeout_ms), shorter than the 8000 ms its cleanup needs", out)
        # Daytona: 35 s until measured; the profile's 90 s peer budget is
        # longer than the outer's 60 s grace, and the host needs 95 s.
        self.assertIn("longer than the outer's grace (60000 ms)", out)
        self.assertIn("(95000 ms): set that entry's shutdown_timeout_ms to at least 95000", out)
        roomy = out.split('profile "roomy"')[1].split('profile "cloud"')[0]
        self.assertNotIn("warning", roomy)

        j = run("config", "check", "--config", self.config, "--json", "--state-dir",
                self.state, env=self.env)
        self.assertEqual(j.returncode, 0)
        prof = {p["name"]: p for p in json.loads(j.stdout)["profiles"]}
        quick = prof["quick"]["shutdown"]
        self.assertEqual(quick["needs_ms"], 8000)
        self.assertFalse(quick["budgets"][0]["enough"])
        self.assertEqual(quick["budgets"][0]["role"], "command backend")
        self.assertEqual(prof["roomy"]["shutdown"]["warnings"], [])
        self.assertEqual(prof["cloud"]["shutdown"]["needs_ms"], 35000)
        self.assertFalse(os.path.exists(self.state), "config check never makes the state dir")

    def test_probe_measures_then_reports(self):
        r = run("probe", "--config", self.config, "--profile", "quick", "--json",
                "--state-dir", self.state, env=self.env)
        self.assertEqual(r.returncode, 0, r.stderr)
        report = json.loads(r.stdout)
        sh = report["shutdown"]
        self.assertTrue(any("1500 ms" in w for w in sh["warnings"]), sh)
        # The probe session's own removal was timed for the next plan.
        with open(os.path.join(self.state, "budget.json")) as f:
            measured = json.load(f)["backends"]["local"]
        self.assertEqual(measured["remove"]["samples"], 1)
        t = run("probe", "--config", self.config, "--profile", "quick",
                "--state-dir", self.state, env=self.env)
        self.assertEqual(t.returncode, 0, t.stderr)
        self.assertIn("warning: as a command backend the shutdown budget is 1500 ms", t.stdout)


if __name__ == "__main__":
    unittest.main()
