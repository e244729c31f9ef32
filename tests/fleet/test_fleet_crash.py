#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-only
"""make fleet-crash: sysidle-fleet, and the hosts' libvirtds, killed with
SIGKILL at every step of a fleet's life, on a test fleet of two hosts
(rig.py; vm1 on fleet-h1, vm2 on fleet-h2, idle.elf hz=0, 2 vCPUs, 128
MiB). Each case starts from that placement with a new state directory.

The daemon, at each of its steps: SYSIDLE_CONSOLIDATE_KILL_AT=N (steps.py:
each journal write's two halves, each migration call, each host hook, each
settling action) for N = 1, 2, ... while the fleet packs (one domain
migrates, the emptied host goes to standby) and then unpacks (both
domains busy on one host, budget 3 vCPUs: the host in standby is woken,
a domain moves to it); the first N at which the run ends without a kill
ends the matrix. After a kill a new daemon (no KILL_AT) starts on the
same state directory, and the phase the kill interrupted must complete:
packed (both domains on one host, the other in standby) or unpacked (one
domain on each host, both up).

The daemon during a migration: killed while libvirt migrates (the
migration throttled to 1 MiB/s); libvirt finishes or undoes it; the new
daemon settles it.

The libvirtds: the source's or the destination's, killed 0, 0.3, 0.6 and
0.9 s after the migration's job began on the source (throttled: the
transfer lasts about a second), started again 1 s later.

After every case: each domain runs on exactly one host and is defined
there only, no migration is left in the journal, every host the journal
says is in standby is stopped and no other; one line per case, then the
matrix.

usage: test_fleet_crash.py BUILD_DIR SOURCE_DIR [--max-steps N]
Exit 0 passed, 1 a case failed, 77 the fleet cannot run here."""
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
from fleetd import placement  # noqa: E402
from scene import (NAMES, Scene, diag, fleet_or_skip, poll,  # noqa: E402
                   prepare)

SKIP = 77
KILL_ENV = "SYSIDLE_CONSOLIDATE_KILL_AT"
ARGS = ["--cpu-budget", "3", "--idle-vcpu-weight", "0.25",
        "--settle", "2s", "--unpack-after", "1s", "--standby-after", "1s",
        "--vm-cooldown", "60s", "--host-cooldown", "60s", "--keepalive", "1",
        "--interval", "5s", "--parallel", "1", "--stop-timeout", "60s"]
PHASE_S = 90
MAX_STEPS = 60


