"""Tool results an agent can trust (issue 11): nothing silently missing,
nothing unreadable.

Each test here failed on the code before the change: long command output
lost its end, a binary file came back as escaped noise, /tmp was not
writable in standard mode.  The glob, grep and git tests that lived here
are in test_tools.py, on the host's arguments and views.
"""

import base64
import hashlib
import os
import re

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

    def test_list_dir_truncation_said_in_content(self):
        self.sh("mkdir -p many/sub && echo x > many/sub/deep.txt && cd many && "
                "seq -f 'f%05g' 1 10005 | xargs touch")
        res = self.gw.tool_ok("list_dir", {"path": self.p("many"), "depth": 2})
        md = res["metadata"]
        self.assertIs(md["truncated"], True)
        self.assertEqual(md["entries"], 10000)
        lines = res["content"].rstrip("\n").splitlines()
        self.assertEqual(len(lines), 10001)
        self.assertEqual(lines[-1], "[truncated: the first 10000 entries shown; list a "
                         "subdirectory, or a smaller depth, for the rest]")
        # Whole listings say nothing.
        res = self.gw.tool_ok("list_dir", {"path": self.p("many/sub")})
        self.assertNotIn("[truncated", res["content"])

    # ---- truncation said in the content ------------------------------------

    def check_head_tail(self, content, full):
        m = re.search(r"(?:^|\n)\[\.\.\. output truncated: (\d+) bytes \((\d+) lines\) "
                      r"omitted here; the first (\d+) and the last (\d+) bytes of (\d+) are "
                      r"shown \.\.\.\]\n", content)
        self.assertIsNotNone(m, content[-300:])
        head = content[:m.start() + (1 if content[m.start()] == "\n" else 0)]
        if not full.startswith(head):
            head = head[:-1]  # the newline the marker added
        tail = content[m.end():]
        self.assertTrue(full.startswith(head))
        self.assertTrue(full.endswith(tail))
        gone = full[len(head):len(full) - len(tail)]
        self.assertEqual(int(m.group(1)), len(gone))
        self.assertEqual(int(m.group(2)), gone.count("\n"))
        self.assertEqual(int(m.group(5)), len(full))
        return tail

    def test_command_output_keeps_head_and_tail(self):
        res = self.gw.sh("seq 1 300000; echo 'error: the last line' >&2; exit 2")
        full = "".join("%d\n" % i for i in range(1, 300001)) + "error: the last line\n"
        self.assertIs(res["is_error"], True)
        md = res["metadata"]
        self.assertIs(md["truncated"], True)
        self.assertEqual(md["output_bytes"], len(full))
        self.assertTrue(res["content"].startswith("1\n2\n3\n"))
        tail = self.check_head_tail(res["content"], full)
        self.assertTrue(tail.endswith("300000\nerror: the last line\n"))

    def test_read_file_says_next_offset(self):
        self.sh("seq 1 300000 > n.txt")
        res = self.gw.tool_ok("read_file", {"path": self.p("n.txt")})
        md = res["metadata"]
        self.assertIs(md["truncated"], True)
        nxt = md["next_offset"]
        last = res["content"].rstrip("\n").splitlines()[-1]
        self.assertEqual(last, "[truncated: lines 1-%d shown; read on with offset=%d]"
                         % (nxt - 1, nxt))
        body = res["content"].splitlines()[:-1]
        # Whole lines up to nxt - 1, or the head of line nxt cut by the cap.
        self.assertTrue(body[-1] == str(nxt - 1) or str(nxt).startswith(body[-1]), body[-1])
        res2 = self.gw.tool_ok("read_file", {"path": self.p("n.txt"), "offset": nxt,
                                             "limit": 2})
        self.assertEqual(res2["content"].splitlines()[:2], [str(nxt), str(nxt + 1)])
        self.assertEqual(res2["content"].splitlines()[2],
                         "[truncated: lines %d-%d shown; read on with offset=%d]"
                         % (nxt, nxt + 1, nxt + 2))
        # The last window is whole and says nothing.
        res3 = self.gw.tool_ok("read_file", {"path": self.p("n.txt"), "offset": 299999})
        self.assertEqual(res3["content"], "299999\n300000\n")
        self.assertIs(res3["metadata"]["truncated"], False)

    # ---- binary files -------------------------------------------------------

    def test_read_binary_is_described(self):
        self.sh("cp \"$(command -v sh)\" prog && chmod 0644 prog")
        size = int(self.sh("wc -c < prog").strip())
        res = self.gw.tool_ok("read_file", {"path": self.p("prog")})
        md = res["metadata"]
        self.assertIs(md["binary"], True)
        self.assertIn("ELF", md["type"])
        self.assertEqual(md["size"], size)
        self.assertLess(len(res["content"]), 600)
        self.assertIn("%d bytes of ELF" % size, res["content"])
        self.assertIn('"encoding": "base64"', res["content"])
        # The way it names gets the exact bytes.
        b = self.gw.tool_ok("read_file", {"path": self.p("prog"), "encoding": "base64"})
        digest = self.sh("sha256sum prog").split()[0]
        self.assertEqual(hashlib.sha256(base64.b64decode(b["content"])).hexdigest(), digest)

    def test_read_text_stays_text(self):
        self.sh("printf 'caf\\303\\251 ok\\nline2\\n' > t.txt")
        res = self.gw.tool_ok("read_file", {"path": self.p("t.txt")})
        self.assertEqual(res["content"], "café ok\nline2\n")
        self.assertNotIn("binary", res["metadata"])

    # ---- a private, writable /tmp ------------------------------------------

    def test_tmp_is_private_and_writable(self):
        # The ssh harness keeps its environments out of /tmp so that this
        # runs there too (an ssh environment under /tmp keeps the host's
        # /tmp, docs/tools.md).
        name = unique("sg-e2e-tmp")
        for mode in ("standard", "full"):
            with self.subTest(mode=mode):
                f = "/tmp/%s-%s" % (name, mode)
                self.gw.sh_ok("echo kept > %s" % f, mode)
                # The same /tmp for the environment's next command.
                self.assertEqual(self.gw.sh_ok("cat %s" % f, mode), "kept\n")
                # Never the host's (the ssh and Daytona-fake hosts are this one).
                self.assertFalse(os.path.exists(f), f)
        res = self.gw.sh("echo no > /tmp/%s-ro" % name, "read_only")
        self.assertIs(res["is_error"], True)
