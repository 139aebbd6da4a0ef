#!/bin/sh
# run.sh BUILD_DIR - sandgate installed as users install it, then used.
#
#   1. `cmake --install` into a temporary prefix: every file in its place,
#      `man` renders the page, bash completes a subcommand, and the core
#      end-to-end files pass against the installed `sandgate serve` (which
#      finds sg-helper in ../libexec/sandgate/, nothing from the build tree).
#   2. `cpack -G DEB`: the package's file list, its dependencies installed
#      on this machine, then `dpkg --root` installs it into a private root
#      (dpkg's own unpacking and database, without touching this system),
#      whose sandgate serves a session and whose man page renders.
#
# Exit 77 (skipped, with the reason) when a tool it needs is missing.
set -eu
build=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
e2e="$here/../e2e"
for tool in man dpkg dpkg-deb cpack; do
  if ! command -v "$tool" >/dev/null; then
    echo "SKIP: $tool is not installed (scripts/deps.sh installs it)"
    exit 77
  fi
done
tmp=$(mktemp -d "${TMPDIR:-/tmp}/sg-install-XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
fail() { echo "FAIL: $*"; exit 1; }
# e2e BIN TESTS...: the e2e files against BIN, their summary shown.
e2e() {
  bin=$1; shift
  (cd "$e2e" && env -u SANDGATE_HELPER SANDGATE_BIN="$bin" PYTHONDONTWRITEBYTECODE=1 \
    python3 -m unittest "$@" > "$tmp/e2e.log" 2>&1) || { tail -n 60 "$tmp/e2e.log"; fail "e2e $*"; }
  tail -n 3 "$tmp/e2e.log"
}

echo "== cmake --install --prefix $tmp/usr"
cmake --install "$build" --prefix "$tmp/usr" >/dev/null
for f in bin/sandgate libexec/sandgate/sg-helper share/man/man1/sandgate.1 \
         share/bash-completion/completions/sandgate share/doc/sandgate/examples/local.json \
         share/doc/sandgate/cli.md; do
  [ -e "$tmp/usr/$f" ] || fail "$f is not installed"
done
MANPATH="$tmp/usr/share/man" man -P cat sandgate 2>/dev/null | grep -q "^EXIT STATUS" \
  || fail "man sandgate does not show the page"
got=$(bash -c ". '$tmp/usr/share/bash-completion/completions/sandgate'
  COMP_WORDS=(sandgate envs g); COMP_CWORD=2; _sandgate; echo \"\${COMPREPLY[*]}\"")
[ "$got" = gc ] || fail "bash completion of 'sandgate envs g' gave '$got'"
"$tmp/usr/bin/sandgate" --version | grep -q "backends: " || fail "--version"

echo "== the core end-to-end files against $tmp/usr/bin/sandgate"
e2e "$tmp/usr/bin/sandgate" test_init test_command test_cli

echo "== cpack -G DEB"
(cd "$build" && cpack -G DEB -B "$tmp/deb" >"$tmp/cpack.log" 2>&1) || { cat "$tmp/cpack.log"; fail "cpack"; }
deb=$(ls "$tmp"/deb/*.deb)
dpkg-deb -c "$deb" > "$tmp/list"
for f in ./usr/bin/sandgate ./usr/libexec/sandgate/sg-helper ./usr/share/man/man1/sandgate.1 \
         ./usr/share/bash-completion/completions/sandgate; do
  grep -q " $f\$" "$tmp/list" || fail "$f is not in the package"
done
depends=$(dpkg-deb -f "$deb" Depends)
[ -n "$depends" ] || fail "the package declares no dependencies"
echo "Depends: $depends"
# Every dependency (first alternative) is installed here, so a plain
# `dpkg -i` on this machine would be satisfied.
echo "$depends" | tr ',' '\n' | sed 's/|.*//; s/(.*//; s/ //g' | while read -r pkg; do
  dpkg-query -W -f='${Status}\n' "$pkg" 2>/dev/null | grep -q "install ok installed" \
    || fail "dependency $pkg is not installed"
done
root="$tmp/root"
mkdir -p "$root/var/lib/dpkg/info" "$root/var/lib/dpkg/updates"
: > "$root/var/lib/dpkg/status"
# The private root has no packages: dependencies were checked above.
dpkg --root="$root" --force-depends --force-script-chrootless -i "$deb" >"$tmp/dpkg.log" 2>&1 \
  || fail "dpkg -i into a private root"
dpkg --root="$root" -L sandgate | grep -q "^/usr/bin/sandgate$" || fail "dpkg -L"
MANPATH="$root/usr/share/man" man -P cat sandgate 2>/dev/null | grep -q "sandgate serve" \
  || fail "man sandgate from the package"
e2e "$root/usr/bin/sandgate" test_init.ReplyShape test_cli.Wording
echo "install: ok"
