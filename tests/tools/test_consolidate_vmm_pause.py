#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-only
"""tools/sysidle-consolidate with this VMM's pause/resume: the client logic
against a fake control socket (a small server speaking the protocol of
vmm/export/README.md, its "threads" threads of this process).

Checked: pause after --suspend-after, a self-resume reported by the VMM
(timer) seen and not answered, paused again when idle again, resumed on
wake and at exit, a VMM without "pause"; a VMM whose status names another
process's threads (its own PID, or claiming the other's): none pinned.

usage: test_consolidate_vmm_pause.py TOOL
(TOOL: tools/sysidle-consolidate; its modules are next to it.)
Exit: 0 all passed, 1 a check failed, 77 skipped (no libvirt binding: the
tool's modules are loaded as for the libvirt tests)."""
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                ".."))
from tap import check  # noqa: E402
from consolidate_testdriver import MS_ROUND, Run, main  # noqa: E402
from sysidle_consolidate import common, daemon, policy  # noqa: E402
from sysidle_consolidate import vmm_source  # noqa: E402


# --- this VMM's pause / resume, against a fake control socket ------------
class FakeVmm:
    """A control socket speaking the protocol: status, watch (events
    pushed by the test), pause, resume; @pause False: a VMM without them.
    Its "threads" are threads of this process."""

    def __init__(self, path, name, pause=True):
        self.path = path
        self.name = name
        self.pause_ok = pause
        self.state = "NOT"
        self.since = int(time.time() * 1000)
        self.paused = False
        self.requests = []
        self.watchers = []
        self.lock = threading.Lock()
        self.stop_ev = threading.Event()
        self.workers = [threading.Thread(target=self.stop_ev.wait,
                                         daemon=True) for _ in range(3)]
        for w in self.workers:
            w.start()
        self.srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.srv.bind(path)
        self.srv.listen(8)
        threading.Thread(target=self.accept, daemon=True).start()

    def tids(self):
        return [w.native_id for w in self.workers]

    def accept(self):
        while True:
            try:
                c, _ = self.srv.accept()
            except OSError:
                return
            threading.Thread(target=self.serve, args=(c,),
                             daemon=True).start()

    def send(self, c, obj):
        try:
            c.sendall((json.dumps(obj) + "\n").encode())
        except OSError:
            pass

    def broadcast(self, obj):
        obj["unix_ms"] = int(time.time() * 1000)
        with self.lock:
            for c in list(self.watchers):
                self.send(c, obj)

    def serve(self, c):
        buf = b""
        while True:
            try:
                d = c.recv(4096)
            except OSError:
                d = b""
            if not d:
                with self.lock:
                    if c in self.watchers:
                        self.watchers.remove(c)
                c.close()
                return
            buf += d
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                self.request(c, json.loads(line))

    def request(self, c, req):
        cmd = req.get("cmd")
        with self.lock:
            self.requests.append(cmd)
        if cmd == "status":
            t = self.tids()
            self.send(c, {"ok": True, "cmd": "status", "vm": {
                "name": self.name, "pid": os.getpid(), "state": self.state,
                "since_unix_ms": self.since, "paused": self.paused,
                "housekeeping_tid": t[2],
                "vcpus": [{"id": 0, "tid": t[0]}, {"id": 1, "tid": t[1]}]}})
        elif cmd == "watch":
            with self.lock:
                self.send(c, {"ok": True, "cmd": "watch",
                              "state": self.state,
                              "since_unix_ms": self.since})
                self.watchers.append(c)
        elif cmd in ("pause", "resume") and self.pause_ok:
            was = self.paused
            self.paused = cmd == "pause"
            if self.paused and not was:
                self.paused_at = time.monotonic()
                self.broadcast({"event": "paused"})
            elif was and not self.paused:
                self.broadcast({"event": "resumed", "reason": "request",
                                "paused_ms": self.paused_ms()})
            self.send(c, {"ok": True, "cmd": cmd, "paused": self.paused})
        else:
            self.send(c, {"ok": False,
                          "error": "unknown command '%s'" % cmd})

    def paused_ms(self):
        return int((time.monotonic() - self.paused_at) * 1000)

    def set_state(self, to):
        fr, self.state = self.state, to
        self.since = int(time.time() * 1000)
        self.broadcast({"event": "state", "from": fr, "to": to, "vcpu": -1})

    def self_resume(self, reason):
        self.paused = False
        self.broadcast({"event": "resumed", "reason": reason,
                        "paused_ms": self.paused_ms()})

    def close(self):
        self.srv.close()
        with self.lock:
            for c in self.watchers:
                c.close()
        self.stop_ev.set()


