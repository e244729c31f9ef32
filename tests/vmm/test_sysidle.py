#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""--sysidle: full-idle detection, the paravirtual tick, the event log.

usage: test_sysidle.py VMM GUEST_DIR GUEST_TOOLS_DIR
Exit: 0 all passed, 1 a check failed, 77 skipped (no usable /dev/kvm)."""
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

import vmmtest
from vmmtest import STATUS, Vm, check, tool

vmmtest.init(sys.argv)
GUESTS = vmmtest.GUESTS
RUN_TIMEOUT = 60


def run(args, timeout=RUN_TIMEOUT):
    return vmmtest.run(args, timeout=timeout)


def has_strings(path, *needles):
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return False
    return all(n.encode() in data for n in needles)


def thread_cpus(pid, name):
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/comm" % (pid, tid)) as f:
                if f.read().strip() != name:
                    continue
            with open("/proc/%d/task/%s/status" % (pid, tid)) as f:
                for line in f:
                    if line.startswith("Cpus_allowed_list"):
                        return line.split()[1]
        except OSError:
            pass
    return None


read_log = vmmtest.read_lines  # the lines of a --sysidle-log


def wait_log(path, pattern, timeout=RUN_TIMEOUT, start=0):
    """The index of the first line of the log @path from @start on that
    matches @pattern, within @timeout seconds; else None."""
    def find():
        return next((i for i, line in enumerate(read_log(path)[start:], start)
                     if re.search(pattern, line)), None)
    return vmmtest.poll_until(find, timeout, done=lambda i: i is not None)


LOG_LINE = re.compile(r"^\d+\.\d{3} (state (NOT|SHORT|LONG|FULL|FULL_NOTED) -> "
                      r"(NOT|SHORT|LONG|FULL|FULL_NOTED)( vcpu \d+( force-exit)?"
                      r"( by [a-z-]+( [a-z0-9 -]+)?)?| scan)?|tick stopped|"
                      r"tick restarted missed=\d+|VIOLATION .*)$")


def test_options():
    """What needs a VM; the other bad options are test_usage.py's."""
    h = os.path.join(GUESTS, "hello.elf")
    for args, msg in [(["--sysidle", "--timekeeper", "4", "--cpus", "2", h],
                       "--timekeeper 4"),
                      (["--sysidle", "--sysidle-log", "/nonexistent/d/l", h],
                       "cannot write --sysidle-log")]:
        rc, out, err = run(args)
        check(rc == STATUS["usage"] and msg in err,
              "%s: exit 110, %r" % (" ".join(args[:-1]), msg),
              "exit %s\n%s" % (rc, err))
    rc, out, err = run(["--sysidle", "--cpus", "4", h])
    check(rc == 0 and "hello" in out, "hello.elf --sysidle, 4 vCPUs (3 never "
          "started): exit 0", "exit %s\n%s%s" % (rc, out, err))


def test_pvtick(tmp):
    g = os.path.join(GUESTS, "pvtick.elf")
    for args, what in [([], "waits for 100 ticks at 1000 Hz"),
                       (["spin=50"], "spins 50 ms with IF=0 (pending tick, "
                        "missed counted)"),
                       (["--sysidle", "sleep=800"], "--sysidle, one-shot "
                        "timer 800 ms: tick stopped, missed caught up"),
                       (["--sysidle", "hz=250 sleep=600 spin=30"],
                        "--sysidle, sleep then spin at 250 Hz")]:
        opts = [a for a in args if a.startswith("--")]
        app = " ".join(a for a in args if not a.startswith("--"))
        rc, out, err = run(opts + ["--append", app, g], timeout=30)
        check(rc == 0 and "pvtick ok" in out, "pvtick.elf %s: %s" %
              (" ".join(args), what), "exit %s\n%s%s" % (rc, out, err))


