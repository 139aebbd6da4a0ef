"""write_file, edit_file and apply_patch as the host's own worker answers them
(protocol section 3; the host's internal/tools/tool_files.go and
tool_apply_patch.go): argument names and defaults, the views key for key,
the diagnostics with candidates, the overwrite policy, CRLF files, and a
patch planned whole before anything is written.

Each test checks a file's content with write_file itself: writing the
expected bytes back answers old_file_sha, the digest of what was there.
So these tests need no other tool and run on every backend.
"""

import hashlib
import json
import unittest

from sgclient import GatewayTestCase, code_of, unique

WRITE_CREATE_KEYS = {"action", "path", "written_bytes", "new_file_sha",
                     "workspace_revision", "diff"}
WRITE_OVERWRITE_KEYS = WRITE_CREATE_KEYS | {"old_file_sha"}
EDIT_KEYS = {"action", "path", "old_file_sha", "new_file_sha", "workspace_revision",
             "diff", "next_suggestions"}
SMALL_MAX = 32 * 1024  # the host's maxImplicitWriteFileOverwriteBytes


def sha(text):
    if isinstance(text, str):
        text = text.encode()
    return "sha256:" + hashlib.sha256(text).hexdigest()


def body(err):
    """An error reply's text after its stable code ("not_found: ...")."""
    return err.split(": ", 1)[1] if ": " in err else err


class Base(GatewayTestCase):
    shared_gateway = True

    def path(self, name):
        return "%s/%s" % (self.dir, name)

    def setUp(self):
        self.dir = unique("edits")

    def assertContent(self, path, expected):
        """path holds exactly expected (writing it back changes nothing)."""
        v = self.gw.write(path, expected)
        self.assertEqual(v["action"], "overwrite", "%s does not exist" % path)
        self.assertEqual(v["old_file_sha"], sha(expected),
                         "%s did not hold %r" % (path, expected[:200]))

    def assertAbsent(self, path):
        """Nothing is at path (a create_only write makes it, then it is gone
        again from the test's point of view: nothing reads it after)."""
        v = self.gw.write(path, "", create_only=True)
        self.assertEqual(v["action"], "create", "%s exists" % path)


