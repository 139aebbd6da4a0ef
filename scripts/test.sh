#!/usr/bin/env bash
# test.sh - the whole test suite, as CI runs it.
#
#   1. installs what is missing (scripts/deps.sh)
#   2. style checks (scripts/check-style.sh)
#   3. a -Werror build, then every test: unit, end-to-end, backends
#   4. an ASan+UBSan build, then the unit and end-to-end tests again
#   5. a ThreadSanitizer build, then the unit and end-to-end tests again
#   6. the libFuzzer targets, each for a bounded time
# Any failure fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
fuzz_seconds=${SG_FUZZ_SECONDS:-60}

bash scripts/deps.sh
bash scripts/check-style.sh

echo "== build (-Werror)"
cmake -S . -B build-ci -DSG_WERROR=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build-ci -j"$jobs"
echo "== tests"
(cd build-ci && ctest --output-on-failure -j"$jobs" --timeout 900)
python3 scripts/skips.py build-ci

echo "== build (ASan+UBSan)"
cmake -S . -B build-asan -DSG_WERROR=ON -DSG_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug >/dev/null
cmake --build build-asan -j"$jobs"
echo "== tests under ASan+UBSan"
(cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --output-on-failure -j"$jobs" -L 'unit|e2e' --timeout 900)
python3 scripts/skips.py build-asan

echo "== build (ThreadSanitizer)"
cmake -S . -B build-tsan -DSG_WERROR=ON -DSG_TSAN=ON -DCMAKE_BUILD_TYPE=Debug >/dev/null
cmake --build build-tsan -j"$jobs"
echo "== tests under ThreadSanitizer"
(cd build-tsan && TSAN_OPTIONS="halt_on_error=1:exitcode=86:suppressions=$PWD/../tests/tsan.supp" \
  ctest --output-on-failure -j"$jobs" -L 'unit|e2e' --timeout 900)
python3 scripts/skips.py build-tsan

echo "== fuzz (${fuzz_seconds}s per target)"
CC=clang cmake -S . -B build-fuzz -DSG_FUZZ=ON -DBUILD_TESTING=OFF >/dev/null
fuzz_targets="frame json reply"
cmake --build build-fuzz -j"$jobs" --target sg-fuzz-frame sg-fuzz-json sg-fuzz-reply
# libFuzzer's own output (its dictionary, coverage lines) goes to a log;
# the run shows one result line per target, and the log's tail on failure.
# A target's seeds are tests/fuzz/corpus-<target> when it has its own.
fuzz_failed=0
for target in $fuzz_targets; do
  mkdir -p "build-fuzz/corpus-$target"
  log="build-fuzz/fuzz-$target.log"
  seeds=tests/fuzz/corpus
  [ -d "tests/fuzz/corpus-$target" ] && seeds="tests/fuzz/corpus-$target"
  if "build-fuzz/tests/fuzz/sg-fuzz-$target" -max_total_time="$fuzz_seconds" \
      -max_len=65536 "build-fuzz/corpus-$target" "$seeds" >"$log" 2>&1; then
    runs=$(sed -n 's/^Done \([0-9]*\) runs.*/\1/p' "$log" | tail -n 1)
    echo "fuzz: $target: ok, ${runs:-?} runs in ${fuzz_seconds}s, corpus $(ls "build-fuzz/corpus-$target" | wc -l) inputs"
  else
    echo "fuzz: $target: FAILED (the crash and its input are in $log):"
    grep -E "ERROR|SUMMARY|Test unit written" "$log" | head -n 5
    fuzz_failed=$((fuzz_failed + 1))
  fi
done
echo "fuzz: $(($(echo $fuzz_targets | wc -w) - fuzz_failed)) passed, $fuzz_failed failed"
[ "$fuzz_failed" -eq 0 ]
