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
#   bench/run.sh --daytona-only  only the daytona phase (its two blocks)
#   bench/run.sh --singularity-only  only the singularity phase (and its block)
#   bench/run.sh --docker-only  only the docker phase (and its block)
#   bench/run.sh --no-docker   skip it
#   bench/run.sh --modal-only    only the modal phase (its two blocks)
#   bench/run.sh --vercel-only   only the vercel phase (its two blocks)
#   bench/run.sh --no-modal / --no-vercel  skip that phase
#   bench/run.sh --cloud-only    only the daytona, modal and vercel phases (six blocks), in one run
#
# Four phases.  local: the gateway on the local backend.  ssh: a real sshd
# on 127.0.0.1 started by tests/ssh/sshd-harness.sh (generated keys and
# known_hosts), the gateway on its `ssh` profile, compared with a raw
# ControlMaster of sgbench's own; the harness is stopped afterwards, also
# on failure.  daytona: the fake Daytona (tests/fakes/daytona/server.mjs,
# bwrap mode) on 127.0.0.1, started twice, without delay and with every
# request delayed by CLOUD_DELAY_MS (below); each time the official
# TypeScript SDK (bench/daytona-sdk-bench.mjs) and then the gateway on a
# `daytona` profile run against it, and the fake is stopped (its stdin
# closed).  A phase
# whose parts are missing (sshd; node, the SDK's node_modules after
# `npm ci`, bubblewrap or nsenter) is skipped and its block is left as it
# was.  singularity: bench/singularity-bench.py, the bash tool through the
# singularity backend against the same `apptainer exec` command line run
# directly, on the fake apptainer (tests/fakes/apptainer; needs root,
# bubblewrap, nsenter and unshare, else skipped).
#
# Environment: BUILD_DIR (default /tmp/sandgate-bench-build), JOBS (2),
# SGBENCH_ARGS (extra sgbench options for the local phase),
# SGBENCH_SSH_ARGS (for the ssh phase), SGBENCH_DTN_ARGS (for the daytona
# phase), SDKBENCH_ARGS (for daytona-sdk-bench.mjs).  Everything runs on
# this machine and talks over pipes and 127.0.0.1 only.  A full run takes
# about six minutes after the build (local about 1, ssh about 0.5 to 1,
# daytona about 2.5 for its two runs, singularity about 1.5), plus the
# cloud phases.
# SINGBENCH_ARGS: extra options for singularity-bench.py.
#
# Cloud phases (modal, vercel; cloud_phase below): the backend's fake in
# bwrap mode on 127.0.0.1, started twice, without delay and with every
# request delayed by CLOUD_DELAY_MS (default 67, a real cloud's round
# trip).  Each time the official SDK's script (bench/<backend>-sdk-bench.mjs)
# and then sgbench's cloud set run against that one fake; each writes its
# block (<!-- bench-<backend>:begin --> and bench-<backend>-delay).  When
# sgbench fails (the adapter is not in this build, say) the block keeps the
# SDK's numbers and says why.  SGBENCH_CLOUD_ARGS and CLOUD_SDK_ARGS pass
# options on; about 1.5 minutes per backend.
#
# Time to the first result (D7 and C7, issue 39): after the daytona and
# cloud sets, each SDK script and sgbench time fresh sessions, each a new
# sandbox (--ttfr-n, 5; 3 with --quick): the SDK's create() and its first
# exec of `bash -l -c true` to completion against sandgate's initialize and
# its first bash "true" from the gateway's spawn.
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
docker_phase=1
modal_phase=1
vercel_phase=1
cloud_only=0
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
      quick_dtn=(--dtn-n 20 --rt-n 3 --ttfr-n 3)
      quick_sdk=(--n 20 --ttfr-n 3)
      quick_sing=(--n 20) ;;
    --no-ssh) ssh_phase=0 ;;
    --no-daytona) dtn_phase=0 ;;
    --no-singularity) sing_phase=0 ;;
    --no-docker) docker_phase=0 ;;
    --docker-only) local_phase=0 ssh_phase=0 dtn_phase=0 sing_phase=0 ;;
    --ssh-only) local_phase=0 dtn_phase=0 sing_phase=0 docker_phase=0 ;;
    --daytona-only) local_phase=0 ssh_phase=0 sing_phase=0 docker_phase=0 ;;
    --singularity-only) local_phase=0 ssh_phase=0 dtn_phase=0 docker_phase=0 ;;
    --no-modal) modal_phase=0 ;;
    --no-vercel) vercel_phase=0 ;;
    --modal-only) local_phase=0 ssh_phase=0 dtn_phase=0 sing_phase=0 vercel_phase=0 cloud_only=1 docker_phase=0 ;;
    --vercel-only) local_phase=0 ssh_phase=0 dtn_phase=0 sing_phase=0 modal_phase=0 cloud_only=1 docker_phase=0 ;;
    --cloud-only) local_phase=0 ssh_phase=0 sing_phase=0 cloud_only=1 docker_phase=0 ;;
    -h|--help) sed -n '2,62p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown option $a" >&2; exit 2 ;;
  esac
