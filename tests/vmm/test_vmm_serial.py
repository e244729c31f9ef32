#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""The serial port and halted vCPUs: the guest's output (hello.elf's
exactly, 256 KB byte-exact through a pipe that is read, and a stdout pipe
nobody reads: SIGTERM still ends the VMM within 1 s, the dropped bytes
counted exactly on stderr and in --stats-json); HLT blocks the vCPU
thread and stdin input wakes it through IRQ 4 (idle.elf hz=0 on 4 vCPUs
uses almost no host CPU); a stderr nobody reads does not block the VMM.

usage: test_vmm_serial.py VMM GUEST_DIR GUEST_TOOLS_DIR
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
from vmmtest import check, run

vmmtest.init(sys.argv)
GUESTS, TOOLS = vmmtest.GUESTS, vmmtest.TOOLS
from vmm_run_cost import (  # noqa: E402
    RUN_TIMEOUT, cpu_ns, cpu_used, finish, halted_cost, start_until,
    vcpus_blocked)


def guest(name):
    return os.path.join(GUESTS, name + ".elf")


def hello_lines(n):
    """The @n bytes hello.elf prints after "hello\n" with print=N."""
    return "".join("%010d" % i +
                   "".join(chr(97 + (i + j) % 26) for j in range(53)) + "\n"
                   for i in range(n // 64 + 1))[:n]


DROPPED = re.compile(r"^vmm: warning: serial: (\d+) bytes of guest output "
                     r"dropped: stdout was not being read$", re.M)


def stats_dropped(path):
    """serial_output_dropped in the --stats-json file @path; None if absent."""
    try:
        with open(path) as f:
            return json.load(f)["serial_output_dropped"]
    except (OSError, ValueError, KeyError):
        return None


def vcpu_settled(pid):
    """The one vCPU thread of @pid sleeps at four looks 50 ms apart."""
    for _ in range(4):
        if not vcpus_blocked(pid, 1):
            return False
        time.sleep(0.05)
    return True


def test_serial_output(tmp):
    """Guest output goes through a bounded buffer: kept intact through a
    pipe that is read, dropped and counted when stdout is not read, and
    never holding up a vCPU or the stop."""
    h = guest("hello")
    stats = os.path.join(tmp, "serial.json")
    rc, out, err = run([h])
    check(rc == 0 and out == "hello\n" and err == "",
          "hello: stdout is exactly 'hello\\n', stderr empty",
          "exit %s\nstdout: %r\nstderr: %s" % (rc, out, err))

    n = 256000  # four times the VMM's buffer
    what = ("256 KB of guest output through a pipe that is read: "
            "byte-exact, 0 dropped")
    if not vmmtest.scripted_skip(what + " (a scripted guest prints faster "
                                 "than the pipe drains)"):
        rc, out, err = run(["--stats-json", stats, "--append",
                            "print=%d" % n, h], timeout=120)
        want = "hello\n" + hello_lines(n)
        check(rc == 0 and out == want and stats_dropped(stats) == 0 and
              "dropped" not in err, what,
              "exit %s, %d of %d bytes, first difference at %s, dropped "
              "%s\n%s" % (rc, len(out), len(want),
                          next((i for i, (x, y) in enumerate(zip(out, want))
                                if x != y), min(len(out), len(want))),
                          stats_dropped(stats), err))

    # stdout: a pipe nobody reads (kept open: writes block, no EPIPE);
    # the guest prints far more than the pipe and the buffer hold
    n = 200000
    want = "hello\n" + hello_lines(n)
    r, w = os.pipe()
    p = vmmtest.popen(["--stats-json", stats, "--append",
                       "print=%d stay=1" % n, h],
                      stdin=subprocess.DEVNULL, stdout=w,
                      stderr=subprocess.PIPE, text=True)
    os.close(w)
    # the guest has printed it all and halts for good: its vCPU sleeps
    # (today's VMM: it sleeps too, blocked in write(); the stop then hangs)
    settled = vmmtest.poll_until(lambda: vcpu_settled(p.pid), RUN_TIMEOUT)
    t0 = time.monotonic()
    p.send_signal(signal.SIGTERM)
    rc, _, err = vmmtest.communicate(p, 5)
    dt = time.monotonic() - t0
    os.set_blocking(r, False)
    got = b""
    try:
        while True:
            d = os.read(r, 65536)
            if not d:
                break
            got += d
    except BlockingIOError:
        pass
    os.close(r)
    m = DROPPED.search(err or "")
    dropped = int(m.group(1)) if m else None
    check(settled is not None and rc == 143 and dt < 1.0,
          "stdout never read, the guest printed %d bytes and runs on: "
          "SIGTERM -> exit 143 in %.2f s" % (n, dt),
          "exit %s, vCPU settled %s\n%s" % (rc, settled, err))
    check(dropped is not None and dropped > 0 and
          DROPPED.findall(err) == [m.group(1)] and
          stats_dropped(stats) == dropped and
          len(got) + dropped == len(want) and
          want.encode().startswith(got),
          "... %s bytes dropped, reported once on stderr and in "
          "--stats-json; stdout got the %d bytes before them"
          % (dropped, len(got)),
          "stats %s, %d bytes in the pipe\n%s"
          % (stats_dropped(stats), len(got), err))


def test_halt(tmp):
    """HLT blocks the vCPU thread; stdin input wakes it through IRQ 4."""
    stats = os.path.join(tmp, "halt.json")
    p = start_until(["--stats-json", stats, guest("serialirq")], b"ready",
                    stdin=subprocess.PIPE)
    if p is None:
        check(False, "serialirq guest boots")
        return
    used = cpu_used(p, 1, window=2)
    p.stdin.write(b"6")
    p.stdin.flush()
    rc, out, err = finish(p)
    check(used is not None and used < 10000000,
          "halted vCPU blocks: %.2f ms of host CPU in 2 s"
          % ((-1 if used is None else used) / 1e6))
    try:
        with open(stats) as f:
            v = json.load(f)["vcpus"][0]
        ok = rc == 6 and v["hlt_exits"] >= 1 and \
            v["interrupts_injected"] >= 1 and v["halted_ns"] > 2000000000 \
            and v["exits_total"] < 100 and v["wakeups"] >= 1
        detail = "exit %s\n%s\n%s" % (rc, json.dumps(v), err)
    except (OSError, ValueError, KeyError, IndexError) as e:
        ok, detail = False, str(e)
    check(ok, "stdin byte raises IRQ 4 and wakes the halted guest", detail)


def test_halted_cost():
    """Four halted vCPUs cost the host (almost) nothing."""
    idle = os.path.join(TOOLS, "idle.elf")
    if not os.path.exists(idle):
        print("# %s not built: idle check skipped" % idle)
        return
    p = start_until(["--cpus", "4", "--append", "hz=0", idle], b"cpus up")
    if p is None:
        check(False, "idle.elf hz=0 boots on 4 vCPUs")
        return
    used, rc, err = halted_cost(p, 4, window=5)
    check(used is not None and used < 10000000 and rc == 143,
          "idle.elf hz=0, 4 vCPUs: %.2f ms of host CPU in 5 s, SIGTERM -> %s"
          % ((-1 if used is None else used) / 1e6, rc), err)


def test_stderr_blocked():
    """stdout and stderr one pipe, full before the VMM starts and never
    read (2>&1 into a paused pager): storm.elf's warnings from the vCPU
    threads are dropped, never waited for; the guest runs on and SIGTERM
    ends the VMM within a second."""
    r, w = os.pipe()
    os.set_blocking(w, False)
    try:
        while True:
            os.write(w, b"x" * 4096)
    except BlockingIOError:
        pass
    os.set_blocking(w, True)
    p = vmmtest.popen(["--control", "none", "--append", "seed=1",
                       guest("storm")], stdin=subprocess.DEVNULL,
                      stdout=w, stderr=w)
    os.close(w)
    ran = vmmtest.poll_until(lambda: cpu_ns(p.pid) >= 200000000 or
                             p.poll() is not None, 20)
    alive = p.poll() is None
    sent = time.monotonic()
    p.send_signal(signal.SIGTERM)
    try:
        rc = p.wait(5)
    except subprocess.TimeoutExpired:
        rc = None
        p.kill()
        p.wait()
    took = time.monotonic() - sent
    os.close(r)
    check(ran and alive and rc == 143 and took < 1.0,
          "stdout and stderr a full pipe nobody reads: storm.elf's warnings "
          "dropped, the guest runs (0.2 s of CPU), SIGTERM: exit 143 in "
          "%.2f s" % took, "ran %s alive %s exit %s" % (ran, alive, rc))


def main():
    skip = vmmtest.vm_or_skip()
    if skip:
        return skip
    with tempfile.TemporaryDirectory() as tmp:
        test_serial_output(tmp)
        if not vmmtest.scripted_skip("serialirq.elf's exit code, storm.elf's "
                                     "warnings"):
            test_halt(tmp)
        test_halted_cost()
        if not vmmtest.SCRIPTED:
            test_stderr_blocked()
    return vmmtest.finish()


if __name__ == "__main__":
    sys.exit(main())
