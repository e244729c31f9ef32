#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""The VMM's files when the disk is full or read-only (vmm/export/README.md,
"Files written, and what happens when a write fails"): --metrics-file,
--sysidle-log and --stats-json on a 64 KiB tmpfs (a private mount
namespace: tests/tiny_fs.py), filled for ENOSPC and remounted read-only
for EROFS. Checks: each failure is warned once with its cause, no
temporary file is left, the retry in full idle writes the file again once
there is room and says so, the file then counts the failures, and at
SIGTERM with the disk full the file is removed (never left saying
sysidle_vm_up 1) as is the cut --stats-json. Runs the VMM on a scripted
KVM (vmm-scripted): every host, with or without /dev/kvm; skips without
root or unshare.

usage: test_disk_full.py VMM_SCRIPTED GUEST_DIR GUEST_TOOLS_DIR
Exit: 0 all passed, 1 a check failed."""
import os
import re
import shutil
import sys
import tempfile

import vmmtest
from vmmtest import Vm, check, poll_until, read_lines
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                ".."))
from tiny_fs import TinyFs, reexec_private  # noqa: E402
from scripted_guests import (  # noqa: E402 (guest_abi.h's pv tick MSRs)
    PVTICK_HZ, PVTICK_MISSED, PVTICK_VECTOR)

vmmtest.init(sys.argv)
KERNEL = os.path.join(vmmtest.GUESTS, "hello.elf")  # loaded, never run
# vCPU 0: the serial interrupt (IOAPIC pin 4 -> vector 0x40), the pv tick,
# "R" on the serial line, then HLT for ever; each byte sent is read by the
# handler (a wake: the VM leaves full idle, and comes back to it).
SCRIPT = """
vcpu 0
  sti
  mmio-write 0xfee000f0 4 0x1ff
  mmio-write 0xfec00000 4 0x19
  mmio-write 0xfec00010 4 0
  mmio-write 0xfec00000 4 0x18
  mmio-write 0xfec00010 4 0x40
  out 0x3f9 1 1
  wrmsr %#x 0xec
  wrmsr %#x 250
  out 0x3f8 1 0x52
  out 0x3f8 1 0x0a
  loop
    hlt
  end
on 0x40
  in 0x3f8 1
  rdmsr %#x
  eoi
on 0xec
  rdmsr %#x
  eoi
