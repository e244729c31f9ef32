"""The soak run (tools/soak.py): Soak plans the VMs from the seed, starts
them, starts the host events and control clients (soak_load.Load),
samples every --interval seconds, holds the quiescent points after
warm-up and at the end, stops the VMs and reports (soak_checks.Checks).
Python 3 standard library only."""
import json
import os
import random
import subprocess
import tempfile
import threading
import time

from soak_checks import Checks
from soak_load import Load
from soak_vm import FAST_HOOK_TIMEOUT, POLL, SLOW_HOOK_TIMEOUT, Vm, log


class Soak(Load, Checks):
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
