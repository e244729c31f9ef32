# SPDX-License-Identifier: GPL-2.0-only
"""The TAP lines every Python test of this project prints.

check() is one test point, skip() one skipped test point, finish() prints
the plan (and which checks failed) and returns the script's exit status.
A failed check's detail follows it as comments, its last DETAIL_LINES
lines. A script imports it after putting this directory on sys.path."""
import sys

DETAIL_LINES = 40
count = 0
failures = []


def check(ok, what, detail=""):
    """One TAP line; on failure the last lines of @detail as comments.
    Returns @ok."""
    global count
    count += 1
    print(("ok" if ok else "not ok") + " %d - %s" % (count, what))
    if not ok:
        failures.append(what)
        text = "" if detail is None else str(detail)
        for line in text.splitlines()[-DETAIL_LINES:]:
            print("#   " + line)
    sys.stdout.flush()
    return ok


def skip(what, why):
    """One test point that could not run, and why."""
    global count
    count += 1
    print("ok %d - %s # SKIP %s" % (count, what, why))
    sys.stdout.flush()


def finish():
    """Prints the TAP plan; returns the script's exit status."""
    print("1..%d" % count)
    if failures:
        print("# %d of %d failed: %s" % (len(failures), count,
                                        "; ".join(failures)))
        return 1
    return 0
