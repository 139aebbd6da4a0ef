#!/bin/sh
# run-against.sh BACKEND [MODULE...] - the end-to-end suite against a real
# backend: every file that uses the profile, or only the modules named.
#
#   ssh       a real sshd on 127.0.0.1 (tests/ssh/sshd-harness.sh)
#   daytona   the fake Daytona on 127.0.0.1 (tests/fakes/daytona/server.mjs)
#   daytona-cloud  Daytona itself: opt-in, only with SANDGATE_E2E_DAYTONA=1
#             and DAYTONA_API_KEY (and DAYTONA_API_URL / DAYTONA_TARGET
#             as Daytona's own tools read them); skipped otherwise
#   modal     the fake Modal on 127.0.0.1 (tests/fakes/modal/server.mjs),
#             gRPC over h2c, commands under bubblewrap
#   modal-cloud  Modal itself: opt-in, only with SANDGATE_E2E_MODAL=1 and
#             MODAL_TOKEN_ID/MODAL_TOKEN_SECRET or ~/.modal.toml; skipped
#             otherwise
#   vercel    the fake Vercel on 127.0.0.1 (tests/fakes/vercel/server.mjs); after
#             the suite, the fake's own state must show nothing running
#   vercel-cloud  Vercel itself: opt-in, only with SANDGATE_E2E_VERCEL=1 and
#             VERCEL_TOKEN + VERCEL_TEAM_ID + VERCEL_PROJECT_ID (or
#             VERCEL_OIDC_TOKEN); skipped otherwise
#   singularity  the fake apptainer (tests/fakes/apptainer/): real instances
#             under bubblewrap, as root; skipped without root or bubblewrap
#   singularity-real  a real apptainer on PATH and SANDGATE_E2E_SIF=image.sif:
#             opt-in, skipped otherwise
#   docker    a private dockerd (tests/docker/dockerd-harness.sh: its own data
#             root and socket, stopped after) and an image made from this
#             host's programs; as root, skipped without dockerd; after the
#             suite no container of sandgate's may still run
#   docker-gvisor  the same daemon, the profile on runtime runsc (gVisor)
#             and the image with statx-shim.c (dockerd-harness.sh); the
#             container's root is read-only there and read_only mode is
#             refused (docs/docker.md); skipped without runsc
#
# Starts the backend's harness, runs every tests/e2e/test_*.py with
# SANDGATE_TEST_CONFIG and SANDGATE_TEST_PROFILE pointing at it, stops the
# harness (also on failure), and exits with the suite's status.  Needs
# SANDGATE_BIN.  Exit 77 (skipped) when the backend's parts are missing.
# Module names after BACKEND (test_tools test_process ...) run only those;
# SANDGATE_E2E_PATTERN (a unittest file pattern such as test_t*.py) runs
# the files it matches.  SANDGATE_E2E_SHARD=I/N runs the I-th of N shares
# of the files (1-based, every N-th file of the sorted list), so that N
# runs side by side make one whole suite.  With none, every test_*.py runs except those
# that start their own harness whatever the profile says (own_harness
# below): they would run exactly as they do in the local suite (ctest
# e2e/...), which runs each of them once.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
backend=${1:-}
[ $# -gt 0 ] && shift
# Files that make their own fake or sshd and config and never read
# SANDGATE_TEST_CONFIG (each says so in its docstring).  Through a relay
# (tests/delegation/run-chain.sh) they do test something new, and run there.
own_harness="test_daytona_faults test_daytona_leaks test_vercel_faults test_vercel_leaks test_ssh_paths test_sgclient"

# suite: the unittest run this script was asked for, from tests/e2e.
suite() {
	cd "$here"
	if [ $# -eq 0 ] && [ -n "${SANDGATE_E2E_PATTERN:-}" ]; then
		set -- discover -p "$SANDGATE_E2E_PATTERN"
	elif [ $# -eq 0 ]; then
		shard=${SANDGATE_E2E_SHARD:-1/1} i=0
		for f in test_*.py; do
			m=${f%.py}
			case " $own_harness " in *" $m "*) continue ;; esac
			i=$((i + 1))
			[ $(( (i - 1) % ${shard#*/} + 1 )) -eq "${shard%/*}" ] || continue
			set -- "$@" "$m"
		done
	fi
	PYTHONDONTWRITEBYTECODE=1 python3 -m unittest "$@"
}

# start_fake SERVER ARGS...: a fake provider (node) on loopback, stopped by
# closing its stdin when this script exits; sets work (a temporary
# directory), port and admin (its admin port, when it has one).
start_fake() {
	work=$(mktemp -d)
	mkfifo "$work/stdin"
	node "$@" <"$work/stdin" >"$work/out" 2>"$work/fake.log" &
	fake=$!
	# Holding the fifo open keeps the fake alive; closing it stops it.
	exec 3>"$work/stdin"
	trap 'exec 3>&-; wait $fake 2>/dev/null; rm -rf "$work"' EXIT
	i=0
	until grep -q '^LISTENING' "$work/out" 2>/dev/null; do
		i=$((i + 1))
		[ $i -gt 300 ] && { echo "run-against: the fake did not start" >&2; cat "$work/fake.log" >&2; exit 1; }
		sleep 0.1
	done
	port=$(sed -n 's/^LISTENING //p' "$work/out")
	admin=$(sed -n 's/^ADMIN //p' "$work/out")
}

case "$backend" in
ssh)
	out=$("$top/tests/ssh/sshd-harness.sh" start) || {
		status=$?
		[ "$status" -eq 77 ] && echo "run-against: sshd is not installed; skipped" >&2
		exit "$status"
	}
	eval "$out"
	trap '"$top/tests/ssh/sshd-harness.sh" stop "$SSHD_DIR" >/dev/null 2>&1 || true' EXIT
	export SANDGATE_TEST_CONFIG SANDGATE_TEST_PROFILE
	# What really exists on the "remote" host, for the no-leak checks.
	export SANDGATE_TEST_REAL_WORKSPACE="$SSHD_WORKSPACE"
	export SANDGATE_TEST_SLACK="${SANDGATE_TEST_SLACK:-3}"
	;;
daytona)
	command -v node >/dev/null || { echo "run-against: node is missing; skipped" >&2; exit 77; }
	start_fake "$top/tests/fakes/daytona/server.mjs" --port 0 --exec-mode bwrap \
		--exec-limit-ms 5000
	cat >"$work/config.json" <<EOF2
{"default": "daytona", "profiles": {"daytona": {"backend": "daytona", "image": "debian:12",
 "api_url_env": "DT_URL", "api_key_env": "DT_KEY", "toolbox_timeout_ms": 5000}}}
EOF2
	export DT_URL="http://127.0.0.1:$port/api" DT_KEY=test-key
	export SANDGATE_TEST_CONFIG="$work/config.json" SANDGATE_TEST_PROFILE=daytona
	# What really exists at the provider, for the no-leak checks.
	export SANDGATE_TEST_FAKE_URL="http://127.0.0.1:$port"
	export SANDGATE_TEST_SLACK="${SANDGATE_TEST_SLACK:-4}"
	;;
daytona-cloud)
	if [ "${SANDGATE_E2E_DAYTONA:-}" != 1 ] || [ -z "${DAYTONA_API_KEY:-}" ]; then
		echo "SKIP: set SANDGATE_E2E_DAYTONA=1 and DAYTONA_API_KEY to run against Daytona itself"
		exit 77
	fi
	work=$(mktemp -d)
	trap 'rm -rf "$work"' EXIT
	cat >"$work/config.json" <<EOF2
{"default": "daytona", "profiles": {"daytona": {"backend": "daytona",
 "image": "${SANDGATE_E2E_DAYTONA_IMAGE:-debian:12}"}}}
EOF2
	export SANDGATE_TEST_CONFIG="$work/config.json" SANDGATE_TEST_PROFILE=daytona
	export SANDGATE_TEST_SLACK="${SANDGATE_TEST_SLACK:-10}"
	;;
modal)
	command -v node >/dev/null || { echo "run-against: node is missing; skipped" >&2; exit 77; }
	command -v bwrap >/dev/null || { echo "run-against: bwrap is missing; skipped" >&2; exit 77; }
	bash "$top/tests/fakes/modal/npm-ci.sh" >/dev/null || { echo "run-against: the fake Modal's npm packages are missing; skipped" >&2; exit 77; }
	start_fake "$top/tests/fakes/modal/server.mjs" --port 0 --admin-port 0 --exec-mode bwrap
	cat >"$work/config.json" <<EOF2
{"default": "modal", "profiles": {"modal": {"backend": "modal", "image": "debian:12"}}}
EOF2
	# Modal's own variables, as its tools read them; no ~/.modal.toml.
	export MODAL_SERVER_URL="http://127.0.0.1:$port" MODAL_TOKEN_ID=ak-test \
		MODAL_TOKEN_SECRET=as-test MODAL_CONFIG_PATH="$work/none.toml"
	export SANDGATE_TEST_CONFIG="$work/config.json" SANDGATE_TEST_PROFILE=modal
	export SANDGATE_TEST_FAKE_URL="http://127.0.0.1:$admin"
	export SANDGATE_TEST_SLACK="${SANDGATE_TEST_SLACK:-4}"
	;;
modal-cloud)
	if [ "${SANDGATE_E2E_MODAL:-}" != 1 ]; then
		echo "SKIP: set SANDGATE_E2E_MODAL=1 (and MODAL_TOKEN_ID/MODAL_TOKEN_SECRET or ~/.modal.toml) to run against Modal itself"
		exit 77
	fi
	if [ -z "${MODAL_TOKEN_ID:-}" ] && [ ! -f "${MODAL_CONFIG_PATH:-$HOME/.modal.toml}" ]; then
		echo "SKIP: no Modal credentials: set MODAL_TOKEN_ID and MODAL_TOKEN_SECRET or write ~/.modal.toml"
		exit 77
	fi
	work=$(mktemp -d)
	trap 'rm -rf "$work"' EXIT
	cat >"$work/config.json" <<EOF2
{"default": "modal", "profiles": {"modal": {"backend": "modal",
 "image": "${SANDGATE_E2E_MODAL_IMAGE:-debian:12}", "app": "sandgate-e2e"}}}
EOF2
	export SANDGATE_TEST_CONFIG="$work/config.json" SANDGATE_TEST_PROFILE=modal
	export SANDGATE_TEST_SLACK="${SANDGATE_TEST_SLACK:-10}"
	;;
vercel)
	command -v bwrap >/dev/null || { echo "run-against: bwrap is missing; skipped" >&2; exit 77; }
	command -v node >/dev/null || { echo "run-against: node is missing; skipped" >&2; exit 77; }
	start_fake "$top/tests/fakes/vercel/server.mjs" --port 0 --exec-mode bwrap
	cat >"$work/config.json" <<EOF2
{"default": "vercel", "profiles": {"vercel": {"backend": "vercel",
 "team": "team_fake", "project": "prj_fake", "api_url": "http://127.0.0.1:$port"}}}
