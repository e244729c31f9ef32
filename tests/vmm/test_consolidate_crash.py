#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""sysidle-consolidate killed with SIGKILL at every step, this VMM's VMs.

Two idle VMs (idle.elf --sysidle, 2 vCPUs, a --control socket each in a
directory the tool follows). Before any consolidator runs, their vCPU and
housekeeping threads get distinctive affinities (none is the idle CPU
alone, so a packed mask taken for a VM's own shows). Then, for N = 1, 2,
3, ...: a consolidator (--policy pack,suspend, no hysteresis, on one
--state-dir) runs with SYSIDLE_CONSOLIDATE_KILL_AT=N through a scenario:

  1. both VMs packed onto the idle CPU and paused;
  2. a kick to the first VM (the VMM resumes it; the tool restores it,
     and packs and pauses it again once it is idle again);
  3. SIGTERM (every VM resumed and restored by the tool).

It kills itself before its N-th step (a journal write's two halves, each
sched_setaffinity, each pause or resume request), wherever that falls.
Then a new consolidator (no KILL_AT) starts on the same --state-dir, the
test waits until both VMs are packed and paused again (it has adopted or
redone what the dead one left), and SIGTERMs it: it must exit 0, every
thread must have exactly its affinity of before, no VM may be paused, and
the journal must hold no entry. The loop ends with the first N that the
scenario runs through without a kill (that run is checked the same way);
one TAP line per N, then the matrix.

usage: test_consolidate_crash.py VMM GUEST_DIR GUEST_TOOLS_DIR SYSIDLECTL TOOL
Exit: 0 all passed, 1 a check failed, 77 skipped (no usable /dev/kvm and
no vmm-scripted (vmmtest.use_scripted), or
fewer than 2 CPUs to run on)."""
import os
import re
import sys
import tempfile
import time

import vmmtest
from vmmtest import Client, Vm, check, status, tool
from procfs import allowed_cpus  # noqa: E402
import crash_loop  # noqa: E402
from crash_loop import Tool  # noqa: E402

vmmtest.init(sys.argv)
CONSOLIDATE = sys.argv[5]
MAX_STEPS = 200
NAMES = ["crash-a", "crash-b"]


def request(path, cmd):
    c = Client(path, 5)
    try:
        return c.request({"cmd": cmd}, 5)
    finally:
        c.close()


def threads(vm):
    return [v["tid"] for v in vm["vcpus"]] + [vm["housekeeping_tid"]]


class Crash:
    def __init__(self, tmp, idle):
        self.tmp = tmp
        self.idle = idle
        self.sockdir = os.path.join(tmp, "socks")
        self.state = os.path.join(tmp, "state")
        os.mkdir(self.sockdir)
        self.vms = []           # (Vm, socket path)
        self.before = {}        # tid -> set of CPUs
        self.pids = {}

    def args(self):
        return ["--dir", self.sockdir, "--state-dir", self.state,
                "--policy", "pack,suspend", "--idle-cpus",
                ",".join(map(str, sorted(self.idle))), "--pack-after", "0",
                "--restore-after", "0", "--suspend-after", "0.3s",
                "--verbose"]

    def boot(self):
        for n in NAMES:
            sock = os.path.join(self.sockdir, n + ".sock")
            vm = Vm(["--cpus", "2", "--sysidle", "--name", n, "--append",
                     "hz=250", "--control", sock, tool("idle.elf")])
            self.vms.append((vm, sock))
        sts = []
        for vm, sock in self.vms:
            st = vmmtest.poll_until(
                lambda: (lambda s: s if s and s["state"] == "FULL_NOTED" and
                         all(threads(s)) else None)(status(sock)), 60)
            if st is None:
                return False
            sts.append(st)
        # distinctive affinities: none is the idle CPU alone
        full = sorted(os.sched_getaffinity(0))
        lo, both = {full[0]}, set(full)
        plans = [[lo, both, lo], [both, lo, both]]
        for st, plan in zip(sts, plans):
            self.pids[st["name"]] = st["pid"]
            for tid, cpus in zip(threads(st), plan):
                os.sched_setaffinity(tid, cpus)
                self.before[tid] = (st["pid"], set(cpus))
        return True

    def affinities(self):
        return {t: allowed_cpus(p, t) for t, (p, _) in self.before.items()}

    def placed_as_before(self):
        return all(self.affinities()[t] == c
                   for t, (_, c) in self.before.items())

    def packed_and_paused(self):
        aff = self.affinities()
        for vm, sock in self.vms:
            st = status(sock)
            if st is None or not st.get("paused"):
                return False
            if any(aff[t] != self.idle for t in threads(st)):
                return False
        return True

    def scenario(self, d):
        """Runs the scenario against @d: "killed" (it died on its own),
        "done" (through to its SIGTERM, exit 0) or what went wrong."""
        first = self.vms[0][1]
        name = NAMES[0]
        r = d.until(self.packed_and_paused)
        if r is None:
            return "step 1: not packed and paused in %d s" % \
                crash_loop.WAIT_S
        if r is False:
            return "killed"
        request(first, "kick")
        pat = r"(?:^|\s)suspend %s: paused" % re.escape(name)
        r = d.until(lambda: d.count(pat) >= 2 and self.packed_and_paused())
        if r is None:
            return "step 2: %s not packed and paused again in %d s" % (
                name, crash_loop.WAIT_S)
        if r is False:
            return "killed"
        rc = d.stop()
        if d.killed_at() is not None:
            return "killed"
        return "done" if rc == 0 else "step 3: SIGTERM: exit %s" % rc

    def recover(self):
        """A new consolidator on the same --state-dir, waited for until
        both VMs are packed and paused, then SIGTERM: what is wrong
        afterwards ("" when nothing)."""
        d = Tool([CONSOLIDATE] + self.args())
        # following both VMs (its SIGTERM handler is set by then), and both
        # packed and paused
        ok = d.until(lambda: d.count(r"watching ") >= len(NAMES) and
                     self.packed_and_paused())
        rc = d.stop()
        wrong = []
        if not ok:
            wrong.append("the new consolidator did not pack and pause "
                         "both VMs (%s)" % ("exited %s" % rc if ok is False
                                            else "timeout"))
        if rc != 0:
            wrong.append("its SIGTERM: exit %s" % rc)
        aff = self.affinities()
        moved = ["%d:%s (was %s)" % (t, sorted(aff[t]), sorted(c))
                 for t, (_, c) in self.before.items() if aff[t] != c]
        if moved:
            wrong.append("threads not as before: " + " ".join(moved))
        paused = [st["name"] for st in (status(s) for _, s in self.vms)
                  if st is None or st.get("paused")]
        if paused:
            wrong.append("paused (or no status): " + " ".join(paused))
        left = crash_loop.journal_entries(self.state)
        if left:
            wrong.append("journal entries left: %s" % left)
        if wrong:
            wrong.append("log: " + " | ".join(d.lines[-12:]))
        return "; ".join(wrong)

    def stop(self):
        for vm, _ in self.vms:
            vm.stop()


def main():
    skip = vmmtest.vm_or_skip("idle.elf")
    if skip:
        return skip
    full = os.sched_getaffinity(0)
    if len(full) < 2:
        print("# only CPU %s to run on: skipped" % sorted(full))
        return 77
    os.sched_setaffinity(0, full)
    if not crash_loop.supported([CONSOLIDATE]):
        check(False, "the consolidator has a journal (--state-dir) and "
              "the SYSIDLE_CONSOLIDATE_KILL_AT hook: its --help names "
              "neither, so a SIGKILL loses what it changed")
        return vmmtest.finish()
    t0 = time.monotonic()
    matrix = []
    with tempfile.TemporaryDirectory() as tmp:
        c = Crash(tmp, {max(full)})
        try:
            if not c.boot():
                check(False, "two idle VMs booted and FULL_NOTED")
                return vmmtest.finish()
            matrix = crash_loop.run_loop("vmm", [CONSOLIDATE] + c.args(),
                                         c.scenario, c.recover, MAX_STEPS)
        finally:
            c.stop()
    crash_loop.print_matrix(matrix, t0)
    return vmmtest.finish()


if __name__ == "__main__":
    sys.exit(main())
