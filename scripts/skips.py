#!/usr/bin/env python3
"""skips.py BUILD_DIR - why tests were skipped in the last `ctest` run.

CTest shows a skipped test as "***Skipped" and keeps its output to itself;
this reads BUILD_DIR/Testing/Temporary/LastTest.log and prints one line per
skip with its reason: whole tests that exited 77 (their "SKIP: ..." or
"...; skipped" line) and single unittest cases inside a passing e2e file
("test_x (...) ... skipped 'reason'").  scripts/test.sh runs it after every
ctest run.
"""

import os
import re
import sys


def main():
    log = os.path.join(sys.argv[1] if len(sys.argv) > 1 else "build",
                       "Testing", "Temporary", "LastTest.log")
    try:
        with open(log, errors="replace") as f:
            text = f.read()
    except OSError:
        return 0
    count = 0
    for block in re.split(r"\n(?=\d+/\d+ Testing: )", text):
        m = re.match(r"\d+/\d+ Testing: (\S+)", block)
        if not m:
            continue
        out = block.split("Output:", 1)[-1].split("<end of output>", 1)[0]
        for line in out.splitlines():
            line = line.strip()
            case = re.match(r"(\w+) \((\S+)\) \.\.\. skipped '(.*)'$", line)
            if case:
                print("skipped: %s: %s: %s" % (m.group(1), case.group(2), case.group(3)))
                count += 1
            elif line.startswith("SKIP: ") or line.endswith("; skipped"):
                print("skipped: %s: %s" % (m.group(1), line))
                count += 1
    print("skips: %d (reasons above)" % count if count else "skips: none")
    return 0


if __name__ == "__main__":
    sys.exit(main())
