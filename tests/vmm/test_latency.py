#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""The wake path's mechanisms, each on and off: a halted vCPU serves its own
LAPIC timer (--vcpu-timers), halt polling (--halt-poll-ns), timer advance
(--timer-advance-ns), the short scheduler slice (--sched-slice-us),
interrupts injected with KVM_RUN (--interrupt-injection) and KVM's PV EOI
(--cpu +pv-eoi). Each is checked
by what it changes (the VMM's --stats-json counters, the kernel's view of
the threads), never by a time; and no timer may fire early. The options'
errors.

usage: test_latency.py VMM GUEST_DIR GUEST_TOOLS_DIR
Exit: 0 all passed, 1 a check failed, 77 skipped (no usable /dev/kvm)."""
import json
import os
import platform
import re
import signal
import sys
import tempfile
import time

import vmmtest
from vmmtest import Vm, check, tool

vmmtest.init(sys.argv)
SAMPLES = re.compile(r"pingpong: \w+: samples=([0-9,]+) ns")


def pingpong(tmp, name, app, extra=(), cpus=1):
    """pingpong.elf with @app; returns (stats or None, samples, detail)."""
    stats = os.path.join(tmp, name + ".json")
    args = list(extra) + ["--cpus", str(cpus), "--control", "none",
                          "--stats-json", stats, "--append", app,
                          tool("pingpong.elf")]
    rc, out, err = vmmtest.run(args, timeout=120)
    m = SAMPLES.search(out)
    detail = "vmm %s: exit %s\n%s\n%s" % (" ".join(args), rc, out[-2000:],
                                          err[-2000:])
    if rc != 0 or not m:
        return None, [], detail
    with open(stats) as f:
        return json.load(f), [int(x) for x in m.group(1).split(",")], detail


def vsum(s, key):
    return sum(v[key] for v in s["vcpus"])


def test_timer_self(tmp):
    """mode=sleep: CPU 0 halts until its LAPIC timer (a TSC deadline
    2 ms on). The vCPU's own thread serves it (the housekeeping thread
    fires none of them); with --vcpu-timers housekeeping the reverse. With
    timer advance the wake comes early and the thread spins to the
    deadline: never delivered before it (a sample is handler TSC -
    deadline TSC, unsigned: an early one would be huge)."""
    rounds = 100
    app = "mode=sleep rounds=%d delay_us=2000 hz=0" % rounds
    for name, extra in [("self", []),
                        ("housekeeping", ["--vcpu-timers", "housekeeping"]),
                        ("advance", ["--timer-advance-ns", "200000"])]:
        s, samples, detail = pingpong(tmp, "sleep-" + name, app, extra)
        if not s:
            check(False, "mode=sleep, %s: exit 0 with samples" % name, detail)
            continue
        own = vsum(s, "timer_self_fired")
        hk = s["housekeeping"]["timers_fired"]
        late = max(samples)
        if name == "housekeeping":
            ok = own == 0 and hk >= rounds
        else:
            ok = own >= rounds and hk < rounds // 10
        # the guest clamps an early handler to 0: none may be 0
        check(ok and 0 < min(samples) and late < 10**9 and
              len(samples) == rounds,
              "mode=sleep, --vcpu-timers %s: %d timers served by the vCPU "
              "thread, %d by housekeeping; none early (latest %d us late)"
              % (s["wake_path"]["vcpu_timers"] if name != "advance" else
                 "self --timer-advance-ns 200000", own, hk, late // 1000),
              detail)
        if name == "advance":
            spun = vsum(s, "timer_spin_ns")
            check(spun > 0, "--timer-advance-ns: the thread spun to the "
                  "deadlines (%d us in all)" % (spun // 1000), detail)


def test_advance_classes(tmp):
    """mode=sleep alternating 20 ms and 0.5 ms: the timer advance is
    learned apart for each decade of the sleep. The waits it ended fall
    in the class of their sleep (3: 10 ms and up; 1: 0.1 to 1 ms), a
    class no wait learned from keeps no lead, none exceeds the maximum,
    and no timer is delivered early. (What each lead comes to is the
    host's lateness: the benchmark's, bench/latency.py --paths mixed.)"""
    rounds, mx = 40, 200000
    # 0.5 ms: in the middle of its class, so that the exits before the
    # wait (0.1 ms on a sanitizer build) leave it there
    app = "mode=sleep rounds=%d delay_us=20000 short_us=500 hz=0" % rounds
    s, samples, detail = pingpong(tmp, "classes", app,
                                  ["--timer-advance-ns", str(mx)])
    if not s:
        check(False, "mode=sleep short_us=500: exit 0 with samples", detail)
        return
    v = s["vcpus"][0]
    lead, wakes = v["timer_advance_ns"], v["timer_advance_wakes"]
    # most waits begin well within the sleep (an exit's handling apart)
    check(len(lead) == len(wakes) == 4 and
          s["wake_path"]["timer_advance_class0_ns"] == 100000 and
          wakes[3] >= rounds // 4 and wakes[1] >= rounds // 4 and
          all(ld == 0 for ld, w in zip(lead, wakes) if not w) and
          all(ld <= mx for ld in lead) and
          len(samples) == rounds and min(samples) > 0,
          "--timer-advance-ns %d, 20 ms and 0.5 ms sleeps in turn: waits "
          "ended by the advance per class %s, leads %s ns; none early"
          % (mx, wakes, lead), detail)


def test_timer_entry(tmp):
    """mode=timer: the shortest one-shot (initial count 1), armed by the
    vCPU's own exit: served before its next KVM_RUN, not handed over."""
    rounds = 200
    s, samples, detail = pingpong(tmp, "timer", "mode=timer rounds=%d"
                                  % rounds)
    own = vsum(s, "timer_self_fired") if s else 0
    hk = s["housekeeping"]["timers_fired"] if s else -1
    check(s is not None and own >= rounds and hk < rounds // 10,
          "mode=timer: %d of %d shortest timers served before KVM_RUN by the "
          "vCPU's thread, %d by housekeeping" % (own, rounds, hk), detail)


