"""The host's frames through chains of sandgates (chain.py): a cancel through
two relays (the target's id, no reply of its own, the target's one reply
back promptly), a process event through a relay, and present_artifact with
export/read and export/close through a relay.  The innermost gateway serves
the embedded local profile; every frame is checked by sgclient's host-wire
checker (a reply to the cancel itself, an event the host could not decode
or a numeric id is a violation).  Needs SANDGATE_BIN (the real sandgate)."""

import base64
import json
import os
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))

import sgclient  # noqa: E402
from sgclient import GatewayTestCase  # noqa: E402
from scratch import setUpModule, tearDownModule  # noqa: F401,E402

REAL_BIN = os.environ.get("SG_CHAIN_BIN") or os.environ.get("SANDGATE_BIN", "")
CHAIN = os.path.join(HERE, "chain")


class Through(GatewayTestCase):
    """Each test's gateway is a chain of RELAYS relaying sandgates."""

    RELAYS = 1

    def setUp(self):
        if not REAL_BIN:
            self.skipTest("SANDGATE_BIN is not set")
        super().setUp()
        self.saved = (sgclient.BIN, os.environ.get("SG_CHAIN_BIN"),
                      os.environ.get("SG_CHAIN_RELAYS"))
        sgclient.BIN = CHAIN
        os.environ["SG_CHAIN_BIN"] = REAL_BIN
        os.environ["SG_CHAIN_RELAYS"] = str(self.RELAYS)
        self.addCleanup(self.restore)

    def restore(self):
        sgclient.BIN = self.saved[0]
        for name, value in (("SG_CHAIN_BIN", self.saved[1]), ("SG_CHAIN_RELAYS", self.saved[2])):
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value

    def start(self, command):
        return self.gw.ok("process/start", {"command": command})

    def setUpGateway(self):
        self.gw = self.gateway(config=None, profile=None)
        return self.gw


class CancelThroughTwoRelays(Through):
    RELAYS = 2

    def test_the_target_answers_promptly_and_the_cancel_not_at_all(self):
        gw = self.setUpGateway()
        pid = self.start("echo ready; sleep 30")["id"]
        first = gw.ok("process/read", {"id": pid, "options": {
            "MaxBytes": 0, "OffsetBytes": 0, "Wait": 10 * 10**9, "MinDwell": 0}})
        self.assertIn("ready", first["Output"])
        # Wait for more output that never comes: 20 s, unless cancelled.
        rid = gw.request("process/read", {"id": pid, "options": {
            "MaxBytes": 0, "OffsetBytes": first["EndOffset"], "Wait": 20 * 10**9,
            "MinDwell": 0}})
        time.sleep(0.5)
        t0 = time.monotonic()
        gw.cancel(rid)
        reply = gw.wait_reply(rid, 10)
        self.assertLess(time.monotonic() - t0, 5.0, "the cancel reached the innermost gateway")
        self.assertIn("error", reply, reply)
        # The connection stays usable, and nothing answers the cancel itself.
        self.assertEqual(gw.ok("process/get", {"id": pid})["id"], pid)
        time.sleep(0.5)
        self.assertEqual(gw.violations, [])
        gw.stop(pid)


class EventThroughARelay(Through):

    def test_a_process_event_reaches_the_host_as_the_host_reads_it(self):
        gw = self.setUpGateway()
        pid = self.start("exit 0")["id"]
        ev = gw.wait_event(lambda e: (e.get("Process") or {}).get("id") == pid
                           and e.get("Type") in ("stopped", "failed"), timeout=20)
        self.assertEqual(ev["Cause"], "natural_exit", ev)
        self.assertEqual(ev["Process"]["root_thread_id"], gw.session)
        self.assertEqual(gw.violations, [])


class ArtifactThroughARelay(Through):

    def test_present_artifact_then_export_read_and_close(self):
        gw = self.setUpGateway()
        body = "".join("%d\n" % i for i in range(1, 300001)).encode()  # about 2 MiB
        pid = self.start("seq 1 300000 > art.txt")["id"]
        gw.wait_ended(pid, 60)
        view = gw.view("present_artifact", {"path": "art.txt"})
        self.assertEqual((view["name"], view["size"]), ("art.txt", len(body)), view)
        got, offset = b"", 0
        while True:
            chunk = gw.ok("export/read", {"token": view["execution_export"], "offset": offset})
            data = base64.b64decode(chunk["data"])
            got += data
            offset += len(data)
            if chunk["eof"]:
                break
        self.assertEqual(got, body)
        self.assertEqual(gw.ok("export/close", {"token": view["execution_export"]}), {})
        self.assertIn("error", gw.call("export/read", {"token": view["execution_export"],
                                                       "offset": 0}))
        self.assertEqual(gw.violations, [])


if __name__ == "__main__":
    unittest.main()
