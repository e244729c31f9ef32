#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-only
"""sysidle-fleet's faults, each a check (TAP), on a test fleet of three
hosts (rig.py) with vm1 on fleet-h1 and vm2 on fleet-h2 (idle.elf hz=0,
2 vCPUs, 128 MiB), a new daemon and state directory for each, the
domains put back on their hosts between them:

  start   the same host given twice (fleet-h1 again, under another URI
          spelling) and a host that does not answer (no such socket):
          one clear error each, neither used, the others packed
  oom     the destination out of memory (its QEMU cannot start): the
          migration fails, the domain runs on its source, its host is not
          reported empty (no standby), the journal settled, no retry
          before --vm-cooldown
  dst     the destination's libvirtd killed with SIGKILL mid-migration
          (migrations throttled to 1 MiB/s), restarted 2 s later: the
          domain runs once, on its source, the journal settled (libvirt
          may keep the incoming copy with its job: destroyed)
  src     the source's libvirtd killed mid-migration, restarted: the
          domain runs once (where libvirt's recovery left it) and is
          defined there only; the journal settled
  wake    a domain that wakes during its migration: it arrives, runs once
  lost    a host's libvirtd stopped (SIGSTOP): lost within the keepalive,
          nothing migrated to or from it though its domain is idle long
          enough; continued: up again and the fleet packs
  restart a host's libvirtd killed and started again: lost, then up; its
          QEMU (same PID) ran on; nothing migrated meanwhile
  apply   sysidle-consolidate --hosts A,B --apply (the one-shot plan):
          its migration reaches the other host (exit 0)

Every section ends with a census: each domain runs on exactly one host and
is defined there only.

usage: test_fleet_faults.py BUILD_DIR SOURCE_DIR [SECTION...]
Exit 0 passed, 1 a check failed, 77 the fleet cannot run here."""
import os
import re
import signal
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, ".."))
import tap  # noqa: E402
from tap import check  # noqa: E402
import rig  # noqa: E402
from fleetd import idle_states, placement  # noqa: E402
from scene import (NAMES, Scene, diag, fleet_or_skip, poll,  # noqa: E402
                   prepare)

SKIP = 77
BASE = ["--verbose", "--cpu-budget", "4", "--idle-vcpu-weight", "0.25",
        "--unpack-after", "1s", "--standby-after", "1s",
        "--vm-cooldown", "600s", "--host-cooldown", "2s", "--keepalive", "1",
        "--interval", "2s", "--parallel", "1", "--stop-timeout", "60s"]


