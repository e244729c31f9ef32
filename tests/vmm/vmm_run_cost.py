# SPDX-License-Identifier: GPL-2.0-only
"""A VMM run as test_vmm.py and test_vmm_serial.py measure it: started
until its guest printed a marker (start_until) and waited for (finish),
its vCPU threads asleep (vcpus_blocked), and the host CPU time of all its
threads (cpu_ns), over a window once every vCPU thread has blocked
(cpu_used), and that measure followed by a SIGTERM (halted_cost).
Imported after vmmtest.init(sys.argv)."""
import os
import signal
import subprocess
import time

import vmmtest

RUN_TIMEOUT = 30          # seconds, any single run


def cpu_ns(pid):
    """Host CPU time of every thread of @pid, in ns (schedstat)."""
    total = 0
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/schedstat" % (pid, tid)) as f:
                total += int(f.read().split()[0])
        except OSError:
            pass
    return total


def start_until(args, marker, stdin=subprocess.DEVNULL):
    """Starts the VMM and reads stdout up to the line holding @marker;
    returns the process, or None (killed) if it never comes."""
    p = vmmtest.popen(args, stdin=stdin, stdout=subprocess.PIPE,
                      stderr=subprocess.PIPE)
    deadline = time.monotonic() + RUN_TIMEOUT
    os.set_blocking(p.stdout.fileno(), True)
    while time.monotonic() < deadline:
        line = p.stdout.readline()
        if not line:
            break
        if marker in line:
            return p
    p.kill()
    p.communicate()
    return None


def finish(p, timeout=RUN_TIMEOUT):
    return vmmtest.communicate(p, timeout)


def vcpus_blocked(pid, ncpus):
    """True when the @ncpus vCPU threads of @pid (vmm-vcpuN) all sleep."""
    vcpus = [st for _, name, st in vmmtest.tasks(pid)
             if name.startswith("vmm-vcpu")]
    return len(vcpus) == ncpus and all(st in "SD" for st in vcpus)


def cpu_used(p, ncpus, window):
    """Host CPU time (ns, all threads) @p uses in @window seconds, measured
    once it has reached its steady state after boot: every vCPU thread
    blocked (polled, bounded: a loaded host may take a while to run the
    guest up to its HLT; two looks in a row, 50 ms apart). None if that
    never comes."""
    if vmmtest.poll_until(lambda: vcpus_blocked(p.pid, ncpus) and
                          (time.sleep(0.05) or
                           vcpus_blocked(p.pid, ncpus)), 20) is None:
        return None
    c0 = cpu_ns(p.pid)
    time.sleep(window)  # the measurement window itself
    return cpu_ns(p.pid) - c0


def halted_cost(p, ncpus, window):
    """@p's host CPU time in @window seconds once its @ncpus vCPUs are all
    blocked (cpu_used), then SIGTERM: (ns or None, exit status, stderr)."""
    used = cpu_used(p, ncpus, window)
    p.send_signal(signal.SIGTERM)
    rc, _, err = finish(p, 5)
    return used, rc, err if isinstance(err, str) else err.decode()