class Crash(Scene):
    def __init__(self, fleet, script):
        super().__init__(fleet, script, ARGS)
        self.matrix = []        # (case, phase, outcome)

    def packed(self):
        where = placement(self.fleet, NAMES)
        frozen = [h for h in self.fleet.hosts if h.frozen]
        hosts = set(where.values())
        return len(hosts) == 1 and None not in hosts and len(frozen) == 1 \
            and frozen[0].name not in hosts

    def unpacked(self):
        where = placement(self.fleet, NAMES)
        return None not in where.values() and \
            len(set(where.values())) == 2 and \
            not any(h.frozen for h in self.fleet.hosts)

    def settled(self, d):
        """The journal holds no migration, and in standby (its hook done)
        exactly the hosts that are stopped."""
        j = d.journal()
        return not any(k.startswith("migration:") for k in j) and sorted(
            e.get("host") for e in j.values() if e.get("kind") ==
            "standby" and e.get("phase") == "standby") == sorted(
            h.name for h in self.fleet.hosts if h.frozen) and all(
            e.get("phase") == "standby" for e in j.values()
            if e.get("kind") == "standby")

    def consistent(self, d, what):
        """The census, the journal and the hosts' states agree (the
        daemon given the time to finish what the crash left: a hook run
        again)."""
        poll(lambda: self.settled(d), 20, 0.2)
        ok = self.census(what)
        j = d.journal()
        migr = [k for k in j if k.startswith("migration:")]
        standby = sorted(e.get("host") for e in j.values()
                         if e.get("kind") == "standby")
        frozen = sorted(h.name for h in self.fleet.hosts if h.frozen)
        good = not migr and standby == frozen and all(
            e.get("phase") == "standby" for e in j.values()
            if e.get("kind") == "standby")
        check(good, "%s: the journal settled: no migration, standby %s = "
              "hosts stopped %s" % (what, standby, frozen), j)
        return ok and good

    def run_phase(self, cond, d, what):
        """Waits until @cond() or the daemon's death; (reached, killed)."""
        end = time.monotonic() + PHASE_S
        while time.monotonic() < end:
            if not d.running():
                return cond(), d.proc.returncode == -signal.SIGKILL
            if cond():
                return True, False
            time.sleep(0.2)
        return False, False

    def kill_at(self, n):
        """Case N of the daemon's matrix; returns False once N is past its
        last step (nothing killed)."""
        what = "kill-at %d" % n
        d = self.daemon([], env={KILL_ENV: str(n)})
        busy = None
        phase = "pack"
        try:
            reached, killed = self.run_phase(self.packed, d, what)
            if reached and not killed:
                phase = "unpack"
                busy = self.fleet.busy(NAMES)
                busy.start()
                reached, killed = self.run_phase(self.unpacked, d, what)
                if reached and not killed:
                    # its last steps (the journal after the unpack) may
                    # still be ahead: they come before its clean stop
                    self.stop_busy(busy)
                    busy = None
                    rc = d.stop()
                    killed = rc == -signal.SIGKILL
                    if not killed:
                        self.matrix.append((what, "-", "no kill: past the "
                                            "last step (exit %s)" % rc))
                        check(rc == 0, "%s: no step left, exit 0" % what,
                              d.log()[-1500:])
                        return False
            if not killed:
                check(False, "%s: the %s did not complete (%s)" % (
                    what, phase, placement(self.fleet, NAMES)),
                    d.log()[-2500:])
                return True
            m = re.search(r"kill-at %d: (.*)" % n, d.log())
            step = m.group(1) if m else "?"
            # a new daemon on the same state directory finishes the phase
            d2 = self.again(d)
            reached = poll(self.packed if phase == "pack" else
                           self.unpacked, PHASE_S, 0.2)
            check(reached, "%s (%s, during the %s): the new daemon "
                  "completes it" % (what, step, phase), d2.log()[-2500:])
            self.stop_busy(busy)
            busy = None
            ok = self.consistent(d2, what)
            self.matrix.append((what, step, "ok" if reached and ok else
                                "FAILED"))
            return True
        finally:
            self.stop_busy(busy)

    def again(self, d):
        """A new daemon on @d's state directory (no KILL_AT)."""
        d.logf.close()
        d.start()
        self.d = d
        return d

    @staticmethod
    def stop_busy(busy):
        if busy is not None:
            busy.stop()

    def kill_mid_migration(self):
        what = "daemon killed mid-migration"
        doms = self.throttled()
        d = self.daemon([])
        name = poll(lambda: self.in_job(doms), 60, 0.01)
        if d.running():
            os.kill(d.proc.pid, signal.SIGKILL)
            d.proc.wait()
        check(name is not None, "%s: killed while %s migrates" % (what,
                                                                  name))
        self.again(d)
        reached = poll(self.packed, PHASE_S, 0.2)
        log = d.log()
        check(reached and re.search(r"settled migration of %s|journal: "
                                    r"migration of %s" % (name, name), log),
              "%s: the new daemon settles the migration from its journal "
              "and completes the pack" % what, log[-2000:])
        ok = self.consistent(d, what)
        self.matrix.append((what, name, "ok" if reached and ok else
                            "FAILED"))

    def libvirtd_killed(self, role, delay):
        what = "%s libvirtd killed %.1f s into a migration" % (role, delay)
        doms = self.throttled()
        d = self.daemon([])
        name = poll(lambda: self.in_job(doms), 60, 0.01)
        if name is None:
            check(False, "%s: no migration began" % what, d.log()[-1500:])
            return
        src = self.home[name]
        victim = src if role == "source" else self.other(src)
        time.sleep(delay)
        victim.kill_libvirtd(signal.SIGKILL)
        time.sleep(1)
        victim.start_libvirtd()
        end = d.wait_log(r"(migrated|migration) %s " % name, 90)
        settled = poll(lambda: not any(k.startswith("migration:")
                                       for k in d.journal()), 30, 0.2)
        if not settled and poll(lambda: self.unstick(
                d, self.other(src), name, what), 60, 1):
            settled = poll(lambda: not any(k.startswith("migration:")
                                           for k in d.journal()), 60, 0.2)
        check(end is not None and settled, "%s: the migration of %s ends "
              "and is settled (%s)" % (what, name, end.group(0) if end
                                       else None), d.log()[-2500:])
        # the pack completes (the failed domain is held for --vm-cooldown)
        reached = poll(self.packed, PHASE_S, 0.2)
        check(reached, "%s: the fleet packs after all" % what,
              d.log()[-1500:])
        ok = self.consistent(d, what)
        self.matrix.append((what, name, "ok" if end and settled and ok and
                            reached else "FAILED"))


def main():
    args = sys.argv[1:]
    max_steps = MAX_STEPS
    if "--max-steps" in args:
        i = args.index("--max-steps")
        max_steps = int(args[i + 1])
        del args[i:i + 2]
    if len(args) != 2:
        print(__doc__)
        return 2
    build, src = args
    fleet, skip_line = fleet_or_skip(2, build)
    if fleet is None:
        print(skip_line)
        return SKIP
    prepare()
    c = None
    t0 = time.monotonic()
    try:
        fleet.start(bridge_args=["--interval", "100"])
        diag(fleet.describe())
        c = Crash(fleet, os.path.join(src, "tools", "sysidle-fleet"))
        if not check(c.boot(), "vm1 on fleet-h1, vm2 on fleet-h2 boot"):
            return tap.finish()
        c.reset()
        for n in range(1, max_steps + 1):
            more = [True]

            def case():
                more[0] = c.kill_at(n)
            c.part("kill-at %d" % n, case)
            if not more[0]:
                break
        else:
            check(False, "the daemon still had steps after %d" % max_steps)
        c.part("mid-migration", c.kill_mid_migration)
        for role in ("source", "destination"):
            for delay in (0.0, 0.3, 0.6, 0.9):
                c.part("%s %.1f" % (role, delay),
                       lambda: c.libvirtd_killed(role, delay))
    except Exception as e:
        check(False, "unexpected error: %s" % e, traceback.format_exc())
    finally:
        if c is not None:
            c.stop()
            diag("the matrix (%d cases, %.0f s):" % (
                len(c.matrix), time.monotonic() - t0))
            for case, step, outcome in c.matrix:
                # a journal's path said by its file name
                step = re.sub(r"/\S*/(journal\.json(\.tmp)?)", r"\1", step)
                diag("  %-48s %-50s %s" % (case, step[:50], outcome))
        killed = fleet.teardown()
        if killed:
            diag("killed with SIGKILL: " + ", ".join(killed))
    return tap.finish()


if __name__ == "__main__":
    sys.exit(main())
