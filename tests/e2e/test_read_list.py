"""read_file, list_files and present_artifact as the host's own worker answers
them (internal/tools/tool_files.go, read_file_image.go, continuation.go,
internal/executionworker/artifacts.go): the same keys, line numbering,
defaults, limits, continuation tokens and failure sentences, every failure an
error reply.  Each test fails on the old dialect (content strings, metadata,
is_error results, export/open)."""

import base64
import hashlib
import json
import os
import unittest

from sgclient import GatewayTestCase, code_of, shell_quote, unique

READ_KEYS = {"action", "content", "content_sha256", "next_suggestions", "num_lines",
             "omitted_ranges", "path", "range", "start_line", "total_lines", "truncated",
             "workspace_revision"}
READ_DATA_KEYS = {"content_sha256", "num_lines", "path", "start_line", "text", "total_lines"}
UNCHANGED_KEYS = {"action", "path", "workspace_revision", "content_sha256", "range",
                  "unchanged", "message", "next_suggestions"}
IMAGE_KEYS = {"action", "path", "media_type", "width", "height", "source_width",
              "source_height", "resized"}
LIST_KEYS = {"action", "path", "workspace_revision", "total", "visible_total", "offset",
             "returned_count", "has_more", "page", "truncated", "omitted_entry_count",
             "omitted_protected", "entries", "next_suggestions"}
EXPORT_KEYS = {"execution_export", "name", "size"}

# A 3x2 PNG (IHDR only is enough for its dimensions; the bytes are sent whole).
PNG = (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x03\x00\x00\x00\x02"
       b"\x08\x06\x00\x00\x00\xb9\xea\xde\x81\x00\x00\x00\x0cIDATx\x9cc`\xa0\x1c\x00"
       b"\x00\x00\x1e\x00\x01\xa5\x93\xc3\x9d\x00\x00\x00\x00IEND\xaeB`\x82")


