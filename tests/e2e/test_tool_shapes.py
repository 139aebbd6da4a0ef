"""The host's eleven tools as the host calls them, and their results'
shapes as the host's worker writes them; and the old dialect, refused.

Every call goes through hostdriver (the host's client: call.name, the
arguments as a JSON string, the actor, a ToolResult decoded strictly).
For each tool the test uses the host's argument names and compares the
keys of its JSON view with the host's worker's
(internal/tools/tool_files.go, tool_search.go, tool_process_tool.go,
tool_git.go, tool_present_artifact.go, tool_apply_patch.go;
docs/../reference host-wire.md section 3.2): exactly, where the host
writes one fixed map (read_file, write_file, edit_file, list_files,
grep, glob, process, present_artifact); for bash and git, whose views
gain keys on conditions (a sandbox, a verification run, a status
listing), every key the host always writes must be there and no key the
host never writes may be.  `content` must be an array of parts.

Runs on every backend (tests/e2e/run-against.sh) and through relays.
"""

import json
import time
import unittest

import hostdriver as hd
from hostdriver import CallError, HostEnvironment

SLACK = hd.SLACK

READ_VIEW = {"action", "path", "workspace_revision", "content_sha256", "content",
             "num_lines", "start_line", "total_lines", "range", "omitted_ranges",
             "truncated", "next_suggestions"}
READ_DATA = {"text", "path", "content_sha256", "start_line", "num_lines", "total_lines"}
WRITE_CREATE = {"action", "path", "written_bytes", "new_file_sha", "workspace_revision",
                "diff"}
WRITE_OVERWRITE = WRITE_CREATE | {"old_file_sha"}
WRITE_OPTIONAL = {"contract_warning", "next_suggestions"}
EDIT_VIEW = {"action", "path", "old_file_sha", "new_file_sha", "workspace_revision",
             "diff", "next_suggestions"}
LIST_VIEW = {"action", "path", "workspace_revision", "total", "visible_total", "offset",
             "returned_count", "has_more", "page", "truncated", "omitted_entry_count",
             "omitted_protected", "entries", "next_suggestions"}
SEARCH_COMMON = {"action", "pattern", "continuation_supported", "workspace_revision",
                 "total", "record_total", "offset", "has_more", "truncated",
                 "next_suggestions", "returned_count", "page"}
GREP_CONTENT = SEARCH_COMMON | {"matches", "omitted_match_count", "content_truncated",
                                "result_budget_bytes", "returned_match_count"}
GREP_FILES = SEARCH_COMMON | {"files"}
GREP_COUNT = SEARCH_COMMON | {"counts"}
GLOB_VIEW = SEARCH_COMMON | {"files"}
BASH_VIEW = {"action", "command", "exit_code", "duration_ms", "timed_out", "truncated",
             "output", "stdout_tail", "stderr_tail", "stdout_bytes", "stderr_bytes",
             "workspace_revision", "stdout_tail_truncated", "stderr_tail_truncated",
             "full_log_ref", "full_log_bytes", "full_log_sha256", "full_log_sections",
             "next_suggestions"}
BASH_VIEW_OPTIONAL = {"classification", "verification", "sandbox", "requested_command",
                      "resolved_command", "promoted_process_id", "purpose", "scope"}
BASH_DATA = {"exit_code", "timed_out", "stdout", "stderr", "stdout_truncated",
             "stderr_truncated", "full_log_ref", "full_log_sha256", "full_log_sections",
             "promoted_process_id"}
BASH_DATA_OPTIONAL = {"sandbox"}
RECORD_ALWAYS = {"id", "owner_kind", "owner_id", "root_thread_id", "lifecycle",
                 "completion_mode", "status", "pid", "pgid", "tty", "log_path",
                 "command", "cwd", "started_at", "updated_at", "stopped_at"}
RECORD_ALL = set(hd.PROCESS) | {"sandbox_mode", "sandbox_denied", "sandbox_runner_failed",
                                "sandbox_denial_signatures",
                                "sandbox_runner_failure_signatures", "process_start_time"}
