#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""bench/density.py (make bench) runs: 2 idle VMs under --sysidle for a
2 s window; its last line has the documented shape, the setup's
context switches per second are near 0 (a fully idle VM wakes nobody) and
no VM it started is left behind.

usage: test_density_bench.py DENSITY_PY BUILD_DIR
Exit: 0 passed, 1 a check failed, 77 skipped (no usable /dev/kvm)."""
import os
import re
import subprocess
import sys

import vmmtest

LAST = re.compile(r"density: 2 VMs, sysidle (\d+\.\d) wake-ups/s "
                  r"(\d+\.\d) MiB/VM, qemu n/a")
MAX_WAKEUPS_S = 5.0  # 2 fully idle VMs: 0, a stray one at most


def still_there(pids):
    """The PIDs of @pids that still exist (a zombie included)."""
    return [p for p in pids if os.path.exists(f"/proc/{p}")]


def main():
    """Runs the benchmark once and checks its output; the caller passes
    bench/density.py and the build directory."""
    script, build = sys.argv[1], sys.argv[2]
    if not vmmtest.kvm_usable(say=False):
        print("# no usable /dev/kvm: density.py runs real VMs; skipped")
        return 77
    try:
        p = subprocess.run([sys.executable, script, "--build", build,
                            "--vms", "2", "--window", "2", "--settle", "2",
                            "--setups", "vmm-sysidle"],
                           capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        print("not ok: density.py still running after 120 s")
        return 1
    print(p.stdout + p.stderr)
    lines = p.stdout.strip().splitlines()
    m = LAST.fullmatch(lines[-1]) if lines else None
    if p.returncode != 0 or not m:
        print(f"not ok: exit {p.returncode}, last line not as documented")
        return 1
    if float(m.group(1)) > MAX_WAKEUPS_S:
        print(f"not ok: sysidle {m.group(1)} wake-ups/s, more than "
              f"{MAX_WAKEUPS_S} for 2 fully idle VMs")
        return 1
    started = [int(x) for l in re.findall(r"^# \S+: PIDs ([\d ]+)$",
                                          p.stderr, re.M) for x in l.split()]
    left = still_there(started)
    if len(started) != 2 or left:
        print(f"not ok: VMs started {started}, still there {left}")
        return 1
    print("ok: last line as documented, sysidle %s wake-ups/s" % m.group(1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
