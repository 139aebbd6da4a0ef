"""The ssh backend against a host that stops answering and a gateway that is
killed: the shutdown budget, and what `sandgate envs` leaves behind.

Runs against its own real sshd on 127.0.0.1 (tests/ssh/sshd-harness.sh),
whatever SANDGATE_TEST_PROFILE says; skipped when sshd is not installed.
The "remote" is this machine, so its processes are visible here.

- A remote that never answers (every process of the harness's sshd, the
  sessions and the commands they run, stopped with SIGSTOP) while requests
  are in flight: EOF must end the gateway within its shutdown budget (10%
  allowed).  The kill of each cancelled command (`sg-helper job --kill`)
  waited 5 s of its own past the budget.
- A gateway SIGKILLed while a bash command runs: `envs rm` and `envs gc`
  must stop the command on the remote and leave no ssh master nor ssh
  client of the dead gateway here.  The detached master (ControlPersist)
  and the dead gateway's client kept the command's session open, so its
  job never noticed, and the removal stopped only background processes.
"""

import json
import os
import random
import re
import signal
import subprocess
import tempfile
import time
import unittest

import sgclient
import test_ssh_paths as paths
from sgclient import (BIN, GatewayTestCase, Gateway, Marker, host_env,
                      host_processes_matching)

LIFETIME = 1  # seconds: the host profile's, so a crashed environment expires at once


def children():
    """{ppid: [pid...]} of every process on this machine."""
    out = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name) as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        out.setdefault(ppid, []).append(int(name))
    return out


def below(pid):
    """pid and every process below it."""
    tree, todo, found = children(), [pid], []
    while todo:
        p = todo.pop()
        found.append(p)
        todo.extend(tree.get(p, []))
    return found


def signal_all(pids, sig):
    for p in pids:
        try:
            os.kill(p, sig)
        except ProcessLookupError:
            pass


