"""Attacks on exports and the file tools by a hostile agent (docs/security.md,
"Exports and the file tools (attack review)").

The agent chooses the tools' arguments (a glob pattern, present_artifact
again and again) and shapes the tree they walk (directories nested without
end).  The tools are the host's: glob, list_files, read_file and
present_artifact with export/read and export/close.  On the local backend the file tools run inside the gateway, so a
tool that never ends, or one that runs the stack out, holds or kills
sandgate itself, not a helper process.
"""

import json
import os
import subprocess
import tempfile
import time
import unittest

import sgclient
from sgclient import CONFIG, MiB, SLACK, GatewayTestCase, unique


class GlobPatterns(GatewayTestCase):
    shared_gateway = True

    def test_many_globstars_answer_at_once(self):
        """A backtracking matcher tried every way the "**" split each path:
        thirteen pairs of "**" and "*" against a tree thirty directories deep
        took minutes of a worker, and a cancel was not seen meanwhile."""
        gw = self.gw
        d = unique("glob")
        deep = "/".join([d] + ["a"] * 30)
        gw.sh_ok("mkdir -p %s && touch %s/f.c" % (deep, deep))
        pattern = d + "/" + "**/*/" * 13 + "zz"
        started = time.monotonic()
        r = gw.execute("glob", {"pattern": pattern}, timeout=10 * SLACK)
        self.assertLess(time.monotonic() - started, 5 * SLACK)
        self.assertEqual(sgclient.view_of(r["data"])["files"], [], r)
        # The same pattern ending in a name that is there still finds it.
        v = gw.view("glob", {"pattern": d + "/" + "**/*/" * 13 + "f.c"})
        self.assertEqual(v["files"], [deep + "/f.c"])


class DeepTrees(GatewayTestCase):
    def test_walks_of_a_deep_tree(self):
        """A walk that recursed once per level with no bound (the old
        recursive delete did) ran a worker's stack out on a tree 9,000
        directories deep, made in two seconds by a command, and killed the
        gateway.  glob walks such a tree in the gateway on the local
        backend; here the gateway's stacks are 2 MiB (`ulimit -s`), which
        stands for a host whose descriptor limit lets a walk go deeper than
        this one's 20,000 would."""
        if CONFIG:
            self.skipTest("the walk runs in the gateway only on the local backend")
        tmp = tempfile.mkdtemp(prefix="sg-e2e-stack-")
        # rm, not shutil.rmtree: a tree left 9,000 deep recurses Python out.
        self.addCleanup(subprocess.run, ["rm", "-rf", tmp])
        wrapper = os.path.join(tmp, "sandgate")
        with open(wrapper, "w") as f:
            f.write('#!/bin/sh\nulimit -s 2048\nexec "%s" "$@"\n' % sgclient.BIN)
        os.chmod(wrapper, 0o755)
        real = sgclient.BIN
        sgclient.BIN = wrapper
        try:
            gw = self.gateway(state_dir=os.path.join(tmp, "state"))
        finally:
            sgclient.BIN = real
        gw.sh_ok("python3 -c 'import os\n"
                 "for i in range(9000):\n"
                 "    os.mkdir(\"d\")\n"
                 "    os.chdir(\"d\")\n'")
        for tool, args in (("glob", {"pattern": "d/**/zz"}), ("glob", {"pattern": "**/*.c"}),
                           ("list_files", {"path": "d/d/d"})):
            gw.execute(tool, args, timeout=120 * SLACK)
            self.assertTrue(gw.running(), "%s killed the gateway: %s"
                            % (tool, gw.stderr_text()[-2000:]))
        # A tree of ordinary depth is still walked, and the gateway works.
        gw.sh_ok("mkdir -p e/" + "/".join(["x"] * 100) + " && touch e/" + "/".join(["x"] * 100)
                 + "/f.c")
        self.assertEqual(len(gw.view("glob", {"pattern": "e/**/f.c"})["files"]), 1)
        # rm -rf of 9,000 levels takes 30 s on a quiet two-core machine
        # and more beside other suites: past the client's 60 s reply wait,
        # which does not scale with the slack.
        res = gw.execute("bash", {"command": "rm -rf d; ls"}, timeout=300)
        self.assertIn("data", res, res)
        self.assertEqual(sgclient.view_of(res["data"])["output"].strip(), "e", res)