def test_halt_poll(tmp):
    """mode=ipi: halts of tens of microseconds. Polling opens its window
    after them (the rule, step by step, is halt-rules-unit's), never polls
    longer than --halt-poll-ns at a time; --halt-poll-ns 0 never polls.
    How often a poll catches the wake-up depends on the host's speed: the
    benchmark's (bench/latency.py), not a test's. Both injection paths
    deliver every interrupt."""
    rounds = 300
    app = "mode=ipi rounds=%d" % rounds
    s, _, detail = pingpong(tmp, "ipi", app, cpus=2)
    polls = vsum(s, "halt_polls") if s else 0
    hits = vsum(s, "halt_poll_hits") if s else 0
    polled_ns = vsum(s, "halt_poll_ns") if s else 0
    max_ns = s["wake_path"]["halt_poll_max_ns"] if s else 0
    # each poll ends at its window (at most the maximum) or at the wake-up;
    # ending it (the lock, the clock) may take a little longer: 1 ms slack
    check(s is not None and polls > 0 and max_ns > 0 and
          polled_ns <= polls * (max_ns + 1000000),
          "mode=ipi, default --halt-poll-ns (%d ns): %d halts polled, %.1f us "
          "a poll on average, %d woken while polling" % (
              max_ns, polls, polled_ns / 1000.0 / max(polls, 1), hits),
          detail)
    s, _, detail = pingpong(tmp, "ipi-nopoll", app, ["--halt-poll-ns", "0"],
                            cpus=2)
    check(s is not None and vsum(s, "halt_polls") == 0 and
          s["wake_path"]["halt_poll_max_ns"] == 0,
          "mode=ipi, --halt-poll-ns 0: no halt polled", detail)
    for inj in ("ioctl", "kvm-run"):
        s, samples, detail = pingpong(tmp, "ipi-" + inj, app,
                                      ["--interrupt-injection", inj], cpus=2)
        got = s["wake_path"]["interrupt_injection"] if s else None
        injected = vsum(s, "interrupts_injected") if s else 0
        # kvm-run falls back to ioctl where KVM lacks the sync regs
        check(s is not None and len(samples) == rounds and
              injected >= 2 * rounds and got in (inj, "ioctl"),
              "mode=ipi, --interrupt-injection %s (%s): every IPI answered, "
              "%d interrupts injected" % (inj, got, injected), detail)


