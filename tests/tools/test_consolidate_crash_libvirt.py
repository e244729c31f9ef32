#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""sysidle-consolidate killed with SIGKILL at every step, a libvirt domain
on a private libvirtd (private_libvirtd.py, the one of test_libvirt_e2e.py:
a mount namespace of its own, nothing reaches the host's files).

One transient domain (idle.elf, 2 vCPUs). Before any consolidator runs,
its live pinning is made distinctive (vCPU 0 and the emulator thread on
the first CPU, vCPU 1 on all), so that a packed pinning taken for its
own shows. Its idle state is what the test writes in its urn:sysidle:1
metadata (no bridge runs). For N = 1, 2, 3, ...: a consolidator
(--libvirt, --policy pack,suspend, no hysteresis, --suspend-max 0, one
--state-dir) runs with SYSIDLE_CONSOLIDATE_KILL_AT=N through:

  1. metadata FULL_NOTED: the domain packed (every vCPU and the emulator
     on the idle CPU) and paused;
  2. metadata NOT: resumed, its pinning put back;
  3. SIGTERM: exit 0.

It kills itself before its N-th step (a journal write's two halves, each
pin call, each virDomainSuspend / virDomainResume). Then the metadata says
FULL_NOTED again, a new consolidator (no KILL_AT) on the same --state-dir
is waited for until the domain is packed and paused, and SIGTERMed: it
must exit 0, the domain must run with exactly its pinning of before, and
the journal must hold no entry. The loop ends with the first N that the
scenario runs through without a kill; one TAP line per N, then the
matrix.

usage: test_consolidate_crash_libvirt.py BUILD_DIR SOURCE_DIR
Exit: 0 passed, 1 a check failed, 77 nothing could run (not root, no
/dev/kvm, no libvirtd, QEMU or python3-libvirt, libvirtd did not start,
fewer than 2 CPUs)."""
import os
import shutil
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import private_libvirtd as plv  # noqa: E402
from tap import check  # noqa: E402

import crash_loop  # noqa: E402
import tap  # noqa: E402
from crash_loop import Tool  # noqa: E402

MAX_STEPS = 120
NS = plv.NS


class Crash:
    def __init__(self, libvirt, lv, dom, tmp, consolidate, idle):
        self.libvirt, self.lv, self.dom = libvirt, lv, dom
        self.live = libvirt.VIR_DOMAIN_AFFECT_LIVE
        self.state = os.path.join(tmp, "state")
        self.novmm = os.path.join(tmp, "no-vmm")
        os.makedirs(self.novmm)
        self.idle = idle
        self.cmd = [sys.executable, consolidate, "--libvirt", lv.uri,
                    "--dir", self.novmm, "--state-dir", self.state,
                    "--policy", "pack,suspend", "--idle-cpus", str(idle),
                    "--pack-after", "0", "--restore-after", "0",
                    "--suspend-after", "0.3s", "--suspend-max", "0",
                    "--interval", "50ms", "--verbose"]
        self.before = None

    def set_state(self, name):
        num = {"NOT": 0, "FULL_NOTED": 4}[name]
        self.dom.setMetadata(
            self.libvirt.VIR_DOMAIN_METADATA_ELEMENT,
            '<state name="%s" num="%d" since_unix_ms="%d"/>' %
            (name, num, int(time.time() * 1000)), "sysidle", NS, self.live)

    def pinning(self):
        return plv.pinning(self.libvirt, self.dom)

    def running(self):
        return self.dom.state()[0] == self.libvirt.VIR_DOMAIN_RUNNING

    def paused(self):
        return self.dom.state()[0] == self.libvirt.VIR_DOMAIN_PAUSED

    def distinct(self, host):
        """The distinctive pinning of before."""
        n = len(self.dom.vcpuPinInfo(self.live))
        first = tuple(i == host[0] for i in range(max(host) + 1))
        every = tuple(i in host for i in range(max(host) + 1))
        self.dom.pinVcpuFlags(0, first, self.live)
        for i in range(1, n):
            self.dom.pinVcpuFlags(i, every, self.live)
        self.dom.pinEmulator(first, self.live)
        self.before = self.pinning()

    def packed_and_paused(self):
        vcpus, emu = self.pinning()
        return self.paused() and emu == [self.idle] and \
            all(c == [self.idle] for c in vcpus)

    def as_before(self):
        return self.running() and self.pinning() == self.before

    def scenario(self, d):
        self.set_state("FULL_NOTED")
        r = d.until(self.packed_and_paused)
        if r is None:
            return "step 1: not packed and paused in %d s" % \
                crash_loop.WAIT_S
        if r is False:
            return "killed"
        self.set_state("NOT")
        r = d.until(self.as_before)
        if r is None:
            return "step 2: not resumed and restored in %d s: %s" % (
                crash_loop.WAIT_S, plv.fmt_pin(self.pinning()))
        if r is False:
            return "killed"
        rc = d.stop()
        if d.killed_at() is not None:
            return "killed"
        return "done" if rc == 0 else "step 3: SIGTERM: exit %s" % rc

    def recover(self):
        self.set_state("FULL_NOTED")
        d = Tool(self.cmd)
        ok = d.until(lambda: d.count(r"following domain") >= 1 and
                     self.packed_and_paused())
        rc = d.stop()
        wrong = []
        if not ok:
            wrong.append("the new consolidator did not pack and pause the "
                         "domain (%s)" % ("exited %s" % rc if ok is False
                                          else "timeout"))
        if rc != 0:
            wrong.append("its SIGTERM: exit %s" % rc)
        if not self.running():
            wrong.append("the domain is not running (state %s)" %
                         self.dom.state()[0])
        if self.pinning() != self.before:
            wrong.append("pinning %s, was %s" % (
                plv.fmt_pin(self.pinning()), plv.fmt_pin(self.before)))
        left = crash_loop.journal_entries(self.state)
        if left:
            wrong.append("journal entries left: %s" % left)
        if wrong:
            wrong.append("log: " + " | ".join(d.lines[-12:] + d.err[-4:]))
        # whatever happened, the next run starts from the state of before
        if self.paused():
            self.dom.resume()
        return "; ".join(wrong)


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    build, src = sys.argv[1], sys.argv[2]
    kernel = os.path.abspath(os.path.join(build, "guest-tools", "idle.elf"))
    consolidate = os.path.join(src, "tools", "sysidle-consolidate")
    libvirt, why = plv.prerequisites(kernel)
    if libvirt is None:
        return plv.skip_all(why)
    host = sorted(os.sched_getaffinity(0))
    if len(host) < 2:
        return plv.skip_all("only one CPU: packing would not be visible")
    if not crash_loop.supported([sys.executable, consolidate]):
        check(False, "the consolidator has a journal (--state-dir) and "
              "the SYSIDLE_CONSOLIDATE_KILL_AT hook: its --help names "
              "neither, so a SIGKILL loses what it changed")
        tap.finish()
        return 1

    tmp, lv = plv.prepare(libvirt, "sysidle-crash-")
    conn = None
    t0 = time.monotonic()
    matrix = []
    try:
        lv.start()
        conn = lv.connect(libvirt)
        if conn is None or conn == "exited":
            print("1..0 # SKIP libvirtd did not start")
            plv.diag(plv.read(lv.log)[-3000:])
            conn = None
            return plv.SKIP
        name = "sysidle-crash-%d" % os.getpid()
        serial = os.path.join(tmp, "serial.log")
        dom = conn.createXML(plv.domain_xml(name, kernel, serial, 2), 0)
        up = plv.poll_until(lambda: "idle: 2 cpus up" in plv.read(serial),
                            plv.BOOT_TIMEOUT_S, 0.2)
        if not check(bool(up), "domain %s boots idle.elf on 2 vCPUs "
                     "(%.1f s)" % (name, time.monotonic() - t0),
                     plv.read(serial) + lv.domain_log(name)):
            return tap.finish()
        c = Crash(libvirt, lv, dom, tmp, consolidate, host[-1])
        c.distinct(host)
        plv.diag("pinning before: %s" % plv.fmt_pin(c.before))
        matrix = crash_loop.run_loop("libvirt", c.cmd, c.scenario,
                                     c.recover, MAX_STEPS)
    except KeyboardInterrupt as e:
        check(False, "interrupted (%s)" % e)
    except Exception as e:
        check(False, "unexpected error: %s" % e, traceback.format_exc())
    finally:
        plv.teardown(libvirt, lv, conn, [], "sysidle-crash-")
        shutil.rmtree(tmp, ignore_errors=True)
    crash_loop.print_matrix(matrix, t0)
    return tap.finish()


if __name__ == "__main__":
    sys.exit(main())
