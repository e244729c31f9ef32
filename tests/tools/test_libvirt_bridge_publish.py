#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""build/sysidle-libvirt on libvirt's test driver (bridge_replay.py) with
recorded statistics: what it publishes. A replay of 20 scans over several
domains: the states published and their reasons, the metadata read back
(--verbose) after each change, leased and valid against the schema, the
hooks per domain with libvirt's XML on their stdin; --once; the metrics
file (--metrics-file through promtool), the interval stretched while idle
(--idle-interval) and back at once, the lease renewed with the same since.

usage: test_libvirt_bridge_publish.py SYSIDLE_LIBVIRT
TAP on stdout. Exit: 0 all passed, 1 a check failed, 77 skipped (libvirt's
test driver cannot be opened)."""
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                ".."))
from tap import check, skip  # noqa: E402
import urnschema  # noqa: E402
from bridge_replay import (  # noqa: E402
    DOMAINS, DROPPED_LINE, ENV, LOG_PREFIX, UUID, Bridge, bridge, by_domain,
    check_xml, coalesced_forms, ev, hooks_match, main, main_scans, metric,
    metrics, poll_until, published, read_backs, records, vcpus, write_hook,
    write_stats)


def test_once(tmp):
    node = os.path.join(tmp, "node.xml")
    stats = os.path.join(tmp, "once.stats")
    write_stats(stats, main_scans(3))
    rc, out, err = bridge(["--libvirt", "test://" + node, "--stats-file",
                           stats, "--once", "--verbose"])
    lines = out.splitlines()
    check(rc == 0 and "web1: FULL_NOTED (2 vCPUs idle for 1 scan)" in lines
          and "big: SHORT (12 vCPUs idle for 1 scan)" in lines and
          any(l.startswith("nostats: SKIPPED (") for l in lines) and
          any(l.startswith("db & 2: NOT (vCPU 0 woke and halted again")
              for l in lines),
          "--once: two scans, each domain's state printed", out + err)
    backs = read_backs(out)
    w = backs.get("web1", [None])[-1]
    check(w is not None and w.get("name") == "FULL_NOTED" and
          w.get("num") == "4", "--once --verbose: the metadata set, read "
          "back", out)


def test_main(tmp):
    """A replay of 20 scans: the states published, read back, the hooks
    per domain, end of replay = stop."""
    node = os.path.join(tmp, "node.xml")
    stats = os.path.join(tmp, "main.stats")
    hooks = os.path.join(tmp, "hooks-main")
    record = os.path.join(tmp, "main.rec")
    os.makedirs(os.path.join(hooks, "vm.d"))
    write_hook(os.path.join(hooks, "vm"), record)
    write_hook(os.path.join(hooks, "vm.d", "20-rec"), record)
    write_hook(os.path.join(hooks, "vm.d", ".hidden"), record)
    write_stats(stats, main_scans())
    b = Bridge(tmp, "main", ["--libvirt", "test://" + node, "--stats-file",
                             stats, "--hooks", hooks, "--interval", "100",
                             "--verbose"])
    rc = b.wait(60)
    out, err = b.text(), b.text("err")
    check(rc == 0, "end of the replay: exit 0", "exit %s\n%s" % (rc, err))
    with open(b.out_path) as f:
        raw = [l for l in f.read().splitlines() if l]
    check(raw and all(LOG_PREFIX.match(l) for l in raw),
          "every log line is 'TIME LEVEL message' (ISO 8601 UTC, ms)",
          [l for l in raw if not LOG_PREFIX.match(l)][:5])
    pub = published(out)
    exp = {
        "web1": ["NOT", "FULL_NOTED", "NOT", "FULL_NOTED"],
        "db & 2": ["NOT"],
        "big": ["NOT", "SHORT", "LONG", "FULL_NOTED"],
        "gone": ["NOT", "FULL_NOTED", "NOT", "FULL_NOTED"],
        "resize": ["NOT", "FULL_NOTED", "NOT", "FULL_NOTED"],
        "flap": ["NOT", "FULL_NOTED"],
        "waiter": ["NOT", "FULL_NOTED", "NOT"],
        "napper": ["NOT", "FULL_NOTED", "NOT", "FULL_NOTED"],
    }
    for name, states in exp.items():
        got = [s for s, _ in pub.get(name, [])]
        check(got == states, "%s: states published %s" % (name, states),
              out)
    check(set(pub) == set(exp), "nothing published for the domain without "
          "statistics, the shut-off one or an unknown one", sorted(pub))
    reasons = dict((n, [r for _, r in v]) for n, v in pub.items())
    check(reasons.get("web1", [""])[0].startswith("watching 2 vCPUs") and
          reasons["web1"][1:2] == ["2 vCPUs idle for 1 scan"] and
          "full idle ended after 500 ms: vCPU 0 woke and halted again" in
          reasons["web1"][2:3],
          "web1: each publish logged with its reason", out)
    check(reasons.get("big", [""] * 4)[3] == "12 vCPUs idle for 3 scans",
          "big (12 vCPUs): FULL_NOTED after 3 all-idle scans", out)
    check(reasons.get("waiter", [""] * 3)[2:] == [
        "full idle ended after 1200 ms: vCPU 1 not halted for the whole "
        "interval"], "waiter: idle by halt_wait_ns.sum while blocking.cur "
        "reads 0, busy when it stops growing", out)
    check(any("vCPU count 2 -> 3" in r for r in reasons.get("resize", [])),
          "resize: the vCPU count change recreates the machine", out)
    check("gone: stopped (the domain is gone)" in out,
          "gone: shut off: logged as gone", out)
    # metadata read back after each publish
    backs = read_backs(out)
    w = backs.get("web1", [])
    ok = len(w) == 4 and all(e is not None and e.tag == "state" for e in w)
    if ok:
        ok = ([e.get("name") for e in w] == exp["web1"] and
              [e.get("num") for e in w] == ["0", "4", "0", "4"] and
              all(re.fullmatch(r"\d{13}", e.get("since_unix_ms", ""))
                  for e in w) and
              [e.get("full_idle_periods") for e in w] == ["0", "1", "1", "2"]
              and all(e.get("vcpus") == "2" for e in w))
    check(ok, "web1: the metadata read back after each change: <state "
          "name num since_unix_ms full_idle_periods vcpus/>",
          "\n".join(l for l in out.splitlines() if "read back" in l))
    ratios = ["full_idle_ratio_1m", "full_idle_ratio_1h",
              "full_idle_ratio_24h"]
    ok = len(w) == 4 and all(e.get(k) is None for k in ratios +
                             ["left_full_idle_unix_ms"] for e in w[:1])
    ok = ok and all(re.fullmatch(r"0\.\d{3}|1\.000", e.get(k) or "")
                    for e in w[1:] for k in ratios)
    ok = ok and w[1].get("left_full_idle_unix_ms") is None and \
        w[2].get("left_full_idle_unix_ms") == w[2].get("since_unix_ms") and \
        w[3].get("left_full_idle_unix_ms") == w[2].get("since_unix_ms") and \
        float(w[2].get("full_idle_ratio_1m")) > 0
    check(ok, "web1: the duty cycle in the metadata: none at the first "
          "state, then the three ratios as of since, the leave of full "
          "idle from the first one on", [e.attrib for e in w])
    allback = [e for es in backs.values() for e in es if e is not None]
    bad = [why for why in (urnschema.validate(ET.tostring(e, "unicode"))
                           for e in allback) if why]
    check(allback and not bad, "every metadata element read back (%d) "
          "validates against common/urn-sysidle.rng" % len(allback), bad)
    now = time.time() * 1000
    ok = bool(w) and all(
        e.get("writer_host") == socket.gethostname() and
        e.get("writer_pid") == str(b.p.pid) and
        e.get("writer_start_ticks") == b.start_ticks and
        0 < int(e.get("valid_until_unix_ms", 0)) -
        int(e.get("since_unix_ms", 0)) <= 30000 + 1000 and
        int(e.get("valid_until_unix_ms", 0)) > now - 60000 for e in w)
    check(ok, "web1: each element leased: writer host, pid and start, "
          "valid_until 30 s (--lease default) after it was written",
          [e.attrib for e in w])
    r = backs.get("resize", [])
    check(r and r[-1] is not None and r[-1].get("vcpus") == "3" and
          r[-1].get("name") == "FULL_NOTED", "resize: 3 vCPUs in the "
          "metadata after the change", r and r[-1] is not None and
          r[-1].attrib)
    check(reasons.get("napper", [""] * 3)[2:3] == [
        "full idle ended after 900 ms: vCPU 0 first sample"],
        "napper: FULL_NOTED kept while paused (its counters moving), a new "
        "baseline once it runs again", out)
    check(len(re.findall(r"^(.+): metadata removed", out, re.M)) == 8,
          "the stop removes the metadata of each watched domain", out)
    # warnings
    check(err.count("nostats: no vcpu.N.halt_exits.sum") == 1 and
          "not watched, never reported idle" in err,
          "the domain without statistics: one warning", err)
    check(err.count("no active libvirt domain 'ghost'") == 1,
          "a replayed domain libvirt does not have: one warning", err)
    # hooks
    recs = records(record)
    vm = os.path.join(os.path.realpath(hooks), "vm")
    rec20 = os.path.join(os.path.realpath(hooks), "vm.d", "20-rec")
    check(len(recs) % 2 == 0 and all(
        a["hook"] == vm and b_["hook"] == rec20 and ev(a) == ev(b_) and
        a["name"] == b_["name"] for a, b_ in zip(recs[::2], recs[1::2])),
        "each event: DIR/vm then vm.d/20-rec (dot files skipped)",
        "\n".join("%s %s %s" % (r["hook"], r["name"], ev(r)) for r in recs))
    dom = by_domain(recs, vm)
    # watched: running before the bridge's first scan; started: it came
    # while watched (gone, back); stopped: it went; unwatched: the replay
    # ended (the bridge stops) while it runs
    exp_hooks = {
        "web1": ["watched begin -", "idle begin -", "idle end 500",
                 "idle begin -", "idle end MS", "unwatched end -"],
        "db & 2": ["watched begin -", "unwatched end -"],
        "big": ["watched begin -", "idle begin -", "idle end MS",
                "unwatched end -"],
        "gone": ["watched begin -", "idle begin -", "idle end MS",
                 "stopped end -", "started begin -", "idle begin -",
                 "idle end MS", "unwatched end -"],
        "resize": ["watched begin -", "idle begin -", "idle end 900",
                   "idle begin -", "idle end MS", "unwatched end -"],
        "flap": ["watched begin -", "idle begin -", "idle end MS",
                 "unwatched end -"],
        "waiter": ["watched begin -", "idle begin -", "idle end 1200",
                   "unwatched end -"],
        "napper": ["watched begin -", "idle begin -", "idle end 900",
                   "idle begin -", "idle end MS", "unwatched end -"],
    }
    # With 8 domains and two shell hooks per event the hook thread can fall
    # behind a 100 ms replay on a loaded host; then a domain's pending
    # "idle end" and the "idle begin" after it are coalesced away, as
    # documented. That form is accepted only when the bridge says at exit
    # that it dropped hook events.
    dropped = DROPPED_LINE.search(err)
    for name, want in exp_hooks.items():
        have = [ev(r) for r in dom.get(name, [])]
        forms = [want] + (coalesced_forms(want) if dropped else [])
        ok = any(hooks_match(have, f) for f in forms)
        exact = hooks_match(have, want)
        check(ok, "%s: hooks %s%s" % (name, ", ".join(want),
                                      "" if exact or not ok else
                                      " (an idle end/begin pair coalesced; "
                                      "the bridge reported '%s')" %
                                      dropped.group(0)),
              "%s\n%s" % (have, err))
    check(set(dom) == set(exp_hooks), "no hooks for the domain without "
          "statistics, nor the shut-off one", sorted(dom))
    uuids = dict((n, UUID % u) for n, _, u, _ in DOMAINS)
    # By event, not by position: under load a pair may be coalesced away
    # (accepted above only when the bridge said so).
    for name, event, nth, nvcpus, state, what in [
            ("web1", "watched begin -", 1, 2, "NOT", "web1 watched: "
             "libvirt's domain XML on stdin (name, uuid, 2 vCPUs)"),
            ("web1", "idle begin -", 1, 2, "FULL_NOTED",
             "web1 idle begin: domain XML with state FULL_NOTED"),
            ("web1", "idle end 500", 1, 2, "NOT",
             "web1 idle end: domain XML with state NOT"),
            ("resize", "idle begin -", 2, 3, "FULL_NOTED",
             "resize: the hooks see 3 vCPUs after the change")]:
        found = [r for r in dom.get(name, []) if ev(r) == event]
        r = found[nth - 1] if len(found) >= nth else None
        if r is None and dropped:
            skip(what, "its hook event was coalesced away (%s)" %
                 dropped.group(0))
        elif r is None:
            check(False, what, "no '%s' hook for %s" % (event, name))
        else:
            check_xml(r, uuids[name], nvcpus, lambda s, w=state: s == w,
                      what)
    d = dom.get("db & 2", [])
    if d:
        check_xml(d[0], uuids["db & 2"], 1, lambda s: s == "NOT",
                  "'db & 2': the name intact in argv, escaped in the XML")
        check("<name>db &amp; 2</name>" in d[0]["xml"],
              "'db & 2': &amp; in <name>", d[0]["xml"])
    check(all(r["env"] == sorted(ENV) for r in recs),
          "hooks: environment exactly LC_ALL, PATH, HOME",
          set(tuple(r["env"]) for r in recs))


def test_metrics_lease(tmp):
    """--metrics-file, --idle-interval and --lease on a replay: web1 and
    flap fully idle (the interval stretches to --idle-interval; the
    lease is renewed with the same since), then flap busy (back to
    --interval at once)."""
    node = os.path.join(tmp, "node.xml")
    stats = os.path.join(tmp, "metrics.stats")
    mfile = os.path.join(tmp, "bridge.prom")
    write_stats(stats, [{"web1": vcpus([1, 1]),
                         "flap": vcpus([1 if i < 14 else i])}
                        for i in range(34)])
    b = Bridge(tmp, "metrics", ["--libvirt", "test://" + node,
                                "--stats-file", stats, "--interval", "50",
                                "--idle-interval", "400", "--lease", "3",
                                "--metrics-file", mfile, "--verbose"])
    seen = {}

    def stretched():
        ms, text = metrics(mfile)
        if metric(ms, "sysidle_libvirt_interval_seconds") == 0.4:
            seen["idle"] = (ms, text, time.time())
            return True
        return False
    poll_until(stretched, 20)
    ms, text, t_read = seen.get("idle", ({}, "", 0))
    check(bool(ms), "all watched domains fully idle: the interval "
          "stretched to --idle-interval 400 ms (in the metrics)",
          metrics(mfile)[1])
    promtool = shutil.which("promtool")
    if promtool and text:
        p = subprocess.run([promtool, "check", "metrics"], input=text,
                           capture_output=True, text=True, timeout=30)
        check(p.returncode == 0 and not p.stdout.strip() and
              not p.stderr.strip(), "the bridge's metrics file passes "
              "promtool check metrics", p.stdout + p.stderr + text)
    else:
        check(False, "promtool check metrics on the bridge's metrics file",
              "promtool is not installed (Debian: prometheus)")
    since = metric(ms, "sysidle_vm_full_idle_since_timestamp_seconds",
                   vm="web1")
    check(metric(ms, "sysidle_vm_full_idle", vm="web1") == 1 and
          since is not None and t_read - 10 < since <= t_read and
          metric(ms, "sysidle_vm_state", vm="web1",
                 uuid=UUID % 1) == 4 and
          metric(ms, "sysidle_libvirt_domain_source", vm="web1",
                 source="file") == 1 and
          metric(ms, "sysidle_libvirt_domains_watched") == 2 and
          metric(ms, "sysidle_libvirt_up") == 1,
          "metrics: web1 fully idle since %s (read at %.3f), its state, "
          "uuid and source; 2 domains watched" % (since, t_read), text)
    done = metric(ms, "sysidle_vm_full_idle_seconds_total", vm="web1")
    left = metric(ms, "sysidle_vm_left_full_idle_timestamp_seconds",
                  vm="web1")
    busy = metric(ms, "sysidle_vm_longest_busy_seconds", vm="web1")
    check(done is not None and done >= 0 and left is not None and
          (left == 0 or left <= since) and busy is not None and busy >= 0 and
          re.search(r"^# TYPE sysidle_vm_full_idle_seconds_total counter$",
                    text, re.M),
          "metrics: web1's full-idle seconds of the ended periods (a "
          "counter), its last leave of full idle (before its since) and "
          "longest busy stretch", text)
    back = poll_until(lambda: metric(metrics(mfile)[0],
                      "sysidle_libvirt_interval_seconds") == 0.05, 20)
    check(back, "flap busy: the interval back to --interval 50 ms",
          metrics(mfile)[1])
    rc = b.wait(60)
    ms, text = metrics(mfile)
    check(rc == 0 and metric(ms, "sysidle_libvirt_up") == 0 and
          metric(ms, "sysidle_libvirt_domains_watched") == 0,
          "at exit: the file says sysidle_libvirt_up 0", text)
    web = [e for e in read_backs(b.text()).get("web1", [])
           if e is not None and e.get("name") == "FULL_NOTED"]
    sinces = {e.get("since_unix_ms") for e in web}
    until = [int(e.get("valid_until_unix_ms", 0)) for e in web]
    duty = {tuple(e.get(k) for k in ("full_idle_ratio_1m",
                                      "full_idle_ratio_1h",
                                      "full_idle_ratio_24h",
                                      "left_full_idle_unix_ms"))
            for e in web}
    check(len(web) >= 2 and len(sinces) == 1 and until == sorted(until) and
          len(set(until)) == len(until) and len(duty) == 1,
          "--lease 3: web1's FULL_NOTED renewed (%d writes, the same since "
          "and duty cycle, each valid_until later)" % len(web),
          [e.attrib for e in web])


if __name__ == "__main__":
    sys.exit(main([test_once, test_main, test_metrics_lease]))