EOF2
	export VERCEL_TOKEN=test-token
	export SANDGATE_TEST_CONFIG="$work/config.json" SANDGATE_TEST_PROFILE=vercel
	# What really exists at the provider, for the no-leak checks.
	export SANDGATE_TEST_FAKE_URL="http://127.0.0.1:$port"
	export SANDGATE_TEST_SLACK="${SANDGATE_TEST_SLACK:-4}"
	status=0
	suite "$@" || status=$?
	# Whatever the suite did, nothing may be left running at the provider.
	python3 - "$SANDGATE_TEST_FAKE_URL" <<'EOF3' || status=1
import json, sys, urllib.request
with urllib.request.urlopen(sys.argv[1] + "/__fake/state", timeout=30) as r:
    st = json.load(r)
if st["runningSessions"] or st["liveProcesses"]:
    print("run-against: the fake Vercel still runs sessions %s (%d processes)"
          % (st["runningSessions"], st["liveProcesses"]), file=sys.stderr)
    sys.exit(1)
print("run-against: the fake Vercel runs nothing (%d sandboxes kept, all stopped)"
      % len(st["sandboxes"]))
EOF3
	exit "$status"
	;;
vercel-cloud)
	if [ "${SANDGATE_E2E_VERCEL:-}" != 1 ]; then
		echo "SKIP: set SANDGATE_E2E_VERCEL=1 (and VERCEL_TOKEN, VERCEL_TEAM_ID, VERCEL_PROJECT_ID or VERCEL_OIDC_TOKEN) to run against Vercel itself"
		exit 77
	fi
	if [ -z "${VERCEL_OIDC_TOKEN:-}" ] && { [ -z "${VERCEL_TOKEN:-}" ] || [ -z "${VERCEL_TEAM_ID:-}" ] || [ -z "${VERCEL_PROJECT_ID:-}" ]; }; then
		echo "SKIP: SANDGATE_E2E_VERCEL=1 but no credentials: set VERCEL_TOKEN, VERCEL_TEAM_ID and VERCEL_PROJECT_ID, or VERCEL_OIDC_TOKEN"
		exit 77
	fi
	work=$(mktemp -d)
	trap 'rm -rf "$work"' EXIT
	cat >"$work/config.json" <<EOF2
{"default": "vercel", "profiles": {"vercel": {"backend": "vercel"}}}
EOF2
	export SANDGATE_TEST_CONFIG="$work/config.json" SANDGATE_TEST_PROFILE=vercel
	export SANDGATE_TEST_SLACK="${SANDGATE_TEST_SLACK:-10}"
	;;
