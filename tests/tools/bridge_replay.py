#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""What the tests of build/sysidle-libvirt on libvirt's test driver share
(test_libvirt_bridge_*.py): the host (test:///PATH/node.xml, written here:
several domains on a host of 8 CPUs), the recorded statistics
(--stats-file, written here, since the test driver has no vCPU
statistics), the recording hooks, the bridge run in the foreground or the
background, and readers of its output (the states published, the metadata
it reads back with --verbose, the hooks' records, the metrics file).

main() skips a program (77) when the bridge is not built or the test
driver cannot be opened, then runs its checks in a temporary directory
holding node.xml. A test program imports it after putting this directory
on sys.path, with the bridge's path as its first argument."""
import os
import re
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                ".."))
from tap import check, finish  # noqa: E402
import urnschema  # noqa: E402

BRIDGE = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else None
NS = "urn:sysidle:1"
ENV = ["HOME=/", "LC_ALL=C",
       "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]
SINCE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
# each log line: "TIME LEVEL message"; stripped before the lines are read
LOG_PREFIX = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z "
                        r"(?:INFO|WARNING) ", re.M)
HAVE_PREFIX = []    # texts seen, for the one check that lines have it


def unlog(text):
    HAVE_PREFIX.append(text)
    return LOG_PREFIX.sub("", text)


# ---- the host: libvirt's test driver ----

UUID = "5a1d1e00-0000-4000-8000-0000000000%02d"
# name, vCPUs, uuid number, running
DOMAINS = [("web1", 2, 1, True), ("db & 2", 1, 2, True), ("big", 12, 3, True),
           ("nostats", 1, 4, True), ("gone", 2, 5, True), ("resize", 2, 6, True),
           ("off", 1, 7, False), ("flap", 1, 8, True), ("waiter", 2, 9, True),
           ("napper", 2, 10, True)]


def xml_escape(s):
    return (s.replace("&", "&amp;").replace("<", "&lt;")
            .replace(">", "&gt;").replace("'", "&apos;"))


