#!/usr/bin/env bash
# bench/run.sh - build sandgate (Release) and sgbench, run every benchmark,
# and put the measured numbers into docs/benchmarks.md.
#
#   bench/run.sh              build, run, rewrite the results blocks of
#                             docs/benchmarks.md (between their markers)
#   bench/run.sh --print      build, run, print the blocks instead
#   bench/run.sh --quick      fewer iterations (a smoke run, ~45 s);
#                             implies --print, so the doc keeps full runs
#   bench/run.sh --no-ssh     skip the ssh phase
#   bench/run.sh --no-daytona skip the daytona phase
#   bench/run.sh --no-singularity skip the singularity phase
#   bench/run.sh --ssh-only   only the ssh phase (and its block)
#   bench/run.sh --daytona-only  only the daytona phase (and its block)
#   bench/run.sh --singularity-only  only the singularity phase (and its block)
#
# Four phases.  local: the gateway on the local backend.  ssh: a real sshd
# on 127.0.0.1 started by tests/ssh/sshd-harness.sh (generated keys and
# known_hosts), the gateway on its `ssh` profile, compared with a raw
# ControlMaster of sgbench's own; the harness is stopped afterwards, also
# on failure.  daytona: the fake Daytona (tests/fakes/daytona/server.mjs,
# bwrap mode) on 127.0.0.1, started once; the official TypeScript SDK
# (bench/daytona-sdk-bench.mjs) and then the gateway on a `daytona` profile
# run against it, and the fake is stopped (its stdin closed).  A phase
# whose parts are missing (sshd; node, the SDK's node_modules after
# `npm ci`, bubblewrap or nsenter) is skipped and its block is left as it
# was.  singularity: bench/singularity-bench.py, run_command through the
# singularity backend against the same `apptainer exec` command line run
# directly, on the fake apptainer (tests/fakes/apptainer; needs root,
# bubblewrap, nsenter and unshare, else skipped).
#
# Environment: BUILD_DIR (default /tmp/sandgate-bench-build), JOBS (2),
# SGBENCH_ARGS (extra sgbench options for the local phase),
# SGBENCH_SSH_ARGS (for the ssh phase), SGBENCH_DTN_ARGS (for the daytona
# phase), SDKBENCH_ARGS (for daytona-sdk-bench.mjs).  Everything runs on
# this machine and talks over pipes and 127.0.0.1 only.  A full run takes
# about four minutes after the build (local about 1, ssh about 0.5 to 1,
# daytona about 0.5, singularity about 1.5).  SINGBENCH_ARGS: extra options
# for singularity-bench.py.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
build=${BUILD_DIR:-/tmp/sandgate-bench-build}
jobs=${JOBS:-2}
doc="$root/docs/benchmarks.md"
print=0
local_phase=1
ssh_phase=1
dtn_phase=1
sing_phase=1
quick=()
quick_sing=()
quick_ssh=()
quick_dtn=()
quick_sdk=()
for a in "$@"; do
  case "$a" in
    --print) print=1 ;;
    --quick)
      print=1
      quick=(--stat-n 300 --cmd-n 30 --wake-n 30 --export-mib 64 --export-runs 1)
      quick_ssh=(--ssh-n 30 --ssh-export-runs 1 --rt-n 3)
      quick_dtn=(--dtn-n 20 --rt-n 3)
      quick_sdk=(--n 20)
      quick_sing=(--n 20) ;;
    --no-ssh) ssh_phase=0 ;;
    --no-daytona) dtn_phase=0 ;;
    --no-singularity) sing_phase=0 ;;
    --ssh-only) local_phase=0 dtn_phase=0 sing_phase=0 ;;
    --daytona-only) local_phase=0 ssh_phase=0 sing_phase=0 ;;
    --singularity-only) local_phase=0 ssh_phase=0 dtn_phase=0 ;;
    -h|--help) sed -n '2,45p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown option $a" >&2; exit 2 ;;
  esac
done
if [ "$local_phase" = 0 ] && [ "$ssh_phase" = 0 ] && [ "$dtn_phase" = 0 ] &&
  [ "$sing_phase" = 0 ]; then
  echo "run.sh: these options leave nothing to run" >&2
  exit 2
fi

echo "== building sandgate (Release) in $build" >&2
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF -DSG_WITH_SSH=ON -DSG_WITH_DAYTONA=ON -DSG_WITH_SINGULARITY=ON >/dev/null
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

