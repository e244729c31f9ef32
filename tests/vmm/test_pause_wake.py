#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""A paused VM resuming itself for its guest's timers (vmm/export/README.md,
"Control socket protocol"), each resume reported with reason timer: a
one-shot LAPIC timer under --sysidle with the pv tick (at its deadline,
the guest's jiffies exact), idle.elf's sleep without a tick and without
--sysidle (at the deadline, the guest sees it), and without --sysidle a
guest's 250 Hz pv tick (at its next tick). Pause and resume by request,
kick and serial input are test_pause.py.

usage: test_pause_wake.py VMM GUEST_DIR GUEST_TOOLS_DIR SYSIDLECTL
Without a usable /dev/kvm the VMM runs on a scripted KVM (vmmtest.
use_scripted); the pvtick.elf part skips there.

Exit: 0 all passed, 1 a check failed, 77 skipped (no /dev/kvm and no
vmm-scripted)."""
import os
import re
import signal
import sys
import tempfile
import time

import vmmtest
from vmmtest import Vm, check, tool

vmmtest.init(sys.argv)
from pause_client import (  # noqa: E402
    Watcher, ask, ask_status, connect, is_event, quiescent, started)


def vm_start_unix_ms(v):
    """The VM's creation time, wall clock, in ms, from one status snapshot
    alone (the VMM's own clock, not when this test got the reply):
    since_unix_ms is when the current state began, in_state_s how long ago,
    uptime_s how long ago the VM was created."""
    return v["since_unix_ms"] + (v["in_state_s"] - v["uptime_s"]) * 1000.0


# A guest timer test needs the VM paused before the timer's deadline; on a
# loaded host the setup can take longer than that: the run is then done
# again with a longer sleep (the checks come from the run that paused in
# time; none is reported for a run that did not).
TIMER_ATTEMPTS = 3


def paused_in_time(w, r, v, deadline_ms, last, what, c, vm):
    """(go on, paused at ms): whether the pause (watcher @w, reply @r,
    status @v) came in time to test a timer due @deadline_ms after the
    VM's creation, at least 200 ms before it (a status taken before the
    deadline must say paused). When it did not and this is not the
    @last attempt, the VM is dropped for another try with a longer sleep."""
    at = v["uptime_s"] * 1000 if v else -1
    if (w and isinstance(r, dict) and v and at < deadline_ms - 200) or last:
        return True, at
    print("# %s: paused only at %s, too late to test the timer: again "
          "with a longer sleep" % (what, "%.0f ms" % at if v else "its end"))
    if w:
        w.close()
    c.close()
    vm.stop(signal.SIGKILL)
    return False, at


def pause_watched(sock, c):
    """A watcher, then a pause and a status on @c: (watcher, pause reply,
    status vm object), each None when the VM had already gone."""
    try:
        w = Watcher(sock)
    except OSError:
        return None, None, None
    return w, ask(c, {"cmd": "pause"}), ask_status(c)


def test_timer_pvtick(tmp):
    """pvtick.elf sleeps on a one-shot LAPIC timer (1.5 s) with its pv
    tick on, under --sysidle: fully idle, paused, the timer resumes the VM
    at its deadline and the guest's jiffies are exact."""
    for attempt in range(TIMER_ATTEMPTS):
        if timer_pvtick(tmp, 1500 << attempt, attempt + 1 == TIMER_ATTEMPTS):
            return


def timer_pvtick(tmp, sleep_ms, last):
    """One run; False when it paused too late to test the timer (and
    @last is false: the caller tries again), else True."""
    g = os.path.join(vmmtest.GUESTS, "pvtick.elf")
    sock = os.path.join(tmp, "pvt%d.sock" % sleep_ms)
    log = os.path.join(tmp, "pvt%d.log" % sleep_ms)
    vm = Vm(["--sysidle", "--sysidle-log", log, "--append",
             "hz=100 sleep=%d" % sleep_ms, "--control", sock, g])
    c = connect(sock, vm.p)
    if c is None:
        check(False, "pvtick.elf: the control socket answers", vm.err)
        vm.stop(signal.SIGKILL)
        return True
    # fully idle with the tick stopped: else the tick could end the pause
    quiescent(c, log, 10)
    # (the guest exits once its timer fired: the connections may be gone)
    w, r, v = pause_watched(sock, c)
    ok, at = paused_in_time(w, r, v, sleep_ms, last,
                            "pvtick.elf sleep=%d" % sleep_ms, c, vm)
    if not ok:
        return False
    check(v is not None and isinstance(r, dict) and
          r.get("paused") is True and v["paused"] and at < sleep_ms - 200,
          "pvtick.elf sleep=%d, --sysidle: fully idle, paused at %.0f ms" %
          (sleep_ms, at), [r, v])
    if w is None:
        vm.stop(signal.SIGKILL)
        return True
    start_ms = vm_start_unix_ms(v) if v else 0
    i = w.wait(is_event("resumed"), 10 + sleep_ms / 1000.0)
    ev = w.events[i] if i is not None else {}
    rc = vm.stop(None, 20)
    # The guest arms the timer after the VM's creation and before its first
    # HLT; the first state change of the --sysidle-log (ms since the VM
    # started, the VMM's clock) comes after that HLT. So the deadline lies
    # between start + sleep and first change + sleep, whatever the time
    # the guest took to boot on a loaded host.
    first = next((float(m.group(1)) for m in
                  (re.match(r"^(\d+\.\d+) state ", l)
                   for l in vmmtest.read_lines(log)) if m), None)
    res = ev.get("unix_ms")
    early = res - (start_ms + sleep_ms) if isinstance(res, int) else None
    late = res - (start_ms + first + sleep_ms) \
        if isinstance(res, int) and first is not None else None
    check(ev.get("reason") == "timer" and early is not None and
          late is not None and early >= -30 and late <= 300,
          "the LAPIC timer resumes the VM: reason timer, %s ms after the "
          "earliest deadline (VM start + %d ms), %s ms after the latest "
          "(first state change + %d ms); bounds -30, 300 ms" %
          (early if early is None else "%.0f" % early, sleep_ms,
           late if late is None else "%.0f" % late, sleep_ms),
          [w.events, vmmtest.read_lines(log)[:3]])
    check(rc == 0 and "pvtick ok" in vm.lines,
          "the guest's jiffies are exact after the pause (pvtick ok, exit "
          "%s)" % rc, "\n".join(vm.lines) + vm.err)
    w.close()
    c.close()
    return True


def test_timer_plain(tmp):
    """idle.elf sleep=1 without a tick and without --sysidle: paused
    right after it armed its one-shot LAPIC timer; the timer resumes it at
    the deadline, the guest sees it and exits 0."""
    for attempt in range(TIMER_ATTEMPTS):
        if timer_plain(tmp, 1 << attempt, attempt + 1 == TIMER_ATTEMPTS):
            return


def timer_plain(tmp, sleep_s, last):
    """One run; False when it paused too late to test the timer (and
    @last is false: the caller tries again), else True."""
    sock = os.path.join(tmp, "plain%d.sock" % sleep_s)
    vm = Vm(["--append", "hz=0 sleep=%d" % sleep_s, "--control", sock,
             tool("idle.elf")])
    c = connect(sock, vm.p)
    armed = vm.wait_line(r"^idle: \d+ cpus up", 20)
    # The guest prints this line after it armed the timer: when it is read
    # here, the deadline is at most sleep_s away (wall clock, ms).
    t_armed_ms = time.time() * 1000.0
    if c is None or armed is None:
        check(False, "idle.elf sleep=%d: socket and guest up" % sleep_s,
              vm.err)
        vm.stop(signal.SIGKILL)
        return True
    # (the guest exits once its timer fired: the connections may be gone)
    w, r, v = pause_watched(sock, c)
    ok, at = paused_in_time(w, r, v, sleep_s * 1000, last,
                            "idle.elf sleep=%d" % sleep_s, c, vm)
    if not ok:
        return False
    check(isinstance(r, dict) and r.get("paused") is True and
          v is not None and v["paused"] and v["sysidle"] is False and
          v["state"] == "NOT" and at < sleep_s * 1000 - 200,
          "without --sysidle: pause ok, status paused (at %.0f ms), state "
          "NOT" % at, [r, v])
    if w is None:
        vm.stop(signal.SIGKILL)
        return True
    start_ms = vm_start_unix_ms(v) if v else 0
    i = w.wait(is_event("resumed"), 10 + sleep_s)
    ev = w.events[i] if i is not None else {}
    rc = vm.stop(None, 20)
    # Timed by the VMM's clock (the event's unix_ms), not by when this test
    # read the event: the deadline lies between the VM's creation + sleep
    # and the moment this test read the guest's line + sleep.
    res = ev.get("unix_ms")
    early = res - (start_ms + sleep_s * 1000) if isinstance(res, int) \
        else None
    late = res - (t_armed_ms + sleep_s * 1000) if isinstance(res, int) \
        else None
    check(ev.get("reason") == "timer" and early is not None and
          early >= -30 and late <= 300 and rc == 0 and
          vm.wait_line(r"^idle: woken by timer", 1) is not None,
          "without --sysidle: the LAPIC timer the guest armed for %d s "
          "resumes the VM (reason timer) %s ms after the VM's creation + "
          "%d s, %s ms after the guest's line was read + %d s (bounds -30, "
          "300 ms); exit %s" %
          (sleep_s, early if early is None else "%.0f" % early, sleep_s,
           late if late is None else "%.0f" % late, sleep_s, rc),
          [w.events, vm.lines])
    w.close()
    c.close()
    return True


def test_plain_tick(tmp):
    """Without --sysidle a pv tick is a wake source too: a paused guest
    with a 250 Hz tick resumes at its next tick."""
    sock = os.path.join(tmp, "tick.sock")
    vm, c = started(["--append", "hz=250", "--control", sock,
                     tool("idle.elf")], sock, r"^idle: \d+ cpus up",
                    "idle.elf hz=250")
    if vm is None:
        return
    w = Watcher(sock)
    # paused_ms is the VMM's own measure, but the tick that ends the pause
    # is fired by its housekeeping thread, which a loaded host can run late.
    # Every pause must be ended by the tick; the next one (4 ms) must be
    # seen within 20 ms at least once in up to 5 pauses.
    got = []
    for n in range(5):
        start = len(w.events)
        r = c.request({"cmd": "pause"})
        i = w.wait(is_event("resumed"), 10, start)
        ev = w.events[i] if i is not None else {}
        got.append((r.get("paused") if isinstance(r, dict) else r,
                    ev.get("reason"), ev.get("paused_ms")))
        if got[-1][:2] != (True, "timer") or \
                not isinstance(got[-1][2], int) or got[-1][2] <= 20:
            break
    check(all(g[:2] == (True, "timer") and isinstance(g[2], int)
              for g in got) and got[-1][2] <= 20,
          "without --sysidle, pv tick 250 Hz: paused, resumed by the tick "
          "(reason timer) after %s ms" % " / ".join(str(g[2]) for g in got),
          [got, w.events])
    w.close()
    c.close()
    rc = vm.stop()
    check(rc == 143, "stopped (exit %s)" % rc, vm.err)


def main():
    skip = vmmtest.vm_or_skip("idle.elf")
    if skip:
        return skip
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        if not vmmtest.scripted_skip("pvtick.elf sleep=, --sysidle: its "
                                     "jiffies"):
            test_timer_pvtick(tmp)
        test_timer_plain(tmp)
        test_plain_tick(tmp)
    print("# %.1f s" % (time.monotonic() - t0))
    return vmmtest.finish()


if __name__ == "__main__":
    sys.exit(main())
