#!/usr/bin/env python3
"""bench/singularity-bench.py - the bash tool through sandgate's singularity
backend against the same command run with the runtime directly.

    SANDGATE_BIN=build/sandgate python3 bench/singularity-bench.py [--n 100] [--runtime PATH]
        [--image SIF] [--markdown FILE]

Starts `sandgate serve` on a singularity profile (the fake apptainer in
tests/fakes/apptainer unless --runtime names a real one and --image a
SIF), then, interleaved in rotating order after 10 warm-up rounds, times
(a) `bash` with command "true" (it was `run_command` argv ["true"] before
the host's wire) from writing the request to reading the reply, and (b)
the very command line the adapter runs (`RUNTIME exec --cleanenv
--no-eval --pwd ROOT instance://NAME ... bash -l -c true`, read
back from the fake's argv log or rebuilt for a real runtime) spawned
directly and waited for, and (c) the bare `RUNTIME exec instance://NAME
true` (no confinement, no variables).  Prints p50/p90 of each and the ratio of p50s as
one JSON object (and, with --markdown, the table of docs/benchmarks.md's
Singularity block, which bench/run.sh puts there).  Needs root for the fake.
"""
import argparse
import json
import os
import random
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(TOP, "tests", "e2e"))

from sgclient import Gateway  # noqa: E402


def pct(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, max(0, int(round(q * len(v) + 0.5)) - 1))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=100)
    ap.add_argument("--runtime", default=os.path.join(TOP, "tests", "fakes", "apptainer", "apptainer"))
    ap.add_argument("--image")
    ap.add_argument("--markdown")
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="sg-sing-bench-")
    home = os.path.join(work, "home")
    os.makedirs(home)
    log = os.path.join(work, "argv.log")
    env = {"HOME": home, "FAKE_APPTAINER_LOG": log,
           "PATH": os.path.dirname(a.runtime) + ":" + os.environ.get("PATH", "")}
    image = a.image
    if not image:
        image = os.path.join(work, "image.sif")
        subprocess.run([a.runtime, "-q", "build", image, "docker://debian:12"], check=True,
                       env=dict(os.environ, **env))
    # sandgate hands the runtime an allow-listed environment, so the argv
    # log's variable reaches the fake through a wrapper of its own.
    wrapper = os.path.join(work, "apptainer")
    with open(wrapper, "w") as f:
        f.write("#!/bin/sh\nexport FAKE_APPTAINER_LOG=%s\nexec %s \"$@\"\n"
                % (shlex.quote(log), shlex.quote(a.runtime)))
    os.chmod(wrapper, 0o755)
    cfg = os.path.join(work, "config.json")
    with open(cfg, "w") as f:
        json.dump({"default": "s", "profiles": {"s": {"backend": "singularity", "image": image,
                                                       "runtime": wrapper}}}, f)
    gw = Gateway(state_dir=os.path.join(work, "state"), config=cfg, profile="s", env_extra=env)
    try:
        gw.initialize(identity="bench")
        gw.tool_ok("bash", {"command": "true"})
        direct = None
        with open(log) as f:
            for line in f:
                av = json.loads(line)
                if "exec" in av and av[-1] == "true":
                    direct = av
        if not direct:
            sys.exit("could not find the adapter's exec command line in %s" % log)
        direct[0] = a.runtime
        denv = {k: v for k, v in os.environ.items()
                if not k.startswith(("APPTAINER", "SINGULARITY"))}
        denv.update(env)
        denv.pop("FAKE_APPTAINER_LOG", None)
        name = [x for x in direct if x.startswith("instance://")][0]
        bare = [a.runtime, "exec", name, "true"]
        through, straight, plain = [], [], []
        for i in range(10 + a.n):
            for kind in [(0, 1, 2), (1, 2, 0), (2, 0, 1)][i % 3]:
                t0 = time.monotonic_ns()
                if kind == 0:
                    gw.tool_ok("bash", {"command": "true"})
                else:
                    if kind == 1 and "--id" in direct:
                        # Each supervised command has a record of its own.
                        direct[direct.index("--id") + 1] = "proc-%08x" % random.getrandbits(32)
                    subprocess.run(direct if kind == 1 else bare, env=denv, check=True, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE)
                dt = (time.monotonic_ns() - t0) / 1e6
                if i >= 10:
                    (through, straight, plain)[kind].append(dt)
        res = {"n": a.n, "runtime": os.path.basename(a.runtime),
               "sandgate_ms": {"p50": round(pct(through, 0.5), 2), "p90": round(pct(through, 0.9), 2)},
               "direct_ms": {"p50": round(pct(straight, 0.5), 2), "p90": round(pct(straight, 0.9), 2)},
               "bare_ms": {"p50": round(pct(plain, 0.5), 2), "p90": round(pct(plain, 0.9), 2)},
               "ratio_p50": round(statistics.median(through) / statistics.median(straight), 3),
               "ratio_p50_vs_bare": round(statistics.median(through) / statistics.median(plain), 3),
               "loadavg": open("/proc/loadavg").read().split()[0]}
        print(json.dumps(res))
        if a.markdown:
            rt = res["runtime"]
            with open(a.markdown, "w") as f:
                f.write("| kind | p50 | p90 |\n|---|---|---|\n")
                for label, key in (("`bash` \"true\" through sandgate", "sandgate_ms"),
                                   ("the adapter's command line, spawned directly", "direct_ms"),
                                   ("bare `%s exec instance://NAME true`" % rt, "bare_ms")):
                    f.write("| %s | %.1f ms | %.1f ms |\n" % (label, res[key]["p50"],
                                                            res[key]["p90"]))
                verdict = "PASS" if res["ratio_p50"] <= 1.3 else "FAIL"
                f.write("\n**Ratio %.2f× against the same command line, %.2f× against the bare "
                        "exec** (%d rounds; target ≤ 1.3×: %s).\n"
                        % (res["ratio_p50"], res["ratio_p50_vs_bare"], a.n, verdict))
    finally:
        gw.shutdown()
        gw.cleanup()
        if not os.environ.get("SGBENCH_KEEP"):
            subprocess.run(["rm", "-rf", work])


if __name__ == "__main__":
    main()
