"""A provider's fake (tests/fakes/<name>/server.mjs) for one test class.

Started on a free loopback port with stdin a pipe; stopped by closing that
pipe (the fakes exit on EOF).  The admin API (/__fake/...) is the ground
truth the tests assert on.  Shared by test_daytona_faults and
test_vercel_faults.
"""

import json
import os
import subprocess
import unittest
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
        with urllib.request.urlopen(req, timeout=30) as r:
            text = r.read()
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
