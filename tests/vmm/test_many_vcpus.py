#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""A guest of more than 255 vCPUs: x2APIC IDs above 255.

selftest.elf with 288 vCPUs in x2APIC mode brings up every CPU the MADT
describes (its x2APIC entries), checks each CPU's ID and logical ID and
sends physical and cluster-mode IPIs to them all; in xAPIC mode it leaves
out the CPUs an 8-bit destination cannot address alone and passes with the
rest. idle.elf with 288 vCPUs under --sysidle reaches full idle, stays there
without host wake-ups, and comes back from a serial byte (the checks of
test_sysidle.py's test_idle). --cpus above 255 with -x2apic is refused.

usage: test_many_vcpus.py VMM GUEST_DIR GUEST_TOOLS_DIR
Exit: 0 all passed, 1 a check failed, 77 skipped (no usable /dev/kvm, or
this host's KVM takes fewer vCPUs)."""
import fcntl
import os
import re
import sys
import tempfile
import time

import vmmtest
from vmmtest import check, tool

vmmtest.init(sys.argv)

CPUS = 288  # 18 x2APIC clusters of 16; IDs 255..287 in x2APIC entries
TIMEOUT = 240  # seconds, one boot: 288 vCPUs on a 2-CPU host


def selftest(mode):
    """selftest.elf with CPUS vCPUs in APIC mode @mode: exit 0, and the
    topology lines of that mode."""
    t0 = time.monotonic()
    rc, out, err = vmmtest.run(["--cpus", str(CPUS), "--append",
                                "apic=%s timeout=%d" % (mode, TIMEOUT - 20),
                                tool("selftest.elf")], timeout=TIMEOUT)
    bad = [line for line in out.splitlines() if line.startswith("FAIL")]
    check(rc == 0 and not bad, "selftest.elf, %d vCPUs, %s: exit 0 (%.1f s)"
          % (CPUS, mode, time.monotonic() - t0),
          "exit %s\n%s\n%s" % (rc, "\n".join(bad) or out[-3000:], err))
    want = [r"^ok - acpi: MADT found, %d enabled processor entries$" % CPUS]
    if mode == "x2apic":
        want += [r"^ok - cpus: x2APIC IDs up to %d all taken$" % (CPUS - 1),
                 r"^ok - smp: INIT/SIPI brought %d of %d cpus online$" %
                 (CPUS, CPUS),
                 r"^ok - cpu%d: lapic id %d \(x2apic; the MADT's %d\)$" %
                 ((CPUS - 1,) * 3),
                 r"^ok - cpu%d: x2apic ldr 0x%x " %
                 (CPUS - 1, ((CPUS - 1) >> 4) << 16 | 1 << ((CPUS - 1) & 15)),
                 r"^ok - ipi: fixed cpu0 -> cpu%d \(1\)" % (CPUS - 1),
                 r"^ok - ipi: logical \(x2apic cluster\) to %d clusters up to "
                 r"%d reached each of %d cpus once \(0 wrong\)$" %
                 (CPUS // 16, CPUS // 16 - 1, CPUS)]
    else:
        # IDs 255..287, and 1..31, whose 8-bit IDs 257..287 repeat (256
        # repeats the BSP's 0, which runs already)
        left = (CPUS - 255) + (CPUS - 257)
        want += [r"^ok - cpus: %d to bring up, %d beyond xAPIC's reach" %
                 (CPUS - left, left),
                 r"^ok - smp: INIT/SIPI brought %d of %d cpus online$" %
                 (CPUS - left, CPUS - left)]
    missing = [w for w in want if not re.search(w, out, re.M)]
    check(not missing, "selftest.elf, %d vCPUs, %s: the topology lines" %
          (CPUS, mode), "missing:\n" + "\n".join(missing))


def kvm_max_vcpus():
    """KVM_CHECK_EXTENSION(KVM_CAP_MAX_VCPUS) on /dev/kvm."""
    kvm_check_extension, kvm_cap_max_vcpus = 0xae03, 66
    fd = os.open("/dev/kvm", os.O_RDWR | os.O_CLOEXEC)
    try:
        return fcntl.ioctl(fd, kvm_check_extension, kvm_cap_max_vcpus)
    finally:
        os.close(fd)


def refused_without_x2apic():
    rc, out, err = vmmtest.run(["--cpus", "256", "--cpu", "-x2apic",
                                tool("idle.elf")], timeout=30)
    check(rc == 110 and "--cpus 256 needs x2APIC" in err,
          "--cpus 256 --cpu -x2apic: refused, exit 110", "exit %s: %s" %
          (rc, err))


def main():
    if not vmmtest.kvm_usable():
        print("1..0 # SKIP no usable /dev/kvm: the guests' own bring-up "
              "is what this tests")
        return 77
    for g in ("selftest.elf", "idle.elf"):
        if not os.path.exists(tool(g)):
            print("1..0 # SKIP %s is not built" % tool(g))
            return 77
    most = kvm_max_vcpus()
    if most < CPUS:
        print("1..0 # SKIP this host's KVM takes at most %d vCPUs" % most)
        return 77
    refused_without_x2apic()
    selftest("x2apic")
    if vmmtest.SANITIZED:
        vmmtest.skip("selftest.elf, %d vCPUs, xapic" % CPUS, "the guest "
                     "runtime's choice of CPUs; run in the plain build")
    else:
        selftest("xapic")
    import test_sysidle  # its test_idle, on this many vCPUs
    with tempfile.TemporaryDirectory() as tmp:
        test_sysidle.test_idle(tmp, CPUS, True)
    return vmmtest.finish()


if __name__ == "__main__":
    sys.exit(main())
