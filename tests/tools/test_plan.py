#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""Tests of sysidle-consolidate's migration plan
(tools/sysidle_consolidate/plan.py): its rules on fixed JSON inventories
with their expected plans, line by line (hosts emptied, a domain that
fits nowhere, a receiving host that is also a candidate, busy, unknown
and paused domains never moved, name clashes, the weights), infeasible
CPU and memory budgets, an empty cluster and a single host.

usage: test_plan.py [TOOLS_DIR]    (default: ../../tools from this file)
TAP on stdout; exit 0 when every test passes.
"""
import shutil
import sys

from plan_inventory import (
    BUDGET_LINE, CLUSTER4, CLUSTER4_PLAN, P, T, TMP, GiB, MiB, dom, host,
    plan_of, same_lines)
from tap import check as ok, finish


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


def main():
    try:
        test_cluster4()
        test_cannot_empty()
        test_receiving_candidate()
        test_never_moved()
        test_name_clash()
        test_infeasible()
        test_empty_and_single()
        test_weights()
    finally:
        shutil.rmtree(TMP, ignore_errors=True)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