class VmmRun(Run):
    def __init__(self, paths, policies, suspend_after, idle):
        self.lines = []
        self.log = common.Log(out=self.lines)
        self.ctx = daemon.Context(self.log, policy.parse_policy(policies),
                                  suspend_after, 60.0, idle=idle)
        self.src = vmm_source.VmmSource(self.ctx, None, paths)
        self.d = daemon.Daemon(self.ctx, [self.src])
        self.rounds = []

    def stop(self):
        self.d.finish("SIGTERM")


def aff(tids):
    return [os.sched_getaffinity(t) for t in tids]


def test_vmm_fake():
    full = os.sched_getaffinity(0)
    idle = {max(full)}
    with tempfile.TemporaryDirectory() as tmp:
        f = FakeVmm(os.path.join(tmp, "a.sock"), "fake-a")
        old = FakeVmm(os.path.join(tmp, "b.sock"), "fake-b", pause=False)
        orig = aff(f.tids())
        r = VmmRun([f.path, old.path], "pack,suspend", 0.3, idle)
        r.until(lambda: len(f.watchers) == 1 and len(old.watchers) == 1, 3)
        t0 = time.monotonic()
        f.set_state("FULL_NOTED")
        t_set = time.monotonic()
        old.set_state("FULL_NOTED")
        k0 = len(r.rounds)
        packed = r.until(lambda: aff(f.tids()) == [idle] * 3, 2)
        ok = r.until(lambda: f.paused, 3)
        t = time.monotonic() - t0
        # The daemon runs in this thread: the pause is timed by its own
        # rounds. Paused at the first step once 0.3 s had passed since the
        # event's unix_ms (none let by); the lower bound stays in wall
        # time, which a loaded host can only make longer.
        isu = r.round_of(r"^suspend fake-a: paused")
        late = r.missed(k0, isu or 0, t_set + 0.3 + 0.002)
        check(packed and ok and 0.3 - MS_ROUND <= t and isu is not None and
              not late
              and r.line(r"^pack fake-a: 3 threads -> cpus %s "
                         r"\(FULL_NOTED\)$" % common.fmt_cpus(idle), 0) and
              r.line(r"^suspend fake-a: paused \(FULL_NOTED for \d+\.\d s, "
                     r"--suspend-after 0\.3\)$", 0),
              "fake VMM, pack,suspend --suspend-after 0.3: packed at once, "
              "{\"cmd\":\"pause\"} %.0f ms after FULL_NOTED, at the first "
              "step due (%d let by)" % (t * 1000, len(late)),
              r.text())
        nope = r.line(r"^error fake-b: cannot suspend", 1)
        r.run_for(0.4)
        check(nope == "error fake-b: cannot suspend, the VMM has no pause "
              "(unknown command 'pause')" and
              old.requests.count("pause") == 1,
              "a VMM without pause: '%s', asked once only" % nope, r.text())
        # the VMM resumes itself (a guest timer): seen, not answered
        n0 = len(r.lines)
        nres = f.requests.count("resume")
        f.self_resume("timer")
        seen = r.line(r"^resumed fake-a: by the VMM \(timer\) after \d+ ms "
                      r"paused$", 2, n0)
        again = r.until(lambda: f.paused, 3)
        # In the daemon's rounds: the resume seen in round a, the pause
        # again in round b, no sooner than 0.3 s after a began and at the
        # first step due (none let by).
        a = r.round_of(r"^resumed fake-a: by the VMM \(timer\)", n0)
        b = r.round_of(r"^suspend fake-a: paused", n0)
        rd = r.rounds
        t = rd[b][2] - rd[a][1] if a is not None and b is not None else -1
        check(seen and again and f.requests.count("resume") == nres and
              t >= 0.3 - 1e-6 and a < b and
              not r.missed(a + 1, b, rd[a][2] + 0.3 + 0.001),
              "the VMM resumed itself (timer): '%s'; no resume sent; still "
              "FULL_NOTED, paused again %.0f ms later" % (seen, t * 1000),
              r.text())
        # self-resume then the wake: the state event restores; no resume
        # request needed
        f.self_resume("input")
        f.set_state("NOT")
        ok = r.until(lambda: aff(f.tids()) == orig, 2)
        check(ok and f.requests.count("resume") == nres and
              r.line(r"^resumed fake-a: by the VMM \(input\)", 0, n0),
              "input: the VMM's own resume, then FULL_NOTED -> NOT: threads "
              "restored, no resume request", r.text())
        # the wake comes first (a kick): the tool resumes it
        f.set_state("FULL_NOTED")
        r.until(lambda: f.paused, 3)
        n0 = len(r.lines)
        f.set_state("NOT")
        ok = r.until(lambda: not f.paused and aff(f.tids()) == orig, 2)
        check(ok and r.line(r"^resume fake-a: after \d+\.\d s \(FULL_NOTED "
                            r"-> NOT\)$", 0, n0),
              "FULL_NOTED -> NOT while paused: {\"cmd\":\"resume\"} sent, "
              "threads restored", r.text())
        # exit: resumed
        f.set_state("FULL_NOTED")
        r.until(lambda: f.paused, 3)
        r.stop()
        check(not f.paused and aff(f.tids()) == orig and
              re.search(r"^resume fake-a: .*\(SIGTERM\)$", r.text(), re.M),
              "exit: the paused VM resumed, its threads restored", r.text())
        f.close()
        old.close()


