#!/usr/bin/env python3
"""Soak run: many VMs under --sysidle for a long time, with random wake-ups,
control clients and hooks; fails on resource growth or an unclean exit.

usage: soak.py [--build DIR] [--vms N] [--duration S] [--warmup S]
               [--interval S] [--seed N] [--clients N] [--event-mean S]
               [--csv FILE] [--keep]

Each VM gets a private control socket, metrics file, stats file and hooks
directory in one temporary directory. Guests (build/guest-tools and the
VMM's test guests) go idle and wake by themselves now and then (burst.elf's
seeded rounds, the pv or LAPIC tick); the host adds wake-ups at random
times from a seeded RNG: serial input, SIGUSR2, kick, pause and resume.
Concurrently, control clients (sysidlectl status/list/watch and raw socket
clients that stay silent, vanish mid-request or never read) talk to random
VMs. Every --interval seconds each VM process is sampled: RSS (VmRSS), open
fds and threads.

It fails (exit 1, each reason on its own line) when, after --warmup:
  - a VM's RSS grew by more than max(1 MiB, 5%): the median of the last
    samples against the median of the first samples after warm-up (k =
    max(3, a tenth of the post-warm-up samples) each);
  - a VM's open fds or threads differ between two quiescent points (right
    after warm-up and at the end: no client connected, no host event in
    flight, no hook running, the same fd list twice in a row);
and when a VM exited before the end; did not exit with status 143 within
2 s of SIGTERM (plus two --hook-timeouts for a VM whose hook hangs); left
a sanitizer report on stderr, no parseable stats JSON, a metrics file
without `sysidle_vm_up 0`, its socket file, or a hook process; its hooks
did not see started, then idle begin/end alternating, then stopped; or a
control request that should have worked did not. Exit 2: bad usage or the
VMs could not start; 77: no usable /dev/kvm (skipped). Python 3 standard
library only.
"""
import argparse
import heapq
import json
import os
import random
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "tests"))
from procfs import alive  # noqa: E402 (the tests' /proc reader)

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