def test_idle(tmp, cpus, wake_guest):
    idle = tool("idle.elf")
    log = os.path.join(tmp, "idle%d.log" % cpus)
    stats = os.path.join(tmp, "idle%d.json" % cpus)
    vm = Vm(["--cpus", str(cpus), "--sysidle", "--sysidle-log", log,
             "--stats-json", stats, "--append", "hz=250", idle])
    what = "idle.elf, %d vCPUs, --sysidle" % cpus
    up = vm.wait_line(r"^idle: \d+ cpus up", 60)
    noted = wait_log(log, r"tick stopped", 30) if up else None
    check(noted is not None, "%s: reaches FULL_NOTED, tick stopped" % what,
          "\n".join(read_log(log) + vm.lines))
    if noted is None:
        vm.stop(signal.SIGKILL)
        return
    # The window starts once the VM is fully idle now (its log's latest
    # line "tick stopped": a stop that raced with a tick-only wake-up is
    # followed by a restart) and every VMM thread sleeps (the writes and
    # wake-ups that follow the stop are done), waited for, bounded.
    vmmtest.poll_until(lambda: read_log(log)[-1:] and
                       read_log(log)[-1].endswith("tick stopped") and
                       vmmtest.all_sleeping(vm.p.pid), 10)
    c0 = vmmtest.ctx_switches(vm.p.pid)
    time.sleep(3)
    c1 = vmmtest.ctx_switches(vm.p.pid)
    lines = read_log(log)
    still = lines[-1].endswith("tick stopped")
    check(c1 - c0 < 6 and still, "%s: steady window, %.2f context switches/s "
          "over 3 s (< 2/s), still fully idle" % (what, (c1 - c0) / 3.0),
          "\n".join(lines[-10:]))
    n = len(lines)
    start = len(vm.lines)
    vm.send("x")
    woke = wait_log(log, r"state FULL_NOTED -> NOT vcpu \d+", 10, n)
    restarted = wait_log(log, r"tick restarted missed=\d+", 10, n)
    check(woke is not None and restarted is not None,
          "%s: a serial byte: FULL_NOTED -> NOT, tick restarted" % what,
          "\n".join(read_log(log)[n - 3:]))
    if wake_guest:
        line = vm.wait_line(r"^idle: woken by serial", 10, start)
        ok = vm.wait_line(r"^idle: jiffies ok", 5, start)
        check(line is not None and ok is not None,
              "%s: guest catches up its missed ticks: %s" % (what, line),
              "\n".join(vm.lines[start:]))
    again = wait_log(log, r"tick stopped", 10, n)
    check(again is not None, "%s: fully idle again after the wake-up" % what)
    rc = vm.stop()
    lines = read_log(log)
    bad = [l for l in lines if not LOG_LINE.match(l)]
    check(rc == 143 and not bad and not any("VIOLATION" in l for l in lines),
          "%s: SIGTERM -> 143; every log line well formed, no violation" % what,
          "exit %s\n%s\n%s" % (rc, "\n".join(bad[:10]), vm.err))
    try:
        with open(stats) as f:
            s = json.load(f)["sysidle"]
        ok = all(k in s for k in ["state_ns", "full_idle_periods",
                                  "detection_latency_ns", "ticks_suppressed",
                                  "ticks_suppressed_total",
                                  "housekeeping_timer_wakeups"]) and \
            s["full_idle_periods"] >= 2 and \
            s["detection_latency_ns"]["count"] >= 1 and \
            len(s["ticks_suppressed"]) == cpus and \
            s["ticks_suppressed_total"] > 500 and \
            s["state_ns"]["FULL_NOTED"] > 3000000000 and s["violations"] == 0
        detail = json.dumps(s)
    except (OSError, ValueError, KeyError) as e:
        ok, detail = False, str(e)
    check(ok, "%s: --stats-json has the sysidle object" % what, detail)


def test_idle_sleep():
    idle = tool("idle.elf")
    rc, out, err = run(["--cpus", "4", "--sysidle", "--sysidle-log", "-",
                        "--append", "hz=250 sleep=2", idle], timeout=30)
    ok = rc == 0 and "idle: jiffies ok" in out and "tick stopped" in err
    check(ok, "idle.elf sleep=2, 4 vCPUs, --sysidle: the one-shot timer wakes "
          "the fully idle VM, jiffies exact", "exit %s\n%s%s" % (rc, out, err))


