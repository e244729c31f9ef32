#!/usr/bin/env python3
"""When consolidation (tools/sysidle-consolidate, the pack policy) pays: the
host CPU time, the wake-ups and the CPUs that idle VMs cost with and
without it, and what their guests see.

8 VMs of 2 vCPUs (--vms, --vcpus) under this VMM with --sysidle, each with
its own --control socket in a temporary directory, measured over a
--window second steady window. Workloads:

  idle       idle.elf hz=250: every vCPU halts, pv tick: FULL_NOTED, the
             tick stopped, nothing in the VM wakes
  idletick   idle.elf hz=250 tick=lapic: the guest's own periodic LAPIC
             tick at 250 Hz (a guest that never heard of the pv tick); the
             VM stays FULL_NOTED while every tick is delivered, so it
             burns a little CPU while fully idle
  job1hz     burst.elf period=1000 duty=0: a tiny job once a second on a
             random vCPU (its one-shot LAPIC timer; an IPI when that is
             vCPU 1), FULL_NOTED between jobs; report=5
  job10hz    the same ten times a second (period=100); report=50
  busy1      VM 0 busy all the time (burst.elf period=100 duty=100),
             the 7 others as idle

Setups, per workload W: W/nopack (no daemon), W/pack (the tool, --tool,
with --state-dir in the run's directory and --pack-args), and with
--old-tool PATH, W/pack-old (an older tool, e.g. a copy of an older
tree's tools/, started with --dir and --idle-cpus only); "none" is no VM
at all, the shared host's own background. All interleaved in one run,
--repeat times, the order rotated at each repeat.

Before the window: every VM booted (all vCPU threads started) and seen in
FULL_NOTED at least once (the busy VM excepted); with pack, every VM that
the workload expects packed (idle, idletick, job1hz: all; busy1: all but
the busy one; job10hz: none is waited for, its idle periods are shorter
than the tool's --pack-after) reported packed by the daemon ("pack NAME:
..." on its stdout, after its time and level if it prints them) with its
vCPU and housekeeping threads' affinity read back as the idle CPU; then
--settle seconds.

"Ran on" (method): for every thread of every VM process (/proc/PID/task at
the start of the window; the vCPU and housekeeping TIDs, the threads the
pack policy moves, come from each VM's control socket "status") and of the
daemon, one pair of perf software counters per host CPU in counting mode
(perf_event_open(pid=TID, cpu=C): task-clock and context-switches, counted
only while that thread runs on C). A thread ran on C in the window iff its
task-clock on C grew; this cannot miss a run however short, and counting
mode makes no wake-ups of its own (the counters are read at the start and
the end only). Limits: threads created during the window are not counted
(a booted VM creates none); the counters see the host kernel's view (this
is one host, itself maybe a VM). Without perf_event_open the fallback
samples /proc/PID/task/TID/stat field 39 (the CPU last run on) every
--sample-ms ms, which misses runs shorter than that: the output says
which method ran.

"Host wake-ups" (method): per host CPU over the window, system-wide,
whatever caused them (other work on a shared host included, hence the
medians, and the "none" setup for the background): idle-state entries
(sum of /sys/devices/system/cpu/cpuN/cpuidle/state*/usage: each is one
wake-up of an idle CPU, when cpuidle exists; a CPU kept busy shows few),
local timer interrupts (LOC in /proc/interrupts), and context switches (a
perf counter per CPU; the /proc/stat total too). Attributable to the VMs
alone: "VM runs" = context switches of the VMs' own threads per CPU (each
switch-out ends one run, i.e. one wake-up of that thread).

"Host CPU time": the task-clock (perf, counting mode) of every thread of
the VMs and of the daemon over the window, ms per second. "Wake-ups, VMs
+ daemon": their threads' context switches (each switch-out ends one run,
one wake-up of that thread). "Actions/s": the daemon's pack and restore
lines in the window. "Job start delay": the guests' "# late: n=N p50_us
p99_us max_us" lines written in the window (burst.elf report=N: how late
CPU 0 woke after each round's deadline, as the guest's TSC sees it); the
table gives the median of the reports' p50, the median of their p99 and
the largest max. Verdict per figure: "ok" when pack's median is not
above no pack's, "noise" when it is above but pack's smallest repeat is
not above no pack's largest, "MORE" otherwise.

Every VM and the daemon are stopped at the end of each run: SIGTERM (the
daemon restores what it packed), SIGKILL by PID after a bound; a VM that
does not boot within --timeout is killed and the run reported as failed,
not dropped.

Its parts, beside it: consolidate_setups.py (the workloads and setups, one
run of one: the VMs, the daemon, the window), consolidate_counters.py
(the perf counters, the sampler, the host-wide counters),
consolidate_report.py (the table, the summary, the verdicts).

Not a test: numbers for the closing note of a change.
"""
import argparse
import json
import os
import signal
import sys
import tempfile

