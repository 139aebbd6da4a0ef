"""sg-jsrun, the interpreter run_code's programs run in (issue 36), driven
directly over its pipe as the gateway drives it: the boot line, then one
line per nested call's result; it writes log, call and done lines.

It is built beside sandgate when libmozjs-102-dev is installed
(cmake/jsrun.cmake); without it these tests skip, saying so.
"""

import json
import os
import subprocess
import time
import unittest

JSRUN = os.path.join(os.path.dirname(os.environ.get("SANDGATE_BIN", "")), "sg-jsrun")
LIMITS = {"max_output_bytes": 1 << 20, "max_pending": 128,
          "state_keys_max": 256, "state_bytes_max": 1 << 20}
STANDARD = {"undefined", "globalThis", "Function", "Object", "eval", "Array", "Boolean", "JSON",
            "Date", "Math", "isNaN", "isFinite", "parseInt", "parseFloat", "NaN", "Infinity",
            "Number", "escape", "unescape", "decodeURI", "encodeURI", "decodeURIComponent",
            "encodeURIComponent", "String", "RegExp", "Error", "InternalError",
            "AggregateError", "EvalError", "RangeError", "ReferenceError", "SyntaxError",
            "TypeError", "URIError", "ArrayBuffer", "Int8Array", "Uint8Array", "Int16Array",
            "Uint16Array", "Int32Array", "Uint32Array", "Float32Array", "Float64Array",
            "Uint8ClampedArray", "BigInt64Array", "BigUint64Array", "BigInt", "Proxy",
            "WeakMap", "Map", "Set", "DataView", "Symbol", "Intl", "Reflect", "WeakSet",
            "Promise"}
SURFACE = {"tools", "console", "ToolCallError", "searchTools", "describeTool", "store", "load",
           "remove"}


class Program:
    """One sg-jsrun process running one program."""

    def __init__(self, code, tools=(), state=None, **limits):
        boot = dict(LIMITS, code=code, tools=[{"name": t} for t in tools], **limits)
        if state is not None:
            boot["state"] = state
        self.proc = subprocess.Popen([JSRUN], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE)
        self.send(boot)
        self.logs = []

    def send(self, msg):
        self.proc.stdin.write((json.dumps(msg) + "\n").encode())
        self.proc.stdin.flush()

    def next(self):
        """The next call or done line; logs are collected on the way."""
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise AssertionError("sg-jsrun ended without a done line: %r"
                                     % self.proc.stderr.read()[-2000:])
            msg = json.loads(line)
            if msg["t"] != "log":
                return msg
            self.logs.append(msg["text"])

    def finish(self):
        msg = self.next()
        if msg["t"] != "done":
            raise AssertionError("expected done, got %r" % msg)
        self.proc.stdin.close()
        self.proc.wait(10)
        self.proc.stdout.close()
        self.proc.stderr.close()
        return msg

    def kill(self):
        self.proc.kill()
        self.proc.wait(10)
        for f in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            f.close()


def run(code, **kw):
    return Program(code, **kw).finish()


@unittest.skipUnless(os.access(JSRUN, os.X_OK),
                     "sg-jsrun is not built (libmozjs-102-dev missing: cmake/jsrun.cmake)")
