#!/bin/sh
# run-through-outer.sh BACKEND - the whole end-to-end suite with sandgate as
# a delegated peer: the tests talk to outer.py (the host's delegation
# helper), which starts `sandgate serve --peer` and relays everything.
#
#   local     the embedded local profile
#   ssh, daytona   as tests/e2e/run-against.sh starts them
#
# Needs SANDGATE_BIN (the real sandgate; it becomes the peer).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
: "${SANDGATE_BIN:?SANDGATE_BIN must name sandgate}"
export SG_PEER_BIN="$SANDGATE_BIN"
export SANDGATE_BIN="$here/outer"
case "${1:-}" in
local)
	cd "$here/../e2e"
	PYTHONDONTWRITEBYTECODE=1 exec python3 -m unittest discover -p 'test_*.py'
	;;
ssh|daytona)
	exec sh "$here/../e2e/run-against.sh" "$1"
	;;
*)
	echo "usage: run-through-outer.sh local|ssh|daytona" >&2
	exit 2
	;;
esac
