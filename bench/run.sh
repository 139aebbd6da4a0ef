#!/usr/bin/env bash
# bench/run.sh - build sandgate (Release) and sgbench, run every benchmark,
# and put the measured numbers into docs/benchmarks.md.
#
#   bench/run.sh              build, run, rewrite the results block of
#                             docs/benchmarks.md (between its markers)
#   bench/run.sh --print      build, run, print the block instead
#   bench/run.sh --quick      fewer iterations (a smoke run, ~30 s);
#                             implies --print, so the doc keeps full runs
#
# Environment: BUILD_DIR (default /tmp/sandgate-bench-build), JOBS (2),
# SGBENCH_ARGS (extra sgbench options).  Everything runs on this machine:
# the gateway on the local backend, talking over pipes; nothing reaches
# the network.  A full run takes about a minute after the build.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
build=${BUILD_DIR:-/tmp/sandgate-bench-build}
jobs=${JOBS:-2}
doc="$root/docs/benchmarks.md"
print=0
quick=()
for a in "$@"; do
  case "$a" in
    --print) print=1 ;;
    --quick) print=1; quick=(--stat-n 300 --cmd-n 30 --wake-n 30 --export-mib 64 --export-runs 1) ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown option $a" >&2; exit 2 ;;
  esac
done

echo "== building sandgate (Release) in $build" >&2
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF >/dev/null
cmake --build "$build" -j"$jobs" --target sandgate sg-helper >/dev/null
# sgbench is a target of the project once the top CMakeLists.txt has
# add_subdirectory(bench); until then it is built on its own.
if grep -q 'add_subdirectory(bench)' "$root/CMakeLists.txt"; then
  cmake --build "$build" -j"$jobs" --target sgbench >/dev/null
  sgbench="$build/bench/sgbench"
else
  cmake -S "$here" -B "$build/bench-standalone" -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$build/bench-standalone" -j"$jobs" >/dev/null
  sgbench="$build/bench-standalone/sgbench"
fi

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
out=$(mktemp -d /tmp/sgbench-out-XXXXXX)
trap 'rm -rf "$out"' EXIT
echo "== running $sgbench" >&2
# shellcheck disable=SC2086
"$sgbench" --sandgate "$build/sandgate" --json "$out/results.json" \
  --markdown "$out/table.md" "${quick[@]}" ${SGBENCH_ARGS:-} >&2

# The block that goes into the doc: when, where, what, then the table.
{
  echo "Measured $(date -u +%Y-%m-%dT%H:%MZ) at commit $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$root" diff --quiet 2>/dev/null || echo ' (with uncommitted changes)')"
  echo "on $(uname -srm), $(nproc) CPUs ($(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)),"
  echo "$(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo) of memory, $(bwrap --version 2>/dev/null || echo 'no bubblewrap'), $(cc --version | head -1);"
  echo "load average before the run $load_before, after it $(cut -d' ' -f1-3 /proc/loadavg)."
  echo
  cat "$out/table.md"
} >"$out/block.md"

if [ "$print" = 1 ] || [ ! -f "$doc" ] || ! grep -q '<!-- bench:begin -->' "$doc"; then
  cat "$out/block.md"
  [ "$print" = 1 ] || echo "run.sh: $doc has no <!-- bench:begin --> marker; block printed above" >&2
  exit 0
fi

# Replace what lies between the markers, keeping them.
awk -v block="$out/block.md" '
  /<!-- bench:begin -->/ { print; while ((getline l < block) > 0) print l; skip = 1; next }
  /<!-- bench:end -->/ { skip = 0 }
  !skip { print }
' "$doc" >"$out/doc.md"
cp "$out/doc.md" "$doc"
echo "== results written to $doc" >&2
