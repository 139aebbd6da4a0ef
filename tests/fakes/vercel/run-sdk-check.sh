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
	if ! start_fake "$mode" --exec-mode "$mode" --request-log "$log" --state-dir "$work/$mode.state" --no-stdin-watch; then
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
mkfifo "$work/stdin"
FAKE_STDIN="$work/stdin" start_fake eof --exec-mode "$mode" --state-dir "$state" &
starter=$!
exec 7>"$work/stdin"
wait "$starter"
port="$(sed -n 's/^LISTENING \([0-9][0-9]*\)$/\1/p' "$work/eof.out")"
if [ -z "$port" ]; then
	fail_line "[eof] the fake did not start"
else
	fake_pid="$(pgrep -n -f -- "--state-dir $state" || true)"
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
	gone=0
	for _ in $(seq 1 100); do
		if ! kill -0 "$fake_pid" 2>/dev/null; then
			gone=1
			break
		fi
		sleep 0.05
	done
	if [ "$gone" -eq 1 ]; then
		pass_line "[eof] closing stdin stopped the fake"
	else
		fail_line "[eof] the fake ignored stdin EOF"
		kill "$fake_pid" 2>/dev/null
	fi
	fake_pid=""
	sleep 0.2
	left="$(pgrep -f -- "$state" | tr '\n' ' ')"
	for p in /proc/[0-9]*; do
		case "$(readlink "$p/cwd" 2>/dev/null)" in "$state"*) left+=" ${p#/proc/}" ;; esac
	done
	if [ -z "${left// /}" ] && ! pgrep -x -f 'sleep 6007' >/dev/null; then
		pass_line "[eof] no sandbox process outlived the fake"
	else
		fail_line "[eof] processes of the stopped fake's sandboxes still run:$left"
	fi
fi

fake_summary
