#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""build/sysidle-libvirt on libvirt's test driver (bridge_replay.py): its
stop. A --stats-file FIFO without a writer and an endless one: SIGTERM
ends either in about a second; without --stats-file, libvirt's event loop
on its own thread stopped at SIGTERM; a libvirtd that never answers
(silent_libvirtd.py): SIGTERM ends the bridge after --stop-timeout, a
second signal at once, the metrics file left saying it is down.

usage: test_libvirt_bridge_stop.py SYSIDLE_LIBVIRT
TAP on stdout. Exit: 0 all passed, 1 a check failed, 77 skipped (libvirt's
test driver cannot be opened)."""
import os
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                ".."))
from tap import check  # noqa: E402
from procfs import blocks_signal, tasks  # noqa: E402
from silent_libvirtd import SilentLibvirtd  # noqa: E402
from bridge_replay import Bridge, main, poll_until  # noqa: E402


def sigterm_within(b, what, timeout=2.0):
    """SIGTERM @b (blocking it already: it waits on its signalfd); check
    that it exits 0 within @timeout s saying it stops."""
    t0 = time.monotonic()
    b.p.send_signal(signal.SIGTERM)
    rc = b.wait(timeout)
    dt = time.monotonic() - t0
    out = b.text()
    check(rc == 0 and "signal 15: stopping" in out,
          "%s: SIGTERM ends it, exit 0 in %.2f s (at most %g)" %
          (what, dt, timeout), "exit %s\n%s%s" % (rc, out, b.text("err")))


def test_stop_reading(tmp):
    """--stats-file: a FIFO without a writer does not block the start for
    ever, and an endless input (a FIFO's writer that never stops: as long
    as a file of any size) is read stoppably: SIGTERM ends either in
    about a second."""
    node = os.path.join(tmp, "node.xml")
    fifo = os.path.join(tmp, "stats.fifo")
    os.mkfifo(fifo)
    b = Bridge(tmp, "fifo-wait", ["--libvirt", "test://" + node,
                                  "--stats-file", fifo])
    ready = poll_until(lambda: blocks_signal(b.p.pid, signal.SIGTERM) and
                       [t for t in tasks(b.p.pid) if t[2] == "S"], 10)
    check(ready, "a FIFO without a writer: the bridge waits (asleep)",
          b.text("err"))
    sigterm_within(b, "a FIFO without a writer")

    b = Bridge(tmp, "fifo-endless", ["--libvirt", "test://" + node,
                                     "--stats-file", fifo])
    sent = [0]
    done = threading.Event()

    def writer():
        # comment lines of 60000 bytes, about 100 MB/s, until the reader
        # is gone (EPIPE) or the test ends
        line = b"#" + b"x" * 59998 + b"\n"
        try:
            with open(fifo, "wb", buffering=0) as f:
                while not done.is_set():
                    for _ in range(16):
                        f.write(line)
                        sent[0] += len(line)
                    time.sleep(0.01)
        except OSError:
            pass
    w = threading.Thread(target=writer, daemon=True)
    w.start()
    ready = poll_until(lambda: blocks_signal(b.p.pid, signal.SIGTERM) and
                       sent[0] > 8 << 20, 10)
    check(ready, "an endless --stats-file: the bridge reads it (%d bytes "
          "so far)" % sent[0], b.text("err"))
    sigterm_within(b, "reading an endless --stats-file")
    done.set()
    w.join(5)


def test_event_loop(tmp):
    """No --stats-file: the domain list through libvirt's lifecycle events
    (the event loop on a thread of its own), scanned for 1.5 s, then
    SIGTERM: exit 0, the loop thread stopped (under ThreadSanitizer: no
    report)."""
    node = os.path.join(tmp, "node.xml")
    b = Bridge(tmp, "events", ["--libvirt", "test://" + node, "--interval",
                               "50", "--source", "proc"])
    ready = poll_until(lambda: any(t[1] == "sysidle-events"
                                   for t in tasks(b.p.pid)), 10)
    time.sleep(1.5)     # a run of scans (what is checked is the end)
    t0 = time.monotonic()
    b.p.send_signal(signal.SIGTERM)
    rc = b.wait(10)
    err = b.text("err")
    check(ready and rc == 0 and time.monotonic() - t0 < 2 and
          "ThreadSanitizer" not in err and "signal 15: stopping" in b.text(),
          "without --stats-file: libvirt's event loop on its own thread "
          "(sysidle-events); SIGTERM: exit 0, no sanitizer report",
          "ready %s exit %s\n%s" % (ready, rc, err[-3000:]))


def test_stop_hung_libvirt(tmp):
    """A libvirt call that never returns (libvirtd hangs): SIGTERM still
    ends the bridge, after --stop-timeout, saying where it was; a second
    signal ends it at once."""
    for tag, extra, second, bound, says in [
            ("hung-timeout", ["--stop-timeout", "1"], None, 3.0,
             "the stop did not end within 1 s, in the middle of "
             "connecting to libvirt"),
            ("hung-twice", [], signal.SIGINT, 1.5,
             "signal 2 again, in the middle of connecting to libvirt")]:
        path = os.path.join(tmp, tag + ".sock")
        prom = os.path.join(tmp, tag + ".prom")
        lv = SilentLibvirtd(path)
        b = Bridge(tmp, tag, ["--libvirt", lv.uri, "--metrics-file", prom,
                              "--hooks", os.path.join(tmp, "no-hooks")] +
                   extra)
        asked = poll_until(lv.asked, 10)
        t0 = time.monotonic()
        b.p.send_signal(signal.SIGTERM)
        if second:
            time.sleep(0.2)
            b.p.send_signal(second)
        rc = b.wait(bound + 5)
        took = time.monotonic() - t0
        err = b.text("err")
        lv.close()
        check(asked and rc == 3 and took < bound and says in err and
              "lease runs out" in err and err.count("\n") == 1,
              "libvirtd silent, the bridge waiting in its connect: %s "
              "ends it with exit 3 in %.1f s (bound %.1f), one warning "
              "saying where it was" %
              ("SIGTERM and --stop-timeout 1" if not second else
               "a second signal", took, bound),
              "asked %s, exit %s\n%s" % (asked, rc, err))
        try:
            with open(prom) as f:
                left = f.read()
        except OSError as e:
            left = str(e)
        samples = [l for l in left.splitlines() if not l.startswith("#")]
        check(samples == ["sysidle_libvirt_up 0"] and not [
              n for n in os.listdir(tmp) if n.startswith(tag + ".prom.")],
              "%s: the metrics file left says sysidle_libvirt_up 0 and "
              "nothing else, no temporary file beside it" % tag, left)


if __name__ == "__main__":
    sys.exit(main([test_stop_reading, test_event_loop,
                   test_stop_hung_libvirt]))