def node_xml(path, domains):
    out = ["<?xml version='1.0'?>", "<node>",
           "  <cpu><mhz>2000</mhz><model>i686</model><nodes>1</nodes>"
           "<sockets>1</sockets><cores>8</cores><threads>1</threads>"
           "<active>8</active><max>8</max></cpu>",
           "  <memory>16777216</memory>"]
    for name, vcpus, u, running in domains:
        out.append(
            "  <domain type='test' xmlns:test='http://libvirt.org/schemas/"
            "domain/test/1.0'><name>%s</name><uuid>%s</uuid>"
            "<memory>1048576</memory><vcpu>%d</vcpu><os><type>hvm</type>"
            "</os>%s</domain>" % (xml_escape(name), UUID % u, vcpus,
                                  "" if running else
                                  "<test:runstate>5</test:runstate>"))
    out.append("</node>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def vcpus(counts, blocking=None):
    """vcpu.N.* for halt-exit @counts (blocking: all, or the given list)."""
    blocking = blocking or [1] * len(counts)
    return " ".join("vcpu.%d.halt_exits.sum=%d vcpu.%d.blocking.cur=%d" %
                    (i, c, i, b) for i, (c, b) in
                    enumerate(zip(counts, blocking)))


def write_stats(path, scans, step_ms=100):
    """@scans: a list (one per scan) of {domain token: stats string or
    None (no record)}."""
    with open(path, "w") as f:
        f.write("# recorded statistics: T_MS DOMAIN KEY=VALUE...\n")
        for i, scan in enumerate(scans):
            for dom, stats in scan.items():
                if stats is not None:
                    f.write(("%d %s %s" % (i * step_ms, dom, stats)).rstrip()
                            + "\n")


def main_scans(n=20):
    scans = []
    for i in range(n):
        s = {}
        # web1: idle, busy at scan 6 (vCPU 0 woke and slept), idle again
        s["web1"] = vcpus([10 + (i >= 6), 20])
        # db & 2 (by uuid): its vCPU halts and wakes all the time
        s[UUID % 2] = vcpus([100 + i])
        s["big"] = vcpus([7] * 12)
        s["nostats"] = ""                 # a record without statistics
        # gone: shut off for scans 5-7, then running again
        s["gone"] = ("state.state=5" if 5 <= i <= 7 else
                     "state.state=1 " + vcpus([3, 4]))
        # resize: 2 vCPUs, 3 from scan 10
        s["resize"] = vcpus([1, 2] + ([3] if i >= 10 else []))
        s["flap"] = vcpus([5])
        # waiter: blocking.cur reads 0 (as through QEMU); halted all along
        # by halt_wait_ns until vCPU 1 runs from scan 12 on
        s["waiter"] = vcpus([4, 4], [0, 0]) + (
            " vcpu.0.halt_wait_ns.sum=%d vcpu.1.halt_wait_ns.sum=%d" %
            (i * 100000000, min(i, 12) * 100000000))
        # napper: idle, suspended (state.state=3, paused) for scans 6-9
        # while its counters move, running again from scan 10
        s["napper"] = ("state.state=3 " + vcpus([50 + i, 60 + i])
                       if 6 <= i <= 9 else "state.state=1 " +
                       vcpus([50 + 9 * (i >= 10), 60 + 9 * (i >= 10)]))
        if i == 4:
            s["ghost"] = vcpus([1])       # no such domain
        scans.append(s)
    return scans


# ---- hooks ----

# One line per run: argv[0..4] and the stdin (libvirt's domain XML, its
# newlines and tabs made spaces), tab-separated.
RECORDER = """#!/bin/sh
xml=$(tr '\\n\\t' '  ')
printf '%%s\\t%%s\\t%%s\\t%%s\\t%%s\\t%%s\\t%%s\\n' "$0" "$1" "$2" "$3" "$4" "$xml" \
  "$(tr '\\0' ' ' < /proc/$$/environ)" >> '%(record)s'
%(extra)s
"""
SLOW_IDLE = '[ "$2" = idle ] && sleep %s\n'
HANG = """if [ "$1 $2 $3" = "web1 idle begin" ]; then
  echo "hanging on purpose" >&2
  sleep 1000 &
  echo "$$ $!" >> '%(marker)s'
  wait
fi
"""


def write_hook(path, record, extra=""):
    with open(path, "w") as f:
        f.write(RECORDER % {"record": record, "extra": extra})
    os.chmod(path, 0o755)


def records(path):
    out = []
    try:
        with open(path) as f:
            for line in f:
                p = line.rstrip("\n").split("\t")
                if len(p) == 7:
                    out.append({"hook": p[0], "name": p[1], "op": p[2],
                                "subop": p[3], "extra": p[4], "xml": p[5],
                                "env": sorted(p[6].split())})
    except FileNotFoundError:
        pass
    return out


def ev(r):
    return "%s %s %s" % (r["op"], r["subop"], r["extra"])


def by_domain(recs, hook=None):
    out = {}
    for r in recs:
        if hook is None or r["hook"] == hook:
            out.setdefault(r["name"], []).append(r)
    return out


# ---- running the bridge ----

def bridge(args, timeout=60):
    p = subprocess.run([BRIDGE] + args, capture_output=True, text=True,
                       timeout=timeout)
    return p.returncode, unlog(p.stdout), unlog(p.stderr)


class Bridge:
    """The bridge in the background, its stdout and stderr in files."""

    def __init__(self, tmp, tag, args):
        self.out_path = os.path.join(tmp, tag + ".out")
        self.err_path = os.path.join(tmp, tag + ".err")
        self.out_f = open(self.out_path, "w")
        self.err_f = open(self.err_path, "w")
        self.p = subprocess.Popen([BRIDGE] + args, stdout=self.out_f,
                                  stderr=self.err_f)
        # its start (/proc/PID/stat field 22), what its leases name
        try:
            with open("/proc/%d/stat" % self.p.pid) as f:
                self.start_ticks = f.read().rsplit(")", 1)[1].split()[19]
        except (OSError, IndexError):
            self.start_ticks = None

    def text(self, which="out"):
        with open(self.out_path if which == "out" else self.err_path) as f:
            return unlog(f.read())

    def wait(self, timeout=60):
        try:
            rc = self.p.wait(timeout)
        except subprocess.TimeoutExpired:
            self.p.kill()
            rc = self.p.wait()
            rc = "timeout (killed)"
        self.out_f.close()
        self.err_f.close()
        return rc


def poll_until(fn, timeout):
    end = time.monotonic() + timeout
    while True:
        v = fn()
        if v or time.monotonic() > end:
            return v
        time.sleep(0.05)


DROPPED_LINE = re.compile(r"^(\d+) hook events? dropped: .*$", re.M)


def hooks_match(have, want):
    """@have (argv tails) against @want, where "idle end MS" stands for any
    duration."""
    return len(have) == len(want) and all(
        h == w or (w == "idle end MS" and re.fullmatch(r"idle end \d+", h))
        for h, w in zip(have, want))


def coalesced_forms(want):
    """Every other sequence the hooks' coalescing can make of @want: any
    set of adjacent idle hook pairs removed, an "idle end" with the "idle
    begin" after it, or an "idle begin" with the "idle end" after it
    (started and stopped stay). After an end/begin pair the next "idle end"
    carries a later duration: "MS"."""
    out = []
    for i in range(len(want) - 1):
        a, b = want[i], want[i + 1]
        if a.startswith("idle end") and b == "idle begin -":
            rest = want[:i] + want[i + 2:]
            j = next((k for k in range(i, len(rest))
                      if rest[k].startswith("idle end")), None)
            if j is not None:
                rest = rest[:j] + ["idle end MS"] + rest[j + 1:]
        elif a == "idle begin -" and b.startswith("idle end"):
            rest = want[:i] + want[i + 2:]
        else:
            continue
        out.append(rest)
        out.extend(coalesced_forms(rest))
    return out


STATE_LINE = re.compile(r"^(.+?): (NOT|SHORT|LONG|FULL|FULL_NOTED) \((.*)\)$")
BACK_LINE = re.compile(r"^(.+?): metadata urn:sysidle:1 read back: (.*)$")


def published(out):
    """{domain: [(state, reason)]} from the log lines."""
    d = {}
    for line in out.splitlines():
        m = STATE_LINE.match(line)
        if m:
            d.setdefault(m.group(1), []).append((m.group(2), m.group(3)))
    return d


def read_backs(out):
    d = {}
    for line in out.splitlines():
        m = BACK_LINE.match(line)
        if m:
            try:
                el = ET.fromstring(m.group(2))
            except ET.ParseError:
                el = None
            d.setdefault(m.group(1), []).append(el)
    return d


def check_xml(r, uuid, vcpus, state_pred, what):
    """@r's stdin is libvirt's own XML of the domain (the test driver's
    type='test', its <os>), holding the bridge's element, which validates
    against the schema."""
    try:
        dom = ET.fromstring(r["xml"])
        st = dom.find("metadata/{%s}state" % NS)
        ok = (dom.tag == "domain" and dom.get("type") == "test" and
              dom.find("os") is not None and
              dom.findtext("name") == r["name"] and
              dom.findtext("uuid") == uuid and st is not None and
              st.get("vcpus") == str(vcpus) and
              state_pred(st.get("state")) and
              SINCE.match(st.get("since", "")) is not None)
        bad = urnschema.validate(r["xml"])
    except ET.ParseError as e:
        ok, bad = False, str(e)
    return check(ok and not bad, what, "%s\n%s" % (bad, r["xml"]))


def metrics(path):
    """{(name, frozenset(labels)): value} of a Prometheus text file."""
    out = {}
    try:
        with open(path) as f:
            text = f.read()
    except FileNotFoundError:
        return out, ""
    for line in text.splitlines():
        m = re.match(r'^(\w+)(?:\{(.*)\})? (\S+)$', line)
        if m and not line.startswith("#"):
            labels = frozenset(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"',
                                          m.group(2) or ""))
            out[(m.group(1), labels)] = float(m.group(3))
    return out, text


def metric(ms, name, **labels):
    for (n, ls), v in ms.items():
        if n == name and all((k, x) in ls for k, x in labels.items()):
            return v
    return None



def main(tests):
    """Runs each of @tests with a temporary directory holding node.xml
    (DOMAINS); the program's exit status, 77 when the bridge is not built
    or libvirt's test driver cannot be opened here."""
    if not BRIDGE or not os.access(BRIDGE, os.X_OK):
        print("1..0 # SKIP sysidle-libvirt is not built")
        return 77
    with tempfile.TemporaryDirectory() as tmp:
        node = os.path.join(tmp, "node.xml")
        node_xml(node, DOMAINS)
        probe = os.path.join(tmp, "probe.stats")
        write_stats(probe, [{"web1": ""}])
        rc, out, err = bridge(["--libvirt", "test://" + node, "--stats-file",
                               probe, "--once"])
        if rc != 0 and "cannot connect to libvirt" in err:
            print("1..0 # SKIP libvirt's test driver cannot open %s: %s" %
                  (node, err.strip()))
            return 77
        for t in tests:
            t(tmp)
    return finish()
