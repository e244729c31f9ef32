#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""Tests of sysidle-consolidate's migration plan
(tools/sysidle_consolidate/plan.py): fixed JSON inventories with their
expected plans, line by line; determinism (twice, shuffled input);
infeasible budgets; usage and inventory errors; the libvirt inventory and
--apply through libvirt's test driver (node files written here; migration
is not supported by that driver, so --apply must report the failure).

usage: test_plan.py [TOOLS_DIR]    (default: ../../tools from this file)
TAP on stdout; exit 0 when every test passes.
"""
import argparse
import contextlib
import copy
import importlib.util
import io
import json
import os
import random
import re
import resource
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TOOLS = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                        os.path.join(HERE, "..", "..", "tools"))
sys.path.insert(0, TOOLS)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                ".."))
from tap import check as ok, finish, skip  # noqa: E402

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


def test_cluster4():
    rc, lines = plan_of(CLUSTER4)
    same_lines(lines, CLUSTER4_PLAN, "4 hosts, 2 emptied: the plan line by "
               "line")
    ok(rc == P.EXIT_OK, "4 hosts, 2 emptied: exit 0", "rc %d" % rc)
    p = P.make_plan(CLUSTER4, P.Budget())
    ok(p.power_down == ["qemu+ssh://b/system", "qemu+ssh://c/system"] and
       p.stay_on == ["qemu+ssh://a/system", "qemu+ssh://d/system"] and
       [(m.name, m.src, m.dst) for m in p.moves] == [
           ("web2", "qemu+ssh://b/system", "qemu+ssh://a/system"),
           ("web1", "qemu+ssh://b/system", "qemu+ssh://a/system"),
           ("batch", "qemu+ssh://c/system", "qemu+ssh://a/system")],
       "make_plan: power_down, stay_on and moves as printed")


def test_cannot_empty():
    # c's small domain would fit on a; its big one fits nowhere: nothing of
    # c moves (all or nothing), and c then receives b's domain.
    inv = {"taken_unix_ms": T, "hosts": [
        host("qemu+ssh://a/system", 8, 16 * GiB,
             [dom("db1", 6, 4 * GiB, state="LONG")]),
        host("qemu+ssh://b/system", 8, 16 * GiB, [dom("tiny", 2, 4 * GiB)]),
        host("qemu+ssh://c/system", 8, 16 * GiB,
             [dom("huge", 7, 1 * GiB), dom("small", 1, 512 * MiB)]),
    ]}
    rc, lines = plan_of(inv)
    want = [
        "keep host qemu+ssh://a/system: domains that do not move: db1 "
        "(busy: LONG)",
        "cannot empty qemu+ssh://c/system: huge (7 vCPUs, 1024 MiB, "
        "FULL_NOTED 100 s) fits no host (qemu+ssh://a/system has 2 vCPUs, "
        "11264 MiB left; qemu+ssh://b/system has 6 vCPUs, 11264 MiB left); "
        "it stays on",
        "move tiny (2 vCPUs, 4096 MiB, FULL_NOTED 100 s) qemu+ssh://b/system "
        "-> qemu+ssh://a/system (then 8/8 vCPUs, 8192/15360 MiB)",
        "power-down candidate: qemu+ssh://b/system (its only domain moves)",
        "plan: 3 hosts -> 2, 1 migration",
    ]
    same_lines(lines[4:], want, "cannot empty: a domain that fits no host "
               "keeps its whole host on")
    ok(not any(l.startswith("move small") for l in lines),
       "cannot empty: the domains that would fit do not move either")
    ok(rc == P.EXIT_OK, "cannot empty: exit 0 (another host is emptied)")


def test_receiving_candidate():
    # only idle hosts: the least loaded go to the most loaded, which stays
    inv = {"taken_unix_ms": T, "hosts": [
        host("x", 8, 16 * GiB, [dom("x1", 1, 1 * GiB)]),
        host("y", 8, 16 * GiB, [dom("y1", 1, 2 * GiB)]),
        host("z", 8, 16 * GiB, [dom("z1", 2, 2 * GiB),
                                dom("z2", 2, 2 * GiB)]),
        host("w", 8, 16 * GiB, []),
    ]}
    rc, lines = plan_of(inv)
    want = [
        "power-down candidate: w (no running domains)",
        "keep host z: receives domains from x",
        "move x1 (1 vCPU, 1024 MiB, FULL_NOTED 100 s) x -> z (then 5/8 "
        "vCPUs, 5120/15360 MiB)",
        "power-down candidate: x (its only domain moves)",
        "move y1 (1 vCPU, 2048 MiB, FULL_NOTED 100 s) y -> z (then 6/8 "
        "vCPUs, 7168/15360 MiB)",
        "power-down candidate: y (its only domain moves)",
        "plan: 4 hosts -> 1, 2 migrations",
    ]
    same_lines(lines[5:], want, "idle-only cluster: gathered on the most "
               "loaded host, an empty host powers down without migration")
    ok(rc == 0, "idle-only cluster: exit 0")


def test_never_moved():
    inv = {"taken_unix_ms": T, "hosts": [
        host("a", 64, 256 * GiB, [dom("idle1", 1, 1 * GiB)]),
        host("b", 8, 16 * GiB, [dom("busy", 1, 1 * GiB, state="SHORT"),
                                dom("idle2", 1, 1 * GiB)]),
        host("c", 8, 16 * GiB, [dom("unknown", 1, 1 * GiB, state=None)]),
        host("d", 8, 16 * GiB, [dom("paused", 1, 1 * GiB,
                                    run_state="paused")]),
        host("e", 8, 16 * GiB, [dom("young", 1, 1 * GiB, age_s=5)]),
        host("f", 8, 16 * GiB, [dom("full", 1, 1 * GiB, state="FULL")]),
        host("g", 8, 16 * GiB, [dom("nosince", 1, 1 * GiB,
                                    since_unix_ms=None)]),
    ]}
    rc, lines = plan_of(inv, "--min-idle-s", "10")
    moved = sorted(l.split()[1] for l in lines if l.startswith("move "))
    ok(moved == ["idle1"], "only FULL_NOTED, running, old enough domains "
       "move", "moved: %r" % moved)
    keeps = [l for l in lines if l.startswith("keep host")]
    want = [
        "keep host b: domains that do not move: busy (busy: SHORT)",
        "keep host c: domains that do not move: unknown (unknown: no "
        "urn:sysidle:1 state)",
        "keep host d: domains that do not move: paused (paused)",
        "keep host e: domains that do not move: young (FULL_NOTED 5 s < "
        "10 s)",
        "keep host f: domains that do not move: full (busy: FULL)",
        "keep host g: domains that do not move: nosince (FULL_NOTED since "
        "an unknown time)",
    ]
    same_lines(keeps, want, "busy, unknown, paused, too young: their hosts "
               "stay on, each with its reason")
    ok(lines[-1] == "plan: 7 hosts -> 6, 1 migration" and rc == 0,
       "never moved: summary", lines[-1])
    # without --min-idle-s, the young one and the one without a time move
    rc, lines = plan_of(inv)
    moved = sorted(l.split()[1] for l in lines if l.startswith("move "))
    ok(moved == ["idle1", "nosince", "young"],
       "--min-idle-s 0: any FULL_NOTED domain moves", "moved: %r" % moved)
    # a FULL_NOTED domain next to a busy one stays with it
    ok(not any(l.startswith("move idle2") for l in lines),
       "an idle domain on a host that stays on does not move")


def test_name_clash():
    inv = {"taken_unix_ms": T, "hosts": [
        host("a", 8, 16 * GiB, [dom("db", 1, 1 * GiB, state="NOT")],
             inactive_domains=[{"name": "web", "uuid": "u-other"}]),
        host("b", 8, 16 * GiB, [dom("db2", 1, 1 * GiB, state="NOT")],
             inactive_domains=[{"name": "web", "uuid": "u-web"}]),
        host("c", 8, 16 * GiB, [dom("web", 1, 1 * GiB, uuid="u-web")]),
    ]}
    rc, lines = plan_of(inv)
    want = ["move web (1 vCPU, 1024 MiB, FULL_NOTED 100 s) c -> b (then "
            "2/8 vCPUs, 2048/15360 MiB)"]
    same_lines([l for l in lines if l.startswith("move")], want,
               "a name taken on a host by another domain: not there; its "
               "own definition: fine")
    inv["hosts"][1]["inactive_domains"] = []
    inv["hosts"][1]["domains"].append(dom("web", 1, 1 * GiB, state="NOT",
                                          uuid="u-b"))
    rc, lines = plan_of(inv)
    want = ["cannot empty c: web (1 vCPU, 1024 MiB, FULL_NOTED 100 s) fits "
            "no host (a has a domain named web defined; b has a running "
            "domain named web); it stays on"]
    same_lines([l for l in lines if l.startswith("cannot")], want,
               "name clashes are given as the reason")
    ok(rc == P.EXIT_NOTHING, "no host emptied: exit 3", "rc %d" % rc)


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


def test_infeasible():
    # busy domains already above the cpu budget
    rc, lines = plan_of(CLUSTER4, "--cpu-budget", "3")
    inf = [l for l in lines if l.startswith("infeasible")]
    want = [
        "infeasible budget: host qemu+ssh://a/system carries 4 vCPUs > cpu "
        "budget 3 (its domains do not move)",
        "infeasible budget: host qemu+ssh://c/system carries 4 vCPUs > cpu "
        "budget 3 (its idle domains fit on no other host)",
        "infeasible budget: host qemu+ssh://d/system carries 8 vCPUs > cpu "
        "budget 3 (its idle domains fit on no other host)",
    ]
    same_lines(inf, want, "infeasible cpu budget: each host over it, with "
               "why")
    ok(rc == P.EXIT_INFEASIBLE, "infeasible budget: exit 4", "rc %d" % rc)
    ok(lines[-1] == "plan: infeasible budget: 3 hosts over budget; no "
       "migration will be made (4 hosts -> 4, 0 migrations otherwise)",
       "infeasible budget: the summary says so", lines[-1])
    # memory: the reserve leaves less than the busy domain's memory
    inv = {"taken_unix_ms": T, "hosts": [
        host("a", 8, 4 * GiB, [dom("db", 1, 3 * GiB, state="NOT")]),
        host("b", 8, 4 * GiB, [dom("web", 1, 512 * MiB)]),
    ]}
    rc, lines = plan_of(inv, "--mem-reserve", "2048")
    same_lines(lines[-2:], [
        "infeasible budget: host a carries 3072 MiB > memory budget 2048 "
        "MiB (its domains do not move)",
        "plan: infeasible budget: 1 host over budget; no migration will be "
        "made (2 hosts -> 2, 0 migrations otherwise)"],
        "infeasible memory budget: message and summary")
    ok(rc == 4, "infeasible memory budget: exit 4", "rc %d" % rc)
    rc, lines = plan_of(inv, "--mem-budget", "1000", "--cpu-budget", "0.5")
    ok(rc == 4 and "infeasible budget: host a carries 1 vCPUs > cpu budget "
       "0.5 and 3072 MiB > memory budget 1000 MiB (its domains do not "
       "move)" in lines, "both budgets exceeded: one line names both",
       "\n".join(lines))
    # --apply on an infeasible plan does nothing (no libvirt needed)
    p = P.make_plan(inv, P.Budget(mem_reserve_mib=2048))
    ok(p.status == P.EXIT_INFEASIBLE and len(p.infeasible) == 1,
       "make_plan: status and infeasible list")


def test_empty_and_single():
    rc, lines = plan_of({"hosts": []})
    same_lines(lines, [BUDGET_LINE,
                       "plan: 0 hosts -> 0, no migrations (nothing to do)"],
               "empty cluster: nothing to do")
    ok(rc == P.EXIT_NOTHING, "empty cluster: exit 3", "rc %d" % rc)
    inv = {"taken_unix_ms": T, "hosts": [
        host("solo", 4, 8 * GiB, [dom("a", 1, 1 * GiB),
                                  dom("b", 1, 2 * GiB)])]}
    rc, lines = plan_of(inv)
    same_lines(lines[2:], [
        "cannot empty solo: b (1 vCPU, 2048 MiB, FULL_NOTED 100 s) fits no "
        "host (no other host); it stays on",
        "plan: 1 host -> 1, no migrations (nothing to do)"],
        "single host with idle domains: nowhere to go")
    ok(rc == P.EXIT_NOTHING, "single host: exit 3", "rc %d" % rc)
    rc, lines = plan_of({"hosts": [host("solo", 4, 8 * GiB, [])]})
    ok(rc == 0 and lines[-2:] == [
        "power-down candidate: solo (no running domains)",
        "plan: 1 host -> 0, 0 migrations"],
        "single host without domains: a power-down candidate",
        "\n".join(lines))


def test_weights():
    inv = {"taken_unix_ms": T, "hosts": [
        host("a", 4, 16 * GiB, [dom("db", 1, 1 * GiB, state="NOT"),
                                dom("i0", 2, 1 * GiB)]),
        host("b", 4, 16 * GiB, [dom("i1", 3, 1 * GiB),
                                dom("i2", 1, 1 * GiB + 512)]),
    ]}
    rc, lines = plan_of(inv)
    ok(rc == 3 and "cannot empty b: i1 (3 vCPUs, 1024 MiB, FULL_NOTED 100 "
       "s) fits no host (a has 0 vCPUs, 12287.5 MiB left); it stays on" in
       lines, "weight 1: b's 4 vCPUs do not fit in a's 1 left",
       "\n".join(lines))
    rc, lines = plan_of(inv, "--idle-vcpu-weight", "0.25",
                        "--cpu-overcommit", "1.5")
    same_lines(lines[1:2] + [l for l in lines if l.startswith("move")], [
        "host a: 4 CPUs, 16384 MiB; budget 6 vCPUs, 15360 MiB; carries "
        "1.5 vCPUs, 2048 MiB in 2 running domains (1 fully idle)",
        "move i2 (1 vCPU, 1024.5 MiB, FULL_NOTED 100 s) b -> a (then 1.75/6 "
        "vCPUs, 3072.5/15360 MiB)",
        "move i1 (3 vCPUs, 1024 MiB, FULL_NOTED 100 s) b -> a (then 2.5/6 "
        "vCPUs, 4096.5/15360 MiB)"],
        "--idle-vcpu-weight 0.25 --cpu-overcommit 1.5: exact fractions")
    ok(lines[0].startswith("budget per host: vCPUs <= host CPUs x 1.5 (idle "
                           "vCPUs weigh 0.25)"), "the budget line tells the "
       "weights", lines[0])


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


# --- libvirt: the test driver ----------------------------------------------

NODE = """<node xmlns:test="http://libvirt.org/schemas/domain/test/1.0">
  <cpu><mhz>2000</mhz><model>i686</model><active>8</active><total>8</total>
    <nodes>1</nodes><sockets>1</sockets><cores>8</cores><threads>1</threads>
  </cpu>
  <memory>16777216</memory>
