#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-only
"""sysidle-consolidate's control-socket client (sysidle_consolidate/
control.py) against fake VMMs: a peer that sends an endless line without a
newline ends a request or a watch with an error naming the socket, the
line and the limit (control.MAX_LINE), soon and with bounded memory; a
peer that never answers ends a request at its timeout.

The client runs in a child python3 (so that its memory is its own): it
prints one line, the outcome, then its peak RSS in KiB (VmHWM: of its own
memory since it started).

usage: test_consolidate_control.py TOOLS_DIR
(the package is imported through PYTHONPATH: TOOLS_DIR and tests/, for
tap.py.) TAP on stdout; exit 0 when every check passes."""
import os
import subprocess
import sys
import tempfile
import time

from fake_vmm import FakeVmm
from tap import check, finish

from sysidle_consolidate import control

LIMIT = 1 << 20     # control.MAX_LINE, the same as sysidlectl's CTL_MAX_LINE
CHILD_HWM = '''
print([l.split()[1] for l in open("/proc/self/status")
       if l.startswith("VmHWM:")][0])
'''

CHILD_REQUEST = r'''
import sys
from sysidle_consolidate import control
try:
    r = control.request(sys.argv[1], {"cmd": "status"}, timeout=4.0)
    print("reply %r" % (r,))
except Exception as e:
    print("%s: %s" % (type(e).__name__, e))
''' + CHILD_HWM

CHILD_WATCH = r'''
import select, sys, time
from sysidle_consolidate import control
w = control.open_watch(sys.argv[1])
end = time.monotonic() + 8
n = 0
try:
    while time.monotonic() < end:
        select.select([w], [], [], 0.2)
        n += len(w.read())
    print("no error after 8 s (%d lines)" % n)
except control.Closed as e:
    print("Closed: %s (%d lines before)" % (e, n))
''' + CHILD_HWM


def run_child(code, path, timeout):
    """The child's (outcome line, peak RSS KiB, seconds), or (why, None,
    seconds) when it did not end within @timeout."""
    t0 = time.monotonic()
    try:
        p = subprocess.run([sys.executable, "-c", code, path],
                           capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return "did not end within %g s" % timeout, None, timeout
    dt = time.monotonic() - t0
    lines = p.stdout.strip().splitlines()
    if p.returncode != 0 or len(lines) != 2:
        return "exit %d: %s%s" % (p.returncode, p.stdout, p.stderr), None, dt
    return lines[0], int(lines[1]), dt


def baseline_rss():
    """The peak RSS of a child that imports the package and does nothing."""
    p = subprocess.run([sys.executable, "-c", "from sysidle_consolidate "
                        "import control\n" + CHILD_HWM], capture_output=True,
                       text=True)
    return int(p.stdout)


def test_request(tmp, base):
    path = os.path.join(tmp, "endless.sock")
    f = FakeVmm(path)
    out, rss, dt = run_child(CHILD_REQUEST, path, 15)
    f.close()
    want = "ValueError: %s: line 1 (the reply): longer than %d bytes" % (
        path, LIMIT)
    check(out == want and dt < 4,
          "request, a reply line without end: refused in %.2f s naming "
          "the socket, the line, the limit" % dt, "%r, want %r" % (out, want))
    check(rss is not None and rss - base < 16 * 1024,
          "request, a reply line without end: memory bounded (peak %s KiB, "
          "%d KiB more than importing the package)" %
          (rss, (rss or 0) - base), "peer sent %d bytes" % f.sent)


def test_watch(tmp, base):
    path = os.path.join(tmp, "watch.sock")
    f = FakeVmm(path, b'{"ok":true,"state":"NOT"}\n'
                b'{"event":"state","from":"NOT","to":"SHORT"}\n')
    out, rss, dt = run_child(CHILD_WATCH, path, 20)
    f.close()
    want = "Closed: %s: line 3: longer than %d bytes (2 lines before)" % (
        path, LIMIT)
    check(out == want and dt < 4,
          "watch, an event line without end: closed in %.2f s naming the "
          "socket, the line, the limit" % dt, "%r, want %r" % (out, want))
    check(rss is not None and rss - base < 16 * 1024,
          "watch, an event line without end: memory bounded (peak %s KiB, "
          "%d KiB more than importing the package)" %
          (rss, (rss or 0) - base), "peer sent %d bytes" % f.sent)


def test_stalled(tmp):
    path = os.path.join(tmp, "stalled.sock")
    f = FakeVmm(path, endless=False)
    out, rss, dt = run_child(CHILD_REQUEST, path, 15)
    f.close()
    check(out.startswith("TimeoutError") and 3.5 < dt < 7,
          "request, a peer that never answers: its 4 s timeout (%.2f s)" % dt,
          out)


def main():
    check(getattr(control, "MAX_LINE", None) == LIMIT,
          "control.MAX_LINE is 1 MiB, as sysidlectl's limit",
          repr(getattr(control, "MAX_LINE", None)))
    base = baseline_rss()
    with tempfile.TemporaryDirectory() as tmp:
        test_request(tmp, base)
        test_watch(tmp, base)
        test_stalled(tmp)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
