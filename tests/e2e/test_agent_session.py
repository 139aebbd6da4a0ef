"""A scripted agent session on a generated repository of 3,000 files.

Every tool of the catalogue is used the way an agent uses it, and each
answer is compared with the same operation done directly in the
environment (find, rg or grep, cat, stat, ls, git, sha256sum), so the
catalogue is checked against the tools it stands in for, not against
itself.
"""

import base64
import hashlib
import json

from sgclient import GatewayTestCase, unique

GENERATE = r"""
mkdir -p %(d)s && cd %(d)s && awk 'BEGIN {
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


class AgentSession(GatewayTestCase):
    shared_gateway = True

    def setUp(self):
        self.d = unique("repo")
        self.gw.tool_ok("run_command", {"command": GENERATE % {"d": self.d},
                                        "timeout_ms": 600000}, timeout=600)

    def sh(self, script):
        return self.gw.sh_ok("cd %s && %s" % (self.d, script))

    def lines(self, script):
        return [l for l in self.sh(script).splitlines() if l]

    def test_session(self):
        gw, d = self.gw, self.d
        n = len(d) + 1

        # Explore: list_dir against ls.
        res = gw.tool_ok("list_dir", {"path": d})
        listed = sorted(l.split(" ", 2)[2][n:].rstrip("/")
                        for l in res["content"].splitlines())
        self.assertEqual(listed, sorted(self.lines("ls -1")))

        # glob with braces against find.
        res = gw.tool_ok("glob", {"pattern": "**/*.{c,h}", "path": d})
        found = sorted(l[n:] for l in res["content"].splitlines())
        direct = sorted(l[2:] for l in self.lines(
            "find . -path ./.git -prune -o -type f \\( -name '*.c' -o -name '*.h' \\) -print"))
        self.assertEqual(len(direct), 2010)
        self.assertEqual(found, direct)
        self.assertEqual(res["metadata"]["total"], 2010)

        # grep against the same engine run directly, in (path, line) order.
        res = gw.tool_ok("grep", {"pattern": "TODO fix [0-9]+-", "path": d,
                                  "max_results": 10000})
        engine = res["metadata"]["engine"]
        cmd = ("rg --line-number --no-heading --with-filename --color never -e 'TODO fix [0-9]+-' ."
               if engine == "rg" else "grep -rnHE -e 'TODO fix [0-9]+-' .")
        direct = []
        for l in self.lines(cmd):
            path, num, text = l.split(":", 2)
            direct.append((path[2:].encode(), int(num), text))
        direct.sort()
        got = []
        for l in res["content"].splitlines():
            path, num, text = l.split(":", 2)
            got.append((path[n:].encode(), int(num), text))
        self.assertGreater(len(direct), 100)
        self.assertEqual(got, direct)
        self.assertEqual(res["metadata"]["total"], len(direct))

        # A capped grep is the head of the whole answer.
        capped = gw.tool_ok("grep", {"pattern": "TODO", "path": d, "max_results": 50})
        self.assertEqual(capped["content"].splitlines()[:50],
                         gw.tool_ok("grep", {"pattern": "TODO", "path": d,
                                             "max_results": 10000})["content"].splitlines()[:50])

        # read_file against cat, whole and windowed.
        for rel in ("mod03/sub0/f010.h", "mod29/sub2/f099.c", "mod15/sub0/f050.txt"):
            whole = gw.tool_ok("read_file", {"path": "%s/%s" % (d, rel)})
            self.assertEqual(whole["content"], self.sh("cat %s" % rel))
            self.assertEqual(whole["metadata"]["total_lines"], 20)
            part = gw.tool_ok("read_file", {"path": "%s/%s" % (d, rel), "offset": 5, "limit": 3})
            self.assertEqual(part["content"].splitlines()[:3],
                             self.sh("sed -n 5,7p %s" % rel).splitlines())
        blob = gw.tool_ok("read_file", {"path": d + "/mod00/blob.bin"})
        self.assertIs(blob["metadata"]["binary"], True)
        raw = gw.tool_ok("read_file", {"path": d + "/mod00/blob.bin", "encoding": "base64"})
        self.assertEqual(base64.b64decode(raw["content"]), b"bin\x00ary")

        # stat_path against stat.
        st = gw.tool_ok("stat_path", {"path": d + "/mod07/sub1/f001.h"})["metadata"]
        size, mode = self.sh("stat -c '%s %a' mod07/sub1/f001.h").split()
        self.assertEqual((st["size"], int(st["mode"], 8)), (int(size), int(mode, 8)))

        # Edit, write, then check with cat, sha256sum and git.
        target = "%s/mod05/sub2/f003.c" % d
        gw.tool_ok("edit_file", {"path": target, "old_string": "int v2 = 17;",
                                 "new_string": "int v2 = 42; /* edited */"})
        self.assertIn("int v2 = 42; /* edited */", self.sh("cat mod05/sub2/f003.c"))
        text = "".join("line %d\n" % i for i in range(500))
        gw.tool_ok("write_file", {"path": d + "/notes/new.md", "content": text})
        self.assertEqual(self.sh("sha256sum notes/new.md").split()[0],
                         hashlib.sha256(text.encode()).hexdigest())
        status = gw.tool_ok("git", {"args": ["status", "--porcelain"], "cwd": d})
        self.assertEqual(status["content"], self.sh("git status --porcelain"))
        self.assertEqual(sorted(status["content"].splitlines()),
                         [" M mod05/sub2/f003.c", "?? notes/"])
        diff = gw.tool_ok("git", {"args": ["-C", ".", "diff", "--stat"], "cwd": d}, "read_only")
        self.assertIn("mod05/sub2/f003.c", diff["content"])
        files = gw.tool_ok("git", {"args": ["ls-files"], "cwd": d})
        self.assertEqual(len(files["content"].splitlines()), 3001)

        # make_dir, move_path, delete_path against test -e.
        gw.tool_ok("make_dir", {"path": d + "/build/out"})
        gw.tool_ok("move_path", {"path": d + "/notes/new.md", "destination": d + "/build/out/n.md"})
        self.assertEqual(self.sh("test -f build/out/n.md && test ! -e notes/new.md && echo y"),
                         "y\n")
        gw.tool_ok("delete_path", {"path": d + "/mod29", "recursive": True})
        self.assertEqual(self.sh("test ! -e mod29 && find . -name '*.c' -not -path './.git/*' "
                                 "| wc -l").strip(), "986")

        # A long build log: the last error survives the output cap.
        res = gw.tool("run_command", {"command": "cd %s && find . -name '*.c' -not -path "
                                      "'./.git/*' -exec cat {} +; seq 1 200000; "
                                      "echo 'ld: undefined reference to main' >&2; exit 1" % d},
                      timeout=300)
        self.assertIs(res["is_error"], True)
        self.assertIs(res["metadata"]["truncated"], True)
        self.assertTrue(res["content"].endswith("ld: undefined reference to main\n"))
        self.assertIn("output truncated", res["content"])

        # present_artifact: the export's size is the file's.
        res = gw.tool_ok("present_artifact", {"path": d + "/build/out/n.md"})
        self.assertEqual(res["metadata"]["export"]["size"], len(text))
        print(json.dumps({"files": 3001, "grep_matches": len(direct)}), end=" ")
