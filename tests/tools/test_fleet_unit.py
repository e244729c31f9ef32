#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""Tests of sysidle-fleet's parts that need no libvirt
(tools/sysidle_consolidate/fleet/): the rules (decide.py) on made-up hosts
and clocks, the settling rule after a failed migration (resolve.py), the
--host and --migrate-uri checks (uri.py), the host hooks' runner
(hooks.py), the metrics and --status (outputs.py, status.py), and the
command line's errors.

usage: test_fleet_unit.py TOOLS_DIR [BUILD_SCRIPT]
TAP on stdout; exit 0 when every test passes."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from fractions import Fraction

HERE = os.path.dirname(os.path.abspath(__file__))
TOOLS = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                        os.path.join(HERE, "..", "..", "tools"))
sys.path.insert(0, TOOLS)
sys.path.insert(0, os.path.join(HERE, ".."))
from tap import check as ok, finish  # noqa: E402

from sysidle_consolidate.fleet import decide, hooks, resolve  # noqa: E402
from sysidle_consolidate.fleet import uri as U  # noqa: E402
from sysidle_consolidate.fleet.model import (  # noqa: E402
    Dom, Host, Snapshot, STANDBY, UP, WAKING, LOST)
from sysidle_consolidate.planner import Budget  # noqa: E402

TMP = tempfile.mkdtemp(prefix="test-fleet-unit-")
NOW_MS = 1_800_000_000_000
GIB = 1 << 20   # KiB


def dom(name, vcpus=2, state="FULL_NOTED", idle_s=100.0, run="running",
        mem_kib=131072):
    return Dom(name, "uuid-" + name, vcpus, mem_kib, run, None, state,
               None if state is None else NOW_MS - int(idle_s * 1000),
               None, True)


def host(name, doms=(), state=UP, cpus=2, mem_kib=24 * GIB, inactive=()):
    h = Host(name, "qemu+ssh://%s/system" % name, "qemu+ssh://%s/system" %
             name)
    h.state = state
    h.since = 0.0
    h.snap = Snapshot("hu-" + name, name, cpus, mem_kib, doms, inactive,
                      NOW_MS, 0.0) if state == UP else None
    return h


def knobs(**kw):
    b = Budget(cpu_budget=kw.pop("cpu", 8), idle_vcpu_weight=Fraction(1, 4),
               mem_reserve_mib=0)
    return decide.Knobs(b, **dict(dict(settle_s=60, unpack_after_s=5,
                                       vm_cooldown_s=600, host_cooldown_s=600,
                                       standby_after_s=30, min_active=1), **kw))


def observed(hosts, now=1000.0, before=None):
    m = decide.Memory()
    if before is not None:
        m.observe(hosts, before)
    m.observe(hosts, now)
    return m


# --- decide: hysteresis and load --------------------------------------------
def test_hysteresis():
    k = knobs()
    hs = [host("a", [dom("w", state="NOT")])]
    m = decide.Memory()
    m.observe(hs, 100.0)
    d = hs[0].snap.domains[0]
    ok(not decide.counts_busy(d, m, 104.9, k),
       "a domain out of FULL_NOTED for 4.9 s (< --unpack-after 5 s) does "
       "not count busy")
    ok(decide.counts_busy(d, m, 105.0, k),
       "the same domain counts busy at 5 s")
    ok(decide.weight(d, m, 104.0, k) == Fraction(1, 2) and
       decide.weight(d, m, 106.0, k) == 2,
       "its 2 vCPUs weigh 0.5 before, 2 after")
    hs2 = [host("a", [dom("w")])]
    m.observe(hs2, 106.0)
    ok("uuid-w" not in m.busy_since, "back in FULL_NOTED: no busy time "
       "kept")
    m.observe(hs, 107.0)
    ok(not decide.counts_busy(d, m, 111.0, k),
       "out again: the busy time starts over (4 s < 5 s)")
    unknown = dom("u", state=None)
    m.observe([host("a", [unknown])], 0.0)
    ok(decide.counts_busy(unknown, m, 5.0, k),
       "a domain without a trusted state counts busy after --unpack-after")
    m = decide.Memory()
    busy = dom("b", state="NOT")
    m.observe([host("a", [busy]), host("c", [])], 0.0)
    m.observe([host("a", []), host("c", [])], 9.0)      # migrating: unseen
    m.observe([host("a", []), host("c", [busy])], 10.0)
    ok(decide.counts_busy(busy, m, 10.0, k),
       "a busy domain that migrated counts busy where it arrives at once "
       "(its busy time kept while unseen)")
    m.observe([host("a", []), host("c", [])], 10.0 + decide.FORGET_S + 1)
    ok("uuid-b" not in m.busy_since, "forgotten FORGET_S after it was last "
       "seen")
    paused = dom("p", run="paused")
    ok(decide.idle(paused), "a paused FULL_NOTED domain is fully idle (the "
       "consolidator's suspend)")