out=$(mktemp -d /tmp/sgbench-out-XXXXXX)
sshd_dir=
fake_pid=
# The fake exits when its stdin (a FIFO held open on fd 8) reaches EOF; a
# fake that has not gone 10 s later is sent SIGTERM, by its own pid.
stop_fake() {
  [ -n "$fake_pid" ] || return 0
  exec 8>&-
  for _ in $(seq 1 100); do
    kill -0 "$fake_pid" 2>/dev/null || break
    sleep 0.1
  done
  kill "$fake_pid" 2>/dev/null || true
  wait "$fake_pid" 2>/dev/null || true
  fake_pid=
}
cleanup() {
  if [ -n "$sshd_dir" ]; then
    "$root/tests/ssh/sshd-harness.sh" stop "$sshd_dir" || true
  fi
  stop_fake
  rm -rf "$out"
}
trap cleanup EXIT

# The lines that say when, where and what; the block's table follows.
machine() {
  echo "Measured $(date -u +%Y-%m-%dT%H:%MZ) at commit $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$root" diff --quiet 2>/dev/null || echo ' (with uncommitted changes)')"
  echo "on $(uname -srm), $(nproc) CPUs ($(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)),"
  echo "$(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo) of memory, $1, $(cc --version | head -1);"
  echo "load average before the run $2, after it $(cut -d' ' -f1-3 /proc/loadavg)."
}

if [ "$local_phase" = 1 ]; then
  load_before=$(cut -d' ' -f1-3 /proc/loadavg)
  echo "== local phase: $sgbench" >&2
  # shellcheck disable=SC2086
  "$sgbench" --sandgate "$build/sandgate" --json "$out/results.json" \
    --markdown "$out/table.md" "${quick[@]}" ${SGBENCH_ARGS:-} >&2
  {
    machine "$(bwrap --version 2>/dev/null || echo 'no bubblewrap')" "$load_before"
    echo
    cat "$out/table.md"
  } >"$out/block.md"
fi

if [ "$ssh_phase" = 1 ]; then
  set +e
  harness=$("$root/tests/ssh/sshd-harness.sh" start)
  status=$?
  set -e
  if [ "$status" = 77 ]; then
    echo "== ssh phase skipped: sshd is not installed (apt-get install openssh-server)" >&2
    ssh_phase=0
  elif [ "$status" != 0 ]; then
    echo "run.sh: the sshd harness did not start" >&2
    exit 1
  else
    eval "$harness"
    # shellcheck disable=SC2153 # SSHD_DIR and the others come from the eval
    sshd_dir=$SSHD_DIR
    load_before=$(cut -d' ' -f1-3 /proc/loadavg)
    echo "== ssh phase: sshd on 127.0.0.1:$SSHD_PORT, $sgbench" >&2
    # shellcheck disable=SC2086
    "$sgbench" --sandgate "$build/sandgate" --config "$SANDGATE_TEST_CONFIG" \
      --profile "$SANDGATE_TEST_PROFILE" --json "$out/ssh.json" \
      --markdown "$out/ssh-table.md" "${quick_ssh[@]}" ${SGBENCH_SSH_ARGS:-} >&2
    "$root/tests/ssh/sshd-harness.sh" stop "$sshd_dir"
    sshd_dir=
    {
      machine "$(ssh -V 2>&1) against sshd on 127.0.0.1 (tests/ssh/sshd-harness.sh)" "$load_before"
      echo
      cat "$out/ssh-table.md"
    } >"$out/ssh-block.md"
  fi
fi