%s</node>
"""


def node_dom(name, uuid, vcpus, mib, state=None, since=None, runstate=None,
             transient=False):
    meta = ""
    if state is not None:
        meta = ('<metadata><s:state xmlns:s="urn:sysidle:1" name="%s" '
                'num="4" since_unix_ms="%d"/></metadata>' % (state, since))
    rs = "" if runstate is None else "<test:runstate>%d</test:runstate>" % \
        runstate
    if transient:
        rs += "<test:transient/>"
    return ("""  <domain type="test"><name>%s</name><uuid>%s</uuid>%s
    <memory unit="MiB">%d</memory><currentMemory unit="MiB">%d</currentMemory>
    <vcpu>%d</vcpu>%s<os><type>hvm</type></os></domain>
""" % (name, uuid, rs, mib, mib, vcpus, meta))


def test_libvirt():
    if not HAVE_LIBVIRT:
        for d in ("libvirt inventory plan", "libvirt inventory dump",
                  "--apply failure"):
            skip(d, "no libvirt binding for %s" % sys.executable)
        return
    since = 1767323045678
    files = {
        "a": [node_dom("db1", "11111111-0000-0000-0000-000000000001", 4,
                       4096, "NOT", since),
              node_dom("old", "11111111-0000-0000-0000-000000000002", 1,
                       512, runstate=5)],
        "b": [node_dom("web1", "22222222-0000-0000-0000-000000000001", 2,
                       1024, "FULL_NOTED", since),
              node_dom("web2", "22222222-0000-0000-0000-000000000002", 1,
                       2048, "FULL_NOTED", since)],
        "c": [node_dom("batch", "33333333-0000-0000-0000-000000000001", 2,
                       2048, "FULL_NOTED", since),
              node_dom("nometa", "33333333-0000-0000-0000-000000000002", 1,
                       512)],
    }
    uris = []
    for h in sorted(files):
        path = os.path.join(TMP, h + ".xml")
        with open(path, "w") as f:
            f.write(NODE % "".join(files[h]))
        uris.append("test://" + path)
    ua, ub, uc = uris
    hosts = ",".join([uc, ua, ub])     # order given does not matter
    dump = os.path.join(TMP, "dump.json")
    rc, lines = cli(["--hosts", hosts, "--dump-inventory", dump])
    norm = [re.sub(r"FULL_NOTED \d+ s", "FULL_NOTED N s", l) for l in lines]
    hl = "8 CPUs, 16384 MiB; budget 8 vCPUs, 15360 MiB; carries"
    want = [
        BUDGET_LINE,
        "host %s: %s 4 vCPUs, 4096 MiB in 1 running domain (0 fully idle)"
        % (ua, hl),
        "host %s: %s 3 vCPUs, 3072 MiB in 2 running domains (2 fully idle)"
        % (ub, hl),
        "host %s: %s 3 vCPUs, 2560 MiB in 2 running domains (1 fully idle)"
        % (uc, hl),
        "keep host %s: domains that do not move: db1 (busy: NOT)" % ua,
        "keep host %s: domains that do not move: nometa (unknown: no "
        "urn:sysidle:1 state)" % uc,
        "move web2 (1 vCPU, 2048 MiB, FULL_NOTED N s) %s -> %s (then 5/8 "
        "vCPUs, 6144/15360 MiB)" % (ub, ua),
        "move web1 (2 vCPUs, 1024 MiB, FULL_NOTED N s) %s -> %s (then 7/8 "
        "vCPUs, 7168/15360 MiB)" % (ub, ua),
        "power-down candidate: %s (all 2 domains move)" % ub,
        "plan: 3 hosts -> 2, 2 migrations",
    ]
    same_lines(norm, want, "--hosts with 3 test-driver hosts: the plan")
    ok(rc == 0, "--hosts: exit 0", "rc %d" % rc)
    try:
        with open(dump) as f:
            inv = json.load(f)
        a = [h for h in inv["hosts"] if h["uri"] == ua][0]
        b = [h for h in inv["hosts"] if h["uri"] == ub][0]
        good = (a["cpus"] == 8 and a["memory_kib"] == 16 * GiB and
                a["inactive_domains"] == [
                    {"name": "old",
                     "uuid": "11111111-0000-0000-0000-000000000002"}] and
                b["domains"][0] == {
                    "name": "web1", "uuid":
                    "22222222-0000-0000-0000-000000000001", "vcpus": 2,
                    "memory_kib": 1024 * 1024, "run_state": "running",
                    "state": "FULL_NOTED", "since_unix_ms": since})
        ok(good, "--dump-inventory: host info, domains, metadata, inactive "
           "domains", json.dumps(inv, indent=1))
        rc2, again = cli(["--plan-input", dump])
        ok(again == lines and rc2 == rc, "the dumped inventory gives the "
           "same plan through --plan-input", "\n".join(again))
    except (OSError, ValueError, KeyError, IndexError) as e:
        ok(False, "--dump-inventory readable", str(e))
        ok(False, "the dumped inventory gives the same plan")

    rc, lines = cli(["--hosts", hosts, "--apply"])
    tail = lines[len(want):]
    want_tail = [
        "migration web2 %s -> %s not done: failed: argument unsupported: "
        "p2p migration is not supported by the source host" % (ub, ua),
        "host %s not emptied, it stays on: 0 domains moved (none), web2 "
        "not done, 1 move not attempted (web1)" % ub,
        "apply: 0 of 2 migrations done, 1 failed, 1 not attempted; ready to "
        "power down: none; not emptied: %s" % ub,
    ]
    same_lines(tail, want_tail, "--apply: the migration failure is reported, "
               "the host's other move not attempted")
    ok(rc == P.EXIT_APPLY_FAILED, "--apply failure: exit 5", "rc %d" % rc)

    # a domain that wakes between the plan and its move is not migrated
    from sysidle_consolidate import plan_libvirt as PL
    inv = PL.inventory([ua, ub, uc])
    p = P.make_plan(inv, P.Budget())
    path_b = ub[len("test://"):]
    with open(path_b) as f:
        text = f.read()
    with open(path_b, "w") as f:
        f.write(text.replace('name="FULL_NOTED"', 'name="NOT"'))
    out = []
    rc = PL.apply_plan(p, out.append)
    ok(rc == P.EXIT_APPLY_FAILED and out[0] ==
       "migration web2 %s -> %s not done: no longer fully idle (NOT)" %
       (ub, ua), "--apply: a domain no longer idle is not migrated",
       "\n".join(out))

    rc, lines = cli(["--hosts", hosts, "--apply", "--cpu-budget", "3"])
    ok(rc == P.EXIT_INFEASIBLE and lines[-1] ==
       "apply: nothing done (infeasible budget)" and
       not any(l.startswith("migrat") for l in lines),
       "--apply with an infeasible budget: nothing attempted, exit 4",
       "\n".join(lines))

    test_apply_fake_migration(files, since)

    rc, lines = cli(["--hosts", ua + ",test://" +
                     os.path.join(TMP, "nothere.xml")])
    ok(rc == P.EXIT_INVENTORY and len(lines) == 1 and
       lines[0].startswith("error: inventory: test://"),
       "--hosts with an unreadable host: exit 6", "\n".join(lines))
    rc, lines = cli(["--hosts", ua + "," + ua])
    ok(rc == P.EXIT_INVENTORY and lines == [
        "error: inventory: host given twice: " + ua],
       "--hosts with a URI twice: exit 6", "\n".join(lines))


def test_apply_fake_migration(files, since):
    """--apply's success path, its flags and a failure in the middle: the
    test driver's domains, with migrateToURI3 replaced by a recorder."""
    import types
    import libvirt
    from sysidle_consolidate import plan_libvirt as PL
    files = dict(files)
    files["d"] = [node_dom("cron", "44444444-0000-0000-0000-000000000001", 1,
                           256, "FULL_NOTED", since, transient=True)]
    uris = []
    for h in sorted(files):
        path = os.path.join(TMP, "f" + h + ".xml")
        with open(path, "w") as f:
            f.write(NODE % "".join(files[h]))
        uris.append("test://" + path)
    ua, ub, uc, ud = uris
    calls = []
    fail = set()

    class Dom:
        def __init__(self, real):
            self.real = real

        def __getattr__(self, name):
            return getattr(self.real, name)

        def migrateToURI3(self, uri, params, flags):
            calls.append((self.real.name(), uri, flags))
            if self.real.name() in fail:
                raise libvirt.libvirtError("injected failure")

    class Conn:
        def __init__(self, real):
            self.real = real

        def __getattr__(self, name):
            return getattr(self.real, name)

        def lookupByUUIDString(self, uuid):
            return Dom(self.real.lookupByUUIDString(uuid))

    fake = types.ModuleType("libvirt")
    fake.__dict__.update(libvirt.__dict__)
    fake.open = lambda uri: Conn(libvirt.open(uri))
    real = PL.libvirt
    PL.libvirt = fake
    try:
        rc, lines = cli(["--hosts", ",".join(uris), "--apply"])
        moves = [l for l in lines if l.startswith("move ")]
        applied = [re.sub(r" \([0-9.]+ s\)$", "", l) for l in lines
                   if l.startswith("migrated ")]
        live = libvirt.VIR_MIGRATE_LIVE | libvirt.VIR_MIGRATE_PEER2PEER
        keep_def = libvirt.VIR_MIGRATE_PERSIST_DEST | \
            libvirt.VIR_MIGRATE_UNDEFINE_SOURCE
        ok(rc == 0 and len(moves) == 3 and applied == [
            "migrated cron %s -> %s" % (ud, ua),
            "migrated web2 %s -> %s" % (ub, ua),
            "migrated web1 %s -> %s" % (ub, ua)] and lines[-1] ==
           "apply: 3 of 3 migrations done; ready to power down: %s, %s" %
           (ud, ub), "--apply (migration faked): every move in plan order, "
           "exit 0", "\n".join(lines))
        ok(calls == [("cron", ua, live), ("web2", ua, live | keep_def),
                     ("web1", ua, live | keep_def)],
           "--apply flags: live peer to peer; the definition moves with a "
           "persistent domain only", repr(calls))
        del calls[:]
        fail.add("web2")
        rc, lines = cli(["--hosts", ",".join(uris), "--apply"])
        tail = [re.sub(r" \([0-9.]+ s\)$", "", l) for l in lines[-5:-1]]
        same_lines(tail, [
            "plan: 4 hosts -> 2, 3 migrations",
            "migrated cron %s -> %s" % (ud, ua),
            "migration web2 %s -> %s not done: failed: injected failure"
            % (ub, ua),
            "host %s not emptied, it stays on: 0 domains moved (none), "
            "web2 not done, 1 move not attempted (web1)" % ub],
            "--apply with a failure: reported, the rest of that host "
            "skipped")
        ok(lines[-1] == "apply: 1 of 3 migrations done, 1 failed, 1 not "
           "attempted; ready to power down: %s; not emptied: %s" % (ud, ub)
           and rc == P.EXIT_APPLY_FAILED and [c[0] for c in calls] ==
           ["cron", "web2"], "--apply with a failure: summary, exit 5, "
           "web1 never tried", "\n".join(lines) + "\n" + repr(calls))
    finally:
        PL.libvirt = real


def main():
    try:
        test_cluster4()
        test_cannot_empty()
        test_receiving_candidate()
        test_never_moved()
        test_name_clash()
        test_determinism()
        test_infeasible()
        test_empty_and_single()
        test_weights()
        test_errors()
        test_libvirt()
    finally:
        shutil.rmtree(TMP, ignore_errors=True)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