done
# --ssh-only, --daytona-only and --singularity-only leave the cloud phases out too.
if [ "$cloud_only" = 0 ] && [ "$local_phase" = 0 ]; then
  modal_phase=0 vercel_phase=0
fi
quick_cloud=()
quick_csdk=()
if [ ${#quick[@]} -gt 0 ]; then
  quick_cloud=(--cloud-n 5 --mix-runs 1 --rt-n 5 --ttfr-n 3)
  quick_csdk=(--n 5 --runs 1 --ttfr-n 3)
fi
if [ "$local_phase" = 0 ] && [ "$ssh_phase" = 0 ] && [ "$dtn_phase" = 0 ] &&
  [ "$sing_phase" = 0 ] && [ "$modal_phase" = 0 ] && [ "$vercel_phase" = 0 ] &&
  [ "$docker_phase" = 0 ]; then
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
# start_fake NAME DIR SERVER ARGS...: node SERVER ARGS with its stdin a
# FIFO in DIR (held open on fd 8), its output in DIR/fake.out and
# DIR/fake.err; sets fake_pid, port (its LISTENING line) and admin (its
# ADMIN line, for a fake with an admin port of its own, else empty).
start_fake() {
  local name=$1 dir=$2
  shift 2
  mkfifo "$dir/stdin"
  node "$@" <"$dir/stdin" >"$dir/fake.out" 2>"$dir/fake.err" &
  fake_pid=$!
  # Holding the FIFO open keeps the fake alive; stop_fake closes it.
  exec 8>"$dir/stdin"
  port='' admin=''
  for _ in $(seq 1 300); do
    port=$(sed -n 's/^LISTENING \([0-9][0-9]*\)$/\1/p' "$dir/fake.out")
    admin=$(sed -n 's/^ADMIN \([0-9][0-9]*\)$/\1/p' "$dir/fake.out")
    [ -n "$port" ] && break
    kill -0 "$fake_pid" 2>/dev/null || break
    sleep 0.1
  done
  if [ -z "$port" ]; then
    echo "run.sh: the fake $name did not start:" >&2
    cat "$dir/fake.err" >&2
    exit 1
  fi
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

# dtn_run DELAY_MS BLOCK: the fake Daytona (every request delayed by
# DELAY_MS), the SDK's script, then sgbench, both against that one fake;
# the results block into BLOCK.
dtn_run() {
  local delay=$1 block=$2 dir="$out/dtn-$1" load_before sdk_version
  mkdir "$dir"
  start_fake Daytona "$dir" "$fakedir/server.mjs" --port 0 --exec-mode bwrap \
    --exec-limit-ms 5000 --delay-ms "$delay" --request-log "$dir/requests.jsonl"
  # The profile of tests/e2e/run-against.sh; the SDK's sandbox gets the
  # same image and default resources (daytona-sdk-bench.mjs).
  printf '%s\n' '{"default": "daytona", "profiles": {"daytona": {"backend": "daytona",' \
    ' "image": "debian:12", "api_url_env": "DT_URL", "api_key_env": "DT_KEY",' \
    ' "toolbox_timeout_ms": 5000}}}' >"$dir/config.json"
  load_before=$(cut -d' ' -f1-3 /proc/loadavg)
  echo "== daytona phase, delay $delay ms: the fake on 127.0.0.1:$port; the SDK, then $sgbench" >&2
  # shellcheck disable=SC2086
  node "$here/daytona-sdk-bench.mjs" --url "http://127.0.0.1:$port" --api-key test-key \
    --json "$dir/sdk.json" "${quick_sdk[@]}" ${SDKBENCH_ARGS:-} >&2
  # shellcheck disable=SC2086
  DT_URL="http://127.0.0.1:$port/api" DT_KEY=test-key \
    "$sgbench" --sandgate "$build/sandgate" --config "$dir/config.json" \
    --profile daytona --fake-delay-ms "$delay" --sdk-json "$dir/sdk.json" --json "$dir/sgbench.json" \
    --markdown "$dir/table.md" "${quick_dtn[@]}" ${SGBENCH_DTN_ARGS:-} >&2
  stop_fake
  sdk_version=$(sed -n 's/^ *"sdk_version": "\([^"]*\)".*/\1/p' "$dir/sdk.json")
  {
    machine "node $(node --version), @daytonaio/sdk $sdk_version, the fake Daytona (tests/fakes/daytona/server.mjs, bwrap mode) on 127.0.0.1, every request delayed by $delay ms" "$load_before"
    echo
    cat "$dir/table.md"
  } >"$block"
}

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
    dtn_run 0 "$out/dtn-block.md"
    dtn_run "${CLOUD_DELAY_MS:-67}" "$out/dtn-delay-block.md"
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

# ---- docker phase: a private dockerd, runc then gVisor ----

if [ "$docker_phase" = 1 ]; then
  skip=""
  if [ "$(id -u)" != 0 ]; then
    skip="a private dockerd needs root"
  else
    for prog in dockerd runsc curl python3; do
      command -v "$prog" >/dev/null || skip="$prog is not installed (apt-get install docker.io runsc)"
    done
  fi
  if [ -n "$skip" ]; then
    echo "== docker phase skipped: $skip" >&2
    docker_phase=0
  else
    load_before=$(cut -d' ' -f1-3 /proc/loadavg)
    echo "== docker phase: bench/docker-bench.py on a private dockerd (runc, then runsc)" >&2
    dk_n=(); [ ${#quick[@]} -gt 0 ] && dk_n=(--n 10 --ttfr-n 3)
    SANDGATE_BIN="$build/sandgate" python3 "$here/docker-bench.py" "${dk_n[@]}" \
      --markdown "$out/docker-runc.md" >"$out/docker-runc.json"
    SANDGATE_BIN="$build/sandgate" python3 "$here/docker-bench.py" "${dk_n[@]}" --runtime runsc \
      --markdown "$out/docker-runsc.md" >"$out/docker-runsc.json"
    {
      machine "a private dockerd $(dockerd --version 2>/dev/null | cut -d, -f1 | cut -d' ' -f3), runc, and runsc (gVisor, --platform=ptrace)" "$load_before"
      echo
      echo "runc:"
      echo
      cat "$out/docker-runc.md"
      echo
      echo "runsc (gVisor):"
      echo
      cat "$out/docker-runsc.md"
    } >"$out/docker-block.md"
  fi
fi

# ---- cloud phases: one function for every cloud backend ----

# cloud_static NAME: the backend's fake directory and its options (the
# delay and the request log are added), the SDK package the fake's
# node_modules must hold, and how to install it.
cloud_static() {
  case "$1" in
    modal)
      c_fakedir="$root/tests/fakes/modal" c_pkg=modal
      c_fake_args=(--port 0 --admin-port 0 --exec-mode bwrap)
      c_install=(bash "$root/tests/fakes/modal/npm-ci.sh") ;;
    vercel)
      c_fakedir="$root/tests/fakes/vercel" c_pkg=@vercel/sandbox
      c_fake_args=(--port 0 --exec-mode bwrap)
      c_install=(npm ci --prefix "$root/tests/fakes/vercel" --no-audit --no-fund --loglevel=error) ;;
  esac
}

# cloud_config NAME PORT ADMIN DIR: the fake's log, the URL the SDK is
# given, the gateway's profile and its variables (as in
# tests/e2e/run-against.sh), once the fake's ports are known.
cloud_config() {
  case "$1" in
    modal)
      c_log="http://127.0.0.1:$3/__fake/log" c_url="http://127.0.0.1:$2"
      c_profile='{"default": "modal", "profiles": {"modal": {"backend": "modal", "image": "debian:12"}}}'
      c_env=(MODAL_SERVER_URL="http://127.0.0.1:$2" MODAL_TOKEN_ID=ak-test
        MODAL_TOKEN_SECRET=as-test MODAL_CONFIG_PATH="$4/none.toml") ;;
    vercel)
      c_log="http://127.0.0.1:$2/__fake/requests" c_url="http://127.0.0.1:$2"
      c_profile='{"default": "vercel", "profiles": {"vercel": {"backend": "vercel", "team": "team_fake", "project": "prj_fake", "api_url": "http://127.0.0.1:'$2'"}}}'
      c_env=(VERCEL_TOKEN=test-token) ;;
  esac
}

# Why the backend's phase cannot run here, or nothing; installs the SDK.
cloud_skip() {
  cloud_static "$1"
  if ! command -v node >/dev/null; then
    echo "node is not installed"
  elif ! command -v bwrap >/dev/null || ! command -v nsenter >/dev/null ||
    ! bwrap --ro-bind / / true 2>/dev/null; then
    echo "the fake's bwrap mode needs a working bubblewrap and nsenter"
  elif [ ! -f "$c_fakedir/server.mjs" ]; then
    echo "there is no fake $1 (tests/fakes/$1/server.mjs) in this tree"
  elif [ ! -d "$c_fakedir/node_modules/$c_pkg" ] && ! "${c_install[@]}" >&2; then
    echo "the pinned $c_pkg could not be installed in tests/fakes/$1"
  fi
}

# The SDK's results as table rows, for a block whose sgbench side failed.
cloud_sdk_rows() {
  # shellcheck disable=SC2016 # JavaScript, not shell
  node -e '
    const j = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
    const ops = Object.entries(j.ops).map(([k, d]) => `${k} ${(d.p50_us / 1e3).toFixed(1)} ms, ${d.requests_per_call} requests (${d.routes_text})`);
    console.log("| # | the SDK alone | result |\n|---|---|---|");
    console.log(`| C1 | ${j.mix.ops} mixed calls, median of ${j.runs} runs | ${j.mix.median_ms.toFixed(0)} ms (${j.mix.requests_per_call.toFixed(2)} requests per call) |`);
    console.log(`| C2 | per call, ${j.n} calls each | ${ops.join("; ")} |`);
    console.log(`| C4 | tasks started in the sandbox per exec | ${j.pid.tasks_per_exec} |`);
    console.log(`| C5 | peak RSS (maxRSS) | ${(j.max_rss_kib / 1024).toFixed(1)} MiB |`);
    console.log(`| C6 | ready: create until the first exec started | ${j.ready.ms.toFixed(0)} ms (create ${j.ready.create_ms.toFixed(0)} ms; ${j.ready.requests} requests: ${j.ready.routes_text}) |`);
    if (j.ttfr) console.log(`| C7 | first result: create + the first exec of \`bash -l -c true\` to its end, on a new client, median of ${j.ttfr.n} fresh sandboxes | ${j.ttfr.median_ms.toFixed(0)} ms (create ${j.ttfr.create_median_ms.toFixed(0)} ms; on a client already used ${j.ttfr.warm.median_ms.toFixed(0)} ms) |`);
  ' "$1"
}

# cloud_phase NAME DELAY_MS BLOCK: the fake (bwrap mode, every request
# delayed by DELAY_MS), the SDK's script, then sgbench's cloud set, both
# against that one fake; the results block into BLOCK.
cloud_phase() {
  local name=$1 delay=$2 block=$3 dir="$out/$1-$2" load_before status sdk_opt kept why
  mkdir "$dir"
  cloud_static "$name"
  start_fake "$name" "$dir" "$c_fakedir/server.mjs" "${c_fake_args[@]}" --delay-ms "$delay" \
    --request-log "$dir/requests.jsonl"
  # A fake with one port serves its admin API on it.
  cloud_config "$name" "$port" "${admin:-$port}" "$dir"
  printf '%s\n' "$c_profile" >"$dir/config.json"
  load_before=$(cut -d' ' -f1-3 /proc/loadavg)
  echo "== $name phase, delay $delay ms: the fake on 127.0.0.1:$port; the SDK, then $sgbench" >&2
  # shellcheck disable=SC2086
  node "$here/$name-sdk-bench.mjs" --url "$c_url" --log "$c_log" --json "$dir/sdk.json" \
    "${quick_csdk[@]}" ${CLOUD_SDK_ARGS:-} >&2 || rm -f "$dir/sdk.json"
  sdk_opt=()
  [ -f "$dir/sdk.json" ] && sdk_opt=(--sdk-json "$dir/sdk.json")
  set +e
  # shellcheck disable=SC2086
  env "${c_env[@]}" "$sgbench" --sandgate "$build/sandgate" --config "$dir/config.json" \
    --profile "$name" --only cloud --fake-log "$c_log" --fake-delay-ms "$delay" \
    "${sdk_opt[@]}" \
    --json "$dir/sgbench.json" --markdown "$dir/table.md" "${quick_cloud[@]}" \
    ${SGBENCH_CLOUD_ARGS:-} >&2 2>"$dir/sgbench.err"
  status=$?
  set -e
  cat "$dir/sgbench.err" >&2
  stop_fake
  local sdk_version
  sdk_version=$(sed -n 's/^ *"sdk_version": "\([^"]*\)".*/\1/p' "$dir/sdk.json" 2>/dev/null)
  {
    machine "node $(node --version), $c_pkg ${sdk_version:-(the SDK failed)}, the fake $name (tests/fakes/$name/server.mjs, bwrap mode) on 127.0.0.1, every request delayed by $delay ms" "$load_before"
    echo
    if [ "$status" = 0 ]; then
      cat "$dir/table.md"
    else
      # sgbench keeps its state directory on failure: the gateway's last word is there.
      kept=$(sed -n 's/^sgbench: the state directory \(.*\) is kept$/\1/p' "$dir/sgbench.err")
      why=$(grep '^sgbench: ' "$dir/sgbench.err" | grep -v 'state directory' | tail -1 | sed 's/^sgbench: //')
      if [ -n "$kept" ] && [ -s "$kept/gateway.log" ]; then
        why="$why; the gateway said: $(tail -1 "$kept/gateway.log")"
        rm -rf "$kept"
      fi
      echo "**sandgate's side did not run**: $why."
      echo
      if [ -f "$dir/sdk.json" ]; then
        cloud_sdk_rows "$dir/sdk.json"
      else
        echo "The SDK's script failed too (its output is above)."
      fi
    fi
  } >"$block"
}

cloud_blocks=()
for cloud in modal vercel; do
  [ "$cloud" = modal ] && [ "$modal_phase" = 0 ] && continue
  [ "$cloud" = vercel ] && [ "$vercel_phase" = 0 ] && continue
  skip=$(cloud_skip "$cloud")
  if [ -n "$skip" ]; then
    echo "== $cloud phase skipped: $skip" >&2
    continue
  fi
  cloud_phase "$cloud" 0 "$out/$cloud-block.md"
  cloud_phase "$cloud" "${CLOUD_DELAY_MS:-67}" "$out/$cloud-delay-block.md"
  cloud_blocks+=("bench-$cloud:$out/$cloud-block.md" "bench-$cloud-delay:$out/$cloud-delay-block.md")
done

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

blocks=()
[ "$local_phase" = 1 ] && blocks+=("bench:$out/block.md")
[ "$ssh_phase" = 1 ] && blocks+=("bench-ssh:$out/ssh-block.md")
[ "$dtn_phase" = 1 ] &&
  blocks+=("bench-daytona:$out/dtn-block.md" "bench-daytona-delay:$out/dtn-delay-block.md")
[ "$sing_phase" = 1 ] && blocks+=("bench-singularity:$out/sing-block.md")
[ "$docker_phase" = 1 ] && blocks+=("bench-docker:$out/docker-block.md")
for pair in "${blocks[@]}" "${cloud_blocks[@]}"; do
  marker=${pair%%:*} block=${pair#*:}
  if [ "$print" = 1 ] || [ ! -f "$doc" ] || ! grep -qx "<!-- $marker:begin -->" "$doc"; then
    cat "$block"
    echo
    [ "$print" = 1 ] || echo "run.sh: $doc has no <!-- $marker:begin --> marker; block printed above" >&2
  else
    put_block "$marker" "$block"
  fi
done
