#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""What sysidle-libvirt itself costs the host at 1, 8 and 32 domains: its
CPU time and its wake-ups per second, from a stats-file replay on
libvirt's test driver (test:///NODE.xml, written here: the domains, 2
vCPUs each), so that any number of domains can be had without guests.
The replay is the same work per scan as a real host's minus reading the
statistics: the domain list, one state machine per domain, the metadata
and hooks of each change.

Workload: every domain fully idle all along (after its first two scans),
except --busy of them whose vCPU 0 wakes at every scan (its state flips
NOT / FULL_NOTED: metadata written, hooks queued).

Setups, interleaved and rotated, --repeat times:
  new       BRIDGE --interval 100 --idle-interval 100: a scan every 100 ms
  new-idle  BRIDGE --interval 100 --idle-interval 1000 (the default: the
            interval stretches while every domain is fully idle)
  old       --old-bridge PATH --interval 100 (an older build), if given

Measured over --window seconds, after --settle seconds (the domains have
reached FULL_NOTED): the CPU time of all the bridge's threads (the sum of
/proc/PID/task/TID/schedstat's first field, in ns) and their context
switches (voluntary + involuntary, /proc/PID/task/TID/status): each is a
wake-up or a preemption of one of its threads. Printed per setup and
domain count: the median [min..max] over the repeats, per second.

The real host's figures (the kvm, proc and libvirt sources on a QEMU/KVM
domain, with the vCPU threads' own wake-ups) come from the libvirt-fleet
test.

usage: bridge-cost.py [--build DIR] [--old-bridge PATH] [--domains 1,8,32]
                      [--window S] [--settle S] [--repeat N] [--busy N]"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "tests"))
from procfs import thread_usage  # noqa: E402


def node_xml(path, n):
    out = ["<?xml version='1.0'?>", "<node>",
           "  <cpu><mhz>2000</mhz><model>i686</model><nodes>1</nodes>"
           "<sockets>1</sockets><cores>8</cores><threads>1</threads>"
           "<active>8</active><max>8</max></cpu>",
           "  <memory>16777216</memory>"]
    for i in range(n):
        out.append("  <domain type='test'><name>d%d</name>"
                   "<uuid>6b1d1e00-0000-4000-8000-%012d</uuid>"
                   "<memory>1048576</memory><vcpu>2</vcpu><os><type>hvm"
                   "</type></os></domain>" % (i, i))
    out.append("</node>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def stats_file(path, n, scans, busy):
    with open(path, "w") as f:
        for s in range(scans):
            for i in range(n):
                h0 = s if i < busy else 1
                f.write("%d d%d vcpu.0.halt_exits.sum=%d "
                        "vcpu.0.blocking.cur=1 vcpu.1.halt_exits.sum=1 "
                        "vcpu.1.blocking.cur=1\n" % (s * 100, i, h0))


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def run_one(binary, extra, node, stats, window, settle, tmp):
    out = os.path.join(tmp, "bridge.out")
    with open(out, "w") as f:
        p = subprocess.Popen([binary, "--libvirt", "test://" + node,
                              "--stats-file", stats, "--interval", "100",
                              "--hooks", os.path.join(tmp, "no-hooks")] +
                             extra, stdout=f, stderr=subprocess.STDOUT)
    try:
        time.sleep(settle)      # the domains reach FULL_NOTED
        if p.poll() is not None:
            raise RuntimeError("%s exited %s:\n%s" % (binary, p.returncode,
                                                      read(out)[-2000:]))
        a, t0 = thread_usage(p.pid), time.monotonic()
        time.sleep(window)      # the measurement window itself
        b, t1 = thread_usage(p.pid), time.monotonic()
        if a is None or b is None or p.poll() is not None:
            raise RuntimeError("%s ended during the window:\n%s" %
                               (binary, read(out)[-2000:]))
        dt = t1 - t0
        return (b[0] - a[0]) / 1e6 / dt, (b[1] - a[1]) / dt
    finally:
        p.terminate()
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def fmt(xs):
    return "%.2f [%.2f..%.2f]" % (statistics.median(xs), min(xs), max(xs))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--old-bridge")
    ap.add_argument("--domains", default="1,8,32")
    ap.add_argument("--window", type=float, default=8.0)
    ap.add_argument("--settle", type=float, default=1.5)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--busy", type=int, default=0)
    a = ap.parse_args()
    bridge = os.path.join(a.build, "sysidle-libvirt")
    setups = [("new", bridge, ["--idle-interval", "100"]),
              ("new-idle", bridge, ["--idle-interval", "1000"])]
    if a.old_bridge:
        setups.append(("old", a.old_bridge, []))
    counts = [int(x) for x in a.domains.split(",")]
    scans = int((a.settle + a.window) * 10 * 12) + 100
    res = {}
    with tempfile.TemporaryDirectory() as tmp:
        runs = [(s, n) for n in counts for s in setups]
        for r in range(a.repeat):
            k = r % len(runs)
            for (name, binary, extra), n in runs[k:] + runs[:k]:
                node = os.path.join(tmp, "node-%d.xml" % n)
                stats = os.path.join(tmp, "stats-%d" % n)
                if not os.path.exists(node):
                    node_xml(node, n)
                    stats_file(stats, n, scans, min(a.busy, n))
                cpu, wake = run_one(binary, extra, node, stats, a.window,
                                    a.settle, tmp)
                res.setdefault((name, n), []).append((cpu, wake))
                print("# repeat %d %-8s %2d domains: %.2f ms CPU/s, %.1f "
                      "wake-ups/s" % (r + 1, name, n, cpu, wake),
                      flush=True)
    try:
        load = os.getloadavg()
    except OSError:
        load = (0, 0, 0)
    print("\nsysidle-libvirt's own cost, --interval 100, every domain "
          "fully idle%s; median [min..max] of %d repeats of %g s; load "
          "average %.2f %.2f %.2f" % (
              " but %d" % a.busy if a.busy else "", a.repeat, a.window,
              *load))
    print("%-9s %8s %26s %26s" % ("setup", "domains", "CPU ms/s",
                                  "wake-ups/s"))
    for n in counts:
        for name, _, _ in setups:
            xs = res[(name, n)]
            print("%-9s %8d %26s %26s" % (name, n,
                                          fmt([x[0] for x in xs]),
                                          fmt([x[1] for x in xs])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
