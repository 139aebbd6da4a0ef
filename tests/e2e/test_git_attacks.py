"""read_only git against a hostile repository (protocol section 3, docs/security.md).

A standard-mode agent may write anything into the repository: programs in
its configuration (core.fsmonitor, filters, diff drivers, pagers, hooks),
in an include, in ~/.gitconfig, in a submodule, or swap them in while a
read_only caller's git runs.  None of them may run for a read_only git:
its configuration is read first and refused when it names a program, the
command line turns the program-running keys off, diffs go without
external drivers or textconv, and git runs where it may execute only
itself.  Also the host's 30 s limit (exit_code 124).  Kept from the
earlier dialect's test_results, on the host's arguments (`subcommand`
and `args`, git in root); each fails there, where git took an argv.
"""

import json

from sgclient import code_of
from test_tools import GitRepoCase


class GitAttacks(GitRepoCase):

    def test_git_timeout_is_exit_124(self):
        # The host gives git 30 s; a hook that sleeps longer is killed and
        # the result says so (exit_code 124, timed_out), not an error.
        self.sh("printf '#!/bin/sh\\nsleep 45\\n' > .git/hooks/pre-commit && "
                "chmod +x .git/hooks/pre-commit && echo t > t.txt && git add t.txt")
        v = self.git("commit", ["-m", "slow"], timeout=60)
        self.assertEqual((v["exit_code"], v["timed_out"]), (124, True))
        self.assertNotIn("commit_sha", v)
        self.assertEqual(v["next_suggestions"], [
            "retry with a narrower git command or inspect repository state with git status"])

    # ---- read_only git against a hostile repository --------------------------

    def test_git_read_only_never_runs_the_repository_programs(self):
        # A standard-mode agent writes programs into the repository's own
        # configuration (and an include, and ~/.gitconfig); a read_only
        # git status / diff / log -p / show must not run them.  The program
        # says so on stderr (read_only cannot write).
        self.sh("printf '#!/bin/sh\\necho SG-PWNED \"$0\" >&2\\ncat\\n' > evil.sh && "
                "chmod +x evil.sh && echo b >> sub/a.txt && cp .git/config .git/config.sg-clean")
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
            ("core.hookspath", "git config core.hooksPath /tmp"),
            ("core.fsmonitor", "printf '[core]\\n\\tfsmonitor = %s\\n' > inc.cfg && "
                               "git config include.path $PWD/inc.cfg" % evil),
            ("core.fsmonitor", "git config --global core.fsmonitor %s" % evil),
        ]
        for key, setup in attacks:
            with self.subTest(attack=setup):
                self.sh("rm -f .gitattributes .git/info/attributes inc.cfg; "
                        "git config --global --remove-section core 2>/dev/null; "
                        "cp .git/config.sg-clean .git/config; " + setup)
                for sub, args in (("status", []), ("diff", []), ("log", ["-p", "-1"]),
                                  ("show", []), ("diff", ["sub/a.txt"])):
                    reply = self.g.execute("git", {"subcommand": sub, "args": args},
                                           "read_only")
                    self.assertNotIn("SG-PWNED", json.dumps(reply), (sub, args))
                err = self.git_error("status", [], "read_only")
                self.assertCode(err, "permission_denied")
                self.assertIn(key, err.lower())
        self.sh("git config --global --remove-section core 2>/dev/null; "
                "cp .git/config.sg-clean .git/config; rm -f .gitattributes")
        # A clean repository still answers.
        self.assertEqual(self.git("status", mode="read_only")["exit_code"], 0)

    def evil_filter_repo(self, where):
        # A repository in `where` whose clean filter, a program in the
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
        # submodule, whose status the read_only `git status` starts (and
        # which runs the submodule's clean filter).  Landlock lets a
        # read_only git execute only git itself, so the filter cannot start.
        self.evil_filter_repo("sm")
        self.sh("cd sm && git config include.path $PWD/evil.cfg && cd .. && "
                "git add sm 2>/dev/null; git commit -qm sm")
        for sub in ("status", "diff"):
            with self.subTest(sub=sub):
                a = {"subcommand": sub}
                # In standard mode the filter runs: the setup does what it claims.
                self.assertIn("SG-PWNED", json.dumps(self.g.execute("git", a, "standard")))
                reply = self.g.execute("git", a, "read_only")
                self.assertNotIn("SG-PWNED", json.dumps(reply))
                self.assertIn("sm", json.dumps(reply["data"]))

    def test_git_read_only_race_with_the_guard(self):
        # A background process flips an included file between empty and a
        # clean filter plus a diff command, so the guard may read the empty
        # one and git the other.  The diff command is the ELF interpreter,
        # which Landlock must leave executable for git itself: given the
        # workspace's program as its argument it would run it, so read_only
        # git passes --no-ext-diff.  Bounded: 30 tries.
        self.evil_filter_repo(".")
        ldso = self.sh("for l in /lib64/ld-linux-x86-64.so.2 /lib/ld-linux-aarch64.so.1; do "
                       "if [ -e $l ]; then echo $l; break; fi; done").strip()
        self.sh("cp clean.cfg inc.cfg && git config include.path $PWD/inc.cfg")
        if ldso:
            self.sh("cp /bin/echo sub/a.bin && git add -N sub/a.bin && "
                    "echo '*.bin diff=y' >> .gitattributes && "
                    "printf '[diff \"y\"]\\n\\tcommand = %s\\n' >> evil.cfg" % ldso)
        flipper = self.g.start("while :; do cp evil.cfg t1 && mv t1 inc.cfg; "
                               "cp clean.cfg t2 && mv t2 inc.cfg; done")
        try:
            for attempt in range(30):
                reply = json.dumps(self.g.execute("git", {"subcommand": "diff"}, "read_only"))
                self.assertNotIn("SG-PWNED", reply, "attempt %d" % attempt)
                self.assertNotRegex(reply, r"/dev/null \. \. sub/a\.bin", "attempt %d" % attempt)
        finally:
            self.g.stop(flipper["id"])

    def test_git_read_only_grep_opens_files_in_no_program(self):
        # `git grep -O<pager>` hands the matching files to a program the
        # caller names.  Named as the ELF interpreter it loads and runs a
        # workspace file: here a copy of uname, which prints "Linux".
        # Refused in every spelling in read_only; the host's allow-list
        # takes it in standard mode, where the agent has bash anyway.
        ldso = self.sh("for l in /lib64/ld-linux-x86-64.so.2 /lib/ld-linux-aarch64.so.1; do "
                       "if [ -e $l ]; then echo $l; break; fi; done").strip()
        if not ldso:
            self.skipTest("no ELF interpreter at a known path")
        self.sh("cp /bin/uname sub/evil.bin && git add sub/evil.bin && git commit -qm evil")
        ran = self.g.execute("git", {"subcommand": "grep", "args": ["-O" + ldso, "ELF"]})
        self.assertIn("Linux", json.dumps(ran))
        for args in (["-O" + ldso, "ELF"], ["-nO" + ldso, "ELF"],
                     ["--open-files-in-pager=" + ldso, "ELF"], ["--open=" + ldso, "ELF"],
                     ["-iO" + ldso, "elf"]):
            with self.subTest(args=args):
                reply = self.g.execute("git", {"subcommand": "grep", "args": args},
                                       "read_only")
                self.assertNotIn("Linux", json.dumps(reply))
                self.assertEqual(code_of(reply.get("error")), "permission_denied", reply)
        # What only looks like -O is still a search.
        for args in (["-e", "-O"], ["-eO", "sub"], ["-nA1", "a"]):
            with self.subTest(args=args):
                self.g.tool("git", {"subcommand": "grep", "args": args}, "read_only")

    def test_git_read_only_refuses_what_hands_files_to_programs(self):
        for sub, args in (("diff", ["--ext-diff"]), ("log", ["-p", "--textconv"]),
                          ("show", ["--ext"]), ("diff", ["--submodule=diff"])):
            with self.subTest(sub=sub, args=args):
                self.assertCode(self.git_error(sub, args, "read_only"), "permission_denied")
        for sub, args in (("diff", ["--submodule=log"]), ("log", ["--text", "-1"]),
                          ("blame", ["sub/a.txt"]), ("grep", ["-n", "a"]),
                          ("stash list", [])):
            with self.subTest(sub=sub, args=args):
                self.assertEqual(self.git(sub, args, "read_only")["exit_code"], 0)
