# SPDX-License-Identifier: GPL-2.0-only
"""What bench/consolidate.py counts over a window: per (thread, host CPU)
perf software counters in counting mode (task-clock, context switches)
or, without perf_event_open, a sampler of the CPU each thread last ran
on; host-wide per-CPU counters (LOC in /proc/interrupts, cpuidle state
entries, /proc/stat's context switches); a thread's allowed CPUs and a
process's threads from /proc."""
import ctypes
import os
import threading
import time

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
