#!/usr/bin/env bash
# test.sh [quick|full] - the test suite in one of its two tiers
# (docs/testing.md gives each one's measured time on two cores).
#
#   quick (the default, the README's command):
#     1. installs what is missing (scripts/deps.sh)
#     2. style checks (scripts/check-style.sh)
#     3. a -Werror build, then the ctest label `quick`: unit, the end-to-end
#        suite on the local backend, the delegation rules, a smoke subset of
#        the end-to-end suite on each other backend
#   full (CI's .ci/run): 1 and 2, then
#     3. the -Werror build, then the ctest label `full`: all of quick's tests
#        but the smoke subsets, the whole end-to-end suite on each backend,
#        the fakes' SDK checks, delegation through relays, the install test
#     4. an ASan+UBSan build, then the unit and end-to-end tests again
#     5. a ThreadSanitizer build, then the unit and end-to-end tests again
#     6. the libFuzzer targets, side by side, each for a bounded time
# Any failure fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."
tier=${1:-quick}
case "$tier" in
quick | full) ;;
*)
  echo "usage: scripts/test.sh [quick|full]" >&2
  exit 2
  ;;
esac
jobs=$(nproc)
# Most end-to-end tests spend their time waiting on processes, sandboxes and
# fakes (a run of the old serial suite kept two cores 17% busy), so ctest
# runs twice as many tests as there are cores; the sanitized runs, which
# are CPU-bound, run one per core.
test_jobs=${SG_TEST_JOBS:-$((jobs * 2))}
fuzz_seconds=${SG_FUZZ_SECONDS:-60}
start=$SECONDS

# phase NAME: one line with the time since the start, so a run's log says
# where its minutes went.
phase() {
  local t=$((SECONDS - start))
  printf '== %s (at %dm%02ds)\n' "$1" $((t / 60)) $((t % 60))
}

phase "deps"
bash scripts/deps.sh
phase "style"
bash scripts/check-style.sh

phase "build (-Werror)"
cmake -S . -B build-ci -DSG_WERROR=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build-ci -j"$jobs"
phase "tests: tier $tier (ctest -L $tier -j$test_jobs)"
(cd build-ci && ctest --output-on-failure -j"$test_jobs" -L "$tier" --timeout 2400)
python3 scripts/skips.py build-ci

if [ "$tier" = quick ]; then
  phase "done (tier quick)"
  exit 0
fi

phase "build (ASan+UBSan)"
cmake -S . -B build-asan -DSG_WERROR=ON -DSG_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug >/dev/null
cmake --build build-asan -j"$jobs"
phase "tests under ASan+UBSan"
(cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --output-on-failure -j"$jobs" -L 'unit|e2e' --timeout 900)
python3 scripts/skips.py build-asan

phase "build (ThreadSanitizer)"
cmake -S . -B build-tsan -DSG_WERROR=ON -DSG_TSAN=ON -DCMAKE_BUILD_TYPE=Debug >/dev/null
cmake --build build-tsan -j"$jobs"
phase "tests under ThreadSanitizer"
(cd build-tsan && TSAN_OPTIONS="halt_on_error=1:exitcode=86:suppressions=$PWD/../tests/tsan.supp" \
  ctest --output-on-failure -j"$jobs" -L 'unit|e2e' --timeout 900)
python3 scripts/skips.py build-tsan

phase "fuzz (${fuzz_seconds}s per target, side by side)"
CC=clang cmake -S . -B build-fuzz -DSG_FUZZ=ON -DBUILD_TESTING=OFF >/dev/null
fuzz_targets="frame json reply code"
cmake --build build-fuzz -j"$jobs" --target sg-fuzz-frame sg-fuzz-json sg-fuzz-reply sg-fuzz-code
# libFuzzer's own output (its dictionary, coverage lines) goes to a log;
# the run shows one result line per target, and the log's tail on failure.
# A target's seeds are tests/fuzz/corpus-<target> when it has its own.
# The targets run at once: each is bounded by wall time, so together they
# take one target's time, each with its share of the cores.
declare -A fuzz_pid
for target in $fuzz_targets; do
  mkdir -p "build-fuzz/corpus-$target"
  seeds=tests/fuzz/corpus
  [ -d "tests/fuzz/corpus-$target" ] && seeds="tests/fuzz/corpus-$target"
  "build-fuzz/tests/fuzz/sg-fuzz-$target" -max_total_time="$fuzz_seconds" \
    -max_len=65536 "build-fuzz/corpus-$target" "$seeds" >"build-fuzz/fuzz-$target.log" 2>&1 &
  fuzz_pid[$target]=$!
done
fuzz_failed=0
for target in $fuzz_targets; do
  log="build-fuzz/fuzz-$target.log"
  if wait "${fuzz_pid[$target]}"; then
    runs=$(sed -n 's/^Done \([0-9]*\) runs.*/\1/p' "$log" | tail -n 1)
    echo "fuzz: $target: ok, ${runs:-?} runs in ${fuzz_seconds}s, corpus $(ls "build-fuzz/corpus-$target" | wc -l) inputs"
  else
    echo "fuzz: $target: FAILED (the crash and its input are in $log):"
    grep -E "ERROR|SUMMARY|Test unit written" "$log" | head -n 5
    fuzz_failed=$((fuzz_failed + 1))
  fi
done
phase "done (tier full)"
echo "fuzz: $(($(echo $fuzz_targets | wc -w) - fuzz_failed)) passed, $fuzz_failed failed"
[ "$fuzz_failed" -eq 0 ]
