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
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

from edge_vmm import EdgeVmm, now_ms
from tap import check, finish

from sysidle_consolidate import common, daemon, metrics, vmm_source
from sysidle_consolidate.states import FULL_NOTED


def parse_metrics(path):
    """A Prometheus text file -> ({"name{labels}": value}, {name: type},
    [names with HELP]); ValueError on a line that is none of these."""
    samples, types, helps = {}, {}, []
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("# HELP "):
                helps.append(line.split()[2])
            elif line.startswith("# TYPE "):
                _, _, name, kind = line.split()
                types[name] = kind
            else:
                m = re.fullmatch(r'([a-z_]+)(\{[a-z_]+="[a-z_]+"'
                                 r'(,[a-z_]+="[a-z_]+")*\})? '
                                 r'([0-9.]+)', line)
                if not m:
                    raise ValueError("bad line %r" % line)
                samples[m.group(1) + (m.group(2) or "")] = float(m.group(4))
    return samples, types, helps


class Run:
    def __init__(self, path, idle, pack_after=0.5, restore_after=0.2,
                 metrics_file=None, dir=None):
        self.lines = []
        m = metrics.Metrics(metrics_file) if metrics_file else None
        self.ctx = daemon.Context(common.Log(verbose=True, out=self.lines),
                                  {"pack"}, idle=idle, pack_after=pack_after,
                                  restore_after=restore_after, max_actions=6,
                                  metrics=m)
        self.src = vmm_source.VmmSource(self.ctx, dir,
                                        [path] if path else [])
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
    # FULL_NOTED when the watch connects, but not for 500 ms yet
    f.state, f.since = FULL_NOTED, now_ms()
    mfile = os.path.join(tmp, "m.prom")
    r = Run(f.path, idle, metrics_file=mfile)
    r.until(lambda: f.watchers, 3)
    req = (f.watch_requests() or [{}])[0]
    check(req == {"cmd": "watch", "edges": "full_idle",
                  "enter_after_ms": 500, "leave_after_ms": 200},
          "the watch request asks for settled edges: %s" % req)
    n_status = statuses(f)
    aff = lambda: [os.sched_getaffinity(t) for t in f.tids()]  # noqa: E731
    early = r.until(lambda: aff() == [idle] * 3, 0.7)
    due = r.d.step()
    check(not early and due is None,
          "settled edges, FULL_NOTED at connection but \"full_idle\": "
          "false: no timer of its own (its edge decides), not packed "
          "after 700 ms", r.text())
    f.state = "NOT"
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
    P = "sysidle_consolidate_"
    try:
        s, types, helps = parse_metrics(mfile)
        bad = None
    except (OSError, ValueError) as e:
        s, types, helps, bad = {}, {}, [], str(e)
    names = ["vms", "actions_total", "journal_entries", "reconcile_total",
             "last_action_timestamp_seconds", "start_time_seconds",
             "settled_edges"]
    check(bad is None and all(P + n in types and P + n in helps
                              for n in names) and
          types[P + "actions_total"] == "counter" and
          s.get(P + 'vms{state="watched"}') == 1 and
          s.get(P + 'vms{state="packed"}') == 1 and
          s.get(P + 'actions_total{action="pack",result="ok"}') == 1 and
          s.get(P + 'actions_total{action="restore",result="ok"}') == 0 and
          s.get(P + 'settled_edges{watch="filtered"}') == 1 and
          s.get(P + 'settled_edges{watch="raw"}') == 0 and
          s.get(P + "last_action_timestamp_seconds", 0) > 0 and
          not os.path.exists(mfile + ".tmp"),
          "--metrics-file: HELP and TYPE for each metric; 1 VM watched "
          "and packed, 1 pack ok, followed with the filtered watch",
          bad or open(mfile).read())
    promtool = shutil.which("promtool")
    if promtool and os.path.exists(mfile):
        with open(mfile) as fm:
            text = fm.read()
        p = subprocess.run([promtool, "check", "metrics"], input=text,
                           capture_output=True, text=True, timeout=30)
        check(p.returncode == 0 and not (p.stdout + p.stderr).strip(),
              "--metrics-file passes promtool check metrics",
              p.stdout + p.stderr + text)
    else:
        check(False, "promtool check metrics on --metrics-file",
              "promtool is not installed (Debian: prometheus)")
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


def test_stale_socket(tmp, idle):
    """A dead VMM's socket left in the watched directory is retried at
    most once a minute (no wake-up a second for ever); a VMM that starts
    on that path is followed at once all the same (inotify)."""
    sockdir = os.path.join(tmp, "socks")
    os.mkdir(sockdir)
    path = os.path.join(sockdir, "stale.sock")
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(path)
    dead.close()                # the file stays: nobody listens
    r = Run(None, idle, dir=sockdir)
    vm = r.until(lambda: r.src.vms.get(path), 3)
    tries = r.until(lambda: vm is not None and vm.connect_tries >= 3 and
                    vm.connect_tries, 3)
    vm.connect_tries = 20       # as after some minutes of refusals
    r.d.step()
    r.src.dirty = False
    r.src.poll(time.monotonic() + 1000)     # one more refused attempt
    wait = r.src.next_due() - (time.monotonic() + 1000)
    r.src.explicit.append("/explicit.sock")
    explicit_cap = r.src.retry_cap("/explicit.sock")
    r.src.explicit.pop()
    check(tries and 50 <= wait <= 61 and explicit_cap == vmm_source.RESCAN_S,
          "a refusing socket in the watched directory: tried again after "
          "%.0f s (at most once a minute; an explicit --socket every %g s)"
          % (wait, vmm_source.RESCAN_S))
    os.unlink(path)
    f = EdgeVmm(path, "reborn")
    t0 = time.monotonic()
    ok = r.until(lambda: f.watchers, 2)
    check(ok, "a VMM started on that path is watched %.0f ms later, not a "
          "minute later" % ((time.monotonic() - t0) * 1000), r.text())
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
        test_stale_socket(tmp, idle)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