class WriteFile(Base):
    def test_create_view_is_the_hosts(self):
        """The old dialect answered {"bytes_written","path","created"}."""
        p = self.path("notes/today.txt")
        v = self.gw.write(p, "hello\nworld")
        self.assertEqual(set(v), WRITE_CREATE_KEYS, v)
        self.assertEqual(v["action"], "create")
        self.assertEqual(v["path"], p)
        self.assertEqual(v["written_bytes"], 11)
        self.assertEqual(v["new_file_sha"], sha("hello\nworld"))
        self.assertEqual(v["diff"], {"new_file": True, "lines": 2})
        self.assertIsInstance(v["workspace_revision"], str)
        self.assertIsNone(v.structured)

    def test_overwrite_view_and_diff(self):
        p = self.path("a.txt")
        self.gw.write(p, "one\ntwo\nthree\n")
        v = self.gw.write(p, "one\nTWO\nthree\n")
        self.assertEqual(set(v), WRITE_OVERWRITE_KEYS, v)
        self.assertEqual(v["action"], "overwrite")
        self.assertEqual(v["old_file_sha"], sha("one\ntwo\nthree\n"))
        self.assertEqual(v["new_file_sha"], sha("one\nTWO\nthree\n"))
        self.assertEqual(v["diff"], {"hunks": [{"old_start": 1, "new_start": 1, "lines": [
            {"op": "equal", "content": "one"}, {"op": "delete", "content": "two"},
            {"op": "insert", "content": "TWO"}, {"op": "equal", "content": "three"}]}]})
        # Unchanged content: an empty diff.
        self.assertEqual(self.gw.write(p, "one\nTWO\nthree\n")["diff"], {})

    def test_create_only(self):
        p = self.path("once.txt")
        self.assertEqual(self.gw.write(p, "1", create_only=True)["action"], "create")
        err = self.gw.tool_error("write_file", {"path": p, "content": "2", "create_only": True})
        self.assertEqual(body(err), "file already exists: %s" % p)
        self.assertCode(err, "invalid_argument")
        self.assertContent(p, "1")

    def test_required_arguments(self):
        err = self.gw.tool_error("write_file", {"path": self.path("x")})
        self.assertIn("write_file requires content", err)
        err = self.gw.tool_error("write_file", {"path": "  ", "content": "x"})
        self.assertIn("write_file requires path", err)

    def test_broad_overwrite_needs_a_policy(self):
        """An existing file over 32 KiB is replaced with different content
        only under overwrite_policy; `generated` only for generated paths."""
        gw = self.gw
        big = "x" * (SMALL_MAX + 1)
        src = self.path("src/big.js")
        gw.write(src, big)
        for policy in (None, "small_file", "generated"):
            args = {"path": src, "content": "short"}
            if policy:
                args["overwrite_policy"] = policy
            err = gw.tool_error("write_file", args)
            self.assertTrue(body(err).startswith(
                "write_file refuses broad existing-file overwrite: error_kind=broad_overwrite "
                "path=%s current_size_bytes=%d max_implicit_overwrite_bytes=%d"
                % (src, SMALL_MAX + 1, SMALL_MAX)), err)
            self.assertIn("safe_retry=", err)
        self.assertContent(src, big)  # same content is always allowed
        v = gw.write(src, "short", overwrite_policy="explicit_user_requested")
        self.assertEqual(v["diff"], {"old_lines": 1, "new_lines": 1, "truncated": True,
                                     "summary": "large full-file rewrite; inline diff "
                                                "omitted from tool result"})
        gen = self.path("dist/app.min.js")
        gw.write(gen, big)
        self.assertEqual(gw.write(gen, "y", overwrite_policy="generated")["action"], "overwrite")
        # At most 32 KiB needs no policy; an unknown policy is refused.
        small = self.path("small.txt")
        gw.write(small, "s" * SMALL_MAX)
        gw.write(small, "t")
        err = gw.tool_error("write_file", {"path": small, "content": "u",
                                           "overwrite_policy": "always"})
        self.assertIn("write_file invalid overwrite_policy", err)

    def test_sensitive_and_escaping_paths(self):
        err = self.gw.tool_error("write_file", {"path": self.path(".env"), "content": "K=v"})
        self.assertIn("write_file refuses to write sensitive path", err)
        self.assertCode(err, "permission_denied")
        # In every mode, unconfined included.
        err = self.gw.tool_error("write_file", {"path": self.path("id_rsa"), "content": "k"},
                                 mode="unconfined")
        self.assertIn("refuses to write sensitive path", err)
        self.assertCode(self.gw.tool_error("write_file", {"path": "../out.txt", "content": "x"}),
                        "path_escape")

    def test_mode_kept_on_overwrite(self):
        """The atomic replace keeps an existing file's mode; a new file is
        0644, as the host writes it."""
        p = self.path("mode.sh")
        self.gw.write(p, "#!/bin/sh\n")
        self.assertEqual(self.gw.sh_ok("stat -c %%a %s; chmod 750 %s" % (p, p)).strip(), "644")
        self.gw.write(p, "#!/bin/sh\necho\n")
        self.assertEqual(self.gw.sh_ok("stat -c %%a %s" % p).strip(), "750")


