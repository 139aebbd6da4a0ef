#!/usr/bin/env bash
# deps.sh - install the Debian 12 packages sandgate builds and tests with.
#
# Idempotent: installs only what is missing (always refreshing the package
# lists first under CI, where the machine is fresh).  Needs root or sudo.
set -euo pipefail

PACKAGES=(
  build-essential cmake pkg-config git python3
  libcurl4-openssl-dev libssl-dev zlib1g-dev libjansson-dev libwebsockets-dev libcmocka-dev
  bubblewrap musl-tools ripgrep man-db
  openssh-server openssh-client openssl
  protobuf-c-compiler libprotobuf-c-dev
  clang libclang-rt-14-dev
  libmozjs-102-dev
  nodejs npm
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done

# A newer Node than Debian's may already be on PATH (nodejs/npm then need
# no package); the tests only need `node` and `npm` to exist.
if command -v node >/dev/null && command -v npm >/dev/null; then
  filtered=()
  for p in "${missing[@]}"; do
    [[ "$p" == nodejs || "$p" == npm ]] || filtered+=("$p")
  done
  missing=("${filtered[@]+"${filtered[@]}"}")
fi

sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
if [ "${CI:-}" = "true" ] || [ ${#missing[@]} -gt 0 ]; then
  $sudo apt-get update -qq
fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "deps: installing ${missing[*]}" >&2
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