singularity)
	fake="$top/tests/fakes/apptainer"
	[ "$(id -u)" -eq 0 ] || { echo "run-against: the fake apptainer needs root (namespaces, cgroups, overlays); skipped" >&2; exit 77; }
	for p in bwrap nsenter unshare python3; do
		command -v "$p" >/dev/null || { echo "run-against: $p is missing; skipped" >&2; exit 77; }
	done
	work=$(mktemp -d)
	trap 'HOME="$work/home" "$fake/apptainer" instance stop --all >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
	mkdir -p "$work/home"
	# The instances' state lives under $HOME/.apptainer, as the runtime's does.
	export HOME="$work/home" PATH="$fake:$PATH"
	"$fake/apptainer" -q build "$work/image.sif" docker://debian:12
	cat >"$work/config.json" <<EOF2
{"default": "singularity", "profiles": {"singularity": {"backend": "singularity",
 "image": "$work/image.sif"}}}
EOF2
	export SANDGATE_TEST_CONFIG="$work/config.json" SANDGATE_TEST_PROFILE=singularity
	# What really exists at the runtime, for the no-leak checks.
	export SANDGATE_TEST_APPTAINER="$fake/apptainer"
	export SANDGATE_TEST_SLACK="${SANDGATE_TEST_SLACK:-3}"
	;;