PROCESS_READ = {"action", "process_id", "output", "truncated", "start_offset", "end_offset",
                "total_bytes", "timed_out", "duration_ms", "status", "exit_code", "process",
                "next_suggestions"}
PROCESS_WRITE = {"action", "process_id", "bytes_written", "process"}
PROCESS_UPDATE = {"action", "process_id", "completion_mode", "recheck_minutes",
                  "next_recheck_at", "process"}
GIT_ALWAYS = {"action", "subcommand", "exit_code", "output"}
GIT_STATUS = GIT_ALWAYS | {"staged", "unstaged", "untracked"}
ARTIFACT_VIEW = {"execution_export", "name", "size"}

OLD_TOOLS = ("run_command", "list_dir", "stat_path", "delete_path", "move_path", "make_dir")


class ToolShapes(unittest.TestCase):
    """One environment for the class (one sandbox on a cloud backend)."""

    @classmethod
    def setUpClass(cls):
        cls.env = HostEnvironment(session=hd.identity_for("s", "shapes", "", {})[8:24])
        try:
            cls.env.connect()
        except BaseException:
            cls.env.cleanup()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.env.cleanup()

    def tearDown(self):
        for c in self.env.clients:
            self.assertIsNone(c.invalid_line,
                              "a line the host cannot decode: %r" % c.invalid_line)

    # -- helpers --

    def result(self, tool, args, mode="standard"):
        res = self.env.execute(tool, args, mode=mode)
        self.assertIsInstance(res.get("content"), list, "content is not an array of parts")
        self.assertGreaterEqual(len(res["content"]), 1, "no content parts")
        for part in res["content"]:
            self.assertIsInstance(part, dict)
            self.assertIn(part.get("type"), hd._PART_TYPES)
        self.assertFalse(res.get("is_error"), "a tool result flagged is_error")
        return res

    def view(self, tool, args, mode="standard"):
        """The single text part's JSON view (and the whole result)."""
        res = self.result(tool, args, mode)
        self.assertEqual(len(res["content"]), 1, json.dumps(res)[:500])
        self.assertEqual(res["content"][0]["type"], "text")
        view = json.loads(res["content"][0]["text"])
        self.assertIsInstance(view, dict)
        return view, res

    def assertKeys(self, got, exact=None, always=None, optional=(), what="view"):
        keys = set(got)
        if exact is not None:
            extra = keys - set(exact) - set(optional)
            missing = set(exact) - keys
            self.assertFalse(missing or extra, "%s keys: missing %s, not the host's %s"
                             % (what, sorted(missing), sorted(extra)))
        else:
            missing = set(always) - keys
            extra = keys - set(always) - set(optional)
            self.assertFalse(missing or extra, "%s keys: missing %s, not the host's %s"
                             % (what, sorted(missing), sorted(extra)))

    def write(self, path, content):
        return self.view("write_file", {"path": path, "content": content})[0]

    def start(self, command):
        view, res = self.view("bash", {"command": command, "run_in_background": True})
        self.assertEqual(view.get("action"), "start")
        self.addCleanup(self._stop_quietly, view.get("id"))
        return view

    def _stop_quietly(self, pid):
        try:
            self.env.request("stop", {"id": pid})
        except CallError:
            pass

    # -- the eleven tools --

    def test_write_file(self):
        name = "w-%d.txt" % time.monotonic_ns()
        view, res = self.view("write_file", {"path": name, "content": "one\ntwo\n"})
        self.assertKeys(view, exact=WRITE_CREATE)
        self.assertEqual(view["action"], "create")
        self.assertEqual(view["written_bytes"], 8)
        self.assertTrue(view["new_file_sha"].startswith("sha256:"))
        self.assertNotIn("structured_content", res)
        view, _ = self.view("write_file", {"path": name, "content": "three\n"})
        self.assertKeys(view, exact=WRITE_OVERWRITE, optional=WRITE_OPTIONAL)
        self.assertEqual(view["action"], "overwrite")
        with self.assertRaises(CallError):
            self.env.execute("write_file", {"path": name, "content": "x", "create_only": True})

    def test_read_file(self):
        name = "r-%d.txt" % time.monotonic_ns()
        self.write(name, "alpha\nbeta\n")
        view, res = self.view("read_file", {"path": name, "offset": 1, "limit": 1})
        self.assertKeys(view, exact=READ_VIEW)
        self.assertEqual(view["action"], "read")
        self.assertEqual(view["content"], "1|alpha\n")
        self.assertEqual(view["range"], {"start_line": 1, "end_line": 1})
        self.assertTrue(view["truncated"])
        self.assertIsInstance(res.get("structured_content"), dict)
        self.assertKeys(res["structured_content"], exact=READ_DATA, what="structured_content")
        self.assertEqual(res["structured_content"]["text"], "alpha\n")

    def test_edit_file(self):
        name = "e-%d.txt" % time.monotonic_ns()
        self.write(name, "keep\nold line\n")
        view, _ = self.view("edit_file", {"path": name, "old_text": "old line",
                                          "new_text": "new line"})
        self.assertKeys(view, exact=EDIT_VIEW, optional={"contract_warning"})
        self.assertEqual(view["action"], "edit")
        self.write(name, "a a a\n")
        with self.assertRaises(CallError) as cm:
            self.env.execute("edit_file", {"path": name, "old_text": "a", "new_text": "b"})
        self.assertIn("ambiguous_old_text", str(cm.exception))
        view, _ = self.view("edit_file", {"path": name, "old_text": "a", "new_text": "b",
                                          "replace_all": True})
        self.assertKeys(view, exact=EDIT_VIEW, optional={"contract_warning"})
        with self.assertRaises(CallError) as cm:
            self.env.execute("edit_file", {"path": name, "old_text": "absent",
                                           "new_text": "x"})
        self.assertIn("old_text_not_found", str(cm.exception))

    def test_apply_patch(self):
        stem = "p-%d" % time.monotonic_ns()
        self.write(stem + "-a.txt", "one\ntwo\n")
        patch = ("*** Begin Patch\n*** Add File: %s-b.txt\n+hello\n"
                 "*** Update File: %s-a.txt\n@@\n one\n-two\n+three\n*** End Patch"
                 % (stem, stem))
        res = self.result("apply_patch", {"patchText": patch})
        self.assertEqual(len(res["content"]), 1)
        text = res["content"][0]["text"]
        self.assertTrue(text.startswith("Success. Updated the following files:"), text)
        self.assertIn("A %s-b.txt" % stem, text)
        self.assertIn("M %s-a.txt" % stem, text)
        sc = res.get("structured_content")
        self.assertIsInstance(sc, dict)
        self.assertKeys(sc, exact={"files"}, what="structured_content")
        for f in sc["files"]:
            self.assertKeys(f, exact={"path", "action", "diff"}, optional={"move_path"},
                            what="files[]")

    def test_list_files(self):
        d = "l-%d" % time.monotonic_ns()
        self.write(d + "/f.txt", "x")
        view, _ = self.view("list_files", {"path": d})
        self.assertKeys(view, exact=LIST_VIEW)
        self.assertEqual(view["action"], "list")
        self.assertEqual(len(view["entries"]), 1)
        self.assertKeys(view["entries"][0], exact={"name", "path", "is_dir", "size"},
                        what="entries[]")
        self.assertIsInstance(view["page"], dict)

    def test_grep(self):
        d = "g-%d" % time.monotonic_ns()
        self.write(d + "/a.txt", "needle one\nhay\nneedle two\n")
        view, _ = self.view("grep", {"pattern": "needle", "path": d})
        self.assertKeys(view, exact=GREP_CONTENT)
        self.assertEqual(view["total"], 2)
        for m in view["matches"]:
            self.assertKeys(m, exact={"file", "line", "content"},
                            optional={"content_truncated"}, what="matches[]")
        view, _ = self.view("grep", {"pattern": "NEEDLE", "path": d, "include": "*.txt",
                                     "context": 1, "ignore_case": True})
        self.assertKeys(view, exact=GREP_CONTENT)
        self.assertEqual(view["total"], 2)
        view, _ = self.view("grep", {"pattern": "needle", "path": d, "include": "*.md"})
        self.assertEqual(view["total"], 0)
        view, _ = self.view("grep", {"pattern": "needle", "path": d,
                                     "output_mode": "files_with_matches"})
        self.assertKeys(view, exact=GREP_FILES)
        view, _ = self.view("grep", {"pattern": "needle", "path": d, "output_mode": "count"})
        self.assertKeys(view, exact=GREP_COUNT)
        self.assertKeys(view["counts"][0], exact={"file", "count"}, what="counts[]")

    def test_glob(self):
        d = "gl-%d" % time.monotonic_ns()
        self.write(d + "/x/y.txt", "x")
        view, _ = self.view("glob", {"pattern": "**/*.txt", "path": d})
        self.assertKeys(view, exact=GLOB_VIEW)
        self.assertEqual(view["files"], [d + "/x/y.txt"])

    def test_bash(self):
        view, res = self.view("bash", {"command": "echo out; echo err >&2; exit 3",
                                       "timeout_seconds": 30})
        self.assertKeys(view, always=BASH_VIEW, optional=BASH_VIEW_OPTIONAL)
        self.assertEqual(view["action"], "run")
        self.assertEqual(view["exit_code"], 3)
        sc = res.get("structured_content")
        self.assertIsInstance(sc, dict)
        self.assertKeys(sc, always=BASH_DATA, optional=BASH_DATA_OPTIONAL,
                        what="structured_content")
        self.assertEqual(sc["stdout"], "out\n")
        self.assertEqual(sc["stderr"], "err\n")
        d = "cwd-%d" % time.monotonic_ns()
        self.write(d + "/here.txt", "x")
        view, res = self.view("bash", {"command": "ls", "cwd": d})
        self.assertKeys(view, always=BASH_VIEW, optional=BASH_VIEW_OPTIONAL)
        self.assertEqual(res["structured_content"]["stdout"], "here.txt\n")

    def test_bash_background(self):
        view = self.start("sleep 30")
        self.assertKeys(view, always=RECORD_ALWAYS | {"action"}, optional=RECORD_ALL,
                        what="record")
        self.assertEqual(view["owner_kind"], "main_agent")
        self.assertEqual(view["owner_id"], self.env.session)
        self.assertTrue(view["tty"])
        self.assertEqual(view["exit_code"], -1)

    def test_process(self):
        rec = self.start("cat")
        pid = rec["id"]
        view, _ = self.view("process", {"action": "list"})
        self.assertKeys(view, exact={"action", "processes"})
        self.assertIn(pid, [p.get("id") for p in view["processes"]])
        view, _ = self.view("process", {"action": "write", "process_id": pid,
                                        "input": "ping\n"})
        self.assertKeys(view, exact=PROCESS_WRITE)
        deadline = time.monotonic() + 15 * SLACK
        while True:
            view, _ = self.view("process", {"action": "read", "process_id": pid,
                                            "offset_bytes": 0, "wait_ms": 2000})
            self.assertKeys(view, exact=PROCESS_READ)
            if "ping" in view["output"] or time.monotonic() > deadline:
                break
        self.assertIn("ping", view["output"], "the input written never showed")
        view, _ = self.view("process", {"action": "update", "process_id": pid,
                                        "completion_mode": "detached"})
        self.assertKeys(view, exact=PROCESS_UPDATE)
        self.assertEqual(view["completion_mode"], "detached")
        view, _ = self.view("process", {"action": "stop", "process_id": pid})
        self.assertKeys(view, always=RECORD_ALWAYS | {"action"}, optional=RECORD_ALL,
                        what="record")
        self.assertEqual(view["action"], "stop")
        self.assertIn(view["status"], ("stopped", "failed"))

    def test_git(self):
        d = "git-%d" % time.monotonic_ns()
        self.env.execute("bash", {"command": "mkdir -p %s && cd %s && git init -q && "
                                             "echo x > t.txt" % (d, d)})
        view, _ = self.view("git", {"subcommand": "status", "args": []})
        self.assertTrue(GIT_STATUS <= set(view), "git status keys: missing %s"
                        % sorted(GIT_STATUS - set(view)))
        self.assertEqual(view["action"], "status")
        with self.assertRaises(CallError, msg="a git subcommand outside the allow-list"):
            self.env.execute("git", {"subcommand": "gc", "args": []})

    def test_present_artifact(self):
        name = "art-%d.txt" % time.monotonic_ns()
        self.write(name, "artifact bytes")
        view, _ = self.view("present_artifact", {"path": name})
        self.assertKeys(view, exact=ARTIFACT_VIEW)
        self.assertEqual(view["name"], name)
        self.assertEqual(view["size"], 14)
        self.assertEqual(self.env.download(view["execution_export"], view["size"]),
                         b"artifact bytes")