class EditFile(Base):
    def edit(self, path, old, new, **kw):
        a = {"path": path, "old_text": old, "new_text": new}
        a.update(kw)
        return self.gw.view("edit_file", a)

    def edit_error(self, path, old, new, **kw):
        a = {"path": path, "old_text": old, "new_text": new}
        a.update(kw)
        return self.gw.tool_error("edit_file", a)

    def test_view_is_the_hosts(self):
        """The old dialect took old_string/new_string and answered
        {"replacements","path"}."""
        p = self.path("e.txt")
        self.gw.write(p, "hello world\nbye\n")
        v = self.edit(p, "world", "there")
        self.assertEqual(set(v), EDIT_KEYS, v)
        self.assertEqual(v["action"], "edit")
        self.assertEqual(v["path"], p)
        self.assertEqual(v["old_file_sha"], sha("hello world\nbye\n"))
        self.assertEqual(v["new_file_sha"], sha("hello there\nbye\n"))
        self.assertEqual(v["diff"]["hunks"][0]["lines"][:2], [
            {"op": "delete", "content": "hello world"},
            {"op": "insert", "content": "hello there"}])
        self.assertTrue(v["next_suggestions"][0].startswith("run targeted validation"))
        self.assertContent(p, "hello there\nbye\n")
        err = self.gw.tool_error("edit_file", {"path": p, "old_string": "bye", "new_string": "x"})
        self.assertIn("old_text", err)

    def test_refusals(self):
        p = self.path("r.txt")
        self.gw.write(p, "abc\n")
        self.assertIn("edit_file requires old_text", self.edit_error(p, "", "x"))
        self.assertIn("old_text and new_text are identical", self.edit_error(p, "abc", "abc"))
        self.assertIn("edit_file requires", self.gw.tool_error(
            "edit_file", {"path": p, "old_text": "abc"}))

    def test_not_found_shows_candidates_and_indentation(self):
        p = self.path("code.py")
        self.gw.write(p, "def f():\n\tif x:\n\t\treturn 1\n\treturn 2\n")
        err = self.edit_error(p, "    if x:\n        return 1", "pass")
        text = body(err)
        self.assertTrue(text.startswith("old_text_not_found: failed to find old_text in file\n"
                                        "expected:\n  |    if x:\n  |        return 1\n"), text)
        self.assertIn("\ncandidates:\n- lines 2-3 score=4:\n  2|\tif x:\n  3|\t\treturn 1\n", text)
        self.assertIn("  indentation_mismatch: old_text line 1 starts with \"    \"; "
                      "candidate file line 2 starts with \"\\t\".", text)
        self.assertEqual(text.count("\n- lines "), 3)
        self.assertTrue(text.endswith("\n\nsafe_retry: read_file the target range and retry "
                                      "edit_file with exact current old_text and enough "
                                      "surrounding context"), text)
        self.assertContent(p, "def f():\n\tif x:\n\t\treturn 1\n\treturn 2\n")

    def test_ambiguous_and_replace_all(self):
        p = self.path("amb.txt")
        self.gw.write(p, "x = 1\ny = 2\nx = 1\nx = 1\n")
        text = body(self.edit_error(p, "x = 1", "x = 9"))
        self.assertTrue(text.startswith("ambiguous_old_text: old_text matched 3 locations; "), text)
        self.assertIn("- lines 1-1:\n  1|x = 1\n- lines 3-3:\n  3|x = 1\n- lines 4-4:\n", text)
        self.assertIn("\nsafe_retry: ", text)
        self.assertContent(p, "x = 1\ny = 2\nx = 1\nx = 1\n")
        self.edit(p, "x = 1", "x = 9", replace_all=True)
        self.assertContent(p, "x = 9\ny = 2\nx = 9\nx = 9\n")

    def test_crlf_file_takes_lf_text(self):
        p = self.path("win.txt")
        self.gw.write(p, "a\r\nb\r\nc\r\n")
        self.edit(p, "a\nb\n", "x\ny\n")
        self.assertContent(p, "x\r\ny\r\nc\r\n")
        # A mixed file needs the exact bytes.
        m = self.path("mixed.txt")
        self.gw.write(m, "a\r\nb\nc\n")
        self.assertIn("old_text_not_found:", self.edit_error(m, "a\nb", "z"))

    def test_removing_a_test_warns(self):
        """The host's test-contract guard: a change that drops a test from a
        test file is made, and its view says so first."""
        p = self.path("x_test.go")
        self.gw.write(p, "package x\n\nfunc TestKeep(t *testing.T) {}\n"
                         "func TestGone(t *testing.T) {}\n")
        v = self.edit(p, "func TestGone(t *testing.T) {}\n", "")
        self.assertTrue(v["contract_warning"].startswith(
            "this edit removes existing test(s): TestGone. Existing tests encode"), v)
        self.assertEqual(v["next_suggestions"][0],
                         "address the contract_warning before anything else")
        self.assertEqual(len(v["next_suggestions"]), 2)
        w = self.gw.write(p, "package x\n")
        self.assertIn("TestKeep", w["contract_warning"])
        self.assertEqual(w["next_suggestions"],
                         ["address the contract_warning before anything else"])
        # Not a test file: no warning.
        q = self.path("x.go")
        self.gw.write(q, "func TestKeep(t *testing.T) {}\n")
        self.assertNotIn("contract_warning", self.gw.write(q, "\n"))

    def test_sensitive_and_missing(self):
        self.assertIn("refuses to edit sensitive path",
                      self.edit_error(self.path("secrets.env"), "a", "b"))
        self.assertCode(self.edit_error(self.path("nothere.txt"), "a", "b"), "not_found")


def patch(*lines):
    return "\n".join(("*** Begin Patch",) + lines + ("*** End Patch",))


