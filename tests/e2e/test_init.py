"""initialize and the binding (docs/protocol.md sections 4 and 5)."""

import json
import subprocess
import unittest
import uuid

from sgclient import (BIN, CONFIG, METHODS, ROOT, TOOLS, GatewayTestCase,
                      unique)

ISOLATION_KEYS = {"process_contained", "host_filesystem_restricted",
                  "privilege_escalation_blocked", "syscalls_restricted",
                  "network_isolated"}
SAFETY_CLASSES = {"trusted_local", "container", "microvm", "remote_host"}


class BeforeInitialize(GatewayTestCase):

    def test_every_method_is_not_initialized(self):
        # Every method but cancel: cancel is answered before a binding exists
        # (so an initialize in progress can be cancelled; see test_cancel).
        gw = self.gateway(init=False)
        for method, data in [
                ("execute", {"tool": "stat_path",
                             "call": {"id": "c", "arguments": "{\"path\":\".\"}"}}),
                ("process/list", {}),
                ("process/start", {"command": "true"}),
                ("process/read", {"id": "p-1"}),
                ("export/open", {"path": "x"}),
                ("export/close", {"token": "t"})]:
            for token in ("some-token", None):
                err = gw.fail(method, data, token=token)
                self.assertCode(err, "not_initialized", method)

    def test_wrong_version_leaves_connection_usable(self):
        gw = self.gateway(init=False)
        for version in (3, 5, 0):
            b = gw.make_binding(version=version)
            err = gw.fail("initialize", b, token="t1")
            self.assertCode(err, "unsupported", "version %d" % version)
        # Still uninitialised: other methods are refused as before...
        self.assertCode(gw.fail("process/list", {}, token="t1"), "not_initialized")
        # ...and a correct initialize, even with another token, succeeds.
        data = gw.initialize(token="t2")
        self.assertEqual(data["version"], 4)
        self.assertIsInstance(gw.ok("process/list", {}), dict)

    def test_invalid_binding_leaves_connection_usable(self):
        gw = self.gateway(init=False)
        for drop in ("session", "root"):
            b = gw.make_binding(**{drop: None})
            err = gw.fail("initialize", b, token="t")
            self.assertCode(err, "invalid_argument", "binding without %s" % drop)
        gw.initialize(token="t")
        self.assertIn("processes", gw.ok("process/list", {}))


class ReplyShape(GatewayTestCase):

    def test_reply_shape(self):
        gw = self.gateway()
        d = gw.init_reply
        self.assertEqual(d["version"], 4)
        self.assertIsInstance(d["capabilities"], list)
        self.assertIn("process.start.v1", d["capabilities"])
        self.assertIsInstance(d["methods"], list)
        self.assertEqual(len(d["methods"]), len(set(d["methods"])), "duplicate methods")
        self.assertEqual(set(d["methods"]), METHODS)
        self.assertNotIn("run_code", d["methods"])
        self.assertIsInstance(d["tools"], list)
        for t in d["tools"]:
            self.assertIsInstance(t, str, "tools is a list of names")
        self.assertEqual(set(d["tools"]), TOOLS)
        env = d["environment"]
        for key in ("backend", "profile", "id"):
            self.assertIsInstance(env.get(key), str, key)
            self.assertTrue(env[key], key)
        if not gw.binding.get("require_existing_workspace"):
            self.assertIs(env["resumed"], False)
        self.assertIsInstance(env["facts"], dict)
        if CONFIG is None:
            self.assertEqual(env["backend"], "local", "no config: embedded local profile")

    def test_probe_facts(self):
        gw = self.gateway()
        facts = gw.facts
        iso = facts.get("isolation")
        self.assertIsInstance(iso, dict, "facts.isolation: %s" % json.dumps(facts)[:500])
        self.assertTrue(ISOLATION_KEYS <= set(iso), "isolation keys: %s" % sorted(iso))
        for k in ISOLATION_KEYS:
            self.assertIsInstance(iso[k], bool, "isolation.%s is a boolean" % k)
        self.assertIn(facts.get("safety_class"), SAFETY_CLASSES)
        if "toolchains" in facts:
            self.assertIsInstance(facts["toolchains"], dict)

    def test_listed_methods_are_implemented(self):
        gw = self.gateway()
        for m in gw.init_reply["methods"]:
            if m == "initialize":
                continue
            r = gw.call(m, {})
            if "error" in r:
                self.assertNotEqual(r.code, "unknown_method", "%s is listed" % m)
        self.assertCode(gw.fail("run_code", {"code": "print(1)"}), "unknown_method")
        self.assertCode(gw.fail("no/such/method", {}), "unknown_method")


