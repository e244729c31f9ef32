#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""--idle-memory cold|pageout (vmm/idle/README.md, "--idle-memory"): the
guest RAM of a VM fully idle for --idle-memory-delay advised to the host
kernel, measured on idle.elf fill=128 (128 MiB of its 256 MiB filled with
a pattern it checks after each serial wake-up, guest-tools/memfill.c).

- pageout, with a swap file of the test's own: the VMM's RssAnon drops by
  most of the filled memory and the swap file takes it; status,
  --sysidle-log and the metrics file say so; under pressure (the VMM in a
  cgroup v1 memory cgroup of the test's own, its limit lowered below its
  usage) those pages are freed without being written again; the guest's
  checksum is intact after the first wake-up (its latency, serial byte to
  reply, against a second wake-up with the memory back in); the next
  full-idle period advises again.
- cold, in such a cgroup: nothing is reclaimed by the advice alone; the
  limit lowered reclaims it (RssAnon drops), and the checksum is intact
  after the first wake-up (against a second, as above).
- no swap (the swap file off, the host having none of its own): a warning
  at start, swap_available false, the memory kept; a word of the guest's
  memory changed from outside makes the guest's check say FAIL (the check
  sees a change).

Swap is the host's: the swap file is small (384 MiB), switched off and
removed in every case (a finally, and on SIGTERM, SIGINT, SIGHUP), as are
the cgroup and the VMMs (killed by PID).

usage: test_idle_memory.py VMM GUEST_DIR GUEST_TOOLS_DIR
Exit: 0 all passed, 1 a check failed, 77 skipped (no usable /dev/kvm, not
root, or swapon refused the swap file)."""
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time

import vmmtest
from host_memory import (MIB, MemCgroup, SwapFile, guest_ram_address, poke,
                         proc_status_kib, swaps)
from vmmtest import Vm, check, skip, tool

vmmtest.init(sys.argv)
RAM_MIB = 256
FILL_MIB = 128
SWAP_MIB = 384
FILL_START = 64 * MIB  # guest-tools/rt.h MEMFILL_BASE
# Seconds. The guest's ring 0 may be interpreted (a nested host): its fill
# and each check of 128 MiB take about 10 s there.
GUEST_UP = 180
CHECKSUM = 180
ADVICE = 60
TIMED_STEP = 0.001  # seconds between two looks for a timed reply
PROMTOOL = shutil.which("promtool")


class Guest:
    """One VMM on idle.elf fill=@fill with --idle-memory @mode and a delay
    of 1 s, its control socket, --sysidle-log and metrics file in @tmp;
    @cgroup: started inside it (a shell joins it, then execs the VMM)."""

    def __init__(self, tmp, tag, mode, fill, cgroup=None):
        self.tag = tag
        self.sock = os.path.join(tmp, tag + ".sock")
        self.log = os.path.join(tmp, tag + ".log")
        self.prom = os.path.join(tmp, tag + ".prom")
        args = ["--sysidle", "--sysidle-log", self.log,
                "--idle-memory", mode, "--idle-memory-delay", "1",
                "--mem", "%dM" % RAM_MIB, "--name", "idlemem-" + tag,
                "--control", self.sock, "--metrics-file", self.prom,
                "--append", "fill=%d" % fill, tool("idle.elf")]
        if cgroup:
            self.vm = Vm(["-c", 'echo $$ > "$0" && exec "$@"',
                          os.path.join(cgroup.path, "cgroup.procs"),
                          vmmtest.VMM] + args, exe="/bin/sh", tag="vmm",
                         stop_timeout=30)
        else:
            self.vm = Vm(args, stop_timeout=30)
        self.pid = self.vm.p.pid
        RUNNING.append(self)

    def status(self):
        return vmmtest.status(self.sock)

    def memory(self):
        """The status's idle_memory object ({} when there is none)."""
        v = self.status()
        return (v or {}).get("idle_memory") or {}

    def advised(self, n, timeout=ADVICE):
        """The idle_memory object once it shows @n passes done; None."""
        return vmmtest.poll_until(
            lambda: (lambda m: m if m.get("advised", 0) >= n else None)(
                self.memory()), timeout, step=0.1)

    def rss_anon(self):
        return (proc_status_kib(self.pid, "RssAnon") or 0) * 1024

    def up(self, what):
        """The guest's fill line, checked; the process's RssAnon then."""
        line = self.vm.wait_line(r"^idle: memory filled", GUEST_UP)
        check(line is not None and "checksum 0x" in line,
              "%s: idle.elf fills its memory and prints the checksum (%s)"
              % (what, line), "\n".join(self.vm.lines) + self.vm.err)
        return line is not None

    def wake(self, what):
        """A serial byte: (ms to the guest's report, the checksum line)."""
        start = len(self.vm.lines)
        t0 = time.monotonic()
        self.vm.send("x")
        woken = self.vm.wait_line(r"^idle: woken by serial", 60, start,
                                  step=TIMED_STEP)
        ms = (time.monotonic() - t0) * 1000 if woken is not None else None
        line = self.vm.wait_line(r"^idle: memory checksum (ok|FAIL)",
                                 CHECKSUM, start)
        took = self.vm.wait_line(r"^# idle: memory checksum 0x", 5, start)
        print("# %s: %s; %s" % (what, line, took))
        return ms, line

    def stop(self):
        if self in RUNNING:
            RUNNING.remove(self)
        return self.vm.stop(signal.SIGTERM)