def continuation(path, offset, limit, sha):
    """A continuation token made the way the host makes one."""
    raw = json.dumps({"path": path, "offset": offset, "limit": limit,
                      "expected_sha256": sha}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def numbered(lines, first):
    """The host's numbered view of lines starting at line `first`."""
    out = []
    for i, line in enumerate(lines):
        n = first + i
        out.append("%s|%s\n" % (n if i == 0 or n % 10 == 0 else "", line))
    return "".join(out)


class Base(GatewayTestCase):
    shared_gateway = True

    def setUp(self):
        self.d = unique("rl")

    def put(self, name, data):
        """A file in the environment with exactly these bytes (through bash,
        so that any byte and any name can be made)."""
        path = "%s/%s" % (self.d, name)
        self.gw.sh_ok("mkdir -p %s && : > %s" % (shell_quote(os.path.dirname(path)),
                                                   shell_quote(path)))
        # A command line holds about 128 KiB: the bytes go in pieces.
        for at in range(0, len(data), 48 * 1024):
            piece = base64.b64encode(data[at:at + 48 * 1024]).decode()
            self.gw.sh_ok("printf %%s %s | base64 -d >> %s" % (shell_quote(piece),
                                                               shell_quote(path)))
        return path

    def refused(self, tool, args, code=None, words=(), mode=None, **kw):
        err = self.gw.tool_error(tool, args, mode, **kw)
        if code:
            self.assertCode(err, code, "%s %s" % (tool, args))
        for w in words:
            self.assertIn(w, err)
        return err


class ReadFile(Base):
    def test_numbered_view_keys_and_data(self):
        lines = ["line %d" % i for i in range(1, 26)]
        raw = "".join(l + "\r\n" for l in lines).encode()
        path = self.put("crlf.txt", raw)
        v = self.gw.view("read_file", {"path": path})
        self.assertEqual(set(v), READ_KEYS)
        self.assertEqual(v["action"], "read")
        self.assertEqual(v["path"], path)
        self.assertEqual(v["content"], numbered(lines, 1), "CRLF stripped, N| on 1, 10, 20")
        self.assertEqual(v["content_sha256"], hashlib.sha256(raw).hexdigest())
        self.assertEqual((v["num_lines"], v["start_line"], v["total_lines"]), (25, 1, 25))
        self.assertEqual(v["range"], {"start_line": 1, "end_line": 25})
        self.assertIsNone(v["omitted_ranges"], "nothing omitted is null, as Go marshals it")
        self.assertFalse(v["truncated"])
        self.assertEqual(v["next_suggestions"],
                         ["use the excerpt as grounded evidence for subsequent edits or "
                          "analysis"])
        self.assertRegex(v["workspace_revision"], r"^(fs:worktree:[0-9a-f]{16}|git:.*|)$")
        self.assertEqual(set(v.structured), READ_DATA_KEYS)
        self.assertEqual(v.structured["text"], raw.decode(), "programs get the bytes as they are")
        self.assertEqual(v.structured["content_sha256"], v["content_sha256"])

    def test_invalid_utf8_is_replaced_on_every_transport(self):
        raw = b"caf\xc3\xa9 \xff\xfe ok\n"
        path = self.put("latin.txt", raw)
        v = self.gw.view("read_file", {"path": path})
        self.assertEqual(v["content"], "1|caf\u00e9 \ufffd\ufffd ok\n")
        self.assertEqual(v.structured["text"], "caf\u00e9 \ufffd\ufffd ok\n")
        self.assertEqual(v["content_sha256"], hashlib.sha256(raw).hexdigest())

    def test_window_omitted_ranges_and_last_line(self):
        lines = ["l%d" % i for i in range(1, 31)]
        path = self.put("win.txt", "\n".join(lines).encode())  # no final newline
        v = self.gw.view("read_file", {"path": path, "offset": 9, "limit": 3})
        self.assertEqual(v["content"], "9|l9\n10|l10\n|l11\n")
        self.assertEqual(v["range"], {"start_line": 9, "end_line": 11})
        self.assertEqual(v["omitted_ranges"], [{"start_line": 1, "end_line": 8},
                                               {"start_line": 12, "end_line": 30}])
        self.assertTrue(v["truncated"])
        self.assertEqual(v["total_lines"], 30, "a last line without newline counts")
        self.assertEqual(v.structured["text"], "l9\nl10\nl11\n")
        self.assertIn("omitted range", v["next_suggestions"][0])
        tail = self.gw.view("read_file", {"path": path, "offset": 29})
        self.assertEqual(tail["content"], "29|l29\n30|l30\n")
        self.assertEqual(tail["omitted_ranges"], [{"start_line": 1, "end_line": 28}])
        self.assertFalse(tail["truncated"])
        past = self.gw.view("read_file", {"path": path, "offset": 40, "limit": 5})
        self.assertEqual((past["content"], past["num_lines"]), ("", 0))
        self.assertEqual(past["range"], {"start_line": 40, "end_line": 39})
        zero = self.gw.view("read_file", {"path": path, "offset": 0, "limit": 0})
        self.assertEqual(zero["num_lines"], 30, "offset 0 is 1 and limit 0 is no limit")

    def test_unchanged_reread_is_a_stub_per_actor(self):
        path = self.put("same.txt", b"a\nb\n")
        first = self.gw.view("read_file", {"path": path})
        again = self.gw.view("read_file", {"path": path})
        self.assertEqual(set(again), UNCHANGED_KEYS)
        self.assertEqual((again["action"], again["unchanged"]), ("read_unchanged", True))
        self.assertEqual(again["content_sha256"], first["content_sha256"])
        self.assertEqual(again.structured["text"], "a\nb\n", "programs still get the text")
        other = self.gw.view("read_file", {"path": path}, actor="sub-agent-1")
        self.assertEqual(other["action"], "read", "another actor has its own reads")
        ranged = self.gw.view("read_file", {"path": path, "limit": 1})
        self.assertEqual(ranged["action"], "read", "another range is read")
        self.put("same.txt", b"a\nc\n")
        changed = self.gw.view("read_file", {"path": path})
        self.assertEqual((changed["action"], changed["content"]), ("read", "1|a\n|c\n"))

    def test_continuation_token(self):
        lines = ["c%d" % i for i in range(1, 21)]
        raw = "".join(l + "\n" for l in lines).encode()
        path = self.put("cont.txt", raw)
        sha = hashlib.sha256(raw).hexdigest()
        v = self.gw.view("read_file", {"continuation": continuation(path, 11, 5, sha)})
        self.assertEqual(v["content"], numbered(lines[10:15], 11))
        self.assertEqual(v["path"], path)
        v = self.gw.view("read_file", {"path": path, "continuation": continuation(path, 16, 2, sha)})
        self.assertEqual(v["range"], {"start_line": 16, "end_line": 17})
        self.refused("read_file", {"continuation": continuation(path, 1, 5, "0" * 64)},
                     "invalid_argument", ["read_file continuation is stale", "expected_sha256"])
        self.refused("read_file", {"path": "other.txt", "continuation":
                                   continuation(path, 1, 5, sha)},
                     "invalid_argument", ["continuation does not match path"])
        self.refused("read_file", {"continuation": "not a token!"}, "invalid_argument",
                     ["invalid read_file continuation"])
        self.refused("read_file", {"continuation": continuation(path, 0, 5, sha)},
                     "invalid_argument", ["invalid read_file continuation token"])
        self.refused("read_file", {"path": path, "expected_sha256": "f" * 64},
                     "invalid_argument", ["stale"])

    def test_byte_range_pages_and_their_continuation(self):
        raw = "".join("row %03d é\n" % i for i in range(600)).encode()
        path = self.put("bytes.txt", raw)
        sha = hashlib.sha256(raw).hexdigest()
        v = self.gw.view("read_file", {"path": path, "byte_range": {"offset": 7, "limit": 1000}})
        self.assertEqual(set(v), {"action", "path", "workspace_revision", "content_sha256",
                                  "total_bytes", "segment_end_offset", "content", "encoding",
                                  "byte_offset", "byte_count", "continuation"})
        self.assertEqual((v["action"], v["encoding"], v["byte_offset"], v["total_bytes"],
                          v["content_sha256"]), ("read_bytes", "utf-8", 7, len(raw), sha))
        self.assertTrue(raw[7:].decode().startswith(v["content"]))
        self.assertTrue(v["content"].endswith("\n"), "cut after a whole line")
        self.assertIsNone(v.structured)
        # Follow the host's continuation to the end: every byte, once.
        got, page = raw[:7] + v["content"].encode(), v
        while page["continuation"]["has_more"]:
            page = self.gw.view("read_file", page["continuation"]["next"])
            self.assertEqual(page["byte_offset"], len(got))
            got += page["content"].encode()
        self.assertEqual(got, raw)
        tail = self.gw.view("read_file", {"path": path, "byte_range": {
            "offset": 5, "limit": 4096, "end_offset": 8}})
        self.assertEqual((tail["content"], tail["segment_end_offset"]), ("00 ", 8))
        self.assertEqual(tail["continuation"], {"has_more": False})
        binary = self.put("b.bin", b"\x00\x01\xffabc")
        b = self.gw.view("read_file", {"path": binary, "byte_range": {"offset": 1, "limit": 3}})
        self.assertEqual((b["encoding"], base64.b64decode(b["content_base64"])),
                         ("base64", b"\x01\xffa"))
        self.refused("read_file", {"path": path, "offset": 3, "byte_range": {"offset": 1,
                                                                            "limit": 5}},
                     "invalid_argument", ["read_file accepts byte_range instead of offset/limit"])
        self.refused("read_file", {"path": path, "byte_range": {"offset": 1, "limit": 5000}},
                     "invalid_argument", ["byte_range.limit must be <= 4096"])
        self.refused("read_file", {"path": path, "byte_range": {"offset": 9, "limit": 5,
                                                               "end_offset": 3}},
                     None, ["byte_range.end_offset must be greater than offset"])
        zero = self.gw.view("read_file", {"path": path, "byte_range": {"offset": 0, "limit": 0}},
                            actor=unique("zero"))
        self.assertEqual(zero["action"], "read", "an all-zero byte_range is absent")

    def test_failures_are_error_replies_with_the_hosts_sentences(self):
        path = self.put("present.txt", b"x\n")
        err = self.refused("read_file", {"path": self.d + "/Present.txt"}, "not_found")
        self.assertIn("File not found: %s/Present.txt. Did you mean: %s?" % (self.d, path), err)
        err = self.refused("read_file", {"path": self.d + "/absent-zzz"}, "not_found")
        self.assertIn("File not found: %s/absent-zzz" % self.d, err)
        self.assertNotIn("Did you mean", err)
        self.refused("read_file", {"path": self.d}, None,
                     ["path is a directory: %s. Use list_files" % self.d])
        self.refused("read_file", {"path": path, "limit": -1}, "invalid_argument",
                     ["read_file limit must be positive"])
        self.refused("read_file", {}, "invalid_argument", ["read_file requires path"])
        self.refused("read_file", {"path": "../outside.txt"}, "path_escape")
        binary = self.put("nul.bin", b"text\x00more")
        self.refused("read_file", {"path": binary}, None,
                     ["unsupported binary file; read_file accepts text, PNG, JPEG, static "
                      "GIF, and WebP"])

    def test_large_file_needs_a_limit(self):
        raw = b"".join(b"%07d %s\n" % (i, b"x" * 92) for i in range(3000))  # 300,000 bytes
        path = self.put("big.txt", raw)
        err = self.refused("read_file", {"path": path}, None,
                           ["file too large (%d bytes, max 262144). Use offset and limit"
                            % len(raw)])
        self.assertNotIn('"content"', err)
        v = self.gw.view("read_file", {"path": path, "offset": 2990, "limit": 20})
        self.assertEqual((v["num_lines"], v["total_lines"]), (11, 3000))
        self.assertEqual(v["content_sha256"], hashlib.sha256(raw).hexdigest(),
                         "the digest is the whole file's")

    def test_sensitive_paths_refused_unless_unconfined(self):
        env = self.put(".env", b"TOKEN=abc\n")
        key = self.put("keys/id_rsa", b"-----BEGIN-----\n")
        for p in (env, key, self.d + "/../" + env):
            self.refused("read_file", {"path": p}, "permission_denied",
                         ["read_file refuses to read sensitive path"])
        v = self.gw.view("read_file", {"path": env}, mode="unconfined")
        self.assertEqual(v["content"], "1|TOKEN=[REDACTED]\n", "credentials masked, as the host's")
        self.assertEqual(v.structured["text"], "TOKEN=[REDACTED]\n")
        self.assertEqual(v["content_sha256"], hashlib.sha256(b"TOKEN=abc\n").hexdigest())

    def test_image_is_an_image_part(self):
        path = self.put("pic.png", PNG)
        res = self.gw.tool_ok("read_file", {"path": path})
        parts = res["content"]
        self.assertEqual([p["type"] for p in parts], ["text", "image"])
        v = json.loads(parts[0]["text"])
        self.assertEqual(set(v), IMAGE_KEYS)
        self.assertEqual((v["action"], v["media_type"], v["width"], v["height"]),
                         ("read_image", "image/png", 3, 2))
        self.assertFalse(v["resized"])
        self.assertEqual(parts[1]["mime_type"], "image/png")
        self.assertEqual(parts[1]["name"], "pic.png")
        self.assertEqual(base64.b64decode(parts[1]["data"]), PNG)
        self.assertNotIn("structured_content", res)
        self.refused("read_file", {"path": path, "offset": 2}, "invalid_argument",
                     ["image reads do not support text ranges or continuations"])
        again = self.gw.tool_ok("read_file", {"path": path})
        self.assertEqual(len(again["content"]), 2, "images are never a read_unchanged stub")


class ListFiles(Base):
    def test_entries_and_keys(self):
        self.put("a.txt", b"12345")
        self.put("sub/b.txt", b"")
        self.put(".env", b"X=1\n")
        self.gw.sh_ok("mkdir -p %s/.git" % self.d)
        v = self.gw.view("list_files", {"path": self.d})
        self.assertEqual(set(v), LIST_KEYS)
        self.assertEqual((v["action"], v["path"]), ("list", self.d))
        self.assertEqual(v["entries"], [
            {"name": "a.txt", "path": self.d + "/a.txt", "is_dir": False, "size": 5},
            {"name": "sub", "path": self.d + "/sub", "is_dir": True}])
        self.assertEqual((v["total"], v["visible_total"], v["omitted_protected"]), (4, 2, 2))
        self.assertEqual((v["offset"], v["returned_count"], v["has_more"], v["truncated"],
                          v["omitted_entry_count"]), (0, 2, False, False, 0))
        self.assertEqual(v["page"], {"offset": 0, "returned": 2, "has_more": False,
                                     "snapshot_token": v["workspace_revision"]})
        self.assertIn(";result:", v["workspace_revision"])
        self.assertEqual(v["next_suggestions"],
                         ["use read_file on specific file paths or list_files on "
                          "subdirectories before editing"])
        shown = self.gw.view("list_files", {"path": self.d}, mode="unconfined")
        self.assertEqual(shown["omitted_protected"], 0, "unconfined shows sensitive entries")
        root = self.gw.view("list_files", {})
        self.assertEqual(root["path"], ".")
        self.assertIn(self.d, [e["name"] for e in root["entries"]])

    def test_file_path_and_sensitive_directory_are_refused(self):
        path = self.put("f.txt", b"x")
        self.refused("list_files", {"path": path}, None,
                     ["path is not a directory: %s. Use read_file to inspect files" % path])
        self.gw.sh_ok("mkdir -p %s/.git" % self.d)
        self.refused("list_files", {"path": self.d + "/.git"}, "permission_denied",
                     ["list_files refuses to list sensitive path"])
        self.refused("list_files", {"path": self.d + "/.git"}, "permission_denied",
                     mode="unconfined")
        self.refused("list_files", {"path": "/"}, "path_escape")

    def test_pages_of_a_thousand_bound_to_a_revision(self):
        self.gw.sh_ok("mkdir -p %s/many && cd %s/many && for i in $(seq 1005); do "
                      ": > f$(printf %%04d $i); done" % (self.d, self.d))
        first = self.gw.view("list_files", {"path": self.d + "/many"})
        self.assertEqual((first["returned_count"], first["visible_total"], first["has_more"],
                          first["omitted_entry_count"]), (1000, 1005, True, 5))
        nxt = first["page"]["next"]
        self.assertEqual(nxt, {"offset": 1000, "expected_revision": first["workspace_revision"]})
        self.assertIn("page.next", first["next_suggestions"][0])
        second = self.gw.view("list_files", dict(nxt, path=self.d + "/many"))
        self.assertEqual([e["name"] for e in second["entries"]],
                         ["f1001", "f1002", "f1003", "f1004", "f1005"])
        self.assertFalse(second["has_more"])
        self.refused("list_files", {"path": self.d + "/many", "offset": 1000},
                     "invalid_argument", ["expected_revision is required"])
        self.refused("list_files", {"path": self.d + "/many", "offset": -1},
                     "invalid_argument", ["offset must be non-negative"])
        self.gw.sh_ok(": > %s/many/f0000" % self.d)
        self.refused("list_files", dict(nxt, path=self.d + "/many"), "invalid_argument",
                     ["list_files continuation is stale"])


class Artifacts(Base):
    def present(self, path):
        res = self.gw.tool_ok("present_artifact", {"path": path})
        self.assertEqual(len(res["content"]), 1)
        self.assertEqual(res["content"][0]["type"], "text")
        ex = json.loads(res["content"][0]["text"])
        self.assertEqual(set(ex), EXPORT_KEYS)
        return ex

    def download(self, token):
        """The host's Download: export/read from 0 until eof, then close."""
        got, chunks = b"", 0
        while True:
            r = self.gw.ok("export/read", {"token": token, "offset": len(got)})
            self.assertEqual(set(r), {"data", "eof"})
            chunk = base64.b64decode(r["data"], validate=True)
            self.assertLessEqual(len(chunk), 4 * 1024 * 1024)
            got += chunk
            chunks += 1
            if r["eof"]:
                break
            self.assertTrue(chunk, "a non-eof chunk is never empty")
        self.assertEqual(self.gw.ok("export/close", {"token": token}), {})
        return got, chunks

    def test_round_trip_of_an_immutable_snapshot(self):
        raw = os.urandom(600 * 1024)
        path = self.put("blob.bin", raw)
        ex = self.present(path)
        self.assertEqual((ex["name"], ex["size"]), ("blob.bin", len(raw)))
        self.put("blob.bin", b"changed")
        got, chunks = self.download(ex["execution_export"])
        self.assertEqual(got, raw, "reads return the snapshot")
        self.assertEqual(chunks, 3, "256 KiB chunks, as the host's worker sends")
        err = self.gw.fail("export/read", {"token": ex["execution_export"], "offset": 0})
        self.assertIn("unknown artifact export", err)

    def test_export_errors(self):
        path = self.put("small.txt", b"12345")
        ex = self.present(path)
        tok = ex["execution_export"]
        self.assertEqual(self.gw.ok("export/read", {"token": tok, "offset": 5}),
                         {"data": "", "eof": True})
        for off in (6, -1):
            err = self.gw.fail("export/read", {"token": tok, "offset": off})
            self.assertIn("invalid artifact offset", err)
        self.assertIn("unknown artifact export",
                      self.gw.fail("export/read", {"token": "nope", "offset": 0}))
        self.assertIn("unknown artifact export",
                      self.gw.fail("export/close", {"token": "nope"}))
        self.assertIsInstance(self.gw.fail("export/open", {"path": path}), str)
        self.gw.ok("export/close", {"token": tok})
        self.refused("present_artifact", {"path": self.d}, None,
                     ["artifact must be a regular file of at most 256 MiB"])
        self.refused("present_artifact", {"path": self.d + "/absent"}, "not_found")
        self.refused("present_artifact", {}, "invalid_argument")


if __name__ == "__main__":
    unittest.main()
