#!/bin/sh
# run-against.sh BACKEND - the whole end-to-end suite against a real backend.
#
#   ssh       a real sshd on 127.0.0.1 (tests/ssh/sshd-harness.sh)
#
# Starts the backend's harness, runs every tests/e2e/test_*.py with
# SANDGATE_TEST_CONFIG and SANDGATE_TEST_PROFILE pointing at it, stops the
# harness (also on failure), and exits with the suite's status.  Needs
# SANDGATE_BIN.  Exit 77 (skipped) when the backend's parts are missing.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)

case "${1:-}" in
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
*)
	echo "usage: run-against.sh ssh" >&2
	exit 2
	;;
esac

cd "$here"
PYTHONDONTWRITEBYTECODE=1 python3 -m unittest discover -p 'test_*.py'
