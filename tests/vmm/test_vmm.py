#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""Boots the VMM's bring-up guests, feeds it broken images, and checks each
message and exit status; boots guest-tools' selftest.elf with 1..64 vCPUs
in both APIC modes when it has been built. The command line's checks that
need no VM are test_usage.py's.

usage: test_vmm.py VMM GUEST_DIR GUEST_TOOLS_DIR
Exit: 0 all passed, 1 a check failed, 77 skipped (no usable /dev/kvm)."""
import json
import os
import re
import signal
import struct
import subprocess
import sys
import tempfile
import time

import vmmtest
from vmmtest import check, expect, kvm_usable, run

vmmtest.init(sys.argv)
VMM, GUESTS, TOOLS = vmmtest.VMM, vmmtest.GUESTS, vmmtest.TOOLS
RUN_TIMEOUT = 30          # seconds, any single run


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


def test_images(tmp):
    expect(["/nonexistent/k.elf"], 111, "cannot read kernel", "missing file")
    notelf = os.path.join(tmp, "notelf.elf")
    with open(notelf, "w") as f:
        f.write("this is not an ELF file\n" * 10)
    expect([notelf], 111, "is not an ELF file", "not an ELF")
    with open(guest("hello"), "rb") as f:
        img = f.read()
    for cut, msg in [(40, "truncated ELF header"),
                     (60, "truncated ELF program headers"),
                     (200, "truncated ELF segment")]:
        path = os.path.join(tmp, "trunc%d.elf" % cut)
        with open(path, "wb") as f:
            f.write(img[:cut])
        expect([path], 111, msg, "ELF cut at %d bytes" % cut)
    elf64 = os.path.join(tmp, "elf64.elf")
    with open(elf64, "wb") as f:
        f.write(img[:4] + b"\x02" + img[5:])
    expect([elf64], 111, "is not an ELF32 i386 image", "ELF64 header")
    expect([guest("nomb")], 111, "no multiboot header", "no multiboot header")
    # the first PT_LOAD moved onto the ACPI tables' area
    phoff, phentsize = struct.unpack_from("<I", img, 28)[0], \
        struct.unpack_from("<H", img, 42)[0]
    low = bytearray(img)
    for i in range(struct.unpack_from("<H", img, 44)[0]):
        off = phoff + i * phentsize
        if struct.unpack_from("<I", img, off)[0] == 1:  # PT_LOAD
            struct.pack_into("<II", low, off + 8, 0xf0000, 0xf0000)
            break
    path = os.path.join(tmp, "acpi-area.elf")
    with open(path, "wb") as f:
        f.write(bytes(low))
    expect([path], 111, "overlaps the ACPI tables' area",
           "kernel over the ACPI tables refused")
    expect(["--module", "/nonexistent/mod"], 110, "missing KERNEL",
           "module without kernel")
    expect(["--module", "/nonexistent/mod", guest("hello")], 111,
           "cannot read module", "missing module")
    # not regular files: refused at once, a FIFO's open never blocks
    fifo = os.path.join(tmp, "kernel.fifo")
    os.mkfifo(fifo)
    expect([fifo], 111, "is not a regular file", "a FIFO as the kernel",
           timeout=2)
    expect([tmp], 111, "is not a regular file", "a directory as the kernel",
           timeout=2)
    expect(["/dev/zero"], 111, "is not a regular file",
           "/dev/zero as the kernel", timeout=2)
    expect(["--module", fifo, guest("hello")], 111, "is not a regular file",
           "a FIFO as --module", timeout=2)


def test_guests(tmp):
    h = guest("hello")
    expect([h], 0, "", "hello exits 0", stdout_has="hello\n")
    expect(["--append", "exit=42", h], 42, "", "hello exit=42",
           stdout_has="hello\n")
    expect(["--append", "exit=7", "--cpus", "4", "--mem", "64M",
            "--module", h, h], 7, "", "hello, 4 vCPUs, 64M, a module")
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
    p = subprocess.Popen([VMM, guest("echo")], stdin=subprocess.PIPE,
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
        p = subprocess.Popen([VMM, "--cpus", "2", "--stats-json", stats,
                              guest("spin")], stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
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
    rc, out, err = run(["--stats-json", stats, "--append", "print=%d" % n,
                        h], timeout=120)
    want = "hello\n" + hello_lines(n)
    check(rc == 0 and out == want and stats_dropped(stats) == 0 and
          "dropped" not in err,
          "256 KB of guest output through a pipe that is read: byte-exact, "
          "0 dropped",
          "exit %s, %d of %d bytes, first difference at %s, dropped %s\n%s"
          % (rc, len(out), len(want),
             next((i for i, (a, b) in enumerate(zip(out, want)) if a != b),
                  min(len(out), len(want))), stats_dropped(stats), err))

    # stdout: a pipe nobody reads (kept open: writes block, no EPIPE);
    # the guest prints far more than the pipe and the buffer hold
    n = 200000
    want = "hello\n" + hello_lines(n)
    r, w = os.pipe()
    p = subprocess.Popen([VMM, "--stats-json", stats, "--append",
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
    p = subprocess.Popen([VMM] + args, stdin=stdin, stdout=subprocess.PIPE,
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

    idle = os.path.join(TOOLS, "idle.elf")
    if not os.path.exists(idle):
        print("# %s not built: idle check skipped" % idle)
        return
    p = start_until(["--cpus", "4", "--append", "hz=0", idle], b"cpus up")
    if p is None:
        check(False, "idle.elf hz=0 boots on 4 vCPUs")
        return
    used = cpu_used(p, 4, window=5)
    p.send_signal(signal.SIGTERM)
    rc, _, err = finish(p, 5)
    check(used is not None and used < 10000000 and rc == 143,
          "idle.elf hz=0, 4 vCPUs: %.2f ms of host CPU in 5 s, SIGTERM -> %s"
          % ((-1 if used is None else used) / 1e6, rc),
          err if isinstance(err, str) else err.decode())


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
        used = cpu_used(p, 2, window=2)
        p.send_signal(signal.SIGTERM)
        rc, _, err = finish(p, 5)
        check(used is not None and used < 10000000 and rc == 143,
              "asleep %s: %.2f ms of host CPU in 2 s, SIGTERM -> %s"
              % (" ".join(extra), (-1 if used is None else used) / 1e6, rc),
              err if isinstance(err, str) else err.decode())


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
    p = subprocess.Popen([VMM, "--control", "none", "--append", "seed=1",
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


def multiboot_variant(img, flags_or=0, byte_at=None):
    """@img with its multiboot header's flags or'ed with @flags_or (the
    checksum kept right), and/or bytes set at offsets (@byte_at: {off: v})."""
    out = bytearray(img)
    for off in range(0, min(len(img), 8192) - 11, 4):
        magic, flags, csum = struct.unpack_from("<III", img, off)
        if magic == 0x1BADB002 and (magic + flags + csum) & 0xffffffff == 0:
            flags |= flags_or
            struct.pack_into("<II", out, off + 4, flags,
                             (-(magic + flags)) & 0xffffffff)
            break
    for off, v in (byte_at or {}).items():
        out[off] = v
    return bytes(out)


def test_loader_spec(tmp):
    """The loader follows the Multiboot spec and reads headers first."""
    h = guest("hello")
    with open(h, "rb") as f:
        img = f.read()

    def image(name, data):
        path = os.path.join(tmp, name)
        with open(path, "wb") as f:
            f.write(data)
        return path

    for bit, what in [(2, "video mode (flag 2)"),
                      (3, "an undefined requirement (flag 3)"),
                      (15, "an undefined requirement (flag 15)")]:
        expect([image("mb-flag%d.elf" % bit,
                      multiboot_variant(img, 1 << bit))], 111,
               "requires what this loader does not provide",
               "multiboot header requiring %s: refused" % what)
    expect([image("mb-aout.elf", multiboot_variant(img, 1 << 16))], 111,
           "a.out kludge", "multiboot header asking for the a.out kludge "
           "(flag 16): refused")
    expect([image("mb-flag17.elf", multiboot_variant(img, 1 << 17))], 0, "",
           "an optional multiboot flag it does not know (17): runs",
           stdout_has="hello")
    expect([image("be.elf", multiboot_variant(img, byte_at={5: 2}))], 111,
           "(big-endian", "big-endian ELF header: refused")
    expect([image("x86-64.elf", multiboot_variant(img, byte_at={18: 62}))],
           111, "(ELF machine 62", "ELF32 for x86-64 (EM_X86_64): refused")
    expect([image("dyn.elf", multiboot_variant(img, byte_at={16: 3}))], 111,
           "is not an executable (ELF type 3)", "ELF of type ET_DYN: refused")

    # Headers first: a 1 TiB sparse file is judged by its first bytes, and
    # a kernel followed by 1 TiB of nothing loads, its segments only.
    big = os.path.join(tmp, "big-notelf.elf")
    with open(big, "wb") as f:
        f.write(b"not an ELF file\n")
        f.truncate(1 << 40)
    expect([big], 111, "is not an ELF file",
           "a 1 TiB file that is not ELF: refused from its header", timeout=5)
    with open(big, "wb") as f:
        f.write(img)
        f.truncate(1 << 40)
    expect([big], 0, "", "a kernel in a 1 TiB file: only its segments are "
           "read", stdout_has="hello", timeout=10)
    os.unlink(big)

    # A stop signal during loading ends it. Pending at the start (the
    # child starts with SIGTERM blocked, as a signal sent before the VMM
    # blocks it would be): the kernel is not loaded, the guest never runs.
    def blocked():
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    p = subprocess.Popen([VMM, h], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True,
                         preexec_fn=blocked)
    p.send_signal(signal.SIGTERM)
    rc, out, err = vmmtest.communicate(p, 10)
    check(rc == 143 and "stopped by SIGTERM while loading the kernel" in err
          and "hello" not in out,
          "SIGTERM pending when loading starts: exit 143 before the guest "
          "runs", "exit %s\nstdout: %s\nstderr: %s" % (rc, out, err))
    # In the middle of a 1 GiB module: acted on within a second.
    mod = os.path.join(tmp, "big.mod")
    with open(mod, "wb") as f:
        f.truncate(1 << 30)
    p = subprocess.Popen([VMM, "--mem", "1536M", "--module", mod, h],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)

    def rchar():
        try:
            with open("/proc/%d/io" % p.pid) as f:
                return next(int(l.split()[1]) for l in f
                            if l.startswith("rchar:"))
        except (OSError, StopIteration):
            return 0
    vmmtest.poll_until(lambda: rchar() >= 32 << 20 or p.poll() is not None,
                       10)
    sent = time.monotonic()
    p.send_signal(signal.SIGTERM)
    rc, out, err = vmmtest.communicate(p, 10)
    took = time.monotonic() - sent
    check(rc == 143 and "stopped by SIGTERM while loading the module" in err
          and took < 1.0,
          "SIGTERM while a 1 GiB module loads: exit 143 within 1 s "
          "(%.2f s)" % took, "exit %s\nstdout: %s\nstderr: %s"
          % (rc, out, err))
    os.unlink(mod)


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
    rc, out, err = run(["--config", c])
    check(rc == 0 and "hello" in out and os.path.exists(a),
          "--config: the kernel and options of the file (stats written to "
          "the file's --stats-json)", "exit %s\n%s%s" % (rc, out, err))
    os.unlink(a)
    c = conf("kernel = /nonexistent/k.elf\nstats-json = %s\n" % a)
    rc, out, err = run(["--config", c, "--stats-json", b, guest("hello")])
    check(rc == 0 and "hello" in out and os.path.exists(b) and
          not os.path.exists(a),
          "--config: the command line's kernel and --stats-json win",
          "exit %s\n%s%s" % (rc, out, err))


def main():
    if not os.path.exists(VMM):
        print("# %s missing" % VMM)
        return 1
    if not kvm_usable():
        return 77
    with tempfile.TemporaryDirectory() as tmp:
        test_options()
        test_config(tmp)
        test_images(tmp)
        test_loader_spec(tmp)
        test_guests(tmp)
        test_serial_output(tmp)
        test_halt(tmp)
        test_acpi()
        test_storm()
        test_stderr_blocked()
    vmmtest.selftest_boots([], "selftest.elf")
    return vmmtest.finish()


if __name__ == "__main__":
    sys.exit(main())
