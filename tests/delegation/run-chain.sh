#!/bin/sh
# run-chain.sh RELAYS [MODULE...] - the end-to-end suite through sandgate
# delegating to sandgate: RELAYS relaying gateways (`command` backend) in
# front of the gateway that serves the test's own profile (chain.py).
#
#   run-chain.sh 1    chain-2: host -> sandgate -> sandgate (local), every test
#   run-chain.sh 2    two relays, every test
#   run-chain.sh N test_tools test_process ...   only the modules named
#                     (ctest's delegation/chain-3 is `2` with the modules
#                     that relay through relays: tests/CMakeLists.txt)
#
# Needs SANDGATE_BIN (the real sandgate; every gateway of the chain is it).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
: "${SANDGATE_BIN:?SANDGATE_BIN must name sandgate}"
relays=${1:?usage: run-chain.sh RELAYS [MODULE...]}
shift
export SG_CHAIN_BIN="$SANDGATE_BIN" SG_PEER_BIN="$SANDGATE_BIN" SG_CHAIN_RELAYS="$relays"
export SANDGATE_BIN="$here/chain"
# Every chain's relay configs and state directories, removed at the end.
SG_CHAIN_WORK=$(mktemp -d "${TMPDIR:-/tmp}/sg-chains-XXXXXX")
# Some tests run their gateway, here the chain, as an ordinary user
# (test_host_root): its chain makes its own directory in here too.  Each
# chain's directory is private to its owner (mkdtemp), so a shared
# sticky parent exposes nothing.
chmod 1777 "$SG_CHAIN_WORK"
export SG_CHAIN_WORK
trap 'rm -rf "$SG_CHAIN_WORK"' EXIT
cd "$here/../e2e"
[ $# -gt 0 ] || set -- discover -p 'test_*.py'
status=0
PYTHONDONTWRITEBYTECODE=1 python3 -m unittest "$@" || status=$?
exit $status
