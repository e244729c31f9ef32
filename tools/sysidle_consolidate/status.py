# SPDX-License-Identifier: GPL-2.0-only
"""--status: what a sysidle-consolidate holds, from its state directory:
whether a daemon runs on it (DIR/lock is held) and the journal's entries,
each VM it packed or suspended (journal.py), as a table or (--json) one
JSON object."""
import errno
import fcntl
import json
import os
import sys
import time

from .journal import NAME


def daemon_running(directory):
    """True when a process holds DIR/lock (a daemon or --once runs)."""
    try:
        fd = os.open(os.path.join(directory, "lock"), os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except OSError as e:
        return e.errno in (errno.EWOULDBLOCK, errno.EAGAIN)
    finally:
        os.close(fd)


def load(directory):
    """{"state_dir","running","vms":[...]}; raises OSError / ValueError."""
    try:
        with open(os.path.join(directory, NAME)) as f:
            doc = json.load(f)
    except FileNotFoundError:
        doc = {"entries": {}}
    entries = doc.get("entries") if isinstance(doc, dict) else None
    if not isinstance(entries, dict):
        raise ValueError("%s: not a journal" % os.path.join(directory, NAME))
    vms = []
    for key, e in sorted(entries.items()):
        if not isinstance(e, dict):
            continue
        cpus = sorted(set((e.get("threads") or {}).values())) \
            if e.get("kind") == "vmm" else \
            sorted(set(e.get("vcpus") or []) | {e.get("emulator") or ""} - {""})
        vms.append({"key": key, "name": e.get("name"), "kind": e.get("kind"),
                    "packed": bool(e.get("packed")),
                    "suspended": bool(e.get("suspended")),
                    "since_unix_ms": e.get("unix_ms"),
                    "pid": e.get("pid"), "uri": e.get("uri"),
                    "original_cpus": [str(c) for c in cpus]})
    return {"state_dir": os.path.abspath(directory),
            "running": daemon_running(directory), "vms": vms}


def ago(unix_ms, now):
    if not isinstance(unix_ms, (int, float)):
        return "-"
    s = max(0, int(now - unix_ms / 1000))
    if s < 120:
        return "%ds" % s
    if s < 7200:
        return "%dm%02ds" % (s // 60, s % 60)
    return "%dh%02dm" % (s // 3600, s // 60 % 60)


def table(st, now=None):
    """The human form: a header line, then one aligned row per VM."""
    now = time.time() if now is None else now
    lines = ["state directory %s: %s, %d VM%s held" %
             (st["state_dir"], "daemon running" if st["running"]
              else "no daemon running", len(st["vms"]),
              "" if len(st["vms"]) == 1 else "s")]
    rows = [("NAME", "KIND", "PACKED", "SUSPENDED", "SINCE", "WHERE",
             "ORIGINAL CPUS")]
    for v in st["vms"]:
        where = "pid %s" % v["pid"] if v["kind"] == "vmm" else (v["uri"] or "-")
        rows.append((v["name"] or "?", v["kind"] or "?",
                     "yes" if v["packed"] else "no",
                     "yes" if v["suspended"] else "no",
                     ago(v["since_unix_ms"], now), where,
                     " ".join(v["original_cpus"]) or "-"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    for r in rows:
        lines.append("  ".join(c.ljust(w) for c, w in zip(r, widths)) +
                     "  " + r[-1])
    return "\n".join(lines) + "\n"


def print_status(directory, as_json, out=None):
    """--status [--json]. Returns the exit status: 1 when @directory is
    not a state directory or its journal cannot be read."""
    out = out or sys.stdout
    if not os.path.isdir(directory):
        sys.stderr.write("sysidle-consolidate: --status: no state directory "
                         "%s (no sysidle-consolidate ran with --state-dir %s)"
                         "\n" % (directory, directory))
        return 1
    try:
        st = load(directory)
    except (OSError, ValueError) as e:
        sys.stderr.write("sysidle-consolidate: --status: %s\n" % e)
        return 1
    out.write(json.dumps(st, sort_keys=True) + "\n" if as_json else table(st))
    out.flush()
    return 0