# --- decide: unpack ---------------------------------------------------------
def test_unpack():
    k = knobs(cpu=6)
    busy = [dom("b%d" % i, state="NOT") for i in range(3)]
    idle = [dom("i%d" % i) for i in range(4)]
    a = host("a", busy + idle)
    b = host("b", [dom("x")])
    c = host("c", [])
    hs = [a, b, c]
    m = observed(hs, 100.0, before=0.0)
    u = decide.unpack(hs, m, 100.0, k)
    # a: 3 busy x 2 + 4 idle x 0.5 = 8 > 6: one busy move brings it to 6
    ok(len(u.moves) == 1 and u.moves[0].src == "a" and
       u.moves[0].why == "unpack", "a host at 8/6 vCPUs moves one busy "
       "domain off (%s)" % [x.line for x in u.moves])
    ok(u.moves[0].dst == "c", "to the up host with the most room (c: 6, b: "
       "5.5)")
    ok(u.moves[0].name == "b0", "the largest, then by name (b0)")
    ok(u.wake is None and not u.stuck, "no wake, nothing stuck")
    u = decide.unpack(hs, observed(hs, 3.0, before=0.0), 3.0, k)
    ok(not u.moves and not u.over, "the same domains busy for 3 s only: "
       "not over budget, nothing moves")
    # no room anywhere but a standby host: it is woken
    k2 = knobs(cpu=2)
    a2 = host("a", [dom("b0", state="NOT"), dom("b1", state="NOT")])
    s1, s2 = host("s2", state=STANDBY), host("s1", state=STANDBY)
    hs = [a2, s1, s2]
    u = decide.unpack(hs, observed(hs, 100.0, 0.0), 100.0, k2)
    ok(not u.moves and u.wake == "s1", "no room on the up hosts: the first "
       "standby host by name is woken (%s)" % u.wake)
    hs = [a2, host("w", state=WAKING)]
    u = decide.unpack(hs, observed(hs, 100.0, 0.0), 100.0, k2)
    ok(u.wake is None and u.stuck and "waiting for w" in u.stuck[0],
       "a host already waking: no second wake (%s)" % u.stuck)
    hs = [a2]
    u = decide.unpack(hs, observed(hs, 100.0, 0.0), 100.0, k2)
    ok(u.wake is None and u.stuck and "no host in standby" in u.stuck[0],
       "no standby host: said so (%s)" % u.stuck)
    # unknown domains are counted, never chosen
    a3 = host("a", [dom("u0", state=None), dom("u1", state=None)])
    hs = [a3, host("b", [])]
    u = decide.unpack(hs, observed(hs, 100.0, 0.0), 100.0, k2)
    ok(not u.moves and u.stuck and "no known busy domain" in u.stuck[0],
       "over budget with domains of unknown state only: nothing moves (%s)"
       % u.stuck)
    # a clash of name on the destination
    a4 = host("a", [dom("b0", state="NOT"), dom("b1", state="NOT")])
    b4 = host("b", [], inactive=[("b0", "other-uuid"), ("b1", "uuid-b1")])
    hs = [a4, b4]
    u = decide.unpack(hs, observed(hs, 100.0, 0.0), 100.0, k2)
    ok(not u.moves, "a destination with a domain of the same name defined "
       "takes none (%s)" % [x.line for x in u.moves])
    # moving domains are not chosen again
    hs = [host("a", busy + idle), host("c", [])]
    m = observed(hs, 100.0, 0.0)
    u = decide.unpack(hs, m, 100.0, k, moving={"uuid-b0"})
    ok([x.name for x in u.moves] == ["b1"], "a domain migrating now is not "
       "chosen again (b1 instead of b0)")
    hs = [host("a", busy + idle), host("l", state=LOST)]
    u = decide.unpack(hs, observed(hs, 100.0, 0.0), 100.0, k)
    ok(not u.moves and u.wake is None, "a lost host is no destination")


