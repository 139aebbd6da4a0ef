"""Path containment: `..`, absolute paths and symlinks, in every confined mode
(standard, "" and read_only); unconfined lifts it inside the environment, and
where the file tools run in-process on this host (the local backend) a path
outside root is refused instead of reaching the host (protocol section 3)."""

import json
import os
import unittest
import uuid

from sgclient import ROOT, GatewayTestCase, unique

MODES = (None, "", "standard", "read_only")
WRITE_MODES = (None, "", "standard")


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
            self.escape("list_files", {"path": path.rsplit("/", 1)[0] or "/"})
            self.escape("write_file", {"path": path, "content": "x"}, WRITE_MODES)
        self.escape("list_files", {"path": ".."})
        self.escape("write_file", {"path": "../sg-e2e-escape/x", "content": "x"}, WRITE_MODES)

    def test_dotdot_that_stays_inside_is_fine(self):
        v = self.gw.view("read_file", {"path": self.d + "/../" + self.d + "/inside.txt"})
        self.assertEqual((v["content"], v["path"]), ("1|inside\n", self.d + "/inside.txt"))

    def test_absolute_outside(self):
        root = ROOT.rstrip("/")
        for path in ("/etc/passwd", "/", root + "/../etc/passwd",
                     root + "-evil/file", root + "x/" + self.d + "/inside.txt"):
            self.escape("read_file", {"path": path})
            self.escape("write_file", {"path": path, "content": "x"}, WRITE_MODES)
        self.escape("list_files", {"path": "/etc"})
        self.escape("glob", {"pattern": "*", "path": "/etc"})
        self.escape("grep", {"pattern": "root", "path": "/etc"})

    def test_symlink_to_outside_directory(self):
        gw = self.gw
        gw.sh_ok("ln -s /etc etc_link", cwd=self.d)
        link = self.d + "/etc_link"
        self.escape("read_file", {"path": link + "/passwd"})
        self.escape("read_file", {"path": link + "/hostname"})
        self.escape("list_files", {"path": link})
        self.escape("grep", {"pattern": "root", "path": link})
        self.escape("write_file", {"path": link + "/sg-e2e-evil", "content": "x"}, WRITE_MODES)
        self.escape("edit_file", {"path": link + "/hostname", "old_text": "a",
                                  "new_text": "b"}, WRITE_MODES)
        self.escape("write_file", {"path": link + "/sg-e2e-dir/x", "content": "x"}, WRITE_MODES)
        self.escape("present_artifact", {"path": link + "/passwd"})

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
        gw.sh_ok("test ! -e " + target, mode="unconfined")
        if gw.backend == "local":
            # The gateway may write through the host's view of the
            # workspace, where /tmp is this machine's.
            self.assertFalse(os.path.lexists(target), "created on the host: " + target)

    def test_symlink_to_file_outside(self):
        gw = self.gw
        gw.sh_ok("ln -s /etc/passwd pw", cwd=self.d)
        self.escape("read_file", {"path": self.d + "/pw"})
        self.escape("write_file", {"path": self.d + "/pw", "content": "x"}, WRITE_MODES)
        self.escape("edit_file", {"path": self.d + "/pw", "old_text": "root",
                                  "new_text": "toor"}, WRITE_MODES)

    def test_symlinks_inside_root_are_followed(self):
        gw = self.gw
        gw.sh_ok("ln -s inside.txt rel && ln -s %s/%s/inside.txt abs"
                 % (ROOT.rstrip("/"), self.d), cwd=self.d)
        for name in ("rel", "abs"):
            # Each actor reads it once; the link is the file it names.
            v = gw.view("read_file", {"path": self.d + "/" + name}, actor=unique(name))
            self.assertEqual((v["content"], v["path"]), ("1|inside\n", self.d + "/inside.txt"),
                             name)

    def test_cwd_outside(self):
        gw = self.gw
        self.escape("bash", {"command": "pwd", "cwd": ".."}, WRITE_MODES)
        self.escape("bash", {"command": "pwd", "cwd": "/etc"}, WRITE_MODES)
        self.assertCode(gw.fail("process/start", {"command": "pwd", "cwd": "/etc"}),
                        "path_escape")
        out = gw.sh_ok("pwd", cwd=self.d)
        self.assertEqual(out.strip(), ROOT.rstrip("/") + "/" + self.d)

    def test_empty_path_names_root(self):
        """An empty path is the root, as the host's tools take it."""
        gw = self.gw
        root = gw.view("list_files", {"path": ""})
        self.assertEqual(root["path"], ".")
        self.assertEqual(root["entries"], gw.view("list_files", {})["entries"])
        self.assertEqual(gw.sh_ok("pwd", cwd="").strip(), ROOT.rstrip("/") or "/")
        self.assertIn("read_file requires path", gw.tool_error("read_file", {"path": ""}))
        self.assertIsInstance(gw.tool_error("write_file", {"path": "", "content": "x"}), str)

    def test_export_outside(self):
        for path in ("/etc/passwd", "../etc/passwd"):
            self.escape("present_artifact", {"path": path})

    def test_unconfined_lifts_containment_inside_the_environment(self):
        gw = self.gw
        gw.sh_ok("ln -s /etc/hostname hn", cwd=self.d)
        for path in ("/etc/hostname", "../" * 12 + "etc/hostname", self.d + "/hn"):
            r = gw.execute("read_file", {"path": path}, mode="unconfined")
            if gw.backend in ("local", "singularity"):
                # In-process on this host, the environment's files outside
                # root are the host's: refused, never read from the host.
                self.assertReplyCode(r, "permission_denied", path)
                self.assertIn("outside the workspace root", r["error"])
            else:
                self.assertNotIn("error", r, path)
                v = json.loads(r["data"]["content"][0]["text"])
                self.assertEqual(v["path"], "/etc/hostname")
        inside = gw.view("read_file", {"path": ROOT.rstrip("/") + "/" + self.d + "/inside.txt"},
                         mode="unconfined")
        self.assertEqual(inside["path"], self.d + "/inside.txt")
        r = gw.execute("present_artifact", {"path": "/etc/hostname"}, mode="unconfined")
        if gw.backend in ("local", "singularity"):
            self.assertReplyCode(r, "permission_denied", "present_artifact")
        else:
            ex = json.loads(r["data"]["content"][0]["text"])
            self.assertEqual(ex["name"], "hostname")
            gw.ok("export/close", {"token": ex["execution_export"]})
        res = gw.tool_ok("present_artifact", {"path": self.d + "/inside.txt"}, mode="unconfined")
        ex = json.loads(res["content"][0]["text"])
        self.assertEqual((ex["name"], ex["size"]), ("inside.txt", 6))
        gw.ok("export/close", {"token": ex["execution_export"]})


if __name__ == "__main__":
    unittest.main()