""" % (PVTICK_VECTOR, PVTICK_HZ, PVTICK_MISSED, PVTICK_MISSED)


def reads(trace):
    """The serial bytes the guest has read so far."""
    return sum("in 0x3f8 = " in line for line in read_lines(trace))


def warned(vm, pattern):
    return [l for l in vm.err_lines if re.search(pattern, l)]


def metric(path, name, **labels):
    """The value of the sample @name{@labels} in @path, else None."""
    want = ",".join('%s="%s"' % kv for kv in sorted(labels.items()))
    for line in read_lines(path):
        m = re.match(r"(\w+)\{([^}]*)\} (\S+)$", line)
        if not m or m.group(1) != name:
            continue
        have = ",".join(sorted(p for p in m.group(2).split(",")
                               if p.split("=")[0] in labels))
        if have == want:
            return float(m.group(3))
    return None


def periods(sock):
    """The full-idle periods begun, as the control socket says; -1 while
    not fully idle."""
    st = vmmtest.status(sock)
    if not isinstance(st, dict) or st.get("state") != "FULL_NOTED":
        return -1
    return st.get("counters", {}).get("full_idle_periods", -1)


def wake(vm, trace, sock, byte):
    """One serial byte, read by the guest (the VM leaves full idle), then
    a new full-idle period (the control socket says so): a few state
    changes, their log lines and rewrites."""
    n, p = reads(trace), periods(sock)
    vm.send(byte)
    return poll_until(lambda: reads(trace) > n, 20) and \
        poll_until(lambda: periods(sock) > p >= 0, 20)


def main():
    tmp = tempfile.mkdtemp(prefix="vmm-disk-full-")
    fs = TinyFs(os.path.join(tmp, "tiny"))
    # the log apart: a file open for writing keeps a remount read-only out
    logfs = TinyFs(os.path.join(tmp, "tinylog"))
    prom = os.path.join(fs.path, "vm.prom")
    log = os.path.join(logfs.path, "idle.log")
    stats = os.path.join(logfs.path, "stats.json")
    script = os.path.join(tmp, "disk.script")
    trace = os.path.join(tmp, "disk.trace")
    sock = os.path.join(tmp, "disk.sock")
    with open(script, "w") as f:
        f.write(SCRIPT)
    os.environ["SYSIDLE_VMM_SCRIPT"] = script
    os.environ["SYSIDLE_VMM_SCRIPT_TRACE"] = trace
    vm = Vm(["--sysidle", "--sysidle-log", log, "--metrics-file", prom,
             "--stats-json", stats, "--name", "disk", "--control", sock,
             KERNEL], stop_timeout=20)
    idle = poll_until(lambda: metric(prom, "sysidle_vm_full_idle") == 1, 20)
    check(idle and metric(prom, "sysidle_vm_file_write_failures_total",
                          file="metrics") == 0 and
          metric(prom, "sysidle_vm_metrics_written_timestamp_seconds"),
          "the file shows full idle, 0 failed writes and when it was "
          "written", "\n".join(read_lines(prom)[-12:]) + vm.err)

    # ENOSPC: two wakes, each a few rewrites, all failing; one warning.
    fs.fill()
    woke = wake(vm, trace, sock, "A") and wake(vm, trace, sock, "B")
    failed = poll_until(lambda: warned(vm, r"--metrics-file .*cannot "
                                       r"write"), 20)
    # The log's last page takes lines until it is full: wakes until then.
    logfs.fill()
    wakes = 0
    for i in range(300):
        if warned(vm, r"--sysidle-log: cannot write") or \
                not wake(vm, trace, sock, "ab"[i % 2]):
            break
        wakes += 1
    msgs = warned(vm, r"--metrics-file .*cannot write")
    check(woke and failed and len(msgs) == 1 and
          "No space left on device" in msgs[0],
          "disk full: the failed rewrites warned once, with the cause",
          vm.err)
    logs = warned(vm, r"--sysidle-log: cannot write")
    check(len(logs) == 1 and "No space left on device" in logs[0],
          "disk full: the --sysidle-log's failure warned once, with its "
          "cause", "%d wakes, the log %d bytes\n%s\n%s" % (
              wakes, os.path.getsize(log), "\n".join(read_lines(log)[-15:]),
              vm.err))
    check(fs.litter() == ["vm.prom"],
          "no temporary file left by the failed writes", fs.litter())
    check(metric(prom, "sysidle_vm_up") == 1 and
          metric(prom, "sysidle_vm_file_write_failures_total",
                 file="metrics") == 0,
          "the file on disk is the one before the failures", vm.err)

    # Room again: the retry in full idle (no event comes) writes it.
    fs.free()
    logfs.free()
    back = poll_until(lambda: warned(vm, r"--metrics-file .*written again "
                                     r"after \d+ failed attempts"), 20)
    n = metric(prom, "sysidle_vm_file_write_failures_total", file="metrics")
    check(back and n is not None and n >= 1 and
          metric(prom, "sysidle_vm_full_idle") == 1,
          "room again: written again by the retry in full idle, said "
          "once; the file counts %s failed writes" % n, vm.err)
    wake(vm, trace, sock, "C")
    relog = poll_until(lambda: warned(vm, r"--sysidle-log: written again"),
                       20)
    check(relog and len(relog) == 1 and
          any("log lines dropped" in l for l in read_lines(log)),
          "the --sysidle-log written again, said once; the log notes the "
          "lines it lost", vm.err)
    relogged = poll_until(lambda: (metric(
        prom, "sysidle_vm_file_write_failures_total", file="sysidle_log")
        or 0) >= 1, 20)
    check(relogged, "the metrics file counts the --sysidle-log's failed "
          "writes", "\n".join(read_lines(prom)))

    # EROFS: read-only, a wake (warned once), read-write, a wake (back).
    fs.read_only()
    wake(vm, trace, sock, "D")
    ro = poll_until(lambda: [l for l in warned(vm, r"--metrics-file .*"
                                               r"cannot write")
                             if "Read-only file system" in l], 20)
    fs.read_only(False)
    wake(vm, trace, sock, "E")
    back = poll_until(lambda: len(warned(vm, r"--metrics-file .*written "
                                         r"again")) == 2, 20)
    check(ro and len(ro) == 1 and back,
          "read-only: warned once with its cause; read-write and the next "
          "change: written again", vm.err)

    # The exit with the disk full: the file saying the VM runs is removed.
    fs.fill()
    logfs.fill()  # the metrics file's removal frees room on fs
    wake(vm, trace, sock, "F")
    poll_until(lambda: len(warned(vm, r"--metrics-file .*cannot "
                                  r"write")) == 3, 20)
    rc = vm.stop()
    gone = not os.path.exists(prom)
    check(rc in (vmmtest.STATUS["sigterm"], vmmtest.STATUS["stats"]) and
          (gone or metric(prom, "sysidle_vm_up") == 0) and
          warned(vm, r"--metrics-file .*removed"),
          "SIGTERM with the disk full: the metrics file removed, not left "
          "saying sysidle_vm_up 1", "exit %s\n%s" % (rc, vm.err))
    check(not os.path.exists(stats) and
          warned(vm, r"--stats-json .*partial file is removed") and
          fs.litter() == [] and logfs.litter() == ["idle.log"],
          "the cut --stats-json removed, no temporary file left",
          "%s %s\n%s" % (fs.litter(), logfs.litter(), vm.err))
    fs.free()
    fs.unmount()
    logfs.unmount()
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    why = reexec_private()
    if why:
        vmmtest.skip("the VMM's files on a full disk", why)
    else:
        main()
    sys.exit(vmmtest.finish())