singularity-real)
	if [ -z "${SANDGATE_E2E_SIF:-}" ]; then
		echo "run-against: set SANDGATE_E2E_SIF=/path/image.sif (and put apptainer on PATH) to run against a real Apptainer; skipped" >&2
		exit 77
	fi
	if ! command -v apptainer >/dev/null && ! command -v singularity >/dev/null; then
		echo "run-against: neither apptainer nor singularity is on PATH; skipped" >&2
		exit 77
	fi
	[ -r "$SANDGATE_E2E_SIF" ] || { echo "run-against: $SANDGATE_E2E_SIF is not readable; skipped" >&2; exit 77; }
	work=$(mktemp -d)
	trap 'rm -rf "$work"' EXIT
	cat >"$work/config.json" <<EOF2
{"default": "singularity", "profiles": {"singularity": {"backend": "singularity",
 "image": "$SANDGATE_E2E_SIF"}}}
EOF2
	export SANDGATE_TEST_CONFIG="$work/config.json" SANDGATE_TEST_PROFILE=singularity
	export SANDGATE_TEST_SLACK="${SANDGATE_TEST_SLACK:-5}"
	;;
docker|docker-gvisor)
	out=$("$top/tests/docker/dockerd-harness.sh" start) || {
		status=$?
		[ "$status" -eq 77 ] && echo "run-against: no dockerd here (or not root); skipped" >&2
		exit "$status"
	}
	eval "$out"
	trap '"$top/tests/docker/dockerd-harness.sh" stop "$DOCKER_DIR" >/dev/null 2>&1 || true' EXIT
	runtime= image=sandgate-test:1
	if [ "$backend" = docker-gvisor ]; then
		[ "${DOCKER_RUNSC:-}" = 1 ] || { echo "run-against: runsc is not installed; skipped" >&2; exit 77; }
		# gVisor has no Landlock: its containers' root is read-only, which
		# confines standard mode, and read_only is refused (docs/docker.md).
		runtime=', "runtime": "runsc"' image=sandgate-test-gvisor:1
		# Under ptrace every system call of the sandbox stops in the
		# Sentry, and a dozen execs at once cost a list seconds on a
		# loaded machine (test_concurrency): its budgets are doubled.
		: "${SANDGATE_TEST_SLACK:=8}"
	fi
	cat >"$DOCKER_DIR/config.json" <<EOF2
{"default": "docker", "profiles": {"docker": {"backend": "docker", "image": "$image",
 "network": "none"$runtime}}}
EOF2
	export DOCKER_HOST SANDGATE_TEST_CONFIG="$DOCKER_DIR/config.json" SANDGATE_TEST_PROFILE=docker
	export SANDGATE_TEST_SLACK="${SANDGATE_TEST_SLACK:-4}"
	status=0
	suite "$@" || status=$?
	# Nothing of sandgate's may still run: kept containers are stopped.  A
	# removal that outlasted a gateway's shutdown budget is a detached
	# reaper's, bounded by a minute: give it that long.
	for _ in $(seq 60); do
		left=$(docker ps -q --filter label=managed-by=sandgate | wc -l)
		[ "$left" -eq 0 ] && break
		sleep 1
	done
	if [ "$left" -ne 0 ]; then
		echo "run-against: $left container(s) of sandgate's still run after the suite:" >&2
		docker ps --filter label=managed-by=sandgate >&2
		[ "$status" -eq 0 ] && status=1
	fi
	exit "$status"
	;;
*)
	echo "usage: run-against.sh ssh|daytona|daytona-cloud|modal|modal-cloud|singularity|singularity-real|vercel|vercel-cloud|docker|docker-gvisor [MODULE...]" >&2
	exit 2
	;;
esac

suite "$@"