# --- decide: pack -----------------------------------------------------------
def test_pack():
    k = knobs(cpu=8)
    hs = [host("a", [dom("w1"), dom("w2")]), host("b", [dom("w3")]),
          host("c", [dom("w4", idle_s=10)])]
    m = observed(hs, 1000.0)
    p = decide.pack(hs, m, 1000.0, k, NOW_MS)
    moves = [(x.name, x.src, x.dst) for x in p.moves]
    ok(moves == [("w3", "b", "c"), ("w1", "a", "c"), ("w2", "a", "c")],
       "c stays on (w4 idle 10 s < --settle 60 s): b, then a, emptied onto "
       "it (%s)" % moves)
    ok(any("w4 (FULL_NOTED 10 s < 60 s)" in ln for ln in p.lines),
       "the settle is the planner's minimum idle time")

    def moved(p):
        return sorted(x.name for x in p.moves)
    m.migrated_at["uuid-w3"] = 900.0
    p = decide.pack(hs, m, 1000.0, k, NOW_MS)
    ok("w3" not in moved(p) and any(
        "w3 (migrated 100 s ago, --vm-cooldown 600 s)" in ln
        for ln in p.lines),
       "a domain migrated 100 s ago is held (--vm-cooldown): %s" % moved(p))
    m.migrated_at.clear()
    m.woken_at["b"] = 990.0
    p = decide.pack(hs, m, 1000.0, k, NOW_MS)
    ok("w3" not in moved(p) and any("its host woke 10 s ago" in ln
                                    for ln in p.lines),
       "the domains of a host woken 10 s ago are held (--host-cooldown): %s"
       % moved(p))
    m.woken_at.clear()
    p = decide.pack(hs, m, 1000.0, k, NOW_MS, moving={"uuid-w3"})
    ok("w3" not in moved(p) and any("w3 (migrating)" in ln
                                    for ln in p.lines),
       "a domain migrating now is held: %s" % moved(p))
    ok(decide.pack([hs[0]], m, 1000.0, k, NOW_MS) is None,
       "one host up: no plan")
    hs2 = [host("a", [dom("w1")]), host("b", [dom("w3")]),
           host("s", state=STANDBY)]
    p = decide.pack(hs2, observed(hs2), 1000.0, k, NOW_MS)
    ok("s" not in p.hosts, "a standby host is no destination")


# --- decide: standby --------------------------------------------------------
def test_standby():
    k = knobs()
    hs = [host("a", [dom("w1")]), host("b", []), host("c", [])]
    m = decide.Memory()
    m.observe(hs, 100.0)
    ok(decide.standby(hs, m, 129.0, k) == [], "empty for 29 s (< "
       "--standby-after 30 s): nothing")
    ok(decide.standby(hs, m, 130.0, k) == ["c", "b"],
       "empty for 30 s: b and c (%s)" % decide.standby(hs, m, 130.0, k))
    ok(decide.standby(hs, m, 130.0, k, busy_hosts={"c"}) == ["b"],
       "a host a hook or migration runs on is left")
    m.woken_at["b"] = 120.0
    ok(decide.standby(hs, m, 130.0, k) == ["c"],
       "a host woken 10 s ago stays up (--host-cooldown)")
    hs = [host("b", []), host("c", [])]
    m = decide.Memory()
    m.observe(hs, 100.0)
    ok(decide.standby(hs, m, 200.0, k) == ["c"],
       "two empty hosts, --min-active-hosts 1: one stays up")
    ok(decide.standby(hs, m, 200.0, knobs(min_active=2)) == [],
       "--min-active-hosts 2: both stay up")
    hs = [host("a", [dom("w1")]), host("b", []), host("w", state=WAKING)]
    m = decide.Memory()
    m.observe(hs, 100.0)
    ok(decide.standby(hs, m, 200.0, knobs(min_active=2)) == ["b"],
       "a waking host counts as up for --min-active-hosts")