def test_pin(tmp):
    orig = None
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("Cpus_allowed_list"):
                orig = line.split()[1]
    vm = Vm(["--sysidle", "--housekeeping-cpu", "0",
             os.path.join(GUESTS, "spin.elf")])
    vm.wait_line("spinning", 10)
    # The housekeeping thread pins itself when it starts: wait (bounded)
    # for the pin rather than for a fixed time.
    busy = vmmtest.poll_until(
        lambda: thread_cpus(vm.p.pid, "vmm-housekeep"), 10,
        done=lambda c: c == "0") or thread_cpus(vm.p.pid, "vmm-housekeep")
    vm.stop()
    log = os.path.join(tmp, "pin.log")
    vm = Vm(["--cpus", "2", "--sysidle", "--sysidle-log", log,
             "--housekeeping-cpu", "0", "--append", "hz=250",
             tool("idle.elf")])
    wait_log(log, "tick stopped", 30)
    # The pin is released before "tick stopped" is logged, and taken again
    # if the tick restarts at once (a stop that raced with a tick-only
    # wake-up): wait (bounded) for the released pin.
    idle = vmmtest.poll_until(
        lambda: thread_cpus(vm.p.pid, "vmm-housekeep"), 10,
        done=lambda c: c == orig) or thread_cpus(vm.p.pid, "vmm-housekeep")
    vm.stop()
    check(busy == "0" and idle == orig, "--housekeeping-cpu 0: pinned while "
          "busy (%s), released when fully idle (%s, process: %s)" %
          (busy, idle, orig))


def test_usr2(tmp):
    log = os.path.join(tmp, "usr2.log")
    vm = Vm(["--cpus", "2", "--sysidle", "--sysidle-log", log,
             "--append", "hz=250", tool("idle.elf")])
    ok = wait_log(log, "tick stopped", 30) is not None
    n = len(read_log(log))
    vm.p.send_signal(signal.SIGUSR2)
    ok = ok and wait_log(log, r"FULL_NOTED -> NOT vcpu 0 force-exit", 5, n) \
        is not None and wait_log(log, "tick restarted", 5, n) is not None
    rc = vm.stop()
    check(ok and rc == 143, "SIGUSR2 ends full idle, the tick restarts; the "
          "VMM keeps running", "\n".join(read_log(log)))


def test_timekeeper(tmp, wake_guest):
    """The guest's pv tick is on vCPU 0, which is then not the timekeeper:
    its tick is suppressed whenever it halts, and it catches up when the
    serial interrupt wakes it."""
    log = os.path.join(tmp, "tk.log")
    vm = Vm(["--cpus", "4", "--sysidle", "--timekeeper", "2",
             "--sysidle-log", log, "--append", "hz=250", tool("idle.elf")])
    ok = wait_log(log, "tick stopped", 30) is not None
    n = len(read_log(log))
    start = len(vm.lines)
    vm.send("x")
    ok = ok and wait_log(log, "tick restarted", 10, n) is not None
    if wake_guest:
        ok = ok and vm.wait_line(r"^idle: jiffies ok", 10, start) is not None
    rc = vm.stop()
    check(ok and rc == 143, "--timekeeper 2: fully idle, woken by serial; "
          "vCPU 0's suppressed pv tick caught up",
          "\n".join(read_log(log) + vm.lines[start:]))


def burst_line(out):
    """The result line's key=value pairs, plus busy= from the informational
    line when the guest prints it there."""
    d = None
    for line in out.splitlines():
        for prefix in ["burst: ", "# burst: "]:
            if line.startswith(prefix) and "=" in line:
                kv = dict(x.split("=", 1) for x in line[len(prefix):].split()
                          if "=" in x)
                if prefix == "burst: ":
                    d = dict(kv, **(d or {}))
                elif "busy" in kv:
                    d = dict(d or {}, busy=kv["busy"])
    return d if d and "rounds" in d else None