RUNNING = []  # the Guests not stopped yet: killed by the cleanup


def log_lines(g, pattern):
    return [l for l in vmmtest.read_lines(g.log) if re.search(pattern, l)]


def metrics_show(g, passes):
    """The metrics file once it shows @passes passes done, else None."""
    return vmmtest.poll_until(
        lambda: vmmtest.metric(g.prom, "sysidle_vm_idle_memory_advice_total",
                               outcome="done") == passes or None,
        10, step=0.1)


def memfill_value(address, seed):
    """Every word of the page at @address after idle.elf fill= seed=@seed
    (guest-tools/memfill.c memfill_value)."""
    m = (1 << 64) - 1
    z = (address ^ (seed * 0x9e3779b97f4a7c15)) & m
    z = ((z ^ (z >> 30)) * 0xbf58476d1ce4e5b9) & m
    z = ((z ^ (z >> 27)) * 0x94d049bb133111eb) & m
    return z ^ (z >> 31)


def mib(b):
    return "%.1f MiB" % (b / MIB) if b is not None else "?"


def idle_again(g, advised):
    """Polled until the VM is fully idle again before its next pass
    (--idle-memory-delay 1 s): the status then, else None."""
    def look():
        v = g.status()
        return v if v and v["state"] == "FULL_NOTED" and \
            v["idle_memory"]["advised"] == advised else None
    return vmmtest.poll_until(look, 60, step=0.02)


def pressure(g, cg, swap, what):
    """The cgroup's limit lowered 3/4 of the fill below its usage (up in
    steps of 8 MiB while the kernel cannot reclaim that much), then lifted
    again: (RssAnon before, after, usage before, after, swap KiB used
    before, after, the limit, None or the last refusal)."""
    rss0, usage0, used0 = g.rss_anon(), cg.usage(), swap.used_kib() or 0
    limit, why = usage0 - FILL_MIB * MIB * 3 // 4, None
    for _ in range(16):
        why = cg.set_limit(limit)
        if why is None:
            break
        limit += 8 * MIB
    got = (rss0, g.rss_anon(), usage0, cg.usage(), used0,
           swap.used_kib() or 0, limit, why)
    cg.set_limit(-1)
    print("# %s: the cgroup's limit lowered to %s: RssAnon %s -> %s, usage "
          "%s -> %s, swap %d -> %d KiB used" %
          (what, mib(limit), mib(got[0]), mib(got[1]), mib(got[2]),
           mib(got[3]), got[4], got[5]))
    return got


