"""The suite's own client against a scripted worker: what sgclient writes is
the host's wire, and every frame the host could not take is caught.

Every other test trusts sgclient twice: to speak as the host does, and to
fail a test whose gateway wrote anything the host's decoder would refuse.
A checker that let a bad frame through would make those tests unable to
fail, so these tests feed it bad frames on purpose, from a scripted worker
in place of sandgate (no sandgate is run), and read back what the client
wrote.  No backend is involved: this runs once, wherever the suite runs.
"""

import json
import os
import re
import shutil
import sys
import tempfile
import unittest

import sgclient
from sgclient import Gateway

# The scripted worker: for the n-th line it reads it writes script[n], each
# line with {id} replaced by that request's id as JSON, after saving the
# line it read; at EOF it exits 0.
WORKER = r"""
import json, os, sys
script = json.loads(os.environ["SG_SCRIPT"])
log = open(os.environ["SG_SEEN"], "a")
n = 0
for line in sys.stdin:
    log.write(line); log.flush()
    try:
        rid = json.dumps(json.loads(line).get("id"))
    except ValueError:
        rid = "null"
    for out in (script[n] if n < len(script) else []):
        sys.stdout.write(out.replace("{id}", rid) + "\n")
    sys.stdout.flush()
    n += 1
"""

EVENT = ('{"method":"process","id":"","data":{"Type":"started","Cause":"",'
         '"Process":{"id":"proc-0123abcd","status":"running"}}}')


