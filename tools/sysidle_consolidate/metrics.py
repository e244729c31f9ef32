# SPDX-License-Identifier: GPL-2.0-only
"""--metrics-file PATH: the tool's own metrics in the Prometheus text
format (for node_exporter's textfile collector), rewritten atomically
(PATH.tmp in the same directory, renamed over PATH) after each change
and never periodically:

  sysidle_consolidate_vms{state="watched"|"packed"|"suspended"}
  sysidle_consolidate_actions_total{action="pack"|"restore"|"suspend"|
      "resume"|"hold",result="ok"|"failed"|"retried"|"gone"}
  sysidle_consolidate_journal_entries
  sysidle_consolidate_reconcile_total{result="adopted"|"restored"|
      "dropped"}
  sysidle_consolidate_last_action_timestamp_seconds
  sysidle_consolidate_start_time_seconds
  sysidle_consolidate_settled_edges{watch="filtered"|"raw"}: this VMM's
      VMs followed with its filtered watch (settled edges) or with the
      raw state changes (a VMM without the filter).
  sysidle_consolidate_file_write_failures_total{file="journal"|"metrics"|
      "history"}: failed writes of the tool's files (writefail.py)
  sysidle_consolidate_metrics_written_timestamp_seconds: when this version
      was written

A write that fails is logged once with its cause, leaves no PATH.tmp, and
is tried again at the next step (every writefail.RETRY_S while it fails);
the first that works is logged. At exit, when the last version cannot be
written, PATH is removed: no old version is left claiming VMs packed or
suspended that the exit put back."""
import os
import time

from . import writefail

ACTIONS = ("pack", "restore", "suspend", "resume", "hold")
RESULTS = ("ok", "failed", "retried", "gone")
RECONCILE = ("adopted", "restored", "dropped")
P = "sysidle_consolidate_"


class Metrics:
    def __init__(self, path):
        self.path = os.path.abspath(path)
        self.start = time.time()
        self.actions = {(a, r): 0 for a in ACTIONS for r in RESULTS}
        self.reconcile = {r: 0 for r in RECONCILE}
        self.last_action = 0.0
        self.written = None
        from .common import Log
        self.health = writefail.WriteHealth("metrics", self.path, Log(),
                                            "--metrics-file")

    @property
    def error(self):
        return self.health.error

    def next_due(self):
        """The monotonic time of the next try, None while writes work."""
        return self.health.next_due()

    def action(self, action, result):
        if (action, result) in self.actions:
            self.actions[(action, result)] += 1
            self.last_action = time.time()

    def reconciled(self, result):
        if result in self.reconcile:
            self.reconcile[result] += 1

    def render(self, targets, journal):
        # followed: not forgotten, and (this VMM) its watch connected
        live = [t for t in targets
                if not t.gone and getattr(t, "sock", True) is not None]
        vms = {"watched": len(live),
               "packed": sum(t.packed is not None for t in live),
               "suspended": sum(bool(t.suspended) for t in live)}
        settled = [getattr(t, "settled", None) for t in live]
        out = []

        def metric(name, kind, text, samples):
            out.append("# HELP %s%s %s" % (P, name, text))
            out.append("# TYPE %s%s %s" % (P, name, kind))
            for labels, v in samples:
                out.append("%s%s%s %s" % (P, name, labels, v))
        metric("vms", "gauge", "VMs followed, packed and suspended now",
               [('{state="%s"}' % k, v) for k, v in vms.items()])
        metric("actions_total", "counter", "Actions by kind and result",
               [('{action="%s",result="%s"}' % k, v)
                for k, v in self.actions.items()])
        metric("journal_entries", "gauge", "Entries in the journal",
               [("", len(journal.entries))])
        metric("reconcile_total", "counter",
               "Journal entries reconciled at start, by result",
               [('{result="%s"}' % k, v) for k, v in self.reconcile.items()])
        metric("last_action_timestamp_seconds", "gauge",
               "Unix time of the last action (0: none yet)",
               [("", "%.3f" % self.last_action)])
        metric("start_time_seconds", "gauge", "Unix time of the start",
               [("", "%.3f" % self.start)])
        metric("settled_edges", "gauge", "This VMM's VMs followed with its "
               "filtered watch (settled edges) or its raw state changes",
               [('{watch="filtered"}', settled.count(True)),
                ('{watch="raw"}', settled.count(False))])
        metric("file_write_failures_total", "counter", "Failed writes of "
               "the tool's files (a full disk, an I/O error, a read-only "
               "file system), by file",
               [('{file="%s"}' % k, v)
                for k, v in sorted(writefail.FAILURES.items())])
        return "\n".join(out) + "\n"

    def update(self, targets, journal, final=False):
        """Writes the file when its content changed (or a write failed);
        @final: the last write, at exit: the file is removed when it
        cannot be written."""
        text = self.render(targets, journal)
        if text == self.written and not self.health.failing:
            return
        stamp = ("# HELP %smetrics_written_timestamp_seconds Unix time this "
                 "version was written\n# TYPE %smetrics_written_timestamp_"
                 "seconds gauge\n%smetrics_written_timestamp_seconds %.3f\n"
                 % (P, P, P, time.time()))
        tmp = self.path + ".tmp"
        try:
            with open(tmp, "w") as f:
                f.write(text + stamp)
            os.replace(tmp, self.path)
        except OSError as e:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            self.health.failed(e)
            if final:
                self.remove_stale()
            return
        self.written = text
        self.health.worked()

    def remove_stale(self):
        """At exit, the last version not written: the one there goes."""
        from .common import Log
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            return
        except OSError as e:
            Log()("error --metrics-file %s: its last version cannot be "
                  "written (%s), nor the file removed (%s): it still says "
                  "what was held before the exit" %
                  (self.path, self.health.error, e.strerror))
            return
        Log()("warning --metrics-file %s: removed: its last version "
              "cannot be written (%s)" % (self.path, self.health.error))
