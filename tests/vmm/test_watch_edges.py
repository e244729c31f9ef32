#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""The filtered watch: {"cmd":"watch","edges":"full_idle",
"enter_after_ms":P,"leave_after_ms":R} (vmm/export/README.md, "Filtered
watch"): bad parameters refused, settled edges only (no state events), a wake
shorter than R and a full idle period shorter than P send nothing, the
edges' times, pause and resume events still delivered, and without
--sysidle never an edge. A plain watch on the same VM tells the test
what really happened, so no wait is a blind sleep.

usage: test_watch_edges.py VMM GUEST_DIR GUEST_TOOLS_DIR SYSIDLECTL
Without a usable /dev/kvm the VMM runs on a scripted KVM (vmmtest.
use_scripted), and the check that needs burst.elf skips.

Exit: 0 all passed, 1 a check failed, 77 skipped (no /dev/kvm and no
vmm-scripted)."""
import os
import signal
import sys
import tempfile
import time

import vmmtest
from vmmtest import Client, Vm, check, connect, tool

vmmtest.init(sys.argv)
BAD = "bad watch: %s must be an integer 0..3600000"


def state_of(c):
    r = c.request({"cmd": "status"})
    return r["vm"] if isinstance(r, dict) and r.get("ok") else {}


def full_idle_for(c, seconds, timeout=20):
    """Waits (status polls) until the VM has been FULL_NOTED for
    @seconds; its status then, or None."""
    def ok():
        vm = state_of(c)
        return vm if vm.get("state") == "FULL_NOTED" and \
            vm.get("in_state_s", 0) >= seconds else None
    return vmmtest.poll_until(ok, timeout)


def edges(sock, p, r, **extra):
    """A filtered watcher (its reply read): (client, reply)."""
    w = Client(sock)
    req = {"cmd": "watch", "edges": "full_idle", "enter_after_ms": p,
           "leave_after_ms": r}
    req.update(extra)
    return w, w.request(req)


def next_state(w, to, timeout=10):
    """The next state event going to @to on the plain watcher @w."""
    end = time.monotonic() + timeout
    while True:
        ev = w.line(max(0.0, end - time.monotonic()))
        if ev is None:
            return None
        if isinstance(ev, dict) and ev.get("event") == "state" and \
                ev.get("to") == to:
            return ev


def test_bad(sock):
    c = Client(sock)
    cases = [
        ({"edges": "all"}, 'bad watch: edges must be "full_idle"'),
        ({"edges": 1}, 'bad watch: edges must be "full_idle"'),
        ({"edges": "full_idle", "enter_after_ms": -1},
         BAD % "enter_after_ms"),
        ({"edges": "full_idle", "enter_after_ms": 3600001},
         BAD % "enter_after_ms"),
        ({"edges": "full_idle", "enter_after_ms": 1.5},
         BAD % "enter_after_ms"),
        ({"edges": "full_idle", "enter_after_ms": "5"},
         BAD % "enter_after_ms"),
        ({"edges": "full_idle", "leave_after_ms": True},
         BAD % "leave_after_ms"),
        ({"edges": "full_idle", "leave_after_ms": None},
         BAD % "leave_after_ms"),
    ]
    got = []
    for extra, want in cases:
        req = {"cmd": "watch", "id": 7}
        req.update(extra)
        r = c.request(req)
        got.append(r)
        if r != {"ok": False, "error": want, "id": 7}:
            break
    r = c.request({"cmd": "status"})
    check(len(got) == len(cases) and got[-1].get("ok") is False and
          isinstance(r, dict) and r.get("ok") is True,
          "bad filtered watches: %d refused with their reason, the "
          "connection still serves requests" % len(got), got)
    c.close()


def test_zero_holds(sock, c):
    """P = R = 0: a kick gives exactly one idle:false then one idle:true,
    nothing else."""
    full_idle_for(c, 0.2)
    w, r = edges(sock, 0, 0)
    check(isinstance(r, dict) and r.get("ok") is True and
          r.get("edges") == "full_idle" and r.get("enter_after_ms") == 0 and
          r.get("leave_after_ms") == 0 and r.get("full_idle") is True and
          r.get("state") == "FULL_NOTED",
          "filtered watch, P=R=0, FULL_NOTED: the reply says full_idle "
          "true and echoes the holds", r)
    plain = Client(sock)
    plain.request({"cmd": "watch"})
    c.request({"cmd": "kick"})
    left = next_state(plain, "NOT")
    back = next_state(plain, "FULL_NOTED")
    a = w.line(5)
    b = w.line(5)
    extra = w.line(0.3)
    check(left is not None and back is not None and
          isinstance(a, dict) and a.get("event") == "full_idle" and
          a.get("idle") is False and a.get("state") in
          ("NOT", "SHORT", "LONG", "FULL") and
          a.get("since_unix_ms", 0) <= a.get("unix_ms", -1) and
          isinstance(b, dict) and b.get("event") == "full_idle" and
          b.get("idle") is True and "state" not in b and
          a["since_unix_ms"] <= b["since_unix_ms"] <= b["unix_ms"] and
          extra is None,
          "P=R=0: a kick gives one idle:false then one idle:true, no state "
          "event, times in order", [a, b, extra])
    w.close()
    plain.close()


def test_short_wake_silent(sock, c):
    """R = 2000: a kick (the VM back in FULL_NOTED within ms) sends no
    line at all."""
    full_idle_for(c, 0.2)
    w, r = edges(sock, 0, 2000)
    plain = Client(sock)
    plain.request({"cmd": "watch"})
    c.request({"cmd": "kick"})
    left = next_state(plain, "NOT")
    back = next_state(plain, "FULL_NOTED")
    out = back and (back["unix_ms"] - left["unix_ms"])
    line = w.line(1.0)
    check(r.get("full_idle") is True and left is not None and
          back is not None and out < 2000 and line is None,
          "R=2000: the VM out of full idle for %s ms and back: no line on "
          "the filtered watch" % out, line)
    w.close()
    plain.close()


def test_enter_hold(sock, c):
    """P = 1500: idle:true comes no earlier than P after the FULL_NOTED
    entry, and not much later."""
    full_idle_for(c, 1.6)
    w, r = edges(sock, 1500, 0)
    plain = Client(sock)
    plain.request({"cmd": "watch"})
    c.request({"cmd": "kick"})
    a = w.line(5)
    back = next_state(plain, "FULL_NOTED")
    b = w.line(5)
    late = b and back and b["unix_ms"] - back["unix_ms"]
    check(isinstance(a, dict) and a.get("idle") is False and
          isinstance(b, dict) and b.get("idle") is True and back and
          b["since_unix_ms"] == back["unix_ms"] and 1500 <= late <= 2500,
          "P=1500: idle:true %s ms after the FULL_NOTED entry (its "
          "since_unix_ms: the entry)" % late, [a, b, back])
    w.close()
    plain.close()


def test_busy_leave(tmp):
    """R = 300 on a guest busy for 500 ms every second (burst.elf
    period=1000 duty=50): idle:false R after each leave (its since: the
    leave), idle:true at the re-entry (P = 0)."""
    sock = os.path.join(tmp, "burst.sock")
    vm = Vm(["--cpus", "2", "--sysidle", "--append",
             "rounds=1000 period=1000 duty=50 hz=250", "--control", sock,
             tool("burst.elf")])
    c = connect(sock, proc=vm.p)
    if c is None:
        check(False, "burst.elf: the VMM listens", vm.err)
        vm.stop(signal.SIGKILL)
        return
    plain = Client(sock)
    plain.request({"cmd": "watch"})
    w, r = edges(sock, 0, 300)
    got = []
    for _ in range(4):
        ev = w.line(5)
        got.append(ev)
        if isinstance(ev, dict) and ev.get("idle") is False:
            break
    leaves = []
    while True:
        ev = plain.line(0.5)
        if ev is None:
            break
        if isinstance(ev, dict) and ev.get("from") == "FULL_NOTED":
            leaves.append(ev["unix_ms"])
    off = got[-1] if got and isinstance(got[-1], dict) else {}
    delay = off.get("unix_ms", 0) - off.get("since_unix_ms", 0)
    check(off.get("idle") is False and off.get("since_unix_ms") in leaves
          and 300 <= delay <= 800,
          "R=300, a guest busy 500 ms a second: idle:false %d ms after the "
          "leave it names" % delay, got)
    back = w.line(5)
    check(isinstance(back, dict) and back.get("idle") is True and
          back.get("unix_ms", 0) - back.get("since_unix_ms", 0) < 200,
          "then idle:true at the re-entry (P=0)", back)
    w.close()
    plain.close()
    vm.stop()


def test_pause_events(sock, c):
    """pause and resume events still come on a filtered watch."""
    full_idle_for(c, 0.2)
    w, r = edges(sock, 0, 60000)
    k = Client(sock)
    p = k.request({"cmd": "pause"})
    e1 = w.line(5)
    q = k.request({"cmd": "resume"})
    e2 = w.line(5)
    check(p.get("paused") is True and q.get("ok") is True and
          isinstance(e1, dict) and e1.get("event") == "paused" and
          isinstance(e2, dict) and e2.get("event") == "resumed" and
          e2.get("reason") == "request",
          "a filtered watch gets the paused and resumed events", [e1, e2])
    w.close()
    k.close()


def test_no_sysidle(tmp):
    sock = os.path.join(tmp, "plain.sock")
    vm = Vm(["--cpus", "2", "--append", "hz=250", "--control", sock,
             tool("idle.elf")])
    c = connect(sock, proc=vm.p)
    if c is None:
        check(False, "without --sysidle: the VMM listens", vm.err)
        vm.stop(signal.SIGKILL)
        return
    w, r = edges(sock, 0, 0)
    c.request({"cmd": "kick"})
    line = w.line(1.0)
    check(r.get("ok") is True and r.get("full_idle") is False and
          line is None,
          "without --sysidle: full_idle false, no edge ever", [r, line])
    w.close()
    vm.stop()


def main():
    skip = vmmtest.vm_or_skip("idle.elf")
    if skip:
        return skip
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        sock = os.path.join(tmp, "vm.sock")
        vm = Vm(["--cpus", "2", "--sysidle", "--append", "hz=250",
                 "--control", sock, tool("idle.elf")])
        c = connect(sock, proc=vm.p)
        check(c is not None, "the VMM listens on --control", vm.err)
        if c is not None and full_idle_for(c, 0.1, 60):
            test_bad(sock)
            test_zero_holds(sock, c)
            test_short_wake_silent(sock, c)
            test_enter_hold(sock, c)
            test_pause_events(sock, c)
        else:
            check(False, "the VM reaches FULL_NOTED", vm.err)
        vm.stop()
        test_busy_leave(tmp)
        test_no_sysidle(tmp)
    print("# %.1f s" % (time.monotonic() - t0))
    return vmmtest.finish()


if __name__ == "__main__":
    sys.exit(main())
