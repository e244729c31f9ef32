#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-only
"""What the tests of tools/sysidle-consolidate with libvirt domains share
(test_consolidate_libvirt_*.py, test_consolidate_vmm_pause.py): the
tool's path and modules, libvirt's test driver host and the Run harness.

The tool's modules run in the test's process against libvirt's test
driver (test:///PATH/node.xml: a host of 8 CPUs and domains with their
own pinning; the driver's state lives in the process that opened it, so
the checks go through the tool's own connection). The idle state is set the
way the libvirt bridge publishes it: <state name=.. num=.. since_unix_ms=..>
in the domain's metadata, namespace urn:sysidle:1. main() runs a test
program's checks on a fresh node.xml.

A test program imports it after putting this directory on sys.path, with
the tool's path (tools/sysidle-consolidate) as its first argument; without
the libvirt binding the program exits 77 (skipped) here."""
import os
import re
import subprocess
import sys
import tempfile
import time

TOOL = os.path.abspath(sys.argv[1])
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                ".."))
from tap import check, finish  # noqa: E402

sys.path.insert(0, os.path.dirname(TOOL))

try:
    import libvirt
except ImportError as e:
    print("# the libvirt Python binding is not importable by %s (%s): "
          "skipped" % (sys.executable, e))
    sys.exit(77)

from sysidle_consolidate import common, daemon, policy  # noqa: E402
from sysidle_consolidate import libvirt_source  # noqa: E402

NS = "urn:sysidle:1"
NUM = {s: i for i, s in enumerate(common.STATES)}
IDLE = {7}
# The daemon times --suspend-after from the state's since_unix_ms, a whole
# millisecond (truncated): its pause may come up to 1 ms before 0.3 s after
# the test's own clock read taken just before the change.
MS_ROUND = 0.002
STEP = 0.01
NODE = """<node>
  <cpu><mhz>2000</mhz><model>i686</model><nodes>1</nodes><sockets>1</sockets>
    <cores>8</cores><threads>1</threads></cpu>
  <memory>8388608</memory>
  %s
</node>
"""
DOMAIN = """<domain type="test">
    <name>%(name)s</name>
    <memory>65536</memory>
    <vcpu placement="static">%(vcpus)d</vcpu>
    %(cputune)s
    %(metadata)s
    <os><type>hvm</type></os>
  </domain>"""


def domain_xml(name, vcpus, pins=None, emu=None, state=None):
    tune = ""
    if pins or emu:
        tune = "<cputune>%s%s</cputune>" % (
            "".join('<vcpupin vcpu="%d" cpuset="%s"/>' % (i, c)
                    for i, c in enumerate(pins or [])),
            '<emulatorpin cpuset="%s"/>' % emu if emu else "")
    meta = ""
    if state:
        meta = ('<metadata><sysidle:state xmlns:sysidle="%s" name="%s" '
                'num="%d" since_unix_ms="%d"/></metadata>' %
                (NS, state, NUM[state], int(time.time() * 1000) - 3600000))
    return DOMAIN % {"name": name, "vcpus": vcpus, "cputune": tune,
                     "metadata": meta}


# web: own pinning; db: 4 vCPUs, own pinning; batch: no pinning, no state;
# cold: fully idle for an hour already (preloaded)
DOMAINS = [domain_xml("web", 2, ["0", "1-2"], "3", "NOT"),
           domain_xml("db", 4, ["0-1", "2-3", "4", "5"], "0-5", "NOT"),
           domain_xml("batch", 1),
           domain_xml("cold", 2, ["2", "3"], "2-3", "FULL_NOTED")]


STATE_ROOT = tempfile.TemporaryDirectory()
LOG_PREFIX = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z "
                        r"(DEBUG|INFO|WARNING|ERROR) ")


def run_tool(argv, **kw):
    """subprocess.run of the tool; its stdout lines without their log
    prefix ("TIME LEVEL "), a line without one marked "NO PREFIX: "."""
    p = subprocess.run(argv, **kw)
    out = []
    for line in p.stdout.splitlines():
        m = LOG_PREFIX.match(line)
        out.append(line[m.end():] if m else "NO PREFIX: " + line)
    p.stdout = "".join(line + "\n" for line in out)
    return p


def fresh_state():
    """A --state-dir of its own for one run of the tool: the test driver's
    domains are new in each process, a journal must not outlive them."""
    return tempfile.mkdtemp(dir=STATE_ROOT.name)


def cpus(cpumap):
    return {i for i, b in enumerate(cpumap) if b}