def test_next_due():
    k = knobs()
    hs = [host("a", [dom("w1", idle_s=10)]), host("b", [])]
    m = decide.Memory()
    m.observe(hs, 100.0)
    due = decide.next_due(hs, m, 100.0, k, NOW_MS)
    ok(abs(due - 130.0) < 1e-6, "next due: b's --standby-after (130 s) "
       "before w1's settle (150 s): %s" % due)
    m.empty_since.clear()
    due = decide.next_due(hs, m, 100.0, k, NOW_MS)
    ok(abs(due - 150.0) < 1e-3, "then w1 settled at 150 s: %s" % due)
    ok(decide.next_due([host("a", [dom("w", idle_s=100)])], decide.Memory(),
                       100.0, k, NOW_MS) is None,
       "nothing due: None (no wake-up)")


# --- resolve ----------------------------------------------------------------
def side(active=True, running=True, reason=None, persistent=True, job=False):
    return resolve.Side(True, active, running, reason, persistent, job)


def test_resolve():
    A = resolve.ABSENT
    cases = [
        ("no answer from a side", None, side(), True, "waiting", []),
        ("a job on the source", side(job=True), A, True, "waiting", []),
        ("an incoming job on the destination, running on the source "
         "without one", side(), side(running=False, reason="migration",
                                     persistent=False, job=True), True,
         "stayed", [("destroy", "dst")]),
        ("an incoming job on the destination, the source gone",
         A, side(running=False, reason="migration", job=True), True,
         "waiting", []),
        ("on the destination only, definitions right", A, side(), True,
         "moved", []),
        ("on the source only", side(), A, True, "stayed", []),
        ("running on the destination, a paused transient leftover on the "
         "source", side(running=False, reason="migration", persistent=False),
         side(), True, "moved", [("destroy", "src")]),
        ("running on the destination, a persistent paused leftover on the "
         "source", side(running=False, reason="migration"), side(), True,
         "moved", [("destroy", "src"), ("undefine", "src")]),
        ("running on the source, an incoming copy paused on the destination",
         side(), side(running=False, reason="migration", persistent=False),
         True, "stayed", [("destroy", "dst")]),
        ("both paused: the source is the live one, resumed",
         side(running=False, reason="migration"),
         side(running=False, reason="migration", persistent=False), True,
         "stayed", [("destroy", "dst"), ("resume", "src")]),
        ("paused by its user: not resumed",
         side(running=False, reason="user"), A, True, "stayed", []),
        ("moved, its definition left on the source", side(active=False),
         side(), True, "moved", [("undefine", "src")]),
        ("moved, no definition on the destination", A,
         side(persistent=False), True, "moved", [("define", "dst")]),
        ("a transient domain moved", A, side(persistent=False), False,
         "moved", []),
        ("running on both", side(), side(), True, "conflict", []),
        ("running on neither", side(active=False, running=False), A, True,
         "lost", []),
    ]
    for what, s, d, pers, want, actions in cases:
        got = resolve.decide(s, d, pers)
        ok(got == (want, actions), "settle: %s -> %s %s (%s)" %
           (what, want, actions, got))


