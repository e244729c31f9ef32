# SPDX-License-Identifier: GPL-2.0-only
"""What the fleet daemon shows of itself: --metrics-file (Prometheus text
format, for node_exporter's textfile collector) and STATE_DIR/status.json
(read by --status), both rewritten atomically (FILE.tmp renamed over
FILE) when their content changes, never periodically; at the exit
sysidle_fleet_up is 0 and status.json says "running": false. A daemon
killed with SIGKILL leaves them as they were: --status says whether a
daemon holds the state directory, and node_exporter's
node_textfile_mtime_seconds shows a metrics file that stopped changing.

Metrics (sysidle-metrics(7)); HOST is the --host name:
  sysidle_fleet_up                          1 while the daemon runs
  sysidle_fleet_start_time_seconds
  sysidle_fleet_hosts{state}                hosts in each state (model.py)
  sysidle_fleet_host_state{host,state}      1 for the host's state
  sysidle_fleet_host_standby{host}          1: handed to standby
  sysidle_fleet_host_domains{host}          active domains (up hosts)
  sysidle_fleet_host_idle_domains{host}     of them fully idle
  sysidle_fleet_host_load_vcpus{host}       weighted vCPU load (decide.py)
  sysidle_fleet_host_budget_vcpus{host}
  sysidle_fleet_host_memory_bytes{host}     the domains' memory
  sysidle_fleet_host_budget_memory_bytes{host}
  sysidle_fleet_migrations_in_flight
  sysidle_fleet_migrations_total{reason="pack"|"unpack",
      result="ok"|"skipped"|"failed"}
  sysidle_fleet_migration_seconds_total{reason}   of the ok ones
  sysidle_fleet_hooks_total{op="begin"|"end",result="ok"|"failed"}
  sysidle_fleet_unresolved_migrations       journal entries to settle
  sysidle_fleet_domains_lost_total          migrations after which the
                                            domain ran on neither host
  sysidle_fleet_last_action_timestamp_seconds"""
import errno
import json
import os
import time

from . import decide
from .model import STANDBY, STATES, UP

P = "sysidle_fleet_"
STATUS = "status.json"


def _write(path, text):
    """@text to @path atomically, or OSError with no FILE.tmp left."""
    tmp = path + ".tmp"
    try:
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def host_rows(fleet, now=None):
    """One dict per host for status.json and the metrics."""
    now = time.monotonic() if now is None else now
    rows = []
    for name in sorted(fleet.hosts):
        h = fleet.hosts[name]
        r = {"name": name, "uri": h.uri, "state": h.state,
             "host_uuid": h.host_uuid, "error": h.error,
             "since_unix_ms": h.since_unix_ms}
        if h.state == UP and h.snap is not None:
            ld = decide.Load(h, fleet.memory, now, fleet.knobs)
            r.update(domains=len(h.snap.domains),
                     idle=sum(1 for d in h.snap.domains if decide.idle(d)),
                     load_vcpus=float(ld.cpu), budget_vcpus=float(ld.cpu_cap),
                     memory_bytes=ld.mem * 1024,
                     budget_memory_bytes=ld.mem_cap * 1024,
                     domain_names=[d.name for d in h.snap.domains])
        rows.append(r)
    return rows


