#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-only
"""tools/sysidle-consolidate --libvirt as a program: its command line and
its bounded stop.

Checked: --help, bad options (exit 2), --once against libvirt's test
driver (consolidate_testdriver.py): its decisions, --dry-run, idle CPUs
not on the host, a URI that cannot be opened; a libvirtd that never
answers (silent_libvirtd.py): SIGTERM ends the daemon after
--stop-timeout, a second signal at once.

usage: test_consolidate_libvirt_cli.py TOOL
(TOOL: tools/sysidle-consolidate; its modules are next to it.)
Exit: 0 all passed, 1 a check failed, 77 skipped (no libvirt binding)."""
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                ".."))
from tap import check  # noqa: E402
from silent_libvirtd import SilentLibvirtd  # noqa: E402
from consolidate_testdriver import (  # noqa: E402
    LOG_PREFIX, TOOL, fresh_state, main, run_tool)


def test_cli(uri):
    p = subprocess.run([TOOL, "--help"], capture_output=True, text=True,
                       timeout=30)
    check(p.returncode == 0 and all(
        o in p.stdout for o in ["--libvirt URI", "--policy", "--idle-cpus",
                                "--suspend-after", "--suspend-max",
                                "--interval", "--once", "--dry-run",
                                "urn:sysidle:1"]),
          "--help: exit 0, every option and the metadata namespace",
          p.stdout + p.stderr)
    bad = [["--policy", "sleep"], ["--policy", "pack,pack"],
           ["--suspend-after", "soon"], ["--suspend-max", "-1"],
           ["--idle-cpus", "3-1"], ["--interval", "0"], ["--frobnicate"],
           ["--stop-timeout", "0"], ["--stop-timeout", "2h"]]
    rcs = []
    for b in bad:
        p = run_tool([TOOL, "--state-dir", fresh_state(), "--once", "--dir", "none"] + b,
                           capture_output=True, text=True, timeout=30)
        rcs.append((b, p.returncode, p.stderr.strip().splitlines()[-1:]))
    check(all(rc == 2 and err and "error" in err[0] for _, rc, err in rcs),
          "bad options (%s): exit 2 with a message" %
          ", ".join(" ".join(b) for b in bad),
          "\n".join("%s: %s %s" % x for x in rcs))
    p = run_tool([TOOL, "--state-dir", fresh_state(), "--once", "--dir", "none", "--libvirt", uri,
                        "--idle-cpus", "6-7", "--policy", "pack,suspend",
                        "--suspend-after", "1m"],
                       capture_output=True, text=True, timeout=30)
    out = p.stdout.splitlines()
    want = [r"pack cold: 2 vcpus, emulator -> cpus 6-7 \(FULL_NOTED\)",
            r"leave cold: not suspended \(FULL_NOTED for 36\d\d s, "
            r"--suspend-after 60; --once: nothing would resume it\)",
            r"leave web: state NOT", r"leave db: state NOT",
            r"leave batch: state unknown \(no urn:sysidle:1 state "
            r"published\)"]
    check(p.returncode == 0 and len(out) == len(want) and
          all(any(re.fullmatch(w, l) for l in out) for w in want),
          "--once --libvirt %s: exit %d, its decisions printed" %
          (uri.split("/")[-1], p.returncode), p.stdout + p.stderr)
    p = run_tool([TOOL, "--state-dir", fresh_state(), "--once", "--dry-run", "--dir", "none",
                        "--libvirt", uri], capture_output=True, text=True,
                       timeout=30)
    check(p.returncode == 0 and re.search(
        r"^pack cold: 2 vcpus, emulator -> cpus 4 \(FULL_NOTED\) "
        r"\[dry run\]$", p.stdout, re.M),
          "--once --dry-run, default idle CPU: the host's last online CPU "
          "(the test driver reports 0,2,4 online)", p.stdout + p.stderr)
    p = run_tool([TOOL, "--state-dir", fresh_state(), "--once", "--dir", "none", "--libvirt", uri,
                        "--idle-cpus", "8"], capture_output=True, text=True,
                       timeout=30)
    check(p.returncode == 0 and p.stdout.startswith(
        "error %s: idle CPUs 8 not on this host (8 CPUs): no domain packed "
        "there\n" % uri) and not re.search(r"^pack ", p.stdout, re.M),
          "--once --idle-cpus 8 on a host of 8 CPUs: one error line, "
          "nothing packed", p.stdout + p.stderr)
    p = run_tool([TOOL, "--state-dir", fresh_state(), "--once", "--dir", "none", "--libvirt",
                        "test:///nonexistent/node.xml"], capture_output=True,
                       text=True, timeout=30)
    check(p.returncode == 0 and p.stdout.startswith(
        "error test:///nonexistent/node.xml: cannot connect ("),
          "--once with a URI that cannot be opened: one error line",
          p.stdout + p.stderr)


def test_stop_hung():
    """A libvirt call that never returns (libvirtd hangs): SIGTERM still
    ends the daemon, after --stop-timeout, saying where it was; a second
    signal ends it at once."""
    with tempfile.TemporaryDirectory() as tmp:
        for tag, extra, second, bound, says in [
                ("timeout", ["--stop-timeout", "1"], None, 3.0,
                 "the stop did not end within 1 s, in the middle of "),
                ("twice", [], signal.SIGINT, 1.5,
                 "signal 2 again, in the middle of ")]:
            lv = SilentLibvirtd(os.path.join(tmp, tag + ".sock"))
            p = subprocess.Popen([TOOL, "--state-dir", fresh_state(),
                                  "--dir", tmp, "--libvirt", lv.uri] + extra,
                                 stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
            end = time.monotonic() + 10
            while not lv.asked() and time.monotonic() < end:
                time.sleep(0.05)
            asked = lv.asked()
            t0 = time.monotonic()
            p.send_signal(signal.SIGTERM)
            if second:
                time.sleep(0.2)
                p.send_signal(second)
            try:
                out, err = p.communicate(timeout=bound + 5)
            except subprocess.TimeoutExpired:
                p.kill()
                out, err = p.communicate()
            took = time.monotonic() - t0
            lv.close()
            check(asked and p.returncode == 3 and took < bound and
                  says in out and "stays in the journal" in out and
                  LOG_PREFIX.match(out) is not None,
                  "libvirtd silent, the daemon waiting in a libvirt call: %s"
                  " ends it with exit 3 in %.1f s (bound %.1f), one "
                  "warning saying where it was" %
                  ("SIGTERM and --stop-timeout 1" if not second else
                   "a second signal", took, bound),
                  "asked %s, exit %s\n%s%s" % (asked, p.returncode, out,
                                               err))


if __name__ == "__main__":
    sys.exit(main([test_cli], [test_stop_hung]))
