#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""What the tests of sysidle-consolidate's migration plan
(tools/sysidle_consolidate/plan.py; test_plan*.py) share: the plan module
found in TOOLS_DIR (their first argument, default ../../tools from this
file), the plan run through a tiny CLI (cli, plan_of), inventories made of
hosts and domains (host, dom), a comparison line by line (same_lines), the
cluster of 4 hosts where 2 can be emptied and its plan, and a temporary
directory (TMP) each program removes at its end."""
import argparse
import importlib.util
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TOOLS = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                        os.path.join(HERE, "..", "..", "tools"))
sys.path.insert(0, TOOLS)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                ".."))
from tap import check as ok  # noqa: E402

from sysidle_consolidate import plan as P  # noqa: E402

# the binding, not a namespace package (any directory named libvirt)
_spec = importlib.util.find_spec("libvirt")
HAVE_LIBVIRT = _spec is not None and _spec.origin not in (None, "namespace")

def cli(argv, stdin_text=None):
    """Run the plan through a tiny CLI: (exit status, [lines])."""
    ap = argparse.ArgumentParser(prog="plan")
    P.add_arguments(ap)
    args = ap.parse_args(argv)
    lines = []
    rc = P.run(args, lines.append)
    return rc, lines


TMP = tempfile.mkdtemp(prefix="test-plan-")


def write_json(name, inv):
    path = os.path.join(TMP, name)
    with open(path, "w") as f:
        json.dump(inv, f)
    return path


def plan_of(inv, *opts, name="inv.json"):
    return cli(["--plan-input", write_json(name, inv)] + list(opts))


def same_lines(got, want, desc):
    diag = None
    if got != want:
        out = ["got:"] + ["  " + x for x in got] + ["want:"] + \
            ["  " + x for x in want]
        for i in range(max(len(got), len(want))):
            g = got[i] if i < len(got) else "<none>"
            w = want[i] if i < len(want) else "<none>"
            if g != w:
                out += ["first difference at line %d:" % (i + 1),
                        "  got  %s" % g, "  want %s" % w]
                break
        diag = "\n".join(out)
    return ok(got == want, desc, diag)


GiB = 1024 * 1024       # in KiB
MiB = 1024
T = 1767323087678       # inventory time


def dom(name, vcpus, mem_kib, state="FULL_NOTED", age_s=100, **kw):
    d = {"name": name, "vcpus": vcpus, "memory_kib": mem_kib,
         "state": state,
         "since_unix_ms": None if state is None else T - age_s * 1000}
    d.update(kw)
    return d


def host(uri, cpus, mem_kib, doms, **kw):
    h = {"uri": uri, "cpus": cpus, "memory_kib": mem_kib, "domains": doms}
    h.update(kw)
    return h


BUDGET_LINE = ("budget per host: vCPUs <= host CPUs x 1 (idle vCPUs weigh "
               "1), memory <= host memory - 1024 MiB; a domain moves after "
               "0 s in FULL_NOTED")

# --- a cluster of 4 hosts where 2 can be emptied --------------------------
CLUSTER4 = {"taken_unix_ms": T, "hosts": [
    host("qemu+ssh://a/system", 16, 32 * GiB,
         [dom("db1", 4, 8 * GiB, state="NOT")]),
    host("qemu+ssh://b/system", 8, 16 * GiB,
         [dom("web1", 2, 1 * GiB, age_s=42), dom("web2", 1, 2 * GiB)]),
    host("qemu+ssh://c/system", 8, 16 * GiB, [dom("batch", 4, 4 * GiB)]),
    host("qemu+ssh://d/system", 8, 16 * GiB,
         [dom("big1", 6, 8 * GiB), dom("big2", 2, 4 * GiB)]),
]}
CLUSTER4_PLAN = [
    BUDGET_LINE,
    "host qemu+ssh://a/system: 16 CPUs, 32768 MiB; budget 16 vCPUs, "
    "31744 MiB; carries 4 vCPUs, 8192 MiB in 1 running domain "
    "(0 fully idle)",
    "host qemu+ssh://b/system: 8 CPUs, 16384 MiB; budget 8 vCPUs, "
    "15360 MiB; carries 3 vCPUs, 3072 MiB in 2 running domains "
    "(2 fully idle)",
    "host qemu+ssh://c/system: 8 CPUs, 16384 MiB; budget 8 vCPUs, "
    "15360 MiB; carries 4 vCPUs, 4096 MiB in 1 running domain "
    "(1 fully idle)",
    "host qemu+ssh://d/system: 8 CPUs, 16384 MiB; budget 8 vCPUs, "
    "15360 MiB; carries 8 vCPUs, 12288 MiB in 2 running domains "
    "(2 fully idle)",
    "keep host qemu+ssh://a/system: domains that do not move: db1 "
    "(busy: NOT)",
    "move web2 (1 vCPU, 2048 MiB, FULL_NOTED 100 s) qemu+ssh://b/system -> "
    "qemu+ssh://a/system (then 5/16 vCPUs, 10240/31744 MiB)",
    "move web1 (2 vCPUs, 1024 MiB, FULL_NOTED 42 s) qemu+ssh://b/system -> "
    "qemu+ssh://a/system (then 7/16 vCPUs, 11264/31744 MiB)",
    "power-down candidate: qemu+ssh://b/system (all 2 domains move)",
    "move batch (4 vCPUs, 4096 MiB, FULL_NOTED 100 s) qemu+ssh://c/system "
    "-> qemu+ssh://a/system (then 11/16 vCPUs, 15360/31744 MiB)",
    "power-down candidate: qemu+ssh://c/system (its only domain moves)",
    "cannot empty qemu+ssh://d/system: big1 (6 vCPUs, 8192 MiB, FULL_NOTED "
    "100 s) fits no host (qemu+ssh://a/system has 5 vCPUs, 16384 MiB "
    "left); it stays on",
    "plan: 4 hosts -> 2, 3 migrations",
]
