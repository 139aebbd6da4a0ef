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

from sgclient import BIN, Gateway, GatewayTestCase, host_env, host_token, unique

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


class HostProfile(GatewayTestCase):
    """The host's profile (WUU_EXECUTION_PROFILE, protocol-v4 section 2) may
    only narrow the operator's: what it cannot honour is refused at
    initialize naming the field, never served weaker."""

    def setUp(self):
        if not BIN:
            raise unittest.SkipTest("SANDGATE_BIN is not set")
        d = tempfile.mkdtemp(prefix="sg-e2e-hostprof-")
        self.addCleanup(lambda: subprocess.run(["rm", "-rf", d]))
        self.config = os.path.join(d, "config.json")
        with open(self.config, "w") as f:
            json.dump({"profiles": {"op": {"backend": "local", "cpus": 2,
                                           "best_effort": ["cpus"],
                                           "lifetime_seconds": 300}}}, f)

    def init(self, profile, **ids):
        gw = Gateway(config=self.config, profile="op",
                     env_extra=host_env(profile, **ids) if profile is not None else
                     {"WUU_EXECUTION_PROFILE": ""})
        self.addCleanup(self._finish, gw)
        return gw, gw.call("initialize", gw.make_binding(), token=host_token(), timeout=120)

    def refused(self, profile, field, code="permission_denied"):
        _, r = self.init(profile)
        self.assertReplyCode(r, code, json.dumps(profile))
        self.assertIn('WUU_EXECUTION_PROFILE: field "%s"' % field, r["error"])

    def test_wider_than_the_operator_is_refused_naming_the_field(self):
        self.refused({"backend": "command", "cpus": 4}, "cpus")
        self.refused({"lifetime_seconds": 3600}, "lifetime_seconds")
        self.refused({"persistent": True}, "persistent")
        self.refused({"shared": True}, "shared")
        self.refused({"image": "debian:12"}, "image")
        self.refused({"cpus": "2"}, "cpus", "invalid_argument")

    def test_narrower_is_served(self):
        gw, r = self.init({"backend": "command", "command": ["sandgate", "serve"],
                           "forward_env": ["HOME"], "worker": "wuu", "python": "python3",
                           "workspace": "/workspace", "cpus": 1, "network": "none",
                           "lifetime_seconds": 60, "persistent": False})
        self.assertNotIn("error", r, r.get("error"))
        facts = r["data"]["environment"]["facts"]
        self.assertEqual(facts["resources"]["requested"]["cpus"], 1)
        self.assertIs(facts["isolation"]["network_isolated"], True,
                      "network none is observed, not assumed")

    def test_enabled_and_zero_values_ask_for_nothing(self):
        gw, r = self.init({"backend": "command", "network": "enabled", "cpus": 0,
                           "memory_mb": 0, "image": "", "mount_read_only": False})
        self.assertNotIn("error", r, r.get("error"))
        self.assertEqual(r["data"]["environment"]["facts"]["resources"]["requested"]["cpus"], 2)

    def test_not_json_is_refused(self):
        gw = Gateway(config=self.config, profile="op",
                     env_extra={"WUU_EXECUTION_PROFILE": "{cpus: 1"})
        self.addCleanup(self._finish, gw)
        err = gw.fail("initialize", gw.make_binding(), token=host_token())
        self.assertCode(err, "invalid_argument")
        self.assertIn("WUU_EXECUTION_PROFILE", err)

    def test_session_and_identity_must_agree(self):
        gw = Gateway(config=self.config, profile="op",
                     env_extra={"WUU_EXECUTION_SESSION": "someone-else"})
        self.addCleanup(self._finish, gw)
        err = gw.fail("initialize", gw.make_binding(), token=host_token())
        self.assertCode(err, "invalid_argument")
        self.assertIn("WUU_EXECUTION_SESSION", err)
        ident = unique("wuu-env")
        gw = Gateway(config=self.config, profile="op", env_extra={"WUU_EXECUTION_ID": ident})
        self.addCleanup(self._finish, gw)
        err = gw.fail("initialize", gw.make_binding(identity=unique("other")),
                      token=host_token())
        self.assertCode(err, "invalid_argument")
        self.assertIn("WUU_EXECUTION_ID", err)
        # A binding without an identity takes the host's.
        d = gw.initialize(identity=None)
        self.assertIn(ident, d["environment"]["id"])


if __name__ == "__main__":
    unittest.main()