def promtool_check(g, what):
    """The metrics file with the --idle-memory families through
    Prometheus' own linter (as test_metrics_lint.py), if installed."""
    if not PROMTOOL:
        skip("%s: promtool check metrics" % what, "promtool not found")
        return
    with open(g.prom) as f:
        text = f.read()
    r = subprocess.run([PROMTOOL, "check", "metrics"], input=text,
                       capture_output=True, text=True, timeout=60)
    check(r.returncode == 0 and not r.stdout.strip() and
          not r.stderr.strip(), "%s: promtool check metrics takes the file "
          "with the idle-memory families" % what,
          "exit %d\n%s%s\n%s" % (r.returncode, r.stdout, r.stderr, text))


def quiet(g, what):
    """After its pass the fully idle VM wakes nothing (no periodic work
    came with the advice): every VMM thread asleep, then under 2 context
    switches a second in all over a 3 s window (as test_sysidle.py)."""
    vmmtest.poll_until(lambda: vmmtest.all_sleeping(g.pid), 10)
    c0 = vmmtest.ctx_switches(g.pid)
    time.sleep(3)  # the window measured, not a wait for an event
    c1 = vmmtest.ctx_switches(g.pid)
    v = g.status()
    check(c1 - c0 < 6 and v is not None and v["state"] == "FULL_NOTED",
          "%s: after its pass the VM stays fully idle and quiet: %.2f "
          "context switches/s over 3 s (< 2/s)" % (what, (c1 - c0) / 3.0),
          v)


def ms(t):
    return "%.1f" % t if t is not None else "?"


def two_wakes(g, what, passes):
    """A first wake-up (the memory given back) and, once the VM is fully
    idle again and before its next pass, a second (the memory back in):
    both checksums ok; the two latencies reported."""
    first, line = g.wake(what + ", first wake-up")
    check(line == "idle: memory checksum ok",
          "%s: the guest's memory is unchanged after the first wake-up (%s)"
          % (what, line), "\n".join(g.vm.lines[-8:]))
    rss_back = g.rss_anon()
    v = idle_again(g, passes)
    second, line2 = g.wake(what + ", second wake-up") if v else (None, None)
    check(v is not None and line2 == "idle: memory checksum ok",
          "%s: a second wake-up from full idle, before the next pass: "
          "memory unchanged (%s)" % (what, line2))
    check(first is not None and second is not None,
          "%s: serial byte to the guest's reply: first wake-up %s ms (its "
          "memory given back), second %s ms (back in; RssAnon %s after the "
          "first check)" % (what, ms(first), ms(second), mib(rss_back)))


def start_in_cgroup(tmp, what, mode):
    """A Guest of @mode in a memory cgroup of its own (None when there is
    none: said by a skip)."""
    cg = MemCgroup("idlemem-" + mode)
    if cg.path is None:
        skip("%s: the VMM in a memory cgroup, its limit lowered" % what,
             cg.why)
        return None, None
    CGROUPS.append(cg)
    return Guest(tmp, mode, mode, FILL_MIB, cgroup=cg), cg


