#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""build/sysidle-libvirt on libvirt's test driver (bridge_replay.py): its
command line and its log. Bad options (exit 2, a clear message), --help
with every option and its default, malformed, endless and missing stats
files (exit 1, the line named); stderr to the journal (JOURNAL_STREAM):
"<4>message" lines without a time.

usage: test_libvirt_bridge_options.py SYSIDLE_LIBVIRT
TAP on stdout. Exit: 0 all passed, 1 a check failed, 77 skipped (libvirt's
test driver cannot be opened)."""
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                ".."))
from tap import check  # noqa: E402
from bridge_replay import (  # noqa: E402
    BRIDGE, LOG_PREFIX, bridge, main, main_scans, write_stats)


def test_errors(tmp):
    node = os.path.join(tmp, "node.xml")
    for args, what in [(["--interval", "0"], "--interval 0"),
                       (["--interval", "abc"], "--interval abc"),
                       (["--interval", "3600001"], "--interval too large"),
                       (["--hook-timeout", "0"], "--hook-timeout 0"),
                       (["--hook-timeout", "x"], "--hook-timeout x"),
                       (["--stop-timeout", "0"], "--stop-timeout 0"),
                       (["--stop-timeout", "3601"], "--stop-timeout 3601"),
                       (["--stop-timeout", "1.5"], "--stop-timeout 1.5"),
                       (["--bogus"], "an unknown option"),
                       (["--libvirt"], "a missing value"),
                       (["extra"], "an argument")]:
        rc, out, err = bridge(args)
        check(rc == 2 and err.startswith("sysidle-libvirt: ") and
              "Try 'sysidle-libvirt --help'" in err and not out,
              "bad options (%s): a clear error, exit 2" % what,
              "exit %s\n%s%s" % (rc, out, err))
    for args, what in [(["--source", "qemu"], "--source qemu"),
                       (["--lease", "2"], "--lease 2"),
                       (["--lease", "86401"], "--lease too long"),
                       (["--idle-interval", "0"], "--idle-interval 0"),
                       (["--interval", "500", "--idle-interval", "100"],
                        "--idle-interval shorter than --interval"),
                       (["--stats-file", "x", "--source", "kvm"],
                        "--stats-file with --source"),
                       (["--metrics-file", ""], "an empty --metrics-file")]:
        rc, out, err = bridge(args)
        check(rc == 2 and err.startswith("sysidle-libvirt: ") and
              "Try 'sysidle-libvirt --help'" in err and not out,
              "bad options (%s): a clear error, exit 2" % what,
              "exit %s\n%s%s" % (rc, out, err))
    rc, out, err = bridge(["--help"])
    check(rc == 0 and all(o in out for o in [
        "--libvirt URI", "--interval MS", "--hooks DIR", "--hook-timeout",
        "--once", "--stats-file FILE", "--verbose", "--help",
        "--source S", "--idle-interval MS", "--lease SECONDS",
        "--metrics-file FILE", "(default auto)", "(default 1000",
        "(default 30)", "qemu:///system", "/sysidle/hooks;",
        "(default 100)", "(default 10)", "--stop-timeout SECONDS"]),
        "--help lists every option and its default", out)
    bad = os.path.join(tmp, "bad.stats")
    with open(bad, "w") as f:
        f.write("0 web1 vcpu.0.halt_exits.sum=1\n100 web1 vcpu.0.blocking=x\n")
    rc, out, err = bridge(["--libvirt", "test://" + node, "--stats-file",
                           bad, "--once"])
    check(rc == 1 and "--stats-file '%s': line 2: expected KEY=VALUE" % bad
          in err, "a malformed stats file: where and why, exit 1",
          "exit %s\n%s" % (rc, err))
    rc, out, err = bridge(["--libvirt", "test://" + node, "--stats-file",
                           "/dev/zero", "--once"])
    check(rc == 1 and "--stats-file '/dev/zero': line 1: longer than 65536 "
          "bytes, or a NUL byte in it" in err,
          "--stats-file /dev/zero: line 1 refused at once (no unbounded "
          "read), exit 1", "exit %s\n%s" % (rc, err))
    with open(bad, "w") as f:
        f.write("0 web1 vcpu.0.halt_exits.sum=1\n# comment\n0 web1 " +
                "x" * 70000 + "=1\n")
    rc, out, err = bridge(["--libvirt", "test://" + node, "--stats-file",
                           bad, "--once"])
    check(rc == 1 and "line 3: longer than 65536 bytes" in err,
          "a stats line of 70000 bytes: refused, its line named, exit 1",
          "exit %s\n%s" % (rc, err))
    rc, out, err = bridge(["--libvirt", "test://" + node, "--stats-file",
                           os.path.join(tmp, "missing"), "--once"])
    check(rc == 1 and "No such file" in err, "a missing stats file: exit 1",
          "exit %s\n%s" % (rc, err))


def test_journal(tmp):
    """stderr the journal (JOURNAL_STREAM names its device and inode):
    "<4>message", no time (the journal stamps it)."""
    node = os.path.join(tmp, "node.xml")
    stats = os.path.join(tmp, "journal.stats")
    write_stats(stats, main_scans(3))
    err = os.path.join(tmp, "journal.err")
    with open(err, "w") as f:
        st = os.fstat(f.fileno())
        env = dict(os.environ, JOURNAL_STREAM="%d:%d" % (st.st_dev,
                                                          st.st_ino))
        rc = subprocess.run([BRIDGE, "--libvirt", "test://" + node,
                             "--stats-file", stats, "--once"], env=env,
                            stdout=subprocess.DEVNULL, stderr=f,
                            timeout=60).returncode
    with open(err) as f:
        lines = f.read().splitlines()
    check(rc == 0 and lines and all(l.startswith("<4>") and
                                    not LOG_PREFIX.match(l[3:])
                                    for l in lines),
          "stderr the journal (JOURNAL_STREAM): '<4>message' lines, no "
          "time of its own", lines)


if __name__ == "__main__":
    sys.exit(main([test_errors, test_journal]))
