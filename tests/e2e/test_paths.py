"""Path containment: `..`, absolute paths and symlinks, in every mode
(docs/protocol.md sections 6.1 and 6.2: containment applies in `full` too)."""

import os
import unittest
import uuid

from sgclient import ROOT, GatewayTestCase, unique

MODES = (None, "standard", "read_only", "full")
WRITE_MODES = (None, "standard", "full")


class Paths(GatewayTestCase):
    shared_gateway = True

    def setUp(self):
        self.d = unique("paths")
        self.gw.write(self.d + "/inside.txt", "inside")

    def escape(self, tool, args, modes=MODES):
        for mode in modes:
            err = self.gw.tool_error(tool, args, mode)
            self.assertCode(err, "path_escape", "%s %r mode %s" % (tool, args, mode))

    def test_dotdot(self):
        for path in ("../etc/passwd", self.d + "/../../etc/passwd", "./../x",
                     self.d + "/../" + self.d + "/../../etc/hostname"):
            self.escape("read_file", {"path": path})
            self.escape("stat_path", {"path": path})
            self.escape("write_file", {"path": path, "content": "x"}, WRITE_MODES)
        self.escape("list_dir", {"path": ".."})
        self.escape("make_dir", {"path": "../sg-e2e-escape"}, WRITE_MODES)

    def test_dotdot_that_stays_inside_is_fine(self):
        res = self.gw.tool_ok("read_file", {"path": self.d + "/../" + self.d + "/inside.txt"})
        self.assertEqual(res["content"], "inside")

    def test_absolute_outside(self):
        root = ROOT.rstrip("/")
        for path in ("/etc/passwd", "/", root + "/../etc/passwd",
                     root + "-evil/file", root + "x/" + self.d + "/inside.txt"):
            self.escape("read_file", {"path": path})
            self.escape("write_file", {"path": path, "content": "x"}, WRITE_MODES)
        self.escape("list_dir", {"path": "/etc"})
        self.escape("glob", {"pattern": "*", "path": "/etc"})
        self.escape("grep", {"pattern": "root", "path": "/etc"})

    def test_symlink_to_outside_directory(self):
        gw = self.gw
        gw.sh_ok("ln -s /etc etc_link", cwd=self.d)
        link = self.d + "/etc_link"
        self.escape("read_file", {"path": link + "/passwd"})
        self.escape("read_file", {"path": link + "/hostname"})
        self.escape("stat_path", {"path": link + "/passwd"})
        self.escape("list_dir", {"path": link})
        self.escape("grep", {"pattern": "root", "path": link})
        self.escape("write_file", {"path": link + "/sg-e2e-evil", "content": "x"}, WRITE_MODES)
        self.escape("edit_file", {"path": link + "/hostname", "old_string": "a",
                                  "new_string": "b"}, WRITE_MODES)
        self.escape("make_dir", {"path": link + "/sg-e2e-dir"}, WRITE_MODES)
        self.escape("move_path", {"path": self.d + "/inside.txt",
                                  "destination": link + "/sg-e2e-moved"}, WRITE_MODES)
        self.assertCode(gw.fail("export/open", {"path": link + "/passwd"}), "path_escape")

    def test_relative_symlink_climbing_out(self):
        gw = self.gw
        gw.sh_ok("ln -s ../.. up", cwd=self.d)
        self.escape("read_file", {"path": self.d + "/up/etc/passwd"})
        self.escape("write_file", {"path": self.d + "/up/sg-e2e-evil", "content": "x"},
                    WRITE_MODES)

    def test_dangling_symlink_write_does_not_create_outside(self):
        gw = self.gw
        target = "/tmp/sg-e2e-%s" % uuid.uuid4().hex
        gw.sh_ok("ln -s %s dangling" % target, cwd=self.d)
        self.escape("write_file", {"path": self.d + "/dangling", "content": "x"}, WRITE_MODES)
        self.escape("read_file", {"path": self.d + "/dangling"})
        gw.sh_ok("test ! -e " + target, mode="full")
        if gw.backend == "local":
            # The gateway may write through the host's view of the
            # workspace, where /tmp is this machine's.
            self.assertFalse(os.path.lexists(target), "created on the host: " + target)

    def test_symlink_to_file_outside(self):
        gw = self.gw
        gw.sh_ok("ln -s /etc/passwd pw", cwd=self.d)
        self.escape("read_file", {"path": self.d + "/pw"})
        self.escape("write_file", {"path": self.d + "/pw", "content": "x"}, WRITE_MODES)
        self.escape("edit_file", {"path": self.d + "/pw", "old_string": "root",
                                  "new_string": "toor"}, WRITE_MODES)

    def test_symlinks_inside_root_are_followed(self):
        gw = self.gw
        gw.sh_ok("ln -s inside.txt rel && ln -s %s/%s/inside.txt abs"
                 % (ROOT.rstrip("/"), self.d), cwd=self.d)
        for name in ("rel", "abs"):
            res = gw.tool_ok("read_file", {"path": self.d + "/" + name})
            self.assertEqual(res["content"], "inside", name)

    def test_cwd_outside(self):
        gw = self.gw
        self.escape("run_command", {"command": "pwd", "cwd": ".."}, WRITE_MODES)
        self.escape("run_command", {"command": "pwd", "cwd": "/etc"}, WRITE_MODES)
        self.assertCode(gw.fail("process/start", {"command": "pwd", "cwd": "/etc"}),
                        "path_escape")
        out = gw.sh_ok("pwd", cwd=self.d)
        self.assertEqual(out.strip(), ROOT.rstrip("/") + "/" + self.d)

    def test_empty_path_names_root(self):
        """Results name root "" (section 6.2), so "" given back names it too."""
        gw = self.gw
        st = gw.tool_ok("stat_path", {"path": ""})
        self.assertEqual((st["metadata"]["type"], st["metadata"]["path"]), ("dir", ""))
        self.assertEqual(gw.tool_ok("list_dir", {"path": ""})["content"],
                         gw.tool_ok("list_dir", {})["content"])
        self.assertEqual(gw.sh_ok("pwd", cwd="").strip(), ROOT.rstrip("/") or "/")
        self.assertCode(gw.tool_error("delete_path", {"path": "", "recursive": True}),
                        "permission_denied")
        self.assertTrue(gw.tool("write_file", {"path": "", "content": "x"})["is_error"])

    def test_export_outside(self):
        gw = self.gw
        for path in ("/etc/passwd", "../etc/passwd"):
            self.assertCode(gw.fail("export/open", {"path": path}), "path_escape", path)


if __name__ == "__main__":
    unittest.main()
