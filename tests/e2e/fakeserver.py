"""A provider's fake (tests/fakes/<name>/server.mjs) for one test class.

Started on a free loopback port with stdin a pipe; stopped by closing that
pipe (the fakes exit on EOF).  The admin API (/__fake/...) is the ground
truth the tests assert on.  Shared by test_daytona_faults,
test_vercel_faults and test_vercel_leaks.
"""

import json
import os
import shutil
import subprocess
import tempfile
import time
import unittest
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))


class FakeServer:
    """node tests/fakes/<name>/server.mjs --port 0 ARGS, until stop()."""

    def __init__(self, name, *args):
        server = os.path.join(HERE, "..", "fakes", name, "server.mjs")
        self.proc = subprocess.Popen(
            ["node", server, "--port", "0"] + list(args),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        line = self.proc.stdout.readline().decode()
        if not line.startswith("LISTENING "):
            self.stop()
            raise unittest.SkipTest("the fake %s did not start" % name)
        self.base = "http://127.0.0.1:%d" % int(line.split()[1])

    def admin(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                text = r.read()
        except urllib.error.HTTPError as e:
            # The fake's own sentence (an internal error's cause included),
            # since its stderr is not kept.
            raise AssertionError("the fake answered %s %s with %d: %s"
                                 % (method, path, e.code,
                                    e.read().decode(errors="replace")[:2000])) from None
        return json.loads(text) if text else None

    def fault(self, *faults):
        self.admin("POST", "/__fake/faults", list(faults))

    def stop(self):
        try:
            self.proc.stdin.close()
            self.proc.wait(10)
        except Exception:
            self.proc.kill()
            self.proc.wait(10)


def have(prog):
    return shutil.which(prog) is not None


class VercelFake(FakeServer):
    """The fake Vercel, with its files in a directory of its own."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="sg-e2e-vfake-")
        super().__init__("vercel", "--exec-mode", "bwrap", "--state-dir", self.dir)

    def state(self):
        return self.admin("GET", "/__fake/state")

    def requests(self, since=0):
        return self.admin("GET", "/__fake/requests?since=%d" % since)["requests"]

    def last_seq(self):
        # An entry is logged as its answer ends, a moment after the client
        # has read it: let the log catch up first.
        time.sleep(0.3)
        reqs = self.requests()
        return reqs[-1]["seq"] if reqs else 0

    def stop(self):
        super().stop()
        shutil.rmtree(self.dir, ignore_errors=True)
