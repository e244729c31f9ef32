# SPDX-License-Identifier: GPL-2.0-only
"""A tiny file system to fill: the tests of what the programs do when a
write fails (ENOSPC, EROFS). The test re-runs itself in a private mount
namespace (reexec_private), where TinyFs mounts a small tmpfs that it fills
to get ENOSPC, frees, and remounts read-only for EROFS. Nothing mounted
there is seen outside the test's own process tree, and it is gone with it.

Needs root and unshare(1); reexec_private() says when they are missing
(the test then skips)."""
import errno
import os
import shutil
import subprocess
import sys

ENV = "SYSIDLE_TEST_PRIVATE_MOUNTS"


def reexec_private():
    """In the private mount namespace: returns None. Outside it: runs this
    script again inside one and exits with its status; returns why not
    when it cannot (not root, no unshare)."""
    if os.environ.get(ENV) == "1":
        return None
    if os.geteuid() != 0:
        return "needs root (a tmpfs mounted in a private mount namespace)"
    if not shutil.which("unshare"):
        return "needs unshare(1)"
    env = dict(os.environ, **{ENV: "1"})
    sys.stdout.flush()
    rc = subprocess.call(["unshare", "--mount", "--propagation", "private",
                          sys.executable] + sys.argv, env=env)
    sys.exit(rc)


class TinyFs:
    """A tmpfs of @kib KiB mounted on @path (created)."""

    def __init__(self, path, kib=64):
        self.path = path
        self.kib = kib
        self.filler = os.path.join(path, "filler")
        os.makedirs(path, exist_ok=True)
        subprocess.check_call(["mount", "-t", "tmpfs", "-o",
                               "size=%dk,mode=0755" % kib, "tiny", path])

    def fill(self):
        """Fills it to the last byte: the next write fails with ENOSPC."""
        fd = os.open(self.filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND,
                     0o600)
        try:
            block = b"\0" * 4096
            while True:
                try:
                    os.write(fd, block)
                except OSError as e:
                    if e.errno != errno.ENOSPC:
                        raise
                    if len(block) == 1:
                        break
                    block = block[:len(block) // 2]
        finally:
            os.close(fd)

    def free(self):
        """Undoes fill()."""
        try:
            os.unlink(self.filler)
        except FileNotFoundError:
            pass

    def read_only(self, ro=True):
        """Remounts it read-only (EROFS), or again read-write."""
        subprocess.check_call(["mount", "-o", "remount,%s" %
                               ("ro" if ro else "rw"), self.path])

    def litter(self):
        """The names in it but the filler's, sorted: a temporary file left
        behind is one."""
        return sorted(n for n in os.listdir(self.path) if n != "filler")

    def unmount(self):
        subprocess.call(["umount", "-l", self.path])
