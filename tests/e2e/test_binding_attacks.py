"""Bindings that try to reach what sandgate's own checks refuse (protocol-v4
section 2).

- `root` is checked as written, so one spelled another way ("//run/sandgate",
  "/./usr", "/x/../proc", a trailing '/') would slip past a backend's literal
  comparisons (the local backend's list of OS directories): it is refused
  with `invalid_argument`, and the connection stays usable.
- `environment` is the variables the host forwards: every command sees them,
  but a malformed one is refused naming the variable, and none of them moves
  sandgate's own PATH, HOME or TMPDIR, or shows sandgate's own variables.
- The host's profile may ask for `shared` only where the operator's profile
  shares; an identity held by a live session that does not share is refused
  with `unavailable` whatever the newcomer's profile says, and the refusal
  leaves the holder's record as it was.
"""

import json
import os
import shutil
import tempfile
import unittest

from sgclient import (CANARY_NAME, CONFIG, ROOT, Gateway, GatewayTestCase, host_env,
                      host_token, unique)


class RootSpelling(GatewayTestCase):
    def test_unnormalised_roots_are_refused(self):
        base = ROOT.rstrip("/")
        spellings = [
            "//run/sandgate", "/./run/sandgate", "/x/../run/sandgate", "//proc/self",
            "/./usr/local", "/..", "/usr/",
            "/" + base, base + "/", base + "/.", base + "/x/..", "/." + base,
            base + "//x",
        ]
        gw = self.gateway(init=False)
        for root in spellings:
            with self.subTest(root=root):
                err = gw.fail("initialize", gw.make_binding(root=root), token=host_token(),
                              timeout=60)
                self.assertCode(err, "invalid_argument", "root %r" % root)
        # Refused before anything was made: the same connection still binds.
        gw.initialize()
        self.assertEqual(gw.sh_ok("pwd").strip(), ROOT)


class ForwardedEnvironment(GatewayTestCase):
    def test_malformed_variables_are_refused_naming_them(self):
        gw = self.gateway(init=False)
        for env, named in (({"1BAD": "x"}, "1BAD"), ({"A-B": "x"}, "A-B"),
                           ({"": "x"}, '""'), ({"A=B": "x"}, "A=B"),
                           ({"GOOD": "x", "NUM": 5}, "NUM"), ({"NULLED": None}, "NULLED"),
                           ({"NUL": "a\u0000b"}, "NUL")):
            with self.subTest(env=env):
                err = gw.fail("initialize", gw.make_binding(environment=env),
                              token=host_token())
                self.assertCode(err, "invalid_argument")
                self.assertIn(named, err)
                for v in env.values():
                    if isinstance(v, str) and v:
                        self.assertNotIn("a\u0000b", err)
        err = gw.fail("initialize", gw.make_binding(environment=["A=1"]), token=host_token())
        self.assertCode(err, "invalid_argument")
        gw.initialize(environment={"SG_E2E_FORWARDED": "ok"})

    def test_every_command_sees_them(self):
        value = "fwd " + unique("v") + " $HOME 'q'"
        gw = self.gateway(binding={"environment": {
            "SG_E2E_FORWARDED": value, "_lower_ok9": "x",
            "PATH": "/nowhere", "HOME": "/nowhere", "TMPDIR": "/nowhere"}})
        self.assertEqual(gw.sh_ok("printenv SG_E2E_FORWARDED"), value + "\n")
        self.assertEqual(gw.sh_ok("printenv _lower_ok9"), "x\n")
        # sandgate's own layout wins over what the host forwards.
        out = gw.sh_ok("printf '%s\\n' \"$PATH\" \"$HOME\" \"$TMPDIR\"")
        self.assertNotIn("/nowhere", out)
        # sandgate's own variables are never forwarded.
        self.assertEqual(gw.sh("printenv %s" % CANARY_NAME)["exit_code"], 1)
        # A background command sees them too.
        rec = gw.start("printenv SG_E2E_FORWARDED; sleep 0.2")
        self.assertIn(value, gw.read_all(rec["id"])[0])


class SharedTakeover(GatewayTestCase):
    """Two profiles of the operator on one identity: `solo` does not share,
    `team` does.  The host's profile may only confirm `shared`."""

    def setUp(self):
        if CONFIG is not None:
            self.skipTest("uses its own local profiles")
        d = tempfile.mkdtemp(prefix="sg-e2e-share-")
        self.addCleanup(shutil.rmtree, d, True)
        self.config = os.path.join(d, "config.json")
        with open(self.config, "w") as f:
            json.dump({"default": "solo", "profiles": {
                "solo": {"backend": "local"},
                "team": {"backend": "local", "shared": True}}}, f)
        self.state = os.path.join(d, "state")
        os.mkdir(self.state)

    def other(self, profile, env=None):
        gw = Gateway(state_dir=self.state, config=self.config, profile=profile,
                     env_extra=env)
        self.addCleanup(self._finish, gw)
        return gw

    def test_host_profile_cannot_share_what_the_operator_does_not(self):
        gw = self.other("solo", host_env({"backend": "command", "shared": True}))
        err = gw.fail("initialize", gw.make_binding(), token=host_token(), timeout=60)
        self.assertCode(err, "permission_denied")
        self.assertIn('field "shared"', err)

    def test_binding_cannot_share_a_session_that_does_not(self):
        ident = unique("victim")
        one = self.other("solo")
        one.initialize(identity=ident)
        two = self.other("team", host_env({"backend": "command", "shared": True}))
        err = two.fail("initialize", two.make_binding(identity=ident),
                       token=host_token(), timeout=60)
        self.assertCode(err, "unavailable")
        # The refusal changed nothing: the holder still does not share.
        three = self.other("team")
        err = three.fail("initialize", three.make_binding(identity=ident),
                         token=host_token(), timeout=60)
        self.assertCode(err, "unavailable")
        # A refusal leaves the connection usable.
        two.initialize()

    def test_a_shared_holder_stays_shared(self):
        ident = unique("team")
        one = self.other("team")
        one.initialize(identity=ident)
        two = self.other("solo")
        err = two.fail("initialize", two.make_binding(identity=ident),
                       token=host_token(), timeout=60)
        self.assertCode(err, "unavailable")
        # Refused without rewriting the holder's record: a sharing one joins.
        three = self.other("team")
        three.initialize(identity=ident)


if __name__ == "__main__":
    unittest.main()
