#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""The VMM's command line where no VM is needed: --help, --version, bad
options (--sysidle's, the wake path's and --uuid among them), --config
errors and a kernel found nowhere, each with its message
and exit status; and a host without KVM: exit 112, one line saying what to
look at. Runs whether or not /dev/kvm is usable (without it, this is all
of the VMM that CI can check), so it never skips as a whole.

usage: test_usage.py VMM GUEST_DIR GUEST_TOOLS_DIR
Exit: 0 all passed, 1 a check failed."""
import os
import re
import shutil
import subprocess
import sys
import tempfile

import vmmtest
from vmmtest import STATUS, check, expect, host_has_kvm, run, skip

vmmtest.init(sys.argv)
VMM, GUESTS = vmmtest.VMM, vmmtest.GUESTS
USAGE, IMAGE, KVM = STATUS["usage"], STATUS["image"], STATUS["kvm"]


def guest(name):
    return os.path.join(GUESTS, name + ".elf")


def test_help_version():
    rc, out, _ = run(["--help"])
    check(rc == 0 and all(o in out for o in
                          ["--mem", "--cpus", "--append", "--module",
                           "--cpu FLAGS", "--config FILE",
                           "--stats-json", "--help", "--version",
                           "Exit status", "128+SIG"]),
          "--help documents every option and the exit statuses", out)
    sec = out[out.find("Exit status:"):]
    codes = {int(c) for c in re.findall(r"^  (\d+) ", sec, re.M)}
    check(codes == {0, 110, 111, 112, 113, 114, 115} and
          not any(124 <= c for c in STATUS.values() if c < 128) and
          "116-119    reserved" in sec,
          "--help: the VMM's own statuses are 110..115 (116..119 reserved), "
          "none of them 124..127 (timeout(1)'s, the shell's): %s" %
          sorted(codes), sec)
    rc, out, err = run(["--version"])
    check(rc == 0 and re.match(r"sysidle-vmm \d+\.\d+\.\d+", out) and not err,
          "--version: %r" % out.split("\n")[0], out + err)


def test_bad_options():
    h = guest("hello")
    expect(["--cpus", "0", h], USAGE, "--cpus '0'", "--cpus 0")
    expect(["--cpus", "5000", h], USAGE, "--cpus '5000'", "--cpus 5000")
    expect(["--cpus", "two", h], USAGE, "--cpus 'two'", "--cpus two")
    expect(["--mem", "lots", h], USAGE, "--mem 'lots'", "--mem lots")
    expect(["--bogus", h], USAGE, "unknown option '--bogus'",
           "unknown option")
    expect(["--cpu", "-x2apic,+avx", h], USAGE, "--cpu: '+avx'",
           "--cpu with a feature it does not have")
    expect(["--cpu", "x2apic", h], USAGE, "--cpu: 'x2apic'",
           "--cpu with a feature without + or -")
    expect([], USAGE, "missing KERNEL", "no kernel")
    expect([h, h], USAGE, "unexpected argument", "two kernels")
    expect(["--cpus"], USAGE, "needs an argument", "--cpus without value")
    expect(["--device", "nosuch", h], USAGE,
           "--device 'nosuch': expected one of: pc-testdev",
           "--device nosuch")
    expect(["--module", "/nonexistent/mod"], USAGE, "missing KERNEL",
           "module without kernel")


def test_sysidle_options():
    """--sysidle and its options."""
    h = guest("hello")
    rc, out, _ = run(["--help"])
    check(rc == 0 and all(o in out for o in ["--sysidle", "--sysidle-log",
                                              "--timekeeper",
                                              "--housekeeping-cpu",
                                              "--lapic-tick-policy",
                                              "--lapic-tick-max-hold",
                                              "--idle-memory",
                                              "--idle-memory-delay",
                                              "SIGUSR2"]),
          "--help documents --sysidle and its options", out)
    for args, msg in [(["--sysidle-log", "-", h], "needs --sysidle"),
                      (["--timekeeper", "x", h], "--timekeeper 'x'"),
                      (["--housekeeping-cpu", "-1", h],
                       "--housekeeping-cpu '-1'"),
                      (["--lapic-tick-policy", "delay", h],
                       "--lapic-tick-policy 'delay': expected honour, "
                       "catchup or discard"),
                      (["--lapic-tick-policy", "", h],
                       "--lapic-tick-policy ''"),
                      (["--sysidle", "--lapic-tick-policy", "discard",
                        "--lapic-tick-max-hold", "0", h],
                       "--lapic-tick-max-hold '0'"),
                      (["--sysidle", "--lapic-tick-policy", "catchup",
                        "--lapic-tick-max-hold", "1e9", h],
                       "--lapic-tick-max-hold '1e9'"),
                      (["--sysidle", "--lapic-tick-policy", "catchup",
                        "--lapic-tick-max-hold", "nan", h],
                       "--lapic-tick-max-hold 'nan'"),
                      (["--sysidle", "--lapic-tick-max-hold", "1", h],
                       "--lapic-tick-max-hold needs --sysidle and "
                       "--lapic-tick-policy catchup or discard"),
                      (["--lapic-tick-policy", "catchup",
                        "--lapic-tick-max-hold", "1", h],
                       "--lapic-tick-max-hold needs --sysidle"),
                      (["--sysidle", "--idle-memory", "dontneed", h],
                       "--idle-memory 'dontneed': expected cold, pageout "
                       "or off"),
                      (["--idle-memory", "pageout", h],
                       "--idle-memory needs --sysidle"),
                      (["--sysidle", "--idle-memory-delay", "5", h],
                       "--idle-memory-delay needs --idle-memory cold or "
                       "pageout"),
                      (["--sysidle", "--idle-memory", "off",
                        "--idle-memory-delay", "5", h],
                       "--idle-memory-delay needs --idle-memory"),
                      (["--sysidle", "--idle-memory", "cold",
                        "--idle-memory-delay", "0", h],
                       "--idle-memory-delay '0': expected seconds from 1 "
                       "to 86400"),
                      (["--sysidle", "--idle-memory", "cold",
                        "--idle-memory-delay", "86401", h],
                       "--idle-memory-delay '86401'"),
                      (["--sysidle", "--idle-memory", "cold",
                        "--idle-memory-delay", "1.5", h],
                       "--idle-memory-delay '1.5'")]:
        rc, out, err = run(args)
        check(rc == USAGE and msg in err,
              "%s: exit 110, %r" % (" ".join(args[:-1]), msg),
              "exit %s\n%s" % (rc, err))


def test_wake_path_options():
    """The wake path's options (vmm/machine/README.md, "vCPU states")."""
    bad = [["--halt-poll-ns", "-1"], ["--halt-poll-ns", "abc"],
           ["--halt-poll-ns", "10000001"], ["--timer-advance-ns", "1x"],
           ["--vcpu-timers", "both"], ["--sched-slice-us", "99"],
           ["--sched-slice-us", "100001"], ["--sched-slice-us", "fast"],
           ["--interrupt-injection", "msr"]]
    for args in bad:
        rc, out, err = run(args + [guest("hello")])
        check(rc == USAGE and args[0] in err and
              "vmm --help" in err,
              "vmm %s: exit %d naming the option"
              % (" ".join(args), USAGE),
              "exit %s: %s" % (rc, err))
    rc, out, err = run(["--help"])
    missing = [o for o in ("--halt-poll-ns", "--timer-advance-ns",
                           "--vcpu-timers", "--sched-slice-us",
                           "--interrupt-injection") if o not in out]
    check(rc == 0 and not missing, "--help documents the wake-path options",
          "missing: %s" % missing)


