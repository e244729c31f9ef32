#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""How many idle VMs a host holds and what each costs it, side by side.

N VMs (--vms, 12; at most 100, and no more than fit in this host's
MemAvailable at --mem MiB of guest RAM plus 64 MiB for the process
each) run the same image, idle.elf hz=--hz on --cpus vCPUs, under each
setup (--setups, all by default):

  vmm-sysidle      this VMM with --sysidle (the guest's pv tick)
  vmm              this VMM without --sysidle (the guest's pv tick)
  vmm-catchup      --sysidle --lapic-tick-policy catchup, guest tick=lapic
  vmm-discard      --sysidle --lapic-tick-policy discard, guest tick=lapic
  qemu-irqchip-on  QEMU/KVM, -enable-kvm, kernel-irqchip=on, -serial stdio
                   (the guest's own LAPIC tick: QEMU has no pv tick)

One setup's VMs run at a time, all N together; the setups one after
another in one run, their order rotated with each of --repeat rounds. For
each setup:

  start     spawn -> the guest's "idle: N cpus up" line on the serial
            port, per VM; all N are spawned back to back, so they boot
            side by side (median and slowest)
  wake-ups  context switches per second (voluntary + nonvoluntary, every
            thread: /proc/PID/task/*/status) of all N VMs together, over
            --window s that start --settle s after the last VM is up
  CPU %     host CPU time (utime + stime, /proc/PID/stat) of all N VMs
            over the window, in % of one host CPU
  RSS, PSS  per VM at the end of the window (/proc/PID/smaps_rollup),
            median over the N VMs. PSS is the figure of the last line:
            it divides the pages the N processes share (the binary, the
            libraries) among them, so N x PSS is what N VMs take, where
            N x RSS would count the shared pages N times
  wake      one byte written to every VM's serial port (its stdin; QEMU's
            -serial stdio) back to back; the time until each guest has
            printed "idle: woken by serial" (per VM: from its own byte,
            median), and until all have (from the first byte). The
            guest runs with settle=0, so it reports the wake-up at once
            instead of first waiting for ticks a held-back LAPIC tick
            still owes it

With --repeat R > 1 each figure is the median over the rounds. The
table has one row per setup; the last line is exactly:

  density: N VMs, sysidle X wake-ups/s Y MiB/VM, qemu Z wake-ups/s W MiB/VM

X, Z: context switches per second of all N VMs of vmm-sysidle and of
qemu-irqchip-on; Y, W: their median PSS per VM in MiB; "n/a" for a setup
not run, failed, or (QEMU) not installed.

--vcpus-overhead LIST (e.g. 1,64,1024), a mode of its own (--vms,
--cpus, --setups, --window, --repeat do not apply): ONE VM of each vCPU
count in LIST under this VMM --sysidle, under QEMU kernel-irqchip=on
(machine pc, at most 255 vCPUs) and under QEMU as it takes more than 255
(qemu-q35-split: machine q35, kernel-irqchip=split, intel-iommu with
intremap=on,eim=on; QEMU 7.2 takes at most 288 there), idle.elf hz=--hz idle, measured --settle s after boot: its
RSS and PSS, its threads, the CPUs the guest brought up (as it prints
them) and the kvm_run mappings of its vCPUs (anon_inode:kvm-vcpu in
/proc/PID/smaps); then the cost per vCPU between successive counts (RSS
and PSS delta / vCPU delta), the vCPU thread stack size the VMM asks for
(read from its source) and the kvm_run mapping per vCPU. A QEMU that
refuses a count is reported with its own message. A boot gets
--vcpus-timeout s (300: 1024 vCPU threads on 2 host CPUs boot slowly),
with progress every 10 s. Last line:

  vcpus-overhead: vmm-sysidle X KiB/vCPU, qemu Z KiB/vCPU

(the RSS delta per vCPU between the smallest and the largest count that
booted; "n/a" when fewer than two did).

Every process started runs in a session of its own and is killed by its
PID (SIGKILL to its process group) when its setup ends, and whatever ends
the benchmark (an error, Ctrl-C, SIGTERM); every wait is bounded
(--timeout, --vcpus-timeout, --wake-timeout) and a VM that misses one is
reported with its exit status and the last line of its stderr.

Not a test: numbers for the closing note of a change.
"""
import argparse
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time

from benchrun import Run, idle_guest_setups, kill_live, read_until_all
from benchstats import (mem_available_kib, proc_cpu_s, proc_ctxt,
                        proc_mem_kib, proc_threads, vcpu_mappings_kib)

SETUPS = ("vmm-sysidle", "vmm", "vmm-catchup", "vmm-discard",
          "qemu-irqchip-on")
LAPIC_TICK_SETUPS = ("vmm-catchup", "vmm-discard")
VCPUS_SETUPS = ("vmm-sysidle", "qemu-irqchip-on", "qemu-q35-split")
MAX_VMS = 100
PROCESS_MIB = 64  # at most what a VMM or QEMU process takes beside guest RAM
UP = re.compile(rb"idle: (\d+) cpus up")
TICK = re.compile(rb"# idle: tick=(\w+)")
WOKEN = re.compile(rb"idle: woken by serial[^\n]*\n")
STACK_SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                            os.pardir, "vmm", "machine", "vcpu.c")


def say(text):
    """A progress line on stderr, at once."""
    print("# " + text, file=sys.stderr, flush=True)


def start_vms(cmd, n, timeout, errdir, label):
    """Spawns @n processes of @cmd back to back, each in its session, its
    stderr in a file under @errdir named after @label; returns the Runs
    (in benchrun.LIVE until killed). The caller kills them (kill_vms)."""
    runs = []
    for i in range(n):
        with open(os.path.join(errdir, f"{label}-{i}.err"), "wb") as err:
            run = Run(cmd, timeout, stderr=err)
        run.errpath = err.name
        runs.append(run)
    return runs


def kill_vms(runs):
    """SIGKILLs every run's process group and reaps it (bounded)."""
    for run in runs:
        run.kill()


def why_missing(run, what, waited):
    """Why @run did not print @what: its exit status and the last line of
    its stderr, or that it is still running after @waited s. A run whose
    stdout closed gets 5 s to exit, for its status."""
    if run.eof:
        try:
            run.p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
    rc = run.p.poll()
    try:
        with open(run.errpath, errors="replace") as f:
            lines = [l.strip() for l in f if l.strip()]
    except OSError:
        lines = []
    tail = lines[-1] if lines else "(no stderr)"
    if rc is None:
        return f"no {what} line in {waited:.0f} s (PID {run.p.pid}); {tail}"
    return f"exited {rc} before its {what} line: {tail}"


def wait_up(runs, timeout, label, every=10.0):
    """Waits up to @timeout s for every run's "cpus up" line, progress on
    stderr every @every s. Returns ({run: (s from spawn, cpus up)}, error
    or None)."""
    def progress(waited, done):
        say(f"{label}: {done}/{len(runs)} up after {waited:.0f} s")
    found = read_until_all(runs, UP, time.monotonic() + timeout, progress,
                           every)
    missing = [r for r in runs if r not in found]
    if missing:
        return None, (f"{len(missing)} of {len(runs)} not up: "
                      + why_missing(missing[0], "'cpus up'", timeout))
    return {r: (t - r.t0, int(m.group(1)))
            for r, (t, m) in found.items()}, None


def guest_tick(run):
    """The tick the guest says it runs (pv, lapic, none), or '?'."""
    m = TICK.search(run.out)
    return m.group(1).decode() if m else "?"


def window(runs, settle, seconds):
    """Lets @settle s pass (the steady state is what is measured: --sysidle
    needs a moment to see full idle), then measures @seconds s of all the
    runs together. Returns (context switches/s, CPU % of one host CPU);
    OSError when one of them is gone."""
    time.sleep(settle)
    pids = [r.p.pid for r in runs]
    cpu0, ctxt0 = sum(map(proc_cpu_s, pids)), sum(map(proc_ctxt, pids))
    t0 = time.monotonic()
    time.sleep(seconds)
    cpu1, ctxt1 = sum(map(proc_cpu_s, pids)), sum(map(proc_ctxt, pids))
    span = time.monotonic() - t0
    return (ctxt1 - ctxt0) / span, 100.0 * (cpu1 - cpu0) / span


def wake_all(runs, timeout):
    """Writes one byte to every run's serial port at once and waits up to
    @timeout s for each guest's "woken by serial" line. Returns (s until
    all woke from the first byte, median s per VM from its own byte,
    error or None)."""
    sent = {}
    for r in runs:
        sent[r] = time.monotonic()
        if not r.send(b"w"):
            return None, None, f"PID {r.p.pid}: its stdin is closed"
    found = read_until_all(runs, WOKEN, time.monotonic() + timeout)
    missing = [r for r in runs if r not in found]
    if missing:
        return None, None, (f"{len(missing)} of {len(runs)} not woken: "
                            + why_missing(missing[0], "'woken by serial'",
                                          timeout))
    per_vm = [found[r][0] - sent[r] for r in runs]
    return (max(t for t, _ in found.values()) - min(sent.values()),
            statistics.median(per_vm), None)


def one_round(name, cmd, a, errdir):
    """One round of setup @name: a.vms VMs of @cmd started together,
    measured, woken, killed. Returns the round's figures, or {"error":
    why}; no VM of it is left when it returns."""
    runs = start_vms(cmd, a.vms, a.timeout, errdir, name)
    say(f"{name}: PIDs " + " ".join(str(r.p.pid) for r in runs))
    try:
        up, err = wait_up(runs, a.timeout, name)
        if err:
            return {"error": err}
        try:
            ctxt_s, cpu_pct = window(runs, a.settle, a.window)
            mem = [proc_mem_kib(r.p.pid) for r in runs]
            threads = [proc_threads(r.p.pid) for r in runs]
        except OSError:
            gone = next((r for r in runs if r.p.poll() is not None), runs[0])
            return {"error": why_missing(gone, "window's end", a.window)}
        all_s, per_vm_s, err = wake_all(runs, a.wake_timeout)
        if err:
            return {"error": err}
        starts = [s for s, _ in up.values()]
        return {"tick": guest_tick(runs[0]),
                "cpus_up": min(c for _, c in up.values()),
                "start_med_s": statistics.median(starts),
                "start_max_s": max(starts),
                "ctxt_s": ctxt_s, "cpu_pct": cpu_pct,
                "rss_kib": statistics.median(m[0] for m in mem),
                "pss_kib": statistics.median(m[1] for m in mem),
                "threads": statistics.median(threads),
                "wake_all_s": all_s, "wake_vm_s": per_vm_s}
    finally:
        kill_vms(runs)


def medians(rounds):
    """The figures of a setup's rounds, each the median over the rounds
    that did not fail; None when all failed (then "error" is the last
    round's error)."""
    ok = [r for r in rounds if "error" not in r]
    if not ok:
        return None
    out = {k: statistics.median(r[k] for r in ok) for k in ok[0]
           if k != "tick"}
    out["tick"] = ok[0]["tick"]
    out["rounds"] = len(ok)
    return out


def print_table(a, rounds):
    """One row per setup of a.setups with the medians of its @rounds (a
    setup that could not run: a row saying why)."""
    print(f"density: {a.vms} VMs x {a.cpus} vCPUs, {a.mem} MiB, idle.elf "
          f"hz={a.hz}; window {a.window:g} s after {a.settle:g} s; "
          f"{a.repeat} round(s)")
    print(f"{'setup':16s} {'tick':5s} {'cpus':>4s} {'start s':>11s} "
          f"{'wake-ups/s':>10s} {'/VM':>7s} {'CPU %':>6s} {'/VM':>6s} "
          f"{'RSS MiB':>7s} {'PSS MiB':>7s} {'thr':>4s} "
          f"{'wake all':>8s} {'/VM':>7s}")
    print(f"{'':16s} {'':5s} {'/VM':>4s} {'med/max':>11s} {'all VMs':>10s} "
          f"{'':7s} {'all':>6s} {'':6s} {'/VM':>7s} {'/VM':>7s} {'/VM':>4s} "
          f"{'ms':>8s} {'med ms':>7s}")
    for name in a.setups:
        if name not in rounds:
            print(f"{name:16s} not run: qemu-system-x86_64 not found")
            continue
        m = medians(rounds[name])
        if m is None:
            print(f"{name:16s} failed: {rounds[name][-1]['error']}")
            continue
        n = a.vms
        print(f"{name:16s} {m['tick']:5s} {m['cpus_up']:4.0f} "
              f"{m['start_med_s']:5.2f}/{m['start_max_s']:<5.2f} "
              f"{m['ctxt_s']:10.1f} {m['ctxt_s'] / n:7.1f} "
              f"{m['cpu_pct']:6.2f} {m['cpu_pct'] / n:6.3f} "
              f"{m['rss_kib'] / 1024:7.1f} {m['pss_kib'] / 1024:7.1f} "
              f"{m['threads']:4.0f} {m['wake_all_s'] * 1000:8.1f} "
              f"{m['wake_vm_s'] * 1000:7.1f}")
        failed = len(rounds[name]) - m["rounds"]
        if failed:
            print(f"{'':16s} {failed} of {len(rounds[name])} rounds failed: "
                  f"{next(r for r in rounds[name] if 'error' in r)['error']}")


def last_line(a, rounds):
    """The summary line, exactly as --help describes it."""
    def part(label, name):
        m = medians(rounds[name]) if name in rounds else None
        if m is None:
            return f"{label} n/a"
        return (f"{label} {m['ctxt_s']:.1f} wake-ups/s "
                f"{m['pss_kib'] / 1024:.1f} MiB/VM")
    return (f"density: {a.vms} VMs, {part('sysidle', 'vmm-sysidle')}, "
            f"{part('qemu', 'qemu-irqchip-on')}")


def density(a, setups, errdir):
    """Item 2: the setups' rounds, interleaved; prints the table and the
    last line. Returns the exit status (0; 1 when a setup always failed)."""
    names = [n for n in a.setups if n in setups]
    rounds = {n: [] for n in names}
    for i in range(a.repeat if names else 0):
        k = i % len(names)
        for name in names[k:] + names[:k]:
            app = f"hz={a.hz} settle=0" + (
                " tick=lapic" if name in LAPIC_TICK_SETUPS else "")
            say(f"round {i + 1}/{a.repeat}: {name}: starting {a.vms} VMs")
            r = one_round(name, setups[name](a.cpus, app), a, errdir)
            rounds[name].append(r)
            say(f"{name}: " + (r["error"] if "error" in r else
                               f"{r['ctxt_s']:.1f} wake-ups/s, "
                               f"{r['pss_kib'] / 1024:.1f} MiB PSS/VM"))
    print_table(a, rounds)
    print(last_line(a, rounds))
    return 1 if any(medians(r) is None for r in rounds.values()) else 0


def stack_size_kib():
    """The vCPU thread stack size the VMM asks for (the define passed to
    pthread_attr_setstacksize in its source), KiB; None when not found."""
    try:
        with open(STACK_SOURCE) as f:
            src = f.read()
    except OSError:
        return None
    call = re.search(r"pthread_attr_setstacksize\(&\w+,\s*(\w+)\)", src)
    if not call:
        return None
    define = re.search(r"#define\s+%s\s+\((\d+)u?\s*<<\s*(\d+)\)"
                       % re.escape(call.group(1)), src)
    return (int(define.group(1)) << int(define.group(2))) // 1024 \
        if define else None


def one_vcpus_run(name, cmd, a, errdir, count):
    """ONE VM of setup @name with @count vCPUs, idle: its memory, threads
    and kvm_run mappings --settle s after boot, or {"error": why}; killed
    before it returns."""
    runs = start_vms(cmd, 1, a.vcpus_timeout, errdir, f"{name}-{count}")
    try:
        up, err = wait_up(runs, a.vcpus_timeout, f"{name} {count} vCPUs")
        if err:
            return {"error": err}
        (start_s, cpus_up), = up.values()
        time.sleep(a.settle)  # what an idle VM holds, not its boot
        pid = runs[0].p.pid
        try:
            rss, pss = proc_mem_kib(pid)
            maps, maps_size, maps_rss = vcpu_mappings_kib(pid)
            threads = proc_threads(pid)
        except OSError:
            return {"error": why_missing(runs[0], "measurement", a.settle)}
        return {"start_s": start_s, "cpus_up": cpus_up, "rss_kib": rss,
                "pss_kib": pss, "threads": threads, "maps": maps,
                "maps_size_kib": maps_size, "maps_rss_kib": maps_rss}
    finally:
        kill_vms(runs)


def per_vcpu(rows, name, key):
    """[(from, to, KiB per vCPU of @key)] between successive counts of
    setup @name that booted."""
    ok = sorted((c, r) for (n, c), r in rows.items()
                if n == name and "error" not in r)
    return [(c0, c1, (r1[key] - r0[key]) / (c1 - c0))
            for (c0, r0), (c1, r1) in zip(ok, ok[1:])]


def vcpus_overhead(a, setups, errdir):
    """Item 4: one VM per vCPU count and setup; prints the rows, the cost
    per vCPU and the last line. Returns the exit status (0)."""
    names = [n for n in VCPUS_SETUPS if n in setups]
    rows = {}
    for count in a.vcpus_overhead:
        for name in names:
            say(f"{name}: one VM of {count} vCPUs")
            rows[name, count] = one_vcpus_run(
                name, setups[name](count, f"hz={a.hz}"), a, errdir, count)
    print(f"vcpus-overhead: one VM, {a.mem} MiB, idle.elf hz={a.hz}, "
          f"measured {a.settle:g} s after boot")
    print(f"{'vCPUs':>5s} {'setup':16s} {'up':>5s} {'boot s':>7s} "
          f"{'thr':>5s} {'RSS MiB':>8s} {'PSS MiB':>8s} "
          f"{'kvm_run KiB/vCPU':>16s}")
    for count in a.vcpus_overhead:
        for name in names:
            r = rows[name, count]
            if "error" in r:
                print(f"{count:5d} {name:16s} refused or failed: "
                      f"{r['error']}")
                continue
            per_map = (f"{r['maps_size_kib'] / r['maps']:.0f} "
                       f"(RSS {r['maps_rss_kib'] / r['maps']:.0f})"
                       if r["maps"] else "-")
            print(f"{count:5d} {name:16s} {r['cpus_up']:5d} "
                  f"{r['start_s']:7.2f} {r['threads']:5d} "
                  f"{r['rss_kib'] / 1024:8.1f} {r['pss_kib'] / 1024:8.1f} "
                  f"{per_map:>16s}")
    stack = stack_size_kib()
    print("vCPU thread stack the VMM asks for (pthread_attr_setstacksize): "
          + (f"{stack} KiB (virtual; RSS only where touched)" if stack
             else "not found in its source"))
    for name in names:
        for key, what in (("rss_kib", "RSS"), ("pss_kib", "PSS")):
            steps = per_vcpu(rows, name, key)
            if steps:
                print(f"{name} {what} per vCPU: " + ", ".join(
                    f"{c0} -> {c1}: {k:.1f} KiB" for c0, c1, k in steps))
    if "qemu-irqchip-on" not in setups:
        print("qemu-irqchip-on: qemu-system-x86_64 not found")

    def widest(name):
        ok = sorted((c, r) for (n, c), r in rows.items()
                    if n == name and "error" not in r)
        if len(ok) < 2:
            return "n/a"
        (c0, r0), (c1, r1) = ok[0], ok[-1]
        return f"{(r1['rss_kib'] - r0['rss_kib']) / (c1 - c0):.1f} KiB/vCPU"
    print(f"vcpus-overhead: vmm-sysidle {widest('vmm-sysidle')}, "
          f"qemu {widest('qemu-irqchip-on')}")
    return 0


def parse_args():
    """The command line, checked; exits with a message when it is wrong or
    the VMs would not fit in this host's memory."""
    ap = argparse.ArgumentParser(
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build",
                    help="meson build directory (default: build)")
    ap.add_argument("--vms", type=int, default=12,
                    help=f"VMs per setup, 1..{MAX_VMS} (12)")
    ap.add_argument("--cpus", type=int, default=2, help="vCPUs per VM (2)")
    ap.add_argument("--mem", type=int, default=64,
                    help="guest RAM per VM, MiB (64)")
    ap.add_argument("--hz", type=int, default=250,
                    help="the guest's tick rate (250)")
    ap.add_argument("--setups", default=",".join(SETUPS),
                    help="comma-separated, in this order (default: all: "
                    + ",".join(SETUPS) + ")")
    ap.add_argument("--window", type=float, default=10,
                    help="seconds measured (10)")
    ap.add_argument("--settle", type=float, default=2,
                    help="seconds after the last VM is up before the "
                    "window (2)")
    ap.add_argument("--repeat", type=int, default=1,
                    help="rounds, the setups' order rotated in each; "
                    "medians over them (1)")
    ap.add_argument("--timeout", type=float, default=120,
                    help="seconds for all VMs of a setup to boot (120)")
    ap.add_argument("--wake-timeout", type=float, default=30,
                    help="seconds for all of them to report a wake-up (30)")
    ap.add_argument("--vcpus-overhead", metavar="LIST",
                    help="the per-vCPU mode instead: one VM of each vCPU "
                    "count in LIST, e.g. 1,64,1024 (1..1024)")
    ap.add_argument("--vcpus-timeout", type=float, default=300,
                    help="seconds for one such VM to boot (300)")
    a = ap.parse_args()
    if not 1 <= a.vms <= MAX_VMS:
        ap.error(f"--vms takes 1..{MAX_VMS}")
    if a.cpus < 1 or a.mem < 1 or a.hz < 0 or a.repeat < 1 or \
            min(a.window, a.settle, a.timeout, a.wake_timeout,
                a.vcpus_timeout) < 0 or a.window == 0:
        ap.error("--cpus, --mem, --repeat and --window must be positive, "
                 "--hz and the other times not negative")
    a.setups = a.setups.split(",")
    unknown = [n for n in a.setups if n not in SETUPS]
    if unknown or len(set(a.setups)) != len(a.setups):
        ap.error(f"--setups: unknown or repeated {unknown or a.setups}; "
                 f"known: {', '.join(SETUPS)}")
    if a.vcpus_overhead:
        try:
            a.vcpus_overhead = [int(x) for x in a.vcpus_overhead.split(",")]
        except ValueError:
            ap.error("--vcpus-overhead takes comma-separated integers")
        if not all(1 <= c <= 1024 for c in a.vcpus_overhead):
            ap.error("--vcpus-overhead: counts 1..1024")
    vms = 1 if a.vcpus_overhead else a.vms
    per_vm_mib = a.mem + PROCESS_MIB
    avail_mib = mem_available_kib() // 1024
    if vms * per_vm_mib > avail_mib:
        sys.exit(f"density: {vms} VMs x ({a.mem} MiB guest RAM + "
                 f"{PROCESS_MIB} MiB for the process) = {vms * per_vm_mib} "
                 f"MiB, more than this host's MemAvailable {avail_mib} MiB: "
                 f"at most {avail_mib // per_vm_mib} VMs fit")
    return a


def main():
    """Checks the host, runs the chosen mode; every VM started is killed
    whatever ends it."""
    # SIGTERM unwinds like Ctrl-C, so the finally blocks kill the VMs.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    a = parse_args()
    image = os.path.join(a.build, "guest-tools", "idle.elf")
    vmm = os.path.join(a.build, "vmm")
    if not os.path.exists(image) or not os.access(vmm, os.X_OK):
        sys.exit(f"density: {image} or {vmm} not found: build first")
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        sys.exit("density: /dev/kvm is not usable here")
    setups = idle_guest_setups(a.build, image, a.mem)
    if "qemu-irqchip-on" not in setups:
        say("qemu-system-x86_64 not found: no QEMU setup (qemu n/a)")
    try:
        with tempfile.TemporaryDirectory(prefix="density-") as errdir:
            if a.vcpus_overhead:
                return vcpus_overhead(a, setups, errdir)
            return density(a, setups, errdir)
    except KeyboardInterrupt:
        say("interrupted: every VM started is killed")
        return 130
    finally:
        kill_live()


if __name__ == "__main__":
    sys.exit(main())
