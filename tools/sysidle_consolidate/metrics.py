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
      raw state changes (a VMM without the filter)."""
import os
import time

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
        self.error = None

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
        return "\n".join(out) + "\n"

    def update(self, targets, journal):
        """Writes the file when its content changed."""
        text = self.render(targets, journal)
        if text == self.written:
            return
        tmp = self.path + ".tmp"
        try:
            with open(tmp, "w") as f:
                f.write(text)
            os.replace(tmp, self.path)
            self.written = text
            self.error = None
        except OSError as e:
            if self.error != str(e):
                self.error = str(e)
                from .common import Log
                Log()("error --metrics-file %s: %s" % (self.path, e))
