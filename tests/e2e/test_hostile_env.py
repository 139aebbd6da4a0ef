"""What comes back from inside an environment is hostile.

The gateway runs sg-helper steps in the environment (or, on backends whose
files are on this host, the same code in-process against the environment's
files) and acts on what they print and on the files they read: process
records, spools, the stamp counter and its lock.  A command may rewrite
all of them, and on remote backends sg-helper itself.  Whatever it does,
the gateway must keep answering within its bounds: every request gets a
reply, and the shutdown ends inside its budget.

Runs against any profile; a test skips what the environment lacks (a
shell tool it needs).
"""

import time
import unittest

from sgclient import GatewayTestCase, SLACK

# The supervisor runs a command as `sh -c COMMAND`, so $PPID is the
# supervisor, whose argv (a fork of `sg-helper proc spawn`) names the
# control directory after --ctl.
FIND_CTL = r"""ctl=$(tr '\0' '\n' </proc/$PPID/cmdline | sed -n '/^--ctl$/{n;p;q;}')"""

# Take the lock every record write and every `proc wait` takes (the
# control directory's .seq), keep it for ten minutes in a process that
# outlives its supervisor, and kill the supervisor: a `running` record
# whose supervisor is gone is rewritten as `lost` under that very lock,
# and its pidfd wakes the gateway's process watcher at once.
HOLD_LOCK = FIND_CTL + r"""
[ -n "$ctl" ] || exit 3
exec 9>>"$ctl/.seq" || exit 4
flock 9 || exit 5
kill -9 $PPID
exec sleep 600
"""


class HeldRecordLock(GatewayTestCase):
    """A process of the environment holds the process records' lock."""

    def hold(self, gw):
        r = gw.tool("run_command", {"command": "command -v flock && command -v sed"}, "full")
        if r["is_error"] or "flock" not in r["content"]:
            self.skipTest("no flock or sed in the environment")
        pid = gw.start(HOLD_LOCK, permission_mode="full")["id"]
        # The supervisor is killed once the lock is held: its record
        # cannot turn `lost` while the lock is held, so wait for the
        # moment the command is surely past `flock`.
        time.sleep(2 * SLACK)
        return pid

    def test_process_start_still_replies(self):
        gw = self.gateway(binding={"remove_workspace_on_exit": True})
        self.hold(gw)
        # A spawn writes its record under the lock; it may fail, but it
        # must answer (it used to wait on flock(2) for ever, uncancellable).
        r = gw.call("process/start", {"command": "echo hi"}, timeout=60 * SLACK)
        self.assertIn("error", r, r)
        # And the connection still serves what needs no lock.
        self.assertEqual(gw.tool_ok("run_command", {"command": "echo alive"})["content"],
                         "alive\n")

    def test_shutdown_ends_inside_its_budget(self):
        budget = 30000
        gw = self.gateway(extra_args=["--shutdown-budget-ms", str(budget)],
                          binding={"remove_workspace_on_exit": True})
        self.hold(gw)
        # The watcher, woken by the supervisor's death, now wants the
        # lock; the shutdown stops the watcher first.
        time.sleep(1)
        rc, err, took = gw.shutdown(timeout=budget / 1000 + 15 * SLACK)
        self.assertLess(took, budget / 1000 + 5 * SLACK, err)


if __name__ == "__main__":
    unittest.main()
