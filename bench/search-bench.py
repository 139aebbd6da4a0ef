#!/usr/bin/env python3
"""search-bench.py - the catalogue's glob and grep against find and rg.

Generates a tree of FILES files (default 70,000) in a temporary directory,
serves it with `sandgate serve` on the local backend (a profile whose
host_workspace is that directory), and times each search both ways on a
warm cache: the tool call as the host sees it (request written to reply
read), and the program it stands in for run directly on the same tree
(find for glob, rg for grep, output read to the end).  Prints one line per
case and a markdown table (--markdown) with the medians and their ratio,
in wall time and in CPU time (the gateway's own, its engines' included,
against the direct program's), which a loaded machine distorts far less.

    SANDGATE_BIN=build/sandgate python3 bench/search-bench.py [--files N] [--runs N]

Python 3 standard library only; the protocol client is tests/e2e/sgclient.py.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "e2e"))


def generate(top, files):
    """files files in 10 x 10 x ... directories, every 97th holding a TODO."""
    exts = ("c", "h", "py", "md", "txt", "js", "go")
    for i in range(files):
        d = os.path.join(top, "pkg%02d" % (i % 50), "mod%02d" % (i // 50 % 40), "d%d" % (i % 7))
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "f%06d.%s" % (i, exts[i % len(exts)])), "w") as f:
            for line in range(12):
                if (i * 12 + line) % 97 == 0:
                    f.write("    // TODO(bench): item %d\n" % i)
                else:
                    f.write("value_%d = %d + %d\n" % (line, i, line))


def proc_cpu(pid):
    """CPU seconds of pid and its reaped children (utime, stime, cutime, cstime)."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def children_cpu():
    r = os.times()
    return r.children_user + r.children_system


def timed(fn, runs, cpu):
    """Medians of wall time and of CPU time (cpu() before and after)."""
    wall, used = [], []
    for _ in range(runs):
        c, t = cpu(), time.perf_counter()
        fn()
        wall.append(time.perf_counter() - t)
        used.append(cpu() - c)
    return statistics.median(wall), statistics.median(used)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=70000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--markdown", action="store_true")
    a = ap.parse_args()
    if not os.environ.get("SANDGATE_BIN"):
        sys.exit("search-bench: set SANDGATE_BIN")
    rg = shutil.which("rg")
    if not rg:
        sys.exit("search-bench: rg is not installed")
    work = tempfile.mkdtemp(prefix="sg-search-bench-")
    tree = os.path.join(work, "tree")
    try:
        generate(tree, a.files)
        if os.geteuid() == 0:
            # The local backend never runs commands as root: a host workspace
            # that root owns is refused, so the tree goes to an unprivileged user.
            subprocess.run(["chown", "-R", "65534:65534", work], check=True)
        cfg = os.path.join(work, "config.json")
        with open(cfg, "w") as f:
            json.dump({"default": "b", "profiles": {"b": {"backend": "local",
                                                          "host_workspace": tree}}}, f)
        os.environ["SANDGATE_TEST_CONFIG"] = cfg
        os.environ["SANDGATE_TEST_PROFILE"] = "b"
        import sgclient
        gw = sgclient.Gateway()
        gw.initialize()

        def tool(name, args, check):
            def run():
                check(gw.view(name, args, timeout=600))
            return run

        def direct(argv):
            def run():
                subprocess.run(argv, cwd=tree, stdout=subprocess.PIPE, check=False)
            return run

        todo = a.files * 12 // 97
        cases = [
            ("glob `**/*.c`", tool("glob", {"pattern": "**/*.c"},
                                   lambda v: v["total"] >= a.files // 7),
             "find . -type f -name '*.c'", direct(["find", ".", "-type", "f", "-name", "*.c"])),
            ("glob `**/*.{c,h}`", tool("glob", {"pattern": "**/*.{c,h}"},
                                       lambda v: v["total"] >= 2 * a.files // 7),
             "find . -type f ( -name '*.c' -o -name '*.h' )",
             direct(["find", ".", "-type", "f", "(", "-name", "*.c", "-o", "-name", "*.h", ")"])),
            ("grep `item 4242[0-9]` (rare)", tool("grep", {"pattern": "item 4242[0-9]"},
                                                 lambda v: True),
             "rg -n 'item 4242[0-9]'", direct([rg, "-n", "item 4242[0-9]"])),
            ("grep `TODO` (%d matches, the first page)" % todo,
             tool("grep", {"pattern": "TODO"}, lambda v: v["total"] >= todo - 50),
             "rg -n TODO", direct([rg, "-n", "TODO"])),
        ]
        rows = []
        for name, fn, dname, dfn in cases:
            fn()  # warm the cache and check the answer
            dfn()
            t_tool, c_tool = timed(fn, a.runs, lambda: proc_cpu(gw.proc.pid))
            t_direct, c_direct = timed(dfn, a.runs, children_cpu)
            rows.append((name, t_tool, c_tool, dname, t_direct, c_direct))
            print("%-40s wall %7.3f s cpu %6.3f s | %-45s wall %7.3f s cpu %6.3f s | "
                  "wall %.2fx cpu %.2fx" % (name, t_tool, c_tool, dname, t_direct, c_direct,
                                            t_tool / t_direct, c_tool / max(c_direct, 0.01)),
                  flush=True)
        gw.cleanup()
        if a.markdown:
            print()
            print("| tool call | wall | CPU | direct | wall | CPU | wall ratio | CPU ratio |")
            print("|---|---|---|---|---|---|---|---|")
            for name, t, c, dname, td, cd in rows:
                print("| %s | %.3f s | %.3f s | `%s` | %.3f s | %.3f s | %.2f× | %.2f× |"
                      % (name, t, c, dname, td, cd, t / td, c / max(cd, 0.01)))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
