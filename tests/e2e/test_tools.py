"""The host's grep, glob and git tools, view for view (protocol section 3).

Each view is compared key for key with what the host's worker writes
(internal/tools/tool_search.go, git.go): grep's pages of 250 records sorted
by file then line inside a 20 KiB result, its output modes, glob's pages of
500 sorted by path, both bound to a result revision that a stale
continuation is refused with; git's allow-list, its structured status,
commit metadata and co-author trailer, and the host's secret guards (what
add and commit refuse, what diff, grep and show mask).  The read_only git
attacks are in test_git_attacks.py, outside the per-backend smoke subset.
None of this passes on the earlier dialect: its grep and glob answered
`content` text and took `glob`/`max_results`, its git took an argv.
"""

import json
import time

from sgclient import GatewayTestCase, unique

GREP_KEYS = {"action", "pattern", "continuation_supported", "workspace_revision", "total",
             "record_total", "offset", "has_more", "truncated", "matches",
             "omitted_match_count", "content_truncated", "next_suggestions",
             "result_budget_bytes", "returned_match_count", "returned_count", "page"}
LIST_KEYS = {"action", "pattern", "continuation_supported", "workspace_revision", "total",
             "record_total", "offset", "returned_count", "has_more", "page", "truncated",
             "next_suggestions"}
GIT_KEYS = {"action", "subcommand", "exit_code", "output", "timed_out", "workspace_revision",
            "next_suggestions"}
TRAILER = "Co-authored-by: WUU Agent <305930189+wuu-agent[bot]@users.noreply.github.com>"
BUDGET = 20 * 1024


def text_bytes(view):
    """The size of the view's text part, as the host measures its budget."""
    return len(view.result["content"][0]["text"].encode())


