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

Not a test: numbers for the closing note of a change.
"""
import argparse
import ctypes
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

# workload: (guest of VM 0, guest of the others, what must be packed
# before the window: "all", "idle" (every VM but the busy VM 0), "none")
WORKLOADS = {
    "idle": ("idle", "idle", "all"),
    "idletick": ("idletick", "idletick", "all"),
    "job1hz": ("job1hz", "job1hz", "all"),
    "job10hz": ("job10hz", "job10hz", "none"),
    "busy1": ("busy", "idle", "idle"),
}
GUESTS = {
    "idle": ("idle.elf", "hz=250"),
    "idletick": ("idle.elf", "hz=250 tick=lapic"),
    "job1hz": ("burst.elf", "rounds=1000000 period=1000 duty=0 hz=250 "
               "report=5"),
    "job10hz": ("burst.elf", "rounds=1000000 period=100 duty=0 hz=250 "
                "report=50"),
    "busy": ("burst.elf", "rounds=1000000 period=100 duty=100 hz=250"),
}
# setup name -> (workload or None, daemon: None, "new" or "old")
SETUPS = {"none": (None, None)}
for _w in WORKLOADS:
    SETUPS[_w + "/nopack"] = (_w, None)
    SETUPS[_w + "/pack"] = (_w, "new")
    SETUPS[_w + "/pack-old"] = (_w, "old")
DEFAULT_SETUPS = [n for n, (w, d) in SETUPS.items() if d != "old"]
STOP_TIMEOUT_S = 5.0

# ---- perf counters (counting mode) -------------------------------------

PERF_TYPE_SOFTWARE = 1
PERF_COUNT_SW_TASK_CLOCK = 1
PERF_COUNT_SW_CONTEXT_SWITCHES = 3
NR_PERF_EVENT_OPEN = {"x86_64": 298, "aarch64": 241}.get(os.uname().machine)


class PerfAttr(ctypes.Structure):
    """struct perf_event_attr, PERF_ATTR_SIZE_VER0 (64 bytes)."""
    _fields_ = [("type", ctypes.c_uint32), ("size", ctypes.c_uint32),
                ("config", ctypes.c_uint64),
                ("sample_period", ctypes.c_uint64),
                ("sample_type", ctypes.c_uint64),
                ("read_format", ctypes.c_uint64),
                ("flags", ctypes.c_uint64),
                ("wakeup_events", ctypes.c_uint32),
                ("bp_type", ctypes.c_uint32),
                ("config1", ctypes.c_uint64)]


_libc = ctypes.CDLL(None, use_errno=True)


def perf_open(config, pid, cpu):
    """A software counter, enabled, counting; an fd or raises OSError."""
    if NR_PERF_EVENT_OPEN is None:
        raise OSError(0, "perf_event_open: unknown syscall number here")
    a = PerfAttr()
    a.type = PERF_TYPE_SOFTWARE
    a.size = ctypes.sizeof(PerfAttr)
    a.config = config
    fd = _libc.syscall(NR_PERF_EVENT_OPEN, ctypes.byref(a),
                       ctypes.c_int(pid), ctypes.c_int(cpu),
                       ctypes.c_int(-1), ctypes.c_ulong(0))
    if fd < 0:
        e = ctypes.get_errno()
        raise OSError(e, "perf_event_open: " + os.strerror(e))
    return fd


def perf_read(fd):
    try:
        return int.from_bytes(os.read(fd, 8), "little")
    except OSError:
        return 0


class Counters:
    """task-clock and context-switch counters per (thread, CPU), and
    context switches per CPU system-wide."""

    def __init__(self, tids, cpus):
        self.fds = {}       # (tid, cpu, kind) -> fd
        self.sys = {}       # cpu -> fd
        try:
            for tid in tids:
                for c in cpus:
                    for kind, cfg in (("ns", PERF_COUNT_SW_TASK_CLOCK),
                                      ("cs", PERF_COUNT_SW_CONTEXT_SWITCHES)):
                        try:
                            self.fds[(tid, c, kind)] = perf_open(cfg, tid, c)
                        except OSError as e:
                            if e.errno == 3:    # ESRCH: the thread ended
                                break
                            raise
            for c in cpus:
                self.sys[c] = perf_open(PERF_COUNT_SW_CONTEXT_SWITCHES, -1, c)
        except OSError:
            self.close()
            raise

    def read(self):
        return ({k: perf_read(fd) for k, fd in self.fds.items()},
                {c: perf_read(fd) for c, fd in self.sys.items()})

    def close(self):
        for fd in list(self.fds.values()) + list(self.sys.values()):
            os.close(fd)
        self.fds, self.sys = {}, {}


class Sampler(threading.Thread):
    """Fallback: the CPU each thread last ran on, every @step seconds."""

    def __init__(self, tids, step):
        super().__init__(daemon=True)
        self.tids, self.step = tids, step
        self.seen = {t: set() for t in tids}
        self.stop = threading.Event()
        self.samples = 0

    def run(self):
        while not self.stop.is_set():
            for t in self.tids:
                c = thread_cpu(t)
                if c is not None:
                    self.seen[t].add(c)
            self.samples += 1
            time.sleep(self.step)


def thread_cpu(tid):
    try:
        with open("/proc/%d/stat" % tid) as f:
            return int(f.read().rsplit(")", 1)[1].split()[36])
    except (OSError, ValueError, IndexError):
        return None

# ---- host-wide per-CPU counters ------------------------------------------


def loc_per_cpu(cpus):
    """Local timer interrupts per CPU (LOC in /proc/interrupts)."""
    with open("/proc/interrupts") as f:
        head = f.readline().split()
        idx = {int(h[3:]): i for i, h in enumerate(head) if h.startswith("CPU")}
        for line in f:
            p = line.split()
            if p and p[0] == "LOC:":
                return {c: int(p[1 + idx[c]]) for c in cpus if c in idx}
    return {}


def idle_entries(cpus):
    """cpuidle entries per CPU (the sum over its idle states), {} if none."""
    out = {}
    for c in cpus:
        d = "/sys/devices/system/cpu/cpu%d/cpuidle" % c
        try:
            states = [s for s in os.listdir(d) if s.startswith("state")]
            out[c] = sum(int(open(os.path.join(d, s, "usage")).read())
                         for s in states)
        except (OSError, ValueError):
            return {}
    return out


def proc_stat_ctxt():
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith("ctxt "):
                return int(line.split()[1])
    return 0

# ---- VMs and the daemon --------------------------------------------------


def status(path, timeout=2.0):
    """The VM's status object from its control socket, or None."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.settimeout(timeout)
        s.connect(path)
        s.sendall(b'{"cmd":"status"}\n')
        buf = b""
        while b"\n" not in buf:
            d = s.recv(65536)
            if not d:
                return None
            buf += d
        r = json.loads(buf.split(b"\n", 1)[0])
        return r["vm"] if isinstance(r, dict) and r.get("ok") else None
    except (OSError, ValueError, KeyError):
        return None
    finally:
        s.close()