def test_pageout(tmp, swap):
    """pageout with the swap file on, then pressure from the cgroup's
    limit: the pages it wrote are freed without more I/O."""
    what = "pageout"
    g, cg = start_in_cgroup(tmp, what, "pageout")
    if g is None:
        g = Guest(tmp, "pageout", "pageout", FILL_MIB)
    if not g.up(what):
        g.stop()
        return
    rss_filled = g.rss_anon()
    used0 = swap.used_kib() or 0
    m = g.advised(1)
    rss_after = g.rss_anon()
    used1 = swap.used_kib() or 0
    check(m is not None and m["mode"] == "pageout" and m["swap_available"]
          and m["delay_s"] == 1 and m["last_advised_bytes"] >= FILL_MIB * MIB,
          "%s: status: one pass done, swap available, %s advised in %s s" %
          (what, mib((m or {}).get("last_advised_bytes")),
           (m or {}).get("last_duration_s")), m)
    check(rss_filled - rss_after >= FILL_MIB * MIB * 3 // 4,
          "%s: the VMM's RssAnon dropped by most of the %d MiB filled: %s "
          "-> %s (status: %s -> %s)" %
          (what, FILL_MIB, mib(rss_filled), mib(rss_after),
           mib((m or {}).get("last_rss_anon_before_bytes")),
           mib((m or {}).get("last_rss_anon_after_bytes"))), m)
    check((used1 - used0) * 1024 >= FILL_MIB * MIB * 3 // 4,
          "%s: the swap file took it: %d -> %d KiB used" %
          (what, used0, used1))
    lines = log_lines(g, r" idle-memory pageout: advised \d+\.\d MiB "
                         r"resident of %d MiB in \d+ ms" % RAM_MIB)
    check(len(lines) == 1, "%s: one --sysidle-log line for the pass (%s)" %
          (what, lines[0] if lines else None),
          "\n".join(vmmtest.read_lines(g.log)))
    check(metrics_show(g, 1) and
          vmmtest.metric(g.prom, "sysidle_vm_idle_memory_advised_bytes_total")
          >= FILL_MIB * MIB and
          vmmtest.metric(g.prom, "sysidle_vm_idle_memory_swap_available")
          == 1, "%s: the metrics file shows the pass (rewritten in full "
          "idle)" % what, "\n".join(vmmtest.read_lines(g.prom)))
    promtool_check(g, what)
    quiet(g, what)
    if cg is not None:
        p = pressure(g, cg, swap, what)
        check(p[7] is None and p[2] - p[3] >= FILL_MIB * MIB // 2 and
              (p[5] - p[4]) * 1024 < FILL_MIB * MIB // 4,
              "%s: under pressure (the cgroup's limit %s) its usage drops "
              "%s -> %s with little more written to swap (%d -> %d KiB): "
              "the pages were on swap already" %
              (what, mib(p[6]), mib(p[2]), mib(p[3]), p[4], p[5]), p[7])
    two_wakes(g, what, 1)
    m2 = g.advised(2)
    check(m2 is not None and m2["advised"] == 2,
          "%s: the next full-idle period is advised again" % what, m2)
    check(g.stop() == 143, "%s: the VMM stops at SIGTERM (143)" % what,
          g.vm.err)


def test_cold(tmp, swap):
    """cold, then pressure from the cgroup's limit."""
    what = "cold"
    g, cg = start_in_cgroup(tmp, what, "cold")
    if g is None:
        return
    if not g.up(what):
        g.stop()
        return
    m = g.advised(1)
    check(m is not None and m["mode"] == "cold" and
          m["last_advised_bytes"] >= FILL_MIB * MIB and
          m["last_rss_anon_after_bytes"] >=
          m["last_rss_anon_before_bytes"] * 9 // 10,
          "%s: a pass done, %s advised, nothing reclaimed by the advice "
          "alone (RssAnon %s -> %s)" %
          (what, mib((m or {}).get("last_advised_bytes")),
           mib((m or {}).get("last_rss_anon_before_bytes")),
           mib((m or {}).get("last_rss_anon_after_bytes"))), m)
    p = pressure(g, cg, swap, what)
    check(p[7] is None and p[0] - p[1] >= FILL_MIB * MIB // 2,
          "%s: under pressure (the cgroup's limit %s below its usage %s) "
          "RssAnon drops %s -> %s, %d KiB more on swap" %
          (what, mib(p[6]), mib(p[2]), mib(p[0]), mib(p[1]), p[5] - p[4]),
          p[7])
    two_wakes(g, what, 1)
    check(g.stop() == 143, "%s: the VMM stops at SIGTERM (143)" % what,
          g.vm.err)


