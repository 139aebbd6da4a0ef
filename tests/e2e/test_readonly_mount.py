"""mount_read_only holds for every tool, not only for commands (issue 9,
item 5).

A local profile with `host_workspace` and `mount_read_only: true` (or the
profile's workspace made read-only by the binding's `environment`): every
writing file tool is refused with `permission_denied`, as the read_only
permission mode refuses them, and the host directory is byte for byte what
it was.  Reading tools keep working.
"""

import json
import os
import subprocess
import tempfile

from sgclient import CONFIG, Gateway, GatewayTestCase


def snapshot(top):
    """Every entry under top with its type and content."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(top):
        for d in dirnames:
            out[os.path.relpath(os.path.join(dirpath, d), top)] = "dir"
        for f in filenames:
            with open(os.path.join(dirpath, f), "rb") as fh:
                out[os.path.relpath(os.path.join(dirpath, f), top)] = fh.read()
    return out


class ReadOnlyMount(GatewayTestCase):
    def setUp(self):
        if CONFIG:
            self.skipTest("read-only mounts are a local-backend field here")
        self.dir = tempfile.mkdtemp(prefix="sg-e2e-romount-")
        self.addCleanup(lambda: subprocess.run(["rm", "-rf", self.dir]))
        self.host = os.path.join(self.dir, "project")
        os.makedirs(os.path.join(self.host, "sub"))
        with open(os.path.join(self.host, "keep.txt"), "w") as f:
            f.write("original\n")
        with open(os.path.join(self.host, "sub", "inner.txt"), "w") as f:
            f.write("inner\n")
        self.before = snapshot(self.host)

    def gateway_for(self, in_binding):
        profile = {"backend": "local", "host_workspace": self.host}
        if not in_binding:
            profile["mount_read_only"] = True
        cfg = os.path.join(self.dir, "config.json")
        with open(cfg, "w") as f:
            json.dump({"default": "p", "profiles": {"p": profile}}, f)
        gw = Gateway(state_dir=os.path.join(self.dir, "state"), config=cfg, profile="p")
        self.addCleanup(gw.cleanup)
        if in_binding:
            gw.initialize(environment={"mount_read_only": True})
        else:
            gw.initialize()
        return gw

    def refused(self, tool, args, in_binding=False):
        gw = self.gateway_for(in_binding)
        err = gw.tool_error(tool, args)
        self.assertCode(err, "permission_denied", tool)
        self.assertIn("read-only", err)
        self.assertEqual(snapshot(self.host), self.before,
                         "%s changed the read-only host directory" % tool)
        # Reading still works.
        self.assertEqual(gw.tool_ok("read_file", {"path": "keep.txt"})["content"], "original\n")
        gw.shutdown()
        self.assertEqual(snapshot(self.host), self.before)

    def test_write_file_new(self):
        self.refused("write_file", {"path": "new.txt", "content": "x"})

    def test_write_file_existing(self):
        self.refused("write_file", {"path": "keep.txt", "content": "changed"})

    def test_edit_file(self):
        self.refused("edit_file", {"path": "keep.txt", "old_string": "original",
                                   "new_string": "edited"})

    def test_make_dir(self):
        self.refused("make_dir", {"path": "newdir/deeper"})

    def test_move_path(self):
        self.refused("move_path", {"path": "keep.txt", "destination": "moved.txt"})

    def test_delete_path(self):
        self.refused("delete_path", {"path": "sub", "recursive": True})

    def test_binding_environment_makes_it_read_only(self):
        for tool, args in (("write_file", {"path": "keep.txt", "content": "changed"}),
                           ("delete_path", {"path": "keep.txt"})):
            self.refused(tool, args, in_binding=True)