class ScriptedWorker(unittest.TestCase):

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="sg-e2e-sgclient-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.fake = os.path.join(self.dir, "worker")
        with open(self.fake, "w") as f:
            f.write("#!%s\n%s" % (sys.executable, WORKER))
        os.chmod(self.fake, 0o755)
        self.seen = os.path.join(self.dir, "seen")

    def worker(self, *script):
        """A Gateway on the scripted worker: script[n] answers request n."""
        saved, sgclient.BIN = sgclient.BIN, self.fake
        try:
            gw = Gateway(config=None, profile=None,
                         env_extra={"SG_SCRIPT": json.dumps(script), "SG_SEEN": self.seen})
        finally:
            sgclient.BIN = saved
        self.addCleanup(gw.cleanup)
        return gw

    def sent(self):
        with open(self.seen) as f:
            return [json.loads(l) for l in f]

    def violations_after(self, *lines, method="execute"):
        """The violations one request answered with lines produces."""
        gw = self.worker(list(lines))
        rid = gw.request(method, {})
        gw.shutdown(10)
        self.assertIsInstance(rid, str)
        return gw.violations

    # ---- what the client writes ------------------------------------------

    def test_frames_are_the_hosts(self):
        gw = self.worker(['{"id":{id},"data":{"version":4,"root":"/workspace"}}'],
                         ['{"id":{id},"data":{"content":[{"type":"text","text":"{}"}]}}'],
                         [], ['{"id":{id},"error":"cancelled: by the host"}'])
        gw.initialize()
        gw.tool("read_file", {"path": "a"}, mode="read_only")
        rid = gw.execute_req("bash", {"command": "sleep 9"}, actor="sub-1", attribution=True)
        gw.cancel(rid)
        self.assertEqual(gw.wait_reply(rid, 10).code, "cancelled")
        gw.shutdown(10)
        self.assertEqual(gw.violations, [])
        init, read, bash, cancel = self.sent()
        self.assertEqual([f["id"] for f in (init, read, bash)], ["1", "2", "3"])
        for f in (init, read, bash, cancel):
            self.assertRegex(f["token"], r"^[0-9a-f]{64}$")
            self.assertEqual(f["token"], init["token"])
        self.assertEqual(list(init), ["token", "id", "method", "data"])
        call = read["data"]["call"]
        self.assertEqual((call["name"], json.loads(call["arguments"]), call["kind"]),
                         ("read_file", {"path": "a"}, "function"))
        self.assertTrue(call["id"].startswith("call"))
        self.assertEqual(read["data"]["permission_mode"], "read_only")
        self.assertEqual(read["data"]["actor"], gw.session)
        self.assertIs(read["data"]["git_attribution_enabled"], False)
        self.assertNotIn("tool", read["data"])
        self.assertEqual((bash["data"]["actor"], bash["data"]["git_attribution_enabled"],
                          bash["data"]["permission_mode"]), ("sub-1", True, "standard"))
        # The host's cancel: the target's id, no data.
        self.assertEqual(cancel, {"token": init["token"], "id": "3", "method": "cancel"})

    def test_process_helpers_nest_the_read_options(self):
        rec = {"id": "proc-0123abcd", "status": "running"}
        view = dict(rec, action="start")
        gw = self.worker(['{"id":{id},"data":{"version":4}}'],
                         ['{"id":{id},"data":{"content":[{"type":"text","text":%s}]}}'
                          % json.dumps(json.dumps(view))],
                         ['{"id":{id},"data":{"Process":%s,"Output":"x"}}' % json.dumps(rec)],
                         ['{"id":{id},"data":%s}' % json.dumps(rec)])
        gw.initialize()
        self.assertEqual(gw.start("sleep 9"), rec)
        self.assertEqual(gw.read("proc-0123abcd", max_bytes=5)["Output"], "x")
        gw.stop("proc-0123abcd")
        gw.shutdown(10)
        _, start, read, stop = self.sent()
        self.assertEqual(json.loads(start["data"]["call"]["arguments"]),
                         {"command": "sleep 9", "run_in_background": True})
        self.assertEqual(read["data"], {"id": "proc-0123abcd", "options": {
            "MaxBytes": 5, "OffsetBytes": None, "Wait": 0, "MinDwell": 0}})
        self.assertEqual((stop["method"], stop["data"]), ("process/stop", {"id": "proc-0123abcd"}))

    # ---- what the checker accepts -----------------------------------------

    def test_the_hosts_frames_pass(self):
        gw = self.worker([EVENT, '{"id":{id},"data":null}'],
                         ['{"method":"tool","parent_id":{id},"id":"cb-1","data":'
                          '{"id":"1","name":"read_file","arguments":"{}","kind":"function"}}',
                          '{"id":{id},"data":{"Value":1}}'])
        gw.wait_reply(gw.request("process/list"), 10)
        gw.wait_reply(gw.request("run_code", {}), 10)
        gw.shutdown(10)
        self.assertEqual(gw.violations, [])
        self.assertEqual(gw.events, [json.loads(EVENT)["data"]])
        self.assertEqual(gw.events[0].seq, 1)
        self.assertEqual([t["id"] for t in gw.tool_calls], ["cb-1"])

    def test_a_numeric_id_echoed_for_a_numeric_request_passes(self):
        gw = self.worker(['{"id":{id},"data":{}}'])
        gw.wait_reply(gw.request("process/list", id=7), 10)
        gw.shutdown(10)
        self.assertEqual(gw.violations, [])

    # ---- what the checker refuses -----------------------------------------

    def assertCaught(self, lines, words, method="execute"):
        v = self.violations_after(*lines, method=method)
        self.assertTrue(any(re.search(words, x) for x in v),
                        "%r not caught (%s): %s" % (lines, words, v))

    def test_a_numeric_id_for_a_string_request(self):
        self.assertCaught(['{"id":1,"data":{}}'], "not a string")

    def test_a_reply_with_both_or_neither(self):
        self.assertCaught(['{"id":{id},"data":{},"error":"x: y"}'], "exactly one")
        self.assertCaught(['{"id":{id}}'], "exactly one")

    def test_an_error_without_a_code_or_empty(self):
        self.assertCaught(['{"id":{id},"error":"no code here"}'], "without a code")
        self.assertCaught(['{"id":{id},"error":""}'], "empty error")

    def test_a_second_reply(self):
        self.assertCaught(['{"id":{id},"data":{}}', '{"id":{id},"data":{}}'], "not in flight")

    def test_a_key_outside_the_hosts_struct(self):
        self.assertCaught(['{"id":{id},"data":{},"metadata":{}}'], "outside the host")

    def test_the_old_event_and_its_types(self):
        self.assertCaught(['{"method":"process/event","data":{"type":"started"}}',
                           '{"id":{id},"data":{}}'], "without an id|unexpected method")
        self.assertCaught([EVENT.replace('"started"', '"exited"'), '{"id":{id},"data":{}}'],
                          "Type/Cause")
        self.assertCaught([EVENT.replace('"id":""', '"id":"5"'), '{"id":{id},"data":{}}'],
                          "event with an id")

    def test_a_tool_frame_outside_a_live_run_code(self):
        tool = ('{"method":"tool","parent_id":{id},"id":"cb-1","data":'
                '{"id":"1","name":"read_file","arguments":"{}"}}')
        # A nested call belongs to a run_code or an execute (apply_patch's
        # then_run) still in flight; no other request calls back.
        self.assertCaught([tool, '{"id":{id},"data":{}}'], "outside a live run_code",
                          method="process/list")
        self.assertCaught(['{"id":{id},"data":{}}', tool], "outside a live run_code",
                          method="run_code")
        self.assertCaught(['{"id":{id},"data":{}}', tool], "outside a live run_code")

    def test_lines_that_are_not_frames(self):
        self.assertCaught(['not json', '{"id":{id},"data":{}}'], "not JSON")
        self.assertCaught(['[1,2]', '{"id":{id},"data":{}}'], "not an object")
        self.assertCaught(['{"method":"invokeTool","id":"sg-1","data":{}}',
                           '{"id":{id},"data":{}}'], "unexpected method")

    def test_a_failed_tool_must_be_an_error_reply(self):
        gw = self.worker(['{"id":{id},"data":{"content":"text","is_error":true}}'],
                         ['{"id":{id},"data":{"content":[{"type":"text","text":"x"}],'
                          '"is_error":true}}'])
        with self.assertRaisesRegex(AssertionError, "not an array of parts"):
            gw.tool("read_file", {"path": "a"})
        with self.assertRaisesRegex(AssertionError, "is_error"):
            gw.tool_ok("read_file", {"path": "a"})


if __name__ == "__main__":
    unittest.main()
