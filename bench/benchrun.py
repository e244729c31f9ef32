# SPDX-License-Identifier: GPL-2.0-only
"""A benchmark's bounded process runs: one VMM (or QEMU) process with its
stdout read against a deadline and its CPU time from its rusage (Run),
every run still live killed by kill_live() whatever ends the benchmark,
and the busy loops of a loaded host (start_load / stop_load)."""
import os
import select
import signal
import subprocess
import sys
import time


LIVE = set()  # Runs whose process may still be running


class Run:
    """One VMM process, its stdout read with a deadline."""

    def __init__(self, cmd, timeout):
        self.p = subprocess.Popen(cmd, stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE,
                                  start_new_session=True)
        LIVE.add(self)
        self.t0 = time.monotonic()
        self.deadline = self.t0 + timeout
        self.out = b""
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
