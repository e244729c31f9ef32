#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-only
"""sysidle-consolidate's files on a full or read-only disk (the top
README, "Files written, and what happens when a write fails"): its state
directory (the journal, history.log) and its --metrics-file, each on a 64
KiB tmpfs of a private mount namespace (tests/tiny_fs.py). The journal:
a pack whose entry cannot be written is not done (the threads stay where
they are), the failure logged once with its cause, no .tmp left; room
again, the next idle period packs, the recovery logged; a restore that
empties the journal on a full disk removes journal.json. The metrics file:
one message per failure with its cause, no .tmp, the recovery said, the
failures counted in the file; the last version at exit, not written,
removes the file. The history: the failure said once on stdout (not in
the history), the lines lost noted in it once it takes lines again.

usage: test_consolidate_disk.py TOOLS_DIR
(the package is imported through PYTHONPATH: TOOLS_DIR and tests/.) TAP
on stdout; exit 0 when every check passes, 77 with fewer than 2 CPUs or
without root / unshare."""
import logging
import os
import re
import sys
import tempfile
import time

from edge_vmm import EdgeVmm
from tap import check, finish
from tiny_fs import TinyFs, reexec_private

from sysidle_consolidate import common, daemon, journal, logsetup
from sysidle_consolidate import metrics as metrics_mod
from sysidle_consolidate import vmm_source
from sysidle_consolidate.states import FULL_NOTED


def run_until(d, pred, timeout=5):
    """Steps the daemon @d until pred() (bounded)."""
    end = time.monotonic() + timeout
    while not pred() and time.monotonic() < end:
        d.step()
        d.wait(time.monotonic() + 0.02)
    return pred()


