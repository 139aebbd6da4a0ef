"""Tool results an agent can trust (issue 11): nothing silently missing,
nothing unreadable.

Each test here failed on the code before the change: braces in glob found
nothing, capped grep answers changed from call to call, a long matching
line was dropped, a bad regex lost its explanation, long command output
lost its end, a binary file came back as escaped noise, /tmp was not
writable in standard mode, `git -C . status` was refused in read_only, and
a read_only `git status` ran the programs a standard-mode agent had put in
the repository's configuration.
"""

import base64
import hashlib
import json
import os
import re

from sgclient import GatewayTestCase, code_of, unique


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

    def glob(self, pattern, **kw):
        args = {"pattern": pattern, "path": self.d}
        args.update(kw)
        return self.gw.tool_ok("glob", args)

    def glob_set(self, pattern):
        res = self.glob(pattern)
        lines = [l for l in res["content"].splitlines() if l and not l.startswith("[")]
        return {l[len(self.d) + 1:] for l in lines}

    # ---- glob ---------------------------------------------------------------

    def test_glob_braces(self):
        self.make(["src/a.c", "src/b.h", "src/deep/c.c", "inc/d.h", "doc/e.txt", "f.py"])
        self.assertEqual(self.glob_set("**/*.{c,h}"),
                         {"src/a.c", "src/b.h", "src/deep/c.c", "inc/d.h"})
        self.assertEqual(self.glob_set("{src,inc}/*.{c,h}"), {"src/a.c", "src/b.h", "inc/d.h"})
        # Nested alternatives.
        self.assertEqual(self.glob_set("**/*.{c,{txt,py}}"),
                         {"src/a.c", "src/deep/c.c", "doc/e.txt", "f.py"})
        # A brace around a path with a slash, and "**".
        self.assertEqual(self.glob_set("{src/deep,doc}/**"), {"src/deep/c.c", "doc/e.txt"})

    def test_glob_classes(self):
        self.make(["a1.c", "b2.c", "c3.txt", "x.c", "[lit].c"])
        self.assertEqual(self.glob_set("[ab]*.c"), {"a1.c", "b2.c"})
        self.assertEqual(self.glob_set("?[[:digit:]].*"), {"a1.c", "b2.c", "c3.txt"})
        self.assertEqual(self.glob_set("[!ab]*.c"), {"x.c", "[lit].c"})
        self.assertEqual(self.glob_set("\\[lit\\].c"), {"[lit].c"})

    def test_glob_invalid_pattern_says_why(self):
        self.make(["a.c"])
        for pattern, why in (("**/*.{c,h", "unmatched '{'"), ("*.c}", "unmatched '}'"),
                             ("[ab", "unterminated '['"),
                             ("[[:nope:]]*", "unknown character class")):
            with self.subTest(pattern=pattern):
                err = self.gw.tool_error("glob", {"pattern": pattern, "path": self.d})
                self.assertEqual(code_of(err), "invalid_argument")
                self.assertIn(why, err)

    def test_glob_order_newest_first_ties_by_path(self):
        self.make(["old.c", "mid.c", "new.c", "tie-b.c", "tie-a.c"])
        self.sh("touch -d '2020-01-01 00:00:00' old.c && touch -d '2021-01-01 00:00:00' mid.c "
                "tie-b.c tie-a.c && touch -d '2022-01-01 00:00:00' new.c")
        res = self.glob("*.{c,h}")
        names = [l[len(self.d) + 1:] for l in res["content"].splitlines()]
        self.assertEqual(names, ["new.c", "mid.c", "tie-a.c", "tie-b.c", "old.c"])

    def test_glob_truncation_said_in_content(self):
        self.sh("seq -f 'f%05g.c' 1 10010 | xargs touch")
        res = self.glob("*.c")
        md = res["metadata"]
        self.assertIs(md["truncated"], True)
        self.assertEqual(md["total"], 10010)
        self.assertEqual(md["count"], 10000)
        last = res["content"].rstrip("\n").splitlines()[-1]
        self.assertRegex(last, r"^\[truncated: 10000 of 10010 matching files shown")

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

    # ---- grep ---------------------------------------------------------------

    def grep(self, pattern, **kw):
        args = {"pattern": pattern, "path": self.d}
        args.update(kw)
        return self.gw.tool_ok("grep", args)

    def test_grep_capped_is_stable_and_sorted(self):
        self.sh("for i in $(seq 1 60); do printf 'hit one\\nmiss\\nhit two\\nhit three\\n' "
                "> f$i.txt; done")
        full = self.grep("hit", max_results=1000)
        self.assertEqual(full["metadata"]["count"], 180)
        self.assertIs(full["metadata"]["truncated"], False)
        lines = full["content"].splitlines()

        def key(line):
            path, num, _ = line.split(":", 2)
            return (path.encode(), int(num))

        self.assertEqual(lines, sorted(lines, key=key))
        first = None
        for _ in range(4):
            res = self.grep("hit", max_results=25)
            if first is None:
                first = res["content"]
            self.assertEqual(res["content"], first)
        capped = first.splitlines()
        self.assertEqual(capped[:25], lines[:25])
        self.assertEqual(len(capped), 26)
        self.assertIn("25 of 180 matches shown", capped[25])
        md = res["metadata"]
        self.assertEqual((md["count"], md["total"], md["total_exact"], md["truncated"]),
                         (25, 180, True, True))

    def test_grep_more_than_when_too_many_to_count(self):
        self.sh("yes needle | head -n 100005 > many.txt")
        res = self.grep("needle", max_results=3)
        md = res["metadata"]
        self.assertIs(md["total_exact"], False)
        self.assertIs(md["truncated"], True)
        lines = res["content"].splitlines()
        self.assertEqual(lines[:3], ["%s/many.txt:%d:needle" % (self.d, i) for i in (1, 2, 3)])
        self.assertIn("more than 100000", lines[3])

    def test_grep_long_line_is_clipped_not_dropped(self):
        # 1.5 MiB on one line, longer than the whole output cap.
        self.sh("{ head -c 800000 /dev/zero | tr '\\0' a; printf NEEDLE; "
                "head -c 700000 /dev/zero | tr '\\0' b; echo; echo short NEEDLE; } > long.txt")
        res = self.grep("NEEDLE")
        md = res["metadata"]
        self.assertEqual(md["count"], 2)
        lines = res["content"].splitlines()
        self.assertEqual(lines[1], "%s/long.txt:2:short NEEDLE" % self.d)
        first = lines[0]
        self.assertTrue(first.startswith("%s/long.txt:1:[" % self.d), first[:80])
        self.assertIn("NEEDLE", first)
        self.assertLess(len(first), 2000)
        before = int(re.search(r":1:\[(\d+) bytes clipped\] ", first).group(1))
        after = int(re.search(r" \[(\d+) bytes clipped\]$", first).group(1))
        shown = first.split("bytes clipped] ", 1)[1].rsplit(" [", 1)[0]
        self.assertEqual(before + len(shown) + after, 1500006)

    def test_grep_bad_regex_whole_message(self):
        self.make(["a.txt"])
        res = self.gw.tool("grep", {"pattern": "foo((", "path": self.d})
        self.assertIs(res["is_error"], True)
        engine_words = ("unclosed group", "Unmatched ( or \\(")
        self.assertTrue(any(w in res["content"] for w in engine_words), res["content"])

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

    def test_git_output_keeps_tail(self):
        self.sh("git init -q . && seq 1 250000 > big.txt && git add big.txt && "
                "git -c user.email=e@x -c user.name=e commit -qm big")
        res = self.gw.tool_ok("git", {"args": ["show", "--format=", "HEAD"], "cwd": self.d})
        self.assertIs(res["metadata"]["truncated"], True)
        self.assertTrue(res["content"].rstrip("\n").endswith("+250000"))
        self.assertIn("output truncated", res["content"])

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

    # ---- read_only git ------------------------------------------------------

    def git_repo(self):
        self.sh("git init -q . && mkdir -p sub && echo a > sub/a.txt && git add . && "
                "git -c user.email=e@x -c user.name=e commit -qm one")

    def test_git_read_only_global_options(self):
        self.git_repo()
        ok = [["-C", ".", "status", "--short"], ["--no-pager", "log", "--oneline"],
              ["-c", "color.ui=never", "log", "-1"], ["-P", "diff"],
              ["-C", "sub", "-c", "core.quotepath=false", "ls-files"],
              ["--no-optional-locks", "status"], ["-c", "pager.log=false", "log", "-1"]]
        for args in ok:
            with self.subTest(args=args):
                self.gw.tool_ok("git", {"args": args, "cwd": self.d}, "read_only")
        res = self.gw.tool_ok("git", {"args": ["-C", "sub", "ls-files"], "cwd": self.d},
                              "read_only")
        self.assertEqual(res["content"], "a.txt\n")

    def test_git_read_only_refuses_program_keys(self):
        self.git_repo()
        marker = "/tmp/%s" % unique("sg-git-ran")
        keys = ["core.pager=touch %s" % marker, "core.fsmonitor=touch %s" % marker,
                "diff.external=touch %s" % marker, "alias.st=!touch %s" % marker,
                "core.sshCommand=touch %s" % marker, "core.hooksPath=/tmp",
                "core.editor=touch %s" % marker, "pager.log=touch %s" % marker,
                "diff.c.textconv=touch %s" % marker, "filter.x.clean=touch %s" % marker,
                "credential.helper=!touch %s" % marker, "sequence.editor=touch %s" % marker,
                "core.askPass=touch %s" % marker, "gpg.program=touch %s" % marker]
        for kv in keys:
            with self.subTest(key=kv.split("=")[0]):
                err = self.gw.tool_error("git", {"args": ["-c", kv, "status"], "cwd": self.d},
                                         "read_only")
                self.assertEqual(code_of(err), "permission_denied")
                self.assertIn(kv.split("=")[0], err)
        for args, code in ((["-C", "/etc", "status"], "path_escape"),
                           (["-C", "../../..", "status"], "path_escape"),
                           (["-C", ".", "commit", "-m", "x"], "permission_denied"),
                           (["--exec-path=/tmp", "status"], "permission_denied"),
                           (["--git-dir=/tmp", "status"], "permission_denied"),
                           (["-c"], "invalid_argument")):
            with self.subTest(args=args):
                err = self.gw.tool_error("git", {"args": args, "cwd": self.d}, "read_only")
                self.assertEqual(code_of(err), code)
        self.assertEqual(self.gw.sh_ok("test -e %s && echo ran || echo clean" % marker),
                         "clean\n")

    def test_git_read_only_never_runs_the_repository_programs(self):
        # The attacker: a standard-mode agent writes programs into the
        # repository's own configuration (and an include, and ~/.gitconfig);
        # a read_only caller's `git status` / `diff` / `log -p` must not run
        # them.  The program says so on stderr (read_only cannot write).
        self.git_repo()
        self.sh("printf '#!/bin/sh\\necho SG-PWNED \"$0\" >&2\\ncat\\n' > evil.sh && "
                "chmod +x evil.sh && echo b >> sub/a.txt")
        evil = self.sh("pwd").strip() + "/evil.sh"
        attacks = [
            ("core.fsmonitor", "git config core.fsmonitor %s" % evil),
            ("diff.external", "git config diff.external %s" % evil),
            ("filter.x.clean", "echo '*.txt filter=x' > .git/info/attributes && "
                               "git config filter.x.clean %s" % evil),
            ("filter.x.process", "echo '*.txt filter=x' > .git/info/attributes && "
                                 "git config filter.x.process %s" % evil),
            ("diff.c.textconv", "echo '*.txt diff=c' > .gitattributes && "
                                "git config diff.c.textconv %s" % evil),
            ("diff.c.command", "echo '*.txt diff=c' > .gitattributes && "
                               "git config diff.c.command %s" % evil),
            ("core.pager", "git config core.pager %s" % evil),
            ("core.hooksPath", "git config core.hooksPath /tmp"),
            ("core.fsmonitor", "printf '[core]\\n\\tfsmonitor = %s\\n' > inc.cfg && "
                               "git config include.path $PWD/inc.cfg" % evil),
            ("core.fsmonitor", "git config --global core.fsmonitor %s" % evil),
        ]
        for key, setup in attacks:
            with self.subTest(attack=setup):
                self.sh("rm -f .gitattributes .git/info/attributes inc.cfg; "
                        "git config --global --remove-section core 2>/dev/null; "
                        "cp .git/config.sg-clean .git/config 2>/dev/null || "
                        "cp .git/config .git/config.sg-clean; " + setup)
                for args in (["status"], ["diff"], ["log", "-p", "-1"], ["show"],
                             ["-C", "sub", "diff", "a.txt"]):
                    reply = self.gw.execute("git", {"args": args, "cwd": self.d},
                                            "read_only")
                    self.assertNotIn("SG-PWNED", json.dumps(reply), args)
                err = self.gw.tool_error("git", {"args": ["status"], "cwd": self.d},
                                         "read_only")
                self.assertEqual(code_of(err), "permission_denied")
                self.assertIn(key.lower(), err.lower())
        self.sh("git config --global --remove-section core 2>/dev/null; "
                "cp .git/config.sg-clean .git/config; rm -f .gitattributes")
        # A clean repository still answers.
        self.gw.tool_ok("git", {"args": ["status"], "cwd": self.d}, "read_only")

    def evil_filter_repo(self, where):
        # A git repository in `where` whose clean filter, a program in the
        # workspace named in evil.cfg, says so on stderr.  a.txt is changed
        # but keeps its size and gets an old time, so that even `status`
        # must filter it to compare.
        self.sh("printf '#!/bin/sh\\necho SG-PWNED >&2\\ncat\\n' > evil.sh && chmod +x evil.sh")
        evil = self.sh("pwd").strip() + "/evil.sh"
        self.sh("mkdir -p %s && cd %s && git init -q && echo a > a.txt && git add a.txt && "
                "git -c user.email=e@x -c user.name=e commit -qm s && "
                "echo '*.txt filter=x' > .gitattributes && echo c > a.txt && "
                "touch -d 2001-01-01 a.txt && "
                "printf '[filter \"x\"]\\n\\tclean = %s\\n' > evil.cfg && : > clean.cfg"
                % (where, where, evil))

    def test_git_read_only_runs_no_program_the_guard_did_not_see(self):
        # The guard reads the repository's configuration, not that of a
        # submodule, whose `git status` the read_only `git status` starts
        # (and which runs the submodule's clean filter).  Landlock lets a
        # read_only git execute only git itself (docs/security.md), so the
        # filter cannot start.
        self.git_repo()
        self.evil_filter_repo("sm")
        self.sh("cd sm && git config include.path $PWD/evil.cfg && cd .. && "
                "git add sm 2>/dev/null && git -c user.email=e@x -c user.name=e commit -qm sm")
        for args in (["status"], ["diff"]):
            with self.subTest(args=args):
                a = {"args": args, "cwd": self.d}
                # In standard mode the filter runs: the setup does what it claims.
                self.assertIn("SG-PWNED", json.dumps(self.gw.execute("git", a, "standard")))
                reply = self.gw.execute("git", a, "read_only")
                self.assertNotIn("SG-PWNED", json.dumps(reply))
                # git still answers.
                self.assertIn("sm", reply["data"]["content"])

    def test_git_read_only_race_with_the_guard(self):
        # A background process of the environment flips an included file
        # between empty and a clean filter plus a diff command, so the guard
        # may read the empty one and git the other (on the code before, in
        # about one try in four).  The diff command is the ELF interpreter,
        # which Landlock must leave executable for git itself: given the
        # workspace's program as its argument it would run it, so read_only
        # git passes --no-ext-diff.  Bounded: 30 tries.
        self.git_repo()
        self.evil_filter_repo("race")
        ldso = self.sh("for l in /lib64/ld-linux-x86-64.so.2 /lib/ld-linux-aarch64.so.1; do "
                       "if [ -e $l ]; then echo $l; break; fi; done").strip()
        self.sh("cd race && cp clean.cfg inc.cfg && git config include.path $PWD/inc.cfg")
        if ldso:
            # sub/a.bin is /bin/echo: run through ld.so it prints its
            # arguments, "/dev/null . . sub/a.bin 0000...".
            self.sh("cd race && mkdir -p sub && cp /bin/echo sub/a.bin && "
                    "git add -N sub/a.bin && echo '*.bin diff=y' >> .gitattributes && "
                    "printf '[diff \"y\"]\\n\\tcommand = %s\\n' >> evil.cfg" % ldso)
        flipper = self.gw.start(
            command="cd %s/race && while :; do cp evil.cfg t1 && mv t1 inc.cfg; "
                    "cp clean.cfg t2 && mv t2 inc.cfg; done" % self.d,
            permission_mode="standard")
        try:
            for attempt in range(30):
                reply = json.dumps(self.gw.execute(
                    "git", {"args": ["diff"], "cwd": self.d + "/race"}, "read_only"))
                self.assertNotIn("SG-PWNED", reply, "attempt %d" % attempt)
                self.assertNotRegex(reply, r"/dev/null \. \. sub/a\.bin", "attempt %d" % attempt)
        finally:
            self.gw.ok("process/stop", {"id": flipper["id"], "grace_ms": 0})

    def test_git_read_only_grep_opens_files_in_no_program(self):
        # `git grep -O<pager>` hands the matching files to a program the
        # caller names.  Named as the ELF interpreter (which Landlock must
        # leave executable for git), it loads and runs a workspace file:
        # here a copy of uname, which prints "Linux".  Refused in every
        # spelling: attached, bundled behind another flag, long, abbreviated.
        self.git_repo()
        ldso = self.sh("for l in /lib64/ld-linux-x86-64.so.2 /lib/ld-linux-aarch64.so.1; do "
                       "if [ -e $l ]; then echo $l; break; fi; done").strip()
        if not ldso:
            self.skipTest("no ELF interpreter at a known path")
        self.sh("mkdir -p sub && cp /bin/uname sub/evil.bin && git add sub/evil.bin && "
                "git -c user.email=e@x -c user.name=e commit -qm evil")
        # The setup does what it claims: in standard mode the file runs.
        ran = self.gw.execute("git", {"args": ["grep", "-O" + ldso, "ELF"], "cwd": self.d},
                              "standard")
        self.assertIn("Linux", json.dumps(ran))
        for args in (["grep", "-O" + ldso, "ELF"], ["grep", "-nO" + ldso, "ELF"],
                     ["grep", "--open-files-in-pager=" + ldso, "ELF"],
                     ["grep", "--open=" + ldso, "ELF"],
                     ["grep", "--no-index", "-iO" + ldso, "elf"],
                     ["-C", ".", "grep", "-O" + ldso, "ELF"]):
            with self.subTest(args=args):
                reply = self.gw.execute("git", {"args": args, "cwd": self.d}, "read_only")
                self.assertNotIn("Linux", json.dumps(reply))
                self.assertEqual(code_of(reply.get("error")), "permission_denied", reply)
        # What only looks like -O is still a search (which may find
        # nothing, exit 1): a pattern after -e, and a bundle whose O is
        # -e's value.
        for args in (["grep", "-e", "-O"], ["grep", "-eO", "sub"], ["grep", "-nA1", "a"]):
            with self.subTest(args=args):
                self.gw.tool("git", {"args": args, "cwd": self.d}, "read_only")

    def test_git_read_only_listing_subcommands_only_list(self):
        # branch, tag, remote, stash, config and help read only in some of
        # their forms; every word of the command line decides, not the
        # first alone (`branch -v -D x` deletes, bare `stash` stashes).
        self.git_repo()
        self.sh("git branch keep && git tag t1")
        refused = (["branch", "-v", "-D", "keep"], ["branch", "keep2"],
                   ["branch", "-a", "new"], ["branch", "--list", "-m", "keep", "k3"],
                   ["tag", "-l", "-d", "t1"], ["tag", "t2"], ["tag", "-v", "t1"],
                   ["remote", "-v", "add", "o", "/tmp"], ["remote", "rename", "a", "b"],
                   ["stash"], ["stash", "-q"], ["stash", "drop"], ["stash", "pop"],
                   ["config", "user.name", "x"],
                   ["config", "--list", "--unset", "x"], ["config", "--file", "/etc/x", "--list"],
                   ["help", "-m", "log"], ["help", "log"], ["help", "--web", "log"])
        for args in refused:
            with self.subTest(args=args):
                err = self.gw.tool_error("git", {"args": args, "cwd": self.d}, "read_only")
                self.assertEqual(code_of(err), "permission_denied")
        listed = {("branch",): "keep", ("branch", "-v"): "keep", ("branch", "--list", "k*"): "keep",
                  ("branch", "-a", "--list"): "keep", ("branch", "--show-current"): "",
                  ("branch", "--contains", "HEAD"): "keep", ("tag",): "t1", ("tag", "-l", "t*"): "t1",
                  ("tag", "-n"): "t1", ("remote",): "", ("remote", "-v"): "",
                  ("stash", "list"): "", ("config", "--get", "core.bare"): "false",
                  ("config", "--list"): "core.bare", ("config", "-l", "--show-origin"): "core.bare",
                  ("help", "-a"): "", ("help", "-g"): ""}
        for args, want in listed.items():
            with self.subTest(args=args):
                res = self.gw.tool_ok("git", {"args": list(args), "cwd": self.d}, "read_only")
                self.assertIn(want, res["content"])
        # Nothing of the refused ones happened.
        self.assertEqual(self.sh("git branch --list keep && git tag -l t1 && git stash list"),
                         "  keep\nt1\n")

    def test_git_read_only_refuses_what_hands_files_to_programs(self):
        self.git_repo()
        for args in (["diff", "--ext-diff"], ["log", "-p", "--textconv"], ["show", "--ext"],
                     ["diff", "--submodule=diff"], ["cat-file", "--textconv", "HEAD:sub/a.txt"]):
            with self.subTest(args=args):
                err = self.gw.tool_error("git", {"args": args, "cwd": self.d}, "read_only")
                self.assertEqual(code_of(err), "permission_denied")
        for args in (["diff", "--submodule=log"], ["log", "--text", "-1"], ["blame", "sub/a.txt"],
                     ["grep", "-n", "a"], ["stash", "list"], ["diff-tree", "-p", "HEAD"]):
            with self.subTest(args=args):
                self.gw.tool_ok("git", {"args": args, "cwd": self.d}, "read_only")
