"""The workspace tool catalogue (docs/protocol.md section 7)."""

import base64
import hashlib
import unittest

from sgclient import ROOT, GatewayTestCase, b64, unique


class Tools(GatewayTestCase):
    shared_gateway = True

    def setUp(self):
        self.d = unique("tools")

    def p(self, name):
        return "%s/%s" % (self.d, name)

    def stat_missing(self, path):
        return self.gw.tool("stat_path", {"path": path})["is_error"]

    def read_text(self, path):
        return self.gw.tool_ok("read_file", {"path": path})["content"]

    # ---- read_file / write_file ------------------------------------------

    def test_write_then_read(self):
        gw = self.gw
        text = "l1\nl2 héllo €\nl3\n"
        res = gw.tool_ok("write_file", {"path": self.p("a/b/c/f.txt"), "content": text})
        self.assertEqual(res["metadata"]["bytes_written"], len(text.encode("utf-8")))
        res = gw.tool_ok("read_file", {"path": self.p("a/b/c/f.txt")})
        self.assertEqual(res["content"], text)
        md = res["metadata"]
        self.assertEqual(md["size"], len(text.encode("utf-8")))
        self.assertEqual(md["total_lines"], 3)
        self.assertIs(md["truncated"], False)
        # An absolute path under root names the same file.
        res = gw.tool_ok("read_file", {"path": ROOT + "/" + self.p("a/b/c/f.txt")})
        self.assertEqual(res["content"], text)
        # Overwrite replaces the whole file.
        gw.write(self.p("a/b/c/f.txt"), "short")
        self.assertEqual(self.read_text(self.p("a/b/c/f.txt")), "short")

    def test_read_offset_and_limit(self):
        gw = self.gw
        gw.write(self.p("lines.txt"), "".join("line%d\n" % i for i in range(1, 11)))
        res = gw.tool_ok("read_file", {"path": self.p("lines.txt"), "offset": 3, "limit": 2})
        self.assertIn("line3", res["content"])
        self.assertIn("line4", res["content"])
        for absent in ("line2\n", "line5"):
            self.assertNotIn(absent, res["content"])
        self.assertEqual(res["metadata"]["total_lines"], 10)

    def test_read_missing_is_tool_error(self):
        res = self.gw.tool("read_file", {"path": self.p("nope.txt")})
        self.assertIs(res["is_error"], True)

    def test_read_text_with_nul_bytes(self):
        # A NUL byte makes a file binary (as for git and grep): read_file
        # describes it instead of returning it as text; base64 keeps it.
        gw = self.gw
        gw.sh_ok("printf 'a\\000b\\n' > nul.txt")
        res = gw.tool_ok("read_file", {"path": "nul.txt"})
        self.assertTrue(res["content"].startswith("[binary file: nul.txt is 4 bytes"))
        self.assertIs(res["metadata"]["binary"], True)
        res = gw.tool_ok("read_file", {"path": "nul.txt", "encoding": "base64"})
        self.assertEqual(base64.b64decode(res["content"]), b"a\x00b\n")

    def test_base64_round_trip(self):
        gw = self.gw
        raw = bytes(range(256)) + b"\xff\xfe\x00"
        res = gw.tool_ok("write_file", {"path": self.p("bin.dat"), "content": b64(raw),
                                        "encoding": "base64"})
        self.assertEqual(res["metadata"]["bytes_written"], len(raw))
        res = gw.tool_ok("read_file", {"path": self.p("bin.dat"), "encoding": "base64"})
        self.assertEqual(base64.b64decode(res["content"]), raw)
        self.assertEqual(res["metadata"]["size"], len(raw))

    def test_write_mode(self):
        gw = self.gw
        gw.tool_ok("write_file", {"path": self.p("run.sh"), "content": "#!/bin/sh\necho ran\n",
                                  "mode": "0755"})
        out = gw.sh_ok("stat -c %a " + self.p("run.sh"))
        self.assertEqual(out.strip(), "755")

    # ---- edit_file --------------------------------------------------------

    def test_edit_file(self):
        gw = self.gw
        f = self.p("e.txt")
        gw.write(f, "alpha beta gamma beta\n")
        res = gw.tool_ok("edit_file", {"path": f, "old_string": "alpha", "new_string": "ALPHA"})
        self.assertEqual(res["metadata"]["replacements"], 1)
        self.assertEqual(self.read_text(f), "ALPHA beta gamma beta\n")
        # Two occurrences without replace_all: refused, file unchanged.
        res = gw.tool("edit_file", {"path": f, "old_string": "beta", "new_string": "B"})
        self.assertIs(res["is_error"], True)
        self.assertEqual(self.read_text(f), "ALPHA beta gamma beta\n")
        # No occurrence: refused.
        res = gw.tool("edit_file", {"path": f, "old_string": "delta", "new_string": "D"})
        self.assertIs(res["is_error"], True)
        res = gw.tool_ok("edit_file", {"path": f, "old_string": "beta", "new_string": "B",
                                       "replace_all": True})
        self.assertEqual(res["metadata"]["replacements"], 2)
        self.assertEqual(self.read_text(f), "ALPHA B gamma B\n")
        res = gw.tool("edit_file", {"path": self.p("missing.txt"), "old_string": "a",
                                    "new_string": "b"})
        self.assertIs(res["is_error"], True)

    # ---- list_dir / glob / grep -----------------------------------------

    def entries(self, content):
        out = {}
        for line in content.splitlines():
            if not line.strip():
                continue
            kind, size, name = line.split(None, 2)
            out[name.rstrip("/").rsplit("/", 1)[-1]] = (kind, size, name)
        return out

    def test_list_dir(self):
        gw = self.gw
        gw.write(self.p("f1.txt"), "12345")
        gw.write(self.p("sub/inner.txt"), "x")
        gw.write(self.p(".hidden"), "h")
        gw.sh_ok("ln -s f1.txt lnk", cwd=self.d)
        res = gw.tool_ok("list_dir", {"path": self.d})
        e = self.entries(res["content"])
        self.assertEqual(set(e), {"f1.txt", "sub", "lnk"}, res["content"])
        self.assertEqual(res["metadata"]["entries"], 3)
        self.assertIs(res["metadata"]["truncated"], False)
        self.assertEqual(e["f1.txt"][0], "f")
        self.assertEqual(e["f1.txt"][1], "5")
        self.assertEqual(e["sub"][0], "d")
        self.assertEqual(e["lnk"][0], "l")
        res = gw.tool_ok("list_dir", {"path": self.d, "include_hidden": True})
        self.assertIn(".hidden", self.entries(res["content"]))
        res = gw.tool_ok("list_dir", {"path": self.d, "depth": 2})
        self.assertIn("inner.txt", self.entries(res["content"]))
        res = gw.tool("list_dir", {"path": self.p("no-such-dir")})
        self.assertIs(res["is_error"], True)

    def test_glob_newest_first_relative_paths(self):
        gw = self.gw
        for name in ("a.py", "b.py", "c.txt", "sub/d.py"):
            gw.write(self.p(name), name)
        gw.sh_ok("touch -d @1000000000 a.py && touch -d @1500000000 b.py && "
                 "touch -d @1700000000 sub/d.py", cwd=self.d)
        res = gw.tool_ok("glob", {"pattern": "**/*.py", "path": self.d})
        lines = [l for l in res["content"].splitlines() if l.strip()]
        self.assertEqual(lines, [self.p("sub/d.py"), self.p("b.py"), self.p("a.py")],
                         "newest first, relative to root")
        self.assertEqual(res["metadata"]["count"], 3)
        self.assertIs(res["metadata"]["truncated"], False)
        res = gw.tool_ok("glob", {"pattern": "*.txt", "path": self.d})
        self.assertEqual([l for l in res["content"].splitlines() if l], [self.p("c.txt")])
        self.assertEqual(res["metadata"]["count"], 1)

    def test_grep(self):
        gw = self.gw
        gw.write(self.p("one.txt"), "nothing\nthe Needle42 here\n")
        gw.write(self.p("two.md"), "needle7\nneedle8\n")
        res = gw.tool_ok("grep", {"pattern": "needle[0-9]+", "path": self.d})
        hits = sorted(res["content"].splitlines())
        self.assertEqual(hits, [self.p("two.md") + ":1:needle7",
                                self.p("two.md") + ":2:needle8"])
        res = gw.tool_ok("grep", {"pattern": "needle[0-9]+", "path": self.d,
                                  "ignore_case": True})
        self.assertIn(self.p("one.txt") + ":2:the Needle42 here", res["content"].splitlines())
        self.assertEqual(len(res["content"].splitlines()), 3)
        res = gw.tool_ok("grep", {"pattern": "needle", "path": self.d, "glob": "*.txt",
                                  "ignore_case": True})
        self.assertEqual(res["content"].splitlines(), [self.p("one.txt") + ":2:the Needle42 here"])
        res = gw.tool_ok("grep", {"pattern": "needle", "path": self.d, "max_results": 1})
        # One match, then the line that says the rest was left out.
        lines = res["content"].splitlines()
        self.assertEqual(lines[0], self.p("two.md") + ":1:needle7")
        self.assertTrue(lines[1].startswith("[truncated: 1 of 2 matches shown"), lines)

    # ---- git ------------------------------------------------------------

    def test_git(self):
        gw = self.gw
        if gw.sh("command -v git")["metadata"].get("exit_code") != 0:
            self.skipTest("git is not installed in the environment")
        gw.tool_ok("make_dir", {"path": self.p("repo")})
        repo = self.p("repo")
        res = gw.tool_ok("git", {"args": ["init", "-q"], "cwd": repo})
        self.assertEqual(res["metadata"]["exit_code"], 0)
        gw.write(self.p("repo/file.txt"), "v1\n")
        gw.tool_ok("git", {"args": ["add", "file.txt"], "cwd": repo})
        gw.tool_ok("git", {"args": ["-c", "user.name=e2e", "-c", "user.email=e2e@example.invalid",
                                    "commit", "-q", "-m", "first"], "cwd": repo})
        res = gw.tool_ok("git", {"args": ["log", "--format=%s"], "cwd": repo})
        self.assertEqual(res["content"].strip(), "first")
        # argv only: a `;` is an argument, never a command separator.
        gw.tool("git", {"args": ["status", ";", "touch", "pwned"], "cwd": repo})
        self.assertTrue(self.stat_missing(self.p("repo/pwned")), "git went through a shell")
        res = gw.tool("git", {"args": ["checkout", "no-such-branch-e2e"], "cwd": repo})
        self.assertIs(res["is_error"], True)
        self.assertNotEqual(res["metadata"]["exit_code"], 0)

    # ---- delete / move / make_dir / stat ----------------------------------

    def test_stat_path(self):
        gw = self.gw
        gw.write(self.p("s.txt"), "12345678")
        res = gw.tool_ok("stat_path", {"path": self.p("s.txt")})
        self.assertEqual(res["metadata"]["size"], 8)
        res = gw.tool("stat_path", {"path": self.p("missing")})
        self.assertIs(res["is_error"], True)

    def test_make_dir_creates_parents(self):
        gw = self.gw
        gw.tool_ok("make_dir", {"path": self.p("x/y/z")})
        gw.sh_ok("test -d " + self.p("x/y/z"))

    def test_delete_path(self):
        gw = self.gw
        gw.write(self.p("del.txt"), "x")
        gw.tool_ok("delete_path", {"path": self.p("del.txt")})
        self.assertTrue(self.stat_missing(self.p("del.txt")))
        gw.write(self.p("tree/a/b.txt"), "x")
        r = gw.execute("delete_path", {"path": self.p("tree")})
        self.assertTrue("error" in r or r["data"]["is_error"],
                        "a non-empty directory needs recursive")
        self.assertFalse(self.stat_missing(self.p("tree/a/b.txt")))
        gw.tool_ok("delete_path", {"path": self.p("tree"), "recursive": True})
        self.assertTrue(self.stat_missing(self.p("tree")))
        res = gw.tool("delete_path", {"path": self.p("never-existed")})
        self.assertIs(res["is_error"], True)

    def test_delete_root_is_refused(self):
        gw = self.gw
        gw.write(self.p("canary.txt"), "x")
        for path in (".", ROOT, ROOT + "/", self.d + "/.."):
            for mode in (None, "full"):
                err = gw.tool_error("delete_path", {"path": path, "recursive": True}, mode)
                self.assertCode(err, "permission_denied", "delete %r" % path)
        self.assertFalse(self.stat_missing(self.p("canary.txt")))

    def test_move_path(self):
        gw = self.gw
        gw.write(self.p("src.txt"), "source")
        gw.write(self.p("dst.txt"), "destination")
        r = gw.execute("move_path", {"path": self.p("src.txt"), "destination": self.p("dst.txt")})
        self.assertTrue("error" in r or r["data"]["is_error"], "must not overwrite")
        self.assertEqual(self.read_text(self.p("dst.txt")), "destination")
        self.assertEqual(self.read_text(self.p("src.txt")), "source")
        gw.tool_ok("move_path", {"path": self.p("src.txt"), "destination": self.p("dst.txt"),
                                 "overwrite": True})
        self.assertEqual(self.read_text(self.p("dst.txt")), "source")
        self.assertTrue(self.stat_missing(self.p("src.txt")))
        gw.tool_ok("move_path", {"path": self.p("dst.txt"), "destination": self.p("new.txt")})
        self.assertEqual(self.read_text(self.p("new.txt")), "source")

    # ---- present_artifact -------------------------------------------------

    def test_present_artifact(self):
        gw = self.gw
        body = "artifact body\n" * 10
        gw.write(self.p("report.txt"), body)
        res = gw.tool_ok("present_artifact", {"path": self.p("report.txt")})
        ex = res["metadata"]["export"]
        self.assertEqual(ex["size"], len(body))
        self.assertEqual(ex["sha256"], hashlib.sha256(body.encode()).hexdigest())
        self.assertEqual(ex["name"], "report.txt")
        r = gw.ok("export/read", {"token": ex["token"], "offset": 0})
        self.assertEqual(base64.b64decode(r["data"]), body.encode())
        self.assertIs(r["eof"], True)
        self.assertEqual(gw.ok("export/close", {"token": ex["token"]}), {})

    # ---- requests that cannot run at all -------------------------------------

    def test_bad_execute_requests(self):
        gw = self.gw
        self.assertCode(gw.tool_error("no_such_tool", {}), "invalid_argument", "unknown tool")
        for raw in ("not json", "[1,2]", "\"str\"", "42", "null", ""):
            r = gw.execute("stat_path", None, raw_arguments=raw)
            self.assertReplyCode(r, "invalid_argument", "arguments %r" % raw)
        # arguments as an object rather than a string holding one.
        r = gw.execute("stat_path", None, raw_arguments={"path": "."})
        self.assertReplyCode(r, "invalid_argument", "arguments as an object")
        self.assertCode(gw.tool_error("read_file", {}), "invalid_argument", "missing path")
        self.assertCode(gw.tool_error("read_file", {"path": 7}), "invalid_argument",
                        "path not a string")

    # ---- permission modes ---------------------------------------------------

    def test_read_only_refuses_writing_tools(self):
        gw = self.gw
        gw.write(self.p("keep.txt"), "original")
        gw.tool_ok("make_dir", {"path": self.p("dir")})
        for tool, args in [
                ("write_file", {"path": self.p("keep.txt"), "content": "changed"}),
                ("write_file", {"path": self.p("new.txt"), "content": "new"}),
                ("edit_file", {"path": self.p("keep.txt"), "old_string": "original",
                               "new_string": "changed"}),
                ("delete_path", {"path": self.p("keep.txt")}),
                ("delete_path", {"path": self.p("dir"), "recursive": True}),
                ("move_path", {"path": self.p("keep.txt"), "destination": self.p("moved.txt")}),
                ("make_dir", {"path": self.p("made")})]:
            err = gw.tool_error(tool, args, "read_only")
            self.assertCode(err, "permission_denied", tool)
        self.assertEqual(self.read_text(self.p("keep.txt")), "original")
        for gone in ("new.txt", "moved.txt", "made"):
            self.assertTrue(self.stat_missing(self.p(gone)), gone)
        self.assertFalse(self.stat_missing(self.p("dir")))
        # Reading tools work in read_only.
        self.assertEqual(gw.tool_ok("read_file", {"path": self.p("keep.txt")}, "read_only")
                         ["content"], "original")
        gw.tool_ok("list_dir", {"path": self.d}, "read_only")
        gw.tool_ok("stat_path", {"path": self.p("keep.txt")}, "read_only")
        gw.tool_ok("glob", {"pattern": "*.txt", "path": self.d}, "read_only")
        gw.tool_ok("grep", {"pattern": "orig", "path": self.d}, "read_only")

    def test_explicit_modes_write(self):
        gw = self.gw
        for mode in ("standard", "full"):
            gw.tool_ok("write_file", {"path": self.p(mode + ".txt"), "content": mode}, mode)
            self.assertEqual(self.read_text(self.p(mode + ".txt")), mode)


if __name__ == "__main__":
    unittest.main()
