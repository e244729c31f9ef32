# SPDX-License-Identifier: GPL-2.0-only
"""What the pause tests (test_pause.py, test_pause_wake.py) share: a watch
connection read by a thread (Watcher), a VM started with its control
socket, status polled until it holds, the VM quiescent (fully idle, its
ticks stopped) before a pause, its threads' state and CPU time from /proc,
a metric of its --metrics-file, and sysidlectl (the fourth argument).
Imported after vmmtest.init(sys.argv)."""
import re
import signal
import subprocess
import sys
import threading
import time

import vmmtest
from vmmtest import Client, Vm, check, poll_until

SYSIDLECTL = sys.argv[4]
REASONS = {"request", "timer", "input", "kick", "other"}


class Watcher:
    """A watch connection read by a thread: every line in .events, with the
    time it arrived (monotonic) in .times."""

    def __init__(self, path):
        self.c = Client(path)
        self.reply = self.c.request({"cmd": "watch"})
        self.events, self.times = [], []
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def _run(self):
        while True:
            ev = self.c.line(3600)
            if ev is None:
                return
            self.events.append(ev)
            self.times.append(time.monotonic())

    def wait(self, pred, timeout=10, start=0):
        """The index of the first event from @start on for which @pred
        holds, waited for at most @timeout seconds; None if none came."""
        def look():
            for i in range(start, len(self.events)):
                if pred(self.events[i]):
                    return i
            return None
        return poll_until(look, timeout, done=lambda i: i is not None)

    def pauses(self, start=0):
        return [e for e in self.events[start:]
                if isinstance(e, dict) and e.get("event") in
                ("paused", "resumed")]

    def close(self):
        self.c.close()


def is_event(kind, **kw):
    return lambda e: isinstance(e, dict) and e.get("event") == kind and \
        all(e.get(k) == v for k, v in kw.items())


def connect(path, proc, timeout=30):
    def try_connect():
        if proc.poll() is not None:
            return "gone"
        try:
            return Client(path)
        except OSError:
            return None
    c = poll_until(try_connect, timeout)
    return c if isinstance(c, Client) else None


def started(args, sock, up, what):
    """A VM of @args with its control socket @sock, once the guest printed
    a line matching @up: (vm, client); else a failed check '@what: socket
    and guest up', the VM killed, and (None, None)."""
    vm = Vm(args)
    c = connect(sock, vm.p)
    if c is not None and vm.wait_line(up, 20) is not None:
        return vm, c
    check(False, "%s: socket and guest up" % what, vm.err)
    vm.stop(signal.SIGKILL)
    return None, None


def wait_status(c, pred, timeout=30):
    """Polls status on @c until @pred(vm) holds; the last vm, or None."""
    last = [None]

    def look():
        vm = c.status()
        last[0] = vm
        return vm is not None and pred(vm)
    return last[0] if poll_until(look, timeout) else None


def ask(c, obj):
    """c.request(@obj); None when the connection is gone (the VM exited)."""
    try:
        return c.request(obj)
    except OSError:
        return None


def ask_status(c):
    """The VM object of a status request; None on any error."""
    r = ask(c, {"cmd": "status"})
    return r["vm"] if isinstance(r, dict) and r.get("ok") else None


def quiescent(c, log, timeout=30):
    """Polls until the VM is fully idle with its ticks stopped: "tick
    stopped" the last line of its --sysidle-log, then a status in
    FULL_NOTED with every vCPU halted. Returns that status (the vm object),
    or None. FULL_NOTED alone is not enough before a pause: it is set while
    the timekeeper may still be in a tick-only window (running, its tick
    pending) and before its tick is stopped, so a pause taken then can be
    ended at once by that tick, not by what the test does next."""
    def look():
        lines = vmmtest.read_lines(log)
        if not lines or not lines[-1].endswith(" tick stopped"):
            return None
        vm = ask_status(c)
        return vm if vm is not None and vm["state"] == "FULL_NOTED" and \
            all(x["idle"] for x in vm["vcpus"]) else None
    return poll_until(look, timeout)


def thread_states(pid, tids):
    """The /proc state letter of each thread in @tids."""
    out = []
    for t in tids:
        try:
            with open("/proc/%d/task/%d/stat" % (pid, t)) as f:
                out.append(f.read().rsplit(")", 1)[1].split()[0])
        except OSError:
            out.append("?")
    return out


def thread_cpu(pid, tid):
    """utime + stime of thread @tid, in clock ticks."""
    with open("/proc/%d/task/%d/stat" % (pid, tid)) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def metric_in(text, name):
    m = re.search(r"^%s\{[^}]*\} (\S+)$" % re.escape(name), text, re.M)
    return float(m.group(1)) if m else None


def metric(path, name):
    try:
        with open(path) as f:
            text = f.read()
    except OSError:
        return None, ""
    return metric_in(text, name), text


def ctl(args, timeout=20):
    p = subprocess.run([SYSIDLECTL] + args, capture_output=True, text=True,
                       timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def halt_exits(vm):
    return [v["halt_exits"] for v in vm["vcpus"]]
