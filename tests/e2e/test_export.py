"""Exports (protocol section 6): present_artifact snapshots a file and the host
reads it with export/read {token, offset} until eof, then export/close, as
from its own worker (internal/executionworker/artifacts.go).  There is no
export/open."""

import base64
import hashlib
import json
import os
import unittest

from sgclient import MiB, GatewayTestCase, proc_status, unique

CHUNK = 256 * 1024  # what the host's worker sends per export/read


class Exports(GatewayTestCase):
    shared_gateway = True

    def setUp(self):
        self.d = unique("exp")
        self.gw.sh_ok("mkdir -p " + self.d)

    def present(self, path, gw=None, **kw):
        """present_artifact: the one text part's {execution_export,name,size}."""
        res = (gw or self.gw).tool_ok("present_artifact", {"path": path}, **kw)
        self.assertEqual([p["type"] for p in res["content"]], ["text"])
        ex = json.loads(res["content"][0]["text"])
        self.assertEqual(set(ex), {"execution_export", "name", "size"})
        self.assertTrue(ex["execution_export"])
        return ex

    def read(self, token, offset, gw=None):
        r = (gw or self.gw).ok("export/read", {"token": token, "offset": offset})
        self.assertEqual(set(r), {"data", "eof"})
        self.assertIsInstance(r["eof"], bool)
        return base64.b64decode(r["data"], validate=True), r["eof"]

    def download(self, ex, gw=None):
        """The host's Download: reads from 0 until eof, checking each chunk
        against the declared size, then export/close."""
        got = b""
        while True:
            chunk, eof = self.read(ex["execution_export"], len(got), gw)
            self.assertLessEqual(len(got) + len(chunk), ex["size"], "over the declared size")
            got += chunk
            if eof:
                break
            self.assertTrue(chunk, "an empty chunk before eof")
        self.assertEqual(len(got), ex["size"], "eof before the declared size")
        self.assertEqual((gw or self.gw).ok("export/close", {"token": ex["execution_export"]}),
                         {})
        return got

    def test_sensitive_files_are_not_handed_out(self):
        # The attacker's test: present_artifact is a way to read a file
        # whole; it must refuse what read_file refuses, as the host's does.
        self.gw.write("notes.txt", "x")
        self.gw.sh_ok("printf 'TOKEN=hunter2\\n' > .env && mkdir -p .wuu && "
                      "printf '{}' > .wuu/auth.json")
        err = self.gw.tool_error("present_artifact", {"path": ".env"})
        self.assertCode(err, "permission_denied")
        self.assertIn("sensitive path", err)
        self.assertNotIn("hunter2", err)
        for mode in ("standard", "unconfined"):
            err = self.gw.tool_error("present_artifact", {"path": ".wuu/auth.json"}, mode=mode)
            self.assertCode(err, "permission_denied")
        ex = self.present(".env", mode="unconfined")
        self.assertEqual(self.download(ex), b"TOKEN=hunter2\n")

    def test_read_in_chunks_close(self):
        gw = self.gw
        raw = gw.sh_ok("head -c 600000 /dev/urandom > %s/blob.bin && sha256sum %s/blob.bin"
                       % (self.d, self.d)).split()[0]
        ex = self.present(self.d + "/blob.bin")
        self.assertEqual((ex["name"], ex["size"]), ("blob.bin", 600000))
        tok = ex["execution_export"]
        first, eof = self.read(tok, 0)
        self.assertEqual((len(first), eof), (CHUNK, False))
        mid, eof = self.read(tok, 1234)
        self.assertEqual(mid[:CHUNK - 1234], first[1234:])
        last, eof = self.read(tok, 600000 - 10)
        self.assertEqual((len(last), eof), (10, True))
        self.assertEqual(self.read(tok, 600000), (b"", True), "offset at the end")
        self.assertIn("invalid artifact offset",
                      gw.fail("export/read", {"token": tok, "offset": 600001}))
        self.assertEqual(hashlib.sha256(self.download(ex)).hexdigest(), raw)
        self.assertIn("unknown artifact export",
                      gw.fail("export/read", {"token": tok, "offset": 0}))

    def test_snapshot_is_immutable(self):
        gw = self.gw
        path = self.d + "/snap.txt"
        gw.write(path, "first version\n" * 100)
        ex = self.present(path)
        gw.tool_ok("write_file", {"path": path, "content": "rewritten"})
        gw.sh_ok("printf appended >> %s && rm %s" % (path, path))
        self.assertEqual(self.download(ex), b"first version\n" * 100)

    def test_five_mib_comes_in_host_sized_chunks(self):
        gw = self.gw
        path = self.d + "/five.bin"
        digest = gw.sh_ok("head -c %d /dev/urandom > %s && sha256sum %s"
                          % (5 * MiB, path, path)).split()[0]
        ex = self.present(path)
        self.assertEqual(ex["size"], 5 * MiB)
        self.assertEqual(hashlib.sha256(self.download(ex)).hexdigest(), digest)

    @unittest.skipIf(os.environ.get("SG_SANITIZED"), "a sanitizer's own memory is not the gateway's")
    @unittest.skipIf(os.environ.get("SG_PEER_BIN"), "the gateway measured is sandgate itself")
    def test_export_does_not_hold_the_file_in_memory(self):
        # The snapshot goes to a file as the bytes arrive, on every
        # backend: Modal's used to be read whole into the gateway's memory
        # first (up to 256 MiB per export in progress).
        gw = self.gateway()
        d = unique("big")
        digest = gw.sh_ok("mkdir -p %s && head -c %d /dev/urandom > %s/f && sha256sum %s/f"
                          % (d, 48 * MiB, d, d)).split()[0]
        before = proc_status(gw.proc.pid, "VmHWM")
        ex = self.present(d + "/f", gw=gw, timeout=300)
        grew = proc_status(gw.proc.pid, "VmHWM") - before
        self.assertEqual(ex["size"], 48 * MiB)
        self.assertLess(grew * 1024, 16 * MiB,
                        "the gateway grew by %d KiB for a 48 MiB export" % grew)
        first, _ = self.read(ex["execution_export"], 48 * MiB - 5, gw)
        self.assertEqual(len(first), 5)
        gw.ok("export/close", {"token": ex["execution_export"]})
        self.assertTrue(digest)

    def test_empty_file(self):
        self.gw.sh_ok(": > %s/empty" % self.d)
        ex = self.present(self.d + "/empty")
        self.assertEqual(ex["size"], 0)
        self.assertEqual(self.read(ex["execution_export"], 0), (b"", True))
        self.assertEqual(self.download(ex), b"")

    def test_not_a_regular_file(self):
        gw = self.gw
        gw.sh_ok("mkdir -p %s/dir" % self.d)
        for path in (self.d + "/dir", "."):
            err = gw.tool_error("present_artifact", {"path": path})
            self.assertCode(err, "invalid_argument")
            self.assertIn("artifact must be a regular file of at most 256 MiB", err)
        self.assertCode(gw.tool_error("present_artifact", {"path": self.d + "/missing"}),
                        "not_found")

    def test_too_large(self):
        self.gw.sh_ok("truncate -s 257M big.bin", cwd=self.d)
        err = self.gw.tool_error("present_artifact", {"path": self.d + "/big.bin"})
        self.assertCode(err, "too_large")
        self.assertIn("artifact must be a regular file of at most 256 MiB", err)

    def test_unknown_token_and_no_export_open(self):
        gw = self.gw
        for method in ("export/read", "export/close"):
            err = gw.fail(method, {"token": "no-such-token", "offset": 0})
            self.assertIn("unknown artifact export", err)
        gw.sh_ok(": > %s/x" % self.d)
        self.assertIn("export/open", gw.fail("export/open", {"path": self.d + "/x"}))


if __name__ == "__main__":
    unittest.main()
