#!/bin/sh
# bench/relay-bench.sh - what one relaying gateway (the `command` backend,
# gateway/relay.c) adds per request, on the host's wire: sequential round
# trips of execute(read_file) of a small file and of process/list on the
# local backend, direct and through `sandgate serve` whose profile relays
# to `sandgate serve --peer`, which gets the host's frames as they are.
#
#   SANDGATE=build/sandgate sh bench/relay-bench.sh [N] [ROUNDS]
#
# One run is ROUNDS (default 3) rounds of N (default 2000) calls of each
# kind, direct and relayed alternating, so a load that comes and goes on a
# shared machine falls on both alike; it prints each round's p50 and p99
# and the median p50 of each, and the difference (target: at most 300 µs
# per call).  The client is the small host below (string ids, a 64-hex
# token, execute with call.name), the same for both; only this machine and
# pipes are involved.
set -eu
sandgate=$(realpath "${SANDGATE:-build/sandgate}")
n=${1:-2000}
rounds=${2:-3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/state" "$work/peer-state"
cat >"$work/relay.json" <<EOF2
{"default": "relay", "profiles": {"relay": {"backend": "command",
 "command": ["$sandgate", "serve", "--peer", "--state-dir", "$work/peer-state"]}}}
EOF2
python3 - "$sandgate" "$work" "$n" "$rounds" <<'EOF2'
import json, os, statistics, subprocess, sys, time

sandgate, work, n, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
TOKEN = "be" * 32


class Host:
    """A minimal host on the wire: one request at a time, timed."""

    def __init__(self, argv):
        env = {k: v for k, v in os.environ.items() if k != "SANDGATE_CONFIG"}
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, env=env)
        self.seq = 0

    def call(self, method, data=None):
        self.seq += 1
        frame = {"token": TOKEN, "id": str(self.seq), "method": method}
        if data is not None:
            frame["data"] = data
        line = (json.dumps(frame) + "\n").encode()
        t0 = time.perf_counter_ns()
        self.p.stdin.write(line)
        self.p.stdin.flush()
        while True:
            msg = json.loads(self.p.stdout.readline())
            if msg.get("id") == str(self.seq) and "method" not in msg:
                break
        took = (time.perf_counter_ns() - t0) / 1000.0
        if "error" in msg:
            raise SystemExit("relay-bench: %s failed: %s" % (method, msg["error"]))
        return msg.get("data"), took

    def execute(self, tool, args):
        return self.call("execute", {
            "call": {"id": "call_%d" % self.seq, "name": tool, "arguments": json.dumps(args),
                     "kind": "function"},
            "permission_mode": "standard", "actor": "bench", "git_attribution_enabled": False})

    def close(self):
        self.p.stdin.close()
        self.p.wait(120)


def run(kind):
    argv = [sandgate, "serve", "--state-dir", os.path.join(work, "state")]
    if kind == "relay":
        argv += ["--config", os.path.join(work, "relay.json")]
    h = Host(argv)
    h.call("initialize", {"version": 4, "root": "/workspace", "session": "bench",
                          "identity": "bench-%s" % kind, "remove_workspace_on_exit": True})
    h.execute("write_file", {"path": "f.txt", "content": "one line\n"})
    out = {}
    for what, do in (("read_file", lambda: h.execute("read_file", {"path": "f.txt"})),
                     ("process/list", lambda: h.call("process/list"))):
        do()
        ts = sorted(do()[1] for _ in range(n))
        out[what] = (ts[len(ts) // 2], ts[min(len(ts) - 1, int(len(ts) * 0.99))])
    h.close()
    return out


p50 = {}
for i in range(1, rounds + 1):
    for kind in ("direct", "relay"):
        for what, (a, b) in run(kind).items():
            p50.setdefault((what, kind), []).append(a)
            print("round %d %-6s %-12s p50 %7.0f us  p99 %7.0f us" % (i, kind, what, a, b))
worst = 0
for what in ("read_file", "process/list"):
    d = statistics.median(p50[(what, "direct")])
    r = statistics.median(p50[(what, "relay")])
    worst = max(worst, r - d)
    print("%s, %d calls x %d rounds: median p50 direct %.0f us, relayed %.0f us; "
          "the relay adds %.0f us" % (what, n, rounds, d, r, r - d))
print("the relay adds at most %.0f us per call (target <= 300 us): %s"
      % (worst, "PASS" if worst <= 300 else "FAIL"))
EOF2
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
