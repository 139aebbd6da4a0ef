#!/usr/bin/env bash
# Runs the official Daytona SDK against the fake: installs the pinned SDK with `npm ci` when
# node_modules is missing, then for each exec mode (tmpdir, and bwrap when bubblewrap works)
# starts the fake on a free loopback port, runs sdk-check.mjs and stops the fake. A last phase
# checks --state-dir persistence across a restart, and that closing the fake's stdin stops it
# with nothing of its sandboxes left running.
# Prints the TAP-like lines and a final "N passed, M failed"; exits non-zero on any failure.
# Usage: bash run-sdk-check.sh [tmpdir|bwrap ...]
set -u
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here" || exit 2

if [ ! -d node_modules/@daytonaio/sdk ]; then
	npm ci --no-audit --no-fund --loglevel=error >&2 || { echo "0 passed, 1 failed"; exit 1; }
fi

modes=("$@")
if [ ${#modes[@]} -eq 0 ]; then
	modes=(tmpdir)
	if command -v bwrap >/dev/null 2>&1 && command -v nsenter >/dev/null 2>&1 &&
		bwrap --ro-bind / / true 2>/dev/null; then
		modes+=(bwrap)
	else
		echo "# bubblewrap or nsenter unusable here: bwrap mode skipped" >&2
	fi
fi

work="$(mktemp -d)"
fake_pid=""
port=""
cleanup() {
	exec 7>&- 2>/dev/null
	if [ -n "$fake_pid" ]; then
		kill "$fake_pid" 2>/dev/null
		wait "$fake_pid" 2>/dev/null
	fi
	rm -rf "$work"
}
trap cleanup EXIT INT TERM

total_pass=0
total_fail=0

fail_line() {
	echo "not ok - $1"
	total_fail=$((total_fail + 1))
}

# start_fake NAME ARGS...: starts the fake (stdout to $work/NAME.out), sets fake_pid and port.
# stdin comes from $FAKE_STDIN when set, else /dev/null.
start_fake() {
	local name="$1"
	shift
	local out="$work/$name.out"
	: >"$out"
	node server.mjs --port 0 "$@" >"$out" 2>"$work/$name.err" <"${FAKE_STDIN:-/dev/null}" &
	fake_pid=$!
	port=""
	for _ in $(seq 1 200); do
		port="$(sed -n 's/^LISTENING \([0-9][0-9]*\)$/\1/p' "$out" 2>/dev/null)"
		[ -n "$port" ] && return 0
		kill -0 "$fake_pid" 2>/dev/null || break
		sleep 0.05
	done
	sed 's/^/#   /' "$work/$name.err"
	fake_pid=""
	return 1
}

stop_fake() {
	[ -n "$fake_pid" ] || return 0
	kill "$fake_pid" 2>/dev/null
	wait "$fake_pid" 2>/dev/null
	fake_pid=""
}

# run_check NAME ENV...: runs sdk-check.mjs against the running fake and adds up its summary.
run_check() {
	local name="$1"
	shift
	env FAKE_URL="http://127.0.0.1:$port" "$@" timeout 300 node sdk-check.mjs \
		>"$work/$name.tap" 2>"$work/$name.check.err"
	local rc=$? summary f=""
	grep -v -E '^[0-9]+ passed, [0-9]+ failed$' "$work/$name.tap"
	summary="$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$work/$name.tap" | tail -n 1)"
	if [ -n "$summary" ]; then
		total_pass=$((total_pass + ${summary%% passed*}))
		f="${summary#*passed, }"
		total_fail=$((total_fail + ${f%% failed}))
	fi
	if [ "$rc" -ne 0 ] && { [ -z "$summary" ] || [ "${f%% failed}" = "0" ]; }; then
		fail_line "[$name] sdk-check.mjs exited $rc"
		sed 's/^/#   /' "$work/$name.check.err" | tail -n 20
	fi
}

show_fake_stderr() {
	if [ -s "$work/$1.err" ]; then
		echo "# [$1] fake stderr:"
		sed 's/^/#   /' "$work/$1.err" | tail -n 20
	fi
}

for mode in "${modes[@]}"; do
	log="$work/$mode.requests.jsonl"
	if ! start_fake "$mode" --exec-mode "$mode" --exec-limit-ms 5000 --transition-ms 100 \
		--request-log "$log" --no-stdin-watch; then
		fail_line "[$mode] the fake did not start"
		continue
	fi
	run_check "$mode" FAKE_EXEC_MODE="$mode" FAKE_REQUEST_LOG="$log"
	stop_fake
	show_fake_stderr "$mode"
done

# Persistence across a restart, in the last mode; the first fake is stopped by closing its stdin.
mode="${modes[${#modes[@]}-1]}"
state="$work/state"
run_id="$(od -An -N4 -tx1 /dev/urandom | tr -d ' \n')"
mkfifo "$work/stdin"
FAKE_STDIN="$work/stdin" start_fake persist1 --exec-mode "$mode" --state-dir "$state" &
starter=$!
exec 7>"$work/stdin"
wait "$starter"
# start_fake ran in a subshell: read its results back from the files it wrote.
port="$(sed -n 's/^LISTENING \([0-9][0-9]*\)$/\1/p' "$work/persist1.out")"
if [ -z "$port" ]; then
	fail_line "[persist] the fake did not start with --state-dir"
else
	fake_pid="$(pgrep -n -f -- "--state-dir $state" || true)"
	run_check persist-before FAKE_EXEC_MODE="$mode" FAKE_PHASE=persist-before FAKE_RUN_ID="$run_id"
	exec 7>&-
	gone=0
	for _ in $(seq 1 100); do
		if ! kill -0 "$fake_pid" 2>/dev/null; then
			gone=1
			break
		fi
		sleep 0.05
	done
	if [ "$gone" -eq 1 ]; then
		echo "ok - [persist] closing stdin stopped the fake"
		total_pass=$((total_pass + 1))
	else
		fail_line "[persist] the fake ignored stdin EOF"
		kill "$fake_pid" 2>/dev/null
	fi
	fake_pid=""
	sleep 0.2
	if pgrep -f -- "$state" >/dev/null; then
		fail_line "[persist] processes of the stopped fake's sandboxes are still running"
		pgrep -a -f -- "$state" | sed 's/^/#   /'
	else
		echo "ok - [persist] no sandbox process outlived the fake"
		total_pass=$((total_pass + 1))
	fi
	if start_fake persist2 --exec-mode "$mode" --state-dir "$state" --no-stdin-watch; then
		run_check persist-after FAKE_EXEC_MODE="$mode" FAKE_PHASE=persist-after FAKE_RUN_ID="$run_id"
		stop_fake
		show_fake_stderr persist2
	else
		fail_line "[persist] the fake did not restart"
	fi
fi

echo "$total_pass passed, $total_fail failed"
[ "$total_fail" -eq 0 ]
