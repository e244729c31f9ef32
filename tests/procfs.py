"""What the tests read of other processes in /proc: whether one is alive,
its threads, a thread's allowed CPUs. Used by the VMM and the tools tests."""
import os


def alive(pid):
    """@pid exists and is not a zombie."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def tasks(pid):
    """(tid, name, state letter) of each thread of @pid, from
    /proc/PID/task/TID/stat; threads that end meanwhile are left out."""
    out = []
    try:
        tids = sorted(os.listdir("/proc/%d/task" % pid), key=int)
    except OSError:
        return out
    for tid in tids:
        try:
            with open("/proc/%d/task/%s/stat" % (pid, tid)) as f:
                st = f.read()
        except OSError:
            continue
        out.append((int(tid), st[st.index("(") + 1:st.rindex(")")],
                    st[st.rindex(")") + 2]))
    return out


def thread_usage(pid, tids=None):
    """(CPU time in ns, context switches voluntary + involuntary) summed
    over the threads @tids of @pid (None: all it has now), from
    /proc/PID/task/TID/schedstat and status; a thread gone meanwhile
    counts 0. None when @pid is gone."""
    if tids is None:
        try:
            tids = os.listdir("/proc/%d/task" % pid)
        except OSError:
            return None
    ns = switches = 0
    for tid in tids:
        base = "/proc/%d/task/%s/" % (pid, tid)
        try:
            with open(base + "schedstat") as f:
                ns += int(f.read().split()[0])
            with open(base + "status") as f:
                for line in f:
                    if "ctxt_switches:" in line:
                        switches += int(line.split()[1])
        except (OSError, IndexError, ValueError):
            continue
    return ns, switches


def parse_cpus(text):
    """A kernel CPU list ("0-2,5") as a set."""
    cpus = set()
    for part in text.strip().split(","):
        if "-" in part:
            a, b = part.split("-")
            cpus.update(range(int(a), int(b) + 1))
        elif part:
            cpus.add(int(part))
    return cpus


def allowed_cpus(pid, tid):
    """Thread @tid of @pid: its Cpus_allowed_list as a set; None if it
    cannot be read."""
    try:
        with open("/proc/%d/task/%d/status" % (pid, tid)) as f:
            for line in f:
                if line.startswith("Cpus_allowed_list:"):
                    return parse_cpus(line.split(":", 1)[1])
    except OSError:
        pass
    return None


def status_field(pid, key):
    """The value of @key ("SigBlk", "VmRSS", ...) in /proc/PID/status, as
    text without its "kB"; None if it cannot be read."""
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith(key + ":"):
                    return line.split(":", 1)[1].split()[0]
    except OSError:
        pass
    return None


def blocks_signal(pid, sig):
    """@pid (its main thread) has signal @sig blocked."""
    mask = status_field(pid, "SigBlk")
    return mask is not None and bool(int(mask, 16) & (1 << (sig - 1)))


def rss_kib(pid):
    """@pid's resident memory in KiB, or None."""
    v = status_field(pid, "VmRSS")
    return int(v) if v is not None else None