def test_no_swap(tmp):
    """No swap on the host: warned, shown, kept; a change seen."""
    what = "no swap"
    if swaps():
        skip("%s: a warning, swap_available false" % what,
             "this host has swap on of its own (%s)" %
             ", ".join(p for p, _, _ in swaps()))
        return
    g = Guest(tmp, "noswap", "pageout", 16)
    if not g.up(what):
        g.stop()
        return
    m = g.advised(1)
    warned = [l for l in g.vm.err_lines if "--idle-memory pageout: this "
              "host has no swap" in l]
    check(len(warned) == 1 and "nothing can be given back" in warned[0],
          "%s: one warning at start says nothing can be given back" % what,
          g.vm.err)
    check(m is not None and m["swap_available"] is False and
          m["last_rss_anon_after_bytes"] >=
          m["last_rss_anon_before_bytes"] - MIB,
          "%s: status: swap_available false, the memory kept (RssAnon %s "
          "-> %s)" % (what, mib((m or {}).get("last_rss_anon_before_bytes")),
                      mib((m or {}).get("last_rss_anon_after_bytes"))), m)
    check(len(log_lines(g, r"idle-memory pageout: advised .*; no swap on "
                           r"this host: nothing can be given back$")) == 1,
          "%s: the --sysidle-log line says so" % what,
          "\n".join(vmmtest.read_lines(g.log)))
    check(metrics_show(g, 1) and vmmtest.metric(
        g.prom, "sysidle_vm_idle_memory_swap_available") == 0,
          "%s: sysidle_vm_idle_memory_swap_available 0" % what,
          "\n".join(vmmtest.read_lines(g.prom)))
    base = guest_ram_address(g.pid, RAM_MIB * MIB, lambda read: read(
        FILL_START, 8) == struct.pack("<Q", memfill_value(FILL_START, 1)))
    at = FILL_START + 5 * 4096 + 16
    if base is not None:
        poke(g.pid, base + at, b"\x5a" * 8)
    _, line = g.wake(what + ", one word changed from outside")
    check(base is not None and line is not None and
          line.startswith("idle: memory checksum FAIL") and
          "1 pages differ, the first word at 0x%x" % at in line,
          "%s: a word of the guest's memory changed from outside: the "
          "guest's check sees it (%s)" % (what, line),
          "\n".join(g.vm.lines[-8:]))
    check(g.stop() == 143, "%s: the VMM stops at SIGTERM (143)" % what,
          g.vm.err)


CGROUPS = []


def cleanup(swap):
    """Every VMM killed by PID, the swap file off and removed, the
    cgroups removed: whatever happened (another signal now waits)."""
    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, signal.SIG_IGN)
    for g in list(RUNNING):
        try:
            g.vm.p.kill()
            g.vm.p.wait(30)
        except Exception as e:  # noqa: BLE001 (report, go on cleaning)
            print("# kill %d: %s" % (g.pid, e))
    del RUNNING[:]
    if swap is not None:
        swap.stop()
    for cg in CGROUPS:
        cg.remove()
    del CGROUPS[:]


def on_signal(sig, frame):
    raise SystemExit(128 + sig)


def main():
    if not vmmtest.kvm_usable():
        print("1..0 # SKIP no usable /dev/kvm (the guest's own memory is "
              "what is measured: no scripted KVM)")
        return 77
    if os.geteuid() != 0:
        print("1..0 # SKIP not root: swapon, cgroups and /proc/PID/mem")
        return 77
    if not os.path.exists(tool("idle.elf")):
        print("1..0 # SKIP %s is not built" % tool("idle.elf"))
        return 77
    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, on_signal)
    swap = None
    with tempfile.TemporaryDirectory(prefix="vmm-idlemem-") as tmp:
        try:
            swap = SwapFile([vmmtest.GUESTS, tempfile.gettempdir(),
                             "/var/tmp"], SWAP_MIB, "vmm-idlemem")
            if swap.path is None:
                print("1..0 # SKIP swapon refused a swap file: %s" %
                      swap.why)
                return 77
            print("# swap file %s, %d MiB" % (swap.path, SWAP_MIB))
            test_pageout(tmp, swap)
            if vmmtest.SANITIZED:
                vmmtest.skip("cold, and no swap", "the advice path of "
                             "pageout with another advice, and the start's "
                             "swap check; run in the plain build")
            else:
                test_cold(tmp, swap)
                swap.stop()
                test_no_swap(tmp)
        finally:
            cleanup(swap)
    return vmmtest.finish()


if __name__ == "__main__":
    sys.exit(main())
