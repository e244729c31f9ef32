# SPDX-License-Identifier: GPL-2.0-only
"""The journal: what this process did to VMs, on disk, so that a run
killed at any moment (SIGKILL included) leaves the next run enough to put
every VM back.

DIR/journal.json = {"version":1,"entries":{KEY: ENTRY}}, one entry per VM
that is packed or suspended (or was, while its restore is still retried):

  this VMM  "vmm:PID:STARTTIME" (STARTTIME: field 22 of /proc/PID/stat, so
            a reused PID is never taken for the VMM) -> {"kind":"vmm",
            "name","socket","pid","start","threads":{"TID":"CPU LIST"}
            (their original affinities),"packed","suspended","unix_ms"}
  libvirt   "libvirt:URI:UUID" -> {"kind":"libvirt","name","uri","uuid",
            "domid" (a new run of the domain has a new id),"vcpus":[LIST,
            ...],"emulator":LIST,"packed","suspended","unix_ms"}

Every change rewrites the file atomically: DIR/journal.json.tmp written
and fsynced, renamed over journal.json, the directory fsynced. A stale
.tmp (a crash between the two) is removed at start. DIR/lock is held with
flock for the life of the process: a second instance on the same DIR is
refused (JournalLocked).

A write that fails (ENOSPC, EIO, EROFS...) leaves journal.json as it was
and no .tmp; it is logged once with its cause (writefail.py) and tried
again at the next change and every writefail.RETRY_S (flush()) until one
works, which is logged. What must
survive a crash is journalled before it is done: put() returns False when
its entry could not be written, the entry is not kept, and the caller does
not act (a pack or a suspend is skipped, and logged). A drop() that cannot
be written stays pending (the file says a VM is held that no longer is:
the next start's reconciliation puts back what is already back), but a
journal left with no entries that cannot be written is removed (the same
state: no journal; unlink needs no room), so that at exit, every VM put
back, nothing is left claiming one held."""
import errno
import fcntl
import json
import os
import threading
import time

from . import steps
from .writefail import WriteHealth

NAME = "journal.json"
VERSION = 1


class JournalLocked(Exception):
    """Another process holds DIR/lock."""


class JournalError(Exception):
    """The state directory cannot be used; str() says why."""


