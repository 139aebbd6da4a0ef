"""One answer for one profile (issue 10, section 1): `config check`, serve's
initialize and `probe` refuse a profile field with the same words.

Each backend's adapter declares the fields it honours (adapters/adapter.h);
the config layer refuses every other field, in one place, so a misspelt
field can no longer pass silently.  These profiles are on the local
backend, which is always built; the test needs no backend harness, so it
runs once, not per backend.
"""

import json
import os
import subprocess
import tempfile
import unittest

from sgclient import BIN, unique

# The command line under test is sandgate's own, also when the suite runs
# through the delegation wrapper (tests/delegation), whose peer it is.
REAL = os.environ.get("SG_PEER_BIN") or BIN


class OneAnswer(unittest.TestCase):
    def setUp(self):
        if not BIN:
            raise unittest.SkipTest("SANDGATE_BIN is not set")
        self.dir = tempfile.mkdtemp(prefix="sg-e2e-fields-")
        self.addCleanup(lambda: subprocess.run(["rm", "-rf", self.dir]))

    def config(self, profile):
        path = os.path.join(self.dir, unique("cfg") + ".json")
        with open(path, "w") as f:
            json.dump({"profiles": {"p": profile}}, f)
        return path

    def run_bin(self, *args):
        env = dict(os.environ)
        env.pop("SANDGATE_CONFIG", None)
        return subprocess.run([REAL, *args], capture_output=True, text=True,
                              timeout=120, env=env)

    def answers(self, profile):
        """The verdicts of config check, serve and probe for profile."""
        path = self.config(profile)
        check = self.run_bin("config", "check", "--json", "--config", path)
        self.assertEqual(check.returncode, 78, check.stderr)
        checked = json.loads(check.stdout)["profiles"][0]["error"]

        # serve gives its verdict at startup, before it reads a frame.
        serve = subprocess.run([REAL, "serve", "--config", path, "--profile", "p",
                                "--state-dir", os.path.join(self.dir, "state")],
                               input="", capture_output=True, text=True, timeout=120,
                               env={k: v for k, v in os.environ.items()
                                    if k != "SANDGATE_CONFIG"})
        self.assertEqual(serve.returncode, 78, serve.stderr)
        self.assertEqual(serve.stdout, "", "nothing on the protocol stream")
        served = serve.stderr.strip().splitlines()[-1].split(": ", 1)[1]

        probe = self.run_bin("probe", "--json", "--config", path, "--state-dir",
                             os.path.join(self.dir, "state"))
        self.assertEqual(probe.returncode, 78)
        probed = json.loads(probe.stdout)["error"]
        return checked, served, probed

    def test_misspelt_field(self):
        # The reproduction: this passed `config check` and served
        # with no memory limit at all.
        checked, served, probed = self.answers({"backend": "local", "memroy_mb": 2048})
        self.assertTrue(checked.startswith("invalid_argument: "), checked)
        self.assertIn('field "memroy_mb": unknown field; did you mean memory_mb?', checked)
        self.assertEqual(checked, served)
        self.assertEqual(checked, probed)

    def test_field_the_backend_cannot_enforce(self):
        checked, served, probed = self.answers({"backend": "local", "image": "debian:12"})
        self.assertTrue(checked.startswith("unsupported: "), checked)
        self.assertIn('field "image": the local backend cannot enforce it', checked)
        self.assertEqual(checked, served)
        self.assertEqual(checked, probed)

    def test_value_the_backend_cannot_enforce(self):
        # A declared field with a value only validate() can judge.
        checked, served, probed = self.answers(
            {"backend": "local", "network": {"allow": ["10.0.0.0/8"]}})
        self.assertTrue(checked.startswith("unsupported: "), checked)
        self.assertIn("network allow lists", checked)
        self.assertEqual(checked, served)
        self.assertEqual(checked, probed)


if __name__ == "__main__":
    unittest.main()
