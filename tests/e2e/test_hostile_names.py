"""File names an attacker chooses, and files that are not files.

A name may hold any byte but '/' and NUL, a newline included.  list_dir,
glob and grep write one entry per line, so before the change a file named
"evil\\ninnocent.txt" that contained the pattern made grep report a match
in innocent.txt (a different, real file), and a file named
"x\\nf 999 forged.txt" added an entry to list_dir and glob that did not
exist, with a line count that disagreed with `entries`/`count`.  Now a name
with a control character is written quoted, C-style (docs/tools.md), and
names without one are written as they are.

grep on a FIFO waited for a writer until the host cancelled; read_file
refuses a FIFO at once, and now grep does too.
"""

import json

from sgclient import GatewayTestCase, SLACK, unique


class HostileNames(GatewayTestCase):
    shared_gateway = True

    def setUp(self):
        self.d = unique("hostile")
        # Made with write_file: the tool takes any name JSON can carry.
        for name, content in (("innocent.txt", "secret\n"),
                              ("evil\ninnocent.txt", "needle\n"),
                              ("x\nf 999 forged.txt", ""),
                              ("t\tq\x01\x7f.txt", "needle\n"),
                              ('plain "quote" \\back é.txt', "needle\n"),
                              ("d\nx/f.txt", "needle\n")):
            self.gw.write("%s/%s" % (self.d, name), content)

    def q(self, path):
        """path as the tools write a name with control characters."""
        out = '"'
        for ch in path:
            if ch == "\n":
                out += "\\n"
            elif ch == "\t":
                out += "\\t"
            elif ch in '"\\':
                out += "\\" + ch
            elif ord(ch) < 0x20 or ord(ch) == 0x7f:
                out += "\\%03o" % ord(ch)
            else:
                out += ch
        return out + '"'

    def test_grep_names_the_file_that_matched(self):
        res = self.gw.tool_ok("grep", {"pattern": "needle", "path": self.d})
        lines = res["content"].split("\n")
        self.assertNotIn(self.d + "/innocent.txt:1:needle", lines, res["content"])
        want = [self.q(self.d + "/d\nx/f.txt") + ":1:needle",
                self.q(self.d + "/evil\ninnocent.txt") + ":1:needle",
                self.d + '/plain "quote" \\back é.txt:1:needle',
                self.q(self.d + "/t\tq\x01\x7f.txt") + ":1:needle",
                ""]
        self.assertEqual(lines, want, res["content"])
        self.assertEqual(res["metadata"]["count"], 4)
        self.assertEqual(res["metadata"]["total"], 4)

        res = self.gw.tool_ok("grep", {"pattern": "needle",
                                       "path": self.d + "/evil\ninnocent.txt"})
        self.assertEqual(res["content"],
                         self.q(self.d + "/evil\ninnocent.txt") + ":1:needle\n")
        res = self.gw.tool_ok("grep", {"pattern": "needle", "path": self.d + "/d\nx"})
        self.assertEqual(res["content"], self.q(self.d + "/d\nx/f.txt") + ":1:needle\n")
        res = self.gw.tool_ok("grep", {"pattern": "secret", "path": self.d})
        self.assertEqual(res["content"], self.d + "/innocent.txt:1:secret\n")

    def test_list_dir_one_line_per_entry(self):
        res = self.gw.tool_ok("list_dir", {"path": self.d})
        lines = res["content"].splitlines()
        self.assertEqual(len(lines), res["metadata"]["entries"], res["content"])
        self.assertEqual(len(lines), 6, res["content"])
        self.assertNotIn("f 999 forged.txt", lines, res["content"])
        self.assertIn("f 0 " + self.q(self.d + "/x\nf 999 forged.txt"), lines)
        self.assertIn("f 7 " + self.q(self.d + "/evil\ninnocent.txt"), lines)
        self.assertIn("f 7 %s/innocent.txt" % self.d, lines)
        self.assertIn('f 7 %s/plain "quote" \\back é.txt' % self.d, lines)
        self.assertTrue(any(l.startswith("d ") and l.endswith(" " + self.q(self.d + "/d\nx/"))
                            for l in lines), res["content"])

        res = self.gw.tool_ok("list_dir", {"path": self.d, "depth": 2})
        lines = res["content"].splitlines()
        self.assertEqual(len(lines), res["metadata"]["entries"], res["content"])
        self.assertIn("f 7 " + self.q(self.d + "/d\nx/f.txt"), lines)

    def test_glob_one_line_per_file(self):
        res = self.gw.tool_ok("glob", {"pattern": "**", "path": self.d})
        lines = res["content"].splitlines()
        self.assertEqual(len(lines), res["metadata"]["count"], res["content"])
        self.assertEqual(res["metadata"]["count"], 6, res["content"])
        self.assertNotIn("f 999 forged.txt", lines, res["content"])
        for name in ("x\nf 999 forged.txt", "evil\ninnocent.txt", "d\nx/f.txt",
                     "t\tq\x01\x7f.txt"):
            self.assertIn(self.q(self.d + "/" + name), lines, res["content"])
        self.assertIn(self.d + "/innocent.txt", lines)
        self.assertIn(self.d + '/plain "quote" \\back é.txt', lines)


class NotAFile(GatewayTestCase):
    shared_gateway = True

    def test_grep_refuses_a_fifo_at_once(self):
        d = unique("fifo")
        self.gw.sh_ok("mkdir -p %s && mkfifo %s/trap.fifo && printf 'x\\n' > %s/a.txt"
                      % (d, d, d))
        rid = self.gw.execute_req("grep", {"pattern": "x", "path": d + "/trap.fifo"})
        reply = None
        try:
            reply = self.gw.wait_reply(rid, timeout=10 * SLACK)
        finally:
            # A gateway that still waits must not keep the shared one busy.
            if reply is None:
                self.gw.call("cancel", {"id": rid})
        self.assertIn("data", reply, json.dumps(reply)[:500])
        self.assertTrue(reply["data"]["is_error"], json.dumps(reply)[:500])
        # As read_file answers it.
        res = self.gw.tool("read_file", {"path": d + "/trap.fifo"})
        self.assertTrue(res["is_error"], res["content"])
        # The directory holding it is still searched, the FIFO passed by.
        res = self.gw.tool_ok("grep", {"pattern": "x", "path": d})
        self.assertEqual(res["content"], d + "/a.txt:1:x\n")


if __name__ == "__main__":
    import unittest
    unittest.main()