if [ "$dtn_phase" = 1 ]; then
  fakedir="$root/tests/fakes/daytona"
  skip=
  if ! command -v node >/dev/null; then
    skip="node is not installed"
  elif ! command -v bwrap >/dev/null || ! command -v nsenter >/dev/null ||
    ! bwrap --ro-bind / / true 2>/dev/null; then
    skip="the fake's bwrap mode needs a working bubblewrap and nsenter"
  elif [ ! -d "$fakedir/node_modules/@daytonaio/sdk" ]; then
    echo "== installing the pinned Daytona SDK (npm ci in tests/fakes/daytona)" >&2
    if ! command -v npm >/dev/null; then
      skip="npm is not installed, so the SDK cannot be"
    elif ! (cd "$fakedir" && npm ci --no-audit --no-fund --loglevel=error) >&2; then
      skip="npm ci failed in tests/fakes/daytona"
    fi
  fi
  if [ -n "$skip" ]; then
    echo "== daytona phase skipped: $skip" >&2
    dtn_phase=0
  else
    mkdir "$out/dtn"
    mkfifo "$out/dtn/stdin"
    node "$fakedir/server.mjs" --port 0 --exec-mode bwrap --exec-limit-ms 5000 \
      --request-log "$out/dtn/requests.jsonl" <"$out/dtn/stdin" \
      >"$out/dtn/fake.out" 2>"$out/dtn/fake.err" &
    fake_pid=$!
    # Holding the FIFO open keeps the fake alive; stop_fake closes it.
    exec 8>"$out/dtn/stdin"
    port=
    for _ in $(seq 1 300); do
      port=$(sed -n 's/^LISTENING \([0-9][0-9]*\)$/\1/p' "$out/dtn/fake.out")
      [ -n "$port" ] && break
      kill -0 "$fake_pid" 2>/dev/null || break
      sleep 0.1
    done
    if [ -z "$port" ]; then
      echo "run.sh: the fake Daytona did not start:" >&2
      cat "$out/dtn/fake.err" >&2
      exit 1
    fi
    # The profile of tests/e2e/run-against.sh; the SDK's sandbox gets the
    # same image and default resources (daytona-sdk-bench.mjs).
    printf '%s\n' '{"default": "daytona", "profiles": {"daytona": {"backend": "daytona",' \
      ' "image": "debian:12", "api_url_env": "DT_URL", "api_key_env": "DT_KEY",' \
      ' "toolbox_timeout_ms": 5000}}}' >"$out/dtn/config.json"
    load_before=$(cut -d' ' -f1-3 /proc/loadavg)
    echo "== daytona phase: the fake on 127.0.0.1:$port; the SDK, then $sgbench" >&2
    # shellcheck disable=SC2086
    node "$here/daytona-sdk-bench.mjs" --url "http://127.0.0.1:$port" --api-key test-key \
      --json "$out/dtn/sdk.json" "${quick_sdk[@]}" ${SDKBENCH_ARGS:-} >&2
    # shellcheck disable=SC2086
    DT_URL="http://127.0.0.1:$port/api" DT_KEY=test-key \
      "$sgbench" --sandgate "$build/sandgate" --config "$out/dtn/config.json" \
      --profile daytona --sdk-json "$out/dtn/sdk.json" --json "$out/dtn.json" \
      --markdown "$out/dtn-table.md" "${quick_dtn[@]}" ${SGBENCH_DTN_ARGS:-} >&2
    stop_fake
    sdk_version=$(sed -n 's/^ *"sdk_version": "\([^"]*\)".*/\1/p' "$out/dtn/sdk.json")
    {
      machine "node $(node --version), @daytonaio/sdk $sdk_version, the fake Daytona (tests/fakes/daytona/server.mjs, bwrap mode) on 127.0.0.1" "$load_before"
      echo
      cat "$out/dtn-table.md"
    } >"$out/dtn-block.md"
  fi
fi

if [ "$sing_phase" = 1 ]; then
  skip=
  if [ "$(id -u)" != 0 ]; then
    skip="the fake apptainer needs root"
  else
    for prog in bwrap nsenter unshare python3; do
      command -v "$prog" >/dev/null || skip="$prog is not installed"
    done
  fi
  if [ -n "$skip" ]; then
    echo "== singularity phase skipped: $skip" >&2
    sing_phase=0
  else
    load_before=$(cut -d' ' -f1-3 /proc/loadavg)
    echo "== singularity phase: bench/singularity-bench.py on the fake apptainer" >&2
    # shellcheck disable=SC2086
    SANDGATE_BIN="$build/sandgate" python3 "$here/singularity-bench.py" \
      --markdown "$out/sing-table.md" "${quick_sing[@]}" ${SINGBENCH_ARGS:-} >"$out/sing.json"
    {
      machine "the fake apptainer (tests/fakes/apptainer: bubblewrap instances joined with nsenter), $(bwrap --version 2>/dev/null)" "$load_before"
      echo
      cat "$out/sing-table.md"
    } >"$out/sing-block.md"
  fi
fi

# Replace what lies between a pair of markers in the doc, keeping them.
put_block() {
  awk -v block="$2" -v begin="<!-- $1:begin -->" -v end="<!-- $1:end -->" '
    $0 == begin { print; while ((getline l < block) > 0) print l; skip = 1; next }
    $0 == end { skip = 0 }
    !skip { print }
  ' "$doc" >"$out/doc.md"
  cp "$out/doc.md" "$doc"
  echo "== results written to $doc ($1)" >&2
}

for phase in local ssh daytona singularity; do
  if [ "$phase" = local ]; then
    [ "$local_phase" = 1 ] || continue
    marker=bench block="$out/block.md"
  elif [ "$phase" = ssh ]; then
    [ "$ssh_phase" = 1 ] || continue
    marker=bench-ssh block="$out/ssh-block.md"
  elif [ "$phase" = daytona ]; then
    [ "$dtn_phase" = 1 ] || continue
    marker=bench-daytona block="$out/dtn-block.md"
  else
    [ "$sing_phase" = 1 ] || continue
    marker=bench-singularity block="$out/sing-block.md"
  fi
  if [ "$print" = 1 ] || [ ! -f "$doc" ] || ! grep -qx "<!-- $marker:begin -->" "$doc"; then
    cat "$block"
    echo
    [ "$print" = 1 ] || echo "run.sh: $doc has no <!-- $marker:begin --> marker; block printed above" >&2
  else
    put_block "$marker" "$block"
  fi
done
