"""One VM of a soak run (tools/soak.py): its files (control socket,
metrics, stats JSON, hooks and their record in the run's temporary
directory), its process and stdin; what is read of a process in /proc
(RSS, threads, fd kinds, children); the limits the checks hold it to.
Python 3 standard library only."""
import os
import re
import statistics
import subprocess
import threading

SANITIZER = re.compile(r"ThreadSanitizer|AddressSanitizer|LeakSanitizer|"
                       r"runtime error:")
POLL = 0.05  # seconds between two looks when polling a condition
EXIT_LIMIT = 2.0  # seconds from SIGTERM to the exit
RSS_TOL_KB = 1024  # growth allowed: max(this, RSS_TOL_FRAC of the base)
RSS_TOL_FRAC = 0.05
FAST_HOOK_TIMEOUT = 2  # --hook-timeout of VMs with a quick hook
SLOW_HOOK_TIMEOUT = 1  # --hook-timeout of VMs whose hook hangs

# The quick hook: records "TIME PID OP SUBOP EXTRA" (the XML on stdin read
# and dropped). The slow one also hangs on "idle begin", with a child in
# its process group, until the VMM kills both; it records the two PIDs.
HOOK = r'''#!/bin/sh
cat > /dev/null
echo "$(date +%%s.%%N) $$ $2 $3 $4" >> '%(record)s'
%(hang)s'''
HANG = r'''[ "$2 $3" = "idle begin" ] || exit 0
sleep 1000 &
echo "$$ $!" >> '%(pids)s'
wait
'''


def log(msg):
    print(msg, flush=True)


def read_status(pid):
    """(VmRSS kB, threads, RssAnon kB) of @pid; None when it is gone."""
    rss = thr = anon = None
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1])
                elif line.startswith("Threads:"):
                    thr = int(line.split()[1])
                elif line.startswith("RssAnon:"):
                    anon = int(line.split()[1])
    except OSError:
        return None
    if rss is None or thr is None:
        return None
    return rss, thr, anon or 0


def fd_targets(pid):
    """The sorted targets of @pid's open fds, kinds only (socket, pipe,
    anon_inode:NAME, paths); None when it is gone."""
    out = []
    try:
        fds = os.listdir("/proc/%d/fd" % pid)
    except OSError:
        return None
    for fd in fds:
        try:
            t = os.readlink("/proc/%d/fd/%s" % (pid, fd))
        except OSError:
            continue
        out.append(re.sub(r":\[\d+\]$", "", t))
    return sorted(out)


def children(pids):
    """{ppid: [child pids]} for the processes @pids, from /proc/*/stat."""
    out = {p: [] for p in pids}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                st = f.read()
        except OSError:
            continue
        ppid = int(st.rsplit(")", 1)[1].split()[1])
        if ppid in out:
            out[ppid].append(int(d))
    return out


def cmdline(pid):
    """@pid's command line, arguments joined by spaces; "" when gone."""
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return f.read().rstrip(b"\0").replace(b"\0", b" ").decode(
                errors="replace")
    except OSError:
        return ""


def pgid(pid):
    try:
        return os.getpgid(pid)
    except OSError:
        return None


def median(xs):
    return statistics.median(xs) if xs else 0


class Vm:
    def __init__(self, idx, kind, args, elf, hook_timeout, slow, top):
        self.idx = idx
        self.name = "soak%02d" % idx
        self.kind = kind
        self.slow = slow
        self.hook_timeout = hook_timeout
        d = os.path.join(top, "vm", self.name)
        os.makedirs(d)
        self.dir = d
        self.sock = os.path.join(top, "run", self.name + ".sock")
        self.metrics = os.path.join(top, "metrics", self.name + ".prom")
        self.stats = os.path.join(d, "stats.json")
        self.record = os.path.join(d, "hooks.log")
        self.pids = os.path.join(d, "hook-pids")
        hooks = os.path.join(d, "hooks")
        os.makedirs(hooks)
        with open(os.path.join(hooks, "vm"), "w") as f:
            f.write(HOOK % {"record": self.record,
                            "hang": HANG % {"pids": self.pids}
                            if slow else ""})
        os.chmod(os.path.join(hooks, "vm"), 0o755)
        self.guest_args = args
        self.args = ["--sysidle", "--name", self.name, "--control", self.sock,
                     "--metrics-file", self.metrics, "--stats-json",
                     self.stats, "--hooks", hooks, "--hook-timeout",
                     str(hook_timeout), "--mem", "64M"] + args + [elf]
        self.p = None
        self.out_path = os.path.join(d, "stdout")
        self.err_path = os.path.join(d, "stderr")
        self.samples = []  # (elapsed, rss kB, fds, threads, anon kB)
        self.quiet = {}  # "warmup"/"end": (fd kinds, threads, rss)
        self.died = None
        self.exit = None  # (status, seconds after SIGTERM)
        self.final_status = None
        self.lock = threading.Lock()  # stdin writes
        self.pending_resume = False

    def start(self, vmm):
        with open(self.out_path, "wb") as out, \
                open(self.err_path, "wb") as err:
            self.p = subprocess.Popen([vmm] + self.args, stdin=subprocess.PIPE,
                                      stdout=out, stderr=err)
        os.set_blocking(self.p.stdin.fileno(), False)

    def stderr(self):
        try:
            with open(self.err_path, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def send_input(self, data):
        with self.lock:
            try:
                os.write(self.p.stdin.fileno(), data)
                return True
            except (BlockingIOError, BrokenPipeError, ValueError):
                return False