class Faults(Scene):
    def __init__(self, fleet, script):
        super().__init__(fleet, script, BASE)
        self.h3 = fleet.hosts[2]

    # --- the sections ----------------------------------------------------------
    def start_errors(self):
        dup = "qemu:///system?socket=%s" % self.h1.sock
        bad = "qemu+unix:///system?socket=%s/nothere" % self.fleet.dir
        hosts = [self.h1, self.h2]
        d = self.daemon(["--settle", "2s", "--min-active-hosts", "1"],
                        hosts=hosts,
                        extra=["--host", "fleet-h1b=" + dup,
                               "--host", "fleet-h9=" + bad])
        m = d.wait_log(r"has host UUID \S+, as host (\S+): one machine "
                       r"given twice; (\S+) is not used", 30)
        check(m is not None and {m.group(1), m.group(2)} ==
              {"fleet-h1", "fleet-h1b"}, "start: fleet-h1 given twice: one "
              "error naming both, the second not used", d.log()[-2000:])
        m = d.wait_log(r"error host fleet-h9 does not answer \(.*nothere", 30)
        check(m is not None, "start: a host that does not answer: one error "
              "with libvirt's reason", d.log()[-2000:])
        m = d.wait_log(r"migrated vm\d (\S+) -> (\S+) \(pack\)", 60)
        log = d.log()
        moves = re.findall(r"migrating \S+ (\S+) -> (\S+)", log)
        refused = re.search(r"(\S+) is not used", log)
        kept = {"fleet-h1", "fleet-h1b"} - {refused.group(1) if refused
                                            else None}
        check(m is not None and len(kept) == 1 and all(
            x in kept | {"fleet-h2"} for mv in moves for x in mv),
              "start: the two good hosts packed (%s and fleet-h2), nothing "
              "to or from the refused name or fleet-h9 (%s)" % (
                  "/".join(kept), moves), log[-2000:])
        check(len(re.findall(r"one machine given twice", log)) == 1 and
              len(re.findall(r"fleet-h9 does not answer", log)) == 1,
              "start: each error said once")
        self.census("start")

    def oom(self):
        # both hosts out of memory: whichever the planner empties
        self.h1.out_of_memory(True)
        self.h2.out_of_memory(True)
        d = self.daemon(["--settle", "2s"], hosts=[self.h1, self.h2])
        m = d.wait_log(r"error migration (vm\d) (\S+) -> \S+ \(pack\) "
                       r"failed after \S+ s: (.*); it runs on (\S+)", 60)
        check(m is not None and "Cannot allocate memory" in m.group(3) and
              m.group(2) == m.group(4), "oom: the migration fails with "
              "QEMU's error, the domain runs on its source (%s)" %
              (m.group(0) if m else None), d.log()[-2000:])
        time.sleep(3)
        log = d.log()
        src = m.group(2) if m else "?"
        check("host %s not emptied, it stays on" % src in log and
              "standby" not in log and not self.h1.frozen and
              not self.h2.frozen,
              "oom: %s is not reported empty, no standby" % src,
              log[-1500:])
        tries = [len(re.findall(r"migrating %s " % n, log)) for n in NAMES]
        check(max(tries) == 1 and "its migration failed" in log,
              "oom: no domain tried twice before --vm-cooldown (held: its "
              "migration failed; tries %s)" % tries, log[-1500:])
        check(not d.journal(), "oom: the journal settled (empty)",
              d.journal())
        mt = d.metrics()
        check(mt.get('sysidle_fleet_migrations_total{reason="pack",'
                     'result="failed"}') == sum(tries) and
              mt.get('sysidle_fleet_migrations_total{reason="pack",'
                     'result="ok"}') == 0,
              "oom: migrations_total{pack,failed} %d, {pack,ok} 0" %
              sum(tries))
        self.census("oom")

    def _kill_mid_migration(self, role, what):
        doms = self.throttled()
        d = self.daemon(["--settle", "2s"], hosts=[self.h1, self.h2])
        name = poll(lambda: self.in_job(doms), 60, 0.01)
        src = self.home.get(name)
        dst = self.h2 if src is self.h1 else self.h1
        victim = src if role == "src" else dst
        t = time.monotonic()
        if victim is not None:
            victim.kill_libvirtd(signal.SIGKILL)
        check(name is not None, "%s: %s's libvirtd killed during the "
              "migration of %s" % (what, victim.name if victim else "?",
                                   name))
        if name is None:
            return None, None
        time.sleep(2)
        victim.start_libvirtd()
        m = d.wait_log(r"(migration %s \S+ -> \S+ \(pack\) failed after "
                       r".*)|(migrated %s \S+ -> \S+ \(pack\).*)" %
                       (name, name), 90)
        settled = poll(lambda: not d.journal(), 20, 0.2)
        if not settled and poll(lambda: self.unstick(d, dst, name, what),
                                60, 1):
            settled = poll(lambda: not d.journal(), 60, 0.2)
        check(m is not None and settled, "%s: the daemon reports the "
              "migration's end (%s) and settles it (journal empty, %.1f s "
              "after the kill)" % (what, m.group(0) if m else None,
                                   time.monotonic() - t), d.log()[-2500:])
        return name, src

    def dst_killed(self):
        name, src = self._kill_mid_migration("dst", "dst")
        if name:
            self.stop()
            check(placement(self.fleet, NAMES)[name] == src.name,
                  "dst: %s runs on its source %s" % (name, src.name))
        self.census("dst")

    def src_killed(self):
        name, _ = self._kill_mid_migration("src", "src")
        if name:
            self.stop()
            diag("src: %s runs on %s" % (name, placement(self.fleet,
                                                          NAMES)[name]))
        self.census("src")

    def wake_during(self):
        doms = self.throttled()
        d = self.daemon(["--settle", "2s", "--min-active-hosts", "2"],
                        hosts=[self.h1, self.h2])
        name = poll(lambda: self.in_job(doms), 60, 0.01)
        busy = self.fleet.busy([name] if name else [])
        busy.start()
        try:
            m = d.wait_log(r"migrated %s (\S+) -> (\S+) \(pack\)" % name,
                           60)
            check(name and m is not None, "wake: %s woken during its "
                  "migration arrives (%s)" % (name, m.group(0) if m
                                              else None), d.log()[-2000:])
            st = poll(lambda: idle_states(self.fleet, [name])[name] ==
                      "NOT", 20) if name else None
            check(st, "wake: it is busy there (NOT)")
        finally:
            busy.stop()
        self.census("wake")

    def lost(self):
        # --settle: just past when both domains' FULL_NOTED began, so that
        # they become movable while fleet-h2 is lost
        since = []
        for n, h in self.home.items():
            import libvirt
            xml = h.conn().lookupByName(n).metadata(
                libvirt.VIR_DOMAIN_METADATA_ELEMENT, "urn:sysidle:1")
            since.append(int(re.search(r'since_unix_ms="(\d+)"',
                                       xml).group(1)))
        settle = (time.time() * 1000 - min(since)) / 1000 + 6
        d = self.daemon(["--settle", "%.1fs" % settle],
                        hosts=[self.h1, self.h2])
        d.wait_log(r"host fleet-h2 up", 30)
        t = time.monotonic()
        self.h2.kill_libvirtd(signal.SIGSTOP)
        m = d.wait_log(r"error host fleet-h2 lost \((.*)\)", 20)
        took = time.monotonic() - t
        check(m is not None and took <= 1 * (3 + 1) + 4,
              "lost: fleet-h2's libvirtd stopped: lost in %.1f s (keepalive "
              "1 s x 3) (%s)" % (took, m.group(1) if m else None),
              d.log()[-1500:])
        time.sleep(max(0.0, t + 8 - time.monotonic()))
        log = d.log()
        check("migrating" not in log, "lost: nothing migrated while "
              "fleet-h2 is lost (vm1 idle past --settle %.1f s)" % settle,
              log[-1500:])
        self.h2.kill_libvirtd(signal.SIGCONT)
        m = d.wait_log(r"host fleet-h2 up", 30)
        m2 = d.wait_log(r"migrated vm\d \S+ -> \S+ \(pack\)", 30)
        check(m is not None and m2 is not None, "lost: continued, fleet-h2 "
              "is up again and the fleet packs", d.log()[-1500:])
        self.census("lost")

    def plan_apply(self):
        """sysidle-consolidate --hosts ... --apply (the one-shot plan) on
        the same hosts: its peer-to-peer migration is given a destination
        libvirt accepts (it used to fail with "Attempt to migrate guest to
        the same host")."""
        import subprocess
        tool = os.path.join(os.path.dirname(self.script),
                            "sysidle-consolidate")
        uris = ",".join("qemu:///system?socket=%s" % h.sock
                        for h in (self.h1, self.h2))
        r = subprocess.run(["/usr/bin/python3", tool, "--hosts", uris,
                            "--mem-reserve", "0", "--idle-vcpu-weight",
                            "0.25", "--apply", "--migrate-uri",
                            rig.MIGRATE_URI], capture_output=True,
                           text=True, timeout=120)
        check(r.returncode == 0 and re.search(r"^migrated vm\d ", r.stdout,
                                              re.M) and
              "apply: 1 of 1 migration done" in r.stdout,
              "apply: sysidle-consolidate --hosts A,B --apply --migrate-uri "
              "%s: exit 0, 1 migration done" % rig.MIGRATE_URI,
              r.stdout + r.stderr)
        self.census("apply")

    def restart(self):
        d = self.daemon(["--settle", "600s"], hosts=[self.h1, self.h2])
        d.wait_log(r"host fleet-h1 up", 30)
        qemu = [p for p in self.h1.pids() if rig.comm(p).startswith("qemu")]
        self.h1.kill_libvirtd(signal.SIGKILL)
        m = d.wait_log(r"error host fleet-h1 lost", 20)
        self.h1.start_libvirtd()
        m2 = d.wait_log(r"host fleet-h1 up", 30,
                        since=m.end() if m else 0)
        qemu2 = [p for p in self.h1.pids()
                 if rig.comm(p).startswith("qemu")]
        check(m is not None and m2 is not None and qemu and qemu == qemu2,
              "restart: fleet-h1's libvirtd killed and started: lost, then "
              "up; its QEMU %s ran on" % qemu, d.log()[-1500:])
        check("migrating" not in d.log(), "restart: nothing migrated")
        self.census("restart")


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    build, src = sys.argv[1:3]
    fleet, skip_line = fleet_or_skip(3, build)
    if fleet is None:
        print(skip_line)
        return SKIP
    prepare()
    f = None
    try:
        fleet.start(bridge_args=["--interval", "100"])
        diag(fleet.describe())
        f = Faults(fleet, os.path.join(src, "tools", "sysidle-fleet"))
        booted = f.boot()
        check(booted, "vm1 on fleet-h1, vm2 on fleet-h2 boot")
        if not booted:
            return 1
        f.reset()
        for name, fn in [("start", f.start_errors), ("oom", f.oom),
                         ("dst", f.dst_killed), ("src", f.src_killed),
                         ("wake", f.wake_during), ("lost", f.lost),
                         ("restart", f.restart),
                         ("apply", f.plan_apply)]:
            if len(sys.argv) > 3 and name not in sys.argv[3:]:
                continue
            f.part(name, fn)
    except Exception as e:
        check(False, "unexpected error: %s" % e, traceback.format_exc())
    finally:
        if f is not None:
            f.stop()
        killed = fleet.teardown()
        if killed:
            diag("killed with SIGKILL: " + ", ".join(killed))
    return tap.finish()


if __name__ == "__main__":
    sys.exit(main())
