#!/usr/bin/env bash
# check-style.sh - the house rules a compiler does not check.
set -euo pipefail
cd "$(dirname "$0")/.."
dirs=$(ls -d base core gateway adapters helper modal daytona vercel ssh singularity config 2>/dev/null)
fail=0
report() { echo "style: $1"; fail=1; }

# Banned calls (docs/architecture.md, "Style").
hits=$(grep -rnE '\b(sprintf|vsprintf|strcpy|strcat|strncpy|strtok|gets|atoi|alloca|system|popen)\s*\(' \
  --include='*.c' --include='*.h' $dirs || true)
[ -z "$hits" ] || report "banned calls:
$hits"

# Only the protocol writer (and sg_cli_printf beside it, for the command
# line's reports) and the helper program's main write stdout: in serve,
# stdout is the wire's alone.  Every way to write it counts.
hits=$(grep -rnE '\b(v?printf|puts|putchar)\s*\(|\b(v?fprintf|fflush)\s*\(\s*stdout\b|\b(fputs|fputc|putc|fwrite)\s*\(.*,\s*stdout\s*\)|\bwrite\s*\(\s*(1|STDOUT_FILENO)\s*,' \
  --include='*.c' --include='*.h' $dirs \
  | grep -vE '^(gateway/wire\.c|helper/main\.c):' || true)
[ -z "$hits" ] || report "stdout written outside wire.c:
$hits"

# No shell on the host side (commands inside environments may use one:
# bash's `command` and sg-helper's spawn are shell strings by
# definition), no switched-off host key or TLS checks anywhere.
# A line that builds a command for inside an environment says so with the
# comment "in the environment".
hits=$(grep -rnE '"(/bin/)?sh", *"-c"' --include='*.c' $dirs \
  | grep -vE '^(gateway/tools/|helper/)' | grep -v 'in the environment' || true)
hits+=$(grep -rnE 'StrictHostKeyChecking=(no|accept-new)|VERIFYPEER, *0|VERIFYHOST, *0' \
  --include='*.c' $dirs || true)
[ -z "$hits" ] || report "host shell or disabled verification:
$hits"

# No typedef'd structs.
hits=$(grep -rnE 'typedef struct' --include='*.c' --include='*.h' $dirs || true)
[ -z "$hits" ] || report "typedef'd structs:
$hits"

# Unfinished work is tracked in issues, not in the code.
hits=$(grep -rnE 'TODO|FIXME|XXX' --include='*.c' --include='*.h' $dirs || true)
[ -z "$hits" ] || report "unfinished markers:
$hits"

# The include graph is a layering: no circle, no upward include
# (scripts/check-includes.py; its self-test shows each rule can fail).
if ! command -v python3 >/dev/null; then
	report "python3 is needed for the include check"
elif ! out=$(python3 scripts/check-includes.py --self-test && python3 scripts/check-includes.py); then
	report "include graph:
$out"
fi

[ $fail -eq 0 ] && echo "style: ok"
exit $fail
