"""What the benchmark scripts share: their --setup NAME=ARGS, a VMM binary
given as a file or a build directory, nearest-rank percentiles, the spread
of per-run figures, the load average, and what they read of a process in
/proc (CPU time, context switches of all its threads, RSS and PSS, its
vCPUs' kvm_run mappings) and of the host (MemAvailable)."""
import os
import shlex
import statistics

CLK_TCK = os.sysconf("SC_CLK_TCK")


def parse_setup(spec):
    """NAME=ARGS -> (NAME, [args]); ValueError when malformed."""
    name, eq, rest = spec.partition("=")
    name = name.strip()
    if not eq or not name or any(c.isspace() for c in name):
        raise ValueError(f"--setup {spec!r}: expected NAME=ARGS")
    return name, shlex.split(rest)


def vmm_binary(path):
    """A VMM binary, or a build directory holding one."""
    return os.path.join(path, "vmm") if os.path.isdir(path) else path


def pct(sorted_vals, p):
    """Nearest-rank percentile of a sorted list."""
    if not sorted_vals:
        return None
    k = max(1, -(-len(sorted_vals) * p // 100))
    return sorted_vals[int(k) - 1]


def spread(vals):
    """{median, min, max} of per-run figures, or Nones."""
    if not vals:
        return {"median": None, "min": None, "max": None}
    return {"median": statistics.median(vals), "min": min(vals),
            "max": max(vals)}


def check_setups(prog, names, what="setup"):
    """Exits with a message when a setup name is used twice or there is
    none to run."""
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise SystemExit(f"{prog}: setup names used twice: "
                         f"{', '.join(sorted(dup))}")
    if not names:
        raise SystemExit(f"{prog}: no {what} to run")


def loadavg():
    return [round(x, 2) for x in os.getloadavg()]


def proc_cpu_s(pid):
    """Host CPU seconds (utime + stime, all threads) of the live process
    @pid, from /proc/PID/stat; OSError when it is gone."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def proc_ctxt(pid):
    """Context switches (voluntary + nonvoluntary) summed over the threads
    @pid has now, from /proc/PID/task/*/status: the threads' own wake-ups.
    A thread that ends meanwhile counts 0; OSError when @pid is gone."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                for line in f:
                    if line.startswith(("voluntary_ctxt_switches",
                                        "nonvoluntary_ctxt_switches")):
                        total += int(line.split()[1])
        except FileNotFoundError:
            pass  # a thread that just ended
    return total


def proc_threads(pid):
    """The number of threads @pid has now; OSError when it is gone."""
    return len(os.listdir(f"/proc/{pid}/task"))


def proc_mem_kib(pid):
    """(RSS, PSS) of @pid in KiB from /proc/PID/smaps_rollup (Linux 4.14
    and later); OSError when it is gone."""
    fields = {}
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in ("Rss", "Pss"):
                fields[key] = int(rest.split()[0])
    return fields["Rss"], fields["Pss"]


def vcpu_mappings_kib(pid):
    """(count, Size KiB, Rss KiB) of the kvm_run mappings of @pid's vCPUs
    (the anon_inode:kvm-vcpu:N lines of /proc/PID/smaps), summed; OSError
    when @pid is gone."""
    count = size = rss = 0
    inside = False
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            head = line.split(None, 1)[0]
            if "-" in head and not head.endswith(":"):  # a mapping's line
                inside = "kvm-vcpu" in line
                count += inside
            elif inside and head == "Size:":
                size += int(line.split()[1])
            elif inside and head == "Rss:":
                rss += int(line.split()[1])
    return count, size, rss


def mem_available_kib():
    """The host's MemAvailable in KiB, from /proc/meminfo."""
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1])
    raise OSError("no MemAvailable in /proc/meminfo")
