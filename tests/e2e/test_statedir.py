"""The state directory (issue 9, smaller finding): a relative
XDG_STATE_HOME is refused at startup with a message naming it, instead of
a gateway whose every file tool later fails; a relative --state-dir is the
caller's own word and is taken from the working directory."""

import os
import shutil
import subprocess
import tempfile
import unittest

from sgclient import BIN, CONFIG, PROFILE, GatewayTestCase, Gateway, unique


class StateDir(GatewayTestCase):
    def tmpdir(self):
        d = tempfile.mkdtemp(prefix="sg-e2e-statedir-")
        self.addCleanup(shutil.rmtree, d, True)
        return d

    def run_sandgate(self, args, cwd, **env):
        e = dict(os.environ)
        e.pop("SANDGATE_CONFIG", None)
        e["XDG_CONFIG_HOME"] = self.tmpdir()
        e.update(env)
        return subprocess.run([os.path.abspath(BIN)] + args, cwd=cwd, env=e, input="", capture_output=True,
                              text=True, timeout=30)

    def test_relative_xdg_state_home_is_refused_at_startup(self):
        cwd = self.tmpdir()
        for args in (["serve"], ["envs", "list"]):
            p = self.run_sandgate(args, cwd, XDG_STATE_HOME="rel/state")
            self.assertNotEqual(p.returncode, 0, "%s accepted a relative XDG_STATE_HOME" % args)
            self.assertIn("XDG_STATE_HOME", p.stderr)
            self.assertIn("absolute", p.stderr)
            self.assertFalse(os.path.exists(os.path.join(cwd, "rel")),
                             "%s made a state directory under the working directory" % args)

    def test_relative_home_is_refused_without_xdg_state_home(self):
        p = self.run_sandgate(["serve"], self.tmpdir(), XDG_STATE_HOME="", HOME="relhome")
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("HOME", p.stderr)

    @unittest.skipUnless(not PROFILE or PROFILE == "local", "the state dir holds local workspaces")
    def test_relative_state_dir_is_taken_from_the_working_directory(self):
        cwd = self.tmpdir()
        # Relative to the working directory the gateway inherits.
        gw = Gateway(state_dir=os.path.relpath(os.path.join(cwd, "state")))
        self.addCleanup(gw.cleanup)
        gw.initialize()
        name = unique("f") + ".txt"
        gw.write(name, "hello")
        self.assertEqual(gw.tool_ok("read_file", {"path": name})["structured_content"]["text"],
                         "hello")
        self.assertTrue(os.path.isdir(os.path.join(cwd, "state", "local")))


if __name__ == "__main__":
    unittest.main()