class Search(GatewayTestCase):
    shared_gateway = True

    def setUp(self):
        self.d = unique("srch")

    def p(self, name):
        return "%s/%s" % (self.d, name)

    def sh(self, script):
        return self.gw.sh_ok("mkdir -p %s && cd %s && %s" % (self.d, self.d, script))

    def grep(self, pattern, **kw):
        args = {"pattern": pattern, "path": self.d}
        args.update(kw)
        return self.gw.view("grep", args)

    def glob(self, pattern, **kw):
        args = {"pattern": pattern, "path": self.d}
        args.update(kw)
        return self.gw.view("glob", args)

    def check_page(self, v, offset, returned, more):
        page = v["page"]
        self.assertEqual(page["offset"], offset)
        self.assertEqual(page["returned"], returned)
        self.assertIs(page["has_more"], more)
        self.assertEqual(page["snapshot_token"], v["workspace_revision"])
        if more:
            self.assertEqual(page["next"], {"offset": offset + returned,
                                            "expected_revision": v["workspace_revision"]})
        else:
            self.assertNotIn("next", page)

    # ---- grep ---------------------------------------------------------------

    def test_grep_content_view(self):
        self.gw.write(self.p("b.txt"), "nothing\nTODO two\nTODO three\n")
        self.gw.write(self.p("a/z.go"), "// TODO one\n")
        self.gw.write(self.p("a-c.txt"), "TODO dash\n")
        v = self.grep("TODO")
        self.assertEqual(set(v), GREP_KEYS)
        self.assertEqual(v["action"], "grep")
        self.assertEqual(v["pattern"], "TODO")
        self.assertIs(v["continuation_supported"], True)
        # By file (as strings compare: '-' sorts before '/'), then line.
        self.assertEqual(v["matches"], [
            {"file": self.p("a-c.txt"), "line": 1, "content": "TODO dash"},
            {"file": self.p("a/z.go"), "line": 1, "content": "// TODO one"},
            {"file": self.p("b.txt"), "line": 2, "content": "TODO two"},
            {"file": self.p("b.txt"), "line": 3, "content": "TODO three"}])
        self.assertEqual((v["total"], v["record_total"], v["returned_count"],
                          v["returned_match_count"], v["omitted_match_count"]), (4, 4, 4, 4, 0))
        self.assertEqual((v["offset"], v["has_more"], v["truncated"], v["content_truncated"]),
                         (0, False, False, False))
        self.assertEqual(v["result_budget_bytes"], BUDGET)
        self.assertRegex(v["workspace_revision"], r"(^|;)result:[0-9a-f]+$")
        self.check_page(v, 0, 4, False)
        self.assertEqual(v["next_suggestions"], [
            "read_file the relevant match ranges before editing or making a conclusion"])
        # The same search gives the same revision.
        self.assertEqual(self.grep("TODO")["workspace_revision"], v["workspace_revision"])

    def test_grep_no_match_is_success(self):
        self.gw.write(self.p("a.txt"), "hay\n")
        v = self.grep("needle-that-is-not-there")
        self.assertEqual((v["total"], v["matches"], v["has_more"]), (0, [], False))
        self.assertEqual(v["next_suggestions"], [
            "try a broader or case-insensitive grep pattern, or use glob to find candidate "
            "files first"])

    def test_grep_output_modes(self):
        self.gw.write(self.p("one.txt"), "needle\nneedle again\nhay\n")
        self.gw.write(self.p("two.md"), "a needle\n")
        self.gw.write(self.p("three.txt"), "hay\n")
        v = self.grep("needle", output_mode="files_with_matches")
        self.assertEqual(set(v), LIST_KEYS | {"files"})
        self.assertEqual(v["files"], [self.p("one.txt"), self.p("two.md")])
        self.assertEqual((v["total"], v["record_total"], v["returned_count"]), (2, 2, 2))
        self.check_page(v, 0, 2, False)
        self.assertEqual(v["next_suggestions"], [
            "use grep output_mode=content or read_file on the most relevant matched files"])
        v = self.grep("needle", output_mode="count")
        self.assertEqual(set(v), LIST_KEYS | {"counts"})
        self.assertEqual(v["counts"], [{"file": self.p("one.txt"), "count": 2},
                                       {"file": self.p("two.md"), "count": 1}])
        # total counts lines, record_total the files.
        self.assertEqual((v["total"], v["record_total"]), (3, 2))
        # Like the host, any other mode is content.
        self.assertIn("matches", self.grep("needle", output_mode="lines"))

    def test_grep_include_ignore_case_and_file_path(self):
        self.gw.write(self.p("one.txt"), "the Needle42 here\n")
        self.gw.write(self.p("two.md"), "needle7\n")
        v = self.grep("needle[0-9]+")
        self.assertEqual([m["file"] for m in v["matches"]], [self.p("two.md")])
        v = self.grep("needle[0-9]+", ignore_case=True)
        self.assertEqual(len(v["matches"]), 2)
        v = self.grep("needle", ignore_case=True, include="*.txt")
        self.assertEqual(v["matches"], [{"file": self.p("one.txt"), "line": 1,
                                         "content": "the Needle42 here"}])
        # path may name one file; the paths stay relative to root.
        v = self.gw.view("grep", {"pattern": "needle", "path": self.p("two.md")})
        self.assertEqual([m["file"] for m in v["matches"]], [self.p("two.md")])

    def test_grep_context_is_accepted_and_not_shown(self):
        # The host passes context to ripgrep and keeps only its match
        # records: context lines never reach the view.
        self.gw.write(self.p("c.txt"), "before\nNEEDLE\nafter\n")
        for kw in ({"context": 2}, {"before": 1, "after": 1}):
            with self.subTest(kw=kw):
                v = self.grep("NEEDLE", **kw)
                self.assertEqual(v["matches"], [{"file": self.p("c.txt"), "line": 2,
                                                 "content": "NEEDLE"}])

    def test_grep_pages_with_expected_revision(self):
        self.gw.write(self.p("f.txt"), "hit\n" * 600)
        v = self.grep("hit")
        self.assertEqual((v["total"], v["returned_count"], v["has_more"], v["truncated"]),
                         (600, 250, True, True))
        self.assertEqual([m["line"] for m in v["matches"]], list(range(1, 251)))
        self.check_page(v, 0, 250, True)
        self.assertEqual(v["next_suggestions"], [
            "use page.next with the same grep arguments for more matches, or narrow the "
            "search"])
        nxt = v["page"]["next"]
        v2 = self.grep("hit", **nxt)
        self.assertEqual([m["line"] for m in v2["matches"]], list(range(251, 501)))
        self.check_page(v2, 250, 250, True)
        v3 = self.grep("hit", **v2["page"]["next"])
        self.assertEqual([m["line"] for m in v3["matches"]], list(range(501, 601)))
        self.check_page(v3, 500, 100, False)
        # A continuation needs its revision, and a changed result refuses it.
        err = self.gw.tool_error("grep", {"pattern": "hit", "path": self.d, "offset": 250})
        self.assertCode(err, "invalid_argument")
        self.assertIn("grep expected_revision is required when offset is non-zero", err)
        err = self.gw.tool_error("grep", {"pattern": "hit", "path": self.d, "offset": -1})
        self.assertIn("grep offset must be non-negative", err)
        self.gw.write(self.p("g.txt"), "hit\n")
        err = self.gw.tool_error("grep", dict({"pattern": "hit", "path": self.d}, **nxt))
        self.assertCode(err, "invalid_argument")
        self.assertIn("grep continuation is stale", err)
        self.assertIn("restart at offset 0", err)

    def test_grep_result_stays_within_20_kib(self):
        # 100 matches of 1000 bytes: the page holds them all, the view only
        # what fits in 20 KiB; the rest is counted and comes next.
        self.gw.write(self.p("wide.txt"), "".join("hit%0996d\n" % i for i in range(1, 101)))
        v = self.grep("hit")
        self.assertLessEqual(text_bytes(v), BUDGET)
        shown = v["returned_count"]
        self.assertGreater(shown, 10)
        self.assertLess(shown, 25)
        self.assertEqual(v["returned_match_count"], shown)
        self.assertEqual(v["omitted_match_count"], 100 - shown)
        self.assertEqual((v["total"], v["has_more"], v["truncated"]), (100, True, True))
        self.check_page(v, 0, shown, True)
        seen = [m["line"] for m in v["matches"]]
        while v["has_more"]:
            v = self.grep("hit", **v["page"]["next"])
            self.assertLessEqual(text_bytes(v), BUDGET)
            seen += [m["line"] for m in v["matches"]]
        self.assertEqual(seen, list(range(1, 101)))

    def test_grep_long_lines_are_clipped(self):
        # 10 KB on one line: its head and tail around the host's marker; a
        # line over 1 MiB: the host's notice.
        self.gw.write(self.p("long.txt"), "a" * 6000 + "NEEDLE" + "b" * 4000 + "\nshort NEEDLE\n")
        self.gw.write(self.p("huge.txt"), "c" * 1100000 + "NEEDLE\n")
        v = self.grep("NEEDLE")
        by = {(m["file"], m["line"]): m for m in v["matches"]}
        long1 = by[(self.p("long.txt"), 1)]
        self.assertIs(long1["content_truncated"], True)
        self.assertIn("\n...[line truncated]...\n", long1["content"])
        head, tail = long1["content"].split("\n...[line truncated]...\n")
        self.assertEqual(head, "a" * 2048)
        self.assertEqual(tail, "b" * 1024)
        self.assertNotIn("content_truncated", by[(self.p("long.txt"), 2)])
        huge = [m for m in v["matches"] if m["file"] == self.p("huge.txt")]
        self.assertEqual(len(huge), 1)
        self.assertTrue(huge[0]["content"].startswith("[match omitted: line exceeds 1 MiB"))
        self.assertIs(v["content_truncated"], True)
        self.assertIs(v["truncated"], True)

    def test_grep_masks_protected_files(self):
        # A sensitive file's matches are found but not shown; unconfined
        # shows them with the credential values masked; the host's own
        # credential files are never shown.
        self.sh("printf 'API_KEY=sk-e2e-secret-42 MARKER\\n' > .env && mkdir -p .wuu && "
                "printf 'MARKER token-e2e-77\\n' > .wuu/auth.json && echo 'MARKER ok' > a.txt")
        for mode in ("standard", "read_only", "unconfined"):
            with self.subTest(mode=mode):
                v = self.gw.view("grep", {"pattern": "MARKER", "path": self.d}, mode)
                by = {m["file"]: m["content"] for m in v["matches"]}
                self.assertEqual(by[self.p("a.txt")], "MARKER ok")
                self.assertEqual(by[self.p(".wuu/auth.json")],
                                 "[REDACTED: Wuu credential file content]")
                if mode == "unconfined":
                    self.assertIn("MARKER", by[self.p(".env")])
                    self.assertIn("[REDACTED]", by[self.p(".env")])
                else:
                    self.assertEqual(by[self.p(".env")], "[REDACTED: sensitive file content]")
                text = v.result["content"][0]["text"]
                self.assertNotIn("sk-e2e-secret-42", text)
                self.assertNotIn("token-e2e-77", text)

    def test_grep_refusals_are_error_replies(self):
        self.gw.write(self.p("a.txt"), "x\n")
        err = self.gw.tool_error("grep", {"pattern": "foo((", "path": self.d})
        self.assertIn("invalid regex", err)
        self.assertTrue("unclosed group" in err or "Unmatched" in err, err)
        self.assertIn("grep requires pattern",
                      self.gw.tool_error("grep", {"pattern": "  ", "path": self.d}))
        self.assertCode(self.gw.tool_error("grep", {"pattern": "x", "path": "../.."}),
                        "path_escape")

    # ---- glob ---------------------------------------------------------------

    def make(self, names):
        for name in names:
            self.gw.write(self.p(name), "x\n")

    def glob_set(self, pattern):
        return {f[len(self.d) + 1:] for f in self.glob(pattern)["files"]}

    def test_glob_view_sorted_by_path(self):
        # Written in path order, so the newest comes last: the host sorts
        # by path, never by time.
        self.make(["a-b.py", "a.py", "b.py", "c.txt", "sub/d.py"])
        v = self.glob("**/*.py")
        self.assertEqual(set(v), LIST_KEYS | {"files"})
        self.assertEqual(v["action"], "glob")
        self.assertEqual(v["files"], [self.p("a-b.py"), self.p("a.py"), self.p("b.py"),
                                      self.p("sub/d.py")])
        self.assertEqual((v["total"], v["record_total"], v["returned_count"], v["has_more"],
                          v["truncated"]), (4, 4, 4, False, False))
        self.check_page(v, 0, 4, False)
        self.assertEqual(v["next_suggestions"], [
            "use read_file for specific candidate files or grep within the matched set "
            "before editing"])
        # A pattern without '/' matches names at any depth (ripgrep's --glob).
        self.assertEqual(self.glob_set("*.py"), {"a-b.py", "a.py", "b.py", "sub/d.py"})
        self.assertEqual(self.glob_set("sub/*.py"), {"sub/d.py"})
        v = self.glob("*.nothing")
        self.assertEqual((v["files"], v["total"]), ([], 0))
        self.assertEqual(v["next_suggestions"], [
            "try a broader glob pattern or inspect the directory with list_files"])

    def test_glob_pages_with_expected_revision(self):
        self.sh("seq -f 'f%03g.c' 1 510 | xargs touch")
        v = self.glob("*.c")
        self.assertEqual((v["total"], v["returned_count"], v["has_more"], v["truncated"]),
                         (510, 500, True, True))
        self.assertEqual(v["files"][0], self.p("f001.c"))
        self.assertEqual(v["files"][-1], self.p("f500.c"))
        self.check_page(v, 0, 500, True)
        v2 = self.glob("*.c", **v["page"]["next"])
        self.assertEqual(v2["files"], [self.p("f%03d.c" % i) for i in range(501, 511)])
        self.check_page(v2, 500, 10, False)
        self.assertIn("glob expected_revision is required",
                      self.gw.tool_error("glob", {"pattern": "*.c", "path": self.d,
                                                  "offset": 500}))
        self.make(["f000.c"])
        err = self.gw.tool_error("glob", dict({"pattern": "*.c", "path": self.d},
                                              **v["page"]["next"]))
        self.assertIn("glob continuation is stale", err)

    def test_glob_braces_and_classes(self):
        self.make(["src/a.c", "src/b.h", "src/deep/c.c", "inc/d.h", "doc/e.txt", "f.py",
                   "a1.c", "x.c", "[lit].c"])
        self.assertEqual(self.glob_set("**/*.{c,h}"),
                         {"src/a.c", "src/b.h", "src/deep/c.c", "inc/d.h", "a1.c", "x.c",
                          "[lit].c"})
        self.assertEqual(self.glob_set("{src,inc}/*.{c,h}"), {"src/a.c", "src/b.h", "inc/d.h"})
        self.assertEqual(self.glob_set("{src/deep,doc}/**"), {"src/deep/c.c", "doc/e.txt"})
        self.assertEqual(self.glob_set("[ab]*.c"), {"a1.c", "src/a.c"})
        self.assertEqual(self.glob_set("\\[lit\\].c"), {"[lit].c"})

    def test_glob_refusals_are_error_replies(self):
        self.make(["a.c"])
        for pattern, why in (("**/*.{c,h", "unmatched '{'"), ("[ab", "unterminated '['")):
            with self.subTest(pattern=pattern):
                err = self.gw.tool_error("glob", {"pattern": pattern, "path": self.d})
                self.assertCode(err, "invalid_argument")
                self.assertIn(why, err)
        self.assertIn("glob requires pattern", self.gw.tool_error("glob", {"pattern": ""}))
        self.assertCode(self.gw.tool_error("glob", {"pattern": "*", "path": "/etc"}),
                        "path_escape")


