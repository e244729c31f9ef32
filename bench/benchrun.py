# SPDX-License-Identifier: GPL-2.0-only
"""A benchmark's bounded process runs: one VMM (or QEMU) process with its
stdout read against a deadline and its CPU time from its rusage (Run),
the lines awaited from many runs at once (read_until_all), every run still
live killed by kill_live() whatever ends the benchmark, the busy loops of a
loaded host (start_load / stop_load), and the command lines of idle.elf
under this VMM's setups and under QEMU (idle_guest_setups)."""
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import time


LIVE = set()  # Runs whose process may still be running


class Run:
    """One VMM process, its stdout read with a deadline."""

    def __init__(self, cmd, timeout, stderr=subprocess.PIPE):
        """Starts @cmd in a session of its own, @timeout s to run;
        @stderr is where its stderr goes: a pipe read by finish(), or an
        open file for runs that end with kill(), never finished."""
        self.p = subprocess.Popen(cmd, stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE,
                                  stderr=stderr,
                                  start_new_session=True)
        LIVE.add(self)
        self.t0 = time.monotonic()
        self.deadline = self.t0 + timeout
        self.out = b""
        self.eof = False  # its stdout closed (read_until_all)
        self.hung = False
        self.cpu_s = 0.0  # user + sys of the process, all its threads
        self.wall_s = 0.0

    def left(self):
        return self.deadline - time.monotonic()

    def read_until(self, pattern):
        """Read stdout until pattern (bytes) is in it; False on EOF/hang."""
        fd = self.p.stdout.fileno()
        while pattern not in self.out:
            left = self.left()
            if left <= 0:
                self.hung = True
                return False
            r, _, _ = select.select([fd], [], [], left)
            if r:
                chunk = os.read(fd, 65536)
                if not chunk:
                    return False
                self.out += chunk
        return True

    def send(self, data):
        """False when the VMM is gone (its stdin closed)."""
        try:
            os.write(self.p.stdin.fileno(), data)
            return True
        except OSError:
            return False

    def signal(self, sig):
        try:
            os.kill(self.p.pid, sig)
        except ProcessLookupError:
            pass

    def kill(self, timeout=30):
        """SIGKILL the run's process group (its own session) and reap it;
        RuntimeError when it is still there after @timeout s (a process
        stuck in the kernel). Returns the exit status."""
        try:
            os.killpg(self.p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            self.p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"PID {self.p.pid} still there {timeout} s "
                               "after SIGKILL") from None
        LIVE.discard(self)
        for f in (self.p.stdin, self.p.stdout, self.p.stderr):
            if f:
                f.close()
        return self.p.returncode

    def finish(self):
        """Wait for the exit within the deadline (else SIGKILL: hung);
        returns (exit status or None, stdout, stderr). The output is read
        here, not with communicate(), so that the process is reaped by
        wait4 and its rusage is the CPU time the run burnt."""
        self.p.stdin.close()
        err = b""
        fds = {self.p.stdout.fileno(): "out", self.p.stderr.fileno(): "err"}
        while fds:
            left = self.left()
            if left <= 0 and not self.hung:
                self.hung = True
                try:
                    os.killpg(self.p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            r, _, _ = select.select(list(fds), [], [],
                                    max(left, 0.01) if not self.hung else 5)
            if not r and self.hung:
                break  # killed, and still no EOF: give up on the output
            for fd in r:
                chunk = os.read(fd, 65536)
                if not chunk:
                    del fds[fd]
                elif fds[fd] == "out":
                    self.out += chunk
                else:
                    err += chunk
        if self.hung:
            try:
                os.killpg(self.p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        _, status, ru = os.wait4(self.p.pid, 0)
        self.p.returncode = os.waitstatus_to_exitcode(status)
        self.cpu_s = ru.ru_utime + ru.ru_stime
        self.wall_s = time.monotonic() - self.t0
        self.p.stdout.close()
        self.p.stderr.close()
        LIVE.discard(self)
        return (None if self.hung else self.p.returncode,
                self.out.decode(errors="replace"),
                err.decode(errors="replace"))


def read_until_all(runs, regex, deadline, progress=None, every=10.0):
    """Reads the stdout of every run in @runs until @regex (compiled, on
    bytes) matches what each printed after this call began, or its EOF, or
    time.monotonic() reaches @deadline. Returns {run: (monotonic time the
    match was read, match)} for the runs that printed it; the others are
    missing. @progress(seconds waited, runs matched) is called every
    @every s while waiting. The caller must not read these stdouts
    meanwhile."""
    start = {r: len(r.out) for r in runs}
    fds = {r.p.stdout.fileno(): r for r in runs}
    found = {}
    t0 = last = time.monotonic()
    while fds:
        now = time.monotonic()
        if now >= deadline:
            break
        if progress and now - last >= every:
            progress(now - t0, len(found))
            last = now
        ready, _, _ = select.select(list(fds), [], [],
                                    min(deadline - now, every))
        for fd in ready:
            run = fds[fd]
            chunk = os.read(fd, 65536)
            if not chunk:
                run.eof = True  # it exits
                del fds[fd]
                continue
            run.out += chunk
            m = regex.search(run.out, start[run])
            if m:
                found[run] = (time.monotonic(), m)
                del fds[fd]
    return found


def kill_live():
    """Each guest runs in its own session: nothing else would stop it."""
    for r in list(LIVE):
        try:
            os.killpg(r.p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        r.p.wait()
    LIVE.clear()


LOAD = []  # the --load busy loops


def start_load(n):
    for _ in range(n):
        LOAD.append(subprocess.Popen(
            [sys.executable, "-c", "while True: pass"],
            stdin=subprocess.DEVNULL, start_new_session=True))


def stop_load():
    for p in LOAD:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait()
    LOAD.clear()


def idle_guest_setups(build, image, mem_mib):
    """The setups that run @image (idle.elf) as {name: cmd(ncpus, append)
    -> argv}: this VMM plain (vmm), --sysidle (vmm-sysidle), --sysidle
    with each --lapic-tick-policy (vmm-catchup, vmm-discard), and where
    qemu-system-x86_64 is on PATH QEMU/KVM with the in-kernel and the
    userspace LAPIC (qemu-irqchip-on, qemu-irqchip-off), and q35 with the
    IOAPIC in userspace and interrupt remapping, as QEMU takes more than
    255 vCPUs (qemu-q35-split); @mem_mib MiB of
    guest RAM each, the serial port on stdin/stdout, no control socket
    (these runs end with SIGKILL, which would leave stale sockets)."""
    vmm = os.path.join(build, "vmm")
    mem = str(mem_mib)
    out = {}
    for name, extra in (("vmm", []), ("vmm-sysidle", ["--sysidle"]),
                        ("vmm-catchup", ["--sysidle", "--lapic-tick-policy",
                                         "catchup"]),
                        ("vmm-discard", ["--sysidle", "--lapic-tick-policy",
                                         "discard"])):
        out[name] = lambda n, app, e=extra: [
            vmm, "--control", "none", "--mem", mem + "M"] + e + [
            "--cpus", str(n), "--append", app, image]
    qemu = shutil.which("qemu-system-x86_64")
    if qemu:
        def q(n, app, chip, cpu, machine="pc", extra=()):
            return [qemu, "-enable-kvm", "-smp", str(n), "-m", mem,
                    "-machine", f"{machine},kernel-irqchip={chip}",
                    "-cpu", cpu, "-kernel", image, "-append", app,
                    "-device", "isa-debug-exit,iobase=0xf4,iosize=4",
                    "-display", "none", "-serial", "stdio", "-nodefaults",
                    "-no-reboot"] + list(extra)
        out["qemu-irqchip-on"] = lambda n, app: q(
            n, app, "on", "host,-arch-capabilities")
        out["qemu-irqchip-off"] = lambda n, app: q(
            n, app, "off", "host,kvm-asyncpf-int=off,-arch-capabilities")
        # What QEMU needs for more than 255 vCPUs: q35, the IOAPIC in
        # userspace and an IOMMU remapping interrupts in x2APIC mode.
        out["qemu-q35-split"] = lambda n, app: q(
            n, app, "split", "host,-arch-capabilities", "q35",
            ["-device", "intel-iommu,intremap=on,eim=on"])
    return out


def vm_status(path, timeout=2.0):
    """The "vm" object of a status request to the VMM's control socket at
    @path, on a connection of its own; None when there is no socket, no
    whole reply line within @timeout seconds, or an error reply."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.settimeout(timeout)
        s.connect(path)
        s.sendall(b'{"cmd":"status"}\n')
        buf = b""
        while b"\n" not in buf:
            d = s.recv(65536)
            if not d:
                return None
            buf += d
        r = json.loads(buf.split(b"\n", 1)[0])
        return r["vm"] if isinstance(r, dict) and r.get("ok") else None
    except (OSError, ValueError, KeyError):
        return None
    finally:
        s.close()