from consolidate_counters import PERF_COUNT_SW_TASK_CLOCK, perf_open
from consolidate_report import fmt_cpu, print_summary, print_table
from consolidate_setups import DEFAULT_SETUPS, GUESTS, SETUPS, WORKLOADS, Run


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--tool", default=os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "tools",
        "sysidle-consolidate"))
    ap.add_argument("--setups", default=None,
                    help="comma-separated, from: " + ", ".join(SETUPS) +
                    " (default: every one but pack-old; with "
                    "--old-tool, those too)")
    ap.add_argument("--old-tool", default=None, metavar="PATH",
                    help="an older sysidle-consolidate (e.g. a copy of an "
                         "older tree's tools/): the pack-old setups")
    ap.add_argument("--pack-args", default="",
                    help="more options for the (new) tool, e.g. "
                         "'--pack-after 500ms --restore-after 200ms'")
    ap.add_argument("--vms", type=int, default=8)
    ap.add_argument("--vcpus", type=int, default=2)
    ap.add_argument("--window", type=float, default=10,
                    help="measured window, seconds (10)")
    ap.add_argument("--settle", type=float, default=1,
                    help="seconds between ready (and packed) and the "
                         "window (1)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=60,
                    help="seconds for the VMs to boot / be packed (60)")
    ap.add_argument("--method", choices=["perf", "sample"], default=None,
                    help="how 'ran on' is measured (default: perf "
                         "counters when perf_event_open works)")
    ap.add_argument("--sample-ms", type=float, default=1.0,
                    help="sampling period of --method sample (1 ms)")
    ap.add_argument("--json", action="store_true",
                    help="also one JSON object per run")
    a = ap.parse_args()
    if a.setups is None:
        a.setups = ",".join(DEFAULT_SETUPS if a.old_tool is None
                            else list(SETUPS))
    names = [s for s in a.setups.split(",") if s]
    if any(SETUPS[n][1] == "old" for n in names if n in SETUPS) and \
            not a.old_tool:
        ap.error("pack-old setups need --old-tool")
    for s in names:
        if s not in SETUPS:
            ap.error("unknown setup %r" % s)
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        sys.exit("consolidate: /dev/kvm is not usable here")
    for g in {GUESTS[g][0] for s in names if SETUPS[s][0]
              for g in WORKLOADS[SETUPS[s][0]][:2]}:
        p = os.path.join(a.build, "guest-tools", g)
        if not os.path.exists(p):
            sys.exit("consolidate: %s not found: build first" % p)
    if not os.path.exists(os.path.join(a.build, "vmm")):
        sys.exit("consolidate: %s/vmm not found: build first" % a.build)
    # The VMs inherit this process's affinity: every CPU it may use.
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        sys.exit("consolidate: only CPU %s to run on: nothing to pack" %
                 cpus)
    idle_cpu = cpus[-1]
    if a.method is None:
        try:
            os.close(perf_open(PERF_COUNT_SW_TASK_CLOCK, os.getpid(),
                               cpus[0]))
            a.method = "perf"
        except OSError as e:
            print("# perf_event_open failed (%s): sampling instead" % e,
                  file=sys.stderr)
            a.method = "sample"

    print("# %d VMs x %d vCPUs, host CPUs %s, idle CPU for pack %d, "
          "window %.0f s, %d repeats, setups interleaved" %
          (a.vms, a.vcpus, ",".join(map(str, cpus)), idle_cpu, a.window,
           a.repeat))
    for g in sorted({g for s in names if SETUPS[s][0]
                     for g in WORKLOADS[SETUPS[s][0]][:2]}):
        print("# guest %-8s = %s %s" % (g, GUESTS[g][0], GUESTS[g][1]))
    print("# tool %s %s%s" % (a.tool, a.pack_args, "; old tool %s" %
                              a.old_tool if a.old_tool else ""))
    est = len(names) * a.repeat * (a.window + a.settle + 8)
    print("# about %.0f min (%d runs of the window + settle + boot)" %
          (est / 60, len(names) * a.repeat))
    if a.method == "perf":
        print("# ran-on: perf software counters per (thread, CPU), counting "
              "mode (task-clock grew = ran there; cannot miss short runs; "
              "threads created during the window not counted)")
    else:
        print("# ran-on: /proc/TID/stat processor sampled every %.1f ms "
              "(misses runs shorter than that)" % a.sample_ms)
    print("# wake-ups: idle-exits = cpuidle state entries per CPU (wake-ups "
          "of an idle CPU: a saturated CPU shows few); LOC = local timer "
          "interrupts per CPU; cswitch = context switches per CPU (perf, "
          "system-wide); all host-wide, other load included: 'none' (no VM) "
          "is the background")
    print("# VM runs = context switches of the VMs' own threads (one per "
          "run); cpus/all//vm = distinct CPUs ran on: vCPU+housekeeping "
          "threads of all VMs / all VM threads / per VM (vCPU+hk), mean; "
          "on%d = share of VM thread CPU time on CPU %d; tool/s = the "
          "daemon's context switches per CPU" % (idle_cpu, idle_cpu))
    sys.stdout.flush()

    os.sched_setaffinity(0, cpus)
    rows = []
    stopping = []

    def on_signal(signum, frame):
        stopping.append(signum)
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, on_signal)
    try:
        for rep in range(1, a.repeat + 1):
            k = (rep - 1) % len(names)      # a rotating order
            for name in names[k:] + names[:k]:
                with tempfile.TemporaryDirectory(prefix="consolidate-") \
                        as tmp:
                    run = Run(a, name, tmp, cpus, idle_cpu)
                    try:
                        row = run.measure()
                    except (RuntimeError, OSError) as e:
                        row = {"setup": name, "status": "failed: %s" % e}
                row["rep"] = rep
                rows.append(row)
                if row["status"] == "ok":
                    print("# %d %-18s packed=%s cpus=%d/%d VM runs/s=%s "
                          "idle-exits/s=%s LOC/s=%s" % (
                              rep, name, row["packed"], row["cpus_pack"],
                              row["cpus_all"], fmt_cpu(row["vm_runs_s"], cpus),
                              fmt_cpu(row["idle_exits_s"], cpus),
                              fmt_cpu(row["loc_s"], cpus)),
                          file=sys.stderr, flush=True)
                else:
                    print("# %d %-18s %s" % (rep, name, row["status"]),
                          file=sys.stderr, flush=True)
    except KeyboardInterrupt:
        print("# interrupted: partial results", file=sys.stderr)
    print()
    print_table(rows, cpus, idle_cpu)
    print_summary(rows, names, cpus, idle_cpu)
    if a.json:
        for r in rows:
            print(json.dumps(r, default=str))
    return 1 if stopping else 0


if __name__ == "__main__":
    sys.exit(main())