class HugeDirectories(GatewayTestCase):
    """A command makes a directory of 150,000 names of 200 bytes in a few
    seconds; the file tools walk it in the gateway on the local backend,
    which must not grow by about as much as the names."""

    def walk(self, tool, args):
        """The tool's result on such a directory and what the gateway grew by."""
        if CONFIG:
            self.skipTest("the walk runs in the gateway only on the local backend")
        gw = self.gw = self.gateway()
        gw.sh_ok("mkdir huge && cd huge && python3 -c 'import os\n"
                 "for i in range(150000):\n"
                 "    os.close(os.open(\"%06d\" % i + \"x\" * 194, os.O_CREAT | os.O_WRONLY))\n'")
        before = sgclient.proc_status(gw.proc.pid, "VmHWM")
        res = gw.tool_ok(tool, args)
        grew = sgclient.proc_status(gw.proc.pid, "VmHWM") - before
        self.assertLess(grew * 1024, 12 * MiB,
                        "the gateway grew by %d KiB for %s" % (grew, tool))
        return res

    @unittest.skipIf(os.environ.get("SG_SANITIZED"), "a sanitizer's own memory is not the gateway's")
    def test_list_of_a_huge_directory_is_bounded_in_memory(self):
        """The old list read every name before its bound applied.
        list_files shows a page of 1,000 entries; only what the page
        can still show is kept."""
        v = sgclient.view_of(self.walk("list_files", {"path": "huge"}))
        self.assertTrue(v["has_more"], {k: v[k] for k in v if k != "entries"})
        self.assertEqual(len(v["entries"]), 1000)

    @unittest.skipIf(os.environ.get("SG_SANITIZED"), "a sanitizer's own memory is not the gateway's")
    def test_glob_of_a_huge_directory_is_bounded_in_memory(self):
        """glob read every name of a directory before matching any.  A
        name that cannot match nor lead to a match is dropped as it is
        read now: memory follows the matches and the directories to walk."""
        files = sgclient.view_of(self.walk("glob", {"pattern": "huge/00000[0-4]x*"}))["files"]
        self.assertEqual(sorted(f.split("/")[-1][:6] for f in files),
                         ["%06d" % i for i in range(5)], files[:5])


class HugeFiles(GatewayTestCase):
    shared_gateway = True

    def test_read_past_the_end_of_a_huge_sparse_file(self):
        """read_file with an offset past the last line read the whole file
        to count its lines: a command makes a file of a terabyte, 3,000
        lines of text (more than the head that decides "binary") and a hole
        after them, in an instant, and the read then ran for many minutes.
        A hole holds no newline, so the count skips it now."""
        gw = self.gw
        name = unique("sparse")
        gw.sh_ok("seq -f 'line %%04g' 3000 > %s && truncate -s 1T %s" % (name, name))
        # Where the file system reports no holes (SEEK_HOLE answers the end:
        # gVisor's gofer), nothing can skip them, and a read past the text
        # reads a terabyte of zeros.
        hole = gw.sh_ok("python3 -c 'import os, sys; print(os.lseek(os.open(sys.argv[1], "
                        "os.O_RDONLY), 0, os.SEEK_HOLE))' %s 2>/dev/null || echo 0" % name)
        if int(hole.split()[-1]) == 1 << 40:
            gw.sh_ok("rm %s" % name)
            self.skipTest("this file system reports no holes (SEEK_HOLE answers the end of "
                          "the file), so none can be skipped")
        started = time.monotonic()
        r = gw.execute("read_file", {"path": name, "offset": 5000, "limit": 10},
                       timeout=30 * SLACK)
        self.assertLess(time.monotonic() - started, 5 * SLACK)
        if "data" in r:
            # The hole is the file's last line: NUL bytes and no newline.
            self.assertEqual(sgclient.view_of(r["data"])["total_lines"], 3001, r)
        # A read inside the text answers as soon.
        started = time.monotonic()
        r = gw.execute("read_file", {"path": name, "offset": 2999, "limit": 1},
                       timeout=30 * SLACK)
        self.assertLess(time.monotonic() - started, 5 * SLACK)
        if "data" in r:
            self.assertEqual(r["data"]["structured_content"]["text"], "line 2999\n", r)
        gw.sh_ok("rm %s" % name)


def present(gw, path):
    """present_artifact; the export's token."""
    return json.loads(gw.tool_ok("present_artifact", {"path": path})["content"][0]["text"])[
        "execution_export"]


class ExportBounds(GatewayTestCase):
    def test_open_exports_are_bounded_in_number(self):
        """Every present_artifact opened an export that stayed until
        export/close, which a host need never send: each held a descriptor
        and a snapshot without bound."""
        gw = self.gateway()
        gw.write("small.txt", "x" * 100)
        tokens = [present(gw, "small.txt") for _ in range(256)]
        r = gw.execute("present_artifact", {"path": "small.txt"})
        self.assertReplyCode(r, "too_large", "present_artifact past the bound")
        # The open ones still read, and a close makes room for one more.
        self.assertEqual(gw.ok("export/read", {"token": tokens[0], "offset": 0})["eof"], True)
        gw.ok("export/close", {"token": tokens[0]})
        present(gw, "small.txt")
        self.assertReplyCode(gw.execute("present_artifact", {"path": "small.txt"}), "too_large")

    def test_open_exports_are_bounded_in_bytes(self):
        """Each export is a full copy in the state directory: a 250 MiB
        file presented again and again filled the host's disk, 250 MiB a
        call.  Four fit in the session's 1 GiB, a fifth does not."""
        if CONFIG:
            self.skipTest("a gigabyte through a remote backend is slow; the bound is the gateway's")
        gw = self.gateway()
        gw.sh_ok("truncate -s %d big.bin" % (250 * MiB))
        tokens = [present(gw, "big.bin") for _ in range(4)]
        err = gw.tool_error("present_artifact", {"path": "big.bin"})
        self.assertCode(err, "too_large")
        self.assertIn("export/close", err)
        held = sum(os.path.getsize(os.path.join(root, f))
                   for root, _, files in os.walk(gw.state_dir)
                   for f in files if os.path.basename(root).startswith("exports-"))
        self.assertLessEqual(held, 1024 * MiB)
        gw.ok("export/close", {"token": tokens[0]})
        present(gw, "big.bin")
