#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-only
"""sysidlectl against fake VMMs (tests/fake_vmm.py): a reply or a watch
line without end (more than its 1 MiB limit, CTL_MAX_LINE) makes it exit
1 soon, naming the line, the socket and the limit, having read a bounded
amount (what the peer could send before it closed); a peer that never
answers ends at --timeout.

usage: test_sysidlectl_peer.py SYSIDLECTL
(tests/ on PYTHONPATH, for tap.py and fake_vmm.py.) TAP on stdout; exit 0
when every check passes."""
import os
import subprocess
import sys
import tempfile
import time

from fake_vmm import FakeVmm
from tap import check, finish

CTL = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else None
LIMIT = 1 << 20
# what the peer may send before sysidlectl closes: the limit, one read
# past it, and the socket buffers
SENT_MAX = 4 << 20


def run(args, timeout):
    """sysidlectl @args: (exit status or None when it did not end within
    @timeout s (then killed), stderr, seconds)."""
    err = tempfile.TemporaryFile()
    t0 = time.monotonic()
    p = subprocess.Popen([CTL] + args, stdout=subprocess.DEVNULL,
                         stderr=err)
    end = t0 + timeout
    while True:
        pid, status = os.waitpid(p.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() > end:
            p.kill()
            os.waitpid(p.pid, 0)
            status = None
            break
        time.sleep(0.02)
    dt = time.monotonic() - t0
    p.returncode = 0        # reaped here
    err.seek(0)
    text = err.read().decode(errors="replace")
    err.close()
    rc = os.waitstatus_to_exitcode(status) if status is not None else None
    return rc, text, dt


def test_status(tmp):
    path = os.path.join(tmp, "endless.sock")
    f = FakeVmm(path)
    rc, err, dt = run(["--timeout", "10", "status", path], 15)
    f.close()
    want = "line 1 from %s: longer than %d bytes" % (path, LIMIT)
    check(rc == 1 and want in err and dt < 5,
          "status, a reply line without end: exit 1 in %.2f s naming the "
          "line, the socket, the limit" % dt, "exit %s: %s" % (rc, err))
    check(f.sent < SENT_MAX, "status, a reply line without end: sysidlectl "
          "read at most %d bytes before it closed (%d)" % (SENT_MAX, f.sent))


def test_watch(tmp):
    path = os.path.join(tmp, "watch.sock")
    f = FakeVmm(path, b'{"ok":true,"state":"NOT","since_unix_ms":0}\n'
                b'{"event":"state","from":"NOT","to":"SHORT"}\n')
    rc, err, dt = run(["watch", path], 15)
    f.close()
    want = "line 3 from %s: longer than %d bytes" % (path, LIMIT)
    check(rc == 1 and want in err and dt < 5,
          "watch, an event line without end: exit 1 in %.2f s naming the "
          "line, the socket, the limit" % dt, "exit %s: %s" % (rc, err))
    check(f.sent < SENT_MAX, "watch, an event line without end: sysidlectl "
          "read at most %d bytes before it closed (%d)" % (SENT_MAX, f.sent))


def test_stalled(tmp):
    path = os.path.join(tmp, "stalled.sock")
    f = FakeVmm(path, endless=False)
    rc, err, dt = run(["--timeout", "1", "status", path], 10)
    f.close()
    check(rc == 1 and "no reply within 1 s (timeout)" in err and
          0.9 < dt < 3, "status, a peer that never answers: exit 1 at "
          "--timeout 1 (%.2f s)" % dt, "exit %s: %s" % (rc, err))


def main():
    if not CTL or not os.access(CTL, os.X_OK):
        print("1..0 # SKIP sysidlectl is not built")
        return 77
    with tempfile.TemporaryDirectory() as tmp:
        test_status(tmp)
        test_watch(tmp)
        test_stalled(tmp)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
