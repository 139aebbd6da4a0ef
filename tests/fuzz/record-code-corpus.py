#!/usr/bin/env python3
"""record-code-corpus.py SG_JSRUN OUTDIR - seeds for fuzz_code.c, recorded
from a real sg-jsrun: each program below is run as the gateway runs it
(the boot line, then one line per nested call's result), and the lines it
writes, with the host's answers as '@' lines between them, become one
input.  A call is answered newest first, as fuzz_code.c delivers them.
"""

import json
import os
import subprocess
import sys

LIMITS = {"max_output_bytes": 1 << 20, "max_pending": 128,
          "state_keys_max": 256, "state_bytes_max": 1 << 20}
TOOLS = [{"name": "t"}, {"name": "read_file"}, {"name": "x"}]
TEXT = {"content": [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}],
        "structured_content": {"n": 2}}
IMAGE = {"content": [{"type": "text", "text": "pic"},
                     {"type": "image", "data": "aGk=", "mime_type": "image/png"}]}
FAILED = {"content": [{"type": "text", "text": "no such file"}], "is_error": True}

# (name, code, the answers in the order they are given, initial state)
PROGRAMS = [
    ("call-store-return", "console.log('start', {a: 1}); const r = await tools.t({a: 1});"
     " store('k', r.structured_content); return {n: r.structured_content.n};", [TEXT], None),
    ("error-answer", "try { await tools.read_file({path: 'a'}); } catch (e) {"
     " console.log(e.name, e.message); } return 1;", ["error"], None),
    ("is-error", "try { await tools.read_file({path: 'b'}); } catch (e) { return e.message; }",
     [FAILED], None),
    ("media", "await tools.x({}); return 'ok';", [IMAGE], None),
    ("many-pending", "const ps = []; for (let i = 0; i < 5; i++) ps.push(tools.t({i}));"
     " return (await Promise.all(ps)).length;", [TEXT] * 5, None),
    ("throw", "console.log('before'); throw new Error('boom');", [], None),
    ("state", "const v = load('old'); remove('gone'); store('new', [v, 2]);"
     " return load('new');", [], {"old": {"x": 1}, "gone": "y"}),
    ("unicode-log", "console.log('\\u00e9\\u4e2d\\ud83d\\ude00\\n\\t\"'); return null;", [], None),
]


def record(jsrun, code, answers, state):
    boot = dict(LIMITS, code=code, tools=TOOLS)
    if state is not None:
        boot["state"] = state
    proc = subprocess.Popen([jsrun], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)
    proc.stdin.write((json.dumps(boot) + "\n").encode())
    proc.stdin.flush()
    out, waiting, answers = [], [], list(answers)
    while True:
        line = proc.stdout.readline()
        if not line:
            break
        out.append(line)
        msg = json.loads(line)
        if msg["t"] == "call":
            waiting.append(msg["id"])
        if msg["t"] == "done":
            break
        # Answer once the program has sent every call it can before waiting.
        while waiting and len(waiting) == len(answers):
            guest, result = waiting.pop(), answers.pop(0)
            if result == "error":
                host, child = {"id": "cb", "error": "tool failed: nope"}, \
                    {"id": guest, "error": "tool failed: nope"}
            else:
                host, child = {"id": "cb", "data": result}, {"id": guest, "value": result}
            out.append(b"@" + json.dumps(host).encode() + b"\n")
            proc.stdin.write((json.dumps(child) + "\n").encode())
            proc.stdin.flush()
    proc.stdin.close()
    proc.wait(10)
    return b"".join(out)


def main():
    jsrun, outdir = sys.argv[1], sys.argv[2]
    os.makedirs(outdir, exist_ok=True)
    for name, code, answers, state in PROGRAMS:
        traffic = record(jsrun, code, answers, state)
        for view, first in (("canonical", b"\0"), ("model_text", b"\1")):
            with open(os.path.join(outdir, "%s-%s" % (name, view)), "wb") as f:
                f.write(first + traffic)


if __name__ == "__main__":
    main()
