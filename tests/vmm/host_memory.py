# SPDX-License-Identifier: GPL-2.0-only
"""The host's memory as test_idle_memory.py sets it up and reads it: a swap
file of its own (SwapFile: created, switched on, and always switched off
and removed), a cgroup v1 memory cgroup of its own below the test's
(MemCgroup: a limit, its usage, removed at the end), a process's RssAnon
and VmRSS, the swap areas on, and the guest RAM's mapping in a VMM (the
anonymous mapping of its size in /proc/PID/maps that holds what the guest
wrote), read and written through /proc/PID/mem. Every one needs root."""
import os
import re
import subprocess
import time

MIB = 1 << 20
CGROUP_V1_MEMORY = "/sys/fs/cgroup/memory"


def swaps():
    """The swap areas on: [(path, size_kib, used_kib)] from /proc/swaps."""
    out = []
    with open("/proc/swaps") as f:
        for line in f.read().splitlines()[1:]:
            p = line.split()
            if len(p) >= 4:
                out.append((p[0], int(p[2]), int(p[3])))
    return out


def proc_status_kib(pid, key):
    """The @key line (VmRSS, RssAnon, ...) of /proc/@pid/status, KiB;
    None when the process or the line is gone."""
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


class SwapFile:
    """A swap file of @mib MiB in the first of @dirs where swapon takes
    it. .path is None, and .why says why, when none did. stop() switches
    it off and removes it (also when swapon failed half-way)."""

    def __init__(self, dirs, mib, tag):
        self.path = None
        self.why = "no directory to try"
        for d in dirs:
            # absolute: /proc/swaps names it so
            path = os.path.join(os.path.abspath(d),
                                ".%s-%d.swap" % (tag, os.getpid()))
            why = self._try(path, mib)
            if why is None:
                self.path = path
                return
            self.why = "%s: %s" % (path, why)

    @staticmethod
    def _run(args):
        """None when @args ran and exited 0, else what it said."""
        try:
            r = subprocess.run(args, capture_output=True, text=True,
                               timeout=60)
        except (OSError, subprocess.TimeoutExpired) as e:
            return str(e)
        if r.returncode:
            return (r.stderr or r.stdout).strip() or \
                "exit %d" % r.returncode
        return None

    def _try(self, path, mib):
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                os.posix_fallocate(fd, 0, mib * MIB)
            finally:
                os.close(fd)
        except OSError as e:
            self._remove(path)
            return "cannot create it: %s" % e
        why = self._run(["mkswap", path]) or self._run(["swapon", path])
        if why:
            self._remove(path)
        return why

    @staticmethod
    def _remove(path):
        try:
            os.unlink(path)
        except OSError:
            pass

    def used_kib(self):
        """KiB of it in use (its /proc/swaps line), None when not on."""
        for p, _, used in swaps():
            if p == self.path:
                return used
        return None

    def stop(self):
        """swapoff (which reads back what it holds: bounded) and rm; the
        path stays set, and said, when swapoff fails (an active swap file
        cannot be removed)."""
        if self.path is None:
            return
        why = self._run(["swapoff", self.path])
        if why and self.used_kib() is not None:
            print("# swapoff %s: %s: left on" % (self.path, why))
            return
        self._remove(self.path)
        self.path = None


def own_memory_cgroup():
    """The directory of this process's cgroup v1 memory cgroup, or None
    when there is no v1 memory controller."""
    try:
        with open("/proc/self/cgroup") as f:
            for line in f:
                _, ctrl, path = line.rstrip("\n").split(":", 2)
                if "memory" in ctrl.split(","):
                    d = CGROUP_V1_MEMORY + path
                    if os.path.isfile(os.path.join(d,
                                                   "memory.limit_in_bytes")):
                        return d
    except OSError:
        pass
    return None


class MemCgroup:
    """A cgroup v1 memory cgroup below this process's own: .path, or None
    with .why. A process joins it with join (as a preexec_fn); remove()
    takes it away once its processes are gone (bounded retries)."""

    def __init__(self, tag):
        self.path = None
        base = own_memory_cgroup()
        if base is None:
            self.why = "no cgroup v1 memory controller"
            return
        path = os.path.join(base, "%s-%d" % (tag, os.getpid()))
        try:
            os.mkdir(path)
        except OSError as e:
            self.why = "mkdir %s: %s" % (path, e)
            return
        self.path = path

    def _file(self, name):
        return os.path.join(self.path, name)

    def join(self):
        """In a child before exec: move itself into the cgroup."""
        with open(self._file("cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))

    def usage(self):
        with open(self._file("memory.usage_in_bytes")) as f:
            return int(f.read())

    def set_limit(self, limit):
        """Writes memory.limit_in_bytes (-1: none); the kernel reclaims
        down to it first. None, or the OSError's text (EBUSY: it could
        not reclaim that much)."""
        try:
            with open(self._file("memory.limit_in_bytes"), "w") as f:
                f.write(str(limit))
        except OSError as e:
            return str(e)
        return None

    def remove(self):
        if self.path is None:
            return
        end = time.monotonic() + 10
        while True:
            try:
                os.rmdir(self.path)
                break
            except OSError as e:
                if time.monotonic() > end:
                    print("# rmdir %s: %s" % (self.path, e))
                    break
                time.sleep(0.05)
        self.path = None


def guest_ram_address(pid, ram_bytes, probe):
    """The start of the VMM's guest RAM: among its private anonymous
    read-write mappings of exactly @ram_bytes in /proc/@pid/maps (a
    sanitizer's shadow may be another), the one where @probe(read) holds,
    read(offset, n) reading its bytes; None when not exactly one."""
    found = []
    with open("/proc/%d/maps" % pid) as f:
        for line in f:
            m = re.match(r"([0-9a-f]+)-([0-9a-f]+) rw-p 00000000 00:00 0\s*$",
                         line)
            if m and int(m.group(2), 16) - int(m.group(1), 16) == ram_bytes:
                start = int(m.group(1), 16)
                if probe(lambda off, n, a=start: peek(pid, a + off, n)):
                    found.append(start)
    return found[0] if len(found) == 1 else None


def peek(pid, address, n):
    """@n bytes at @address of process @pid (/proc/PID/mem)."""
    fd = os.open("/proc/%d/mem" % pid, os.O_RDONLY)
    try:
        return os.pread(fd, n, address)
    finally:
        os.close(fd)


def poke(pid, address, data):
    """Writes @data at @address of process @pid (/proc/PID/mem)."""
    fd = os.open("/proc/%d/mem" % pid, os.O_RDWR)
    try:
        os.pwrite(fd, data, address)
    finally:
        os.close(fd)