class RepeatedInitialize(GatewayTestCase):

    def test_identical_repeat_gives_same_reply(self):
        gw = self.gateway()
        first = gw.init_reply
        again = gw.ok("initialize", gw.binding)
        self.assertEqual(again, first)
        # An absent field equals false/null (section 10).
        b = dict(gw.binding)
        b["require_existing_workspace"] = False
        self.assertEqual(gw.ok("initialize", b), first)

    def test_conflicting_binding_keeps_the_first(self):
        gw = self.gateway()
        for change in ({"session": unique("other")},
                       {"root": ROOT.rstrip("/") + "/elsewhere"},
                       {"identity": unique("other")},
                       {"remove_workspace_on_exit": False},
                       {"require_existing_workspace": True}):
            b = dict(gw.binding)
            b.update(change)
            err = gw.fail("initialize", b)
            self.assertCode(err, "binding_conflict", json.dumps(change))
        # The first binding is still the one in force.
        rec = gw.start(command="pwd")
        self.assertEqual(rec["root_thread_id"], gw.session)
        out, _ = gw.read_all(rec["id"])
        self.assertEqual(out.strip(), ROOT)

    def test_different_token_is_a_conflict(self):
        gw = self.gateway()
        err = gw.fail("initialize", gw.binding, token="another-token")
        self.assertCode(err, "binding_conflict")
        self.assertIn("processes", gw.ok("process/list", {}))
        self.assertCode(gw.fail("process/list", {}, token="another-token"), "bad_token")


class Tokens(GatewayTestCase):

    def test_wrong_or_missing_token_is_refused_and_not_run(self):
        gw = self.gateway()
        name = unique("badtok") + ".txt"
        for token in ("wrong-" + uuid.uuid4().hex, None, ""):
            r = gw.execute("write_file", {"path": name, "content": "x"}, token=token)
            self.assertReplyCode(r, "bad_token", "token %r" % token)
        res = gw.tool("stat_path", {"path": name})
        self.assertTrue(res["is_error"], "the refused write must not have run")
        for method in ("process/list", "cancel", "export/open"):
            self.assertCode(gw.fail(method, {}, token="nope"), "bad_token", method)


class FailedProvisioning(GatewayTestCase):

    def test_workspace_lost_then_init_failed(self):
        gw = self.gateway(init=False)
        b = gw.make_binding(require_existing_workspace=True)
        err = gw.fail("initialize", b, token="t", timeout=180)
        self.assertCode(err, "workspace_lost")
        # The connection is dead for operations, initialize included.
        self.assertCode(gw.fail("process/list", {}, token="t"), "init_failed")
        r = gw.execute("stat_path", {"path": "."}, token="t")
        self.assertReplyCode(r, "init_failed")
        self.assertCode(gw.fail("initialize", gw.make_binding(), token="t"), "init_failed")
        self.assertCode(gw.fail("initialize", b, token="t"), "init_failed")
        rc, err, _ = gw.shutdown()
        self.assertEqual(rc, 0, err[-2000:])


class Resume(GatewayTestCase):

    def test_kept_workspace_resumes_and_removed_one_is_lost(self):
        gw1 = self.gateway(init=False)
        ident = unique("keep")
        gw1.initialize(identity=ident, remove_workspace_on_exit=None)
        gw1.write("kept.txt", "still here")
        rc, err, _ = gw1.shutdown(timeout=90)
        self.assertEqual(rc, 0, err[-2000:])

        gw2 = self.gateway(init=False, state_dir=gw1.state_dir)
        d = gw2.initialize(identity=ident, require_existing_workspace=True,
                           remove_workspace_on_exit=True)
        self.assertIs(d["environment"]["resumed"], True)
        self.assertEqual(gw2.tool_ok("read_file", {"path": "kept.txt"})["content"],
                         "still here")
        rc, err, _ = gw2.shutdown(timeout=90)
        self.assertEqual(rc, 0, err[-2000:])

        gw3 = self.gateway(init=False, state_dir=gw1.state_dir)
        b = gw3.make_binding(identity=ident, require_existing_workspace=True)
        self.assertCode(gw3.fail("initialize", b, token="t", timeout=180),
                        "workspace_lost", "removed at exit, so gone")


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
