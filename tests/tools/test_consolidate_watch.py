#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-only
"""sysidle-consolidate's client of this VMM (vmm_source.py) against fake
VMM sockets (tests/edge_vmm.py), the daemon's loop run in this process:

- a VMM with the filtered watch: the request carries "edges":"full_idle"
  and --pack-after / --restore-after in ms; a settled edge is acted on at
  once (idle: packed; not idle: restored), with no status request per
  action and nothing due in between (no wake-up);
- a VMM without it (plain reply): the same hysteresis on the raw state
  changes: packed only after --pack-after, a wake shorter than
  --restore-after restores nothing, a longer one does; a "dropped" event
  makes it read the status again.

usage: test_consolidate_watch.py TOOLS_DIR
TAP on stdout; exit 0 when every check passes, 77 with fewer than 2
CPUs."""
import os
import sys
import tempfile
import time

from edge_vmm import EdgeVmm, now_ms
from tap import check, finish

from sysidle_consolidate import common, daemon, vmm_source
from sysidle_consolidate.states import FULL_NOTED


class Run:
    def __init__(self, path, idle, pack_after=0.5, restore_after=0.2):
        self.lines = []
        self.ctx = daemon.Context(common.Log(verbose=True, out=self.lines),
                                  {"pack"}, idle=idle, pack_after=pack_after,
                                  restore_after=restore_after, max_actions=6)
        self.src = vmm_source.VmmSource(self.ctx, None, [path])
        self.d = daemon.Daemon(self.ctx, [self.src])
        self.due = self.d.step()

    def until(self, fn, timeout):
        """The loop run until fn() is true; its value, or None."""
        end = time.monotonic() + timeout
        while True:
            v = fn()
            if v:
                return v
            if time.monotonic() >= end:
                return None
            stop = min(d for d in (self.due, time.monotonic() + 0.01, end)
                       if d is not None)
            self.d.wait(stop)
            self.due = self.d.step()

    def text(self):
        return "\n".join(self.lines)


def statuses(f):
    return len([r for r in f.requests if r.get("cmd") == "status"])


def test_filtered(tmp, orig, idle):
    f = EdgeVmm(os.path.join(tmp, "e.sock"), "edge")
    for t in f.tids():
        os.sched_setaffinity(t, orig)
    r = Run(f.path, idle)
    r.until(lambda: f.watchers, 3)
    req = (f.watch_requests() or [{}])[0]
    check(req == {"cmd": "watch", "edges": "full_idle",
                  "enter_after_ms": 500, "leave_after_ms": 200},
          "the watch request asks for settled edges: %s" % req)
    n_status = statuses(f)
    aff = lambda: [os.sched_getaffinity(t) for t in f.tids()]  # noqa: E731
    t0 = time.monotonic()
    f.full_idle(True, now_ms() - 500)
    packed = r.until(lambda: aff() == [idle] * 3, 2)
    t_pack = time.monotonic() - t0
    due = r.d.step()
    check(packed and t_pack < 0.4 and due is None and
          statuses(f) == n_status and
          r.src.vms[f.path].settled is True,
          "idle:true (FULL_NOTED for 500 ms, as the VMM says): packed at "
          "once (%.0f ms, not another --pack-after), no status request, "
          "nothing due afterwards (%s)" % (t_pack * 1000, due), r.text())
    t0 = time.monotonic()
    f.full_idle(False, now_ms() - 200)
    back = r.until(lambda: aff() == [orig] * 3, 2)
    t_back = time.monotonic() - t0
    check(back and t_back < 0.15 and statuses(f) == n_status and
          r.d.step() is None and
          any(l.startswith("restore edge: 3 threads") for l in r.lines),
          "idle:false (out for 200 ms): restored at once (%.0f ms), still "
          "no status request, nothing due" % (t_back * 1000), r.text())
    f.state, f.since = FULL_NOTED, now_ms() - 500
    f.full_idle(True, f.since)
    r.until(lambda: aff() == [idle] * 3, 2)
    n_status = statuses(f)
    f.broadcast({"event": "dropped", "count": 3}, True)
    again = r.until(lambda: statuses(f) > n_status, 2)
    kept = r.until(lambda: False, 0.1) is None and aff() == [idle] * 3
    r.d.finish("SIGTERM")
    check(kept and again and aff() == [orig] * 3 and
          not any("dropped events" in l for l in r.lines
                  if l.startswith("restore")),
          "a dropped event: the status read again (still packed); exit: "
          "restored",
          r.text())
    f.close()


def test_fallback(tmp, orig, idle):
    f = EdgeVmm(os.path.join(tmp, "p.sock"), "plain", edges=False)
    for t in f.tids():
        os.sched_setaffinity(t, orig)
    r = Run(f.path, idle)
    r.until(lambda: f.watchers, 3)
    aff = lambda: [os.sched_getaffinity(t) for t in f.tids()]  # noqa: E731
    t0 = time.monotonic()
    f.set_state(FULL_NOTED)
    early = r.until(lambda: aff() == [idle] * 3, 0.3)
    packed = r.until(lambda: aff() == [idle] * 3, 2)
    t_pack = time.monotonic() - t0
    check(not early and packed and 0.49 <= t_pack < 1.0 and
          "# plain: the VMM has no filtered watch: hysteresis on its raw "
          "state changes" in r.lines,
          "a VMM without the filter (plain reply): logged once; packed "
          "after --pack-after 0.5 on the raw states (%.0f ms)" %
          (t_pack * 1000), r.text())
    n_status = statuses(f)
    f.set_state("NOT")
    r.until(lambda: False, 0.1)
    f.set_state(FULL_NOTED)
    r.until(lambda: False, 0.3)
    kept = aff() == [idle] * 3
    f.set_state("NOT")
    t0 = time.monotonic()
    early = r.until(lambda: aff() == [orig] * 3, 0.15)
    back = r.until(lambda: aff() == [orig] * 3, 2)
    t_back = time.monotonic() - t0
    check(kept and not early and back and 0.19 <= t_back < 0.5 and
          statuses(f) == n_status and
          len([l for l in r.lines if l.startswith("restore ")]) == 1,
          "a 100 ms wake (< --restore-after 0.2): still packed; a longer "
          "one: restored after 200 ms (%.0f ms); no status request for "
          "either" % (t_back * 1000), r.text())
    r.d.finish("SIGTERM")
    f.close()


def main():
    full = os.sched_getaffinity(0)
    if len(full) < 2:
        print("1..0 # SKIP only one CPU to run on")
        return 77
    orig, idle = {min(full)}, {max(full)}
    with tempfile.TemporaryDirectory() as tmp:
        test_filtered(tmp, orig, idle)
        test_fallback(tmp, orig, idle)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