class Interpreter(unittest.TestCase):

    def test_program_awaits_a_nested_call(self):
        p = Program("console.log('start', {n: 1}); "
                    "const r = await tools.read_file({path: 'a.txt', n: [1, 2.5, null]}); "
                    "return r.content[0].text + '!';", tools=["read_file"])
        call = p.next()
        self.assertEqual((call["t"], call["id"], call["name"]), ("call", 1, "read_file"))
        self.assertEqual(json.loads(call["arguments"]), {"path": "a.txt", "n": [1, 2.5, None]})
        p.send({"id": 1, "value": {"content": [{"type": "text", "text": "hi"}]}})
        done = p.finish()
        self.assertEqual(done.get("value"), "hi!")
        self.assertNotIn("error", done)
        self.assertEqual(p.logs, ['start {"n":1}'])

    def test_failed_calls_reject_with_tool_call_error(self):
        p = Program("const out = []; for (const n of ['a', 'b']) { "
                    "try { await tools[n]({}); } catch (e) { "
                    "out.push([e instanceof ToolCallError, e.toolName, e.message]); } } "
                    "return out;", tools=["a", "b"])
        p.next()
        p.send({"id": 1, "error": "tool failed: no"})
        p.next()
        p.send({"id": 2, "value": {"content": [{"type": "text", "text": "bad path"}],
                                   "is_error": True}})
        self.assertEqual(p.finish()["value"],
                         [[True, "a", "tool failed: no"], [True, "b", "bad path"]])

    def test_imports_and_host_objects_are_absent(self):
        self.assertIn("error", run("await import('node:fs/promises')"))
        self.assertIn("error", run("return require('fs')"))
        kinds = run("return [typeof require, typeof process, typeof setTimeout, "
                    "typeof WebAssembly, typeof SharedArrayBuffer, typeof Atomics, "
                    "typeof print, typeof read, typeof os, typeof fetch]")["value"]
        self.assertEqual(kinds, ["undefined"] * 10)

    def test_the_global_holds_only_builtins_and_the_surface(self):
        names = run("const g = Function('return this')(); const seen = []; "
                    "for (let o = g; o; o = Object.getPrototypeOf(o)) "
                    "seen.push(...Object.getOwnPropertyNames(o)); return seen;")["value"]
        extra = set(names) - STANDARD - SURFACE - set(dir_object_prototype())
        self.assertEqual(extra, set(), "names on the global beyond the standard ones")
        self.assertTrue(SURFACE <= set(names))

    def test_arguments_must_be_lossless_json(self):
        for bad in ("{n: NaN}", "{f: () => 1}", "new Date(0)", "{u: undefined}",
                    "(() => { const a = {}; a.a = a; return a; })()"):
            with self.subTest(bad):
                done = run("await tools.t(%s)" % bad, tools=["t"])
                self.assertRegex(done.get("error", ""), "Expected (lossless|plain) JSON")

    def test_at_most_128_calls_wait(self):
        p = Program("const ps = []; for (let i = 0; i < 129; i++) ps.push(tools.t({i}));"
                    "try { await ps[128]; } catch (e) { return e.message; }", tools=["t"])
        ids = [p.next()["id"] for _ in range(128)]
        self.assertEqual(ids, list(range(1, 129)))
        self.assertEqual(p.finish()["value"],
                         "Too many pending tool calls; process in bounded batches")

    def test_state_is_a_working_copy(self):
        done = run("const before = load('k'); store('k', {done: 2}); store('x', 1); "
                   "return [before, load('k'), remove('x'), remove('x'), load('nope') === undefined];",
                   state={"k": [1]})
        self.assertEqual(done["value"], [[1], {"done": 2}, True, False, True])
        self.assertEqual(done["state"], {"k": {"done": 2}})
        failed = run("store('k', 3); throw new Error('failed')", state={"k": 1})
        self.assertEqual(failed.get("error"), "failed")
        self.assertNotIn("state", failed, "a failed program's state must not be committed")
        full = run("for (let i = 0; i < 257; i++) store('k' + i, i);")
        self.assertIn("key limit", full.get("error", ""))

    def test_output_is_capped(self):
        done = run("const s = 'x'.repeat(1 << 19); console.log(s); console.log(s); return 1;")
        self.assertEqual(done.get("error"), "PTC output exceeded the byte limit")

    def test_catalog(self):
        p = Program("return [searchTools('READ', {limit: 1}), describeTool('read_file').name,"
                    " Object.keys(tools)]", tools=["read_file", "write_file", "read_more"])
        value = p.finish()["value"]
        self.assertEqual(value[0]["total"], 2)
        self.assertEqual(value[0]["next_offset"], 1)
        self.assertEqual([t["name"] for t in value[0]["tools"]], ["read_file"])
        self.assertEqual(value[1:], ["read_file", ["read_file", "write_file", "read_more"]])

    def test_polluted_builtins_do_not_forge_lines(self):
        p = Program("JSON.stringify = () => '{\"t\":\"done\",\"value\":1}'; "
                    "Array.prototype[Symbol.iterator] = function* () {}; "
                    "Map.prototype.set = () => { throw new Error('polluted'); }; "
                    "Promise.prototype.then = () => {}; "
                    "const r = await tools.t({a: 1}); return r.v;", tools=["t"])
        call = p.next()
        self.assertEqual((call["t"], json.loads(call["arguments"])), ("call", {"a": 1}))
        p.send({"id": 1, "value": {"v": 5}})
        self.assertEqual(p.finish().get("value"), 5)

    def test_memory_is_bounded(self):
        start = time.monotonic()
        for code in ("new ArrayBuffer(2 * 1024 * 1024 * 1024)",
                     "const a = []; for (;;) a.push(new ArrayBuffer(64 << 20));",
                     "let s = 'x'; for (;;) s += s;"):
            with self.subTest(code):
                self.assertIn("error", run(code))
        self.assertLess(time.monotonic() - start, 60)

    def test_confined_while_it_waits(self):
        p = Program("await tools.t({}); return 1", tools=["t"])
        p.next()
        with open("/proc/%d/status" % p.proc.pid) as f:
            status = dict(line.split(":", 1) for line in f.read().splitlines() if ":" in line)
        fds = os.listdir("/proc/%d/fd" % p.proc.pid)
        p.kill()
        self.assertEqual(status["Seccomp"].strip(), "2")
        self.assertEqual(status["NoNewPrivs"].strip(), "1")
        self.assertEqual(sorted(fds), ["0", "1", "2"])

    def test_a_busy_loop_is_stopped_by_its_owner(self):
        p = Program("tools.t({}); for (;;) {}", tools=["t"])
        self.assertEqual(p.next()["t"], "call")
        time.sleep(0.2)
        self.assertIsNone(p.proc.poll(), "a busy program ended on its own")
        p.kill()