# Through a delegating outer (SG_PEER_BIN: tests/delegation) the gateway the
# test talks to, times and kills is the relay, not the ssh backend's.
@unittest.skipIf(os.environ.get("SG_PEER_BIN"), "measures and kills sandgate itself, not a relay")
class SshAttacks(GatewayTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.h = paths.harness_start()
        cls.work = tempfile.mkdtemp(prefix="sg-e2e-sshattacks-", dir="/var/tmp")
        with open(cls.h["SANDGATE_TEST_CONFIG"]) as f:
            prof = json.load(f)["profiles"]["ssh"]
        cls.cfg = os.path.join(cls.work, "config.json")
        # "capped": commands in a cgroup of the session's (memory_mb), where
        # this login can make one (root here, as in CI).
        with open(cls.cfg, "w") as f:
            json.dump({"default": "p", "profiles": {
                "p": prof, "capped": dict(prof, memory_mb=512)}}, f)

    @classmethod
    def tearDownClass(cls):
        subprocess.run(["sh", paths.HARNESS, "stop", cls.h["SSHD_DIR"]], capture_output=True)
        subprocess.run(["rm", "-rf", cls.work])
        super().tearDownClass()

    def state(self):
        d = tempfile.mkdtemp(prefix="sg-e2e-ssha-")
        self.addCleanup(lambda: subprocess.run(["rm", "-rf", d]))
        return d

    def envs(self, state, *args):
        p = subprocess.run([BIN, "envs", *args, "--state-dir", state, "--config", self.cfg],
                           capture_output=True, text=True, timeout=120)
        return p.returncode, p.stdout + p.stderr

    def freeze(self):
        """Stop every process of the harness's sshd (the remote side): it
        keeps its connections and answers nothing.  Undone at cleanup."""
        pids = below(int(self.h["SSHD_PID"]))
        signal_all(pids, signal.SIGSTOP)
        self.addCleanup(lambda: signal_all(below(int(self.h["SSHD_PID"])) + pids,
                                           signal.SIGCONT))
        return pids

    def ssh_of(self, state):
        """ssh processes on this machine that use a control socket under
        state (masters and their clients)."""
        return [p for p in host_processes_matching(state)
                if self.comm(p) == "ssh"]

    @staticmethod
    def cmdline(pid):
        try:
            with open("/proc/%d/cmdline" % pid, "rb") as f:
                return f.read().replace(b"\0", b" ").decode("utf-8", "replace")
        except OSError:
            return ""

    @staticmethod
    def comm(pid):
        try:
            with open("/proc/%d/comm" % pid) as f:
                return f.read().strip()
        except OSError:
            return ""

    def wait_running(self, needle, count, timeout=30):
        deadline = time.monotonic() + timeout * sgclient.SLACK
        while len(host_processes_matching(needle)) < count:
            if time.monotonic() > deadline:
                self.fail("%d commands did not start on the remote" % count)
            time.sleep(0.1)

    # ---- the shutdown budget against a remote that never answers ----------

    def test_shutdown_budget_holds_when_the_remote_never_answers(self):
        budget_ms = 4000
        state = self.state()
        gw = Gateway(state_dir=state, config=self.cfg, profile="p", budget_ms=budget_ms)
        self.addCleanup(gw.cleanup)
        gw.initialize()
        # A background process, so the shutdown stops processes over ssh.
        m = Marker()
        gw.start(m.command)
        # Requests in flight: commands running when the remote stops ...
        # (The tag is in the sleep's own argv: a shell comment is not, since
        # bash runs a lone command by exec.)
        tag = "sleep 61.%06d" % random.randrange(10**6)
        for i in range(4):
            gw.execute_req("bash", {"command": "%s%d" % (tag, i)})
        self.wait_running(tag, 4)
        self.freeze()
        # ... and file tools and a process list sent after it stopped.
        for i in range(3):
            gw.execute_req("read_file", {"path": "f%d" % i})
        gw.request("process/list")
        time.sleep(0.5)
        rc, err, took = gw.shutdown(budget_ms / 1000 + 60)
        # Within 10%; a sanitized gateway's own cleanup takes longer.
        slack = 2 if os.environ.get("SG_SANITIZED") else 0
        self.assertLess(took, budget_ms / 1000 * 1.1 + slack,
                        "EOF to exit took %.2f s with a %d ms budget; stderr tail:\n%s"
                        % (took, budget_ms, err[-2000:]))
        # The master (and every client) ended with it, unanswered as it was.
        deadline = time.monotonic() + 2 * sgclient.SLACK
        while self.ssh_of(state) and time.monotonic() < deadline:
            time.sleep(0.1)
        self.assertEqual([self.cmdline(p)[-300:] for p in self.ssh_of(state)], [],
                         "an ssh master or client outlived the gateway")

    # ---- a SIGKILLed gateway, then envs rm / envs gc ----------------------

    def crashed_with_a_command(self, state=None):
        """(state dir, environment id, command's needle): a gateway killed
        while a bash command runs on the remote."""
        state = state or self.state()
        gw = Gateway(state_dir=state, config=self.cfg, profile="p",
                     env_extra=host_env({"lifetime_seconds": LIFETIME}))
        self.addCleanup(gw.cleanup)
        env_id = gw.initialize()["environment"]["id"]
        needle = "sleep 62.%06d" % random.randrange(10**6)
        gw.execute_req("bash", {"command": needle, "timeout_seconds": 600})
        self.wait_running(needle, 1)
        self.assertTrue(self.ssh_of(state), "no ssh process uses the state dir's socket")
        gw.proc.kill()
        gw.wait_exit(30)
        return state, env_id, needle

    def escaped(self, gw):
        """A process that left its group (setsid, stdio closed), started by
        a background process that lives on: its needle.  (A foreground
        command's leftovers end with the command now, so only a process
        can leave one behind for the session's end or `envs rm` to find.)"""
        needle = "sleep 63.%06d " % random.randrange(10**6)
        gw.start(("setsid %s</dev/null >/dev/null 2>&1 & p=$!; i=0; "
                  "while [ \"$(cut -d' ' -f6 /proc/$p/stat)\" != $p ] && [ $i -lt 200 ]; "
                  "do sleep 0.05; i=$((i + 1)); done; exec sleep 120") % needle.strip())
        self.wait_running(needle, 1)
        return needle

    def capped(self, state, host=None):
        if not sgclient.cgroup_writable():
            self.skipTest("this login cannot make cgroups")
        gw = Gateway(state_dir=state, config=self.cfg, profile="capped",
                     env_extra=host_env(host) if host else None)
        self.addCleanup(gw.cleanup)
        return gw

    def assertAllStopped(self, state, needle, whose="the crashed gateway's", keep=None):
        """No process matches needle, and no ssh process uses a control
        socket under state but the one named keep."""
        deadline = time.monotonic() + 5 * sgclient.SLACK
        left = lambda: [p for p in self.ssh_of(state)
                        if not (keep and keep in self.cmdline(p))]
        while time.monotonic() < deadline and (host_processes_matching(needle) or left()):
            time.sleep(0.1)
        self.assertEqual(host_processes_matching(needle), [],
                         "a command of %s session still runs on the remote" % whose)
        self.assertEqual(left(), [],
                         "an ssh master or client of %s session is still running" % whose)

    def test_envs_rm_after_a_killed_gateway_stops_its_command_and_master(self):
        # Another environment's live gateway, on the same state directory:
        # its master is not the removed environment's, and stays.
        state = self.state()
        other = Gateway(state_dir=state, config=self.cfg, profile="p")
        self.addCleanup(other.cleanup)
        other.initialize()
        master = [p for p in self.ssh_of(state) if "ControlMaster=yes" in self.cmdline(p)]
        self.assertEqual(len(master), 1, "the other gateway's master")
        sock = re.search(r'ControlPath="([^"]+)"', self.cmdline(master[0])).group(1)
        state, env_id, needle = self.crashed_with_a_command(state)
        rc, out = self.envs(state, "rm", env_id)
        self.assertEqual(rc, 0, out)
        self.assertAllStopped(state, needle, keep=sock)
        self.assertIn(master[0], self.ssh_of(state), "envs rm ended another environment's master")
        self.assertEqual(other.sh_ok("echo still").strip(), "still")

    def test_envs_gc_after_a_killed_gateway_stops_its_command_and_master(self):
        state, env_id, needle = self.crashed_with_a_command()
        time.sleep(LIFETIME + 0.5)
        rc, out = self.envs(state, "gc")
        self.assertEqual(rc, 0, out)
        self.assertIn(env_id, out)
        self.assertAllStopped(state, needle)

    # ---- by containment: what left its group, in the session's cgroup -----

    def test_envs_rm_reaches_a_process_that_left_its_group(self):
        # Neither the job (its group) nor the records (run/, proc/) know a
        # process that called setsid; the environment's cgroup does.
        state = self.state()
        gw = self.capped(state, {"lifetime_seconds": LIFETIME})
        env_id = gw.initialize()["environment"]["id"]
        needle = self.escaped(gw)
        gw.proc.kill()
        gw.wait_exit(30)
        rc, out = self.envs(state, "rm", env_id)
        self.assertEqual(rc, 0, out)
        self.assertAllStopped(state, needle)

    def test_the_session_end_reaches_a_process_that_left_its_group(self):
        state = self.state()
        gw = self.capped(state)
        gw.initialize()
        needle = self.escaped(gw)
        rc, err, _ = gw.shutdown(60)
        self.assertEqual(rc, 0, err[-2000:])
        self.assertAllStopped(state, needle, "the ended")


if __name__ == "__main__":
    unittest.main()
