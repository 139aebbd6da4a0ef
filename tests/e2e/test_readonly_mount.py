"""mount_read_only holds for every tool, not only for commands (issue 9,
item 5).

A local profile with `host_workspace` and `mount_read_only: true` (or the
workspace made read-only by the host's own profile, which reaches a command
backend in WUU_EXECUTION_PROFILE and may narrow the operator's): every
writing file tool is refused with `permission_denied`, as the read_only
permission mode refuses them, and the host directory is byte for byte what
it was.  Reading tools keep working.
"""

import json
import os
import subprocess
import tempfile

from sgclient import CONFIG, Gateway, GatewayTestCase, host_env


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
        env = host_env({"backend": "command", "mount_read_only": True}) if in_binding else None
        gw = Gateway(state_dir=os.path.join(self.dir, "state"), config=cfg, profile="p",
                     env_extra=env)
        self.addCleanup(gw.cleanup)
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
        self.assertEqual(gw.view("read_file", {"path": "keep.txt"})["content"], "1|original\n")
        self.assertEqual([e["name"] for e in gw.view("list_files", {})["entries"]],
                         ["keep.txt", "sub"])
        gw.shutdown()
        self.assertEqual(snapshot(self.host), self.before)

    def test_write_file_new(self):
        self.refused("write_file", {"path": "new.txt", "content": "x"})

    def test_write_file_existing(self):
        self.refused("write_file", {"path": "keep.txt", "content": "changed"})

    def test_edit_file(self):
        self.refused("edit_file", {"path": "keep.txt", "old_text": "original",
                                   "new_text": "edited"})

    def test_apply_patch(self):
        self.refused("apply_patch", {"patchText": "*** Begin Patch\n*** Add File: newdir/x\n"
                                                  "+x\n*** Delete File: keep.txt\n"
                                                  "*** End Patch\n"})

    def test_host_profile_makes_it_read_only(self):
        for tool, args in (("write_file", {"path": "keep.txt", "content": "changed"}),
                           ("edit_file", {"path": "keep.txt", "old_text": "original",
                                          "new_text": "x"})):
            self.refused(tool, args, in_binding=True)
