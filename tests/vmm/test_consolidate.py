#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""tools/sysidle-consolidate, the pack policy: three idle VMs and one busy
VM, each with its own --control socket in a temporary directory; the tool
follows that directory. --dry-run changes nothing; the daemon packs the
fully idle VMs' vCPU and housekeeping threads onto the idle CPU and leaves
the busy VM alone; a woken VM is restored at once (timed) and packed again
when it idles; SIGTERM restores everything (exit 0); --once packs and
exits. Affinities are read from /proc/PID/task/TID/status. With a VMM
that has pause / resume (its status has "paused"), the suspend policy too:
--policy pack,suspend --suspend-after 0.3 pauses the idle VMs, a serial
byte makes the VMM resume itself (reported), idle again it is paused
again, SIGTERM resumes them all. The consolidator's state: with
--restore-after 2s a kick restores nothing; with idle VMs packed it makes
no context switch in 2 s; killed with SIGKILL, a new one on the same
--state-dir adopts the packed VMs and its SIGTERM puts back their
distinctive original affinities; what --once packed is journaled and a
later daemon restores it. Every log line has its "TIME LEVEL " prefix.
The run's later phases (--once's journal, the consolidator's state, the
suspend policy) are in consolidate_phases.py, the tool run in the
background and the threads' affinities in consolidate_tool.py.

