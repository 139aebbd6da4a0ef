#!/usr/bin/env bash
# Runs the official Daytona SDK against the fake: installs the pinned SDK with `npm ci` when
# node_modules is missing or stale, then for each exec mode (tmpdir, and bwrap when bubblewrap works)
# starts the fake on a free loopback port, runs sdk-check.mjs and stops the fake. A last phase
# checks --state-dir persistence across a restart, and that closing the fake's stdin stops it
# with nothing of its sandboxes left running.
# Prints the TAP-like lines and a final "N passed, M failed"; exits non-zero on any failure.
# Usage: bash run-sdk-check.sh [tmpdir|bwrap ...]
set -u
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here" || exit 2

# shellcheck source=../lib/sdk-check.sh
. ../lib/sdk-check.sh

fake_npm_ci || { echo "0 passed, 1 failed"; exit 1; }
fake_modes "$@"

for mode in "${modes[@]}"; do
	log="$work/$mode.requests.jsonl"
	if ! start_fake "$mode" --port 0 --exec-mode "$mode" --exec-limit-ms 5000 --transition-ms 100 \
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
if ! fake_stdin_fifo=1 start_fake persist1 --port 0 --exec-mode "$mode" --state-dir "$state"; then
	fail_line "[persist] the fake did not start with --state-dir"
else
	run_check persist-before FAKE_EXEC_MODE="$mode" FAKE_PHASE=persist-before FAKE_RUN_ID="$run_id"
	exec 7>&-
	if fake_wait_gone; then
		pass_line "[persist] closing stdin stopped the fake"
	else
		fail_line "[persist] the fake ignored stdin EOF"
	fi
	sleep 0.2
	left="$(fake_leftovers "$state")"
	if [ -n "$left" ]; then
		fail_line "[persist] processes of the stopped fake's sandboxes are still running: $left"
	else
		pass_line "[persist] no sandbox process outlived the fake"
	fi
	if start_fake persist2 --port 0 --exec-mode "$mode" --state-dir "$state" --no-stdin-watch; then
		run_check persist-after FAKE_EXEC_MODE="$mode" FAKE_PHASE=persist-after FAKE_RUN_ID="$run_id"
		stop_fake
		show_fake_stderr persist2
	else
		fail_line "[persist] the fake did not restart"
	fi
fi

fake_summary