def test_bad_uuid():
    """--uuid takes the canonical text form only."""
    for bad in ["0f4c1a2b3c4d5e6f8a9b0123456789ab",
                "0f4c1a2b-3c4d-5e6f-8a9b-0123456789a",
                "0f4c1a2b-3c4d-5e6f-8a9b-0123456789abc",
                "0f4c1a2b-3c4d-5e6f-8a9b-0123456789ag",
                "{0f4c1a2b-3c4d-5e6f-8a9b-0123456789ab}", ""]:
        rc, out, err = run(["--uuid", bad, "--control", "none",
                                    guest("hello")])
        check(rc == USAGE and
              err.startswith("vmm: --uuid '%s': expected a uuid" % bad) and
              err.count("\n") == 1,
              "--uuid %r: exit 110, one line naming the option" % bad,
              "exit %s\n%s" % (rc, err))


def test_config_errors(tmp):
    """sysidle.conf(5): every error names FILE:LINE, with the usage status."""
    def conf(text):
        path = os.path.join(tmp, "vm.conf")
        with open(path, "w") as f:
            f.write(text)
        return path
    c = conf("kernel = %s\n\nbogus = 1\n" % guest("hello"))
    expect(["--config", c], USAGE, "%s:3: unknown key 'bogus'" % c,
           "--config: an unknown key names FILE:LINE")
    c = conf("cpus = two\nkernel = %s\n" % guest("hello"))
    expect(["--config", c], USAGE, "%s:1: --cpus 'two'" % c,
           "--config: a bad value names FILE:LINE")
    c = conf("help\n")
    expect(["--config", c], USAGE, "%s:1: key 'help' is not allowed" % c,
           "--config: 'help' refused in a file")
    c = conf("sysidle = maybe\n")
    expect(["--config", c], USAGE, "%s:1: key 'sysidle' takes no value" % c,
           "--config: a flag with a value other than a boolean")
    c = conf("x" * 5000 + "\n")
    expect(["--config", c], USAGE, "%s:1: a line longer than" % c,
           "--config: a line over 4096 bytes")
    expect(["--config", os.path.join(tmp, "none.conf")], USAGE,
           "none.conf: No such file", "--config: a missing file")
    expect(["no-such-guest.elf"], IMAGE, "no such file in the current "
           "directory nor in ", "a bare kernel name found nowhere names "
           "both places")


