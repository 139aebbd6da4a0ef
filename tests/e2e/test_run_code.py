"""run_code through sandgate beyond the host's own tests (issue 36): escape
attempts, the limits, result views, media, and one program per state
scope, driven by the host-faithful driver (hostdriver.py).

test_host_wire.py replays the host's run_code tests; these skip, saying
so, while sandgate's initialize reply does not list run_code in `methods`
(sg-jsrun not built: cmake/jsrun.cmake).
"""

import json
import os
import threading
import time
import unittest

import hostdriver as hd
from hostdriver import CallError, Ctx, HostEnvironment
from test_jsrun import strips_typescript

SLACK = hd.SLACK
# The build of the sandgate that runs the programs: through a chain of
# relays (tests/delegation/run-chain.sh) SANDGATE_BIN is the chain's script.
BUILD = os.path.dirname(os.environ.get("SG_CHAIN_BIN") or os.environ.get("SANDGATE_BIN", ""))
# What a sanitized gateway (tests/CMakeLists.txt: SG_SANITIZE, SG_TSAN)
# writes on stderr when it finds a fault; a leak is only reported at exit.
SANITIZER_WORDS = ("Sanitizer", "runtime error:")


class RunCode(unittest.TestCase):

    def setUp(self):
        self.env = HostEnvironment(session="run-code")
        # Cleanups run last first: the gateways have exited when it looks.
        self.addCleanup(self.assert_no_sanitizer_report)
        self.addCleanup(self.env.cleanup)
        self.env.connect()
        if "run_code" not in self.env.methods:
            self.skipTest("sandgate's initialize reply does not list run_code")

    def run_code(self, code, **kw):
        kw.setdefault("actor", "a")
        kw.setdefault("ctx", Ctx(30 * SLACK))
        return self.env.run_code(code, **kw)

    def raw(self, program, handler=None, **data):
        """The reply data of a run_code request written by hand."""
        client = self.env.connect()
        req = dict({"program": program, "timeout_ms": 0, "permission_mode": "standard",
                    "actor": "a"}, **data)
        return client.call("run_code", req, Ctx(30 * SLACK),
                           handler or (lambda ctx, call: {"content": []}))

    def assert_no_sanitizer_report(self):
        """The gateway's stderr after it exited: a sanitizer's report there
        (a leak, a race, undefined behaviour in gateway/code.c) fails the
        test, which the harness alone would not notice."""
        for client in self.env.clients:
            text = client.diagnostic()
            for word in SANITIZER_WORDS:
                self.assertNotIn(word, text, text[-4000:])

    def assert_usable(self):
        r = self.run_code("return 9")
        self.assertEqual((r.get("Error") or "", r.get("Value")), ("", 9))

    def test_global_holds_nothing_of_the_host(self):
        r = self.run_code(
            "const g = Function('return this')(); const names = [];"
            "for (let o = g; o; o = Object.getPrototypeOf(o)) names.push(...Object.getOwnPropertyNames(o));"
            "return {names, kinds: [typeof WebAssembly, typeof SharedArrayBuffer, typeof Atomics,"
            " typeof require, typeof process, typeof setTimeout, typeof Deno, typeof Bun]};")
        self.assertEqual(r.get("Error") or "", "", json.dumps(r)[:2000])
        self.assertEqual(r["Value"]["kinds"], ["undefined"] * 8)
        for name in ("send", "receive", "os", "print", "read", "readline", "load_file"):
            self.assertNotIn(name, r["Value"]["names"])

    def test_import_fails_and_the_connection_stays(self):
        for code in ("await import('node:fs/promises')", "return require('child_process')",
                     "return eval('import(\"fs\")')"):
            with self.subTest(code):
                self.assertTrue(self.run_code(code).get("Error"))
        self.assert_usable()

    def test_huge_allocations_fail_inside_the_program(self):
        start = time.monotonic()
        for code in ("return new ArrayBuffer(2 * 1024 * 1024 * 1024).byteLength",
                     "const a = []; for (;;) a.push(new Uint8Array(64 << 20));"):
            with self.subTest(code):
                r = self.run_code(code)
                self.assertTrue(r.get("Error"), json.dumps(r)[:500])
        self.assertLess(time.monotonic() - start, 60 * SLACK)
        self.assert_usable()

    def test_a_billion_steps_end_at_the_deadline(self):
        start = time.monotonic()
        r = self.run_code("let n = 0; for (let i = 0; i < 1e9; i++) n += i; return n;",
                          timeout_ms=1000)
        took = time.monotonic() - start
        self.assertEqual(r.get("Error"), "context deadline exceeded")
        self.assertIsNone(r.get("Value"))
        self.assertLess(took, 5 * SLACK)
        self.assert_usable()

    def test_prototype_pollution_stays_in_the_program(self):
        seen = []

        def handler(ctx, call):
            seen.append(call)
            return {"content": [{"type": "text", "text": "ok"}]}

        r = self.run_code(
            "Object.prototype.polluted = 1; Array.prototype.push = () => { throw 1; };"
            "JSON.stringify = () => '{}'; tools.read_file.call = null;"
            "Object.defineProperty(Object.prototype, 'then', {configurable: true, get() { throw new Error('x'); }});"
            "delete Object.prototype.then;"
            "const r = await tools.read_file({path: 'a'}); return r.content[0].text;",
            tools=[{"name": "read_file"}], handler=handler)
        self.assertEqual((r.get("Error") or "", r.get("Value")), ("", "ok"), json.dumps(r))
        self.assertEqual(len(seen), 1)
        self.assertEqual(json.loads(seen[0]["arguments"]), {"path": "a"})
        self.assertEqual(seen[0]["kind"], "function")

    def test_pending_calls_are_bounded(self):
        release = threading.Event()

        def handler(ctx, call):
            release.wait(10 * SLACK)
            return {"content": []}

        r = self.run_code(
            "const ps = []; for (let i = 0; i < 129; i++) ps.push(tools.t({i}));"
            "try { await ps[128]; return 'no limit'; } catch (e) { return e.message; }",
            tools=[{"name": "t"}], handler=handler)
        release.set()
        self.assertEqual(r.get("Value"), "Too many pending tool calls; process in bounded batches")
        self.assertIn("128 interrupted", r.get("CallSummary", ""))

    def test_any_json_a_program_sends_reaches_the_host(self):
        # The gateway checks a call's arguments are JSON text; whatever
        # JSON.stringify writes must pass: NUL in a string, an integer past
        # int64, a bare value, astral characters.
        seen = []

        def handler(ctx, call):
            seen.append(call["arguments"])
            return {"content": []}

        r = self.run_code(
            "await tools.t({s: 'a\\u0000b\\ud83d\\ude00', n: 12345678901234567890, f: -0.5e-300});"
            "await tools.t(7); await tools.t([[[]]]); return 1;",
            tools=[{"name": "t"}], handler=handler)
        self.assertEqual((r.get("Error") or "", r.get("Value")), ("", 1), json.dumps(r)[:500])
        self.assertEqual([json.loads(a) for a in seen],
                         [{"s": "a\u0000b\U0001F600", "n": 12345678901234567000, "f": -0.5e-300},
                          7, [[[]]]])

    def test_result_views(self):
        result = {"content": [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}],
                  "structured_content": {"n": 2}}
        code = "const r = await tools.t({}); return [r.model_text === undefined ? null : r.model_text, r.structured_content.n];"
        tools = [{"name": "t"}]
        canon = self.raw({"code": code, "tools": tools}, lambda c, call: result)
        self.assertEqual((canon["ResultView"], canon["Value"]), ("canonical", [None, 2]))
        text = self.raw({"code": code, "tools": tools, "result_view": "model_text"},
                        lambda c, call: result)
        self.assertEqual((text["ResultView"], text["Value"]), ("model_text", ["one\ntwo", 2]))
        called = []
        with self.assertRaises(CallError) as cm:
            self.raw({"code": code, "tools": tools, "result_view": "everything"},
                     lambda c, call: called.append(call) or result)
        self.assertIn("invalid_argument", str(cm.exception))
        self.assertEqual(called, [], "a refused view still ran the program")

    def test_media_and_summary(self):
        image = {"type": "image", "data": "aGk=", "mime_type": "image/png"}

        def handler(ctx, call):
            if call["name"] == "bad":
                raise CallError("tool failed: nope")
            return {"content": [{"type": "text", "text": "pic"}, image]}

        r = self.run_code("await tools.pic({}); try { await tools.bad({}); } catch (e) {"
                          " console.log(e.name, e.toolName, e.message); } return 1;",
                          tools=[{"name": "pic"}, {"name": "bad"}], handler=handler)
        self.assertEqual(r.get("Media"), [image])
        self.assertEqual(r.get("Logs"), ["ToolCallError bad tool failed: nope"])
        self.assertTrue(r["CallSummary"].startswith(
            "Nested tool calls: 1 succeeded, 1 failed, 0 interrupted.\n"
            "#1 \"pic\": succeeded\n#2 \"bad\": failed\n"), r["CallSummary"])

    def test_output_is_capped(self):
        r = self.run_code("const s = 'x'.repeat(600000); console.log(s); console.log(s);")
        self.assertEqual(r.get("Error"), "PTC output exceeded the byte limit")

    @unittest.skipUnless(strips_typescript(BUILD),
                         "sg-jsrun is not built with the TypeScript stripper (cmake/jsrun.cmake)")
    def test_typescript_runs_as_on_the_host(self):
        seen = []

        def handler(ctx, call):
            seen.append(json.loads(call["arguments"]))
            return {"content": [{"type": "text", "text": "a.txt"}]}

        r = self.run_code(
            "interface Listing { content: { type: string; text: string }[] }\n"
            "const dirs: string[] = ['src', 'docs'];\n"
            "const out: Record<string, string> = {};\n"
            "for (const d of dirs) {\n"
            "  const r = (await tools.list_files({path: d})) as Listing;\n"
            "  out[d] = r.content[0]!.text;\n"
            "}\n"
            "console.log(`listed ${dirs.length as number}`);\n"
            "return out;", tools=[{"name": "list_files"}], handler=handler)
        self.assertEqual(r.get("Error") or "", "", json.dumps(r)[:2000])
        self.assertEqual(r.get("Value"), {"src": "a.txt", "docs": "a.txt"})
        self.assertEqual(r.get("Logs"), ["listed 2"])
        self.assertEqual(seen, [{"path": "src"}, {"path": "docs"}])

    def test_one_program_per_scope(self):
        entered, release = threading.Event(), threading.Event()

        def handler(ctx, call):
            entered.set()
            release.wait(10 * SLACK)
            return {"content": []}

        box = []
        t = threading.Thread(target=lambda: box.append(self.run_code(
            "await tools.wait({}); store('k', 1); return 1;", tools=[{"name": "wait"}],
            handler=handler, actor="same")))
        t.start()
        self.assertTrue(entered.wait(10 * SLACK))
        with self.assertRaises(CallError) as cm:
            self.run_code("return 2", actor="same")
        self.assertIn("PTC state scope already running", str(cm.exception))
        other = self.run_code("return load('k') === undefined", actor="other")
        self.assertEqual(other.get("Value"), True)
        release.set()
        t.join(10 * SLACK)
        self.assertEqual(box[0].get("Value"), 1)
        self.assertEqual(self.run_code("return load('k')", actor="same").get("Value"), 1)


if __name__ == "__main__":
    unittest.main()
