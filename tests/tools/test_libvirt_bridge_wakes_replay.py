#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""sysidle-libvirt --wakes-file on libvirt's test driver with recorded
statistics (bridge_replay.py): a replay has no process to read, so each
watched domain's "host_wakeups" says "source":"host" and why its figures
are absent, the metrics say none is available and have no sample of the
host's families; the file is removed at the end; a --wakes-file that
cannot be written is warned once and counted, never fatal.

usage: test_libvirt_bridge_wakes_replay.py BRIDGE"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bridge_replay import (Bridge, bridge, check, main, main_scans,  # noqa
                           metric, metrics, poll_until, write_stats)


def read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def test_replay(tmp):
    node = os.path.join(tmp, "node.xml")
    stats = os.path.join(tmp, "wakes.stats")
    wfile = os.path.join(tmp, "wakes.json")
    mfile = os.path.join(tmp, "bridge.prom")
    write_stats(stats, main_scans(30))
    b = Bridge(tmp, "wakes", ["--libvirt", "test://" + node, "--stats-file",
                              stats, "--interval", "100", "--hooks",
                              os.path.join(tmp, "none"), "--wakes-file",
                              wfile, "--metrics-file", mfile])
    doc = poll_until(lambda: (read_json(wfile) or {}).get("domains") and
                     read_json(wfile), 20)
    ms, text = metrics(mfile)
    rc = b.wait()
    doms = {d["vm"]: d["host_wakeups"] for d in (doc or {}).get("domains",
                                                                [])}
    check("web1" in doms and all(
        h.get("source") == "host" and "replay" in h.get("absent", "")
        for h in doms.values()),
        "--wakes-file: each watched domain's host_wakeups says source host "
        "and why it is absent (%s)" % sorted(doms), json.dumps(doc))
    check(doc and doc.get("version") == 1 and doc.get("window_ms") == 60000
          and doc.get("writer_pid") == b.p.pid,
          "--wakes-file: version, window, writer", json.dumps(doc))
    check(metric(ms, "sysidle_libvirt_host_wakeups_available", vm="web1",
                 part="threads") == 0 and
          metric(ms, "sysidle_libvirt_host_wakeups_available", vm="web1",
                 part="kvm") == 0 and
          "# TYPE sysidle_libvirt_kvm_halt_wakeups_total counter" in text and
          not any(n.startswith("sysidle_libvirt_kvm_") or
                  n == "sysidle_libvirt_thread_wakeups_total"
                  for n, _ in ms),
          "metrics: nothing available, the host's families without samples",
          text)
    check(rc == 0 and not os.path.exists(wfile),
          "the end of the replay: exit 0, --wakes-file removed (%s)" % rc,
          b.text("err"))


def test_unwritable(tmp):
    node = os.path.join(tmp, "node.xml")
    stats = os.path.join(tmp, "wakes2.stats")
    mfile = os.path.join(tmp, "bridge2.prom")
    write_stats(stats, main_scans(5))
    rc, out, err = bridge(["--libvirt", "test://" + node, "--stats-file",
                           stats, "--interval", "100", "--hooks",
                           os.path.join(tmp, "none"), "--metrics-file", mfile,
                           "--wakes-file",
                           os.path.join(tmp, "no", "such", "dir", "w.json")])
    check(rc == 0 and err.count("--wakes-file") == 1,
          "a --wakes-file that cannot be written: warned once, exit 0 (%s)" %
          rc, err)


if __name__ == "__main__":
    sys.exit(main([test_replay, test_unwritable]))
