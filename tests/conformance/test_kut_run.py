#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""The conformance runner on a made-up suite: this project's own test
guests stand in for kvm-unit-tests kernels, so every verdict and skip
reason of kut_run.py is checked without the real suite.

usage: test_kut_run.py VMM GUEST_DIR
Exit: 0 all passed, 1 a check failed. Without a usable /dev/kvm only the
checks that need no VM run (the rest is one TAP skip, saying why)."""
import os
import re
import subprocess
import sys
import tempfile

VMM, GUESTS = sys.argv[1], sys.argv[2]
HERE = os.path.dirname(os.path.abspath(__file__))
RUNNER = os.path.join(HERE, "kut_run.py")
sys.path.insert(0, os.path.join(HERE, ".."))
from tap import check, finish, skip  # noqa: E402 (the tests' reporter)
sys.path.insert(0, HERE)
from kut_run import kvm_unusable  # noqa: E402 (the runner's own check)

CFG = """\
# comment
[pass]
file = hello.flat

[code1]
file = hello.flat
test_args = 'exit=1'

[selfskip]
file = hello.flat
test_args = "exit=38"

[abort]
file = hello.flat
test_args = exit=63

[triple]
file = triple.flat

[hang]
file = spin.flat
timeout = 1s

[nodef]
file = hello.flat
groups = vmexit nodefault

[i386]
file = hello.flat
arch = i386

[tcg]
file = hello.flat
accel = tcg

[checkno]
file = hello.flat
check = /nonexistent/param=Y

[missing]
file = absent.flat

[params]
file = hello.flat
qemu_params = -enable-kvm -cpu max,+vmx -m 64 -machine pit=off -accel kvm -device pc-testdev
extra_params = -device edu -device intel-iommu,intremap=on,eim=off -device intel-iommu,eim=on

