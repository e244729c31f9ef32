#!/usr/bin/env python3
"""Run one libFuzzer target for a set time on its corpus; print one TAP line.

    run_fuzz.py FUZZER CORPUS WORKDIR SECONDS

FUZZER starts from the inputs of CORPUS (the seeds and regression inputs
kept in the repository, read only) and of WORKDIR/corpus (what earlier runs
in this build directory found; new inputs go there). A crash, a leak, a
sanitizer report, a timeout (10 s on one input) or running out of memory
(2 GiB) leaves the input in WORKDIR/ and fails the test, naming the file:
copy it into CORPUS once fixed, so the replay tests keep trying it.
The TAP line gives the executions, the coverage (libFuzzer's "cov", the
edges reached, and "ft", its features) and the corpus size.
"""
import os
import re
import subprocess
import sys

COV = re.compile(r"cov: (\d+) ft: (\d+)(?: corp: (\d+)/)?")
STAT = re.compile(r"^stat::(\w+):\s+(\d+)", re.M)


def main():
    if len(sys.argv) != 5:
        print(__doc__, file=sys.stderr)
        return 2
    fuzzer, corpus, work, seconds = sys.argv[1:]
    name = os.path.basename(fuzzer)
    os.makedirs(os.path.join(work, "corpus"), exist_ok=True)
    log = os.path.join(work, "fuzz.log")
    before = set(os.listdir(work))
    cmd = [fuzzer, f"-max_total_time={int(seconds)}", "-timeout=10",
           "-rss_limit_mb=2048", "-print_final_stats=1",
           f"-artifact_prefix={work}/", os.path.join(work, "corpus"), corpus]
    with open(log, "w") as out:
        rc = subprocess.call(cmd, stdout=out, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL,
                             timeout=int(seconds) + 300)
    text = open(log, errors="replace").read()
    stats = {k: int(v) for k, v in STAT.findall(text)}
    cov = COV.findall(text)
    edges, features, corp = cov[-1] if cov else ("?", "?", "?")
    summary = (f"{name}: {stats.get('number_of_executed_units', '?')} "
               f"executions in {seconds} s, cov {edges}, ft {features}, "
               f"corpus {corp or '?'} inputs, "
               f"{stats.get('new_units_added', '?')} new, "
               f"peak RSS {stats.get('peak_rss_mb', '?')} MiB")
    found = sorted(set(os.listdir(work)) - before -
                   {"corpus", "fuzz.log"})
    if rc != 0 or found:
        print(f"not ok 1 - {summary}: exit {rc}")
        for f in found:
            print(f"# input kept: {os.path.join(work, f)}")
        for line in text.splitlines()[-40:]:
            print(f"# {line}")
        print("1..1")
        return 1
    print(f"ok 1 - {summary}")
    print("1..1")
    return 0


if __name__ == "__main__":
    sys.exit(main())
