#!/bin/sh
# run-through-outer.sh BACKEND [MODULE...] - the end-to-end suite with
# sandgate as a delegated peer: the tests talk to outer.py (the host's
# delegation helper), which starts `sandgate serve --peer` and relays
# everything.
#
#   local     the embedded local profile
#   ssh, daytona   as tests/e2e/run-against.sh starts them
#
# Module names after BACKEND run only those (ctest's delegation/e2e-* do);
# without them, every file (on ssh and daytona, every file run-against.sh
# runs).
#
# Needs SANDGATE_BIN (the real sandgate; it becomes the peer).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
: "${SANDGATE_BIN:?SANDGATE_BIN must name sandgate}"
export SG_PEER_BIN="$SANDGATE_BIN"
export SANDGATE_BIN="$here/outer"
backend=${1:-}
[ $# -gt 0 ] && shift
case "$backend" in
local)
	cd "$here/../e2e"
	[ $# -gt 0 ] || set -- discover -p 'test_*.py'
	PYTHONDONTWRITEBYTECODE=1 exec python3 -m unittest "$@"
	;;
ssh|daytona)
	exec sh "$here/../e2e/run-against.sh" "$backend" "$@"
	;;
*)
	echo "usage: run-through-outer.sh local|ssh|daytona [MODULE...]" >&2
	exit 2
	;;
esac
