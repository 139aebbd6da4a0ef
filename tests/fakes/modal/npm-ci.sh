#!/usr/bin/env bash
# Installs the fake's pinned npm packages (package-lock.json) when they are missing or stale.
set -eu
cd "$(dirname "${BASH_SOURCE[0]}")"
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
	npm ci --no-audit --no-fund --loglevel=error >&2
fi
node -e "import('@grpc/grpc-js').then(() => import('protobufjs')).then(() => import('modal'))"
