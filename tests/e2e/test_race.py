"""The symlink-swap race through the real binary (issue 9, item 1).

A process inside the environment exchanges a directory `d` of the workspace
with a symbolic link `s` in a loop (renameat2 RENAME_EXCHANGE), the link
pointing at /proc/self, at / or at a directory beside the workspace on the
host.  The requests are the host's tools: read_file, grep, present_artifact
(and export/read), list_files, glob, write_file, edit_file and apply_patch
(add, move, delete).  The local backend runs the file tools inside the gateway, so
/proc/self there would be sandgate itself, with its environment (the
canary every test gateway carries).  Meanwhile more than 500 requests go
through every file tool and export: no answer may hold anything from
outside the root, and nothing outside may change.  Bounded: about 30 s.
"""

import base64
import hashlib
import json
import os
import subprocess
import tempfile
import time

from sgclient import CONFIG, Gateway, GatewayTestCase, give_to_commands, shell_quote

INSIDE = "SGRACE-inside\n"
OUTSIDE = "SGRACE-OUTSIDE-never-to-be-seen\n"
# The attacker, run inside the environment: make `s`, then swap forever.
SWAPPER = r"""
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
os.symlink(sys.argv[1], "s")
print("swapping", flush=True)
while True:
    libc.renameat2(-100, b"d", -100, b"s", 2)
"""
# Requests per target; three targets make more than 500 in all.
ROUNDS = 20
# Rounds of four resolutions through a name being swapped.
RESOLVES = 200


