"""forward_env never carries sandgate's own secrets into commands (issue 9, item 2).

The attacker here is whoever writes the binding or the host's profile (a
host, or anything that can write them): it asks for variables by name,
hoping sandgate fills them in from its own environment.  Values a command
sees come only from the host (binding.environment, an object of names to
the host's own values) or from names the operator listed in the profile's
own `forward_env`; the host's profile's `forward_env` (WUU_EXECUTION_PROFILE)
names the host's variables, never sandgate's; a credential any adapter reads
is never forwarded, not even when the operator lists it.

These tests use a config of their own on the local backend (whatever
SANDGATE_TEST_CONFIG says), since the rule lives in the gateway and the config
and holds for every backend.
"""

import json
import os
import shutil
import tempfile
import time
import unittest

from sgclient import GatewayTestCase, host_env, host_token, unique


class ForwardEnvSources(GatewayTestCase):

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="sg-e2e-cred-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.secret = "secret-" + unique("x")
        self.dt_key = "dtkey-" + unique("k")

    def config(self, profiles, default="here"):
        path = os.path.join(self.dir, "config.json")
        # A daytona profile in the same file makes its custom key variable
        # a credential sandgate knows of, whichever profile is in use.
        profiles = dict(profiles)
        profiles.setdefault("cloud", {"backend": "daytona", "image": "debian:12",
                                      "api_key_env": "SG_E2E_DT_KEY"})
        with open(path, "w") as f:
            json.dump({"default": default, "profiles": profiles}, f)
        return path

    def start(self, profiles, profile="here", host=None):
        env = {"SECRET_X": self.secret, "DAYTONA_API_KEY": self.dt_key,
               "SG_E2E_DT_KEY": self.dt_key, "SG_E2E_OPERATOR": "operator-value"}
        if host is not None:
            env.update(host_env(host))
        return self.gateway(init=False, config=self.config(profiles), profile=profile,
                            env_extra=env)

    def init(self, gw, **binding):
        """initialize, whatever the outcome: the reply."""
        token = host_token()
        b = gw.make_binding(**binding)
        r = gw.call("initialize", b, token=token)
        if "data" in r:
            gw.token, gw.binding, gw.init_reply = token, b, r["data"]
        return r

    def command_env(self, gw):
        return gw.sh_ok("env")

    def assertNoLeak(self, gw, reply):
        """Whatever the reply, no secret value reached a command or a message."""
        blob = json.dumps(reply) + gw.stderr_text()
        if "data" in reply:
            blob += self.command_env(gw)
        for value in (self.secret, self.dt_key):
            self.assertNotIn(value, blob)

    def test_binding_list_cannot_take_sandgate_env(self):
        # binding.environment holds values; a list of names is not one.
        gw = self.start({"here": {"backend": "local"}})
        r = self.init(gw, environment={"forward_env": ["SECRET_X"]})
        self.assertNoLeak(gw, r)
        self.assertReplyCode(r, "invalid_argument")
        self.assertIn("forward_env", r["error"])

    def test_host_profile_list_cannot_take_sandgate_env(self):
        # The host's profile names the host's variables (whose values it
        # sends itself): sandgate's own SECRET_X never fills them in.
        for name in ("SECRET_X", "DAYTONA_API_KEY"):
            with self.subTest(name=name):
                gw = self.start({"here": {"backend": "local"}},
                                host={"backend": "command", "forward_env": [name]})
                r = self.init(gw)
                self.assertNoLeak(gw, r)
                if "data" in r:
                    self.assertNotIn(name + "=", self.command_env(gw))

    def test_operator_cannot_forward_an_adapter_credential(self):
        for name in ("DAYTONA_API_KEY", "SG_E2E_DT_KEY"):
            with self.subTest(name=name):
                # The profile itself is refused, before serve reads a frame.
                gw = self.start({"here": {"backend": "local", "forward_env": [name]}})
                rc, err = gw.wait_exit(30)
                self.assertNotEqual(rc, 0, err)
                self.assertEqual(gw.messages, [], "nothing on the protocol stream")
                self.assertIn("permission_denied", err)
                self.assertIn(name, err)
                self.assertNotIn(self.secret, err)
                self.assertNotIn(self.dt_key, err)

    def test_binding_cannot_name_an_adapter_credential(self):
        # A variable the host forwards under a credential's name carries the
        # host's value, or is refused: never sandgate's own.
        gw = self.start({"here": {"backend": "local"}})
        r = self.init(gw, environment={"DAYTONA_API_KEY": "", "SG_E2E_DT_KEY": "host-value"})
        self.assertNoLeak(gw, r)
        if "error" in r:
            self.assertReplyCode(r, "permission_denied")
            self.assertIn("DAYTONA_API_KEY", r["error"])

    def test_host_map_reaches_commands(self):
        gw = self.start({"here": {"backend": "local"}})
        gw.initialize(environment={"SG_E2E_HOST": "host-value"})
        env = self.command_env(gw).splitlines()
        self.assertIn("SG_E2E_HOST=host-value", env)
        self.assertFalse(any(self.secret in line or self.dt_key in line for line in env))

    def test_operator_list_reaches_commands(self):
        gw = self.start({"here": {"backend": "local", "forward_env": ["SG_E2E_OPERATOR"]}},
                        host={"backend": "command", "forward_env": ["SG_E2E_OPERATOR"]})
        # The host's profile may name it too: the operator's value stands.
        gw.initialize()
        env = self.command_env(gw).splitlines()
        self.assertIn("SG_E2E_OPERATOR=operator-value", env)
        self.assertFalse(any(self.secret in line or self.dt_key in line for line in env))


class PrintedCredentialsAreMasked(GatewayTestCase):
    """What a command prints reaches the model with credentials masked, in
    every mode, as the host masks bash and process output."""

    SECRET = "sk-e2eA1b2C3d4E5f6G7h8"
    LINES = ("api_key = %s" % SECRET, "Authorization: Bearer %s" % SECRET)

    def test_bash_output_is_masked(self):
        gw = self.gateway()
        script = "; ".join("echo '%s'" % l for l in self.LINES) + "; echo '%s' >&2" % self.LINES[0]
        for mode in ("standard", "unconfined"):
            res = gw.tool("bash", {"command": script}, mode=mode)
            view, data = json.loads(res["content"][0]["text"]), res["structured_content"]
            printed = [view["output"], view["stdout_tail"], view["stderr_tail"],
                       data["stdout"], data["stderr"]]
            self.assertNotIn(self.SECRET, json.dumps(printed), mode)
            self.assertIn("[REDACTED]", data["stdout"])

    def test_process_read_is_masked(self):
        gw = self.gateway()
        rec = gw.start(command="echo '%s'; sleep 30" % self.LINES[0])
        deadline = time.monotonic() + 20
        text = ""
        while "[REDACTED]" not in text and time.monotonic() < deadline:
            text = gw.view("process", {"action": "read", "process_id": rec["id"]})["output"]
            time.sleep(0.1)
        self.assertIn("[REDACTED]", text)
        self.assertNotIn(self.SECRET, text)
        gw.stop(rec["id"])


if __name__ == "__main__":
    unittest.main()
