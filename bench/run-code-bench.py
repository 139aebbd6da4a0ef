#!/usr/bin/env python3
"""run-code-bench.py - what run_code costs (issue 36).

Measures, on the local backend through the host-faithful driver
(tests/e2e/hostdriver.py):
- sg-jsrun's start: a program that only returns, run directly over its
  pipe (process start, engine, confinement, bridge) and through sandgate
  (the whole run_code request as the host sees it);
- one nested call: a program awaiting N calls in a row that the host's
  handler answers at once, less the empty program, divided by N; beside
  it one plain execute of read_file;
- sg-jsrun's peak memory (the largest resident set of the direct runs).

    SANDGATE_BIN=build/sandgate python3 bench/run-code-bench.py [--runs N] [--calls N]

sg-jsrun is found beside SANDGATE_BIN.  Through sandgate needs run_code in
its methods; without it only the direct figures are printed.
"""

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "e2e"))

import hostdriver as hd  # noqa: E402
from hostdriver import Ctx, HostEnvironment  # noqa: E402

LIMITS = {"max_output_bytes": 1 << 20, "max_pending": 128,
          "state_keys_max": 256, "state_bytes_max": 1 << 20}


def ms(seconds):
    return "%.2f ms" % (seconds * 1000)


def direct(jsrun, runs):
    boot = (json.dumps(dict(LIMITS, code="return 9", tools=[])) + "\n").encode()
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        out = subprocess.run([jsrun], input=boot, capture_output=True, check=True).stdout
        times.append(time.perf_counter() - t)
        assert b'"value":9' in out, out
    peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return statistics.median(times), peak_kib


def through(runs, calls):
    env = HostEnvironment(session="bench")
    try:
        env.connect()
        if "run_code" not in env.methods:
            return None
        empty = []
        for _ in range(runs):
            t = time.perf_counter()
            env.run_code("return 9", actor="a", ctx=Ctx(60))
            empty.append(time.perf_counter() - t)
        handler = lambda ctx, call: {"content": [{"type": "text", "text": "x"}]}  # noqa: E731
        loop = []
        for _ in range(max(3, runs // 5)):
            t = time.perf_counter()
            r = env.run_code("for (let i = 0; i < %d; i++) await tools.t({i}); return 1" % calls,
                             tools=[{"name": "t"}], handler=handler, actor="a", ctx=Ctx(120))
            loop.append(time.perf_counter() - t)
            assert not r.get("Error"), r
        env.run("write_file", '{"path":"b.txt","content":"x"}', actor="a", mode="standard",
                ctx=Ctx(60))
        plain = []
        for _ in range(runs):
            t = time.perf_counter()
            env.run("read_file", '{"path":"b.txt"}', actor="a", mode="standard", ctx=Ctx(60))
            plain.append(time.perf_counter() - t)
        e = statistics.median(empty)
        return e, (statistics.median(loop) - e) / calls, statistics.median(plain)
    finally:
        env.cleanup()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--calls", type=int, default=200)
    a = ap.parse_args()
    jsrun = os.path.join(os.path.dirname(os.environ["SANDGATE_BIN"]), "sg-jsrun")
    if not os.access(jsrun, os.X_OK):
        sys.exit("sg-jsrun is not built beside SANDGATE_BIN (libmozjs-102-dev missing?)")
    start, peak = direct(jsrun, a.runs)
    print("sg-jsrun start, direct (median of %d): %s" % (a.runs, ms(start)))
    print("sg-jsrun peak resident memory: %.1f MiB" % (peak / 1024))
    res = through(a.runs, a.calls)
    if res is None:
        print("run_code is not in sandgate's methods: nothing measured through it")
        return
    empty, per_call, plain = res
    print("run_code 'return 9' through sandgate (median): %s" % ms(empty))
    print("one nested call (median of %d-call programs, less the empty one): %s"
          % (a.calls, ms(per_call)))
    print("one plain execute of read_file (median): %s" % ms(plain))


if __name__ == "__main__":
    hd.SLACK = max(hd.SLACK, 1)
    main()