# --- uri ----------------------------------------------------------------------
def test_uri():
    good = [
        ("qemu+ssh://h1/system", "qemu+ssh://h1/system"),
        ("qemu+tls://h1.example.org/system", "qemu+tls://h1.example.org/system"),
        ("qemu:///system?socket=/run/x/sock",
         "qemu+unix:///system?socket=/run/x/sock"),
        ("qemu+unix:///system?socket=/run/x/sock",
         "qemu+unix:///system?socket=/run/x/sock"),
    ]
    for u, want in good:
        ok(U.dest_uri(u) == want, "dest_uri %s -> %s" % (u, U.dest_uri(u)))
    bad = [("qemu:///system", "names the local libvirtd"),
           ("test:///default", "cannot live-migrate"),
           ("qemu+ssh://localhost/system", "names this machine"),
           ("qemu+ssh://h1", "no path"), ("h1", "not a libvirt URI"),
           ("qemu+tcp:///system?socket=/x", "a socket with transport")]
    for u, want in bad:
        try:
            U.dest_uri(u)
            ok(False, "dest_uri %s refused" % u)
        except U.BadHost as e:
            ok(want in str(e) and u in str(e),
               "dest_uri %s refused: %s" % (u, e))
    hs = U.parse_hosts(["a=qemu+ssh://a/system", "b=qemu+ssh://b/system"],
                       ["tcp://10.0.0.9", "b=tcp://10.0.0.2:49152"])
    ok([h[3] for h in hs] == ["tcp://10.0.0.9", "tcp://10.0.0.2:49152"],
       "--migrate-uri: for every host, and per host (%s)" % hs)
    for hosts_, mig, want in [
            (["a=qemu+ssh://a/system", "a=qemu+ssh://b/system"], [],
             "given twice"),
            (["a=qemu+ssh://a/system", "b=qemu+ssh://a/system"], [],
             "given twice"),
            (["a/b=qemu+ssh://a/system"], [], "is not 1 to 63"),
            (["=qemu+ssh://a/system"], [], "give NAME=URI"),
            (["a=qemu+ssh://a/system"], ["c=tcp://x"], "no --host named c"),
            (["a=qemu+ssh://a/system"], ["http://x"], "not a migration URI"),
            (["a=qemu+ssh://a/system"], ["tcp://"], "no address")]:
        try:
            U.parse_hosts(hosts_, mig)
            ok(False, "%s %s refused" % (hosts_, mig))
        except U.BadHost as e:
            ok(want in str(e), "%s %s refused: %s" % (hosts_, mig, e))


# --- hooks --------------------------------------------------------------------
def write_hook(path, body):
    with open(path, "w") as f:
        f.write("#!/bin/sh\n" + body)
    os.chmod(path, 0o755)


