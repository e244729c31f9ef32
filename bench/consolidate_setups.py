# SPDX-License-Identifier: GPL-2.0-only
"""bench/consolidate.py's setups and one run of one: the workloads and
their guests, the VMs started with their control sockets, the daemon
(sysidle-consolidate) in the background with its stdout lines, the wait
for every VM ready (and packed), the measured window (consolidate_counters)
and its row of figures, the guests' job start delay reports, the stop of
every process by PID."""
import os
import re
import signal
import statistics
import subprocess
import sys
import threading
import time

from benchrun import vm_status as status  # noqa: E402
from consolidate_counters import (Counters, Sampler, allowed,
                                  idle_entries, loc_per_cpu,
                                  proc_stat_ctxt, tasks)

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

# ---- VMs and the daemon --------------------------------------------------


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