def test_burst(tmp):
    b = tool("burst.elf")
    app = "seed=42 rounds=12 period=40 duty=30"
    rc0, out0, err0 = run(["--cpus", "4", "--append", app, b], timeout=60)
    log = os.path.join(tmp, "burst.log")
    rc1, out1, err1 = run(["--cpus", "4", "--sysidle", "--sysidle-log", log,
                           "--append", app, b], timeout=60)
    a, s = burst_line(out0), burst_line(out1)
    keys = ["rounds", "picks", "checksum"]
    # The result is what the guest computed and where; busy= is wall-clock
    # time on a shared host, printed for the reader but not compared.
    ok = rc0 == 0 and rc1 == 0 and a and s and \
        all(a.get(k) == s.get(k) for k in keys)
    check(ok, "burst.elf %s: same result with --sysidle (%s / %s)" %
          (app, a and {k: a.get(k) for k in keys + ["busy"]},
           s and {k: s.get(k) for k in keys + ["busy"]}),
          "%s\n%s\n%s\n%s" % (out0, err0, out1, err1))
    lines = read_log(log)
    check(lines and not any("VIOLATION" in l for l in lines) and
          all(LOG_LINE.match(l) for l in lines),
          "burst.elf --sysidle: %d log lines, %d full-idle periods, never "
          "FULL while a non-timekeeper vCPU ran" %
          (len(lines), sum(l.endswith("tick stopped") for l in lines)),
          "\n".join(l for l in lines if "VIOLATION" in l))


def test_violation_detector(tmp):
    """The VIOLATION check is not vacuous: on a library whose scan takes a
    running vCPU for idle (a test-only build), the same burst.elf run must
    log violations."""
    vmm_bad = os.path.join(GUESTS, "vmm-fault-scan")
    b = tool("burst.elf")
    if not os.path.exists(vmm_bad):
        check(False, "the fault-injection VMM %s was not built" % vmm_bad)
        return
    log = os.path.join(tmp, "burst-fault.log")
    app = "seed=42 rounds=6 period=40 duty=30"
    p = subprocess.Popen([vmm_bad, "--cpus", "4", "--sysidle",
                          "--sysidle-log", log, "--append", app, b],
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    rc, out, err = vmmtest.communicate(p, timeout=60)
    lines = read_log(log)
    bad = [l for l in lines if "VIOLATION" in l]
    check(bad and all(LOG_LINE.match(l) for l in bad),
          "fault injection: a scan that ignores running vCPUs is caught "
          "(%d VIOLATION lines, e.g. '%s'; exit %s)" %
          (len(bad), bad[0] if bad else "-", rc),
          "%s\n%s\n%s" % ("\n".join(lines[-20:]), out, err))


def test_guest_timers():
    pp = tool("pingpong.elf")
    for args in [] if not os.path.exists(pp) else [["--cpus", "2", "--append", "mode=timer rounds=200 timeout=30"],
                 ["--cpus", "2", "--append", "mode=ipi rounds=200 timeout=30"]]:
        rc, out, err = run(["--sysidle"] + args + [pp], timeout=60)
        check(rc == 0 and "pingpong:" in out, "pingpong.elf %s --sysidle: "
              "finishes" % args[-1], "exit %s\n%s%s" % (rc, out, err))
    g = os.path.join(GUESTS, "pvtick.elf")
    rc, out, err = run(["--sysidle", "--cpus", "4", "--append",
                        "hz=100 sleep=300", g], timeout=30)
    check(rc == 0 and "pvtick ok" in out, "--sysidle, 4 vCPUs (3 waiting for "
          "SIPI): the one-shot timer still fires", "exit %s\n%s%s" %
          (rc, out, err))


def main():
    scripted = not vmmtest.kvm_usable(say=False)
    if scripted and not vmmtest.use_scripted():
        return 77
    with tempfile.TemporaryDirectory() as tmp:
        test_options()
        if scripted:
            vmmtest.skip("pvtick.elf, pingpong.elf --sysidle", "their "
                         "results are the guests' own: no script plays "
                         "them")
        else:
            test_pvtick(tmp)
            test_guest_timers()
        if os.path.exists(tool("idle.elf")):
            wake = not scripted and has_strings(
                tool("idle.elf"), "idle: woken by", "jiffies ok")
            if not wake:
                print("# idle.elf%s reports no missed ticks: catch-up "
                      "checks skipped" % (" played by a script" if scripted
                                          else ""))
            for cpus in [1, 4, 16]:
                test_idle(tmp, cpus, wake)
            if wake:
                test_idle_sleep()
            test_usr2(tmp)
            test_timekeeper(tmp, wake)
            test_pin(tmp)
        if os.path.exists(tool("burst.elf")) and not scripted:
            test_burst(tmp)
            test_violation_detector(tmp)
    if not scripted:
        vmmtest.selftest_boots(["--sysidle"], "selftest.elf --sysidle")
    return vmmtest.finish()


if __name__ == "__main__":
    sys.exit(main())