def test_hooks():
    d = os.path.join(TMP, "hooks")
    os.makedirs(os.path.join(d, "host.d"))
    log = os.path.join(TMP, "hooks.log")
    write_hook(os.path.join(d, "host"),
               'echo "host $* $(cat)" >> %s\n' % log)
    write_hook(os.path.join(d, "host.d", "20-b"), 'echo "b $*" >> %s\n' % log)
    write_hook(os.path.join(d, "host.d", "10-a"), 'echo "a $*" >> %s\n' % log)
    write_hook(os.path.join(d, "host.d", ".hidden"), "exit 1\n")
    with open(os.path.join(d, "host.d", "30-notexec"), "w") as f:
        f.write("#!/bin/sh\nexit 1\n")
    xml = hooks.host_xml("h1", "qemu+ssh://h1/system", "u-1", "h1.example")
    good, text = hooks.run(d, "h1", "begin", "qemu+ssh://h1/system", xml, 5)
    lines = open(log).read().splitlines()
    ok(good and lines == [
        "host h1 host-standby begin qemu+ssh://h1/system <host><name>h1"
        "</name><uri>qemu+ssh://h1/system</uri><uuid>u-1</uuid><hostname>"
        "h1.example</hostname></host>",
        "a h1 host-standby begin qemu+ssh://h1/system",
        "b h1 host-standby begin qemu+ssh://h1/system"],
       "DIR/host then host.d/* by name (dot files and non-executables "
       "skipped), libvirt-style arguments, the host XML on stdin", lines)
    write_hook(os.path.join(d, "host.d", "15-fail"),
               "echo 'cannot reach the BMC' >&2; exit 4\n")
    good, text = hooks.run(d, "h1", "end", "u", xml, 5)
    ok(not good and "exited 4: cannot reach the BMC" in text,
       "a hook that fails: not done, its stderr said (%s)" % text)
    os.unlink(os.path.join(d, "host.d", "15-fail"))
    pidfile = os.path.join(TMP, "child.pid")
    write_hook(os.path.join(d, "host.d", "15-hang"),
               "sleep 600 & echo $! > %s; wait\n" % pidfile)
    t0 = time.monotonic()
    good, text = hooks.run(d, "h1", "end", "u", xml, 0.5)
    took = time.monotonic() - t0
    child = int(open(pidfile).read())
    time.sleep(0.1)
    gone = not os.path.exists("/proc/%d" % child) or \
        open("/proc/%d/stat" % child).read().split(") ")[1][0] == "Z"
    ok(not good and "killed after --hook-timeout" in text and took < 3 and
       gone, "a hook that hangs is killed at --hook-timeout with its "
       "process group (%.1f s, child gone: %s)" % (took, gone))
    ok(hooks.run(os.path.join(TMP, "none"), "h1", "end", "u", xml, 1) ==
       (True, "no host hook in %s" % os.path.join(TMP, "none")),
       "no hook: done (the host is only reported)")


# --- outputs and --status -------------------------------------------------------
class FakeFleet:
    def __init__(self, hosts):
        from sysidle_consolidate.fleet.daemon import Counters, Options
        self.hosts = {h.name: h for h in hosts}
        self.memory = observed(hosts)
        self.knobs = knobs()
        self.counters = Counters()
        self.migrations = {}
        self.unresolved = {}
        self.opts = Options()


def test_outputs(promtool):
    from sysidle_consolidate.fleet import outputs, status
    hs = [host("a", [dom("w1"), dom("w2", state="NOT")]),
          host("b", state=STANDBY)]
    hs[1].since_unix_ms = int(time.time() * 1000) - 90_000
    f = FakeFleet(hs)
    f.memory.busy_since["uuid-w2"] = time.monotonic()   # busy for 0 s
    f.counters.add(f.counters.migrations, ("pack", "ok"), 3)
    sd = os.path.join(TMP, "state")
    os.makedirs(sd)
    out = outputs.Outputs(os.path.join(TMP, "fleet.prom"), sd, lambda m: 0)
    out.update(f)
    text = open(os.path.join(TMP, "fleet.prom")).read()
    for want in ['sysidle_fleet_up 1', 'sysidle_fleet_hosts{state="up"} 1',
                 'sysidle_fleet_host_standby{host="b"} 1',
                 'sysidle_fleet_host_domains{host="a"} 2',
                 'sysidle_fleet_host_idle_domains{host="a"} 1',
                 'sysidle_fleet_host_load_vcpus{host="a"} 1.0',
                 'sysidle_fleet_migrations_total{reason="pack",result="ok"} 3']:
        ok(want in text, "metrics: %s" % want)
    if promtool:
        r = subprocess.run([promtool, "check", "metrics"], input=text,
                           capture_output=True, text=True)
        ok(r.returncode == 0, "promtool check metrics accepts them",
           r.stdout + r.stderr)
    out.force_down()
    ok(open(os.path.join(TMP, "fleet.prom")).read().endswith(
        "sysidle_fleet_up 0\n") and "host_" not in
       open(os.path.join(TMP, "fleet.prom")).read(),
       "a forced exit leaves sysidle_fleet_up 0 and nothing else")
    buf = []

    class W:
        def write(self, s):
            buf.append(s)

        def flush(self):
            pass
    rc = status.print_status(sd, False, W())
    txt = "".join(buf)
    ok(rc == 0 and "no daemon running" in txt and
       "b     standby  90s" in txt and "a     up" in txt,
       "--status: the hosts, their states and since when", txt)
    buf.clear()
    rc = status.print_status(sd, True, W())
    doc = json.loads("".join(buf))
    ok(rc == 0 and [h["state"] for h in doc["status"]["hosts"]] ==
       ["up", "standby"] and doc["running"] is False, "--status --json")