class GitRepoCase(GatewayTestCase):
    """git runs in root: each test has its own workspace holding one repository
    (a base for the git suites; it has no tests of its own)."""

    def setUp(self):
        self.g = self.gateway()
        if self.g.sh("command -v git")["exit_code"] != 0:
            self.skipTest("git is not installed in the environment")
        self.sh("git init -q -b main . && git config user.name e2e && "
                "git config user.email e2e@example.invalid && mkdir -p sub && "
                "echo a > sub/a.txt && echo k > keep.txt && git add . && git commit -qm one")

    def sh(self, script, mode=None):
        return self.g.sh_ok(script, mode)

    def git(self, sub, args=None, mode=None, **kw):
        a = {"subcommand": sub}
        if args is not None:
            a["args"] = args
        return self.g.view("git", a, mode, **kw)

    def git_error(self, sub, args=None, mode=None):
        a = {"subcommand": sub}
        if args is not None:
            a["args"] = args
        return self.g.tool_error("git", a, mode)


class Git(GitRepoCase):
    """The git tool's views, its allow-list and its secret guards."""

    def test_git_view(self):
        v = self.git("log", ["--format=%s"])
        self.assertEqual(set(v), GIT_KEYS)
        self.assertEqual((v["action"], v["subcommand"], v["exit_code"], v["output"],
                          v["timed_out"]), ("log", "log", 0, "one\n", False))
        self.assertEqual(v["next_suggestions"], [
            "use this git output as evidence, or read_file relevant paths before editing"])
        # Multi-word forms: the subcommand joined with the first argument.
        v = self.git("stash", ["list"])
        self.assertEqual((v["action"], v["subcommand"]), ("stash_list", "stash list"))
        v = self.git("worktree list")
        self.assertEqual((v["action"], v["subcommand"], v["exit_code"]),
                         ("worktree_list", "worktree list", 0))
        # A command that fails is a result with its exit code.
        v = self.git("show", ["no-such-rev"])
        self.assertNotEqual(v["exit_code"], 0)
        self.assertEqual(v["next_suggestions"], [
            "inspect the git output, then correct the command or run git status before "
            "retrying"])

    def test_git_status_is_structured(self):
        self.sh("echo b >> sub/a.txt && echo n > new.txt && echo s > staged.txt && "
                "git add staged.txt && git mv keep.txt moved.txt && echo m >> moved.txt")
        v = self.git("status")
        self.assertEqual(set(v), GIT_KEYS | {"staged", "unstaged", "untracked"})
        self.assertEqual(v["action"], "status")
        self.assertEqual(sorted(v["staged"], key=lambda e: e["file"]),
                         [{"file": "moved.txt", "status": "renamed"},
                          {"file": "staged.txt", "status": "added"}])
        self.assertEqual(sorted(v["unstaged"], key=lambda e: e["file"]),
                         [{"file": "moved.txt", "status": "modified"},
                          {"file": "sub/a.txt", "status": "modified"}])
        self.assertEqual(v["untracked"], ["new.txt"])
        self.assertEqual(v["next_suggestions"], [
            "run git diff or read_file relevant paths before deciding what to stage, commit, "
            "or report"])
        self.sh("git rm -q --cached sub/a.txt")
        v = self.git("status", ["--short"])
        self.assertIn({"file": "sub/a.txt", "status": "deleted"}, v["staged"])

    def test_git_add_commit_and_trailer(self):
        self.sh("echo c > c.txt && echo d > d.txt")
        v = self.git("add", ["c.txt"])
        self.assertEqual(v["staged"], [{"file": "c.txt", "status": "added"}])
        self.assertEqual(v["untracked"], ["d.txt"])
        v = self.git("restore --staged", ["c.txt"])
        self.assertEqual(v["staged"], [])
        self.git("add", ["c.txt", "d.txt"])
        v = self.git("commit", ["-m", "two (with parens; and $dollars)"], attribution=True)
        self.assertEqual(set(v), GIT_KEYS | {"commit_sha", "commit_subject"})
        self.assertEqual(v["commit_subject"], "two (with parens; and $dollars)")
        self.assertEqual(v["commit_sha"], self.sh("git rev-parse HEAD").strip())
        body = self.sh("git log -1 --format=%B")
        self.assertEqual(body.count(TRAILER), 1, body)
        # Without attribution, no trailer; with it twice, still one.
        self.sh("echo e > e.txt && git add e.txt")
        self.git("commit", ["-m", "three"])
        self.assertNotIn("WUU Agent", self.sh("git log -1 --format=%B"))
        self.sh("echo f > f.txt && git add f.txt")
        self.git("commit", ["-m", "four", "-m", TRAILER], attribution=True)
        self.assertEqual(self.sh("git log -1 --format=%B").count(TRAILER), 1)

    def bash(self, command, attribution=True, **args):
        a = {"command": command}
        a.update(args)
        return self.g.view("bash", a, attribution=attribution)

    def test_bash_commits_get_the_trailer(self):
        """git_attribution_enabled reaches the commits bash makes, as the
        host's worker does it: a git launcher first on the command's PATH
        adds the trailer once, leaves an amend alone, and refuses to run
        itself as git."""
        v = self.bash("echo b > b.txt && git add b.txt && git commit -qm 'via bash'")
        self.assertEqual(v["exit_code"], 0, v["output"])
        self.assertEqual(v["command"], "echo b > b.txt && git add b.txt && "
                                       "git commit -qm 'via bash'")
        self.assertEqual(self.sh("git log -1 --format=%B").count(TRAILER), 1)
        # git's own options before the subcommand, the trailer already given.
        v = self.bash("echo c > sub/c.txt && git -C sub add c.txt && "
                      "git -C sub commit -qm c -m '%s'" % TRAILER)
        self.assertEqual(v["exit_code"], 0, v["output"])
        self.assertEqual(self.sh("git log -1 --format=%B").count(TRAILER), 1)
        # An amend keeps the commit it amends as it was.
        self.sh("echo h > h.txt && git add h.txt && git commit -qm human")
        v = self.bash("git commit -q --amend -m 'amended through bash'")
        self.assertEqual(v["exit_code"], 0, v["output"])
        self.assertNotIn("WUU Agent", self.sh("git log -1 --format=%B"))
        # Without attribution, no trailer.
        self.bash("echo n > n.txt && git add n.txt && git commit -qm none", attribution=False)
        self.assertNotIn("WUU Agent", self.sh("git log -1 --format=%B"))
        # A command that empties its environment finds only the launcher.
        v = self.bash('env -i PATH="$PATH" git status')
        self.assertEqual(v["exit_code"], 127, v["output"])
        self.assertIn("git launcher itself", v["stderr_tail"])
        # A background commit is attributed too.
        self.bash("echo g > g.txt && git add g.txt && git commit -qm background",
                  run_in_background=True)
        deadline = time.monotonic() + 20
        while "background" not in self.sh("git log -1 --format=%s"):
            self.assertLess(time.monotonic(), deadline, "the background commit never landed")
            time.sleep(0.2)
        self.assertEqual(self.sh("git log -1 --format=%B").count(TRAILER), 1)

    def test_git_allow_list(self):
        refused = [("checkout", ["main"]), ("reset", ["--hard"]), ("clean", ["-fd"]),
                   ("config", ["user.name", "x"]), ("branch", ["newbranch"]),
                   ("branch", ["-D", "main"]), ("tag", ["v1"]), ("remote", ["add", "o", "/x"]),
                   ("push", ["--force"]), ("push", ["origin", "main"]),
                   ("commit", ["--author", "x <y@z>", "-m", "m"]), ("commit", []),
                   ("commit", ["-m", "m", "--no-verify"]), ("add", ["-A"]), ("add", ["."]),
                   ("add", ["*.txt"]), ("add", [":(glob)x"]), ("add", ["../x"]),
                   ("cat-file", ["-p", "HEAD"]), ("log", ["-c", "core.pager=x"]),
                   ("log", ["--exec-path=/tmp"]), ("status", [";"]), ("log", ["$(id)"]),
                   ("diff", ["--no-index", "a", "b"]), ("stash", []), ("stash", ["drop"]),
                   ("config --list", ["--default=x"])]
        for sub, args in refused:
            with self.subTest(sub=sub, args=args):
                err = self.git_error(sub, args)
                self.assertCode(err, ("permission_denied", "invalid_argument"))
        self.assertIn("git subcommand \"checkout\" is not allowed in restricted mode",
                      self.git_error("checkout", ["main"]))
        self.assertIn("blocked metacharacter", self.git_error("status", [";"]))
        self.assertIn("flag \"--default\" is not allowed",
                      self.git_error("config --list", ["--default=x"]))
        self.assertIn("git requires subcommand", self.git_error(" "))
        # Nothing refused happened.
        self.assertEqual(self.sh("git branch --list && git tag -l && git status --short"),
                         "* main\n")
        allowed = [("branch", ["--list"]), ("branch", ["-a"]), ("tag", ["-l"]),
                   ("remote", ["-v"]), ("config", ["--get", "user.name"]),
                   ("config", ["--get", "--default", "d", "no.such.key"]),
                   ("config --list", []), ("config --list", ["--show-scope"]),
                   ("rev-parse", ["HEAD"]), ("ls-files", []),
                   ("cat-file", ["-t", "HEAD"]), ("describe", ["--always"]),
                   ("for-each-ref", []), ("shortlog", ["-s", "HEAD"]), ("reflog", []),
                   ("merge-base", ["HEAD", "HEAD"]), ("grep", ["-n", "a"]), ("blame", ["keep.txt"])]
        for sub, args in allowed:
            with self.subTest(sub=sub, args=args):
                self.assertEqual(self.git(sub, args)["exit_code"], 0)

    def test_git_guards_sensitive_paths(self):
        # The host's secret guards, in every mode: nothing sensitive is
        # staged or committed through the tool, and no diff or grep shows a
        # sensitive file's content.
        secret = "sk-e2e-" + unique("s")
        self.sh("mkdir -p conf && printf 'TOKEN=%s\\n' > conf/.env && echo ok > conf/a.txt"
                % secret)
        for args in (["conf/.env"], ["conf"], ["--", "conf"]):
            with self.subTest(args=args):
                err = self.git_error("add", args)
                self.assertCode(err, "permission_denied")
                self.assertIn("git add refuses sensitive path", err)
                self.assertIn("conf/.env", err)
        self.assertEqual(self.git("add", ["conf/a.txt"])["staged"],
                         [{"file": "conf/a.txt", "status": "added"}])
        # Staged behind the tool's back: commit refuses, unconfined too.
        self.sh("git add -f conf/.env")
        for mode in ("standard", "unconfined"):
            with self.subTest(mode=mode):
                err = self.git_error("commit", ["-m", "leak"], mode)
                self.assertIn("git commit refuses staged sensitive path \"conf/.env\"", err)
        self.assertEqual(self.sh("git log --format=%s"), "one\n")
        # Content of a sensitive path: refused by name, masked in output.
        self.sh("git commit -qm leak && printf 'TOKEN=%s-2\\n' > conf/.env" % secret)
        for sub, args in (("diff", ["conf/.env"]), ("show", ["HEAD:conf/.env"]),
                          ("log", ["-p", "--", "conf/.env"]), ("grep", ["TOKEN", "conf/.env"])):
            with self.subTest(sub=sub, args=args):
                err = self.git_error(sub, args)
                self.assertIn("refuses to inspect sensitive path", err)
        for mode in ("standard", "unconfined"):
            with self.subTest(mode=mode):
                for sub, args in (("show", ["HEAD"]), ("diff", []), ("grep", ["TOKEN"])):
                    v = self.git(sub, args, mode)
                    self.assertNotIn(secret, json.dumps(v), (sub, args))
                    self.assertIs(v.get("redacted"), True, (sub, args))
                v = self.git("show", ["HEAD"], mode)
                self.assertIn('[REDACTED git diff for sensitive path "conf/.env"', v["output"])
                self.assertIn("conf/a.txt", self.git("show", ["--stat", "HEAD"], mode)["output"])

    def test_git_masks_credential_values(self):
        # The host's masks on every git output: key = value, bearer
        # tokens, and a password in a remote's URL.
        self.sh("printf 'password = hunter2e2e\\nAuthorization: Bearer tok.e2e/xyz\\n"
                "plain line\\n' > settings.txt && git add settings.txt && git commit -qm s && "
                "git remote add origin https://e2e-user:pw-e2e-9@example.invalid/r.git")
        v = self.git("show", ["HEAD"])
        self.assertIs(v["redacted"], True)
        for secret in ("hunter2e2e", "tok.e2e/xyz", "pw-e2e-9"):
            self.assertNotIn(secret, v["output"])
        self.assertIn("+plain line", v["output"])
        self.assertIn("+password=[REDACTED]", v["output"])
        self.assertIn("Authorization:[REDACTED]", v["output"])
        v = self.git("remote", ["-v"])
        self.assertIn("https://[REDACTED]@example.invalid/r.git", v["output"])
        self.assertNotIn("pw-e2e-9", v["output"])
        # Nothing to mask, nothing said.
        self.assertNotIn("redacted", self.git("log", ["--format=%s"]))

    def test_git_read_only_refuses_the_writes(self):
        self.sh("echo c > c.txt")
        for sub, args in (("add", ["c.txt"]), ("commit", ["-m", "x"]), ("push", []),
                          ("restore --staged", ["keep.txt"])):
            with self.subTest(sub=sub):
                err = self.git_error(sub, args, "read_only")
                self.assertCode(err, "permission_denied")
                self.assertIn("read-only", err)
        self.assertEqual(self.sh("git status --short"), "?? c.txt\n")
        self.assertEqual(self.git("status", mode="read_only")["untracked"], ["c.txt"])
        self.assertEqual(self.git("log", ["--format=%s"], "read_only")["output"], "one\n")

    def test_git_output_keeps_tail(self):
        self.sh("seq 1 50000 > big.txt && git add big.txt && git commit -qm big")
        v = self.git("show", ["--format=", "HEAD"])
        self.assertIs(v["truncated"], True)
        self.assertLessEqual(len(v["output"].encode()), 30 * 1024)
        self.assertTrue(v["output"].rstrip("\n").endswith("+50000"), v["output"][-200:])
