#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""sysidlectl (the control socket's client) without a VMM: its usage and
errors, then its error paths and output formats against fake servers
written here (a socket that denies, one that answers garbage, one that
never answers, a stale one, one that speaks the protocol, one that holds
a watch).

usage: test_sysidlectl_fake.py VMM GUEST_DIR GUEST_TOOLS_DIR SYSIDLECTL
Exit: 0 all passed, 1 a check failed, 77 skipped (no usable /dev/kvm)."""
import json
import os
import re
import signal
import socket
import sys
import tempfile
import threading

import vmmtest
from vmmtest import check

vmmtest.init(sys.argv)
from metrics_file import CLOCK, CTL, Watch, ctl  # noqa: E402

# --- fake servers: the client's side of the protocol, without a VMM --------

FAKE_VM = {
    "name": "fake", "uuid": "12345678-1234-4123-8123-123456789abc",
    "pid": 4242, "sysidle": True, "state": "FULL_NOTED", "state_num": 4,
    "since_unix_ms": 1700000000123, "in_state_s": 75.5, "uptime_s": 80.25,
    "timekeeper": 0, "housekeeping_tid": 4250,
    "vcpus": [{"id": 0, "tid": 4243, "idle": True, "halt_exits": 17,
               "ticks_suppressed": 0},
              {"id": 1, "tid": 4244, "idle": False, "halt_exits": 9,
               "ticks_suppressed": 31}],
    "counters": {"full_idle_periods": 2, "full_idle_seconds": 70.5,
                 "ticks_suppressed": 31, "host_timer_wakeups": 12,
                 "housekeeping_wakeups": 20, "halt_exits": 26,
                 "force_exits": 1, "violations": 0, "scans": 3,
                 "tick_restarts": 1, "events_dropped": 0,
                 "watch_dropped": 0, "hooks_run": 0, "hooks_failed": 0,
                 "hooks_dropped": 0,
                 "state_seconds": {"NOT": 1.5, "SHORT": 0.25, "LONG": 0.0,
                                   "FULL": 0.0, "FULL_NOTED": 70.5}}}
FAKE_EVENTS = [
    {"event": "state", "from": "FULL", "to": "FULL_NOTED", "vcpu": -1,
     "unix_ms": 1700000001000},
    {"event": "dropped", "count": 3},
    {"event": "state", "from": "FULL_NOTED", "to": "NOT", "vcpu": 1,
     "unix_ms": 1700000002500, "full_idle_ms": 1500},
]


class FakeServer:
    """A Unix socket at @path answering as @mode says:
    denied   one permission-denied line, closed at once (before reading)
    garbage  a line that is not JSON
    silent   reads, never answers
    fake     the protocol: status, kick, watch (3 events, then closes)
    hold     watch: the first reply, then nothing until stopped"""

    def __init__(self, path, mode):
        self.path, self.mode = path, mode
        self.stop_ev = threading.Event()
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.bind(path)
        self.s.listen(16)
        self.s.settimeout(0.05)
        self.conns = []
        self.t = threading.Thread(target=self._accept, daemon=True)
        self.t.start()

    def _accept(self):
        while not self.stop_ev.is_set():
            try:
                c, _ = self.s.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            self.conns.append(c)
            threading.Thread(target=self._serve, args=(c,),
                             daemon=True).start()

    def _send(self, c, obj):
        c.sendall((json.dumps(obj) + "\n").encode())

    def _serve(self, c):
        try:
            if self.mode == "denied":
                self._send(c, {"ok": False, "error": "permission denied"})
                c.close()
                return
            f = c.makefile("rb")
            for raw in f:
                req = json.loads(raw)
                cmd = req.get("cmd")
                if self.mode == "garbage":
                    c.sendall(b"hello, world\n")
                elif self.mode == "silent":
                    continue
                elif cmd == "status":
                    self._send(c, {"ok": True, "cmd": "status",
                                   "vm": FAKE_VM})
                elif cmd == "kick":
                    self._send(c, {"ok": True, "cmd": "kick"})
                elif cmd == "watch":
                    self._send(c, {"ok": True, "cmd": "watch",
                                   "state": "FULL",
                                   "since_unix_ms": 1700000000500})
                    if self.mode == "hold":
                        self.stop_ev.wait(30)
                    else:
                        for e in FAKE_EVENTS:
                            self._send(c, e)
                    c.close()
                    return
                else:
                    self._send(c, {"ok": False,
                                   "error": "unknown command '%s'" % cmd})
        except (OSError, ValueError):
            pass

    def stop(self):
        self.stop_ev.set()
        self.t.join(2)
        self.s.close()
        for c in self.conns:
            try:
                c.close()
            except OSError:
                pass


def test_usage(tmp):
    rc, out, err, _ = ctl(["--help"])
    check(rc == 0 and "Usage: sysidlectl" in out and
          all(w in out for w in ["list", "status NAME", "watch [NAME]", "top",
                                 "kick NAME", "--dir", "--json",
                                 "--timeout", "Exit status"]),
          "sysidlectl --help: exit 0, usage on stdout", "exit %s\n%s%s" %
          (rc, out, err))
    for args, msg in [([], "expected a command"),
                      (["frob"], "unknown command 'frob'"),
                      (["status"], "expected a VM name"),
                      (["status", "a", "b"], "unexpected argument 'b'"),
                      (["list", "x"], "unexpected argument 'x'"),
                      (["--timeout", "0", "list"], "--timeout '0'"),
                      (["--timeout", "x", "list"], "--timeout 'x'"),
                      (["--bogus", "list"], "unknown option '--bogus'"),
                      (["list", "--dir"], "needs an argument")]:
        rc, out, err, _ = ctl(args)
        check(rc == 2 and err.startswith("sysidlectl: ") and msg in err
              and "Usage: sysidlectl" in err and out == "",
              "sysidlectl %s: exit 2, %r and the usage on stderr" %
              (" ".join(args) or "(no arguments)", msg),
              "exit %s\n%s%s" % (rc, out, err))
    rc, out, err, _ = ctl(["--dir", tmp, "status", "nosuchvm"])
    check(rc == 1 and err.count("\n") == 1 and
          "sysidlectl: no such VM 'nosuchvm'" in err,
          "sysidlectl status UNKNOWN: exit 1, one clear line",
          "exit %s\n%s%s" % (rc, out, err))
    rc, out, err, _ = ctl(["kick", os.path.join(tmp, "nosuch.sock")])
    check(rc == 1 and "no such socket" in err,
          "sysidlectl kick PATH (missing): exit 1, 'no such socket'",
          "exit %s\n%s%s" % (rc, out, err))
    rc, out, err, _ = ctl(["--dir", os.path.join(tmp, "nodir"), "list"])
    check(rc == 1 and out == "" and err.startswith("sysidlectl: --dir ") and
          "No such file or directory" in err and err.count("\n") == 1,
          "sysidlectl list, no such directory: exit 1, one line saying so",
          "exit %s\n%s%s" % (rc, out, err))


def test_fake(tmp):
    """The client against fake servers."""
    d = os.path.join(tmp, "fake")
    os.mkdir(d)
    servers = [FakeServer(os.path.join(d, m + ".sock"), m)
               for m in ["denied", "garbage", "silent", "fake"]]
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(os.path.join(d, "stale.sock"))
    stale.close()  # bound, never listening: connection refused
    base = ["--dir", d, "--timeout", "0.5"]
    try:
        for name, msg in [("denied", "sysidlectl: denied: permission denied"),
                          ("garbage", "sysidlectl: garbage: malformed reply"),
                          ("silent", "sysidlectl: silent: no reply within "
                           "0.5 s (timeout)"),
                          ("stale", "sysidlectl: stale: the VM is not "
                           "running")]:
            rc, out, err, secs = ctl(base + ["status", name])
            check(rc == 1 and err.startswith(msg) and
                  err.count("\n") == 1 and out == "" and secs < 5,
                  "sysidlectl status against a %s socket: exit 1, %r "
                  "(%.1f s)" % (name, msg, secs),
                  "exit %s\n%s%s" % (rc, out, err))

        rc, out, err, secs = ctl(base + ["list"])
        rows = {l.split()[0]: l for l in out.splitlines()[1:]}
        want = {"denied": "permission denied", "garbage": "malformed reply",
                "silent": "timeout", "stale": "not running"}
        ok = rc == 0 and sorted(rows) == sorted(list(want) + ["fake"]) and \
            out.splitlines()[0].split() == ["NAME", "STATE", "SINCE",
                                            "HALTED", "PID"] and \
            rows["fake"].split() == ["fake", "FULL_NOTED", "1m15s", "1/2",
                                     "4242"] and \
            all(rows[n].split()[1] == "?" and w in rows[n]
                for n, w in want.items())
        check(ok and secs < 5, "sysidlectl list: the VM, and '?' with the "
              "reason for each bad socket (%.1f s)" % secs,
              "exit %s\n%s%s" % (rc, out, err))
        rc, out, err, _ = ctl(base + ["--json", "list"])
        try:
            objs = {o["socket"]: o for o in map(json.loads,
                                                out.splitlines())}
        except (ValueError, KeyError, TypeError) as e:
            objs = {"error": str(e)}
        ok = rc == 0 and len(objs) == 5 and \
            objs.get("fake.sock", {}).get("uuid") == FAKE_VM["uuid"] and \
            all(objs.get(n + ".sock", {}).get("state") == "?" and
                w in objs[n + ".sock"].get("error", "")
                for n, w in want.items())
        check(ok, "sysidlectl --json list: one object per VM per line",
              "exit %s\n%s%s" % (rc, out, err))

        path = os.path.join(d, "fake.sock")
        rc, out, err, _ = ctl(["--json", "status", path])
        try:
            got = json.loads(out)
        except ValueError:
            got = None
        check(rc == 0 and got == FAKE_VM and out.count("\n") == 1,
              "sysidlectl --json status PATH: the status object, one line",
              "exit %s\n%s%s" % (rc, out, err))
        rc, out, err, _ = ctl(base + ["status", "fake"])
        ok = rc == 0 and all(re.search(p, out, re.M) for p in [
            r"^name +fake$", r"^pid +4242$", r"^state +FULL_NOTED since " +
            CLOCK + r" \(1m15s\)$", r"^uptime +1m20s$",
            r"^ +0 +4243 +yes +17 +0$", r"^ +1 +4244 +no +9 +31$",
            r"^ +full_idle_periods +2$", r"FULL_NOTED 70\.500"])
        check(ok, "sysidlectl status NAME: summary, vCPU table, counters",
              "exit %s\n%s%s" % (rc, out, err))
        rc, out, err, _ = ctl(base + ["kick", "fake"])
        check(rc == 0 and out == "" and err == "",
              "sysidlectl kick NAME: exit 0, silent", "exit %s\n%s%s" %
              (rc, out, err))

        rc, out, err, _ = ctl(base + ["watch", "fake"])
        lines = out.splitlines()
        pats = [CLOCK + r" FULL \(current state\)",
                CLOCK + r" FULL -> FULL_NOTED",
                CLOCK + r" \(3 events dropped.*\)",
                CLOCK + r" FULL_NOTED -> NOT vcpu 1 full idle 1500 ms"]
        check(rc == 0 and len(lines) == 4 and
              all(re.fullmatch(p, l) for p, l in zip(pats, lines)),
              "sysidlectl watch: one line per event; exit 0 when the "
              "socket closes", "exit %s\n%s%s" % (rc, out, err))
        rc, out, err, _ = ctl(base + ["--json", "watch", "fake"])
        try:
            got = [json.loads(l) for l in out.splitlines()]
        except ValueError:
            got = None
        check(rc == 0 and got and got[1:] == FAKE_EVENTS and
              got[0].get("cmd") == "watch",
              "sysidlectl --json watch: the socket's lines",
              "exit %s\n%s%s" % (rc, out, err))
    finally:
        for s in servers:
            s.stop()

    hold = FakeServer(os.path.join(d, "hold.sock"), "hold")
    try:
        for sig, want in [(signal.SIGINT, 130), (signal.SIGTERM, 143)]:
            w = Watch(["--dir", d, "watch", "hold"])
            first = w.wait_line(r"current state", 10)
            if first:
                w.p.send_signal(sig)
            rc = w.wait(10)
            check(first and rc == want, "sysidlectl watch: %s exits %d" %
                  (sig.name, want), w.detail())
    finally:
        hold.stop()



def main():
    skip = vmmtest.vm_or_skip()
    if skip:
        return skip
    if not CTL:
        print("# usage: test_sysidlectl_fake.py VMM GUEST_DIR "
              "GUEST_TOOLS_DIR SYSIDLECTL")
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        test_usage(tmp)
        test_fake(tmp)
    return vmmtest.finish()


if __name__ == "__main__":
    sys.exit(main())