class OldDialect(unittest.TestCase):
    """What sandgate spoke before issue 35, which the host never sends
    and never reads: refused or absent."""

    @classmethod
    def setUpClass(cls):
        cls.env = HostEnvironment(session="old-dialect")
        try:
            cls.env.connect()
        except BaseException:
            cls.env.cleanup()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.env.cleanup()

    def test_data_tool_without_call_name_is_refused(self):
        c = self.env.connect()
        with self.assertRaises(CallError):
            c.call("execute", {"tool": "read_file",
                               "call": {"id": "call_1", "arguments": '{"path":"x"}'},
                               "permission_mode": "standard", "actor": self.env.session})

    def test_export_open_is_an_unknown_method(self):
        self.assertNotIn("export/open", self.env.methods)
        with self.assertRaises(CallError):
            self.env.connect().call("export/open", {"path": "x"})

    def test_sandgate_only_tools_are_not_execution_environment_tools(self):
        for name in OLD_TOOLS:
            with self.subTest(tool=name):
                with self.assertRaises(CallError) as cm:
                    self.env.execute(name, {"path": ".", "command": "true"})
                self.assertIn("is not an execution environment tool", str(cm.exception))

    def test_permission_mode_full_is_refused(self):
        """The host's three modes (and "" for standard) read the file; the
        old "full" is refused."""
        name = "mode-%d.txt" % time.monotonic_ns()
        self.env.execute("write_file", {"path": name, "content": "m"})
        for mode in ("standard", "", "read_only", "unconfined"):
            with self.subTest(mode=mode):
                self.env.execute("read_file", {"path": name}, mode=mode)
        with self.assertRaises(CallError) as cm:
            self.env.execute("read_file", {"path": name}, mode="full")
        self.assertIn("permission", str(cm.exception))

    def test_old_string_arguments_are_refused(self):
        name = "old-%d.txt" % time.monotonic_ns()
        self.env.execute("write_file", {"path": name, "content": "a b"})
        with self.assertRaises(CallError):
            self.env.execute("edit_file", {"path": name, "old_string": "a", "new_string": "c"})

    def test_events_are_process_frames_never_process_event(self):
        events = self.env.subscribe(16)
        res = self.env.execute("bash", {"command": "exit 0", "run_in_background": True})
        pid = hd.proc_id_of(hd.text_projection(res))
        deadline = time.monotonic() + 30 * SLACK
        seen = []
        while time.monotonic() < deadline:
            try:
                ev = events.get(timeout=0.2)
            except Exception:
                continue
            if (ev.get("Process") or {}).get("id") == pid:
                seen.append(ev["Type"])
                if ev["Type"] in ("stopped", "failed"):
                    break
        self.env.unsubscribe(events)
        self.assertIn("started", seen, "no process event")
        self.assertIn("stopped", seen, "no stopped event")
        for c in self.env.clients:
            self.assertEqual([d for d in c.dropped if d.get("method") == "process/event"], [])


if __name__ == "__main__":
    unittest.main()
