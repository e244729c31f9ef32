#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""Tests of sysidle-consolidate's migration plan
(tools/sysidle_consolidate/plan.py): what it makes of its input. The same
plan twice, for shuffled input and in another process (byte-identical);
usage and inventory errors.

usage: test_plan_input.py [TOOLS_DIR]    (default: ../../tools from this
file)
TAP on stdout; exit 0 when every test passes.
"""
import contextlib
import copy
import io
import os
import random
import resource
import shutil
import subprocess
import sys

from plan_inventory import (
    CLUSTER4, CLUSTER4_PLAN, P, T, TMP, TOOLS, GiB, cli, dom, host, plan_of,
    write_json)
from tap import check as ok, finish


def shuffled(inv, seed):
    r = random.Random(seed)
    inv = copy.deepcopy(inv)
    r.shuffle(inv["hosts"])
    for h in inv["hosts"]:
        r.shuffle(h["domains"])
    return inv


def test_determinism():
    # ties everywhere: equal hosts, equal domains
    inv = {"taken_unix_ms": T, "hosts": [
        host("q", 8, 16 * GiB, [dom("q2", 2, 1 * GiB), dom("q1", 2, 1 * GiB)]),
        host("p", 8, 16 * GiB, [dom("p2", 2, 1 * GiB), dom("p1", 2, 1 * GiB)]),
        host("r", 8, 16 * GiB, [dom("r1", 2, 1 * GiB), dom("r2", 2, 1 * GiB),
                                dom("r3", 2, 1 * GiB)]),
    ]}
    rc, first = plan_of(inv)
    p = P.make_plan(inv, P.Budget())
    ok([(m.name, m.src, m.dst) for m in p.moves] ==
       [("p1", "p", "r"), ("p2", "p", "q")] and p.stay_on == ["q", "r"],
       "ties: hosts by URI (p before q), domains by name (p1 before p2), "
       "receivers most loaded first (r, then q)",
       "\n".join(first))
    rc2, second = plan_of(inv)
    ok(first == second and rc == rc2, "same input twice: identical output")
    same = True
    for seed in range(8):
        rc3, other = plan_of(shuffled(inv, seed), name="shuf.json")
        if other != first or rc3 != rc:
            same = False
            ok(False, "shuffled input (seed %d): identical output" % seed,
               "\n".join(other))
            break
    if same:
        ok(True, "shuffled input order (8 shuffles): identical output")
    for seed in range(4):
        _, a = plan_of(shuffled(CLUSTER4, seed), name="shuf.json")
        if a != CLUSTER4_PLAN:
            ok(False, "4-host cluster shuffled (seed %d)" % seed, "\n".join(a))
            break
    else:
        ok(True, "4-host cluster shuffled (4 shuffles): identical plan")
    # byte-identical across processes too (hash seeds differ)
    path = write_json("proc.json", CLUSTER4)
    outs = []
    for hs in ("1", "2", "random"):
        env = dict(os.environ, PYTHONHASHSEED=hs, PYTHONPATH=TOOLS)
        r = subprocess.run([sys.executable, "-m", "sysidle_consolidate.plan",
                            "--plan-input", path], stdout=subprocess.PIPE,
                           env=env)
        outs.append((r.returncode, r.stdout))
    ok(all(o == outs[0] for o in outs) and outs[0][0] == 0 and
       outs[0][1].decode().splitlines() == CLUSTER4_PLAN,
       "python3 -m sysidle_consolidate.plan, other hash seeds: "
       "byte-identical output", repr(outs))


def test_errors():
    path = write_json("good.json", CLUSTER4)
    for argv, desc in (([], "neither --hosts nor --plan-input"),
                       (["--plan-input", path, "--hosts", "test:///x"],
                        "both --hosts and --plan-input"),
                       (["--plan-input", path, "--apply"],
                        "--apply with a file inventory")):
        rc, lines = cli(argv)
        ok(rc == P.EXIT_USAGE and lines and lines[0].startswith("error:"),
           "usage: %s: exit 2" % desc, "rc %d %r" % (rc, lines))
    bad = os.path.join(TMP, "bad.json")
    with open(bad, "w") as f:
        f.write("{not json")
    rc, lines = cli(["--plan-input", bad])
    ok(rc == P.EXIT_INVENTORY and lines[0].startswith("error: --plan-input"),
       "bad JSON: exit 6", "rc %d %r" % (rc, lines))
    rc, lines = cli(["--plan-input", os.path.join(TMP, "missing.json")])
    ok(rc == P.EXIT_INVENTORY, "missing file: exit 6")
    # an endless input (/dev/zero) is refused at the bound, not read whole:
    # in a child with 1 GiB of address space, so that a reader without a
    # bound fails there instead of taking the machine's memory
    try:
        r = subprocess.run(
            [sys.executable, "-m", "sysidle_consolidate.plan",
             "--plan-input", "/dev/zero"], stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True, timeout=60,
            env=dict(os.environ, PYTHONPATH=TOOLS),
            preexec_fn=lambda: resource.setrlimit(
                resource.RLIMIT_AS, (1 << 30, 1 << 30)))
        rc, out = r.returncode, r.stdout
    except subprocess.TimeoutExpired:
        rc, out = None, "no exit within 60 s"
    ok(rc == P.EXIT_INVENTORY and "error: --plan-input /dev/zero: longer "
       "than 16777216 bytes" in out,
       "--plan-input /dev/zero: refused at 16 MiB, exit 6",
       "rc %s %r" % (rc, out[-300:]))
    for inv, what in (
            ({"hosts": [host("a", 8, GiB, []), host("a", 8, GiB, [])]},
             "host a: given twice"),
            ({"hosts": [host("a", -1, GiB, [])]},
             "host a: 'cpus' must be an integer >= 0, not -1"),
            ({"hosts": [host("a", 8, GiB, [dom("x", 1, 1), dom("x", 1, 1)])]},
             "host a: domain x: listed twice"),
            ({"hosts": [host("a", 8, GiB, [{"name": "x", "vcpus": 1}])]},
             "host a: domain x: 'memory_kib' missing")):
        rc, lines = plan_of(inv)
        ok(rc == P.EXIT_INVENTORY and lines == ["error: inventory: " + what],
           "bad inventory (%s): exit 6" % what, "rc %d %r" % (rc, lines))
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            cli(["--plan-input", path, "--cpu-overcommit", "-1"])
        ok(False, "negative --cpu-overcommit refused by argparse")
    except SystemExit as e:
        ok(e.code == 2, "negative --cpu-overcommit refused by argparse")


def main():
    try:
        test_determinism()
        test_errors()
    finally:
        shutil.rmtree(TMP, ignore_errors=True)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