class Soak:
    def __init__(self, opts):
        self.o = opts
        self.rng = random.Random(opts.seed)
        self.top = tempfile.mkdtemp(prefix="sysidle-soak-")
        os.chmod(self.top, 0o700)
        for d in ("run", "metrics", "vm"):
            os.makedirs(os.path.join(self.top, d), mode=0o700)
        self.vmm = os.path.join(opts.build, "vmm")
        self.ctl = os.path.join(opts.build, "sysidlectl")
        self.sockdir = os.path.join(self.top, "run")
        self.vms = []
        self.failures = []
        self.findings = []  # not failures: worth a line in the report
        self.flock = threading.Lock()
        self.counts = {}  # what the clients and host events did
        self.stop = threading.Event()
        self.quiet = threading.Event()  # clients and events: hold still
        self.busy = 0  # workers inside an action
        self.busy_cv = threading.Condition()
        self.t0 = None

    # -- bookkeeping -------------------------------------------------------
    def fail(self, msg):
        with self.flock:
            self.failures.append(msg)
        log("FAIL: " + msg)

    def count(self, what):
        with self.flock:
            self.counts[what] = self.counts.get(what, 0) + 1

    def elapsed(self):
        return time.monotonic() - self.t0

    def pause_point(self, rng_wait):
        """A worker's wait of @rng_wait seconds; False when it should stop
        (the end) or hold still (a quiescent point) instead."""
        if self.stop.is_set() or self.quiet.is_set():
            return False
        return not self.quiet.wait(rng_wait) and not self.stop.is_set()

    def enter(self):
        """Waits while a quiescent point is held, then counts the caller
        busy (checked and counted under one lock: quiesce() sets quiet,
        then waits for no one busy); False at the end."""
        while not self.stop.is_set():
            with self.busy_cv:
                if not self.quiet.is_set():
                    self.busy += 1
                    return True
            time.sleep(POLL)
        return False

    def leave(self):
        with self.busy_cv:
            self.busy -= 1
            self.busy_cv.notify_all()

    def live_vms(self):
        return [v for v in self.vms if v.died is None and v.exit is None]

    # -- the VMs -----------------------------------------------------------
    def plan(self):
        tools = os.path.join(self.o.build, "guest-tools")
        tguests = os.path.join(self.o.build, "tests", "vmm")
        kinds = ["idle", "burst", "idle-lapic", "hello"]
        for i in range(self.o.vms):
            kind = kinds[i % len(kinds)]
            r = self.rng
            if kind == "idle":
                args = ["--cpus", str(r.choice([1, 2, 4])), "--append",
                        "hz=%d" % r.choice([100, 250, 1000])]
                elf = os.path.join(tools, "idle.elf")
            elif kind == "idle-lapic":
                args = ["--cpus", str(r.choice([2, 3])),
                        "--lapic-tick-policy", r.choice(["catchup",
                                                         "discard"]),
                        "--append", "tick=lapic hz=%d" %
                        r.choice([100, 250])]
                elf = os.path.join(tools, "idle.elf")
            elif kind == "burst":
                args = ["--cpus", str(r.choice([2, 3])), "--append",
                        "rounds=1000000 period=%d duty=%d hz=250 seed=%d" %
                        (r.randint(500, 3000), r.randint(1, 5),
                         r.randrange(1 << 32))]
                elf = os.path.join(tools, "burst.elf")
            else:
                args = ["--cpus", "1", "--append", "stay=1"]
                elf = os.path.join(tguests, "hello.elf")
            slow = i % 8 == 1
            ht = SLOW_HOOK_TIMEOUT if slow else FAST_HOOK_TIMEOUT
            self.vms.append(Vm(i, kind, args, elf, ht, slow, self.top))

    def start_vms(self):
        for v in self.vms:
            v.start(self.vmm)
        for v in self.vms:
            ok = self.poll(lambda: os.path.exists(v.sock) or
                           v.p.poll() is not None, 30)
            if not ok or v.p.poll() is not None:
                log("%s did not start (status %s): %s" %
                    (v.name, v.p.poll(), v.stderr().strip()[-500:]))
                return False
        return True

    @staticmethod
    def poll(fn, timeout):
        end = time.monotonic() + timeout
        while True:
            if fn():
                return True
            if time.monotonic() >= end:
                return False
            time.sleep(POLL)

    def sysidlectl(self, *args, timeout=15):
        try:
            r = subprocess.run([self.ctl, "--dir", self.sockdir] + list(args),
                               stdin=subprocess.DEVNULL,
                               capture_output=True, text=True,
                               timeout=timeout)
        except subprocess.TimeoutExpired:
            return None, "", "sysidlectl hung for %d s" % timeout
        return r.returncode, r.stdout, r.stderr

    def ctl_expect_ok(self, what, v, *args):
        rc, out, err = self.sysidlectl(*args)
        if rc != 0 and v.p.poll() is None and not self.stop.is_set():
            self.fail("%s: sysidlectl %s: status %s: %s" %
                      (v.name, " ".join(args), rc, err.strip()[-300:]))
        self.count(what)
        return rc, out

    # -- host events: wake-ups, pause and resume ---------------------------
    def events(self, rng):
        heap = []
        for v in self.vms:
            heapq.heappush(heap, (time.monotonic() + rng.expovariate(
                1 / self.o.event_mean), v.idx, "event"))
        while not self.stop.is_set():
            if self.quiet.is_set():
                while self.quiet.is_set() and not self.stop.is_set():
                    time.sleep(POLL)
                continue
            t, idx, what = heap[0]
            delay = t - time.monotonic()
            if delay > 0:
                self.pause_point(min(delay, 0.5))
                continue
            heapq.heappop(heap)
            v = self.vms[idx]
            if what == "event":
                heapq.heappush(heap, (time.monotonic() + rng.expovariate(
                    1 / self.o.event_mean), idx, "event"))
            if v.died is not None or not self.enter():
                continue
            try:
                if what == "resume":
                    if v.pending_resume:
                        v.pending_resume = False
                        self.ctl_expect_ok("host: resume", v, "resume",
                                           v.name)
                    continue
                acts = ["sigusr2", "kick", "pause"]
                if v.kind.startswith("idle"):
                    acts += ["serial", "serial"]
                act = rng.choice(acts)
                if act == "serial":
                    if v.send_input(b"x\n"):
                        self.count("host: serial input")
                elif act == "sigusr2":
                    try:
                        v.p.send_signal(signal.SIGUSR2)
                        self.count("host: SIGUSR2")
                    except ProcessLookupError:
                        pass
                elif act == "kick":
                    self.ctl_expect_ok("host: kick", v, "kick", v.name)
                elif act == "pause":
                    rc, _ = self.ctl_expect_ok("host: pause", v, "pause",
                                               v.name)
                    if rc == 0:
                        v.pending_resume = True
                        heapq.heappush(heap, (time.monotonic() +
                                              rng.uniform(0.05, 5),
                                              idx, "resume"))
            finally:
                self.leave()

    def resume_all(self):
        for v in self.vms:
            if v.pending_resume and v.p.poll() is None:
                v.pending_resume = False
                self.ctl_expect_ok("host: resume", v, "resume", v.name)

    # -- control clients ---------------------------------------------------
    def client(self, rng):
        acts = [("status", 4), ("list", 1), ("watch", 2), ("silent", 1),
                ("half", 1), ("noread", 1), ("raw-status", 2), ("bad", 1),
                ("slow-watch", 1)]
        names = [a for a, w in acts for _ in range(w)]
        while not self.stop.is_set():
            if self.quiet.is_set():
                time.sleep(POLL)
                continue
            if not self.pause_point(rng.uniform(0.1, 2)):
                continue
            live = self.live_vms()
            if not live or not self.enter():
                continue
            try:
                getattr(self, "c_" + rng.choice(names).replace("-", "_"))(
                    rng, rng.choice(live))
            except Exception as e:  # a client's own error: a finding
                self.fail("client error: %r" % (e,))
            finally:
                self.leave()

    def c_status(self, rng, v):
        rc, out = self.ctl_expect_ok("client: sysidlectl status", v,
                                     "--json", "status", v.name)
        if rc == 0:
            try:
                ok = json.loads(out)["name"] == v.name
            except (ValueError, KeyError, TypeError):
                ok = False
            if not ok:
                self.fail("%s: sysidlectl --json status: %r" %
                          (v.name, out[:200]))

    def c_list(self, rng, v):
        rc, out = self.ctl_expect_ok("client: sysidlectl list", v,
                                     "--json", "list")
        if rc != 0:
            return
        seen = {}
        for line in out.splitlines():
            try:
                o = json.loads(line)
                seen[o["name"]] = o
            except (ValueError, KeyError, TypeError):
                self.fail("sysidlectl --json list: bad line %r" % line[:200])
        for w in self.live_vms():
            o = seen.get(w.name)
            if (o is None or o.get("state") == "?") and w.p.poll() is None:
                self.fail("%s: sysidlectl list: %r" % (w.name, o))

    def connect(self, v):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(10)
        s.connect(v.sock)
        return s

    def c_watch(self, rng, v):
        p = subprocess.Popen([self.ctl, "--dir", self.sockdir, "--json",
                              "watch", v.name], stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
        self.pause_point(rng.uniform(0.5, 20))
        vanish = rng.random() < 0.3
        if p.poll() is None:
            p.send_signal(signal.SIGKILL if vanish else signal.SIGTERM)
        try:
            out, err = p.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
            self.fail("%s: sysidlectl watch did not end on SIGTERM" % v.name)
            return
        self.count("client: sysidlectl watch" +
                   (" (killed)" if vanish else ""))
        first = out.split("\n", 1)[0]
        try:
            ok = json.loads(first).get("ok") is True
        except (ValueError, AttributeError):
            ok = False
        if not ok and v.p.poll() is None:
            self.fail("%s: sysidlectl watch: first line %r, status %s: %s" %
                      (v.name, first[:200], p.returncode, err.strip()[-200:]))
        elif not vanish and p.returncode != 143:
            self.fail("%s: sysidlectl watch: status %s on SIGTERM" %
                      (v.name, p.returncode))

    def c_slow_watch(self, rng, v):
        """A watcher that never reads (a small receive buffer)."""
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
        s.settimeout(10)
        s.connect(v.sock)
        s.sendall(b'{"cmd":"watch"}\n')
        self.pause_point(rng.uniform(1, 20))
        s.close()
        self.count("client: watch, never read")

    def c_silent(self, rng, v):
        s = self.connect(v)
        wait = rng.uniform(0, 13)
        self.pause_point(wait)
        s.close()
        self.count("client: silent" + (" > 10 s" if wait > 10 else ""))

    def c_half(self, rng, v):
        s = self.connect(v)
        s.sendall(b'{"cmd":"sta')
        s.close()
        self.count("client: half a request, gone")

    def c_noread(self, rng, v):
        s = self.connect(v)
        s.sendall(rng.choice([b'{"cmd":"status"}\n', b'{"cmd":"watch"}\n']))
        s.close()
        self.count("client: request, gone before the reply")

    def raw_request(self, v, data):
        s = self.connect(v)
        try:
            s.sendall(data)
            buf = b""
            while b"\n" not in buf:
                d = s.recv(65536)
                if not d:
                    break
                buf += d
        finally:
            s.close()
        return json.loads(buf.split(b"\n", 1)[0])

    def c_raw_status(self, rng, v):
        try:
            r = self.raw_request(v, b'{"cmd":"status","id":7}\n')
            ok = r.get("ok") is True and r.get("id") == 7 and \
                r["vm"]["name"] == v.name
        except (OSError, ValueError, KeyError, TypeError) as e:
            r, ok = e, False
        if not ok and v.p.poll() is None:
            self.fail("%s: raw status: %r" % (v.name, r))
        self.count("client: raw status")

    def c_bad(self, rng, v):
        try:
            r = self.raw_request(v, rng.choice([b"not json\n", b"[1]\n",
                                                b'{"cmd":"nope"}\n']))
            ok = r.get("ok") is False and "error" in r
        except (OSError, ValueError, AttributeError) as e:
            r, ok = e, False
        if not ok and v.p.poll() is None:
            self.fail("%s: malformed request: reply %r" % (v.name, r))
        self.count("client: malformed request")

    # -- sampling ----------------------------------------------------------
    def sample(self):
        t = self.elapsed()
        for v in self.vms:
            if v.died is not None:
                continue
            rc = v.p.poll()
            st = read_status(v.p.pid) if rc is None else None
            fds = fd_targets(v.p.pid) if rc is None else None
            if rc is not None or st is None or fds is None:
                rc = v.p.wait()
                v.died = (t, rc)
                self.fail("%s exited before the end, at %.0f s, status %s: "
                          "%s" % (v.name, t, rc, v.stderr().strip()[-500:]))
                continue
            v.samples.append((t, st[0], len(fds), st[1], st[2]))
        live = [v for v in self.vms if v.died is None and v.samples]
        last = [v.samples[-1] for v in live]
        rss = [s[1] for s in last]
        log("%7.0f %4d %10.1f %8.1f %7d %7d %7d %7d" %
            (t, len(live), sum(rss) / 1024, max(rss, default=0) / 1024,
             max((s[2] for s in last), default=0),
             sum(s[2] for s in last), sum(s[3] for s in last),
             sum(self.counts.values())))

    def quiesce(self, label):
        """Holds clients and host events still, waits until no hook runs
        and each VM's fd list is the same twice in a row, and keeps that
        (fd kinds, threads, RSS) under @label."""
        self.quiet.set()
        with self.busy_cv:
            self.busy_cv.wait_for(lambda: self.busy == 0, timeout=60)
            if self.busy:
                self.fail("%s: clients still busy after 60 s" % label)
        self.resume_all()
        pending = {v.idx for v in self.live_vms()}
        prev = {}
        end = time.monotonic() + 60
        while pending and time.monotonic() < end:
            kids = children([self.vms[i].p.pid for i in pending])
            for i in list(pending):
                v = self.vms[i]
                fds = fd_targets(v.p.pid)
                st = read_status(v.p.pid)
                if fds is None or st is None:
                    pending.discard(i)
                    continue
                if kids[v.p.pid]:
                    prev.pop(i, None)
                    continue
                if prev.get(i) == fds:
                    v.quiet[label] = (fds, st[1], st[0])
                    pending.discard(i)
                else:
                    prev[i] = fds
            time.sleep(0.1)
        for i in pending:
            self.fail("%s: %s never quiescent (a hook running, or its fds "
                      "changing) within 60 s" % (label, self.vms[i].name))
        log("# quiescent point '%s' at %.0f s" % (label, self.elapsed()))

    # -- the end -----------------------------------------------------------
    def stop_vms_timed(self):
        live = self.live_vms()
        sent = time.monotonic()
        for v in live:
            v.p.send_signal(signal.SIGTERM)
        left = {v.idx: v for v in live}
        hard = sent + 60
        while left and time.monotonic() < hard:
            for i, v in list(left.items()):
                rc = v.p.poll()
                if rc is not None:
                    v.exit = (rc, time.monotonic() - sent)
                    del left[i]
            time.sleep(0.01)
        for v in left.values():
            v.p.kill()
            v.exit = (v.p.wait(), None)
            self.fail("%s: no exit within 60 s of SIGTERM (killed)" % v.name)
        for v in self.vms:
            with v.lock:
                try:
                    v.p.stdin.close()
                except OSError:
                    pass

    def check_exit(self, v):
        rc, secs = v.exit
        if rc is None or secs is None:
            return
        limit = EXIT_LIMIT + (2 * v.hook_timeout if v.slow else 0)
        if rc != 143:
            self.fail("%s: exit status %s on SIGTERM (expected 143)" %
                      (v.name, rc))
        if secs > limit:
            self.fail("%s: exit took %.2f s after SIGTERM (limit %.1f s)" %
                      (v.name, secs, limit))
        err = v.stderr()
        if SANITIZER.search(err):
            self.fail("%s: sanitizer report on stderr:\n%s" %
                      (v.name, err[-2000:]))
        try:
            with open(v.stats) as f:
                st = json.load(f)
            if st.get("exit_status") != rc:
                self.fail("%s: stats JSON says exit_status %r, status was "
                          "%s" % (v.name, st.get("exit_status"), rc))
        except (OSError, ValueError) as e:
            self.fail("%s: stats JSON: %s" % (v.name, e))
        try:
            with open(v.metrics) as f:
                m = f.read()
            if not re.search(r"^sysidle_vm_up\{[^}]*\} 0$", m, re.M):
                self.fail("%s: metrics file lacks sysidle_vm_up 0" % v.name)
        except OSError as e:
            self.fail("%s: metrics file: %s" % (v.name, e))
        if os.path.exists(v.sock):
            self.fail("%s: stale socket %s left" % (v.name, v.sock))
        self.check_hooks(v)
        c = (v.final_status or {}).get("counters", {})
        if c.get("violations"):
            self.fail("%s: %d sysidle violations (FULL while a vCPU ran)" %
                      (v.name, c["violations"]))
        if c.get("events_dropped"):
            self.findings.append("%s: %d events dropped by the export "
                                 "thread" % (v.name, c["events_dropped"]))
        self.check_jiffies(v)

    def check_jiffies(self, v):
        """idle.elf reports its jiffies against the TSC after each serial
        wake-up: off is a finding for the pv tick and catchup (discard
        drops held ticks by design)."""
        try:
            with open(v.out_path, errors="replace") as f:
                out = f.read()
        except OSError:
            return
        v.jiffies = (out.count("idle: jiffies ok"),
                     len(re.findall(r"^idle: jiffies off", out, re.M)))
        if v.jiffies[1] and "discard" not in v.guest_args:
            self.findings.append(
                "%s: %d of %d jiffies reports off: %s" %
                (v.name, v.jiffies[1], sum(v.jiffies), "; ".join(
                    re.findall(r"^idle: jiffies off.*$", out, re.M)[:3])))

    def check_hooks(self, v):
        events = []
        try:
            with open(v.record) as f:
                for line in f:
                    parts = line.split()
                    if len(parts) >= 4:
                        events.append(" ".join(parts[2:4]))
        except OSError:
            pass
        v.hook_events = events
        bad = None
        if not events or events[0] != "started begin":
            bad = "the first hook event is %r" % (events[:1],)
        elif events[-1] != "stopped end":
            bad = "the last hook event is %r" % (events[-1],)
        else:
            want = "idle begin"
            for i, e in enumerate(events[1:-1], 1):
                if e != want:
                    bad = "event %d is %r, expected %r" % (i, e, want)
                    break
                want = "idle end" if want == "idle begin" else "idle begin"
        if bad:
            self.fail("%s: hook events out of order: %s" % (v.name, bad))
        if v.slow:
            try:
                with open(v.pids) as f:
                    pids = [int(x) for x in f.read().split()]
            except OSError:
                pids = []
            # PIDs are reused (a soak makes thousands of processes): a PID
            # counts only if it still is the hook (its path on the command
            # line) or its "sleep 1000" child in the hook's process group.
            left = []
            for hook, child in zip(pids[0::2], pids[1::2]):
                if alive(hook) and self.top in cmdline(hook):
                    left.append(hook)
                if alive(child) and cmdline(child) == "sleep 1000" and \
                        pgid(child) == hook:
                    left.append(child)
            if left:
                self.fail("%s: hook processes left running: %s" %
                          (v.name, left))

    def check_leftovers(self):
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            try:
                with open("/proc/%s/cmdline" % d, "rb") as f:
                    cmd = f.read().replace(b"\0", b" ").decode(
                        errors="replace")
            except OSError:
                continue
            if self.top in cmd and int(d) != os.getpid():
                self.fail("process %s left running: %s" % (d, cmd[:200]))
        left = os.listdir(self.sockdir)
        if left:
            self.fail("files left in the socket directory: %s" % left)
        extra = [f for f in os.listdir(os.path.join(self.top, "metrics"))
                 if not f.endswith(".prom")]
        if extra:
            self.fail("files left beside the metrics files: %s" % extra)

    # -- growth ------------------------------------------------------------
    def check_growth(self, v):
        post = [s for s in v.samples if s[0] >= self.o.warmup]
        if len(post) < 2:
            self.fail("%s: too few samples after warm-up (%d)" %
                      (v.name, len(post)))
            return None
        k = max(3, len(post) // 10)
        k = min(k, len(post) // 2) or 1
        base = median([s[1] for s in post[:k]])
        last = median([s[1] for s in post[-k:]])
        tol = max(RSS_TOL_KB, RSS_TOL_FRAC * base)
        if last - base > tol:
            self.fail("%s: RSS grew after warm-up: %d kB -> %d kB (+%d kB, "
                      "tolerance %d kB)" % (v.name, base, last, last - base,
                                            tol))
        a, b = v.quiet.get("warmup"), v.quiet.get("end")
        if a and b:
            if len(a[0]) != len(b[0]) or a[0] != b[0]:
                self.fail("%s: open fds at rest changed: %d -> %d (%s)" %
                          (v.name, len(a[0]), len(b[0]),
                           diff_kinds(a[0], b[0])))
            if a[1] != b[1]:
                self.fail("%s: threads at rest changed: %d -> %d" %
                          (v.name, a[1], b[1]))
        return base, last, k

    # -- the run -----------------------------------------------------------
    def run(self):
        o = self.o
        self.plan()
        log("# soak: %d VMs, %d s (warm-up %d s), sample every %g s, seed "
            "%d, %d client threads, a host event every %g s per VM on "
            "average; files in %s" % (o.vms, o.duration, o.warmup,
                                      o.interval, o.seed, o.clients,
                                      o.event_mean, self.top))
        for v in self.vms:
            log("# %s %-10s %s%s" % (v.name, v.kind,
                                     " ".join(v.guest_args),
                                     "  (hook hangs, --hook-timeout %s)" %
                                     v.hook_timeout if v.slow else ""))
        self.t0 = time.monotonic()
        if not self.start_vms():
            for v in self.vms:
                if v.p and v.p.poll() is None:
                    v.p.kill()
                    v.p.wait()
            return 2
        threads = [threading.Thread(target=self.events, daemon=True,
                                    args=(random.Random(self.rng.random()),))]
        threads += [threading.Thread(target=self.client, daemon=True,
                                     args=(random.Random(self.rng.random()),))
                    for _ in range(o.clients)]
        for t in threads:
            t.start()
        log("%7s %4s %10s %8s %7s %7s %7s %7s" %
            ("t_s", "vms", "rss_sum_M", "rss_max_M", "fds_max", "fds_sum",
             "threads", "actions"))
        next_sample = 0.0
        warm_done = False
        while self.elapsed() < o.duration:
            if not warm_done and self.elapsed() >= o.warmup:
                self.quiesce("warmup")
                self.quiet.clear()
                warm_done = True
            if self.elapsed() >= next_sample:
                self.sample()
                next_sample += o.interval
            time.sleep(max(0.0, min(next_sample, o.duration) -
                           self.elapsed()))
        self.sample()
        self.quiesce("end")
        for v in self.live_vms():
            rc, out, _ = self.sysidlectl("--json", "status", v.name)
            try:
                v.final_status = json.loads(out) if rc == 0 else None
            except ValueError:
                v.final_status = None
        self.stop.set()
        self.quiet.clear()
        for t in threads:
            t.join(timeout=30)
            if t.is_alive():
                self.fail("a client thread did not end within 30 s")
        self.stop_vms_timed()
        self.report()
        return 1 if self.failures else 0

    def write_csv(self, path):
        with open(path, "w") as f:
            f.write("t_s,vm,rss_kb,fds,threads,rss_anon_kb\n")
            rows = sorted((s[0], v.name) + s[1:] for v in self.vms
                          for s in v.samples)
            for r in rows:
                f.write("%.1f,%s,%d,%d,%d,%d\n" % r)

    def report(self):
        if self.o.csv:
            self.write_csv(self.o.csv)
        for v in self.vms:
            if v.exit:
                self.check_exit(v)
            else:
                v.hook_events = []
        self.check_leftovers()
        log("\n# per VM: RSS kB (first after warm-up, median of the first "
            "k / last k after warm-up, min/median/max over the run), fds "
            "(min/median/max of the samples; at rest after warm-up -> at "
            "the end), threads at rest, exit; anon: RssAnon kB, first and "
            "last after warm-up")
        log("%-7s %-10s %7s %7s %7s %17s %11s %11s %7s %7s %5s %10s %5s %5s "
            "%5s" %
            ("vm", "kind", "rss0", "base", "last", "rss min/med/max",
             "anon", "fds m/m/m", "fdrest", "thr", "exit", "exit_s", "hooks",
             "idle", "pause"))
        for v in self.vms:
            g = self.check_growth(v) if v.samples else None
            post = [s for s in v.samples if s[0] >= self.o.warmup]
            rss = [s[1] for s in v.samples]
            fds = [s[2] for s in v.samples]
            a, b = v.quiet.get("warmup"), v.quiet.get("end")
            c = (v.final_status or {}).get("counters", {})
            log("%-7s %-10s %7s %7s %7s %17s %11s %11s %7s %7s %5s %10s %5d "
                "%5s %5s" % (
                    v.name, v.kind, post[0][1] if post else "-",
                    "%d" % g[0] if g else "-", "%d" % g[1] if g else "-",
                    "%d/%d/%d" % (min(rss), median(rss), max(rss))
                    if rss else "-",
                    "%d->%d" % (post[0][4], post[-1][4]) if post else "-",
                    "%d/%d/%d" % (min(fds), median(fds), max(fds))
                    if fds else "-",
                    "%s->%s" % (len(a[0]) if a else "-",
                                len(b[0]) if b else "-"),
                    "%s->%s" % (a[1] if a else "-", b[1] if b else "-"),
                    v.exit[0] if v.exit else "-",
                    "%.3f" % v.exit[1] if v.exit and v.exit[1] is not None
                    else "-", len(getattr(v, "hook_events", [])),
                    c.get("full_idle_periods", "-"), c.get("pauses", "-")))
        log("\n# counters at the end (sum over VMs): " + ", ".join(
            "%s %s" % (k, sum((v.final_status or {}).get("counters", {})
                              .get(k, 0) for v in self.vms))
            for k in ("full_idle_periods", "force_exits", "violations",
                      "events_dropped", "watch_dropped", "hooks_run",
                      "hooks_failed", "hooks_dropped", "pauses",
                      "resumes_requested", "resumes_self")))
        log("# actions: " + ", ".join("%s %d" % kv
                                      for kv in sorted(self.counts.items())))
        warns = {}
        for v in self.vms:
            for line in v.stderr().splitlines():
                key = re.sub(r"\d+(\.\d+)?", "N", line)[:120]
                warns[key] = warns.get(key, 0) + 1
        if warns:
            log("# VMM stderr lines (numbers as N), count:")
            for k, n in sorted(warns.items(), key=lambda kv: -kv[1]):
                log("#   %5d  %s" % (n, k))
        rep = [(v.name,) + v.jiffies for v in self.vms
               if getattr(v, "jiffies", (0, 0)) != (0, 0)]
        if rep:
            log("# idle.elf jiffies reports after serial wake-ups (ok/off): " +
                ", ".join("%s %d/%d" % r for r in rep))
        for f in self.findings:
            log("# finding: " + f)
        if self.failures:
            log("\nsoak: FAIL (%d) - files kept in %s" %
                (len(self.failures), self.top))
            for f in self.failures:
                log("  - " + f.split("\n")[0])
        else:
            log("\nsoak: PASS: %d VMs, %d s, no growth after warm-up "
                "(RSS tolerance max(%d kB, %d%%), fds and threads at rest "
                "unchanged), every VM exited cleanly" %
                (len(self.vms), self.o.duration, RSS_TOL_KB,
                 RSS_TOL_FRAC * 100))
            if self.findings or self.o.keep:
                log("# files kept in %s" % self.top)
            else:
                shutil.rmtree(self.top, ignore_errors=True)


def diff_kinds(a, b):
    ca, cb = {}, {}
    for x in a:
        ca[x] = ca.get(x, 0) + 1
    for x in b:
        cb[x] = cb.get(x, 0) + 1
    return ", ".join("%s %d->%d" % (k, ca.get(k, 0), cb.get(k, 0))
                     for k in sorted(set(ca) | set(cb))
                     if ca.get(k, 0) != cb.get(k, 0))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default="build", help="the build directory")
    ap.add_argument("--vms", type=int, default=16)
    ap.add_argument("--duration", type=float, default=600,
                    help="seconds (default 600)")
    ap.add_argument("--warmup", type=float, default=None,
                    help="seconds before growth counts (default 60, or a "
                    "quarter of a shorter --duration)")
    ap.add_argument("--interval", type=float, default=5,
                    help="seconds between samples (default 5)")
    ap.add_argument("--seed", type=int, default=None,
                    help="the RNG seed (default: random, printed)")
    ap.add_argument("--clients", type=int, default=3,
                    help="concurrent control client threads (default 3)")
    ap.add_argument("--event-mean", type=float, default=20,
                    help="mean seconds between two host events for one VM "
                    "(default 20)")
    ap.add_argument("--csv", metavar="FILE",
                    help="also write every sample, one line per VM per "
                    "sample: t_s,vm,rss_kb,fds,threads,rss_anon_kb")
    ap.add_argument("--keep", action="store_true",
                    help="keep the temporary directory after a pass "
                    "(kept anyway after a failure or a finding)")
    o = ap.parse_args()
    if o.seed is None:
        o.seed = random.SystemRandom().randrange(1 << 31)
    if o.warmup is None:
        o.warmup = min(60.0, o.duration / 4)
    if o.vms < 1 or o.duration <= 0 or o.interval <= 0 or \
            not 0 <= o.warmup < o.duration or o.clients < 0 or \
            o.event_mean <= 0:
        ap.error("bad --vms, --duration, --warmup, --interval, --clients "
                 "or --event-mean")
    for exe in ("vmm", "sysidlectl"):
        if not os.access(os.path.join(o.build, exe), os.X_OK):
            ap.error("%s/%s is missing: build first" % (o.build, exe))
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        print("soak: skipped: /dev/kvm is not usable", file=sys.stderr)
        return 77
    return Soak(o).run()


if __name__ == "__main__":
    sys.exit(main())
