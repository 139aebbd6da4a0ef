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

import json
import re
import threading
import time
import unittest

import hostdriver as hd
from hostdriver import CallError, Ctx, HostEnvironment

SLACK = hd.SLACK


class FidelityCase(unittest.TestCase):
    def environment(self, **kw):
        env = HostEnvironment(**kw)
        self.addCleanup(self._finish, env)
        return env

    def _finish(self, env):
        env.cleanup()
        for c in env.clients:
            self.assertIsNone(c.invalid_line,
                              "a line the host cannot decode: %r" % c.invalid_line)

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


if __name__ == "__main__":
    unittest.main()
