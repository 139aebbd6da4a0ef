#!/bin/sh
# bench/relay-bench.sh - what one relaying gateway (the `command` backend,
# gateway/relay.c) adds per request: execute(stat_path) round trips on the
# local backend, direct and through `sandgate serve` whose profile relays
# to `sandgate serve --peer`, measured by sgbench's stat set.
#
#   SANDGATE=build/sandgate SGBENCH=build/bench/sgbench sh bench/relay-bench.sh [N] [ROUNDS]
#
# One run is ROUNDS (default 3) rounds of N (default 2000) calls each,
# direct and relayed alternating, so a load that comes and goes on a shared
# machine falls on both alike; it prints each round's p50 and p99 and the
# median p50 of each, and the difference (target: at most 300 µs).  The
# inner gateway shares sgbench's state directory, where sgbench looks for
# the local workspace.  Only this machine and pipes are involved.
set -eu
sandgate=$(realpath "${SANDGATE:-build/sandgate}")
sgbench=$(realpath "${SGBENCH:-build/bench/sgbench}")
n=${1:-2000}
rounds=${2:-3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/state"
cat >"$work/relay.json" <<EOF2
{"default": "relay", "profiles": {"relay": {"backend": "command",
 "command": ["$sandgate", "serve", "--peer", "--state-dir", "$work/state"]}}}
EOF2
i=1
while [ "$i" -le "$rounds" ]; do
	"$sgbench" --sandgate "$sandgate" --state-dir "$work/state" --only stat --stat-n "$n" \
		--json "$work/direct-$i.json" >/dev/null 2>"$work/err" || { cat "$work/err" >&2; exit 1; }
	"$sgbench" --sandgate "$sandgate" --config "$work/relay.json" --state-dir "$work/state" \
		--only stat --stat-n "$n" --json "$work/relay-$i.json" >/dev/null 2>"$work/err" ||
		{ cat "$work/err" >&2; exit 1; }
	i=$((i + 1))
done
python3 - "$work" "$rounds" "$n" <<'EOF2'
import json, statistics, sys
work, rounds, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
p50 = {"direct": [], "relay": []}
for i in range(1, rounds + 1):
    for k in p50:
        s = json.load(open("%s/%s-%d.json" % (work, k, i)))["stat_path"]
        p50[k].append(s["p50_us"])
        print("round %d %-6s p50 %6.0f us  p99 %7.0f us" % (i, k, s["p50_us"], s["p99_us"]))
d, r = statistics.median(p50["direct"]), statistics.median(p50["relay"])
print("execute(stat_path), %d calls x %d rounds: median p50 direct %.0f us, relayed %.0f us; "
      "the relay adds %.0f us (target <= 300 us): %s"
      % (n, rounds, d, r, r - d, "PASS" if r - d <= 300 else "FAIL"))
EOF2
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
