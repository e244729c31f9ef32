#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""The conformance table: kut_run.py's verdicts beside QEMU's on this host.

    kut_table.py [--baseline FILE] PLAIN.txt [SYSIDLE.txt]

PLAIN.txt and SYSIDLE.txt are what kut_run.py printed (one line per
section: VERDICT SECTION SECONDS s DETAIL), without and with --sysidle.
FILE (default qemu-baseline.txt beside this script) gives QEMU's verdict
per section, shell-style patterns allowed. Prints a Markdown table, one row
per section, then the counts: how many sections pass in each column, and
which sections differ between plain and --sysidle or fall short of QEMU
(QEMU passes, the VMM does not). Exit 0, or 2 on unreadable input.
"""
import argparse
import fnmatch
import os
import re
import sys

LINE = re.compile(r"^(PASS|FAIL|SKIP|TIMEOUT)\s+(\S+)\s+([0-9.]+) s\s*(.*)$")


def read_verdicts(path):
    """{section: (verdict, detail)} in file order."""
    out = {}
    with open(path) as f:
        for line in f:
            m = LINE.match(line.rstrip("\n"))
            if m:
                out[m.group(2)] = (m.group(1), m.group(4).strip())
    return out


def read_baseline(path):
    """[(pattern, verdict, why)] in file order."""
    rows = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            parts = line.split(None, 2)
            rows.append((parts[0], parts[1], parts[2] if len(parts) > 2
                         else ""))
    return rows


def baseline_of(rows, name):
    for pat, verdict, why in rows:
        if fnmatch.fnmatchcase(name, pat):
            return verdict, why
    return "", ""


def cell(v):
    if not v:
        return "–"
    verdict, detail = v
    m = re.search(r"SUMMARY: (\d+) tests, (\d+) unexpected failures", detail)
    if verdict == "FAIL" and m:
        return f"FAIL ({m.group(2)} of {m.group(1)})"
    return verdict


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--baseline", default=os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "qemu-baseline.txt"))
    ap.add_argument("plain")
    ap.add_argument("sysidle", nargs="?")
    a = ap.parse_args()
    try:
        plain = read_verdicts(a.plain)
        sysidle = read_verdicts(a.sysidle) if a.sysidle else {}
        base = read_baseline(a.baseline)
    except OSError as e:
        print(f"kut_table: {e}", file=sys.stderr)
        return 2
    names = list(plain) + [n for n in sysidle if n not in plain]
    cols = ["section", "QEMU here", "vmm"] + (["vmm --sysidle"]
                                             if a.sysidle else [])
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    short, differ = [], []
    for n in names:
        q = baseline_of(base, n)
        row = [n, (q[0] + (f" ({q[1]})" if q[1] else "")) if q[0] else "–",
               cell(plain.get(n))]
        if a.sysidle:
            row.append(cell(sysidle.get(n)))
            if plain.get(n, ("",))[0] != sysidle.get(n, ("",))[0]:
                differ.append(n)
        print("| " + " | ".join(row) + " |")
        runs = [plain.get(n)] + ([sysidle.get(n)] if a.sysidle else [])
        if q[0] == "PASS" and any(not r or r[0] != "PASS" for r in runs):
            short.append(n)
    qpass = sum(1 for n in names if baseline_of(base, n)[0] == "PASS")
    print()
    print(f"pass: QEMU here {qpass}, vmm "
          f"{sum(1 for v in plain.values() if v[0] == 'PASS')}" +
          (f", vmm --sysidle "
           f"{sum(1 for v in sysidle.values() if v[0] == 'PASS')}"
           if a.sysidle else "") + f", of {len(names)} sections")
    print("QEMU passes, the VMM does not: " + (", ".join(short) or "none"))
    if a.sysidle:
        print("plain and --sysidle differ: " + (", ".join(differ) or "none"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