def render_metrics(fleet, rows, up=True, start=None):
    out = []

    def metric(name, kind, text, samples):
        out.append("# HELP %s%s %s" % (P, name, text))
        out.append("# TYPE %s%s %s" % (P, name, kind))
        for labels, v in samples:
            out.append("%s%s%s %s" % (P, name, labels, v))

    c = fleet.counters
    metric("up", "gauge", "1 while the fleet daemon runs", [("", int(up))])
    metric("start_time_seconds", "gauge", "Unix time of the start",
           [("", "%.3f" % (start or 0))])
    metric("hosts", "gauge", "Hosts in each state",
           [('{state="%s"}' % s, sum(r["state"] == s for r in rows))
            for s in STATES])
    metric("host_state", "gauge", "1 for the state the host is in",
           [('{host="%s",state="%s"}' % (r["name"], r["state"]), 1)
            for r in rows])
    metric("host_standby", "gauge", "1: the host was handed to standby",
           [('{host="%s"}' % r["name"], int(r["state"] == STANDBY))
            for r in rows])
    for key, name, text in (
            ("domains", "host_domains", "Active domains of an up host"),
            ("idle", "host_idle_domains", "Fully idle domains of an up host"),
            ("load_vcpus", "host_load_vcpus",
             "Weighted vCPU load of an up host"),
            ("budget_vcpus", "host_budget_vcpus", "Its vCPU budget"),
            ("memory_bytes", "host_memory_bytes",
             "Memory of its active domains"),
            ("budget_memory_bytes", "host_budget_memory_bytes",
             "Its memory budget")):
        metric(name, "gauge", text,
               [('{host="%s"}' % r["name"], r[key]) for r in rows
                if key in r])
    metric("migrations_in_flight", "gauge", "Migrations under way",
           [("", len(fleet.migrations))])
    metric("migrations_total", "counter", "Migrations by reason and result",
           [('{reason="%s",result="%s"}' % (w, res),
             c.migrations.get((w, res), 0))
            for w in ("pack", "unpack") for res in ("ok", "skipped",
                                                    "failed")])
    metric("migration_seconds_total", "counter",
           "Time the successful migrations took",
           [('{reason="%s"}' % w, "%.3f" % c.migration_s.get(w, 0.0))
            for w in ("pack", "unpack")])
    metric("hooks_total", "counter", "Host hooks run, by step and result",
           [('{op="%s",result="%s"}' % (op, res), c.hooks.get((op, res), 0))
            for op in ("begin", "end") for res in ("ok", "failed")])
    metric("unresolved_migrations", "gauge",
           "Migrations whose end is not settled yet",
           [("", len(fleet.unresolved))])
    metric("domains_lost_total", "counter",
           "Migrations after which the domain ran on neither host",
           [("", c.lost)])
    metric("last_action_timestamp_seconds", "gauge",
           "Unix time of the last migration or hook (0: none yet)",
           [("", "%.3f" % c.last_action)])
    return "\n".join(out) + "\n"


class Outputs:
    """The metrics file (None: none) and the status file in the state
    directory (None: none)."""

    def __init__(self, metrics_path, state_dir, log):
        self.metrics_path = os.path.abspath(metrics_path) \
            if metrics_path else None
        self.status_path = os.path.join(state_dir, STATUS) \
            if state_dir else None
        self.log = log
        self.start = time.time()
        self.written = {}
        self.errors = {}

    def _put(self, path, text, final=False):
        """@text to @path if it changed; a failure logged once until a
        write works; @final (the exit): the file removed when its last
        version cannot be written, so that none is left saying the daemon
        runs (unlink needs no room)."""
        if path is None or self.written.get(path) == text:
            return
        try:
            _write(path, text)
        except OSError as e:
            if self.errors.get(path) != str(e):
                self.errors[path] = str(e)
                self.log("error %s: not written (%s): it may say what is no "
                         "longer true" % (path, e))
            if final:
                try:
                    os.unlink(path)
                    self.log("warning %s: removed: its last version cannot "
                             "be written" % path)
                except OSError:
                    pass
            return
        if self.errors.pop(path, None) is not None:
            self.log("%s: written again" % path)
        self.written[path] = text

    def update(self, fleet, running=True):
        rows = host_rows(fleet)
        self._put(self.metrics_path,
                  render_metrics(fleet, rows, running, self.start),
                  not running)
        st = {"running": running, "pid": os.getpid(),
              "start_unix_ms": int(self.start * 1000), "hosts": rows,
              "migrations": [{"name": m.move.name, "src": m.move.src,
                              "dst": m.move.dst, "why": m.move.why}
                             for m in fleet.migrations.values()],
              "unresolved": sorted(fleet.unresolved),
              "dry_run": fleet.opts.dry_run}
        self._put(self.status_path, json.dumps(st, sort_keys=True,
                                               indent=1) + "\n",
                  not running)

    def force_down(self):
        """A forced exit (stopwatch.py's thread): the metrics file says
        sysidle_fleet_up 0 and nothing else (its other values may no longer
        be true); no lock, no stdio."""
        if self.metrics_path is None:
            return
        text = ("# HELP %sup 1 while the fleet daemon runs\n# TYPE %sup "
                "gauge\n%sup 0\n" % (P, P, P)).encode()
        tmp = self.metrics_path + ".down"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC |
                         os.O_CLOEXEC, 0o644)
            try:
                if os.write(fd, text) != len(text):
                    raise OSError(errno.ENOSPC, "short write")
            finally:
                os.close(fd)
            os.rename(tmp, self.metrics_path)
        except OSError:
            # not written (a full disk): nothing left saying it runs
            for p in (tmp, self.metrics_path):
                try:
                    os.unlink(p)
                except OSError:
                    pass