def allowed(pid, tid):
    try:
        with open("/proc/%d/task/%d/status" % (pid, tid)) as f:
            for line in f:
                if line.startswith("Cpus_allowed_list:"):
                    return parse_cpus(line.split(":", 1)[1])
    except OSError:
        pass
    return None


def parse_cpus(text):
    cpus = set()
    for part in text.strip().split(","):
        if "-" in part:
            a, b = part.split("-")
            cpus.update(range(int(a), int(b) + 1))
        elif part:
            cpus.add(int(part))
    return cpus


def tasks(pid):
    try:
        return sorted(int(t) for t in os.listdir("/proc/%d/task" % pid))
    except OSError:
        return []


def stop_process(p, timeout=STOP_TIMEOUT_S):
    """SIGTERM, then SIGKILL (by PID) after @timeout s; the exit status,
    None if it had to be killed."""
    if p.poll() is None:
        try:
            p.send_signal(signal.SIGTERM)
        except ProcessLookupError:
            pass
    try:
        return p.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.kill(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait()
        return None


class Daemon:
    """sysidle-consolidate in the background; its stdout lines collected
    with their arrival time."""

    def __init__(self, tool, sockdir, idle_cpu, errpath, extra=()):
        self.err = open(errpath, "w")
        self.p = subprocess.Popen(
            [sys.executable, tool, "--dir", sockdir, "--idle-cpus",
             str(idle_cpu)] + list(extra), stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=self.err, text=True,
            start_new_session=True)
        self.lines = []     # (monotonic, line)
        self.t = threading.Thread(target=self._read, daemon=True)
        self.t.start()

    def _read(self):
        for line in self.p.stdout:
            self.lines.append((time.monotonic(), line.rstrip("\n")))

    def packed_names(self):
        # a line may start with a time and a level (the newer tool)
        return {m.group(1) for _, l in list(self.lines)
                for m in [re.search(r"(?:^|\s)pack (\S+): \d+ threads -> "
                                    r"cpus ", l)]
                if m and "[dry run]" not in l}

    def count(self, word, t0, t1):
        pat = re.compile(r"(?:^|\s)%s \S+: " % word)
        return sum(1 for t, l in list(self.lines)
                   if t0 <= t < t1 and pat.search(l))

    def stop(self):
        rc = stop_process(self.p, 10.0)
        self.t.join(2)
        self.err.close()
        return rc


class Run:
    """One setup: N VMs, maybe the daemon, one window."""

    def __init__(self, a, name, tmp, cpus, idle_cpu):
        self.a, self.name, self.tmp = a, name, tmp
        self.cpus, self.idle_cpu = cpus, idle_cpu
        self.workload, self.kind = SETUPS[name]
        self.sysidle = self.workload is not None
        self.pack = self.kind is not None
        self.vms = []       # (name, Popen, sock, outpath)
        self.daemon = None

    def start_vms(self):
        if self.workload is None:
            return
        first, rest, _ = WORKLOADS[self.workload]
        nohooks = os.path.join(self.tmp, "no-hooks")
        for i in range(self.a.vms):
            image, append = GUESTS[first if i == 0 else rest]
            image = os.path.join(self.a.build, "guest-tools", image)
            n = "cb%d" % i
            sock = os.path.join(self.tmp, n + ".sock")
            out = os.path.join(self.tmp, n + ".out")
            cmd = [os.path.join(self.a.build, "vmm"), "--cpus",
                   str(self.a.vcpus), "--name", n, "--control", sock,
                   "--hooks", nohooks, "--append", append]
            if self.sysidle:
                cmd.append("--sysidle")
            cmd.append(image)
            with open(out, "w") as fo:
                p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL,
                                     stdout=fo, stderr=subprocess.STDOUT,
                                     start_new_session=True)
            self.vms.append((n, p, sock, out))

    def stop_all(self):
        d = None
        if self.daemon:
            d = self.daemon.stop()
            self.daemon = None
        bad = []
        for n, p, _, _ in self.vms:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        end = time.monotonic() + STOP_TIMEOUT_S
        for n, p, _, _ in self.vms:
            try:
                p.wait(timeout=max(0.01, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                try:
                    os.kill(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait()
                bad.append(n)
        return d, bad

    def tail(self, out):
        try:
            with open(out) as f:
                return (f.read().strip().splitlines() or ["(no output)"])[-1]
        except OSError:
            return "(no output)"

    def wait_ready(self):
        """All VMs booted (and FULL_NOTED once under --sysidle): their
        status objects, or raises RuntimeError."""
        deadline = time.monotonic() + self.a.timeout
        sts = {}
        while time.monotonic() < deadline:
            for n, p, sock, out in self.vms:
                if p.poll() is not None:
                    raise RuntimeError("VM %s exited %s: %s" %
                                       (n, p.returncode, self.tail(out)))
                if n in sts:
                    continue
                st = status(sock)
                if not st or not all(v.get("tid") for v in st["vcpus"]) or \
                        not st.get("housekeeping_tid"):
                    continue
                if self.sysidle and self.expect_idle(n) and \
                        st["counters"]["full_idle_periods"] < 1:
                    continue
                sts[n] = st
            if len(sts) == len(self.vms):
                return sts
            time.sleep(0.1)
        raise RuntimeError("not ready in %.0f s: %s" % (
            self.a.timeout, ", ".join(n for n, *_ in self.vms
                                      if n not in sts)))

    def expect_idle(self, n):
        """False for the busy VM of a workload that has one."""
        return not (WORKLOADS[self.workload][2] == "idle" and n == "cb0")

    def wait_packed(self, sts):
        """Every VM the workload expects packed reported packed by the
        daemon, its vCPU and housekeeping threads read back on the idle
        CPU (job10hz: none is waited for: its VMs are never idle for
        long)."""
        want = WORKLOADS[self.workload][2]
        if want == "none":
            return
        sts = {n: st for n, st in sts.items() if self.expect_idle(n)}
        deadline = time.monotonic() + self.a.timeout
        seen = set()
        while time.monotonic() < deadline:
            names = self.daemon.packed_names()
            for n, st in sts.items():
                if n in seen or n not in names:
                    continue
                if all(allowed(st["pid"], t) == {self.idle_cpu}
                       for t in pack_tids(st)):
                    seen.add(n)
            if len(seen) == len(sts):
                return
            time.sleep(0.05)
        raise RuntimeError("not packed in %.0f s: %s" % (
            self.a.timeout, ", ".join(sorted(set(sts) - seen))))

    def measure(self):
        self.start_vms()
        try:
            sts = self.wait_ready()
            if self.pack:
                tool = self.a.tool if self.kind == "new" else \
                    self.a.old_tool
                extra = []
                if self.kind == "new":
                    extra = ["--state-dir", os.path.join(self.tmp, "state")]
                    extra += self.a.pack_args.split()
                self.daemon = Daemon(tool, self.tmp, self.idle_cpu,
                                     os.path.join(self.tmp, "daemon.err"),
                                     extra)
                self.wait_packed(sts)
            time.sleep(self.a.settle)
            return self.window(sts)
        finally:
            had_daemon = self.daemon is not None
            d, bad = self.stop_all()
            if had_daemon and d != 0:
                print("# %s: the daemon %s" % (self.name, "was killed"
                      if d is None else "exited %s" % d), file=sys.stderr)
            if bad:
                print("# %s: VMs killed with SIGKILL: %s" %
                      (self.name, " ".join(bad)), file=sys.stderr)

    def window(self, sts):
        a, cpus = self.a, self.cpus
        vm_pids = {n: st["pid"] for n, st in sts.items()}
        packset = {t for st in sts.values() for t in pack_tids(st)}
        vm_tids = {t for pid in vm_pids.values() for t in tasks(pid)}
        tool_tids = set(tasks(self.daemon.p.pid)) if self.daemon else set()
        all_tids = sorted(vm_tids | tool_tids)
        packed_now = sum(1 for st in sts.values()
                         if all(allowed(st["pid"], t) == {self.idle_cpu}
                                for t in pack_tids(st)))
        st0 = {n: status(sock) for n, _, sock, _ in self.vms}
        late0 = {out: os.path.getsize(out) for _, _, _, out in self.vms}
        counters = sampler = None
        if a.method == "perf":
            counters = Counters(all_tids, cpus)
        loc0, idl0, ctx0 = loc_per_cpu(cpus), idle_entries(cpus), \
            proc_stat_ctxt()
        if counters:
            per0, sys0 = counters.read()
        else:
            sampler = Sampler(all_tids, a.sample_ms / 1000.0)
            sampler.start()
        t0 = time.monotonic()
        time.sleep(a.window)
        t1 = time.monotonic()
        if counters:
            per1, sys1 = counters.read()
            counters.close()
        else:
            sampler.stop.set()
            sampler.join()
        loc1, idl1, ctx1 = loc_per_cpu(cpus), idle_entries(cpus), \
            proc_stat_ctxt()
        st1 = {n: status(sock) for n, _, sock, _ in self.vms}
        dt = t1 - t0
        late = late_reports(late0)
        alive = [n for n, p, *_ in self.vms if p.poll() is None]
        if len(alive) != len(self.vms):
            raise RuntimeError("VMs ended during the window")

        ran = {}     # tid -> set of CPUs it ran on
        runs = {c: 0 for c in cpus}          # VM thread runs per CPU
        runtime = {c: 0 for c in cpus}       # VM thread ns per CPU
        tool_cs = {c: 0 for c in cpus}      # the daemon's runs per CPU
        tool_ns = 0                          # the daemon's CPU time
        if counters:
            for (tid, c, kind), v in per1.items():
                d = v - per0.get((tid, c, kind), 0)
                if kind == "ns" and d > 0:
                    ran.setdefault(tid, set()).add(c)
                if tid in vm_tids:
                    if kind == "cs":
                        runs[c] += d
                    else:
                        runtime[c] += d
                elif kind == "cs":
                    tool_cs[c] += d
                else:
                    tool_ns += d
            sys_cs = {c: sys1[c] - sys0[c] for c in cpus}
        else:
            ran = {t: s for t, s in sampler.seen.items() if s}
            sys_cs = None

        def union(tids):
            return set().union(*[ran.get(t, set()) for t in tids])

        per_vm = []
        for n, st in sts.items():
            per_vm.append(len(union(pack_tids(st))))
        hk = 0
        for n in sts:
            if st0.get(n) and st1.get(n):
                hk += st1[n]["counters"]["housekeeping_wakeups"] - \
                    st0[n]["counters"]["housekeeping_wakeups"]
        busy = [c for c in cpus if c != self.idle_cpu]
        tot_ns = sum(runtime.values())
        row = {
            "setup": self.name, "status": "ok",
            "packed": packed_now if self.pack else None,
            "vms": len(sts),
            "cpus_pack": len(union(packset)),
            "cpus_all": len(union(vm_tids)),
            "cpus_per_vm": statistics.mean(per_vm) if per_vm else 0,
            "vm_runs_s": {c: runs[c] / dt for c in cpus} if counters
            else None,
            "vm_runs_total_s": sum(runs.values()) / dt if counters else None,
            "vm_runs_busy_s": sum(runs[c] for c in busy) / dt if counters
            else None,
            "vm_cpu_ms_s": tot_ns / 1e6 / dt if counters else None,
            "idle_cpu_share": (runtime[self.idle_cpu] / tot_ns
                               if counters and tot_ns else None),
            "idle_exits_s": {c: (idl1[c] - idl0[c]) / dt for c in idl0}
            if idl0 and idl1 else None,
            "loc_s": {c: (loc1[c] - loc0[c]) / dt for c in loc0},
            "cs_s": {c: v / dt for c, v in sys_cs.items()} if sys_cs
            else None,
            "ctxt_s": (ctx1 - ctx0) / dt,
            "hk_wakeups_s": hk / dt,
            "tool_cs_s": sum(tool_cs.values()) / dt
            if self.daemon and counters else None,
            "tool_runs_s": {c: v / dt for c, v in tool_cs.items()}
            if self.daemon and counters else None,
            "tool_pack_restore": (self.daemon.count("pack", t0, t1) +
                                  self.daemon.count("restore", t0, t1))
            if self.daemon else None,
            "window_s": dt,
            "tool_cpu_ms_s": tool_ns / 1e6 / dt
            if self.daemon and counters else (0.0 if counters else None),
            "actions_s": (self.daemon.count("pack", t0, t1) +
                          self.daemon.count("restore", t0, t1)) / dt
            if self.daemon else 0.0,
            "late_reports": len(late),
            "late_p50_us": statistics.median([x[0] for x in late])
            if late else None,
            "late_p99_us": statistics.median([x[1] for x in late])
            if late else None,
            "late_max_us": max(x[2] for x in late) if late else None,
        }
        if counters:
            row["cpu_ms_s"] = row["vm_cpu_ms_s"] + row["tool_cpu_ms_s"]
            row["wakeups_s"] = row["vm_runs_total_s"] + \
                (row["tool_cs_s"] or 0.0)
        else:
            row["cpu_ms_s"] = row["wakeups_s"] = None
        return row


LATE_RE = re.compile(r"^# late: n=(\d+) p50_us=(\d+) p99_us=(\d+) "
                     r"max_us=(\d+)$")


def late_reports(start):
    """The guests' "# late:" lines (burst.elf report=N) written after the
    offsets @start ({output file: size at the window's start}): [(p50,
    p99, max) in µs], one per report."""
    out = []
    for path, off in start.items():
        try:
            with open(path, "rb") as f:
                f.seek(off)
                data = f.read().decode(errors="replace")
        except OSError:
            continue
        for line in data.splitlines():
            m = LATE_RE.match(line.strip())
            if m:
                out.append((int(m.group(2)), int(m.group(3)),
                            int(m.group(4))))
    return out


def pack_tids(st):
    return [v["tid"] for v in st["vcpus"] if v.get("tid")] + \
        ([st["housekeeping_tid"]] if st.get("housekeeping_tid") else [])

# ---- output --------------------------------------------------------------


def fmt_cpu(d, cpus, w=5):
    if d is None:
        return "-"
    return "/".join("%.0f" % d[c] for c in cpus if c in d)


def print_table(rows, cpus, idle_cpu):
    cl = "/".join("cpu%d" % c for c in cpus)
    print("%-3s %-18s %6s %4s %4s %5s %14s %6s %6s %14s %14s %14s %9s" %
          ("rep", "setup", "packed", "cpus", "all", "/vm", "VM runs/s " + cl,
           "VM ms/s", "on%d" % idle_cpu, "idle-exits/s", "LOC/s",
           "cswitch/s", "tool/s"))
    for r in rows:
        if r["status"] != "ok":
            print("%-3s %-18s %s" % (r["rep"], r["setup"], r["status"]))
            continue
        print("%-3s %-18s %6s %4d %4d %5.2f %14s %6s %6s %14s %14s %14s %9s" % (
            r["rep"], r["setup"],
            "-" if r["packed"] is None else "%d/%d" % (r["packed"], r["vms"]),
            r["cpus_pack"], r["cpus_all"], r["cpus_per_vm"],
            fmt_cpu(r["vm_runs_s"], cpus),
            "-" if r["vm_cpu_ms_s"] is None else "%.1f" % r["vm_cpu_ms_s"],
            "-" if r["idle_cpu_share"] is None
            else "%.0f%%" % (100 * r["idle_cpu_share"]),
            fmt_cpu(r["idle_exits_s"], cpus), fmt_cpu(r["loc_s"], cpus),
            fmt_cpu(r["cs_s"], cpus),
            fmt_cpu(r["tool_runs_s"], cpus)))


def med(rows, setup, key, sub=None):
    if sub in ("none", "sum-none"):
        # the median of the setup minus that of no VM at all
        inner = None if sub == "none" else "sum"
        x, y = med(rows, setup, key, inner), med(rows, "none", key, inner)
        return None if x is None or y is None or setup == "none" else x - y
    vals = []
    for r in rows:
        if r["setup"] != setup or r["status"] != "ok":
            continue
        v = r[key]
        if sub is not None:
            v = None if v is None else (sum(v.values()) if sub == "sum"
                                        else v.get(sub))
        if v is not None:
            vals.append(v)
    return statistics.median(vals) if vals else None


def ratio(x, y):
    if x is None or y is None or y < 0 or x < 0:
        return "-"
    if y == 0:
        return "1.00" if x == 0 else "inf"
    return "%.2f" % (x / y)


def print_summary(rows, names, cpus, idle_cpu):
    metrics = [
        ("distinct CPUs, vCPU+housekeeping threads", "cpus_pack", None),
        ("distinct CPUs, all VM threads", "cpus_all", None),
        ("distinct CPUs per VM (vCPU+hk), mean", "cpus_per_vm", None),
        ("VM runs/s, all CPUs", "vm_runs_total_s", None),
        ("VM runs/s, CPUs other than %d" % idle_cpu, "vm_runs_busy_s", None),
        ("VM CPU ms/s", "vm_cpu_ms_s", None),
        ("share of VM CPU time on cpu%d" % idle_cpu, "idle_cpu_share", None),
        ("VMM housekeeping wake-ups/s, all VMs", "hk_wakeups_s", None),
        ("daemon context switches/s", "tool_cs_s", None),
    ] + [("daemon context switches/s, cpu%d" % c, "tool_runs_s", c)
         for c in cpus] + [
        ("host idle exits/s, all CPUs", "idle_exits_s", "sum"),
    ] + [("host idle exits/s, cpu%d" % c, "idle_exits_s", c) for c in cpus] + [
        ("host LOC/s, all CPUs", "loc_s", "sum"),
    ] + [("host LOC/s, cpu%d" % c, "loc_s", c) for c in cpus] + [
        ("host context switches/s, all CPUs", "ctxt_s", None),
    ] + [("host context switches/s, cpu%d" % c, "cs_s", c) for c in cpus] + [
        ("host idle exits/s above none", "idle_exits_s", "sum-none"),
        ("host LOC/s above none", "loc_s", "sum-none"),
        ("host context switches/s above none", "ctxt_s", "none"),
    ]
    print()
    print("medians over %d repeats:" % max(
        [sum(1 for r in rows if r["setup"] == n) for n in names] or [0]))
    w = max(max(len(n) for n in names), 9)
    print("%-42s " % "" + " ".join("%*s" % (w, n) for n in names))
    for label, key, sub in metrics:
        vals = [med(rows, n, key, sub) for n in names]
        if all(v is None for v in vals):
            continue
        print("%-42s " % label + " ".join(
            "%*s" % (w, "-" if v is None else
                     ("%.0f" % v if abs(v) >= 100 else "%.2f" % v))
            for v in vals))
    bg = [r for r in rows if r["setup"] == "none" and r["status"] == "ok"]
    if bg:
        def spread(key, sub):
            v = [sum(r[key].values()) if sub else r[key] for r in bg
                 if r[key] is not None]
            return "%.0f..%.0f" % (min(v), max(v)) if v else "-"
        print("background (none) over the repeats, min..max: idle exits/s "
              "%s, LOC/s %s, context switches/s %s" % (
                  spread("idle_exits_s", True), spread("loc_s", True),
                  spread("ctxt_s", False)))
    print_verdicts(rows, names, idle_cpu)


def values(rows, setup, key, sub=None):
    """Every repeat's value of @key (@sub as in med) for @setup."""
    out = []
    for r in rows:
        if r["setup"] != setup or r["status"] != "ok":
            continue
        v = r.get(key)
        if isinstance(v, dict):
            v = sum(v.values()) if sub == "sum" else v.get(sub)
        if v is not None:
            out.append(v)
    return out


def cell(vals, fmt="%.1f"):
    """median [min..max]"""
    if not vals:
        return "-"
    return (fmt + " [" + fmt + ".." + fmt + "]") % (
        statistics.median(vals), min(vals), max(vals))


def verdict(a, b):
    """A (pack) against B (no pack), lists over the repeats: "ok" when
    A's median is at most B's, "noise" when it is more but the spreads
    overlap (A's min <= B's max), "MORE" otherwise."""
    if not a or not b:
        return "-"
    ma, mb = statistics.median(a), statistics.median(b)
    if ma <= mb:
        return "ok"
    return "noise" if min(a) <= max(b) else "MORE"


def print_verdicts(rows, names, idle_cpu):
    """Per workload: pack (and pack-old) against no pack."""
    figures = [
        ("host CPU ms/s, VMs + daemon", "cpu_ms_s", None, True),
        ("  of which the daemon", "tool_cpu_ms_s", None, False),
        ("wake-ups/s, VMs + daemon (their runs)", "wakeups_s", None, True),
        ("  of which the daemon", "tool_cs_s", None, False),
        ("host idle exits/s, all CPUs", "idle_exits_s", "sum", True),
        ("host LOC/s, all CPUs", "loc_s", "sum", True),
        ("actions/s (pack + restore)", "actions_s", None, False),
        ("share of VM CPU time on cpu%d (%%)" % idle_cpu, "idle_cpu_share",
         None, False),
        ("guest job start delay p50 (us)", "late_p50_us", None, False),
        ("guest job start delay p99 (us)", "late_p99_us", None, False),
        ("guest job start delay max (us)", "late_max_us", None, False),
    ]
    print()
    print("per workload, median [min..max] over the repeats; verdict: "
          "pack / no pack, ok = median not above, noise = above but the "
          "spreads overlap, MORE = above beyond the spread")
    for w in WORKLOADS:
        cols = [n for n in ("%s/nopack" % w, "%s/pack" % w,
                            "%s/pack-old" % w) if n in names]
        if len(cols) < 2:
            continue
        print()
        print("%-40s %s" % (w, "".join("%-28s" % c for c in cols) +
                            "verdict (pack%s)" %
                            (", pack-old" if len(cols) > 2 else "")))
        for label, key, sub, judged in figures:
            vals = [values(rows, c, key, sub) for c in cols]
            if key == "idle_cpu_share":
                vals = [[100 * x for x in v] for v in vals]
            if not any(vals):
                continue
            v = ""
            if judged:
                v = ", ".join(verdict(x, vals[0]) for x in vals[1:])
            print("%-40s %s%s" % (label, "".join("%-28s" % cell(x)
                                                for x in vals), v))


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
