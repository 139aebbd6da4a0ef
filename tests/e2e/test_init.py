"""initialize and the binding (protocol-v4 section 2)."""

import json
import subprocess
import unittest

from sgclient import (BIN, CONFIG, METHODS, ROOT, GatewayTestCase, host_token,
                      unique)

ISOLATION_KEYS = {"process_contained", "host_filesystem_restricted",
                  "privilege_escalation_blocked", "syscalls_restricted",
                  "network_isolated"}
SAFETY_CLASSES = {"trusted_local", "container", "microvm", "remote_host"}


class BeforeInitialize(GatewayTestCase):

    def test_every_method_is_not_initialized(self):
        gw = self.gateway(init=False)
        for method, data in [
                ("execute", {"call": {"id": "c", "name": "list_files", "arguments": "{}"},
                             "actor": "a", "permission_mode": "standard"}),
                ("process/list", None),
                ("process/start", {"command": "true"}),
                ("process/read", {"id": "proc-00000000"}),
                ("export/read", {"token": "t", "offset": 0}),
                ("export/close", {"token": "t"})]:
            for token in (host_token(), None):
                err = gw.fail(method, data, token=token)
                self.assertCode(err, "not_initialized", method)

    def test_versions_3_and_4_are_echoed(self):
        for version in (3, 4):
            gw = self.gateway(init=False)
            d = gw.initialize(version=version)
            self.assertEqual(d["version"], version)
            self.assertIs(type(d["version"]), int)
            self.assertEqual(d["root"], ROOT)

    def test_other_versions_are_refused_and_leave_the_connection_usable(self):
        gw = self.gateway(init=False)
        token = host_token()
        for version in (2, 5, 1, 0, "4"):
            err = gw.fail("initialize", gw.make_binding(version=version), token=token)
            self.assertCode(err, "unsupported", "version %r" % version)
            self.assertIn("protocol mismatch", err)
        # Refused before anything was made: no record in the registry.
        self.assertCode(gw.fail("process/list", None, token=token), "not_initialized")
        gw.initialize()
        self.assertEqual(gw.ok("process/list"), [])

    def test_invalid_binding_leaves_connection_usable(self):
        gw = self.gateway(init=False)
        for drop in ("session", "root"):
            err = gw.fail("initialize", gw.make_binding(**{drop: None}), token=host_token())
            self.assertCode(err, "invalid_argument", "binding without %s" % drop)
        gw.initialize()
        self.assertEqual(gw.ok("process/list"), [])


class ReplyShape(GatewayTestCase):

    def test_reply_shape(self):
        gw = self.gateway()
        d = gw.init_reply
        self.assertEqual(set(d), {"version", "root", "capabilities", "methods", "environment"})
        self.assertEqual(d["version"], 4)
        self.assertEqual(d["root"], ROOT)
        self.assertIn("process.start.v1", d["capabilities"])
        self.assertEqual(len(d["methods"]), len(set(d["methods"])), "duplicate methods")
        self.assertEqual(set(d["methods"]) - {"run_code"}, METHODS)
        for frame in ("cancel", "callback"):
            self.assertNotIn(frame, d["methods"], "%s gets no reply: not a method" % frame)
        env = d["environment"]
        for key in ("backend", "profile", "id"):
            self.assertIsInstance(env.get(key), str, key)
            self.assertTrue(env[key], key)
        self.assertIs(env["resumed"], False)
        self.assertIsInstance(env["facts"], dict)
        if CONFIG is None:
            self.assertEqual(env["backend"], "local", "no config: embedded local profile")

    def test_probe_facts(self):
        gw = self.gateway()
        facts = gw.facts
        iso = facts.get("isolation")
        self.assertIsInstance(iso, dict, "facts.isolation: %s" % json.dumps(facts)[:500])
        self.assertIn(facts.get("safety_class"), SAFETY_CLASSES)
        if facts.get("probe") == "deferred":
            # A new scratch cloud sandbox answers before its set-up (which
            # runs beside the first command): nothing observed inside yet,
            # and the reply says so rather than leave the keys out silently.
            self.assertIn(gw.backend, ("vercel", "daytona", "modal"), json.dumps(facts)[:500])
            self.assertFalse((ISOLATION_KEYS - {"host_filesystem_restricted"}) & set(iso),
                             "isolation keys without a probe: %s" % sorted(iso))
            self.assertIsNone(facts.get("landlock_abi"))
            return
        self.assertTrue(ISOLATION_KEYS <= set(iso), "isolation keys: %s" % sorted(iso))
        for k in ISOLATION_KEYS:
            self.assertIsInstance(iso[k], bool, "isolation.%s is a boolean" % k)
        self.assertIn(facts.get("safety_class"), SAFETY_CLASSES)

    def test_listed_methods_are_implemented(self):
        gw = self.gateway()
        for m in gw.init_reply["methods"]:
            if m == "initialize":
                continue
            r = gw.call(m, {})
            if "error" in r:
                self.assertNotEqual(r.code, "unknown_method", "%s is listed" % m)
        self.assertCode(gw.fail("no/such/method", {}), "unknown_method")
        err = gw.fail("process/frobnicate", {})
        self.assertCode(err, "unknown_method")
        self.assertIn("unknown remote process operation", err)