def test_pv_eoi(tmp):
    """mode=ipi with KVM's PV EOI (--cpu +pv-eoi) and without (the
    default): each handler ends its interrupt by clearing its flag, not by
    an EOI write (an MSR exit here), so the run makes about one WRMSR exit
    less per interrupt; every IPI is answered either way. selftest.elf
    with it: its own check of an interrupt ended by the flag, on each
    CPU, and every other check still passes."""
    rounds = 300
    app = "mode=ipi rounds=%d" % rounds
    got = {}
    for name, extra in (("on", ["--cpu", "+pv-eoi"]), ("off", [])):
        s, samples, detail = pingpong(tmp, "pveoi-" + name, app, extra,
                                      cpus=2)
        got[name] = (s is not None and len(samples) == rounds,
                     vsum(s, "pv_eois") if s else -1,
                     sum(v["exits"].get("wrmsr", 0) for v in s["vcpus"])
                     if s else -1, detail)
    (ok_on, pv_on, wr_on, d_on), (ok_off, pv_off, wr_off, _) = \
        got["on"], got["off"]
    check(ok_on and ok_off and pv_on >= rounds and pv_off == 0 and
          wr_off - wr_on >= rounds,
          "mode=ipi, %d round trips: %d EOIs by the PV EOI flag, %d WRMSR "
          "exits; without: %d, %d WRMSR exits; every IPI answered"
          % (rounds, pv_on, wr_on, pv_off, wr_off), d_on)
    args = ["--cpu", "+pv-eoi", "--cpus", "2", "--control", "none",
            tool("selftest.elf")]
    rc, out, err = vmmtest.run(args, timeout=120)
    flagged = len(re.findall(r"^ok - cpu\d: kvm pv eoi: ", out, re.M))
    check(rc == 0 and flagged == 2 and "not ok" not in out,
          "selftest.elf --cpu +pv-eoi: exit %s, %d CPUs ended an interrupt "
          "by the flag" % (rc, flagged),
          "exit %s\n%s\n%s" % (rc, out[-2000:], err[-2000:]))


def test_wake_from_full(tmp):
    """mode=ipiwake under --sysidle, every wake-up from full idle: CPU 1's
    timer wakes it, it IPIs CPU 0 and both halt again within a fraction of
    IDLE_KICK_DEFER_NS. The housekeeping thread's restart stays off the
    wake path: the kick held back at the wake is not sent as CPU 1 halts
    (when CPU 0, just woken, needs the host CPU) but left to the backstop
    timer, so the restarts are housekeeping timer wake-ups, not kicks. The
    timekeeper's pv tick, resumed on its wake and armed after its first
    exit, still runs between the wake-ups (ticks delivered, and suppressed
    ones counted), and the library sees no violation."""
    rounds = 100
    s, samples, detail = pingpong(
        tmp, "wake-from-full", "mode=ipiwake rounds=%d delay_us=10000 "
        "hz=250" % rounds, ["--sysidle"], cpus=2)
    si = s["sysidle"] if s else {}
    full = si.get("full_idle_periods", 0)
    restarts = si.get("tick_restarts", 0)
    kicks = si.get("housekeeping_kicks", -1)
    tk = s["vcpus"][0] if s else {}
    check(s is not None and len(samples) == rounds and
          full >= rounds * 9 // 10 and restarts >= full - 1 and
          0 <= kicks <= rounds // 4 and si.get("violations") == 0 and
          tk.get("pvtick_delivered", 0) > 0 and
          si.get("ticks_suppressed_total", 0) > 0,
          "--sysidle, %d IPI wake-ups: %d full-idle periods, %d restarts, "
          "%d by a kick (the rest by the backstop timer), %d pv ticks "
          "delivered to the timekeeper" % (rounds, full, restarts,
                                           max(kicks, 0),
                                           tk.get("pvtick_delivered", 0)),
          detail)


