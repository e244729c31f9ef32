#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""What watching costs a real idle guest: the wake-ups of a QEMU/KVM
domain's vCPU threads, and the bridge's own wake-ups and CPU time, with
each way of running sysidle-libvirt, side by side in one run.

A private libvirtd (tests/tools/private_libvirtd.py: root, a
mount namespace of its own) runs one domain, idle.elf hz=0 on 2 vCPUs (no
tick: its vCPUs make no wake-up of their own). Setups, one after the
other in each repeat:

  none         no bridge
  old          --old-bridge PATH --interval 100 (an older build), if given
  kvm          BRIDGE --source kvm --interval 100 --idle-interval 100
  proc         BRIDGE --source proc --interval 100 --idle-interval 100
  libvirt      BRIDGE --source libvirt --interval 100 --idle-interval 100
  default      BRIDGE (auto, --interval 100, stretched to 1000 while idle)

Each bridge first brings the domain's metadata to FULL_NOTED, then
--settle seconds, then the window (--window seconds): the context
switches of the vCPU threads ("CPU N/KVM", /proc/PID/task/TID/status) per
second per vCPU, the bridge's (all its threads) per second, and its CPU
time (schedstat) in ms per second. Printed per setup: the median
[min..max] over --repeat repeats.

usage: libvirt-wakeups.py [--build DIR] [--old-bridge PATH] [--repeat N]
                          [--window S] [--settle S]"""
import argparse
import os
import shutil
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "tools"))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))
import private_libvirtd as plv  # noqa: E402
import test_libvirt_fleet as fleet  # noqa: E402  (its measurements)


def fmt(xs):
    return "%.2f [%.2f..%.2f]" % (statistics.median(xs), min(xs), max(xs))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--old-bridge")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--window", type=float, default=5.0)
    ap.add_argument("--settle", type=float, default=1.5)
    a = ap.parse_args()
    kernel = os.path.abspath(os.path.join(a.build, "guest-tools",
                                          "idle.elf"))
    bridge = os.path.abspath(os.path.join(a.build, "sysidle-libvirt"))
    libvirt, why = plv.prerequisites(kernel)
    if libvirt is None:
        print("cannot run: %s" % why)
        return 1
    fleet.WINDOW_S = a.window
    tmp, lv = plv.prepare(libvirt, "sysidle-bench-")
    conn, helpers, res = None, [], {}
    try:
        lv.start()
        conn = lv.connect(libvirt)
        if conn is None or conn == "exited":
            print("libvirtd did not start:\n" + plv.read(lv.log)[-2000:])
            conn = None
            return 1
        name = "sysidle-bench-%d" % os.getpid()
        serial = os.path.join(tmp, "serial.log")
        dom = conn.createXML(plv.domain_xml(name, kernel, serial, 2), 0)
        if not plv.poll_until(lambda: "idle: 2 cpus up" in plv.read(serial),
                              plv.BOOT_TIMEOUT_S, 0.2):
            print("the domain did not boot:\n" + plv.read(serial))
            return 1
        qpid = lv.qemu_pids()[0]
        tids = fleet.vcpu_tids(qpid)
        base = [bridge, "--libvirt", lv.uri, "--hooks",
                os.path.join(tmp, "no-hooks")]
        fixed = ["--interval", "100", "--idle-interval", "100"]
        setups = [("none", None)]
        if a.old_bridge:
            setups.append(("old", [a.old_bridge, "--libvirt", lv.uri,
                                   "--interval", "100", "--hooks",
                                   os.path.join(tmp, "no-hooks")]))
        setups += [("kvm", base + ["--source", "kvm"] + fixed),
                   ("proc", base + ["--source", "proc"] + fixed),
                   ("libvirt", base + ["--source", "libvirt"] + fixed),
                   ("default", base)]
        for r in range(a.repeat):
            for label, cmd in setups:
                if cmd is None:
                    v, bw, bc = fleet.window(qpid, tids)
                else:
                    b = fleet.start(cmd, os.path.join(tmp, "b.log"), helpers)
                    plv.poll_until(lambda: "FULL_NOTED" in (
                        fleet.metadata(libvirt, dom) or ""), 20, 0.1)
                    time.sleep(a.settle)    # its interval settles
                    v, bw, bc = fleet.window(qpid, tids, b.pid)
                    fleet.stop(b)
                res.setdefault(label, []).append((v, bw, bc))
                print("# repeat %d %-8s vCPU %.2f/s per vCPU, bridge %s" %
                      (r + 1, label, v, "-" if bw is None else
                       "%.1f wake-ups/s %.2f ms CPU/s" % (bw, bc)),
                      flush=True)
    finally:
        plv.teardown(libvirt, lv, conn, helpers, "sysidle-bench-")
        shutil.rmtree(tmp, ignore_errors=True)
    print("\nan idle QEMU/KVM domain (2 vCPUs, no tick) watched by "
          "sysidle-libvirt; median [min..max] of %d repeats of %g s; load "
          "average %.2f %.2f %.2f" % ((a.repeat, a.window) +
                                     os.getloadavg()))
    print("%-8s %24s %24s %24s" % ("setup", "vCPU wake-ups/s/vCPU",
                                   "bridge wake-ups/s", "bridge CPU ms/s"))
    for label, _ in setups:
        xs = res[label]
        print("%-8s %24s %24s %24s" % (
            label, fmt([x[0] for x in xs]),
            "-" if xs[0][1] is None else fmt([x[1] for x in xs]),
            "-" if xs[0][2] is None else fmt([x[2] for x in xs])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
