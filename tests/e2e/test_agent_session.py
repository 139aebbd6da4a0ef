"""A scripted agent session on a generated repository of 3,000 files.

Every tool of the host's catalogue is used the way an agent uses it (with
the host's argument names, following its pages), and each answer is
compared with the same operation done directly in the environment through
bash (find, rg or grep, cat, sed, stat, ls, git, sha256sum), so the
catalogue is checked against the tools it stands in for, not against
itself.  The repository is the workspace root itself, as an agent's is.
"""

import base64
import hashlib
import json

from sgclient import GatewayTestCase

GENERATE = r"""
awk 'BEGIN {
  for (d = 0; d < 30; d++) {
    dir = sprintf("mod%%02d/sub%%d", d, d %% 3)
    system("mkdir -p " dir)
    for (i = 0; i < 100; i++) {
      ext = (i %% 3 == 0) ? "c" : (i %% 3 == 1) ? "h" : "txt"
      f = sprintf("%%s/f%%03d.%%s", dir, i, ext)
      for (l = 1; l <= 20; l++) {
        if ((d * 100 + i * 20 + l) %% 37 == 0) print "// TODO fix " d "-" i "-" l > f
        else print "int v" l " = " (d * i + l) ";" > f
      }
      close(f)
    }
  }
}' && printf 'bin\000ary' > mod00/blob.bin && git init -q . && git add -A &&
git -c user.email=a@x -c user.name=agent commit -qm initial
"""


def digest(names):
    """sha256 of names one a line, as `sha256sum` prints it for them."""
    return hashlib.sha256("".join(n + "\n" for n in names).encode()).hexdigest()


