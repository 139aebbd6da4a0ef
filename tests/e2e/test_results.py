"""Tool results an agent can trust (issue 11): nothing silently missing,
nothing unreadable, in the host's own views.

Each test here failed on the code before the change: long command output
lost its end, a binary file came back as escaped noise, /tmp was not
writable in standard mode.  Now the host's views say what is left out (a
list page's has_more and page.next, a read's omitted_ranges, a command's
tails and full log), a binary file is refused with the host's sentence and
exported whole with present_artifact.  The glob, grep and git tests that
lived here are in test_tools.py, on the host's arguments and views.
"""

import base64
import hashlib
import json
import os

from sgclient import GatewayTestCase, unique


class Results(GatewayTestCase):
    shared_gateway = True

    def setUp(self):
        self.d = unique("res")

    def p(self, name):
        return "%s/%s" % (self.d, name)

    def sh(self, script, mode=None):
        return self.gw.sh_ok("mkdir -p %s && cd %s && %s" % (self.d, self.d, script), mode)

    def make(self, names):
        self.gw.sh_ok("mkdir -p %s && cd %s && for f in %s; do mkdir -p \"$(dirname \"$f\")\"; "
                      "echo x > \"$f\"; done" % (self.d, self.d, " ".join(names)))

    def test_list_files_says_what_it_left_out(self):
        self.sh("mkdir -p many/sub && echo x > many/sub/deep.txt && cd many && "
                "seq -f 'f%05g' 1 10005 | xargs touch")
        # The class shares one workspace: left behind, these files would be
        # walked for the revision of every later call (seconds under gVisor).
        self.addCleanup(self.gw.sh_ok, "rm -rf %s" % self.p("many"))
        v = self.gw.view("list_files", {"path": self.p("many")})
        self.assertEqual((v["visible_total"], v["returned_count"], v["has_more"],
                          v["truncated"], v["omitted_entry_count"]), (10006, 1000, True, True,
                                                                      9006))
        self.assertEqual(v["page"]["next"]["offset"], 1000)
        seen = [e["name"] for e in v["entries"]]
        while v["has_more"]:
            v = self.gw.view("list_files", dict(v["page"]["next"], path=self.p("many")))
            seen += [e["name"] for e in v["entries"]]
        self.assertEqual(len(seen), 10006)
        self.assertEqual(seen[-1], "sub")
        self.assertEqual(len(set(seen)), 10006, "pages never overlap")
        # Whole listings say nothing is left.
        v = self.gw.view("list_files", {"path": self.p("many/sub")})
        self.assertEqual((v["has_more"], v["truncated"], v["omitted_entry_count"]),
                         (False, False, 0))
        self.assertNotIn("next", v["page"])

    # ---- what a command printed ---------------------------------------------

    def test_command_output_keeps_the_tail_and_the_log(self):
        v = self.gw.sh("seq 1 300000; echo 'error: the last line' >&2; exit 2")
        full = "".join("%d\n" % i for i in range(1, 300001))
        self.assertEqual(v["exit_code"], 2, "a command that failed is a result")
        self.assertTrue(v["truncated"])
        self.assertEqual(v["stdout_bytes"], len(full))
        self.assertTrue(v["output"].endswith("300000\nerror: the last line\n"), v["output"][-100:])
        self.assertLessEqual(len(v["output"].encode()), 30 * 1024)
        self.assertTrue(full.endswith(v["stdout_tail"]))
        self.assertEqual(v["stderr_tail"], "error: the last line\n")
        self.assertEqual(v["full_log_bytes"], len(full) + 21)

    # ---- read_file ------------------------------------------------------------

    def test_read_file_says_what_it_left_out(self):
        self.sh("seq 1 300000 > n.txt")
        err = self.gw.tool_error("read_file", {"path": self.p("n.txt")})
        self.assertIn("file too large (1988895 bytes, max 262144). Use offset and limit", err)
        v = self.gw.view("read_file", {"path": self.p("n.txt"), "offset": 1000, "limit": 2})
        self.assertEqual(v["content"], "1000|1000\n|1001\n")
        self.assertTrue(v["truncated"])
        self.assertEqual(v["omitted_ranges"], [{"start_line": 1, "end_line": 999},
                                               {"start_line": 1002, "end_line": 300000}])
        # The last window is whole and says nothing more is left after it.
        v = self.gw.view("read_file", {"path": self.p("n.txt"), "offset": 299999, "limit": 5})
        self.assertEqual(v["content"], "299999|299999\n300000|300000\n")
        self.assertFalse(v["truncated"])
        self.assertEqual(v["omitted_ranges"], [{"start_line": 1, "end_line": 299998}])

    # ---- binary files -------------------------------------------------------

    def test_read_binary_is_refused_and_exported_whole(self):
        self.sh("cp \"$(command -v sh)\" prog && chmod 0644 prog")
        err = self.gw.tool_error("read_file", {"path": self.p("prog")})
        self.assertIn("unsupported binary file; read_file accepts text, PNG, JPEG, static GIF, "
                      "and WebP", err)
        self.assertLess(len(err), 300, "never the bytes as escaped text")
        # The way to its bytes: present_artifact, then the host's export/read.
        res = self.gw.tool_ok("present_artifact", {"path": self.p("prog")})
        ex = json.loads(res["content"][0]["text"])
        got = b""
        while True:
            r = self.gw.ok("export/read", {"token": ex["execution_export"], "offset": len(got)})
            got += base64.b64decode(r["data"])
            if r["eof"]:
                break
        self.gw.ok("export/close", {"token": ex["execution_export"]})
        digest = self.sh("sha256sum prog").split()[0]
        self.assertEqual((len(got), hashlib.sha256(got).hexdigest()), (ex["size"], digest))

    def test_read_text_stays_text(self):
        self.sh("printf 'caf\\303\\251 ok\\nline2\\n' > t.txt")
        v = self.gw.view("read_file", {"path": self.p("t.txt")})
        self.assertEqual(v["content"], "1|café ok\n|line2\n")
        self.assertEqual(v.structured["text"], "café ok\nline2\n")

    # ---- a private, writable /tmp ------------------------------------------

    def test_tmp_is_private_and_writable(self):
        # The ssh harness keeps its environments out of /tmp so that this
        # runs there too (an ssh environment under /tmp keeps the host's
        # /tmp, docs/tools.md).
        name = unique("sg-e2e-tmp")
        for mode in ("standard", "unconfined"):
            with self.subTest(mode=mode):
                f = "/tmp/%s-%s" % (name, mode)
                self.gw.sh_ok("echo kept > %s" % f, mode)
                # The same /tmp for the environment's next command.
                self.assertEqual(self.gw.sh_ok("cat %s" % f, mode), "kept\n")
                # Never the host's (the ssh and Daytona-fake hosts are this one).
                self.assertFalse(os.path.exists(f), f)
        v = self.gw.sh("echo no > /tmp/%s-ro" % name, "read_only")
        self.assertNotEqual(v["exit_code"], 0, "read_only writes nothing, even in /tmp")
