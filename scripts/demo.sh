#!/usr/bin/env bash
# demo.sh - install what is missing, build sandgate, and run a real session
# on the local backend, printed as a transcript.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)" --target sandgate sg-helper
exec python3 scripts/demo.py build/sandgate