class RepeatedInitialize(GatewayTestCase):

    def test_identical_repeat_gives_same_reply(self):
        gw = self.gateway()
        first = gw.init_reply
        self.assertEqual(gw.ok("initialize", gw.binding), first)
        # An absent field equals false/null.
        b = dict(gw.binding)
        b["require_existing_workspace"] = False
        self.assertEqual(gw.ok("initialize", b), first)

    def test_conflicting_binding_keeps_the_first(self):
        gw = self.gateway()
        for change in ({"session": unique("other")},
                       {"root": ROOT.rstrip("/") + "/elsewhere"},
                       {"identity": unique("other")},
                       {"version": 3},
                       {"environment": {"X": "1"}},
                       {"remove_workspace_on_exit": False},
                       {"require_existing_workspace": True}):
            b = dict(gw.binding)
            b.update(change)
            self.assertCode(gw.fail("initialize", b), "binding_conflict", json.dumps(change))
        self.assertEqual(gw.ok("process/list"), [])

    def test_different_token_is_refused(self):
        gw = self.gateway()
        # Once bound, a frame with another token is refused before anything.
        err = gw.fail("initialize", gw.binding, token=host_token())
        self.assertCode(err, "bad_token")
        self.assertEqual(gw.ok("process/list"), [])


class Cleanup(GatewayTestCase):
    """Without remove_workspace_on_exit (the host never sends it to a command
    backend) the profile decides: not persistent, not shared: removed."""

    def test_absent_remove_flag_removes_a_plain_workspace(self):
        if CONFIG is not None:
            self.skipTest("the embedded local profile is neither persistent nor shared")
        ident = unique("plain")
        gw1 = self.gateway(init=False)
        gw1.initialize(identity=ident, remove_workspace_on_exit=None)
        rc, err, _ = gw1.shutdown(timeout=90)
        self.assertEqual(rc, 0, err[-2000:])
        gw2 = self.gateway(init=False, state_dir=gw1.state_dir)
        b = gw2.make_binding(identity=ident, require_existing_workspace=True)
        self.assertCode(gw2.fail("initialize", b, token=host_token(), timeout=180),
                        "workspace_lost", "removed at exit, so gone")

    def test_explicit_false_keeps_and_true_removes(self):
        ident = unique("keep")
        gw1 = self.gateway(init=False)
        gw1.initialize(identity=ident, remove_workspace_on_exit=False)
        rc, err, _ = gw1.shutdown(timeout=90)
        self.assertEqual(rc, 0, err[-2000:])

        gw2 = self.gateway(init=False, state_dir=gw1.state_dir)
        d = gw2.initialize(identity=ident, require_existing_workspace=True,
                           remove_workspace_on_exit=True)
        self.assertIs(d["environment"]["resumed"], True)
        rc, err, _ = gw2.shutdown(timeout=90)
        self.assertEqual(rc, 0, err[-2000:])

        gw3 = self.gateway(init=False, state_dir=gw1.state_dir)
        b = gw3.make_binding(identity=ident, require_existing_workspace=True)
        self.assertCode(gw3.fail("initialize", b, token=host_token(), timeout=180),
                        "workspace_lost", "removed at exit, so gone")


class FailedProvisioning(GatewayTestCase):

    def test_workspace_lost_then_init_failed(self):
        gw = self.gateway(init=False)
        token = host_token()
        b = gw.make_binding(require_existing_workspace=True)
        self.assertCode(gw.fail("initialize", b, token=token, timeout=180), "workspace_lost")
        # The connection is dead for operations, initialize included.
        self.assertCode(gw.fail("process/list", None, token=token), "init_failed")
        self.assertCode(gw.fail("initialize", gw.make_binding(), token=token), "init_failed")
        rc, err, _ = gw.shutdown()
        self.assertEqual(rc, 0, err[-2000:])


class CommandLine(unittest.TestCase):

    def run_bin(self, *args):
        if not BIN:
            self.skipTest("SANDGATE_BIN is not set")
        return subprocess.run([BIN] + list(args), stdin=subprocess.DEVNULL,
                              capture_output=True, timeout=20)

    def test_version_and_help(self):
        r = self.run_bin("--version")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue((r.stdout + r.stderr).strip(), "--version prints something")
        r = self.run_bin("--help")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(b"serve", r.stdout + r.stderr)

    def test_unknown_option_fails(self):
        r = self.run_bin("serve", "--no-such-option")
        self.assertNotEqual(r.returncode, 0)
        self.assertEqual(r.stdout, b"", "nothing on the protocol stream")


if __name__ == "__main__":
    unittest.main()