def no_kvm_command():
    """How to run the VMM on a host without KVM: as it is when /dev/kvm
    cannot be opened here, else in a mount namespace of its own whose /dev
    is an empty tmpfs (root and unshare(1)); None when neither works."""
    if not host_has_kvm():
        return []
    if os.geteuid() != 0 or not shutil.which("unshare"):
        return None
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c",
            'mount -t tmpfs none /dev && exec "$0" "$@"', VMM]


def test_no_kvm():
    """No KVM on the host: exit 112 and one line naming /dev/kvm, why it
    cannot be opened and what to look at; the guest never runs."""
    prefix = no_kvm_command()
    what = "a host without /dev/kvm: exit %d, one line saying why" % KVM
    if prefix is None:
        skip(what, "KVM is usable here and no mount namespace can hide it "
             "(needs root and unshare)")
        return
    if prefix:
        p = subprocess.Popen(prefix + [guest("hello")],
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        rc, out, err = vmmtest.communicate(p, 30)
        if rc is not None:
            vmmtest.sanitizer_check(err, ["(no /dev)", guest("hello")])
    else:
        rc, out, err = run([guest("hello")])
    lines = err.splitlines()
    check(rc == KVM and "hello" not in out and len(lines) == 1 and
          lines[0].startswith("vmm: cannot open /dev/kvm: No such file") and
          "this host has no KVM" in lines[0] and
          "nested virtualisation" in lines[0],
          what, "exit %s\nstdout: %s\nstderr: %s" % (rc, out, err))


def main():
    if not os.path.exists(VMM):
        print("# %s missing" % VMM)
        return 1
    if not host_has_kvm():
        print("# /dev/kvm is not usable: this is all of the VMM that can "
              "be checked here")
    with tempfile.TemporaryDirectory() as tmp:
        test_help_version()
        test_bad_options()
        test_sysidle_options()
        test_wake_path_options()
        test_bad_uuid()
        test_config_errors(tmp)
        test_no_kvm()
    return vmmtest.finish()


if __name__ == "__main__":
    sys.exit(main())
