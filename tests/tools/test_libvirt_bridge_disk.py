#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""build/sysidle-libvirt on libvirt's test driver (bridge_replay.py), its
--metrics-file on a 64 KiB tmpfs (a private mount namespace:
tests/tiny_fs.py) filled for ENOSPC and remounted read-only for EROFS
(tools/libvirt-bridge/README.md, "Files written, and what happens when a
write fails"): each failure warned once with its cause, no temporary file
left, the write tried again after each scan and its recovery said once, the
failures counted in the file; SIGTERM with the disk full: the file that
claims the domains' states is removed.

usage: test_libvirt_bridge_disk.py SYSIDLE_LIBVIRT
TAP on stdout. Exit: 0 all passed, 1 a check failed, 77 skipped (libvirt's
test driver cannot be opened, or no root / unshare for the tmpfs)."""
import os
import re
import signal
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                ".."))
from tap import check  # noqa: E402
from tiny_fs import TinyFs, reexec_private  # noqa: E402
from bridge_replay import (  # noqa: E402
    Bridge, main, metric, metrics, poll_until, vcpus, write_stats)


def lines(b, which, pattern):
    return [l for l in b.text(which).splitlines() if re.search(pattern, l)]


def test_disk(tmp):
    """A long replay: flap's vCPU busy and idle in turns, so that its state
    changes (a rewrite at each) all along."""
    node = os.path.join(tmp, "node.xml")
    stats = os.path.join(tmp, "disk.stats")
    fs = TinyFs(os.path.join(tmp, "tiny"))
    mfile = os.path.join(fs.path, "bridge.prom")
    write_stats(stats, [{"web1": vcpus([1, 1]),
                         "flap": vcpus([i if (i // 8) % 2 else 1])}
                        for i in range(3000)])
    b = Bridge(tmp, "disk", ["--libvirt", "test://" + node, "--stats-file",
                             stats, "--interval", "50",
                             "--metrics-file", mfile])
    up = poll_until(lambda: metric(metrics(mfile)[0],
                                   "sysidle_libvirt_up") == 1, 20)
    check(up and metric(metrics(mfile)[0],
                        "sysidle_libvirt_file_write_failures_total",
                        file="metrics") == 0 and
          metric(metrics(mfile)[0],
                 "sysidle_libvirt_metrics_written_timestamp_seconds"),
          "the file: up, 0 failed writes, the time it was written",
          metrics(mfile)[1])

    fail = r"--metrics-file .*cannot write"
    fs.fill()
    poll_until(lambda: lines(b, "err", fail), 20)
    # a few more scans, each failing again
    n0 = metric(metrics(mfile)[0], "sysidle_libvirt_scans_total") or 0
    written = len(lines(b, "out", r"flap: "))
    poll_until(lambda: len(lines(b, "out", r"flap: ")) >= written + 2, 20)
    msgs = lines(b, "err", fail)
    check(len(msgs) == 1 and "No space left on device" in msgs[0],
          "disk full: warned once, with the cause", b.text("err"))
    check(fs.litter() == ["bridge.prom"], "no temporary file left",
          fs.litter())
    check(metric(metrics(mfile)[0], "sysidle_libvirt_scans_total") == n0,
          "the file on disk is the one before the failures",
          metrics(mfile)[1])

    fs.free()
    back = poll_until(lambda: lines(b, "out", r"--metrics-file .*written "
                                    r"again after \d+ failed attempts"), 20)
    n = metric(metrics(mfile)[0], "sysidle_libvirt_file_write_failures_total",
               file="metrics")
    check(back and len(back) == 1 and n is not None and n >= 1,
          "room again: written again, said once; the file counts %s failed "
          "writes" % n, b.text("out")[-2000:] + b.text("err"))

    fs.read_only()
    ro = poll_until(lambda: [l for l in lines(b, "err", fail)
                             if "Read-only file system" in l], 20)
    fs.read_only(False)
    back = poll_until(lambda: len(lines(b, "out", r"--metrics-file .*"
                                        r"written again")) == 2, 20)
    check(ro and len(ro) == 1 and back,
          "read-only: warned once with its cause; read-write: written "
          "again", b.text("err"))

    fs.fill()
    poll_until(lambda: len(lines(b, "err", fail)) == 3, 20)
    b.p.send_signal(signal.SIGTERM)
    rc = b.wait(30)
    check(rc == 0 and not os.path.exists(mfile) and
          lines(b, "err", r"--metrics-file .*removed") and
          fs.litter() == [],
          "SIGTERM with the disk full: the file claiming the domains' "
          "states removed, no temporary file left",
          "exit %s %s\n%s" % (rc, fs.litter(), b.text("err")))
    fs.free()
    fs.unmount()


if __name__ == "__main__":
    why = reexec_private()
    if why:
        print("1..0 # SKIP %s" % why)
        sys.exit(77)
    sys.exit(main([test_disk]))