[cpuflags]
file = hello.flat
qemu_params = -cpu qemu64,-x2apic,tsc_deadline=on,vendor=GenuineIntel
"""

EXPECT = {
    "pass": ("PASS", ""),
    "code1": ("FAIL", "exit 1"),
    "selfskip": ("SKIP", "skipped itself"),
    "abort": ("FAIL", "the test aborted"),
    "triple": ("FAIL", "vmm: triple fault (113)"),
    "hang": ("TIMEOUT", "after 1 s"),
    "nodef": ("SKIP", "nodefault group"),
    "i386": ("SKIP", "arch i386"),
    "tcg": ("SKIP", "accel tcg"),
    "checkno": ("SKIP", "check: /nonexistent/param absent"),
    "missing": ("SKIP", "not built: x86/absent.flat"),
    "params": ("PASS", "not applied: -cpu max,+vmx -machine pit=off "
               "-device intel-iommu,eim=on"),
    "cpuflags": ("PASS", "not applied: -cpu qemu64,vendor=GenuineIntel"),
}


def run(*args):
    p = subprocess.run([sys.executable, RUNNER, "--vmm", VMM] + list(args),
                       capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout, p.stderr


def table_checks(suite, plain_out):
    """kut_table.py on the table above, a --sysidle variant of it where
    section pass failed, and a made-up QEMU baseline."""
    plain = os.path.join(suite, "plain.txt")
    sysidle = os.path.join(suite, "sysidle.txt")
    base = os.path.join(suite, "baseline.txt")
    with open(plain, "w") as f:
        f.write(plain_out)
    with open(sysidle, "w") as f:
        f.write(re.sub(r"^PASS(\s+pass\s)", r"FAIL\1", plain_out,
                       flags=re.M))
    with open(base, "w") as f:
        f.write("# QEMU\npass PASS\ncode1 PASS\nh* TIMEOUT hangs here\n")
    p = subprocess.run([sys.executable, os.path.join(HERE, "kut_table.py"),
                        "--baseline", base, plain, sysidle],
                       capture_output=True, text=True, timeout=60)
    out = p.stdout
    check(p.returncode == 0 and
          "| pass | PASS | PASS | FAIL |" in out and
          "| hang | TIMEOUT (hangs here) | TIMEOUT | TIMEOUT |" in out and
          "| triple | – | FAIL | FAIL |" in out and
          "pass: QEMU here 2, vmm 3, vmm --sysidle 2, of 13 sections" in out
          and "QEMU passes, the VMM does not: pass, code1" in out and
          "plain and --sysidle differ: pass\n" in out,
          "kut_table: verdicts beside QEMU's (patterns), counts, the "
          "sections short of QEMU and those that differ with --sysidle",
          out + p.stderr)


def no_kvm_checks(suite):
    """Without /dev/kvm the runner runs no section and says so."""
    rc, out, err = run("--suite", suite)
    check(rc == 77 and out.startswith("# /dev/kvm not usable") and
          "skipped" in out and "PASS" not in out and "FAIL" not in out,
          "no /dev/kvm: exit 77, says so, no section run", out + err)
    with open(os.path.join(suite, "must.txt"), "w") as f:
        f.write("pass\n")
    rc, out, err = run("--suite", suite, "--expected",
                       os.path.join(suite, "must.txt"))
    check(rc == 0 and out == out.splitlines()[0] + "\n" and
          out.startswith("1..0 # SKIP /dev/kvm not usable"),
          "no /dev/kvm, TAP: a skip-all plan (1..0, SKIP) with the reason",
          out + err)
    skip("every section of the made-up suite", "/dev/kvm not usable")
    # kut_table.py needs no VM: the table the runner prints on a KVM host
    # (EXPECT, in its format) stands in for the run.
    table_checks(suite, "".join("%-7s %-28s %6.1f s  %s\n" % (v, n, 0.1, d)
                                for n, (v, d) in EXPECT.items()))


def section_checks(suite):
    """Every verdict of the runner on the made-up suite (needs KVM)."""
    rc, out, err = run("--suite", suite)
    for name, (verdict, detail) in EXPECT.items():
        m = re.search(r"^(\S+)\s+%s\s+[\d.]+ s  (.*)$" % re.escape(name),
                      out, re.M)
        check(m is not None and m.group(1) == verdict and
              detail in m.group(2),
              f"section {name}: {verdict} ({detail or 'exit 0'})", out + err)
    line = re.search(r"^PASS\s+params\s.*$", out, re.M)
    check(line is not None and line.group(0).endswith("eim=on") and
          "kvm" not in line.group(0),
          "section params: -enable-kvm and -accel kvm are what the VMM "
          "is, not listed as not applied", out)
    check(line is not None and "pc-testdev" not in line.group(0),
          "section params: -device pc-testdev is applied (the runner "
          "gives every section --device pc-testdev), not listed", out)
    check(line is not None and "edu" not in line.group(0) and
          "eim=off" not in line.group(0),
          "section params: -device edu and intel-iommu with the options "
          "the VMM models become --device (the guest still passes)", out)
    line = re.search(r"^PASS\s+cpuflags\s.*$", out, re.M)
    check(line is not None and line.group(0).endswith(
          "not applied: -cpu qemu64,vendor=GenuineIntel"),
          "section cpuflags: -x2apic and tsc_deadline=on go to the "
          "VMM's --cpu (which takes them), the rest is not applied",
          out)
    check(rc == 1 and "# kvm-unit-tests: 3 pass, 3 fail, 1 timeout, "
          "6 skip, of 13 sections" in out,
          "the whole table: exit 1 (failures), summary counts", out)
    table_checks(suite, out)
    with open(os.path.join(suite, "must.txt"), "w") as f:
        f.write("# must pass\npass\nnodef  # named: runs\n")
    rc, out, err = run("--suite", suite, "--expected",
                       os.path.join(suite, "must.txt"), "--sysidle")
    check(rc == 0 and out.startswith("1..2\n") and
          "ok 1 - pass --sysidle: PASS" in out and
          "ok 2 - nodef --sysidle: PASS" in out,
          "--expected: TAP, listed nodefault sections run, --sysidle "
          "passed on", out + err)
    with open(os.path.join(suite, "must.txt"), "a") as f:
        f.write("code1\nselfskip\n")
    rc, out, err = run("--suite", suite, "--expected",
                       os.path.join(suite, "must.txt"))
    check(rc == 1 and "not ok 3 - code1: FAIL" in out and
          "not ok 4 - selfskip: SKIP" in out,
          "--expected: a listed section that fails or skips fails", out)
    rc, out, err = run("--suite", suite, "--only", "pass,nosuch")
    check(rc == 1 and "no such section: nosuch" in err,
          "--only with an unknown section: exit 1, named", out + err)


def absent_suite_checks(suite):
    """No suite where it is said to be: skipped, saying so (no KVM needed:
    the suite is looked for first)."""
    rc, out, err = run("--suite", os.path.join(suite, "absent"))
    check(rc == 77 and "not found" in out and "skipped" in out,
          "no suite: exit 77, says it skipped", out + err)
    rc, out, err = run("--suite", os.path.join(suite, "absent"),
                       "--expected", os.path.join(suite, "must.txt"))
    check(rc == 0 and out.startswith("1..0 # SKIP kvm-unit-tests not "
                                     "found"),
          "no suite, TAP: a skip-all plan (1..0, SKIP) with the reason", out + err)


def main():
    with tempfile.TemporaryDirectory() as suite:
        x86 = os.path.join(suite, "x86")
        os.mkdir(x86)
        with open(os.path.join(x86, "unittests.cfg"), "w") as f:
            f.write(CFG)
        for g in ["hello", "triple", "spin"]:
            os.symlink(os.path.join(os.path.abspath(GUESTS), g + ".elf"),
                       os.path.join(x86, g + ".flat"))
        if not kvm_unusable():
            section_checks(suite)
        else:
            print("# /dev/kvm not usable: the sections are not run")
            no_kvm_checks(suite)
        absent_suite_checks(suite)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