usage: test_consolidate.py VMM GUEST_DIR GUEST_TOOLS_DIR SYSIDLECTL TOOL
Exit: 0 all passed, 1 a check failed, 77 skipped (no usable /dev/kvm, or
fewer than 2 CPUs to run on)."""
import json
import os
import re
import subprocess
import sys
import tempfile
import time

import vmmtest
from vmmtest import Client, Vm, check, status, tool
from procfs import allowed_cpus  # noqa: E402

vmmtest.init(sys.argv)
from consolidate_tool import (  # noqa: E402
    CONSOLIDATE, RESTORE_LIMIT_S, Tool, affinities, fast, fmt, run_tool,
    state_dir, threads, unprefixed)
from consolidate_phases import (  # noqa: E402
    once_then_daemon, run_state, run_suspend)


def main():
    skip = vmmtest.vm_or_skip()
    if skip:
        return skip
    for g in ["idle.elf", "burst.elf"]:
        if not os.path.exists(tool(g)):
            print("# %s not built: consolidate tests skipped" % tool(g))
            return 77
    full = os.sched_getaffinity(0)
    if len(full) < 2:
        print("# only CPU %s to run on: packing would not be visible, "
              "skipped" % sorted(full))
        return 77
    # The VMs inherit this process's affinity: the whole set.
    os.sched_setaffinity(0, full)
    idle_set = {max(full)}
    idle_arg = str(max(full))
    print("# full set %s, idle set %s" % (sorted(full), idle_arg))
    t_start = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        run(tmp, full, idle_set, idle_arg)
    print("# %.1f s" % (time.monotonic() - t_start))
    return vmmtest.finish()


def run(tmp, full, idle_set, idle_arg):
    socks = [os.path.join(tmp, "idle%d.sock" % i) for i in range(3)]
    busy_sock = os.path.join(tmp, "busy.sock")
    vms = [Vm(["--cpus", "2", "--sysidle", "--append", "hz=250", "--name",
               "idle%d" % i, "--control", s, tool("idle.elf")])
           for i, s in enumerate(socks)]
    # one vCPU spins for two minutes: never fully idle during the test
    busy = Vm(["--cpus", "2", "--sysidle", "--append",
               "rounds=1 period=120000 duty=100 hz=250", "--name", "busy",
               "--control", busy_sock, tool("burst.elf")])
    daemon = None
    try:
        def all_idle():
            sts = [status(s) for s in socks]
            return sts if all(st and st["state"] == "FULL_NOTED" and
                              all(t for _, t in threads(st))
                              for st in sts) else None
        sts = vmmtest.poll_until(all_idle, 30)

        # The busy VM is up once one of its vCPUs spins: seen running, with
        # the same HLT exit count, in two looks 0.1 s apart. (While it
        # boots, all its vCPUs can be idle long enough for full idle, more
        # so on a loaded host: the count of full-idle periods is taken
        # from here on.)
        look0 = [None]

        def busy_up():
            st = status(busy_sock)
            if not st or not all(t for _, t in threads(st)):
                return None
            now = time.monotonic()
            run = {v["id"]: v["halt_exits"] for v in st["vcpus"]
                   if not v["idle"]}
            if look0[0] is None or not run:
                look0[0] = (now, run)
                return None
            t0, run0 = look0[0]
            if now - t0 < 0.1:
                return None
            look0[0] = (now, run)
            return st if any(run.get(i) == h for i, h in run0.items()) \
                else None
        bst = vmmtest.poll_until(busy_up, 30)
        check(sts is not None and bst is not None and
              bst["state"] != "FULL_NOTED",
              "three idle VMs in FULL_NOTED, the busy VM running (%s)" %
              (bst and bst["state"]),
              "\n".join(v.err for v in vms + [busy]))
        if sts is None or bst is None:
            return
        orig = {st["name"]: affinities(st) for st in sts + [bst]}
        check(all(c == full for a in orig.values() for c in a.values()),
              "every VM thread starts on the full set",
              "\n".join("%s %s" % (n, fmt(a)) for n, a in orig.items()))
        names = [st["name"] for st in sts]

        def now_aff():
            return {st["name"]: affinities(st) for st in sts + [bst]}

        def packed(name, aff):
            return all(c == idle_set for c in aff[name].values())

        # --dry-run: the decisions, no change
        dry = Tool(["--dir", tmp, "--idle-cpus", idle_arg] + fast(tmp) +
                   ["--dry-run"], stdin=subprocess.DEVNULL,
                   tag="sysidle-consolidate")
        said = [dry.wait_line(r"^pack %s: 3 threads -> cpus %s "
                              r"\(FULL_NOTED\) \[dry run\]" % (n, idle_arg),
                              10) for n in names]
        aff = now_aff()
        rc = dry.stop()
        check(all(said) and aff == orig and rc == 0 and
              not any(l.startswith("pack busy") for l in dry.lines),
              "--dry-run: 'pack NAME: 3 threads -> cpus %s (FULL_NOTED) "
              "[dry run]' for the idle VMs only, no affinity changed, "
              "SIGTERM exit %s" % (idle_arg, rc),
              "\n".join(dry.lines + dry.err_lines))

        # the daemon
        daemon = Tool(["--dir", tmp, "--idle-cpus", idle_arg] + fast(tmp),
                      stdin=subprocess.DEVNULL, tag="sysidle-consolidate")
        t0 = time.monotonic()
        aff = vmmtest.poll_until(
            lambda: (lambda a: a if all(packed(n, a) for n in names)
                     else None)(now_aff()), 10, step=0.005)
        t_pack = time.monotonic() - t0
        check(aff is not None and aff[bst["name"]] == orig[bst["name"]],
              "daemon: every vCPU and housekeeping thread of the 3 idle VMs "
              "on cpus %s (%.0f ms after start); the busy VM untouched" %
              (idle_arg, t_pack * 1000),
              "\n".join(["%s %s" % (n, fmt(a)) for n, a in
                         now_aff().items()] + daemon.lines + daemon.err_lines))
        # The daemon prints its line after it changed the affinities, and
        # the line comes through a pipe: wait for it (bounded).
        logged = all([daemon.wait_line(r"^pack %s: 3 threads -> cpus %s "
                                       r"\(FULL_NOTED\)$" % (n, idle_arg),
                                       5) for n in names])
        check(logged, "daemon: one 'pack NAME: 3 threads -> cpus %s "
              "(FULL_NOTED)' line per idle VM" % idle_arg,
              "\n".join(daemon.lines))
        # --status: what the running daemon holds, as a table and as JSON
        # (not log lines: subprocess.run, not run_tool)
        p = subprocess.run([CONSOLIDATE, "--status", "--state-dir",
                      state_dir(tmp, "daemon")], capture_output=True,
                     text=True, timeout=30)
        rows = {l.split()[0]: l.split() for l in p.stdout.splitlines()[2:]}
        check(p.returncode == 0 and "daemon running, 3 VMs held" in
              p.stdout and set(rows) == set(names) and
              all(r[1:4] == ["vmm", "yes", "no"] for r in rows.values()),
              "--status: 'daemon running', a row per packed VM (vmm, packed "
              "yes, suspended no)", p.stdout + p.stderr)
        p = subprocess.run([CONSOLIDATE, "--status", "--json", "--state-dir",
                      state_dir(tmp, "daemon")], capture_output=True,
                     text=True, timeout=30)
        try:
            st = json.loads(p.stdout)
        except ValueError:
            st = {}
        check(st.get("running") is True and sorted(
            v["name"] for v in st.get("vms", []) if v["packed"]) ==
              sorted(names), "--status --json: running, the packed VMs",
              p.stdout + p.stderr)

        # wake idle0: restored within RESTORE_LIMIT_S of the event
        w = Client(socks[0])
        first = w.request({"cmd": "watch"})
        n0 = len(daemon.lines)
        vms[0].send("x")
        ev = None
        end = time.monotonic() + 10
        while time.monotonic() < end:
            e = w.line(max(0.01, end - time.monotonic()))
            if isinstance(e, dict) and e.get("event") == "state" and \
                    e.get("from") == "FULL_NOTED":
                ev = e
                break
        # Timed from the VMM's own time of the change (its unix_ms), not
        # from when this test read the event. A read that finds the threads
        # still packed shows they were at its start (wall clock): the limit
        # is broken only if one that started after it found them packed;
        # the first read that finds them restored bounds the time from
        # above. So a test delayed by a loaded host cannot make a prompt
        # restore look late.
        ev_ms = ev.get("unix_ms") if ev else None
        own = threads(sts[0])
        packed_at = restored_at = None  # ms after the change
        end = time.monotonic() + 2
        while ev_ms is not None and time.monotonic() < end:
            t_read = time.time() * 1000
            a = {t: allowed_cpus(p, t) for p, t in own}
            if a == orig[names[0]]:
                restored_at = time.time() * 1000 - ev_ms
                break
            packed_at = t_read - ev_ms
            time.sleep(0.005)
        others = all(packed(n, now_aff()) for n in names[1:])
        if vmmtest.SCRIPTED:  # back in full idle within ms of the byte
            vmmtest.skip("wake %s: the restore seen before the re-pack" %
                         names[0], "a scripted idle.elf makes no 300 ms "
                         "report after a byte")
        else:
            check(isinstance(first, dict) and
                  first.get("state") == "FULL_NOTED" and ev is not None and
                  restored_at is not None and
                  (packed_at is None or
                   packed_at <= RESTORE_LIMIT_S * 1000) and others,
                  "wake %s (a serial byte): FULL_NOTED -> %s seen on a watch; "
                  "its threads back on their own affinity: still packed at %s "
                  "ms, restored by %s ms after the change (the VMM's unix_ms; "
                  "limit %d ms, polled every 5 ms); the other two still "
                  "packed" %
                  (names[0], ev and ev.get("to"),
                   "-" if packed_at is None else "%.1f" % packed_at,
                   "-" if restored_at is None else "%.1f" % restored_at,
                   RESTORE_LIMIT_S * 1000),
                  "\n".join(["first %s ev %s others %s" %
                             (first, ev, others)] + daemon.lines))
        line = daemon.wait_line(r"^restore %s: 3 threads" % names[0], 5, n0)
        check(line is not None and "FULL_NOTED -> " in line,
              "daemon: 'restore %s: 3 threads ...' with its reason" %
              names[0], "\n".join(daemon.lines[n0:]))

        # it idles again: packed again
        back = None
        end = time.monotonic() + 10
        while time.monotonic() < end:
            e = w.line(max(0.01, end - time.monotonic()))
            if isinstance(e, dict) and e.get("to") == "FULL_NOTED":
                back = e
                break
        aff = vmmtest.poll_until(
            lambda: (lambda a: a if all(packed(n, a) for n in names)
                     else None)(now_aff()), 5, step=0.005)
        check(back is not None and aff is not None and
              aff[bst["name"]] == orig[bst["name"]],
              "%s idle again (FULL_NOTED): packed again, all 3 idle VMs on "
              "cpus %s, the busy VM untouched" % (names[0], idle_arg),
              "\n".join(daemon.lines))
        w.close()

        # a VM started now is found by the rescan (every second) and packed;
        # when it goes away while packed it is forgotten, the rest go on
        late_sock = os.path.join(tmp, "late.sock")
        late = Vm(["--cpus", "2", "--sysidle", "--append", "hz=250",
                   "--name", "late", "--control", late_sock,
                   tool("idle.elf")])
        t0 = time.monotonic()
        lst = vmmtest.poll_until(
            lambda: (lambda st: st if st and all(t for _, t in threads(st))
                     else None)(status(late_sock)), 30)
        late_packed = lst is not None and vmmtest.poll_until(
            lambda: all(allowed_cpus(p, t) == idle_set for p, t in threads(lst)),
            10, step=0.005)
        t_late = time.monotonic() - t0
        check(late_packed and daemon.wait_line(
            r"^pack late: 3 threads -> cpus %s \(FULL_NOTED\)$" % idle_arg,
            5) is not None,
              "a VM started later (new socket in the directory): found and "
              "packed %.1f s after its start (inotify on the directory)" % t_late,
              "\n".join(daemon.lines + late.err_lines))
        n0 = len(daemon.lines)
        rc = late.stop()
        gone = daemon.wait_line(r"^(restore late: 3 threads|forget late: its "
                               r"process ended \(was packed\))", 5, n0)
        aff = vmmtest.poll_until(
            lambda: (lambda a: a if all(packed(n, a) for n in names)
                     else None)(now_aff()), 5, step=0.005)
        check(rc == 143 and gone is not None and daemon.p.poll() is None and
              aff is not None and not daemon.err_lines,
              "that VM stops while packed: its restore is attempted "
              "('%s'), it is forgotten, the daemon goes on, the others stay "
              "packed" % (gone and gone.split(" (")[-1].rstrip(")")),
              "\n".join(daemon.lines[n0:] + daemon.err_lines))

        # SIGTERM: everything restored, exit 0
        rc = daemon.stop()
        aff = now_aff()
        check(rc == 0 and aff == orig and not daemon.err_lines and
              re.search(r"^restore idle\d: 3 threads .*\(SIGTERM\)$",
                        "\n".join(daemon.lines), re.M),
              "daemon SIGTERM: exit %s, every thread back on its own "
              "affinity (%.0f ms)" % (rc, (daemon.stop_seconds or 0) * 1000),
              "\n".join(["%s %s" % (n, fmt(a)) for n, a in aff.items()] +
                        daemon.lines + daemon.err_lines))
        for l in daemon.lines:
            print("# daemon: " + l)
        daemon = None

        run_state(tmp, socks, sts, names, full, idle_set, idle_arg)
        for name, a in orig.items():
            for tid, cpus in a.items():
                os.sched_setaffinity(tid, cpus)

        # the suspend policy, when the VMM has pause / resume
        if "paused" not in (status(socks[0]) or {}):
            print("# the VMM's status has no \"paused\": suspend checks "
                  "skipped")
        else:
            daemon = run_suspend(tmp, socks, busy_sock, vms, names, bst,
                                 orig, now_aff, packed, idle_arg)

        # a CPU that does not exist: every sched_setaffinity fails, is
        # retried with back-off, then given up on; nothing changes
        p = run_tool([CONSOLIDATE, "--state-dir", state_dir(tmp), "--once",
                      "--dir", tmp, "--idle-cpus", "1000"],
                      capture_output=True, text=True, timeout=30)
        out = p.stdout.splitlines()
        aff = now_aff()
        check(p.returncode == 1 and aff == orig and
              len([l for l in out if l.startswith("retry ")]) == 5 * 9 and
              len([l for l in out if l.startswith("error ") and
                   "giving up" in l]) == 9 and
              len([l for l in out if re.match(r"^pack idle\d: 3 threads "
                                              r".*: 3 failed, retrying$", l)])
              == 3,
              "--once --idle-cpus 1000 (no such CPU): each of the 9 threads "
              "logged, retried 5 times with back-off, given up; exit %d, "
              "no affinity changed" % p.returncode, p.stdout + p.stderr)

        # --socket PATH alone (an empty --dir): only that VM
        empty = os.path.join(tmp, "empty")
        os.mkdir(empty)
        p = run_tool([CONSOLIDATE, "--state-dir", state_dir(tmp), "--once",
                      "--dir", empty, "--socket", socks[1], "--idle-cpus",
                      idle_arg], capture_output=True, text=True, timeout=30)
        aff = now_aff()
        check(p.returncode == 0 and packed(names[1], aff) and
              all(aff[n] == orig[n] for n in orig if n != names[1]) and
              p.stdout.startswith("pack %s: 3 threads" % names[1]),
              "--once --socket PATH with an empty --dir: only that VM "
              "packed", p.stdout + p.stderr)
        for p_, t in threads(sts[1]):
            os.sched_setaffinity(t, orig[names[1]][t])

        # --once: packs and exits, nothing restored
        t0 = time.monotonic()
        once_dir = state_dir(tmp, "once")
        p = run_tool([CONSOLIDATE, "--state-dir", once_dir, "--once",
                      "--dir", tmp, "--idle-cpus", idle_arg],
                      capture_output=True, text=True, timeout=30)
        t_once = time.monotonic() - t0
        aff = now_aff()
        check(p.returncode == 0 and all(packed(n, aff) for n in names) and
              aff[bst["name"]] == orig[bst["name"]] and
              len([l for l in p.stdout.splitlines()
                   if l.startswith("pack ")]) == 3,
              "--once: exit %d after %.0f ms, the 3 idle VMs packed and "
              "left packed, the busy VM untouched" %
              (p.returncode, t_once * 1000), p.stdout + p.stderr)
        once_then_daemon(tmp, once_dir, vms, sts, names, orig, now_aff,
                         packed, idle_arg)
        for name, a in orig.items():
            for tid, cpus in a.items():
                try:
                    os.sched_setaffinity(tid, cpus)
                except OSError:
                    pass
        bst2 = status(busy_sock)
        check(bst2 is not None and
              bst2["counters"]["full_idle_periods"] ==
              bst["counters"]["full_idle_periods"],
              "the busy VM was never fully idle during the test (full-idle "
              "periods %s since its vCPU spins)" %
              (bst2 and bst2["counters"]["full_idle_periods"] -
               bst["counters"]["full_idle_periods"]),
              "%s\n%s" % (bst["counters"], bst2 and bst2["counters"]))
        check(not unprefixed, "every line of the tool's log starts with "
              "'TIME LEVEL ' (2026-12-04T17:30:00.123Z INFO)",
              "\n".join(unprefixed))
    finally:
        if daemon is not None:
            daemon.stop()
        rcs = [v.stop() for v in vms + [busy]]
        check(all(rc == 143 for rc in rcs), "the VMs stop on SIGTERM "
              "(exit 143)", "%s\n%s" % (rcs, "\n".join(v.err for v in vms +
                                                     [busy])))


if __name__ == "__main__":
    sys.exit(main())