class AgentSession(GatewayTestCase):

    def setUp(self):
        self.gw = self.gateway()
        self.gw.sh_ok(GENERATE % {}, timeout_seconds=600)

    def sh(self, script):
        return self.gw.sh_ok(script)

    def lines(self, script):
        return [l for l in self.sh(script).splitlines() if l]

    def pages(self, tool, args, key, mode=None):
        """Every record of a paged tool (glob, grep), following page.next
        the way the tools' descriptions tell the model to; (records, the
        first page's view)."""
        gw, out, first, args = self.gw, [], None, dict(args)
        for _ in range(100):
            v = gw.view(tool, args, mode)
            first = first or v
            out += v[key]
            if not v["has_more"]:
                return out, first
            nxt = v["page"]["next"]
            args.update(offset=nxt["offset"], expected_revision=nxt["expected_revision"])
        self.fail("%s never reached its last page" % tool)

    def test_session(self):
        gw = self.gw

        # Explore: list_files against ls (hidden entries included; .git
        # may be left out, as the host's own listing may leave it).
        v = gw.view("list_files", {})
        self.assertEqual(sorted(e["name"] for e in v["entries"] if e["name"] != ".git"),
                         sorted(n for n in self.lines("ls -1A") if n != ".git"))
        self.assertEqual(v["returned_count"], len(v["entries"]))
        sizes = {e["path"]: e.get("size") for e in gw.view(
            "list_files", {"path": "mod07/sub1"})["entries"]}
        size = int(self.sh("stat -c %s mod07/sub1/f001.h"))
        self.assertEqual(sizes["mod07/sub1/f001.h"], size)

        # glob with braces against find, over every page.  (Long listings
        # are compared by count and digest: bash's output is capped.)
        found, first = self.pages("glob", {"pattern": "**/*.{c,h}"}, "files")
        find = ("find . -path ./.git -prune -o -type f \\( -name '*.c' -o -name '*.h' \\) -print"
                " | sed 's|^[.]/||' | LC_ALL=C sort")
        self.assertEqual(int(self.sh(find + " | wc -l")), 2010)
        self.assertEqual(first["total"], 2010)
        self.assertEqual(len(found), 2010)
        self.assertEqual(found, sorted(found), "glob is in path order")
        self.assertEqual(digest(found), self.sh(find + " | sha256sum").split()[0])

        # grep against the same search run directly: the files, the
        # number of matching lines, and the matches of its first page in
        # (path, line) order.
        pattern = "TODO fix [0-9]+-"
        direct = "grep -rnHE --exclude-dir=.git -e 'TODO fix [0-9]+-' . | sed 's|^[.]/||'"
        files, _ = self.pages("grep", {"pattern": pattern, "output_mode": "files_with_matches"},
                              "files")
        self.assertEqual(digest(sorted(files)), self.sh(
            direct + " | cut -d: -f1 | LC_ALL=C sort -u | sha256sum").split()[0])
        total = int(self.sh(direct + " | wc -l"))
        self.assertGreater(total, 100)
        counts, _ = self.pages("grep", {"pattern": pattern, "output_mode": "count"}, "counts")
        self.assertEqual(sum(c["count"] for c in counts), total)
        v = gw.view("grep", {"pattern": pattern})
        self.assertEqual(v["total"], total)
        got = [(m["file"], m["line"], m["content"]) for m in v["matches"]]
        self.assertGreater(len(got), 10)
        head = []
        for l in self.lines(direct + " | LC_ALL=C sort -t: -k1,1 -k2,2n | head -n %d" % len(got)):
            path, num, text = l.split(":", 2)
            head.append((path, int(num), text))
        self.assertEqual(got, head)

        # read_file against cat and sed, whole and windowed.
        for rel in ("mod03/sub0/f010.h", "mod29/sub2/f099.c", "mod15/sub0/f050.txt"):
            whole = gw.view("read_file", {"path": rel})
            self.assertEqual(whole.structured["text"], self.sh("cat %s" % rel))
            self.assertEqual(whole["total_lines"], 20)
            part = gw.view("read_file", {"path": rel, "offset": 5, "limit": 3})
            self.assertEqual(part.structured["text"], self.sh("sed -n 5,7p %s" % rel))
            self.assertEqual(part["range"], {"start_line": 5, "end_line": 7})
        # A binary file is refused; its bytes are bash's business.
        gw.tool_error("read_file", {"path": "mod00/blob.bin"})
        self.assertEqual(base64.b64decode(self.sh("base64 -w0 mod00/blob.bin")), b"bin\x00ary")

        # Edit, write, then check with cat, sha256sum and git.
        gw.view("edit_file", {"path": "mod05/sub2/f003.c", "old_text": "int v2 = 17;",
                              "new_text": "int v2 = 42; /* edited */"})
        self.assertIn("int v2 = 42; /* edited */", self.sh("cat mod05/sub2/f003.c"))
        text = "".join("line %d\n" % i for i in range(500))
        w = gw.write("notes/new.md", text)
        sha = hashlib.sha256(text.encode()).hexdigest()
        self.assertEqual(self.sh("sha256sum notes/new.md").split()[0], sha)
        self.assertEqual(w["new_file_sha"], "sha256:" + sha)
        status = gw.view("git", {"subcommand": "status", "args": []})
        self.assertEqual(status["exit_code"], 0, status)
        self.assertIn("mod05/sub2/f003.c", json.dumps(status["unstaged"]))
        self.assertIn("notes", json.dumps(status["untracked"]))
        self.assertEqual(status["staged"], [])
        diff = gw.view("git", {"subcommand": "diff", "args": ["--stat"]}, "read_only")
        self.assertIn("mod05/sub2/f003.c", diff["output"])
        files = gw.view("git", {"subcommand": "ls-files", "args": ["mod05"]})
        self.assertEqual(files["output"], self.sh("git ls-files mod05"))
        self.assertEqual(len(files["output"].splitlines()), 100)
        self.assertEqual(int(self.sh("git ls-files | wc -l")), 3001)

        # apply_patch: a file added, one moved with a change, one deleted,
        # against test -e and cat.
        patch = ("*** Begin Patch\n"
                 "*** Add File: build/out/readme.txt\n+built\n"
                 "*** Update File: notes/new.md\n*** Move to: build/out/n.md\n"
                 "@@\n line 0\n-line 1\n+line one\n line 2\n"
                 "*** Delete File: mod28/sub1/f000.c\n"
                 "*** End Patch\n")
        res = gw.tool_ok("apply_patch", {"patchText": patch})
        self.assertTrue(res["content"][0]["text"].startswith("Success."), res)
        self.assertEqual(self.sh("test -f build/out/n.md && test ! -e notes/new.md && "
                                 "test ! -e mod28/sub1/f000.c && cat build/out/readme.txt"),
                         "built\n")
        text = text.replace("line 1\n", "line one\n", 1)
        self.assertEqual(self.sh("cat build/out/n.md"), text)
        self.sh("rm -r mod29")
        self.assertEqual(self.sh("find . -name '*.c' -not -path './.git/*' | wc -l").strip(),
                         "985")

        # A long build log: the output is capped, the exit code kept, and
        # the last error survives the cap.
        v = gw.sh("find . -name '*.c' -not -path './.git/*' -exec cat {} +; seq 1 200000; "
                  "echo 'ld: undefined reference to main' >&2; exit 1", timeout_seconds=300)
        self.assertEqual(v["exit_code"], 1)
        self.assertIs(v["truncated"], True)
        self.assertLessEqual(len(v["output"].encode()), 30 * 1024 + 1024)
        self.assertIn("ld: undefined reference to main",
                      v["output"] + v.get("stderr_tail", ""))

        # present_artifact: the export's bytes are the file's.
        art = gw.view("present_artifact", {"path": "build/out/n.md"})
        self.assertEqual((art["name"], art["size"]), ("n.md", len(text)))
        got, off = b"", 0
        while True:
            chunk = gw.ok("export/read", {"token": art["execution_export"], "offset": off})
            data = base64.b64decode(chunk["data"])
            got, off = got + data, off + len(data)
            if chunk["eof"]:
                break
        self.assertEqual(got, text.encode())
        gw.ok("export/close", {"token": art["execution_export"]})
        print(json.dumps({"files": 3001, "grep_matches": total}), end=" ")
