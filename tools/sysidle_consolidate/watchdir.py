# SPDX-License-Identifier: GPL-2.0-only
"""A directory watched with inotify (through ctypes: the standard library
has no binding), so that a socket created or removed there is seen at
once and nothing is polled meanwhile.

DirWatch(path).fd is what to select() on; read() drains the events and
says whether any arrived. .active is False when inotify cannot be used or
the directory is not (or no longer) there: the caller then rescans on a
timer and calls rearm() to try again."""
import ctypes
import ctypes.util
import errno
import os

IN_NONBLOCK = os.O_NONBLOCK
IN_CLOEXEC = os.O_CLOEXEC
IN_MOVED_FROM = 0x40
IN_MOVED_TO = 0x80
IN_CREATE = 0x100
IN_DELETE = 0x200
IN_DELETE_SELF = 0x400
IN_IGNORED = 0x8000
MASK = IN_CREATE | IN_DELETE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE_SELF

_libc = None


def libc():
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6",
                            use_errno=True)
    return _libc


class DirWatch:
    """Watches @path; .error says why it is not active."""

    def __init__(self, path):
        self.path = path
        self.fd = None
        self.wd = None
        self.error = None
        try:
            fd = libc().inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        except (OSError, AttributeError) as e:
            self.error = "inotify: %s" % e
            return
        if fd < 0:
            self.error = "inotify_init1: %s" % os.strerror(ctypes.get_errno())
            return
        self.fd = fd
        self.rearm()

    @property
    def active(self):
        return self.fd is not None and self.wd is not None

    def rearm(self):
        """Adds the watch on the directory (again); True when it is on."""
        if self.fd is None:
            return False
        if self.wd is not None:
            return True
        wd = libc().inotify_add_watch(self.fd, os.fsencode(self.path), MASK)
        if wd < 0:
            self.error = "inotify_add_watch %s: %s" % (
                self.path, os.strerror(ctypes.get_errno()))
            return False
        self.wd = wd
        self.error = None
        return True

    def read(self):
        """Drains the pending events; True when any arrived. The directory
        removed: the watch is off (.active False)."""
        got = False
        while True:
            try:
                data = os.read(self.fd, 65536)
            except OSError as e:
                if e.errno in (errno.EAGAIN, errno.EWOULDBLOCK):
                    return got
                raise
            if not data:
                return got
            got = True
            i = 0
            while i + 16 <= len(data):
                mask = int.from_bytes(data[i + 4:i + 8], "little")
                size = int.from_bytes(data[i + 12:i + 16], "little")
                if mask & (IN_DELETE_SELF | IN_IGNORED):
                    self.wd = None
                i += 16 + size

    def close(self):
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
            self.wd = None
