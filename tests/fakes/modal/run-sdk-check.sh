#!/usr/bin/env bash
# Runs the official Modal JavaScript SDK against the fake: installs the pinned packages with
# `npm ci` when missing, then for each exec mode (tmpdir, and bwrap when bubblewrap works) starts
# the fake on free loopback ports and runs sdk-check.mjs twice, with the SDK's default V2 RPCs and
# with its V1 ones (MODAL_SANDBOX_V2=0). A last phase checks that closing the fake's stdin stops it
# with none of its sandboxes' processes left.
# Prints TAP-like lines and a final "N passed, M failed"; exits non-zero on any failure.
# Usage: bash run-sdk-check.sh [tmpdir|bwrap ...]
set -u
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here" || exit 2
bash ./npm-ci.sh >/dev/null || { echo "0 passed, 1 failed"; exit 1; }

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
pass_line() {
	echo "ok - $1"
	total_pass=$((total_pass + 1))
}

# start_fake NAME ARGS...: the fake with its stdin on fd 7's fifo; sets fake_pid, port, admin.
start_fake() {
	local name="$1"
	shift
	rm -f "$work/$name.fifo"
	mkfifo "$work/$name.fifo"
	node server.mjs "$@" >"$work/$name.out" 2>"$work/$name.err" <"$work/$name.fifo" &
	fake_pid=$!
	exec 7>"$work/$name.fifo"
	port=""
	admin=""
	for _ in $(seq 1 200); do
		port="$(sed -n 's/^LISTENING \([0-9][0-9]*\)$/\1/p' "$work/$name.out")"
		admin="$(sed -n 's/^ADMIN \([0-9][0-9]*\)$/\1/p' "$work/$name.out")"
		[ -n "$port" ] && [ -n "$admin" ] && return 0
		kill -0 "$fake_pid" 2>/dev/null || break
		sleep 0.05
	done
	sed 's/^/#   /' "$work/$name.err"
	return 1
}

run_check() {
	local name="$1"
	shift
	env HOME="$work/home" MODAL_CONFIG_PATH="$work/home/none.toml" MODAL_SERVER_URL="http://127.0.0.1:$port" \
		MODAL_TOKEN_ID=ak-test MODAL_TOKEN_SECRET=as-test FAKE_ADMIN="http://127.0.0.1:$admin" "$@" \
		timeout 300 node sdk-check.mjs >"$work/$name.tap" 2>"$work/$name.check.err"
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

mkdir -p "$work/home"
for mode in "${modes[@]}"; do
	if ! start_fake "$mode" --exec-mode "$mode" --ready-ms 300 --state-dir "$work/$mode.state" --request-log "$work/$mode.log.jsonl"; then
		fail_line "[$mode] the fake did not start"
		continue
	fi
	run_check "$mode-v2" FAKE_EXEC_MODE="$mode"
	run_check "$mode-v1" FAKE_EXEC_MODE="$mode" MODAL_SANDBOX_V2=0
	# A sandbox left running, to see that stopping the fake ends it too.
	live="$(env HOME="$work/home" MODAL_CONFIG_PATH="$work/home/none.toml" MODAL_SERVER_URL="http://127.0.0.1:$port" \
		MODAL_TOKEN_ID=ak-test MODAL_TOKEN_SECRET=as-test timeout 60 node --input-type=module -e "
		import { ModalClient } from 'modal';
		const m = new ModalClient();
		const app = await m.apps.fromName('left', { createIfMissing: true });
		const sb = await m.sandboxes.create(app, m.images.fromRegistry('alpine'));
		await sb.exec(['sleep', '600']);
		const st = await (await fetch('http://127.0.0.1:$admin/__fake/state')).json();
		console.log(st.liveProcesses);
		m.close();
		process.exit(0);" 2>/dev/null)"
	if [ "${live:-0}" -ge 1 ] 2>/dev/null; then
		pass_line "[$mode] a sandbox with a running command is left for the stop"
	else
		fail_line "[$mode] could not leave a sandbox running (got '$live')"
	fi
	# Closing stdin stops the fake, and nothing of its sandboxes outlives it.
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
		pass_line "[$mode] closing stdin stopped the fake"
	else
		fail_line "[$mode] the fake ignored stdin EOF"
		kill "$fake_pid" 2>/dev/null
	fi
	wait "$fake_pid" 2>/dev/null
	fake_pid=""
	if [ -s "$work/$mode.log.jsonl" ]; then
		pass_line "[$mode] the request log was written ($(wc -l <"$work/$mode.log.jsonl") calls)"
	else
		fail_line "[$mode] no request log"
	fi
	if grep -q 'fake-modal:' "$work/$mode.err"; then
		fail_line "[$mode] the fake reported internal errors"
		sed 's/^/#   /' "$work/$mode.err" | tail -n 20
	fi
	left=""
	for p in /proc/[0-9]*; do
		case "$(readlink "$p/cwd" 2>/dev/null)" in "$work/$mode.state"*) left+=" ${p#/proc/}" ;; esac
	done
	left+="$(pgrep -f -- "$work/$mode.state" | tr '\n' ' ')"
	if [ -z "${left// /}" ]; then
		pass_line "[$mode] no process of a sandbox outlived the fake"
	else
		fail_line "[$mode] processes of the stopped fake's sandboxes still run:$left"
	fi
done

echo "$total_pass passed, $total_fail failed"
[ "$total_fail" -eq 0 ]