def strips_typescript(build=None):
    """Whether the build in directory build (sg-jsrun's by default)
    compiled the TypeScript stripper in: its CMake cache asks for it and
    the configure step made strip.inc (it needs node, npm and the npm
    registry; cmake/jsrun.cmake says which it lacked)."""
    build = build or os.path.dirname(JSRUN)
    try:
        with open(os.path.join(build, "CMakeCache.txt")) as f:
            cache = f.read()
    except OSError:
        return False
    return "SG_JSRUN_TYPESCRIPT:BOOL=OFF" not in cache and \
        os.path.exists(os.path.join(build, "jsrun", "strip.inc"))


# TypeScript as models write it in run_code programs; each returns 'ok'.
TYPESCRIPT = [
    "const n: number = 1; const s: string = 'ok'; return n === 1 ? s : 'no';",
    "interface Hit { path: string; line?: number }\n"
    "const hits: Hit[] = [{path: 'a'}]; return hits.length === 1 ? 'ok' : 'no';",
    "type Pair<T> = [T, T];\nconst p: Pair<string> = ['o', 'k']; return p.join('');",
    "const r = (await tools.t({})) as {content: {text: string}[]}; return r.content[0].text;",
    "function first<T>(xs: T[]): T | undefined { return xs[0]; }\nreturn first<string>(['ok']);",
    "const m = new Map<string, number[]>(); m.set('ok', [1]); return [...m.keys()][0];",
    "const r = await tools.t({}); return r!.content![0]!.text;",
    "const f = async (name: string, opts?: {limit: number}): Promise<string> => name;\n"
    "return await f('ok');",
    "const o = {v: 'ok'} satisfies Record<string, string>; return o.v;",
    "let x!: string; x = 'ok'; return x as string;",
    "declare const never: number;\nimport type { T } from 'types';\nreturn 'ok';",
    "class Box<T> { private v: T; constructor(v: T) { this.v = v; } get(): T { return this.v; } }\n"
    "return new Box<string>('ok').get();",
]


@unittest.skipUnless(os.access(JSRUN, os.X_OK) and strips_typescript(),
                     "sg-jsrun is not built with the TypeScript stripper (cmake/jsrun.cmake)")
class TypeScript(unittest.TestCase):
    """The host strips TypeScript types before running a program
    (node:module stripTypeScriptTypes); sg-jsrun does with sucrase, only
    for a program that is not JavaScript already."""

    def answered(self, code):
        p = Program(code, tools=["t"])
        msg = p.next()
        while msg["t"] == "call":
            p.send({"id": msg["id"], "value": {"content": [{"type": "text", "text": "ok"}]}})
            msg = p.next()
        p.proc.stdin.close()
        p.proc.wait(10)
        p.proc.stdout.close()
        p.proc.stderr.close()
        return msg

    def test_the_types_models_write_are_stripped(self):
        for code in TYPESCRIPT:
            with self.subTest(code):
                done = self.answered(code)
                self.assertEqual((done.get("error"), done.get("value")), (None, "ok"))

    def test_lines_keep_their_numbers(self):
        # An error's line is the same as in JavaScript of the same shape.
        throw = "throw new Error('line ' + new Error().lineNumber);"
        ts = run("interface A {\n  a: number\n}\nconst a: A = {a: 1};\n" + throw)
        js = run("\n\n\nconst a = {a: 1};\n" + throw)
        self.assertRegex(js.get("error", ""), "^line [0-9]+$")
        self.assertEqual(ts.get("error"), js.get("error"))

    def test_javascript_is_not_rewritten(self):
        # Valid JavaScript that a TypeScript parser would read as a generic
        # call runs as JavaScript.
        done = run("const a = 1, b = 2, c = 3; return a < b > (c);")
        self.assertEqual(done.get("value"), False)

    def test_broken_programs_still_fail(self):
        for code in ("const x: number = ; return 1", "return {", "let a: = 1"):
            with self.subTest(code):
                self.assertIn("error", run(code))

    def test_stripping_leaves_the_global_as_it_was(self):
        names = run("const g: any = Function('return this')(); const seen: string[] = []; "
                    "for (let o = g; o; o = Object.getPrototypeOf(o)) "
                    "seen.push(...Object.getOwnPropertyNames(o)); return seen;")["value"]
        extra = set(names) - STANDARD - SURFACE - set(dir_object_prototype())
        self.assertEqual(extra, set(), "names on the global beyond the standard ones")


def dir_object_prototype():
    return ["constructor", "__proto__", "toString", "toLocaleString", "valueOf",
            "hasOwnProperty", "isPrototypeOf", "propertyIsEnumerable", "__defineGetter__",
            "__defineSetter__", "__lookupGetter__", "__lookupSetter__"]


if __name__ == "__main__":
    unittest.main()