def kernel_has_custom_slice():
    """EEVDF takes sched_runtime as a custom slice from Linux 6.12 on."""
    m = re.match(r"(\d+)\.(\d+)", platform.release())
    return bool(m) and (int(m.group(1)), int(m.group(2))) >= (6, 12)


def thread_slice(pid, name):
    for tid, comm, _ in vmmtest.tasks(pid):
        if comm != name:
            continue
        try:
            with open("/proc/%d/task/%d/sched" % (pid, tid)) as f:
                m = re.search(r"^se\.slice\s*:\s*(\d+)", f.read(), re.M)
            return int(m.group(1)) if m else None
        except OSError:
            return None
    return None


def test_sched_slice():
    """The vCPU and housekeeping threads run with the slice asked for;
    off leaves the kernel's (the main thread's)."""
    if not kernel_has_custom_slice():
        print("# kernel %s has no custom slices (6.12+): "
              "--sched-slice-us checks skipped" % platform.release())
        return
    for arg, want in (("300", 300000), ("off", None)):
        vm = Vm(["--sched-slice-us", arg, "--control", "none", "--append",
                 "hz=0", tool("idle.elf")])
        up = vm.wait_line(r"^idle: \d+ cpus up", 60)
        main = thread_slice(vm.p.pid, "vmm")
        got = {n: thread_slice(vm.p.pid, n)
               for n in ("vmm-vcpu0", "vmm-housekeep")}
        vm.stop(signal.SIGTERM)
        expect = want if want is not None else main
        check(up is not None and main and
              all(v == expect for v in got.values()),
              "--sched-slice-us %s: se.slice %s (main thread %s)"
              % (arg, got, main))


def test_idle_stays_free():
    """The longest poll and the short slice on: a fully idle VM under
    --sysidle still costs no host wake-up (its halts never poll while it
    heads into full idle) and no CPU."""
    with tempfile.TemporaryDirectory() as tmp:
        log = os.path.join(tmp, "log")
        vm = Vm(["--sysidle", "--sysidle-log", log, "--cpus", "2",
                 "--halt-poll-ns", "10000000", "--sched-slice-us", "100",
                 "--control", "none", "--append", "hz=250",
                 tool("idle.elf")])
        up = vm.wait_line(r"^idle: \d+ cpus up", 60)
        stopped = vmmtest.poll_until(
            lambda: vmmtest.read_lines(log)[-1:] and
            vmmtest.read_lines(log)[-1].endswith("tick stopped") and
            vmmtest.all_sleeping(vm.p.pid), 30)
        c0 = vmmtest.ctx_switches(vm.p.pid)
        t0 = cpu_ticks(vm.p.pid)
        time.sleep(2)  # the measurement window, not a synchronisation
        c1 = vmmtest.ctx_switches(vm.p.pid)
        t1 = cpu_ticks(vm.p.pid)
        still = vmmtest.read_lines(log)[-1:] and \
            vmmtest.read_lines(log)[-1].endswith("tick stopped")
        vm.stop(signal.SIGTERM)
        check(up is not None and stopped and still and c1 - c0 < 4 and
              t1 - t0 <= 1,
              "--sysidle --halt-poll-ns 10000000 --sched-slice-us 100, idle: "
              "%d context switches and %d CPU ticks in 2 s, fully idle"
              % (c1 - c0, t1 - t0), "\n".join(vmmtest.read_lines(log)[-8:]))


def cpu_ticks(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def main():
    if not vmmtest.kvm_usable():
        return 77
    with tempfile.TemporaryDirectory() as tmp:
        test_timer_self(tmp)
        test_advance_classes(tmp)
        test_timer_entry(tmp)
        test_halt_poll(tmp)
        test_pv_eoi(tmp)
        test_wake_from_full(tmp)
    test_sched_slice()
    test_idle_stays_free()
    return vmmtest.finish()


if __name__ == "__main__":
    sys.exit(main())
