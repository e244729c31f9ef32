#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""What sysidle-fleet gains and how fast it moves: the wake-ups of a fleet
of idle libvirt hosts before and after it packs their domains, the time
it takes to pack them and to spread them out again when half of them
wake, the migrations it makes, and that no domain is lost on the way.

The fleet is the tests' (tests/fleet/rig.py): --hosts private libvirt
hosts on this machine (3; PID, mount and UTS namespaces of their own),
each with sysidle-libvirt --interval 100, and --per-host domains on each
(4; h1-vm1 ...): idle.elf hz=0, 2 vCPUs, 128 MiB (KVM where /dev/kvm
works, else or with --tcg TCG), all booted and published FULL_NOTED
first. sysidle-fleet runs as the tests run it (tests/fleet/fleetd.py;
the rig's standby hook stops every process of a host, SIGSTOP, and
continues them on a wake) with --fleet-args (default FLEET_ARGS: 12 idle
domains weigh 6 vCPUs and fit on one host of budget 8; 6 busy do not).

Wake-ups: the context switches (voluntary + involuntary, every thread,
/proc/PID/task/TID/status) per second over --window seconds (10) of every
process of every host (Fleet.usage(): QEMUs, libvirtds, bridges, anything
else in a host), and, separately, of the sysidle-fleet process. "before":
sysidle-fleet runs with --dry-run (it watches the hosts and decides as
the real one does, acts on nothing: its own figure is like for like),
QUIET_S seconds after it has seen every host up. "after": QUIET_S
seconds after the fleet is packed; the processes of a host in standby
are stopped and make none. sysidle-fleet's figure comes in bursts: it
reads a domain again at each of its metadata changes (a bridge renews a
domain's lease every 20 s), a whole host at each lifecycle event and
every --interval (30 s); a --window of 20 s or more evens them.

Packed: the time from sysidle-fleet's start (its --settle and
--standby-after included) until every domain runs on exactly one host,
they fill the fewest hosts that hold them within budget (ceil(domains x
vCPUs x --idle-vcpu-weight / --cpu-budget)) and every other host is in
standby (its libvirtd stopped). Migrations: its log's "INFO migrated ...
(pack)" lines. Unpacked: every other domain (half of them) gets a byte on
its serial console every 30 ms (Fleet.busy); the time from then until
each of those is published out of FULL_NOTED, every domain runs on
exactly one host and no host carries more than --cpu-budget, a busy
domain's vCPUs counted whole, an idle one's x --idle-vcpu-weight (the
daemon's rule); its migrations are counted once the log has them all.
The bound checked, --unpack-bound (30 s): --unpack-after (1 s) + the wake
of a host in standby (~0 s here: the hook continues its processes; the
daemon's --wake-timeout, 5 min, is only its limit) + the migrations,
--parallel at a time, a few seconds each + the bridges' and the daemon's
reads. Hosts woken: 1 or 2 (the bytes that keep a domain busy follow it
to its new host up to a second late, during which that host's bridge
publishes it idle: the next unpack round may fill that host past its
budget, and a second host is woken). Lost: after sysidle-fleet's SIGTERM,
the domains that do not run on exactly one host, defined there only
(fleetd.census). The bench asks libvirt only on hosts that run a QEMU and
are not stopped (a call to a stopped libvirtd would hang), every 0.2 s,
never during a window.

Output: a "# run" line per cycle, a table, "unpack bound S s: met" (or
"NOT met"), last "fleet: H hosts -> A active, M migrations, packed in P
s, unpacked in U s, lost L". --repeat R: R cycles, each on a fresh rig;
medians [min..max] in the table, medians in the last line (L: the
total). Not a test. Exit 0; 1 when the unpack bound is not met, a domain
is lost, no host went to standby, a phase timed out or it was
interrupted; 77 when the fleet cannot run here (not root, no libvirtd,
QEMU or python3-libvirt)."""
import argparse
import math
import os
import re
import shlex
import signal
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "fleet"))
import rig  # noqa: E402
from fleetd import FleetDaemon, census  # noqa: E402
from benchstats import spread, loadavg  # noqa: E402

SCRIPT = os.path.join(HERE, "..", "tools", "sysidle-fleet")
FLEET_ARGS = ("--cpu-budget 8 --idle-vcpu-weight 0.25 --settle 2s "
              "--unpack-after 1s --standby-after 1s --vm-cooldown 5s "
              "--host-cooldown 5s --parallel 2 --keepalive 2")
VCPUS, MIB = 2, 128
QUIET_S = 3.0
GROUPS = {"libvirtd": "libvirtds", "sysidle-libvirt": "bridges"}  # by comm


class Failed(Exception):
    pass


def knob(args, name, default):
    """The value of option @name in @args (a list), as a float."""
    for i, x in enumerate(args):
        if x == name and i + 1 < len(args):
            return float(args[i + 1])
        if x.startswith(name + "="):
            return float(x.split("=", 1)[1])
    return default


def look(fleet):
    """{domain: [(host, its urn:sysidle:1 state)]}, the active domains of
    the hosts that run a QEMU and are not stopped; None while one of them
    is in flux."""
    import libvirt
    out = {}
    for h in fleet.hosts:
        if h.frozen or not any(rig.comm(p).startswith("qemu")
                               for p in h.pids()):
            continue
        try:
            for d in h.conn().listAllDomains(
                    libvirt.VIR_CONNECT_LIST_DOMAINS_ACTIVE):
                try:
                    m = re.search(r'name="([A-Z_]+)"', d.metadata(
                        libvirt.VIR_DOMAIN_METADATA_ELEMENT, "urn:sysidle:1"))
                except libvirt.libvirtError:
                    m = None
                out.setdefault(d.name(), []).append(
                    (h.name, m.group(1) if m else None))
        except libvirt.libvirtError:
            return None
    return out


def poll(fn, timeout, daemon=None, step=0.2):
    """@fn()'s first true value within @timeout s, else None; Failed when
    @daemon has ended meanwhile."""
    end = time.monotonic() + timeout
    while True:
        v = fn()
        if v:
            return v
        if daemon is not None and not daemon.running():
            raise Failed("sysidle-fleet exited %s" % daemon.proc.returncode)
        if time.monotonic() > end:
            return None
        time.sleep(step)


def wakeups(fleet, daemon, secs):
    """{group: context switches/s} over @secs s: the hosts' processes by
    kind, "hosts" their sum, "daemon" sysidle-fleet's."""
    u0, d0, t0 = fleet.usage(), rig.ctx_switches(daemon.proc.pid), \
        time.monotonic()
    time.sleep(secs)
    u1, d1, t1 = fleet.usage(), rig.ctx_switches(daemon.proc.pid), \
        time.monotonic()
    out = dict.fromkeys(["QEMUs", "libvirtds", "bridges", "other"], 0.0)
    for pid, (_, c, cs) in u1.items():
        if pid in u0 and u0[pid][1] == c:
            g = GROUPS.get(c, "QEMUs" if c[:4] == "qemu" else "other")
            out[g] += (cs - u0[pid][2]) / (t1 - t0)
    out["hosts"] = sum(out.values())
    out["daemon"] = (d1 - d0) / (t1 - t0)
    return out


def count(log, why):
    """(migrations done, started and not ended yet) for @why in @log."""
    pat = r"\S+ \S+ -> \S+ \(%s\)" % why
    done = len(re.findall(r"INFO migrated " + pat, log))
    ended = done + len(re.findall(r"migration %s (?:not started|failed)" %
                                  pat, log))
    return done, len(re.findall(r"INFO migrating " + pat, log)) - ended


def cycle(a, fleet, fleet_args, budget, weight):
    """One cycle on a started @fleet; its figures (a dict)."""
    r = {"virt": fleet.describe()}
    names = ["h%d-vm%d" % (i + 1, j + 1) for i in range(a.hosts)
             for j in range(a.per_host)]
    r["fewest"] = fewest = max(1, math.ceil(
        len(names) * VCPUS * weight / budget - 1e-9))
    d = busy = None
    try:
        for i, h in enumerate(fleet.hosts):
            for n in names[i * a.per_host:(i + 1) * a.per_host]:
                fleet.create_domain(h, n, vcpus=VCPUS, mib=MIB)
        t = time.monotonic()
        if not all(fleet.wait_booted(n, a.timeout) for n in names):
            raise Failed("the domains did not boot within %g s" % a.timeout)

        def all_idle():
            v = look(fleet)
            return v and all([x[1] for x in v.get(n, [])] == ["FULL_NOTED"]
                             for n in names)
        if not poll(all_idle, a.timeout):
            raise Failed("not all FULL_NOTED within %g s: %s" %
                         (a.timeout, look(fleet)))
        r["ready_s"] = time.monotonic() - t
        d = FleetDaemon(fleet, SCRIPT, os.path.join(fleet.dir, "dry-run"),
                        fleet_args + ["--dry-run"], name="dry-run")
        d.start()
        if not poll(lambda: len(re.findall(r" host \S+ up: ", d.log()))
                    >= a.hosts, a.timeout, d):
            raise Failed("the dry run did not see every host up")
        time.sleep(QUIET_S)
        r["before"] = wakeups(fleet, d, a.window)
        r["dry_moves"] = len(re.findall(r"dry-run: would migrate", d.log()))
        d.stop()
        d = FleetDaemon(fleet, SCRIPT, os.path.join(fleet.dir, "fleetd"),
                        fleet_args)
        t0 = time.monotonic()
        d.start()

        def packed():
            v = look(fleet)
            if not v or any(len(v.get(n, [])) != 1 for n in names):
                return False
            on = {v[n][0][0] for n in names}
            return len(on) == fewest and all(
                h.frozen for h in fleet.hosts if h.name not in on)
        got = poll(packed, a.timeout, d)
        r["pack_s"] = time.monotonic() - t0 if got else None
        r["pack_moves"] = count(d.log(), "pack")[0]
        r["standby"] = sum(1 for h in fleet.hosts if h.frozen)
        r["active"] = a.hosts - r["standby"]
        if not got:
            raise Failed("not packed within %g s" % a.timeout)
        time.sleep(QUIET_S)
        r["after"] = wakeups(fleet, d, a.window)
        r["after_moves"] = count(d.log(), "pack")[0] - r["pack_moves"]

        hot = names[::2]
        busy = fleet.busy(hot)
        woke0 = sum(1 for c in fleet.hooks_log() if c["argv"][2] == "end")
        t1 = time.monotonic()
        busy.start()

        def unpacked():
            v = look(fleet)
            if not v or any(len(v.get(n, [])) != 1 for n in names) or \
                    any(v[n][0][1] == "FULL_NOTED" for n in hot):
                return False
            load = {}
            for n in names:
                h, st = v[n][0]
                load[h] = load.get(h, 0) + VCPUS * (
                    weight if st == "FULL_NOTED" else 1)
            return max(load.values()) <= budget + 1e-9
        got = poll(unpacked, a.timeout, d)
        r["unpack_s"] = time.monotonic() - t1 if got else None
        # a migration libvirt has ended may not be in the log yet
        poll(lambda: count(d.log(), "unpack")[1] <= 0, a.timeout, d)
        r["unpack_moves"] = count(d.log(), "unpack")[0]
        r["woken"] = sum(1 for c in fleet.hooks_log()
                         if c["argv"][2] == "end") - woke0
        if not got:
            raise Failed("not unpacked within %g s" % a.timeout)
    except Failed as e:
        r["failed"] = str(e)
    finally:
        if busy is not None:
            busy.stop()
        if d is not None:
            r["exit"] = d.stop()
            r["log"] = d.log(True)
    r["lost"] = len(census(fleet, names))
    return r


def med(runs, key, sub=None):
    return spread([r[key][sub] if sub else r[key] for r in runs
                   if r.get(key) is not None])


def cell(s, f="%.1f"):     # median [min..max]; the median when they agree
    if s["min"] == s["max"]:
        return one(s["median"], f)
    return (f + " [" + f + ".." + f + "]") % (s["median"], s["min"], s["max"])


def one(v, f="%.1f"):
    return "-" if v is None else f % v


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--hosts", type=int, default=3)
    ap.add_argument("--per-host", type=int, default=4,
                    help="idle domains a host at the start (4)")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--window", type=float, default=10,
                    help="wake-up window, seconds (10)")
    ap.add_argument("--unpack-bound", type=float, default=30,
                    help="unpacked within this, seconds (30)")
    ap.add_argument("--timeout", type=float, default=120,
                    help="bound of each phase: boot, pack, unpack (120)")
    ap.add_argument("--tcg", action="store_true",
                    help="TCG domains even where KVM works")
    ap.add_argument("--fleet-args", default=FLEET_ARGS,
                    help="sysidle-fleet's options (default: %(default)s)")
    a = ap.parse_args()
    if a.hosts < 2 or a.per_host < 1 or a.repeat < 1:
        ap.error("at least 2 hosts, 1 domain a host, 1 repeat")
    fleet_args = shlex.split(a.fleet_args)
    budget = knob(fleet_args, "--cpu-budget", os.cpu_count())
    weight = knob(fleet_args, "--idle-vcpu-weight", 0.25)

    def on_term(signum, frame):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, on_term)
    runs, interrupted = [], False
    try:
        for rep in range(a.repeat):
            try:
                fleet = rig.Fleet(a.hosts, a.build, "qemu" if a.tcg else None)
            except rig.RigError as e:
                print("fleet: cannot run here: %s" % e)
                return 77
            import libvirt
            libvirt.registerErrorHandler(lambda c, e: None, None)
            try:
                if rep == 0:
                    print("# %s; %d domains (%d a host): idle.elf hz=0, %d "
                          "vCPUs, %d MiB; bridges --interval 100" % (
                              fleet.describe(), a.hosts * a.per_host,
                              a.per_host, VCPUS, MIB))
                    print("# sysidle-fleet %s" % " ".join(fleet_args))
                    print("# wake-ups before: sysidle-fleet --dry-run "
                          "(watching, acting on nothing); windows of %g s, "
                          "%g s after ready / packed" % (a.window, QUIET_S),
                          flush=True)
                fleet.start(bridge_args=["--interval", "100"])
                r = cycle(a, fleet, fleet_args, budget, weight)
            except rig.RigError as e:
                r = {"failed": "rig: %s" % e, "lost": 0}
            finally:
                killed = fleet.teardown()
                if killed:
                    print("# killed with SIGKILL: " + ", ".join(killed))
            r["bad"] = "failed" in r or r["lost"] or not r.get("standby") \
                or r.get("unpack_s") is None or r["unpack_s"] > a.unpack_bound
            runs.append(r)
            print("# run %d: ready in %s s, packed in %s s (%s migrations, "
                  "%s in standby; the dry run planned %s), unpacked in %s s "
                  "(%s migrations, %s woken), lost %d, sysidle-fleet exit "
                  "%s%s" % (
                      rep + 1, one(r.get("ready_s")), one(r.get("pack_s")),
                      r.get("pack_moves", "-"), r.get("standby", "-"),
                      r.get("dry_moves", "-"), one(r.get("unpack_s")),
                      r.get("unpack_moves", "-"), r.get("woken", "-"),
                      r["lost"], r.get("exit", "-"),
                      "; FAILED: " + r["failed"] if "failed" in r else ""),
                  flush=True)
            if r["bad"] and r.get("log"):
                print("# its sysidle-fleet log (end):\n" + "\n".join(
                    "#   " + ln for ln in r["log"][-3000:].splitlines()))
    except KeyboardInterrupt:
        interrupted = True
        print("# interrupted: partial results")
    if not runs:
        return 1
    n = len(runs)
    print()
    print("sysidle-fleet on %s; %s; load average %s" % (
        runs[0].get("virt", "-"), "median [min..max] of %d runs" % n
        if n > 1 else "one run", " ".join(map(str, loadavg()))))
    print("%-34s %22s %22s" % ("wake-ups/s (context switches/s)",
                               "before (dry run)", "after packing"))
    for label, key in [("  QEMUs", "QEMUs"), ("  libvirtds", "libvirtds"),
                       ("  bridges", "bridges"), ("  other", "other"),
                       ("hosts, every process", "hosts"),
                       ("sysidle-fleet", "daemon")]:
        print("%-34s %22s %22s" % (label, cell(med(runs, "before", key)),
                                   cell(med(runs, "after", key))))
    total = a.hosts * a.per_host
    for label, key, f in [
            ("ready (booted, FULL_NOTED), s", "ready_s", "%.1f"),
            ("packed, s", "pack_s", "%.1f"),
            ("pack migrations", "pack_moves", "%g"),
            ("hosts in standby", "standby", "%g"),
            ("hosts active (fewest: %d)" % runs[0].get("fewest", 0),
             "active", "%g"),
            ("pack migrations after packed", "after_moves", "%g"),
            ("unpacked (%d of %d busy), s" % ((total + 1) // 2, total),
             "unpack_s", "%.1f"),
            ("unpack migrations", "unpack_moves", "%g"),
            ("hosts woken", "woken", "%g")]:
        print("%-34s %22s" % (label, cell(med(runs, key), f)))
    lost = sum(r["lost"] for r in runs)
    print("%-34s %22d" % ("lost (total)", lost))
    late = [str(i + 1) for i, r in enumerate(runs)
            if r.get("unpack_s") is None or r["unpack_s"] > a.unpack_bound]
    print("unpack bound %g s: %s" % (a.unpack_bound, "NOT met (run %s)" %
                                     ", ".join(late) if late else "met"))
    if any(not r.get("standby") for r in runs):
        print("no host went to standby in %d of %d runs" % (
            sum(1 for r in runs if not r.get("standby")), n))

    def m(key, f):
        return one(med(runs, key)["median"], f)
    print("fleet: %d hosts -> %s active, %s migrations, packed in %s s, "
          "unpacked in %s s, lost %d" % (
              a.hosts, m("active", "%g"), m("pack_moves", "%g"),
              m("pack_s", "%.1f"), m("unpack_s", "%.1f"), lost))
    return 1 if interrupted or any(r["bad"] for r in runs) else 0


if __name__ == "__main__":
    sys.exit(main())
