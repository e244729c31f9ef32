# SPDX-License-Identifier: GPL-2.0-only
"""sysidle-fleet --status: the hosts as the daemon of a state directory
last wrote them (STATE_DIR/status.json, outputs.py), whether a daemon
holds that directory now (its lock), and the journal's entries (the
migrations under way or not settled, the hosts in standby); a table, or
(--json) one JSON object."""
import json
import os
import sys
import time

from ..journal import NAME
from ..status import ago, daemon_running
from .outputs import STATUS


def load(directory):
    """{"state_dir", "running", "status", "journal"}; raises OSError or
    ValueError."""
    st = None
    try:
        with open(os.path.join(directory, STATUS)) as f:
            st = json.load(f)
    except FileNotFoundError:
        pass
    try:
        with open(os.path.join(directory, NAME)) as f:
            journal = json.load(f).get("entries", {})
    except FileNotFoundError:
        journal = {}
    if not isinstance(journal, dict) or (st is not None and
                                         not isinstance(st, dict)):
        raise ValueError("%s: not a sysidle-fleet state directory" %
                         directory)
    return {"state_dir": os.path.abspath(directory),
            "running": daemon_running(directory), "status": st,
            "journal": journal}


def table(doc, now=None):
    now = time.time() if now is None else now
    st = doc["status"] or {}
    lines = ["state directory %s: %s" % (
        doc["state_dir"], "daemon running" if doc["running"] else
        "no daemon running: what follows is what the last one wrote, and "
        "may be out of date")]
    rows = [("HOST", "STATE", "SINCE", "DOMAINS", "IDLE", "LOAD",
             "URI / ERROR")]
    for h in st.get("hosts", []):
        load = "%g/%g" % (h["load_vcpus"], h["budget_vcpus"]) \
            if "load_vcpus" in h else "-"
        rows.append((h["name"], h["state"], ago(h.get("since_unix_ms"), now),
                     str(h.get("domains", "-")), str(h.get("idle", "-")),
                     load, h["uri"] + (" (%s)" % h["error"]
                                       if h.get("error") else "")))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    for r in rows:
        lines.append("  ".join(c.ljust(w) for c, w in zip(r, widths)) +
                     "  " + r[-1])
    for m in st.get("migrations", []):
        lines.append("migrating %s %s -> %s (%s)" % (m["name"], m["src"],
                                                      m["dst"], m["why"]))
    for key, e in sorted(doc["journal"].items()):
        if e.get("kind") == "migration":
            lines.append("journal: migration of %s %s -> %s, %s" % (
                e.get("name"), e.get("src"), e.get("dst"), e.get("phase")))
        elif e.get("kind") == "standby":
            lines.append("journal: host %s %s" % (e.get("host"),
                                                  e.get("phase")))
    return "\n".join(lines) + "\n"


def print_status(directory, as_json, out=None):
    """Returns the exit status: 1 when @directory is not a state
    directory or cannot be read."""
    out = out or sys.stdout
    if not os.path.isdir(directory):
        sys.stderr.write("sysidle-fleet: --status: no state directory %s "
                         "(no sysidle-fleet ran with --state-dir %s)\n" %
                         (directory, directory))
        return 1
    try:
        doc = load(directory)
    except (OSError, ValueError) as e:
        sys.stderr.write("sysidle-fleet: --status: %s\n" % e)
        return 1
    out.write(json.dumps(doc, sort_keys=True) + "\n" if as_json
              else table(doc))
    out.flush()
    return 0
