#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""Boots the VMM's bring-up guests and checks each exit status and what
they print: exit codes, a triple fault, unknown ports and MSRs, a runaway
guest stopped by SIGTERM/SIGINT, storm.elf misbehaving on purpose, --mem
beyond the host, --cpus beyond 8 per host CPU, --config FILE,
--stats-json, the ACPI tables; boots guest-tools' selftest.elf with 1..64
vCPUs in both APIC modes when it has been built. Broken images and the
loader are test_vmm_images.py's, the serial port (output, input waking a
halted guest) test_vmm_serial.py's, the command line's checks that need no
VM test_usage.py's.

usage: test_vmm.py VMM GUEST_DIR GUEST_TOOLS_DIR
Exit: 0 all passed, 1 a check failed, 77 skipped (no usable /dev/kvm)."""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

import vmmtest
from vmmtest import check, expect, run

vmmtest.init(sys.argv)
GUESTS, TOOLS = vmmtest.GUESTS, vmmtest.TOOLS
from vmm_run_cost import (  # noqa: E402
    RUN_TIMEOUT, halted_cost, start_until)


def guest(name):
    return os.path.join(GUESTS, name + ".elf")


def test_options():
    """What needs a VM; the rest of the command line is test_usage.py's."""
    h = guest("hello")
    with open("/proc/meminfo") as f:
        kb = sum(int(l.split()[1]) for l in f
                 if l.startswith(("MemTotal:", "SwapTotal:")))
    too_much = "%dG" % (2 * kb // (1 << 20) + 1)
    expect(["--mem", too_much, h], 110, "more than this host has",
           "--mem %s, twice this host's RAM and swap: refused" % too_much)
    many = 8 * (os.cpu_count() or 1) + 1
    if many <= 1024:
        rc, out, err = run(["--cpus", str(many), h])
        check(rc == 0 and "vCPUs per host CPU" in err and "hello" in out,
              "--cpus %d, more than 8 per host CPU: a warning, and it runs"
              % many, "exit %s\n%s%s" % (rc, out, err))
    expect(["--device", "pc-testdev", "--device", "pc-testdev", h], 0, "",
           "--device pc-testdev, twice", stdout_has="hello")
    expect(["--mem", "1K", h], 111, "RAM too small for the image",
           "--mem 1K")


def test_config(tmp):
    """--config FILE (sysidle.conf(5)) running a guest; its errors are
    test_usage.py's."""
    def conf(text):
        path = os.path.join(tmp, "vm.conf")
        with open(path, "w") as f:
            f.write(text)
        return path
    a, b = os.path.join(tmp, "a.json"), os.path.join(tmp, "b.json")
    c = conf("# a VM\n\nkernel = %s\nmem = 64M\nstats-json = %s\n" %
             (guest("hello"), a))
    what = ("--config: the kernel and options of the file (stats written to "
            "the file's --stats-json)")
    if not vmmtest.scripted_skip(what):  # its kernel is in the file
        rc, out, err = run(["--config", c])
        check(rc == 0 and "hello" in out and os.path.exists(a), what,
              "exit %s\n%s%s" % (rc, out, err))
        os.unlink(a)
    c = conf("kernel = /nonexistent/k.elf\nstats-json = %s\n" % a)
    rc, out, err = run(["--config", c, "--stats-json", b, guest("hello")])
    check(rc == 0 and "hello" in out and os.path.exists(b) and
          not os.path.exists(a),
          "--config: the command line's kernel and --stats-json win",
          "exit %s\n%s%s" % (rc, out, err))


def test_guests(tmp):
    h = guest("hello")
    expect([h], 0, "", "hello exits 0", stdout_has="hello\n")
    expect(["--append", "exit=42", h], 42, "", "hello exit=42",
           stdout_has="hello\n")
    expect(["--append", "exit=7", "--cpus", "4", "--mem", "64M",
            "--module", h, h], 7, "", "hello, 4 vCPUs, 64M, a module")
    if vmmtest.scripted_skip("triple.elf, unknown.elf, echo.elf"):
        test_stats_and_stop(tmp)
        return
    expect([guest("triple")], 113, "triple fault", "triple fault")
    rc, out, err = run([guest("unknown")])
    check(rc == 0 and "unknown ok" in out and
          err.count("unknown port 0x99") == 1 and "unknown MSR" in err,
          "unknown port reads all-ones (logged once), unknown MSR #GPs",
          "exit %s\n%s%s" % (rc, out, err))
    check(err.count("unknown port 0x") == 16 and
          err.count("further unknown ports not logged") == 1 and
          "guest wrote unknown port 0x9000 (ignored;" in err and
          err.count("unknown MSR 0x") == 16 and
          err.count("further unknown MSRs not logged") == 1 and
          len(err) < 4096,
          "a guest touching 257 unknown ports and 41 unknown MSRs: 16 lines "
          "each, then one 'further ... not logged' line; a write says ignored",
          err)
    p = vmmtest.popen([guest("echo")], stdin=subprocess.PIPE,
                      stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                      text=True)
    try:
        out, err = p.communicate("5", timeout=RUN_TIMEOUT)
        rc = p.returncode
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        rc = None
    check(rc == 5 and "ready" in out, "serial input from stdin",
          "exit %s\n%s%s" % (rc, out, err))
    test_stats_and_stop(tmp)


def test_stats_and_stop(tmp):
    """--stats-json's keys; a runaway guest stopped by a signal."""
    h = guest("hello")
    stats = os.path.join(tmp, "stats.json")
    rc, out, err = run(["--cpus", "2", "--stats-json", stats, h])
    try:
        with open(stats) as f:
            d = json.load(f)
        keys = all(k in d for k in ["exit_status", "cpus", "housekeeping",
                                     "vcpus"]) and \
            "host_wakeups" in d["housekeeping"] and len(d["vcpus"]) == 2 and \
            all(k in v for v in d["vcpus"] for k in
                ["id", "exits", "exits_total", "hlt_exits",
                 "interrupts_injected", "halted_ns"]) and \
            d["vcpus"][0]["exits"].get("io", 0) > 0
        detail = json.dumps(d)
    except (OSError, ValueError) as e:
        keys, detail = False, str(e)
    check(rc == 0 and keys, "--stats-json parses, with the documented keys",
          detail)
    expect(["--stats-json", "/nonexistent/dir/s.json", h], 115,
           "cannot write --stats-json", "unwritable --stats-json")

    for sig, status in [(signal.SIGTERM, 143), (signal.SIGINT, 130)]:
        args = ["--cpus", "2", "--stats-json", stats, guest("spin")]
        p = subprocess.Popen([vmmtest.VMM] + args, stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             env=vmmtest.vmm_env(args))
        first = p.stdout.readline()
        t0 = time.monotonic()
        p.send_signal(sig)
        try:
            p.wait(timeout=5)
            rc = p.returncode
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            rc = None
        dt = time.monotonic() - t0
        err = p.stderr.read().decode()
        p.stdout.close()
        p.stderr.close()
        ok = rc == status and b"spinning" in first and dt < 5
        try:
            with open(stats) as f:
                ok = ok and json.load(f)["exit_status"] == status
        except (OSError, ValueError):
            ok = False
        check(ok, "runaway guest stopped by %s: exit %d in %.2f s, stats "
              "written" % (sig.name, status, dt), "exit %s\n%s" % (rc, err))


def test_acpi():
    """S3 woken by the RTC alarm resumes at the FACS waking vector with RAM
    kept; S3 with no wake source costs no host CPU and SIGTERM still
    stops it; S5 exits 0."""
    a = guest("acpi")
    for extra in ([], ["--sysidle"], ["--cpus", "2"]):
        expect(extra + ["--append", "sleep=3", a], 51, "",
               "S3, RTC alarm wake-up, resume at the waking vector %s"
               % " ".join(extra), stdout_has="sleeping\n")
    expect(["--append", "sleep=5", a], 0, "", "S5 powers off: exit 0",
           stdout_has="powering off\n")
    for extra in ([], ["--sysidle"]):
        p = start_until(extra + ["--cpus", "2", "--append", "sleep=4", a],
                        b"sleeping")
        if p is None:
            check(False, "acpi.elf sleep=4 boots")
            continue
        used, rc, err = halted_cost(p, 2, window=2)
        check(used is not None and used < 10000000 and rc == 143,
              "asleep %s: %.2f ms of host CPU in 2 s, SIGTERM -> %s"
              % (" ".join(extra), (-1 if used is None else used) / 1e6, rc),
              err)


def test_storm():
    """A guest that misbehaves on purpose (storm.elf: random ports, MMIO,
    MSRs and IPIs from a seed): for 4 seeds, plain and with --sysidle, the
    VMM is still running after 65536 of its steps, then stops on SIGTERM
    within a second (exit 143), with its warnings bounded."""
    for seed in [1, 2, 3, 4]:
        for extra in [[], ["--sysidle"]]:
            vm = vmmtest.Vm(["--control", "none", "--append",
                             "seed=%d" % seed] + extra + [guest("storm")],
                            stdin=subprocess.DEVNULL)
            ran = vm.wait_line("^storm: running", 120) is not None
            alive = vm.p.poll() is None
            rc = vm.stop()
            errors = [l for l in vm.err_lines if l.startswith("vmm: ") and
                      not l.startswith("vmm: warning: ")]
            check(ran and alive and rc == 143 and vm.stop_seconds < 1.0 and
                  not errors and len(vm.err_lines) <= 60,
                  "storm seed=%d%s: 65536 random port/MMIO/MSR/IPI steps, "
                  "the VMM runs on; SIGTERM: exit 143 in %.2f s; %d stderr "
                  "lines" % (seed, " --sysidle" if extra else "",
                             vm.stop_seconds or -1, len(vm.err_lines)),
                  "ran %s alive %s exit %s\n%s" % (ran, alive, rc,
                                                    "\n".join(vm.err_lines)))


def main():
    skip = vmmtest.vm_or_skip()
    if skip:
        return skip
    with tempfile.TemporaryDirectory() as tmp:
        test_options()
        test_config(tmp)
        test_guests(tmp)
        if not vmmtest.scripted_skip("acpi.elf, storm.elf, selftest.elf"):
            test_acpi()
            test_storm()
            vmmtest.selftest_boots([], "selftest.elf")
    return vmmtest.finish()


if __name__ == "__main__":
    sys.exit(main())
