#!/usr/bin/env bash
# Runs the official Daytona SDK against the fake: installs the pinned SDK with `npm ci` when
# node_modules is missing, then for each exec mode (tmpdir, and bwrap when bubblewrap works)
# starts the fake on a free loopback port, runs sdk-check.mjs and stops the fake.
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
	if command -v bwrap >/dev/null 2>&1 && bwrap --ro-bind / / true 2>/dev/null; then
		modes+=(bwrap)
	else
		echo "# bubblewrap unusable here: bwrap mode skipped" >&2
	fi
fi

work="$(mktemp -d "${TMPDIR:-/tmp}/fake-daytona-check.XXXXXX")"
fake_pid=""
cleanup() {
	if [ -n "$fake_pid" ]; then
		kill "$fake_pid" 2>/dev/null
		wait "$fake_pid" 2>/dev/null
	fi
	rm -rf "$work"
}
trap cleanup EXIT INT TERM

total_pass=0
total_fail=0
for mode in "${modes[@]}"; do
	out="$work/$mode.out"
	log="$work/$mode.requests.jsonl"
	node server.mjs --port 0 --exec-mode "$mode" --exec-limit-ms 5000 --transition-ms 100 \
		--request-log "$log" --no-stdin-watch >"$out" 2>"$work/$mode.err" </dev/null &
	fake_pid=$!
	port=""
	for _ in $(seq 1 100); do
		port="$(sed -n 's/^LISTENING \([0-9][0-9]*\)$/\1/p' "$out" 2>/dev/null)"
		[ -n "$port" ] && break
		kill -0 "$fake_pid" 2>/dev/null || break
		sleep 0.05
	done
	if [ -z "$port" ]; then
		echo "not ok - [$mode] the fake did not start"
		sed 's/^/#   /' "$work/$mode.err"
		total_fail=$((total_fail + 1))
		fake_pid=""
		continue
	fi
	FAKE_URL="http://127.0.0.1:$port" FAKE_EXEC_MODE="$mode" FAKE_REQUEST_LOG="$log" \
		timeout 300 node sdk-check.mjs >"$work/$mode.tap" 2>"$work/$mode.check.err"
	rc=$?
	grep -v -E '^[0-9]+ passed, [0-9]+ failed$' "$work/$mode.tap"
	summary="$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$work/$mode.tap" | tail -n 1)"
	if [ -n "$summary" ]; then
		total_pass=$((total_pass + ${summary%% passed*}))
		f="${summary#*passed, }"
		total_fail=$((total_fail + ${f%% failed}))
	fi
	if [ "$rc" -ne 0 ] && { [ -z "$summary" ] || [ "${f%% failed}" = "0" ]; }; then
		echo "not ok - [$mode] sdk-check.mjs exited $rc"
		sed 's/^/#   /' "$work/$mode.check.err" | tail -n 20
		total_fail=$((total_fail + 1))
	fi
	kill "$fake_pid" 2>/dev/null
	wait "$fake_pid" 2>/dev/null
	fake_pid=""
	if [ -s "$work/$mode.err" ]; then
		echo "# [$mode] fake stderr:"
		sed 's/^/#   /' "$work/$mode.err" | tail -n 20
	fi
done

echo "$total_pass passed, $total_fail failed"
[ "$total_fail" -eq 0 ]