class ApplyPatch(Base):
    def seed(self):
        gw = self.gw
        gw.write(self.path("a.txt"), "one\ntwo\nthree\n")
        gw.write(self.path("old.txt"), "gone\n")
        gw.write(self.path("m.txt"), "mv\n")

    def full_patch(self):
        d = self.dir
        return patch("*** Add File: %s/nested/b.txt" % d, "+alpha", "+beta",
                     "*** Update File: %s/a.txt" % d, "@@ one", " one", "-two", "+TWO",
                     " three",
                     "*** Update File: %s/m.txt" % d, "*** Move to: %s/moved/m2.txt" % d,
                     "@@", "-mv", "+moved",
                     "*** Delete File: %s/old.txt" % d, "")

    def test_add_update_move_delete(self):
        """The old dialect had no apply_patch at all."""
        self.seed()
        d = self.dir
        res = self.gw.tool_ok("apply_patch", {"patchText": self.full_patch()})
        self.assertEqual(res["content"], [{"type": "text", "text":
            "Success. Updated the following files:\nA %s/nested/b.txt\nM %s/a.txt\n"
            "M %s/m.txt -> %s/moved/m2.txt\nD %s/old.txt" % (d, d, d, d, d)}])
        files = res["structured_content"]["files"]
        self.assertEqual([(f["path"], f["action"], f.get("move_path")) for f in files], [
            ("%s/nested/b.txt" % d, "add", None), ("%s/a.txt" % d, "update", None),
            ("%s/m.txt" % d, "move", "%s/moved/m2.txt" % d), ("%s/old.txt" % d, "delete", None)])
        self.assertEqual(files[0]["diff"], {"new_file": True, "lines": 2})
        self.assertEqual(files[3]["diff"], {"hunks": [{"old_start": 1, "new_start": 1, "lines": [
            {"op": "delete", "content": "gone"}]}]})
        self.assertContent(self.path("nested/b.txt"), "alpha\nbeta\n")
        self.assertContent(self.path("a.txt"), "one\nTWO\nthree\n")
        self.assertContent(self.path("moved/m2.txt"), "moved\n")
        self.assertAbsent(self.path("m.txt"))
        self.assertAbsent(self.path("old.txt"))

    def test_dry_run_writes_nothing(self):
        self.seed()
        res = self.gw.tool_ok("apply_patch", {"patch": self.full_patch(), "dryRun": True})
        self.assertTrue(res["content"][0]["text"].startswith(
            "Patch validation succeeded. The following files would be updated:\nA "), res)
        self.assertEqual(len(res["structured_content"]["files"]), 4)
        self.assertContent(self.path("a.txt"), "one\ntwo\nthree\n")
        self.assertContent(self.path("old.txt"), "gone\n")
        self.assertContent(self.path("m.txt"), "mv\n")
        self.assertAbsent(self.path("nested/b.txt"))
        self.assertAbsent(self.path("moved/m2.txt"))

    def test_a_failing_hunk_writes_nothing(self):
        """Every section is planned before any is written: the first one's
        good update is not applied when the second's context is stale."""
        self.seed()
        d = self.dir
        err = self.gw.tool_error("apply_patch", {"patch_text": patch(
            "*** Update File: %s/a.txt" % d, "@@", "-two", "+2",
            "*** Add File: %s/new.txt" % d, "+n",
            "*** Update File: %s/m.txt" % d, "@@", "-not there", "+x")})
        text = body(err)
        self.assertTrue(text.startswith("apply_patch verification failed: %s/m.txt: "
                                        "anchor_not_found: failed to find expected lines\n"
                                        "expected:\n  |not there\n" % d), text)
        self.assertIn("\ncandidates:\n- lines 1-1:\n  1|mv\n", text)
        self.assertTrue(text.endswith("safe_retry: read_file the target range and regenerate "
                                      "the patch against the current file_sha"), text)
        self.assertContent(self.path("a.txt"), "one\ntwo\nthree\n")
        self.assertAbsent(self.path("new.txt"))

    def test_a_failing_commit_rolls_everything_back(self):
        """A patch that plans cleanly can still fail as it is written: here
        the move makes directory `sub`, and the later Add of a file named
        `sub` then fails.  Every section written before it is put back."""
        self.seed()
        d = self.dir
        err = self.gw.tool_error("apply_patch", {"patchText": patch(
            "*** Update File: %s/a.txt" % d, "@@", "-two", "+2",
            "*** Delete File: %s/old.txt" % d,
            "*** Update File: %s/m.txt" % d, "*** Move to: %s/sub/m2.txt" % d, "@@", "-mv", "+x",
            "*** Add File: %s/sub" % d, "+clash")})
        self.assertTrue(body(err).startswith("apply_patch apply failed: "), err)
        self.assertContent(self.path("a.txt"), "one\ntwo\nthree\n")
        self.assertContent(self.path("old.txt"), "gone\n")
        self.assertContent(self.path("m.txt"), "mv\n")
        self.assertAbsent(self.path("sub/m2.txt"))

    def test_ambiguous_context(self):
        p = self.path("amb.txt")
        self.gw.write(p, "x\ny\nx\ny\n")
        text = body(self.gw.tool_error("apply_patch", {"patchText": patch(
            "*** Update File: %s" % p, "@@", "-x", "+z")}))
        self.assertIn("ambiguous_anchor: expected lines matched 2 locations; add more context",
                      text)
        # More context makes it unique; the chunk then applies.
        self.gw.tool_ok("apply_patch", {"patchText": patch(
            "*** Update File: %s" % p, "@@", " y", "-x", "+z")})
        self.assertContent(p, "x\ny\nz\ny\n")

    def test_escaping_path_writes_nothing(self):
        self.seed()
        err = self.gw.tool_error("apply_patch", {"patchText": patch(
            "*** Update File: %s/a.txt" % self.dir, "@@", "-two", "+2",
            "*** Add File: ../../escaped-%s.txt" % self.dir, "+x")})
        self.assertCode(err, "path_escape")
        self.assertIn("apply_patch verification failed:", err)
        self.assertContent(self.path("a.txt"), "one\ntwo\nthree\n")

    def test_format_errors(self):
        self.seed()
        d = self.dir
        cases = [
            (patch("bogus"), 'unexpected patch line "bogus"'),
            ("*** Add File: x\n+y\n", "missing Begin/End Patch markers"),
            (patch("*** Add File: %s/n.txt" % d, "no plus"),
             'Add File lines must start with +: "no plus"'),
            (patch("*** Update File: %s/a.txt" % d), "Update File %s/a.txt has no chunks" % d),
            (patch("*** Update File: %s/a.txt" % d, "@@", "-two", "+2",
                   "*** Delete File: %s/./a.txt" % d), "multiple operations target"),
            (patch("*** Add File: %s/a.txt" % d, "+x"), "file already exists: %s/a.txt" % d),
        ]
        for text, want in cases:
            err = self.gw.tool_error("apply_patch", {"patchText": text})
            self.assertTrue(body(err).startswith("apply_patch verification failed: "), err)
            self.assertIn(want, err)
            self.assertCode(err, "invalid_argument")
        err = self.gw.tool_error("apply_patch", {"patchText": patch(
            "*** Update File: %s/missing.txt" % d, "@@", "-a", "+b")})
        self.assertIn("read file to update %s/missing.txt" % d, err)
        self.assertCode(err, "not_found")
        self.assertIn("apply_patch requires patchText",
                      self.gw.tool_error("apply_patch", {"patchText": "  "}))
        self.assertContent(self.path("a.txt"), "one\ntwo\nthree\n")

    def test_crlf_and_end_of_file(self):
        p = self.path("w.txt")
        self.gw.write(p, "a\r\nb\r\n")
        self.gw.tool_ok("apply_patch", {"patchText": patch(
            "*** Update File: %s" % p, "@@", " b", "+c", "*** End of File")})
        self.assertContent(p, "a\r\nb\r\nc\r\n")

    def test_then_run_needs_the_hosts_nested_calls(self):
        """then_run's patch is a nested call to the host (test_fidelity.ThenRun);
        the host's Execute answers it "parent execution scope is closed",
        and nothing is applied."""
        self.seed()
        res = self.gw.tool("apply_patch", {"patchText": patch(
            "*** Update File: %s/a.txt" % self.dir, "@@", "-two", "+2"),
            "then_run": {"command": "true"}})
        self.assertIs(res.get("is_error"), True)
        self.assertIn("Patch outcome unavailable: parent execution scope is closed",
                      res["content"][0]["text"])
        self.assertContent(self.path("a.txt"), "one\ntwo\nthree\n")

    def test_read_only_mode_refuses_writes(self):
        self.seed()
        for tool, args in (("write_file", {"path": self.path("a.txt"), "content": "x"}),
                           ("edit_file", {"path": self.path("a.txt"), "old_text": "one",
                                          "new_text": "1"}),
                           ("apply_patch", {"patchText": patch(
                               "*** Delete File: %s/a.txt" % self.dir)})):
            err = self.gw.tool_error(tool, args, mode="read_only")
            self.assertIn("read-only", err)
        self.assertContent(self.path("a.txt"), "one\ntwo\nthree\n")


if __name__ == "__main__":
    unittest.main()
