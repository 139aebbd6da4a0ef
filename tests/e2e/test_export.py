"""Exports (docs/protocol.md section 10)."""

import base64
import hashlib
import os
import unittest

from sgclient import MiB, GatewayTestCase, b64, proc_status, unique


class Exports(GatewayTestCase):
    shared_gateway = True

    def setUp(self):
        self.d = unique("exp")

    def put(self, name, raw):
        path = "%s/%s" % (self.d, name)
        self.gw.tool_ok("write_file", {"path": path, "content": b64(raw), "encoding": "base64"})
        return path

    def read(self, token, offset, length=None):
        data = {"token": token, "offset": offset}
        if length is not None:
            data["length"] = length
        r = self.gw.ok("export/read", data)
        self.assertEqual(set(r), {"data", "eof"})
        self.assertIsInstance(r["eof"], bool)
        return base64.b64decode(r["data"], validate=True), r["eof"]

    def test_open_read_in_chunks_close(self):
        gw = self.gw
        raw = os.urandom(2500)
        path = self.put("blob.bin", raw)
        ex = gw.ok("export/open", {"path": path})
        self.assertIsInstance(ex["token"], str)
        self.assertTrue(ex["token"])
        self.assertEqual(ex["size"], 2500)
        self.assertEqual(ex["sha256"], hashlib.sha256(raw).hexdigest())
        self.assertEqual(ex["name"], "blob.bin")
        got = b""
        for off, want_len, want_eof in ((0, 1000, False), (1000, 1000, False), (2000, 500, True)):
            chunk, eof = self.read(ex["token"], off, 1000)
            self.assertEqual((len(chunk), eof), (want_len, want_eof), "offset %d" % off)
            got += chunk
        self.assertEqual(got, raw)
        self.assertEqual(self.read(ex["token"], 0), (raw, True), "default length")
        self.assertEqual(self.read(ex["token"], 0, 0), (raw, True), "length 0 means default")
        self.assertEqual(self.read(ex["token"], 2500), (b"", True), "offset at the end")
        self.assertEqual(self.read(ex["token"], 1234, 10), (raw[1234:1244], False))
        err = gw.fail("export/read", {"token": ex["token"], "offset": 2501})
        self.assertCode(err, "invalid_argument", "offset past the end")
        self.assertEqual(gw.ok("export/close", {"token": ex["token"]}), {})
        gw.fail("export/read", {"token": ex["token"], "offset": 0})

    def test_snapshot_is_immutable(self):
        gw = self.gw
        before = b"first version\n" * 100
        path = self.put("snap.txt", before)
        ex = gw.ok("export/open", {"path": path})
        gw.tool_ok("write_file", {"path": path, "content": "rewritten"})
        self.assertEqual(self.read(ex["token"], 0), (before, True))
        gw.sh_ok("printf appended >> " + path)
        gw.tool_ok("delete_path", {"path": path})
        self.assertEqual(self.read(ex["token"], 0), (before, True))
        gw.ok("export/close", {"token": ex["token"]})

    def test_large_file_read_is_capped(self):
        gw = self.gw
        path = self.d + "/five.bin"
        gw.tool_ok("make_dir", {"path": self.d})
        digest = gw.sh_ok("head -c %d /dev/urandom > %s && sha256sum %s"
                          % (5 * MiB, path, path)).split()[0]
        ex = gw.ok("export/open", {"path": path})
        self.assertEqual((ex["size"], ex["sha256"]), (5 * MiB, digest))
        first, eof = self.read(ex["token"], 0, 10 * MiB)
        self.assertEqual((len(first), eof), (4 * MiB, False), "length is capped at 4 MiB")
        rest, eof = self.read(ex["token"], len(first))
        self.assertEqual((len(rest), eof), (MiB, True))
        self.assertEqual(hashlib.sha256(first + rest).hexdigest(), digest)
        gw.ok("export/close", {"token": ex["token"]})

    @unittest.skipIf(os.environ.get("SG_SANITIZED"), "a sanitizer's own memory is not the gateway's")
    @unittest.skipIf(os.environ.get("SG_PEER_BIN"), "the gateway measured is sandgate itself")
    def test_export_does_not_hold_the_file_in_memory(self):
        # The snapshot goes to a file as the bytes arrive, on every
        # backend: Modal's used to be read whole into the gateway's memory
        # first (up to 256 MiB per export in progress).
        gw = self.gateway()
        d = unique("big")
        gw.tool_ok("make_dir", {"path": d})
        digest = gw.sh_ok("head -c %d /dev/urandom > %s/f && sha256sum %s/f"
                          % (48 * MiB, d, d)).split()[0]
        before = proc_status(gw.proc.pid, "VmHWM")
        ex = gw.ok("export/open", {"path": d + "/f"}, timeout=300)
        grew = proc_status(gw.proc.pid, "VmHWM") - before
        self.assertEqual((ex["size"], ex["sha256"]), (48 * MiB, digest))
        gw.ok("export/close", {"token": ex["token"]})
        self.assertLess(grew * 1024, 16 * MiB,
                        "the gateway grew by %d KiB for a 48 MiB export" % grew)

    def test_empty_file(self):
        gw = self.gw
        path = self.put("empty", b"")
        ex = gw.ok("export/open", {"path": path})
        self.assertEqual(ex["size"], 0)
        self.assertEqual(ex["sha256"], hashlib.sha256(b"").hexdigest())
        self.assertEqual(self.read(ex["token"], 0), (b"", True))
        gw.ok("export/close", {"token": ex["token"]})

    def test_not_a_regular_file(self):
        gw = self.gw
        gw.tool_ok("make_dir", {"path": self.d + "/dir"})
        self.assertCode(gw.fail("export/open", {"path": self.d + "/dir"}), "invalid_argument")
        self.assertCode(gw.fail("export/open", {"path": "."}), "invalid_argument")
        gw.fail("export/open", {"path": self.d + "/missing"})

    def test_too_large(self):
        gw = self.gw
        gw.tool_ok("make_dir", {"path": self.d})
        gw.sh_ok("truncate -s 257M big.bin", cwd=self.d)
        self.assertCode(gw.fail("export/open", {"path": self.d + "/big.bin"}), "too_large")

    def test_unknown_token(self):
        gw = self.gw
        gw.fail("export/read", {"token": "no-such-token", "offset": 0})
        gw.fail("export/close", {"token": "no-such-token"})


if __name__ == "__main__":
    unittest.main()