class SymlinkRace(GatewayTestCase):
    def setUp(self):
        if CONFIG:
            self.skipTest("the race needs the local backend and its host workspace")
        self.dir = tempfile.mkdtemp(prefix="sg-e2e-race-")
        self.addCleanup(lambda: subprocess.run(["rm", "-rf", self.dir]))
        self.host = os.path.join(self.dir, "workspace")
        self.outside = os.path.join(self.dir, "outside")
        os.makedirs(self.outside)
        for name in ("environ", "victim"):
            with open(os.path.join(self.outside, name), "w") as f:
                f.write(OUTSIDE)
        # d/environ for the /proc/self and outside links, and the same
        # file at d/<outside> for the link to /.
        for sub in ("d", "d" + self.outside):
            os.makedirs(os.path.join(self.host, sub), exist_ok=True)
            for name in ("environ", "victim"):
                with open(os.path.join(self.host, sub, name), "w") as f:
                    f.write(INSIDE)
        give_to_commands(self.host)
        cfg = os.path.join(self.dir, "config.json")
        with open(cfg, "w") as f:
            json.dump({"default": "p", "profiles": {"p": {
                "backend": "local", "host_workspace": self.host}}}, f)
        self.gw = Gateway(state_dir=os.path.join(self.dir, "state"), config=cfg, profile="p")
        self.addCleanup(self.gw.cleanup)
        self.gw.initialize()
        self.ops = 0
        self.escapes = []

    def foreign(self, what, text):
        """Record an answer that shows something from outside the root."""
        if "OUTSIDE" in text or self.gw.canary in text:
            self.escapes.append("%s: %s" % (what, text[:300]))

    def tool(self, name, args):
        self.ops += 1
        r = self.gw.execute(name, args)
        text = json.dumps(r)
        self.foreign(name, text)
        return r.get("data") or {}

    def export(self, path):
        """present_artifact, then the snapshot read back whole."""
        self.ops += 1
        reply = self.gw.execute("present_artifact", {"path": path})
        if "error" in reply:
            return
        ex = json.loads(reply["data"]["content"][0]["text"])
        data = self.gw.ok("export/read", {"token": ex["execution_export"], "offset": 0})
        got = base64.b64decode(data["data"])
        if hashlib.sha256(got).digest() != hashlib.sha256(INSIDE.encode()).digest():
            self.escapes.append("export: %r" % got[:200])
        self.gw.ok("export/close", {"token": ex["execution_export"]})

    def patch(self, *lines):
        return self.tool("apply_patch", {"patchText": "\n".join(
            ("*** Begin Patch",) + lines + ("*** End Patch",))})

    def race(self, target, sub):
        gw = self.gw
        pid = gw.start("exec python3 -c %s %s" % (shell_quote(SWAPPER), shell_quote(target)))["id"]
        r = gw.read(pid, offset=0, wait_ns=10 * 10**9)
        self.assertIn("swapping", r["Output"], "the swapper did not start: %s" % json.dumps(r))
        path = "d%s/environ" % sub
        victim = "d%s/victim" % sub
        for i in range(ROUNDS):
            r = self.tool("read_file", {"path": path})
            text = (r.get("structured_content") or {}).get("text")
            if text not in (None, INSIDE):
                self.foreign("read_file", text + " OUTSIDE?")
            self.tool("grep", {"pattern": "SGRACE"})
            self.export(path)
            self.tool("list_files", {"path": "d" + sub})
            self.tool("glob", {"pattern": "d/**/environ"})
            new = "d%s/new-%d" % (sub, i)
            self.tool("write_file", {"path": new, "content": INSIDE})
            self.tool("edit_file", {"path": new, "old_text": "inside", "new_text": "edited"})
            self.tool("edit_file", {"path": path, "old_text": "never-to-be", "new_text": "x"})
            self.patch("*** Add File: d%s/dir-%d/added" % (sub, i), "+" + INSIDE.strip())
            self.patch("*** Update File: %s" % victim, "*** Move to: d%s/moved-%d" % (sub, i))
            self.patch("*** Delete File: d%s/moved-%d" % (sub, i), "*** Delete File: " + new)
        gw.stop(pid)
        gw.wait_ended(pid)

    def check_outside(self):
        self.assertEqual(sorted(os.listdir(self.outside)), ["environ", "victim"],
                         "something was written, moved or deleted outside the root")
        for name in ("environ", "victim"):
            with open(os.path.join(self.outside, name)) as f:
                self.assertEqual(f.read(), OUTSIDE, "%s outside the root changed" % name)

    def test_swapped_directory_never_leads_out(self):
        start = time.monotonic()
        for target, sub in (("/proc/self", ""), ("/", self.outside), (self.outside, "")):
            self.race(target, sub)
            # The next swapper makes its own link.
            for name in ("s", "d"):
                p = os.path.join(self.host, name)
                if os.path.islink(p):
                    os.unlink(p)
                    if name == "d":
                        os.rename(os.path.join(self.host, "s"), p)
        elapsed = time.monotonic() - start
        kinds = sorted(set(e.split(":")[0] for e in self.escapes))
        print("\n%d requests in %.1f s, %d answered from outside the root (%s)"
              % (self.ops, elapsed, len(self.escapes), ", ".join(kinds) or "none"))
        self.assertGreaterEqual(self.ops, 500)
        self.assertEqual(self.escapes, [], "%d answers from outside the root, by %s"
                         % (len(self.escapes), ", ".join(kinds)))
        self.check_outside()

    def test_swap_race_answers_escape_or_not_found(self):
        """A name seen as a link and read as a directory a moment later (or
        the reverse) answered `internal: ...: cannot be resolved (errno
        22)` for about 3% of the requests: readlink(2) of what had become
        a directory.  A path caught mid-swap is path_escape or not_found,
        or resolves; never internal."""
        gw = self.gw
        pid = gw.start("exec python3 -c %s %s" % (shell_quote(SWAPPER),
                                                  shell_quote(self.outside)))["id"]
        r = gw.read(pid, offset=0, wait_ns=10 * 10**9)
        self.assertIn("swapping", r["Output"], "the swapper did not start: %s" % json.dumps(r))
        internal, seen = [], set()
        for i in range(RESOLVES):
            mode = (None, "read_only", "standard", "unconfined")[i % 4]
            for tool, path in (("list_files", "s"), ("read_file", "d/environ"),
                               ("list_files", "d"), ("read_file", "s/environ")):
                r = gw.execute(tool, {"path": path}, mode)
                text = json.dumps(r)
                self.foreign(tool, text)
                if "error" in r:
                    seen.add(r["error"].split(":")[0])
                    if r["error"].startswith("internal"):
                        internal.append("%s %s (mode %s): %s" % (tool, path, mode, r["error"]))
                else:
                    seen.add("ok")
        gw.stop(pid)
        gw.wait_ended(pid)
        print("\n%d resolutions mid-swap: %s" % (4 * RESOLVES, ", ".join(sorted(seen))))
        self.assertEqual(internal, [], "%d of %d answered internal"
                         % (len(internal), 4 * RESOLVES))
        self.assertEqual(self.escapes, [])
        self.check_outside()

    def test_process_spool_link_is_not_followed(self):
        """The spool lives in the control directory, which a command in
        unconfined mode can write: a spool replaced by a link must not be read
        through on the host."""
        gw = self.gw
        pid = gw.start("echo hello; sleep 30")["id"]
        self.assertIn("hello", gw.read(pid, offset=0, wait_ns=10 * 10**9)["Output"])
        target = os.path.join(self.outside, "environ")
        gw.sh("ln -sf %s /run/sandgate/ctl/proc/%s/out" % (shell_quote(target), pid),
              mode="unconfined")
        r = gw.call("process/read", {"id": pid, "options": {
            "OffsetBytes": 0, "MaxBytes": 0, "Wait": 0, "MinDwell": 0}})
        self.assertNotIn("SGRACE", json.dumps(r), "the spool link was followed on the host")
        gw.stop(pid)