def run_cli(script, args):
    r = subprocess.run(["/usr/bin/python3", script] + args,
                       capture_output=True, text=True, timeout=60)
    return r.returncode, r.stdout + r.stderr


def test_cli(script):
    for args, rc_want, want in [
            (["--host", "a=qemu+ssh://a/system"], 2, "at least two"),
            (["--host", "a=qemu:///system", "--host", "b=qemu+ssh://b/system"],
             2, "names the local libvirtd"),
            (["--host", "a=qemu+ssh://a/system", "--host",
              "b=qemu+ssh://b/system", "--idle-vcpu-weight", "-1"], 2,
             "is negative"),
            (["--json"], 2, "--json goes with --status"),
            (["--status", "--state-dir", os.path.join(TMP, "nothere")], 1,
             "no state directory"),
            (["--bogus"], 2, "unrecognized arguments: --bogus")]:
        rc, out = run_cli(script, args)
        ok(rc == rc_want and want in out, "%s: exit %d, %r" % (
            " ".join(args), rc_want, want), out)
    conf = os.path.join(TMP, "fleet.conf")
    with open(conf, "w") as f:
        f.write("host = a=qemu:///system\nhost = b=qemu+ssh://b/system\n")
    rc, out = run_cli(script, ["--config", conf])
    ok(rc == 2 and "--host a=qemu:///system: names the local" in out,
       "hosts from the configuration file, checked the same", out)
    with open(conf, "w") as f:
        f.write("settle = soon\n")
    rc, out = run_cli(script, ["--config", conf])
    ok(rc == 2 and "fleet.conf:1: key 'settle'" in out,
       "a bad value in the configuration file: FILE:LINE, exit 2", out)
    rc, out = run_cli(script, ["--help"])
    ok(rc == 0 and "host-standby begin" in out and "--unpack-after" in out,
       "--help says what it does")


def test_stop_hung_hosts(script):
    """Hosts whose libvirtd takes the connection and never answers: the
    daemon's loop never waits on them, SIGTERM ends it at once."""
    import signal
    from silent_libvirtd import SilentLibvirtd
    hosts = [SilentLibvirtd(os.path.join(TMP, "silent%d.sock" % i))
             for i in range(2)]
    try:
        p = subprocess.Popen(["/usr/bin/python3", script] + sum(
            (["--host", "h%d=%s" % (i, h.uri)] for i, h in
             enumerate(hosts)), []) + ["--state-dir",
                                       os.path.join(TMP, "hung")],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        end = time.monotonic() + 10
        while not all(h.asked() for h in hosts) and time.monotonic() < end:
            time.sleep(0.05)
        t0 = time.monotonic()
        p.send_signal(signal.SIGTERM)
        try:
            out, _ = p.communicate(timeout=5)
            rc = p.returncode
        except subprocess.TimeoutExpired:
            p.kill()
            out, _ = p.communicate()
            rc = None
        took = time.monotonic() - t0
        ok(all(h.asked() for h in hosts) and rc == 0 and took < 3,
           "hosts that never answer: SIGTERM ends sysidle-fleet in %.1f s, "
           "exit %s" % (took, rc), out)
    finally:
        for h in hosts:
            h.close()


def main():
    script = sys.argv[2] if len(sys.argv) > 2 else \
        os.path.join(TOOLS, "sysidle-fleet")
    promtool = shutil.which("promtool")
    try:
        test_hysteresis()
        test_unpack()
        test_pack()
        test_standby()
        test_next_due()
        test_resolve()
        test_uri()
        test_hooks()
        test_outputs(promtool)
        test_cli(script)
        test_stop_hung_hosts(script)
    finally:
        shutil.rmtree(TMP, ignore_errors=True)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
