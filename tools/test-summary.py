#!/usr/bin/env python3
"""Sum up `meson test` results of one or more build directories.

Reads each BUILD/meson-logs/testlog.json, counts every TAP line of a test
that printed TAP (ok / not ok / # SKIP) and every other test as one (all
of this project's TAP tests print a plan), prints a line per
build and a closing 'N passed, N failed, N skipped' line; exits 1 when any
test failed, errored or timed out, or when no test ran at all.
"""
import json
import re
import sys

TAP = re.compile(r"^(not ok|ok)\b(.*)$")


def count(build):
    passed = failed = skipped = 0
    try:
        lines = open(f"{build}/meson-logs/testlog.json").read().splitlines()
    except OSError as e:
        print(f"test-summary: {build}: {e}", file=sys.stderr)
        return 0, 1, 0
    for line in lines:
        t = json.loads(line)
        result = t.get("result", "")
        sub = [TAP.match(l) for l in t.get("stdout", "").splitlines()]
        sub = [m for m in sub if m]
        if sub:
            for m in sub:
                if "# SKIP" in m.group(2).upper():
                    skipped += 1
                elif m.group(1) == "ok":
                    passed += 1
                else:
                    failed += 1
            # A TAP test that crashed or timed out after its last line.
            if result not in ("OK", "SKIP", "EXPECTEDFAIL") and \
                    all(m.group(1) == "ok" for m in sub):
                failed += 1
        elif result == "SKIP":
            skipped += 1
        elif result in ("OK", "EXPECTEDFAIL"):
            passed += 1
        else:
            failed += 1
    return passed, failed, skipped


def main():
    total = [0, 0, 0]
    for build in sys.argv[1:]:
        p, f, s = count(build)
        print(f"{build}: {p} passed, {f} failed, {s} skipped")
        total = [total[0] + p, total[1] + f, total[2] + s]
    print(f"tests: {total[0]} passed, {total[1]} failed, {total[2]} skipped")
    return 1 if total[1] or total[0] == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
