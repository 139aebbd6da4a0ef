#!/usr/bin/env bash
# Runs the official Modal JavaScript SDK against the fake: installs the pinned packages with
# `npm ci` when missing, then for each exec mode (tmpdir, and bwrap when bubblewrap works) starts
# the fake on free loopback ports and runs sdk-check.mjs twice, with the SDK's default V2 RPCs and
# with its V1 ones (MODAL_SANDBOX_V2=0). A last phase checks that closing the fake's stdin stops it
# with none of its sandboxes' processes left. First, proto-check.mjs compares sandgate's protos
# with the SDK's generated codecs.
# Prints TAP-like lines and a final "N passed, M failed"; exits non-zero on any failure.
# Usage: bash run-sdk-check.sh [tmpdir|bwrap ...]
set -u
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here" || exit 2
bash ./npm-ci.sh >/dev/null || { echo "0 passed, 1 failed"; exit 1; }

# shellcheck source=../lib/sdk-check.sh
. ../lib/sdk-check.sh
fake_modes "$@"
# The fake prints an ADMIN port besides its gRPC one, and stops on stdin EOF (fd 7).
fake_wait_admin=1
fake_stdin_fifo=1

# check NAME ENV...: sdk-check.mjs with the SDK pointed at the running fake.
check() {
	local name="$1"
	shift
	run_check "$name" HOME="$work/home" MODAL_CONFIG_PATH="$work/home/none.toml" \
		MODAL_SERVER_URL="http://127.0.0.1:$port" MODAL_TOKEN_ID=ak-test MODAL_TOKEN_SECRET=as-test \
		FAKE_ADMIN="http://127.0.0.1:$admin" "$@"
}

# sandgate's protos against the SDK's own codecs: field numbers and wire types.
if out="$(node ./proto-check.mjs 2>&1)"; then
	pass_line "the protos match the SDK's codecs ($(printf '%s\n' "$out" | tail -n 1))"
else
	fail_line "the protos differ from the SDK's codecs"
	printf '%s\n' "$out" | sed 's/^/#   /'
fi

mkdir -p "$work/home"
for mode in "${modes[@]}"; do
	if ! start_fake "$mode" --exec-mode "$mode" --ready-ms 300 --state-dir "$work/$mode.state" --request-log "$work/$mode.log.jsonl"; then
		fail_line "[$mode] the fake did not start"
		continue
	fi
	check "$mode-v2" FAKE_EXEC_MODE="$mode"
	check "$mode-v1" FAKE_EXEC_MODE="$mode" MODAL_SANDBOX_V2=0
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
	if fake_wait_gone; then
		pass_line "[$mode] closing stdin stopped the fake"
	else
		fail_line "[$mode] the fake ignored stdin EOF"
	fi
	if [ -s "$work/$mode.log.jsonl" ]; then
		pass_line "[$mode] the request log was written ($(wc -l <"$work/$mode.log.jsonl") calls)"
	else
		fail_line "[$mode] no request log"
	fi
	if grep -q 'fake-modal:' "$work/$mode.err"; then
		fail_line "[$mode] the fake reported internal errors"
		sed 's/^/#   /' "$work/$mode.err" | tail -n 20
	fi
	left="$(fake_leftovers "$work/$mode.state")"
	if [ -z "$left" ]; then
		pass_line "[$mode] no process of a sandbox outlived the fake"
	else
		fail_line "[$mode] processes of the stopped fake's sandboxes still run: $left"
	fi
done

fake_summary
