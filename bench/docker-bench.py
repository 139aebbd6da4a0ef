#!/usr/bin/env python3
"""bench/docker-bench.py - the docker backend against Docker used directly.

    SANDGATE_BIN=build/sandgate python3 bench/docker-bench.py [--n 50] [--ttfr-n 5]
        [--runtime runsc] [--markdown FILE]

Starts a private dockerd with the test image (tests/docker/dockerd-harness.sh,
stopped after), then in one run, interleaved in rotating order after 5
warm-up rounds:

  bash "true"   (a) the `bash` tool with command "true" through a gateway
                that is up, from writing the request to reading the reply;
                (b) `docker exec -u USER CONTAINER bash -l -c true` on the
                same container (the CLI: its own process, two API calls);
                (c) one exec through the Engine API without the CLI
                (curl --unix-socket, create + start).
  first result  (d) a new `sandgate serve` on a new identity, from the spawn
                to the reply of its first bash "true" (initialize included:
                create, sg-helper copied in, start, set-up); (e) `docker run
                --rm` with the host's flags and the same image running
                `bash -l -c true`, from the spawn to its exit.

Prints p50/p90 of each and the ratios of the p50s as one JSON object, and
with --markdown the table.  Requests on the socket are counted by the
gateway itself: `--log-level debug` logs "N Docker requests" at the end (a
bash "true" is two: the exec's create and start).  Needs root and dockerd
(exit 77 without).
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(TOP, "tests", "e2e"))

from sgclient import Gateway  # noqa: E402

HARNESS = os.path.join(TOP, "tests", "docker", "dockerd-harness.sh")
IMAGE = "sandgate-test:1"


def pct(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, max(0, int(round(q * len(v) + 0.5)) - 1))]


def stats(v):
    return {"p50": round(pct(v, 0.5), 1), "p90": round(pct(v, 0.9), 1), "n": len(v)}


def timed(fn):
    t0 = time.monotonic_ns()
    fn()
    return (time.monotonic_ns() - t0) / 1e6


def run(argv, env):
    subprocess.run(argv, env=env, check=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def api_exec(sock, cid, user):
    """One exec through the Engine API (create + start), no CLI."""
    body = json.dumps({"AttachStdout": True, "AttachStderr": True, "User": user,
                       "Cmd": ["bash", "-l", "-c", "true"]})
    out = subprocess.run(["curl", "-s", "--unix-socket", sock, "-H", "Content-Type: application/json",
                          "-d", body, "http://d/v1.41/containers/%s/exec" % cid],
                         check=True, stdout=subprocess.PIPE).stdout
    xid = json.loads(out)["Id"]
    subprocess.run(["curl", "-s", "--unix-socket", sock, "-H", "Content-Type: application/json",
                    "-d", '{"Detach":false,"Tty":false}', "http://d/v1.41/exec/%s/start" % xid],
                   check=True, stdout=subprocess.PIPE)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=50)
    ap.add_argument("--ttfr-n", type=int, default=5)
    ap.add_argument("--runtime")
    ap.add_argument("--markdown")
    a = ap.parse_args()
    # gVisor has no Landlock: commands there run only unconfined (docs/docker.md).
    mode = "unconfined" if a.runtime == "runsc" else None
    try:
        out = subprocess.run(["sh", HARNESS, "start"], check=True, stdout=subprocess.PIPE,
                             text=True).stdout
    except subprocess.CalledProcessError as e:
        sys.exit(e.returncode)
    info = dict(line.split("=", 1) for line in out.split())
    d = info["DOCKER_DIR"]
    sock = info["DOCKER_HOST"][len("unix://"):]
    env = dict(os.environ, DOCKER_HOST=info["DOCKER_HOST"])
    os.environ["DOCKER_HOST"] = info["DOCKER_HOST"]
    prof = {"backend": "docker", "image": IMAGE, "network": "none"}
    if a.runtime:
        prof["runtime"] = a.runtime
    cfg = os.path.join(d, "config.json")
    with open(cfg, "w") as f:
        json.dump({"default": "d", "profiles": {"d": prof}}, f)
    flags = ["--init", "--cap-drop=ALL", "--security-opt=no-new-privileges", "--pids-limit=512",
             "--user", "65534:65534", "--env", "HOME=/tmp/wuu-home", "--network=none"]
    if a.runtime:
        flags.append("--runtime=" + a.runtime)
    gws = []
    try:
        gw = Gateway(state_dir=os.path.join(d, "state"), config=cfg, profile="d")
        gws.append(gw)
        gw.initialize(identity="bench")
        gw.tool_ok("bash", {"command": "true"}, mode)
        cid = gw.init_reply["environment"]["id"]
        through, cli, api = [], [], []
        for i in range(5 + a.n):
            for kind in [(0, 1, 2), (1, 2, 0), (2, 0, 1)][i % 3]:
                if kind == 0:
                    dt = timed(lambda: gw.tool_ok("bash", {"command": "true"}, mode))
                elif kind == 1:
                    dt = timed(lambda: run(["docker", "exec", "-u", "65534:65534", cid,
                                            "bash", "-l", "-c", "true"], env))
                else:
                    dt = timed(lambda: api_exec(sock, cid, "65534:65534"))
                if i >= 5:
                    (through, cli, api)[kind].append(dt)
        first, drun = [], []
        for i in range(a.ttfr_n):
            for kind in ((0, 1) if i % 2 == 0 else (1, 0)):
                if kind == 0:
                    g = Gateway(state_dir=os.path.join(d, "state%d" % i), config=cfg, profile="d")
                    gws.append(g)
                    g.initialize(identity="ttfr-%d" % i)
                    g.tool_ok("bash", {"command": "true"}, mode)
                    first.append((time.monotonic() - g.started_at) * 1000)
                    g.shutdown()
                else:
                    drun.append(timed(lambda: run(["docker", "run", "--rm"] + flags +
                                                  [IMAGE, "bash", "-l", "-c", "true"], env)))
        res = {"runtime": a.runtime or "runc", "bash_true_ms": {
            "sandgate": stats(through), "docker_exec_cli": stats(cli), "engine_api_exec": stats(api)},
            "first_result_ms": {"sandgate": stats(first), "docker_run": stats(drun)},
            "ratio_p50_vs_docker_exec": round(pct(through, 0.5) / pct(cli, 0.5), 3),
            "ratio_p50_vs_api_exec": round(pct(through, 0.5) / pct(api, 0.5), 3),
            "ratio_first_vs_docker_run": round(pct(first, 0.5) / pct(drun, 0.5), 3),
            "loadavg": open("/proc/loadavg").read().split()[0]}
        print(json.dumps(res))
        if a.markdown:
            with open(a.markdown, "w") as f:
                f.write("| %s | p50 | p90 |\n|---|---|---|\n" % res["runtime"])
                for label, v in (("`bash` \"true\" through sandgate", res["bash_true_ms"]["sandgate"]),
                                 ("`docker exec` (CLI), same container", res["bash_true_ms"]["docker_exec_cli"]),
                                 ("one Engine API exec (curl)", res["bash_true_ms"]["engine_api_exec"]),
                                 ("first result: new gateway, spawn to first reply", res["first_result_ms"]["sandgate"]),
                                 ("first result: `docker run --rm`", res["first_result_ms"]["docker_run"])):
                    f.write("| %s | %.1f ms | %.1f ms |\n" % (label, v["p50"], v["p90"]))
    finally:
        for g in gws:
            try:
                g.shutdown()
            except Exception:
                pass
            g.cleanup()
        subprocess.run(["sh", HARNESS, "stop", d])


if __name__ == "__main__":
    main()
