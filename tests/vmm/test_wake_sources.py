#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""What wakes a VM, told by the VMM: each vCPU's wake-ups from HLT by
source, with a rate over the last minute (status "wake_sources", the
metrics file's sysidle_vcpu_wakeups_total), and what ended each full-idle
period (the --sysidle-log line's "by ...", the watch event's "by", status
"full_idle_exits", sysidle_vm_full_idle_exits_total). Guests played by
vmm-scripted (tests/vmm/scripted/), so the sources and their rates are
known exactly and the test runs on every host.

usage: test_wake_sources.py VMM_SCRIPTED GUEST_DIR GUEST_TOOLS_DIR
Exit: 0 all passed, 1 a check failed."""
import json
import os
import re
import shutil
import signal
import sys
import tempfile

import vmmtest
from vmmtest import metric, Vm, check, poll_until, read_lines

vmmtest.init(sys.argv)
KERNEL = os.path.join(vmmtest.GUESTS, "hello.elf")  # loaded, never run
TMP = tempfile.mkdtemp(prefix="vmm-wake-")
TIMER_HZ, IPI_HZ = 200, 50
from scripted_guests import halted_with_serial, timer_and_ipis  # noqa: E402

BUSY_VM = timer_and_ipis(TIMER_HZ, IPI_HZ)
IDLE_VM = halted_with_serial("R")


def use_script(name, text):
    path = os.path.join(TMP, name + ".script")
    with open(path, "w") as f:
        f.write(text)
    os.environ["SYSIDLE_VMM_SCRIPT"] = path


def row(st, vcpu, source):
    """The status's wake_sources row of @vcpu woken by @source, or {}."""
    rows = (st or {}).get("wake_sources", {}).get("vcpus", [])
    return next((r for r in rows if r["vcpu"] == vcpu and
                 r["source"] == source), {})


def test_rates():
    """A LAPIC timer and IPIs at known rates: status names each source,
    its detail and a rate within 20 %; the metrics file counts them."""
    use_script("busy", BUSY_VM)
    sock = os.path.join(TMP, "busy.sock")
    prom = os.path.join(TMP, "busy.prom")
    vm = Vm(["--cpus", "3", "--control", sock, "--metrics-file", prom,
             KERNEL], stop_timeout=20)

    def settled():
        st = vmmtest.status(sock)
        return st if row(st, 0, "lapic-timer").get("total", 0) >= \
            3 * TIMER_HZ and row(st, 1, "ipi").get("total", 0) >= \
            3 * IPI_HZ else None
    st = poll_until(settled, 30)
    t, i = row(st, 0, "lapic-timer"), row(st, 1, "ipi")
    check(t.get("last") == "lapic-timer periodic" and
          abs(t.get("per_second", 0) - TIMER_HZ) <= TIMER_HZ * 0.2,
          "vCPU 0: its periodic LAPIC timer, %s/s (%d/s set)" %
          (t.get("per_second"), TIMER_HZ), json.dumps(st))
    check(i.get("last") == "ipi from vcpu 2" and
          abs(i.get("per_second", 0) - IPI_HZ) <= IPI_HZ * 0.2,
          "vCPU 1: IPIs from vCPU 2, %s/s (%d/s sent)" %
          (i.get("per_second"), IPI_HZ), json.dumps(st))
    rows = (st or {}).get("wake_sources", {}).get("vcpus", [])
    check(rows[:1] == [t] and not any(r["vcpu"] == 2 for r in rows),
          "busiest first; vCPU 2 never halts, so never woken",
          json.dumps(rows))
    rc = vm.stop()
    timer = metric(prom, "sysidle_vcpu_wakeups_total", vcpu="0",
                   source="lapic-timer")
    ipi = metric(prom, "sysidle_vcpu_wakeups_total", vcpu="1", source="ipi")
    check(rc == 143 and timer and timer >= t["total"] and ipi and
          ipi >= i["total"],
          "the metrics file left at exit: sysidle_vcpu_wakeups_total "
          "{source=lapic-timer} %s, {source=ipi} %s" % (timer, ipi),
          "exit %s\n%s" % (rc, "\n".join(read_lines(prom))))


def test_housekeeping():
    """The same VM with its LAPIC timers on the housekeeping thread and
    --sysidle: that thread's wake-ups are put down to the LAPIC timer (at
    its rate) and to its own tick (the VM is never idle: vCPU 2 spins)."""
    use_script("busy-hk", BUSY_VM)
    sock = os.path.join(TMP, "hk.sock")
    vm = Vm(["--cpus", "3", "--sysidle", "--vcpu-timers", "housekeeping",
             "--control", sock, KERNEL], stop_timeout=20)

    def hk(st, reason):
        rows = (st or {}).get("wake_sources", {}).get("housekeeping", [])
        return next((r for r in rows if r["reason"] == reason), {})

    def settled():
        st = vmmtest.status(sock)
        return st if hk(st, "lapic-timer").get("total", 0) >= \
            3 * TIMER_HZ else None
    st = poll_until(settled, 30)
    t, tick = hk(st, "lapic-timer"), hk(st, "housekeeping-tick")
    check(abs(t.get("per_second", 0) - TIMER_HZ) <= TIMER_HZ * 0.2 and
          tick.get("per_second", 0) >= 100,
          "housekeeping thread: woken by the LAPIC timer %s/s, by its own "
          "tick %s/s" % (t.get("per_second"), tick.get("per_second")),
          json.dumps((st or {}).get("wake_sources")))
    check(vm.stop() == 143, "SIGTERM: 143", vm.err)


def ends_by(log):
    """The sources of the --sysidle-log's ends of full idle, in order."""
    return [m.group(1) for m in (re.search(r"FULL_NOTED -> NOT .* by (.*)$",
                                           l) for l in read_lines(log)) if m]


def test_full_idle_ends():
    """A fully idle VM woken by a control kick, SIGUSR2 and a serial byte:
    each end of full idle is put down to it, in the log, the watch events,
    status and the metrics."""
    use_script("idle", IDLE_VM)
    sock = os.path.join(TMP, "idle.sock")
    prom = os.path.join(TMP, "idle.prom")
    log = os.path.join(TMP, "idle.log")
    vm = Vm(["--cpus", "2", "--sysidle", "--sysidle-log", log, "--control",
             sock, "--metrics-file", prom, KERNEL], stop_timeout=20)
    vm.wait_line("^R$", 20)
    watch = vmmtest.connect(sock, proc=vm.p)
    watch.request({"cmd": "watch"})

    def full():
        st = vmmtest.status(sock)
        return st and st.get("state") == "FULL_NOTED"
    events = []

    def next_end():
        """The next watch event that ends FULL_NOTED."""
        while True:
            ev = watch.line(20)
            if not isinstance(ev, dict):
                return None
            events.append(ev)
            if ev.get("from") == "FULL_NOTED" and ev.get("to") == "NOT":
                return ev
    got = []
    for what, cause in [("kick", lambda: vmmtest.status(sock) and
                         vmmtest.Client(sock).request({"cmd": "kick"})),
                        ("signal", lambda: vm.p.send_signal(signal.SIGUSR2)),
                        ("serial-input", lambda: vm.send("A"))]:
        if not poll_until(full, 20):
            break
        cause()
        ev = next_end()
        got.append((what, (ev or {}).get("by"), (ev or {}).get("by_detail")))
    check([g[1] for g in got] == ["kick", "signal", "serial-input"],
          "watch: each end of full idle says what ended it (kick, "
          "signal, serial-input)", "%s\n%s" % (got, events))
    poll_until(lambda: len(ends_by(log)) >= 3, 10)
    check(ends_by(log)[:3] == ["kick", "signal", "serial-input"],
          "--sysidle-log: '... -> NOT ... by kick', 'by signal', 'by "
          "serial-input'", "\n".join(read_lines(log)))
    st = vmmtest.status(sock) or {}
    exits = st.get("wake_sources", {}).get("full_idle_exits", {})
    check(exits.get("kick") == 1 and exits.get("signal") == 1 and
          exits.get("serial-input") == 1,
          "status: full_idle_exits kick 1, signal 1, serial-input 1",
          json.dumps(exits))
    watch.close()
    rc = vm.stop()
    check(rc == 143 and metric(prom, "sysidle_vm_full_idle_exits_total",
                               source="serial-input") == 1 and
          metric(prom, "sysidle_vm_full_idle_exits_total",
                 source="kick") == 1,
          "metrics: sysidle_vm_full_idle_exits_total by source",
          "exit %s\n%s" % (rc, "\n".join(read_lines(prom))))


if __name__ == "__main__":
    try:
        test_rates()
        test_housekeeping()
        test_full_idle_ends()
    finally:
        shutil.rmtree(TMP, ignore_errors=True)
    sys.exit(vmmtest.finish())