class Run:
    """The tool's libvirt source on its own connection (a fresh copy of
    node.xml), driven by the daemon's loop in this thread."""

    def __init__(self, uri, policies="pack", idle=IDLE, suspend_after=10.0,
                 suspend_max=60.0, dry=False, events=False, interval=0.02,
                 wrap=None):
        self.lines = []
        self.log = common.Log(out=self.lines)
        self.ctx = daemon.Context(self.log, policy.parse_policy(policies),
                                  suspend_after, suspend_max, idle=idle,
                                  dry=dry)
        self.src = libvirt_source.LibvirtSource(
            self.ctx, uri, idle=idle, interval=interval, events=events,
            wrap=wrap)
        self.d = daemon.Daemon(self.ctx, [self.src])
        self.rounds = []
        self.round("step", self.d.step)
        self.conn = self.src.conn

    def round(self, kind, fn):
        """Runs @fn (the daemon's step or wait) and records it: (kind,
        monotonic start, end, log lines so far). The daemon runs in this
        thread: these times are its own, and a check that counts its
        rounds, or looks for a step it let pass, does not depend on how
        fast a loaded host runs it."""
        t0 = time.monotonic()
        v = fn()
        self.rounds.append((kind, t0, time.monotonic(), len(self.lines)))
        return v

    def round_of(self, pattern, start=0):
        """The index of the round that logged the first line from index
        @start on matching @pattern, else None."""
        for i in range(start, len(self.lines)):
            if re.search(pattern, self.lines[i]):
                for k, r in enumerate(self.rounds):
                    if r[3] > i:
                        return k
        return None

    def rounds_from(self, t):
        """The index of the first round that started at or after the
        monotonic time @t."""
        for k, r in enumerate(self.rounds):
            if r[1] >= t:
                return k
        return len(self.rounds)

    def missed(self, first, last, due):
        """The steps from round @first to before round @last that started
        at or after @due (a time-based decision was due then: each step
        makes them all): chances the daemon let pass."""
        return [r for r in self.rounds[first:last]
                if r[0] == "step" and r[1] >= due]

    def dom(self, name):
        return self.conn.lookupByName(name)

    def until(self, fn, timeout):
        """Runs the loop until fn() is true (its value), at most @timeout
        seconds; None then."""
        end = time.monotonic() + timeout
        while True:
            v = fn()
            if v:
                return v
            now = time.monotonic()
            if now >= end:
                return None
            due = self.round("step", self.d.step)
            due = min(d for d in (due, now + STEP, end) if d is not None)
            self.round("wait", lambda: self.d.wait(due))

    def run_for(self, seconds):
        """Runs the loop for @seconds (observing that nothing happens)."""
        self.until(lambda: False, seconds)

    def line(self, pattern, timeout=5, start=0):
        def find():
            for l in self.lines[start:]:
                if re.search(pattern, l):
                    return l
            return None
        return self.until(find, timeout)

    def set_state(self, name, state, since_ms=None):
        since = int(time.time() * 1000) if since_ms is None else since_ms
        self.dom(name).setMetadata(
            libvirt.VIR_DOMAIN_METADATA_ELEMENT,
            '<state name="%s" num="%d" since_unix_ms="%d"/>' %
            (state, NUM[state], since), "sysidle", NS, 0)

    def drop_state(self, name):
        self.dom(name).setMetadata(libvirt.VIR_DOMAIN_METADATA_ELEMENT,
                                   None, None, NS, 0)

    def pins(self, name):
        d = self.dom(name)
        return ([cpus(m) for m in d.vcpuPinInfo(0)],
                cpus(d.emulatorPinInfo(0)))

    def packed(self, name, idle=IDLE):
        v, e = self.pins(name)
        return all(c == idle for c in v) and e == idle

    def paused(self, name):
        return self.dom(name).state()[0] == libvirt.VIR_DOMAIN_PAUSED

    def stop(self):
        """As at SIGTERM: everything undone (the connection stays open
        for the checks)."""
        self.d.finish("SIGTERM")

    def text(self):
        return "\n".join(self.lines)


def fmt_pins(p):
    v, e = p
    return " ".join(["%d:%s" % (i, common.fmt_cpus(c))
                     for i, c in enumerate(v)] +
                    ["emulator:%s" % common.fmt_cpus(e)])


def main(tests, plain=()):
    """Runs each of @tests with the URI of a fresh node.xml (DOMAINS),
    then each of @plain; an exception is one failed check. Returns the
    program's exit status."""
    print("# libvirt %d.%d.%d" % (libvirt.getVersion() // 1000000,
                                  libvirt.getVersion() // 1000 % 1000,
                                  libvirt.getVersion() % 1000))
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        node = os.path.join(tmp, "node.xml")
        with open(node, "w") as f:
            f.write(NODE % "\n  ".join(DOMAINS))
        uri = "test://" + node
        for t in tests:
            try:
                t(uri)
            except Exception as e:      # noqa: BLE001 (one failed check)
                import traceback
                check(False, "%s raised %s" % (t.__name__, e),
                      traceback.format_exc())
    for t in plain:
        try:
            t()
        except Exception as e:      # noqa: BLE001
            import traceback
            check(False, "%s raised %s" % (t.__name__, e),
                  traceback.format_exc())
            break
    print("# %.1f s" % (time.monotonic() - t0))
    return finish()