def proc_start_time(pid):
    """Field 22 of /proc/PID/stat (the start time in clock ticks since
    boot) as an int, or None when the process does not exist."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            data = f.read()
    except OSError:
        return None
    # the command (field 2) is in parentheses and may hold anything
    rest = data[data.rfind(")") + 2:].split()
    try:
        return int(rest[22 - 3])
    except (IndexError, ValueError):
        return None


def vmm_key(pid, start):
    return "vmm:%d:%d" % (pid, start)


def libvirt_key(uri, uuid):
    return "libvirt:%s:%s" % (uri, uuid)


def same(a, b):
    """Two entries equal but for their unix_ms."""
    strip = (lambda e: {k: v for k, v in e.items() if k != "unix_ms"})
    return a is not None and b is not None and strip(a) == strip(b)


class Journal:
    """The journal in @directory (created mode 0700 with its parents).
    Raises JournalLocked when another process holds it, JournalError when
    it cannot be created or read."""
    enabled = True

    def __init__(self, directory, log=None, program="sysidle-consolidate"):
        self.dir = os.path.abspath(directory)
        self.lock = threading.Lock()     # put / drop from several threads
        self.path = os.path.join(self.dir, NAME)
        self.tmp = self.path + ".tmp"
        self.log = log
        self.writes = 0
        self.health = WriteHealth("journal", self.path, log)
        try:
            os.makedirs(self.dir, mode=0o700, exist_ok=True)
            self.lock_fd = os.open(os.path.join(self.dir, "lock"),
                                   os.O_RDWR | os.O_CREAT | os.O_CLOEXEC,
                                   0o600)
        except OSError as e:
            raise JournalError("state directory %s: %s" %
                               (self.dir, e.strerror))
        try:
            fcntl.flock(self.lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            os.close(self.lock_fd)
            if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise JournalLocked(
                    "state directory %s is in use by another "
                    "%s (%s/lock is locked)" %
                    (self.dir, program, self.dir))
            raise JournalError("%s/lock: %s" % (self.dir, e.strerror))
        try:
            os.unlink(self.tmp)
        except FileNotFoundError:
            pass
        except OSError as e:
            raise JournalError("%s: %s" % (self.tmp, e.strerror))
        self.entries = self.load()

    def load(self):
        """The entries on disk ({} when there is no journal)."""
        try:
            with open(self.path) as f:
                doc = json.load(f)
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as e:
            raise JournalError("%s cannot be read (%s): move it away to "
                               "start without it" % (self.path, e))
        if not isinstance(doc, dict) or doc.get("version") != VERSION or \
                not isinstance(doc.get("entries"), dict):
            raise JournalError("%s: not a version %d journal: move it away "
                               "to start without it" % (self.path, VERSION))
        return {k: v for k, v in doc["entries"].items()
                if isinstance(v, dict)}

    @property
    def error(self):
        """The cause of the failing writes, None while they work."""
        return self.health.error

    def put(self, key, entry):
        """Records @entry under @key, written at once (unless the same
        entry is already there and the file is current). Returns False
        when it could not be written: the entry is then not kept, and
        what it was to record must not be done."""
        with self.lock:
            old = self.entries.get(key)
            if same(old, entry) and not self.health.failing:
                return True
            self.entries[key] = dict(entry, unix_ms=int(time.time() * 1000))
            if self.write():
                return True
            if old is None:
                del self.entries[key]
            else:
                self.entries[key] = old
            return False

    def drop(self, key):
        """Drops @key's entry; False when that could not be written (it is
        retried by flush())."""
        with self.lock:
            if self.entries.pop(key, None) is not None or \
                    self.health.failing:
                return self.write()
            return True

    def flush(self):
        """Tries again a write that failed; True when the file is
        current."""
        with self.lock:
            return self.write() if self.health.failing else True

    def next_due(self):
        """The monotonic time of the next flush() due, None if current."""
        return self.health.next_due()

    def write(self):
        """The entries to disk, atomically (see the module's comment).
        Returns True when written; a failure is logged once until a write
        works again (then that is logged)."""
        try:
            self._write()
        except OSError as e:
            try:
                os.unlink(self.tmp)
            except OSError:
                pass
            self.health.failed(e)
            # no entries: no file says the same (still retried, so that
            # the recovery is seen)
            return not self.entries and self._remove()
        self.health.worked()
        return True

    def _remove(self):
        """No entries: journal.json removed, which says the same. True when
        it is gone."""
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
        except OSError:
            return False
        return True

    def _write(self):
        data = json.dumps({"version": VERSION, "entries": self.entries},
                          indent=1, sort_keys=True) + "\n"
        steps.step("journal write: %s (%d entries)" %
                   (self.tmp, len(self.entries)))
        fd = os.open(self.tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC |
                     os.O_CLOEXEC, 0o600)
        try:
            buf = data.encode()
            while buf:
                buf = buf[os.write(fd, buf):]
            os.fsync(fd)
        finally:
            os.close(fd)
        steps.step("journal rename: %s -> %s" % (self.tmp, self.path))
        os.rename(self.tmp, self.path)
        dfd = os.open(self.dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
        self.writes += 1

    def close(self):
        if self.lock_fd is not None:
            os.close(self.lock_fd)
            self.lock_fd = None


class NoJournal:
    """--state-dir none: nothing kept."""
    enabled = False
    dir = None

    def __init__(self):
        self.entries = {}

    error = None

    def put(self, key, entry):
        return True

    def drop(self, key):
        return True

    def flush(self):
        return True

    def next_due(self):
        return None

    def close(self):
        pass
