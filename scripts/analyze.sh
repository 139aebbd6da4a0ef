#!/usr/bin/env bash
# analyze.sh [OUT] - clang's static analyzer and cppcheck over the whole
# tree, by hand (docs/testing.md, "Static analysis").  Not in CI: both
# follow paths across files they cannot see into, and most of what they
# print is such a path (see the doc); a person reads the list.
#
# Needs clang-tools (scan-build) and cppcheck.  OUT (default
# /tmp/sandgate-analyze) gets the build and the analyzer's HTML reports;
# the summary, one line per report, goes to standard output.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-/tmp/sandgate-analyze}
for tool in scan-build cppcheck; do
	command -v "$tool" >/dev/null || { echo "analyze: $tool is not installed" >&2; exit 2; }
done
rm -rf "$out" && mkdir -p "$out/build" "$out/reports"

scan-build -o "$out/reports" cmake -S . -B "$out/build" -DCMAKE_BUILD_TYPE=Debug >"$out/cmake.log"
# Dead stores are the house style's single exit: every `rc = ...` before
# a goto is one, on purpose.
scan-build -o "$out/reports" -disable-checker deadcode.DeadStores \
	make -C "$out/build" -j"$(nproc)" >"$out/build.log" 2>&1
echo "== clang static analyzer (reports in $out/reports)"
for f in "$out"/reports/*/report-*.html; do
	[ -e "$f" ] || continue
	tag() { sed -n "s/.*<!-- $1 \(.*\) -->.*/\1/p" "$f" | head -1; }
	echo "$(tag BUGFILE | sed "s|^$PWD/||"):$(tag BUGLINE): $(tag BUGDESC)"
done | sort

echo "== cppcheck"
# The system headers give jansson's iteration macros; isfinite's sizeof
# inside a macro is the C library's, not ours.
cppcheck -q -j"$(nproc)" --std=c11 --enable=warning,portability \
	-I . -I /usr/include -I /usr/include/x86_64-linux-gnu \
	--suppress=missingIncludeSystem --suppress=missingInclude \
	--suppress=sizeofFunctionCall --suppress=preprocessorErrorDirective \
	base core gateway adapters config helper ssh singularity daytona vercel modal docker 2>&1
