#!/usr/bin/env bash
# Runs the official Vercel Sandbox SDK against the fake: installs the pinned SDK with `npm ci`
# when missing or stale, then for each exec mode (tmpdir, and bwrap when bubblewrap works)
# starts the fake on a free loopback port, runs sdk-check.mjs and stops the fake. A last phase
# checks that closing the fake's stdin stops it with nothing of its sandboxes left running.
# Prints TAP-like lines and a final "N passed, M failed"; exits non-zero on any failure.
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
	if ! start_fake "$mode" --port 0 --exec-mode "$mode" --request-log "$log" --state-dir "$work/$mode.state" --no-stdin-watch; then
		fail_line "[$mode] the fake did not start"
		continue
	fi
	run_check "$mode" FAKE_EXEC_MODE="$mode" FAKE_REQUEST_LOG="$log"
	stop_fake
	show_fake_stderr "$mode"
	if grep -q 'fake-vercel:' "$work/$mode.err"; then
		fail_line "[$mode] the fake reported internal errors"
	fi
done

# Closing stdin stops the fake, and a command it left running dies with it.
mode="${modes[${#modes[@]}-1]}"
state="$work/eof.state"
if ! fake_stdin_fifo=1 start_fake eof --port 0 --exec-mode "$mode" --state-dir "$state"; then
	fail_line "[eof] the fake did not start"
else
	u="http://127.0.0.1:$port"
	q="teamId=team_fake"
	sid="$(curl -sf -X POST "$u/v3/sandboxes?$q" -H 'Authorization: Bearer test-token' \
		-d '{"projectId":"prj_fake","name":"left-running"}' | sed -n 's/.*"session":{"id":"\([^"]*\)".*/\1/p')"
	curl -sf -X POST "$u/v2/sandboxes/sessions/$sid/cmd?$q" -H 'Authorization: Bearer test-token' \
		-d '{"command":"sleep","args":["6007"]}' >/dev/null
	if [ -n "$sid" ] && curl -sf "$u/__fake/state" | grep -q '"liveProcesses":[1-9]'; then
		pass_line "[eof] a sandbox with a running command is left for the stop"
	else
		fail_line "[eof] could not leave a command running (session '$sid')"
	fi
	exec 7>&-
	if fake_wait_gone; then
		pass_line "[eof] closing stdin stopped the fake"
	else
		fail_line "[eof] the fake ignored stdin EOF"
	fi
	sleep 0.2
	left="$(fake_leftovers "$state")"
	if [ -z "$left" ] && ! pgrep -x -f 'sleep 6007' >/dev/null; then
		pass_line "[eof] no sandbox process outlived the fake"
	else
		fail_line "[eof] processes of the stopped fake's sandboxes still run: $left"
	fi
fi

fake_summary
