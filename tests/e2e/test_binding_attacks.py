"""Bindings that try to reach what sandgate's own checks refuse (docs/protocol.md 4.1).

- `root` is checked as written, so one spelled another way ("//run/sandgate",
  "/./usr", "/x/../proc", a trailing '/') would slip past a backend's literal
  comparisons (the local backend's list of OS directories): it is refused
  with `invalid_argument`, and the connection stays usable.
- A binding may set `environment.shared` (4.3), but that says only what the
  newcomer wants: an identity held by a live session that does not share is
  refused with `unavailable` whatever the newcomer asks, and the refusal
  leaves the holder's record as it was.
"""

import shutil
import unittest

from sgclient import CONFIG, ROOT, Gateway, GatewayTestCase, unique


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
                err = gw.fail("initialize", gw.make_binding(root=root), token="T", timeout=60)
                self.assertCode(err, "invalid_argument", "root %r" % root)
        # Refused before anything was made: the same connection still binds.
        gw.initialize(token="T")
        self.assertEqual(gw.sh_ok("pwd").strip(), ROOT)

    def test_dots_inside_a_name_are_a_name(self):
        if CONFIG or not shutil.which("bwrap"):
            self.skipTest("local backend with bubblewrap only (root differs from the workspace)")
        root = "/sg-e2e.d/..x"
        gw = self.gateway(init=False)
        gw.initialize(root=root)
        gw.write("f.txt", "in\n")
        self.assertEqual(gw.sh_ok("pwd; cat f.txt"), root + "\nin\n")


class SharedTakeover(GatewayTestCase):
    def other(self, one):
        """A second gateway on the first one's state directory."""
        gw = Gateway(state_dir=one.state_dir)
        self.addCleanup(self._finish, gw)
        return gw

    def test_binding_cannot_share_a_session_that_does_not(self):
        one = self.gateway(init=False)
        ident = unique("victim")
        one.initialize(identity=ident, environment={"shared": False})
        one.write("secret.txt", "one's secret\n")
        two = self.other(one)
        err = two.fail("initialize",
                       two.make_binding(identity=ident, environment={"shared": True}),
                       token="t2", timeout=60)
        self.assertCode(err, "unavailable")
        # The refusal changed nothing: the holder still does not share, so
        # the next one asking is refused as well.
        three = self.other(one)
        err = three.fail("initialize",
                         three.make_binding(identity=ident, environment={"shared": True}),
                         token="t3", timeout=60)
        self.assertCode(err, "unavailable")
        # A refusal leaves the connection usable.
        two.initialize(token="t2")
        self.assertTrue(two.tool("read_file", {"path": "secret.txt"})["is_error"],
                        "a session of another identity reads the holder's file")
        self.assertEqual(one.tool_ok("read_file", {"path": "secret.txt"})["content"],
                         "one's secret\n")

    def test_a_shared_holder_stays_shared(self):
        one = self.gateway(init=False)
        ident = unique("team")
        one.initialize(identity=ident, environment={"shared": True})
        one.write("shared.txt", "from one\n")
        two = self.other(one)
        err = two.fail("initialize",
                       two.make_binding(identity=ident, environment={"shared": False}),
                       token="t2", timeout=60)
        self.assertCode(err, "unavailable")
        # The newcomer that did not share was refused without rewriting the
        # holder's record: a sharing one still joins.
        three = self.other(one)
        three.initialize(identity=ident, environment={"shared": True})
        self.assertEqual(three.tool_ok("read_file", {"path": "shared.txt"})["content"],
                         "from one\n")


if __name__ == "__main__":
    unittest.main()
