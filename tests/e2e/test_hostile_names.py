"""File names an attacker chooses, and files that are not files.

A name may hold any byte but '/' and NUL, a newline included.  When list,
glob and grep wrote one entry per line, a file named "evil\ninnocent.txt"
that contained the pattern made grep report a match in innocent.txt (a
different, real file), and a file named "x\nf 999 forged.txt" added an
entry that did not exist.  The host's tools answer in JSON (list_files'
entries, glob's files, grep's matches), where a name is one string whatever
it holds: each name comes back exactly as it is, once.

grep on a FIFO waited for a writer until the host cancelled; read_file
refuses a FIFO at once, and grep does too.
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

    NAMES = ["d\nx", "evil\ninnocent.txt", "innocent.txt", 'plain "quote" \\back é.txt',
             "t\tq\x01\x7f.txt", "x\nf 999 forged.txt"]

    def test_grep_names_the_file_that_matched(self):
        v = self.gw.view("grep", {"pattern": "needle", "path": self.d})
        files = [m["file"] for m in v["matches"]]
        self.assertNotIn(self.d + "/innocent.txt", files, v)
        self.assertEqual(sorted(files), sorted(self.d + "/" + n for n in (
            "d\nx/f.txt", "evil\ninnocent.txt", 'plain "quote" \\back é.txt',
            "t\tq\x01\x7f.txt")), v)
        self.assertEqual({m["line"] for m in v["matches"]}, {1})
        self.assertEqual(v["total"], 4)
        v = self.gw.view("grep", {"pattern": "secret", "path": self.d})
        self.assertEqual([m["file"] for m in v["matches"]], [self.d + "/innocent.txt"])

    def test_list_files_one_entry_per_name(self):
        v = self.gw.view("list_files", {"path": self.d})
        self.assertEqual([e["name"] for e in v["entries"]], self.NAMES, v)
        self.assertEqual((v["total"], v["returned_count"]), (6, 6))
        byname = {e["name"]: e for e in v["entries"]}
        self.assertEqual(byname["x\nf 999 forged.txt"],
                         {"name": "x\nf 999 forged.txt", "path": self.d + "/x\nf 999 forged.txt",
                          "is_dir": False, "size": 0})
        self.assertTrue(byname["d\nx"]["is_dir"])
        inner = self.gw.view("list_files", {"path": self.d + "/d\nx"})
        self.assertEqual([e["path"] for e in inner["entries"]], [self.d + "/d\nx/f.txt"])
        r = self.gw.view("read_file", {"path": self.d + "/evil\ninnocent.txt"})
        self.assertEqual((r["path"], r["content"]), (self.d + "/evil\ninnocent.txt", "1|needle\n"))

    def test_glob_one_name_per_file(self):
        v = self.gw.view("glob", {"pattern": "**", "path": self.d})
        want = [self.d + "/" + n for n in ("d\nx/f.txt", "evil\ninnocent.txt", "innocent.txt",
                                           'plain "quote" \\back é.txt', "t\tq\x01\x7f.txt",
                                           "x\nf 999 forged.txt")]
        self.assertEqual(sorted(v["files"]), sorted(want), v)


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
                self.gw.cancel(rid)
        self.assertIn("error", reply, json.dumps(reply)[:500])
        # As read_file answers it, with the host's sentence.
        err = self.gw.tool_error("read_file", {"path": d + "/trap.fifo"})
        self.assertIn("read_file requires a regular file", err)
        # The directory holding it is still searched, the FIFO passed by.
        v = self.gw.view("grep", {"pattern": "x", "path": d})
        self.assertEqual([m["file"] for m in v["matches"]], [d + "/a.txt"])


if __name__ == "__main__":
    import unittest
    unittest.main()