class Capture(logging.Handler):
    """The tool's log lines, kept (TAP alone goes to stdout)."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.lines = []

    def emit(self, record):
        self.lines.append(record.getMessage())

    def getvalue(self):
        return "\n".join(self.lines)


def said(out, text):
    return [l for l in out.getvalue().splitlines() if text in l]


def test_journal(tmp, orig, idle, out):
    fs = TinyFs(os.path.join(tmp, "state"))
    f = EdgeVmm(os.path.join(tmp, "d.sock"), "dvm", edges=False)
    tids = f.tids()
    for t in tids:
        os.sched_setaffinity(t, orig)
    log = common.Log()
    j = journal.Journal(fs.path, log)
    ctx = daemon.Context(log, {"pack"}, idle=idle, journal=j)
    src = vmm_source.VmmSource(ctx, None, [f.path])
    d = daemon.Daemon(ctx, [src])
    fs.fill()
    f.set_state(FULL_NOTED)
    run_until(d, lambda: said(out, "dvm: not packed"))
    # a second period: not packed again, the journal's failure not repeated
    f.set_state("NOT")
    run_until(d, lambda: src.vms[f.path].state == "NOT")
    f.set_state(FULL_NOTED)
    run_until(d, lambda: len(said(out, "dvm: not packed")) == 2)
    fails = said(out, "error journal ")
    check(len(fails) == 1 and "No space left on device" in fails[0] and
          len(said(out, "dvm: not packed: the journal cannot be written "
                   "(No space left on device)")) == 2 and
          [os.sched_getaffinity(t) for t in tids] == [orig] * 3,
          "journal full: the pack not done (threads untouched), the "
          "journal's failure logged once with its cause",
          out.getvalue())
    check(fs.litter() == ["lock"] and j.entries == {},
          "no journal.json.tmp left, no entry kept for the pack not done",
          fs.litter())
    fs.free()
    f.set_state("NOT")
    run_until(d, lambda: src.vms[f.path].state == "NOT")
    f.set_state(FULL_NOTED)
    packed = run_until(d, lambda: [os.sched_getaffinity(t) for t in tids] ==
                       [idle] * 3)
    back = said(out, "journal %s: written again after" % j.path)
    check(packed and len(back) == 1 and
          len(logsetup_entries(j.path)) == 1,
          "room again: the next period packs, journalled first; the "
          "recovery logged once", out.getvalue())
    fs.fill()
    f.set_state("NOT")
    restored = run_until(d, lambda: [os.sched_getaffinity(t)
                                     for t in tids] == [orig] * 3 and
                         not os.path.exists(j.path))
    check(restored and fs.litter() == ["lock"] and
          len(said(out, "error journal ")) == 2,
          "disk full at the restore: the failure logged, the emptied "
          "journal removed (the same state as an empty one), nothing left "
          "claiming the VM packed",
          "%s\n%s" % (fs.litter(), out.getvalue()))
    j.close()
    f.close()
    fs.free()
    fs.unmount()


def logsetup_entries(path):
    import json
    try:
        with open(path) as fh:
            return json.load(fh)["entries"]
    except FileNotFoundError:
        return {}


def test_metrics(tmp, out):
    fs = TinyFs(os.path.join(tmp, "metrics"))
    path = os.path.join(fs.path, "c.prom")
    m = metrics_mod.Metrics(path)
    j = journal.NoJournal()
    m.update([], j)
    first = os.path.exists(path)
    fs.fill()
    for i in range(3):
        m.action("pack", "ok")
        m.update([], j)
    fails = said(out, "--metrics-file %s: cannot write" % path)
    check(first and len(fails) == 1 and "No space left on device" in
          fails[0] and fs.litter() == ["c.prom"] and
          m.next_due() is not None,
          "metrics full: 3 failed writes, logged once with the cause, no "
          ".tmp left, a retry due", "%s\n%s" % (fs.litter(), out.getvalue()))
    fs.free()
    m.update([], j)
    with open(path) as fh:
        text = fh.read()
    check(said(out, "--metrics-file %s: written again after 3 failed "
               "attempts" % path) and
          'sysidle_consolidate_file_write_failures_total{file="metrics"} 3'
          in text and "sysidle_consolidate_metrics_written_timestamp_seconds"
          in text and m.next_due() is None,
          "room again: written, the recovery said, the file counts the 3 "
          "failed writes", text + out.getvalue())
    fs.read_only()
    m.action("pack", "ok")
    m.update([], j)
    fs.read_only(False)
    ro = [l for l in said(out, "--metrics-file %s: cannot write" % path)
          if "Read-only file system" in l]
    m.update([], j)
    check(len(ro) == 1 and len(said(out, "%s: written again after 1 "
                                    "failed" % path)) == 1,
          "read-only: logged with its cause; read-write: written again",
          out.getvalue())
    fs.fill()
    m.action("pack", "ok")
    m.update([], j, final=True)
    check(not os.path.exists(path) and
          said(out, "--metrics-file %s: removed" % path) and
          fs.litter() == [],
          "the last version at exit not written: the file removed",
          "%s\n%s" % (fs.litter(), out.getvalue()))
    fs.free()
    fs.unmount()


def test_history(tmp, out):
    fs = TinyFs(os.path.join(tmp, "history"))
    logsetup.add_history(fs.path)
    log = common.Log()
    log("pack a: before")
    fs.fill()
    # the file's last page takes lines until it is full
    for i in range(2000):
        if said(out, "error history "):
            break
        log("pack a: line %d" % i)
    for i in range(3):
        log("pack a: lost %d" % i)
    fails = said(out, "error history ")
    with open(os.path.join(fs.path, logsetup.HISTORY)) as fh:
        during = fh.read()
    fs.free()
    log("pack a: after")
    with open(os.path.join(fs.path, logsetup.HISTORY)) as fh:
        after = fh.read()
    check(len(fails) == 1 and "No space left on device" in fails[0] and
          "error history" not in during and "lost" not in after,
          "history full: said once on stdout with the cause, not in the "
          "history", out.getvalue())
    lost = re.findall(r"warning history: (\d+) lines not written \(No "
                      r"space left on device\)", after)
    back = said(out, "history %s: written again after" %
                os.path.join(fs.path, logsetup.HISTORY))
    check(len(lost) == 1 and int(lost[0]) >= 3 and
          after.rstrip().endswith("pack a: after") and len(back) == 1 and
          back[0].endswith(" %s failed attempts" % lost[0]),
          "room again: the history notes the %s lines lost, then the line; "
          "the recovery said" % lost, after[-500:] + out.getvalue())
    logging.getLogger(logsetup.LOGGER).handlers = [out]  # no history
    fs.unmount()


def main():
    full = os.sched_getaffinity(0)
    if len(full) < 2:
        print("1..0 # SKIP only one CPU to run on")
        return 77
    why = reexec_private()
    if why:
        print("1..0 # SKIP %s" % why)
        return 77
    orig, idle = {min(full)}, {max(full)}
    out = Capture()
    logsetup.setup(False).handlers = [out]
    with tempfile.TemporaryDirectory() as tmp:
        test_journal(tmp, orig, idle, out)
        test_metrics(tmp, out)
        test_history(tmp, out)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
