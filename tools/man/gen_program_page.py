#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""Make a program's manual page from its own --help and --version
(help2man), so the page and --help never disagree; the sections --help
does not hold (FILES, SEE ALSO, ...) come from an include file.

    gen_program_page.py --section 1 --summary TEXT --include FILE.h2m \
        --output PAGE PROGRAM

The page's date is SOURCE_DATE_EPOCH's when set, else today's, in the
ISO form man pages lint clean with. Exit 1 with one line on any failure.
"""
import argparse
import os
import re
import subprocess
import sys
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--section", required=True)
    ap.add_argument("--summary", required=True)
    ap.add_argument("--include")
    ap.add_argument("--output", required=True)
    ap.add_argument("program")
    a = ap.parse_args()
    cmd = ["help2man", "--no-info", "--section", a.section,
           "--name", a.summary]
    if a.include:
        cmd += ["--include", a.include]
    prog = a.program  # help2man runs PROGRAM --help and --version
    env = dict(os.environ, LC_ALL="C.UTF-8", COLUMNS="80")
    try:
        r = subprocess.run(cmd + [prog], capture_output=True, text=True,
                           env=env, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        sys.exit("gen_program_page: help2man %s: %s" % (prog, e))
    if r.returncode != 0 or not r.stdout:
        sys.exit("gen_program_page: help2man %s failed: %s" %
                 (prog, r.stderr.strip()))
    epoch = int(os.environ.get("SOURCE_DATE_EPOCH", time.time()))
    date = time.strftime("%Y-%m-%d", time.gmtime(epoch))
    # .TH NAME SECTION "Month YYYY" "source" "manual": the date, ISO.
    page = re.sub(r'^(\.TH \S+ \S+ )"[^"]*"', r'\1"%s"' % date, r.stdout,
                  count=1, flags=re.M)
    with open(a.output, "w") as f:
        f.write(page)


if __name__ == "__main__":
    main()