class LiarVmm(FakeVmm):
    """A fake VMM whose status names the threads of another process (and,
    with @pid, claims that other process's PID): they must never be
    pinned."""

    def __init__(self, path, name, victim, pid=None):
        self.victim = victim
        self.claim = pid
        super().__init__(path, name)

    def tids(self):
        return [self.victim.pid] * 3

    def request(self, c, req):
        if req.get("cmd") != "status" or self.claim is None:
            return super().request(c, req)
        t = self.tids()
        self.send(c, {"ok": True, "cmd": "status", "vm": {
            "name": self.name, "pid": self.claim, "state": self.state,
            "since_unix_ms": self.since, "paused": False,
            "housekeeping_tid": t[2],
            "vcpus": [{"id": 0, "tid": t[0]}, {"id": 1, "tid": t[1]}]}})


def test_vmm_liar():
    """Thread IDs are checked against the socket's peer (SO_PEERCRED), not
    against the PID the reply claims."""
    full = os.sched_getaffinity(0)
    idle = {max(full)}
    victim = subprocess.Popen(["sleep", "60"])
    try:
        before = os.sched_getaffinity(victim.pid)
        with tempfile.TemporaryDirectory() as tmp:
            a = LiarVmm(os.path.join(tmp, "a.sock"), "liar-a", victim)
            b = LiarVmm(os.path.join(tmp, "b.sock"), "liar-b", victim,
                        pid=victim.pid)
            r = VmmRun([a.path, b.path], "pack", 0.3, idle)
            r.until(lambda: len(a.watchers) == 1 and len(b.watchers) == 1, 3)
            a.set_state("FULL_NOTED")
            b.set_state("FULL_NOTED")
            pa = r.line(r"^pack liar-a: ", 2)
            # never named by a status it gave: its socket's name
            pb = r.line(r"^error b: status failed, not packed", 2)
            during = os.sched_getaffinity(victim.pid)
            r.stop()
            after = os.sched_getaffinity(victim.pid)
            check(pa == "pack liar-a: 0 threads -> cpus %s (FULL_NOTED)" %
                  common.fmt_cpus(idle) and pb is not None and
                  "the status says pid %d, the socket's peer is pid %d" %
                  (victim.pid, os.getpid()) in pb and during == before and
                  after == before,
                  "a VMM naming another process's threads: none pinned "
                  "(its own: 0 threads; one claiming the other's PID: "
                  "refused); that process's affinity unchanged",
                  "%s\n%s\n%s -> %s\n%s" % (pa, pb, before, after,
                                             r.text()))
            a.close()
            b.close()
    finally:
        victim.kill()
        victim.wait()


if __name__ == "__main__":
    sys.exit(main([], [test_vmm_fake, test_vmm_liar]))
