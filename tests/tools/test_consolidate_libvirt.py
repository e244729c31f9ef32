#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-only
"""tools/sysidle-consolidate with libvirt domains, and the suspend policy.

The libvirt part runs the tool's modules in this process against libvirt's
test driver (test:///PATH/node.xml: a host of 8 CPUs and domains with their
own pinning; the driver's state lives in the process that opened it, so
the checks go through the tool's own connection). The idle state is set the
way the libvirt bridge publishes it: <state name=.. num=.. since_unix_ms=..>
in the domain's metadata, namespace urn:sysidle:1. Checked: pack on
FULL_NOTED (every vCPU and the emulator on the idle CPUs, read back),
restore of the exact previous pinning on wake, the metadata event, a state
that becomes unknown, suspend after --suspend-after, resume on wake, at
--suspend-max and at exit, a resume by someone else, a domain that
vanishes, failed pin calls retried with back-off (never left pinned after
the wake), --dry-run; then the command line: --help, bad options (exit 2),
--once against the test driver.

This VMM's pause/resume: the client logic against a fake control socket
(a small server speaking the protocol of vmm/README.md): pause after
--suspend-after, a self-resume reported by the VMM (timer) seen and not
answered, paused again when idle again, resumed on wake and at exit, a VMM
without "pause".

usage: test_consolidate_libvirt.py TOOL
(TOOL: tools/sysidle-consolidate; its modules are next to it.)
Exit: 0 all passed, 1 a check failed, 77 skipped (no libvirt binding)."""
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

TOOL = os.path.abspath(sys.argv[1])
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                ".."))
from tap import check, finish  # noqa: E402
from silent_libvirtd import SilentLibvirtd  # noqa: E402

sys.path.insert(0, os.path.dirname(TOOL))

try:
    import libvirt
except ImportError as e:
    print("# the libvirt Python binding is not importable by %s (%s): "
          "skipped" % (sys.executable, e))
    sys.exit(77)

from sysidle_consolidate import common, daemon, policy  # noqa: E402
from sysidle_consolidate import journal, reconcile  # noqa: E402
from sysidle_consolidate import libvirt_source, vmm_source  # noqa: E402

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


def test_pack(uri):
    r = Run(uri, interval=0.02)
    orig = {n: r.pins(n) for n in ["web", "db", "batch", "cold"]}
    # cold (FULL_NOTED already) is packed at the first look
    ok0 = r.until(lambda: r.packed("cold"), 2)
    t0 = time.monotonic()
    r.set_state("web", "FULL_NOTED")
    ok = r.until(lambda: r.packed("web"), 2)
    t_pack = time.monotonic() - t0
    check(ok0 and ok and r.pins("db") == orig["db"] and
          r.pins("batch") == orig["batch"] and
          r.line(r"^pack web: 2 vcpus, emulator -> cpus 7 \(FULL_NOTED\)$")
          and r.line(r"^pack cold: 2 vcpus, emulator -> cpus 7 "
                     r"\(FULL_NOTED\)$"),
          "pack on FULL_NOTED: every vCPU and the emulator of web (and of "
          "cold, fully idle at the start) read back on cpus 7, %.0f ms after "
          "the state was published (--interval 20 ms); db (NOT) and batch "
          "(no state) untouched" % (t_pack * 1000),
          r.text() + "\nweb %s" % fmt_pins(r.pins("web")))
    n0 = len(r.lines)
    r.set_state("web", "NOT")
    ok = r.until(lambda: r.pins("web") == orig["web"], 2)
    line = r.line(r"^restore web:", 1, n0)
    check(ok and line == "restore web: 2 vcpus, emulator -> their own "
          "pinning 0:0 1:1-2 emulator:3 (FULL_NOTED -> NOT)" and
          r.packed("cold"),
          "wake (FULL_NOTED -> NOT): web's exact previous pinning back (%s), "
          "logged with its reason; cold still packed" %
          fmt_pins(r.pins("web")), r.text())
    # db: 4 vCPUs, idle twice
    for i in range(2):
        r.set_state("db", "FULL_NOTED")
        p = r.until(lambda: r.packed("db"), 2)
        r.set_state("db", "SHORT")
        q = r.until(lambda: r.pins("db") == orig["db"], 2)
        if not (p and q):
            break
    check(p and q, "db (4 vCPUs) packed and restored twice: pinning "
          "%s each time" % fmt_pins(orig["db"]), r.text())
    # a state that becomes unknown: what was done is undone
    n0 = len(r.lines)
    r.drop_state("cold")
    ok = r.until(lambda: r.pins("cold") == orig["cold"], 2)
    check(ok and r.line(r"^restore cold: 2 vcpus, emulator -> their own "
                        r"pinning 0:2 1:3 emulator:2-3 \(no urn:sysidle:1 "
                        r"state published\)$", 1, n0),
          "cold's state element removed (state unknown): its pinning put "
          "back, with that reason", r.text())
    r.stop()


def test_lease(uri):
    """A leased state: acted on while its lease runs, undone when it runs
    out (nothing else changed: the writer on another host, silent); one
    whose writer ran on this host and is gone is never acted on."""
    r = Run(uri, interval=0.02)
    orig = r.pins("web")
    lease_s = 1.5

    def leased(name, until_ms, host, pid):
        r.dom(name).setMetadata(
            libvirt.VIR_DOMAIN_METADATA_ELEMENT,
            '<state name="FULL_NOTED" num="4" since_unix_ms="%d" '
            'writer_host="%s" writer_pid="%d" writer_start_ticks="1" '
            'valid_until_unix_ms="%d"/>' % (int(time.time() * 1000), host,
                                             pid, until_ms),
            "sysidle", NS, 0)
    until_ms = int((time.time() + lease_s) * 1000)
    leased("web", until_ms, "another-host", 12345)
    ok = r.until(lambda: r.packed("web"), 2)
    back = r.until(lambda: r.pins("web") == orig, lease_s + 2)
    late = time.time() - until_ms / 1000.0
    check(ok and back and late < 0.5 and
          r.line(r"state unknown \(urn:sysidle:1 state FULL_NOTED not "
                 r"trusted: its lease ran out", 1),
          "a state leased for %.1f s by a writer on another host: packed, "
          "then restored %.2f s after its lease ran out, nothing else "
          "changed (--interval 20 ms), saying why" % (lease_s, late),
          r.text())
    with open("/proc/sys/kernel/pid_max") as f:
        nopid = int(f.read()) + 1
    host = re.sub(r"[^A-Za-z0-9._-]", "-", socket.gethostname())
    n0 = len(r.lines)
    leased("db", int((time.time() + 60) * 1000), host, nopid)
    r.run_for(0.5)
    check(not r.packed("db") and
          r.line(r"db: state unknown .*its writer \(pid %d on this host\) "
                 r"is gone" % nopid, 1, n0),
          "a state whose writer on this host is gone (its lease running): "
          "never acted on, saying why", r.text())
    r.drop_state("web")
    r.drop_state("db")
    r.stop()


def test_events(uri):
    r = Run(uri, interval=5.0, events=True)
    if not r.src.callbacks:
        check(False, "metadata-change events registered on the test "
              "driver", r.text())
        r.stop()
        return
    r.run_for(0.05)
    t0 = time.monotonic()
    r.set_state("web", "FULL_NOTED")
    # The next poll is due 5 s after the first (made as Run started): a
    # pack before then came from the event. Waited for up to 4 s only, so
    # a tool that polls only cannot pass (the event is delivered by
    # libvirt's event thread, and how soon depends on the host's load).
    ok = r.until(lambda: r.packed("web"), 4)
    t = time.monotonic() - t0
    i = r.round_of(r"^pack web:")
    check(ok and i is not None and r.rounds[i][1] < r.rounds[0][1] + 5.0,
          "metadata-change event: web packed %.1f ms after its state was "
          "published, with --interval 5 s (before the next poll)" %
          (t * 1000), r.text())
    r.stop()


def test_suspend(uri):
    r = Run(uri, "pack,suspend", suspend_after=0.3, suspend_max=60)
    orig = r.pins("web")
    t0 = time.monotonic()
    r.set_state("web", "FULL_NOTED")
    t_set = time.monotonic()
    k0 = len(r.rounds)
    packed = r.until(lambda: r.packed("web"), 2)
    t_pack = time.monotonic() - t0
    ok = r.until(lambda: r.paused("web"), 3)
    t_s = time.monotonic() - t0
    line = r.line(r"^suspend web: paused \(FULL_NOTED for (\d+\.\d) s, "
                  r"--suspend-after 0\.3\)$", 1)
    # In the daemon's own rounds (it runs in this thread): packed at the
    # first poll (--interval 20 ms: every other step), paused at the first
    # step once 0.3 s had passed since the published since_unix_ms (taken
    # in set_state) -- no step after that let by. The lower bounds stay
    # in wall time: a loaded host can only make them longer.
    ip = r.round_of(r"^pack web:")
    isu = r.round_of(r"^suspend web: paused")
    npack = len([x for x in r.rounds[k0:(ip or 0) + 1] if x[0] == "step"])
    late = r.missed(k0, isu or 0, t_set + 0.3 + 0.002)
    secs = float(re.search(r"for (\d+\.\d) s", line).group(1)) \
        if line else 0
    check(packed and ok and ip is not None and isu is not None and
          ip <= isu and npack <= 5 and 0.3 - MS_ROUND <= t_s and
          not late and
          secs >= 0.3,
          "pack,suspend --suspend-after 0.3: web packed at once (%.0f ms, "
          "step %d after the change), paused %.0f ms after it became fully "
          "idle, at the first step due (%d let by): '%s'" %
          (t_pack * 1000, npack, t_s * 1000, len(late), line),
          r.text() + "\nrounds %s" % r.rounds[k0:k0 + 100])
    n0 = len(r.lines)
    t0 = time.monotonic()
    r.set_state("web", "NOT")
    ok = r.until(lambda: not r.paused("web") and r.pins("web") == orig, 2)
    t_w = time.monotonic() - t0
    check(ok and r.line(r"^resume web: after \d+\.\d s \(FULL_NOTED -> "
                        r"NOT\)$", 1, n0) and
          r.line(r"^restore web: .*\(FULL_NOTED -> NOT\)$", 1, n0),
          "wake: web resumed and its pinning restored %.0f ms after "
          "its state left FULL_NOTED" % (t_w * 1000), r.text())
    # resumed by someone else: seen, no longer counted
    r.set_state("web", "FULL_NOTED")
    r.until(lambda: r.paused("web"), 3)
    n0 = len(r.lines)
    r.dom("web").resume()
    seen = r.line(r"^resumed web: by someone else after", 2, n0)
    again = r.until(lambda: r.paused("web"), 3)
    check(seen and again and r.line(r"^suspend web: paused", 1, n0),
          "web resumed by someone else while suspended: '%s'; idle, "
          "paused again after --suspend-after" % seen, r.text())
    # paused by someone else: left alone (not resumed on its wake)
    r.set_state("web", "NOT")
    r.until(lambda: not r.paused("web"), 2)
    r.dom("db").suspend()
    r.set_state("db", "FULL_NOTED")
    n0 = len(r.lines)
    r.run_for(0.5)
    r.set_state("db", "NOT")
    r.run_for(0.1)
    check(r.paused("db") and not r.line(r"^(suspend|resume) db", 0, n0),
          "db paused by someone else: neither suspended nor resumed by the "
          "tool", r.text())
    r.dom("db").resume()
    # exit: resumed and restored
    r.set_state("web", "FULL_NOTED")
    r.until(lambda: r.paused("web"), 3)
    n0 = len(r.lines)
    r.stop()
    check(not r.paused("web") and r.pins("web") == orig and
          re.search(r"^resume web: .*\(SIGTERM\)$", r.text(), re.M) and
          r.lines[-1].startswith("exit (SIGTERM): every packed VM"),
          "exit (SIGTERM): web resumed and restored: '%s'" % r.lines[-1],
          "\n".join(r.lines[n0:]))


def test_suspend_max(uri):
    r = Run(uri, "suspend", suspend_after=0.2, suspend_max=0.5)
    t0 = time.monotonic()
    r.set_state("web", "FULL_NOTED")
    ok1 = r.until(lambda: r.paused("web"), 2)
    t1 = time.monotonic()
    ok2 = r.until(lambda: not r.paused("web"), 3)
    t2 = time.monotonic()
    ok3 = r.until(lambda: r.paused("web"), 3)
    t3 = time.monotonic()
    line = r.line(r"^resume web: after \d+\.\d s \(--suspend-max 0\.5\)$",
                  1)
    # Timed by the daemon's rounds (this thread runs it), not by when this
    # test looked: the pause is made in round a, the resume in round b,
    # the pause again in round c. Resumed no sooner than 0.5 s after the
    # pause, at the first step after that (none let by), paused again no
    # sooner than 0.2 s after the resume.
    a = r.round_of(r"^suspend web: paused")
    b = r.round_of(r"^resume web: after")
    c = r.round_of(r"^suspend web: paused", (r.rounds[b][3]
                                             if b is not None else 0))
    rd = r.rounds
    timing = a is not None and b is not None and c is not None and \
        a < b < c and rd[b][2] - rd[a][1] >= 0.5 - 1e-6 and \
        not r.missed(a + 1, b, rd[a][2] + 0.5 + 0.001) and \
        rd[c][2] - rd[b][1] >= 0.2 - 1e-6
    check(ok1 and ok2 and ok3 and line and timing and
          not r.packed("web", IDLE),
          "suspend only, --suspend-after 0.2 --suspend-max 0.5, state "
          "FULL_NOTED throughout: paused after %.0f ms, resumed %.0f ms "
          "later ('%s'), paused again %.0f ms after that; not packed" %
          ((t1 - t0) * 1000, (t2 - t1) * 1000, line, (t3 - t2) * 1000),
          r.text())
    r.stop()
    check(not r.paused("web"), "exit: web resumed", r.text())


def test_vanish(uri):
    r = Run(uri, "pack,suspend", suspend_after=0.1)
    r.conn.createXML(domain_xml("tmp", 2, ["0", "1"], "0-1", "FULL_NOTED"), 0)
    ok = r.until(lambda: r.packed("tmp") and r.paused("tmp"), 3)
    n0 = len(r.lines)
    r.dom("tmp").destroy()
    line = r.line(r"^forget tmp:", 2, n0)
    r.set_state("web", "FULL_NOTED")
    ok2 = r.until(lambda: r.packed("web"), 2)
    check(ok and line == "forget tmp: no longer running (was packed and "
          "suspended)" and ok2 and "tmp" not in
          [d.name for d in r.src.targets()] and
          not r.line(r"^(error|retry)", 0, 0),
          "a transient domain packed and suspended, then destroyed: '%s'; "
          "forgotten, no error, the others still handled" % line, r.text())
    r.stop()


class Failing:
    """A virDomain whose next box["fail"] pin calls fail."""

    def __init__(self, dom, box):
        self._dom = dom
        self._box = box

    def __getattr__(self, name):
        a = getattr(self._dom, name)
        if name not in ("pinVcpuFlags", "pinEmulator"):
            return a

        def f(*args):
            if self._box["fail"] > 0:
                self._box["fail"] -= 1
                self._box["failed"] += 1
                raise RuntimeError("injected failure")
            return a(*args)
        return f


def test_retry(uri):
    box = {"fail": 0, "failed": 0}
    r = Run(uri, wrap=lambda d: Failing(d, box))
    orig = r.pins("web")
    box["fail"] = 4
    t0 = time.monotonic()
    r.set_state("web", "FULL_NOTED")
    ok = r.until(lambda: r.packed("web") and
                 not r.ctx.retrier.pending, 5)
    t = time.monotonic() - t0
    retries = [l for l in r.lines if l.startswith("retry web:")]
    check(ok and box["failed"] == 4 and
          r.line(r"^pack web: 2 vcpus, emulator -> cpus 7 \(FULL_NOTED\): "
                 r"3 failed, retrying$", 0) and
          any(re.match(r"^retry web: vcpu 0: virDomainPinVcpuFlags\(7\) "
                       r"failed \(injected failure\), again in 10 ms "
                       r"\(pack\)$", l) for l in retries) and
          any(re.match(r"^retry web: vcpu 0 -> cpus 7 done \(pack\)$", l)
              for l in retries),
          "4 pin calls fail: the pack logged with '3 failed, retrying', "
          "each failure retried with back-off (10, 50 ms), all on cpus 7 "
          "after %.0f ms" % (t * 1000), r.text())
    # the restore's calls fail 21 times, 7 times each: past the 5
    # back-offs, never given up
    n0 = len(r.lines)
    box["fail"] = 21
    t0 = time.monotonic()
    r.set_state("web", "NOT")
    ok = r.until(lambda: r.pins("web") == orig and
                 not r.ctx.retrier.pending, 10)
    t = time.monotonic() - t0
    v0 = [l for l in r.lines[n0:] if l.startswith("retry web: vcpu 0:")]
    check(ok and box["fail"] == 0 and
          not r.line(r"giving up", 0, n0) and len(v0) == 7 and
          v0[-1].endswith("again in 1000 ms (restore)"),
          "the restore's pin calls fail 7 times each: retried past the 5 "
          "back-offs (then every 1 s), never given up; exact pinning back "
          "after %.1f s" % t, "\n".join(r.lines[n0:]))
    # wake while the pack is still being retried: nothing left on cpus 7
    n0 = len(r.lines)
    box["fail"] = 3
    r.set_state("web", "FULL_NOTED")
    r.until(lambda: r.line(r"^pack web:", 0, n0), 2)
    r.set_state("web", "NOT")
    r.until(lambda: r.line(r"^restore web:", 0, n0), 2)
    r.run_for(0.4)     # past the pack retries' 10, 50, 200 ms
    # a loaded host may end that run before its last step: the retries
    # dropped or not, none is left pending after a bounded run
    r.until(lambda: not r.ctx.retrier.pending, 5)
    check(r.pins("web") == orig and not r.ctx.retrier.pending,
          "woken while its pack is being retried: the pack retries are "
          "dropped, the exact pinning is back and stays (%s)" %
          fmt_pins(r.pins("web")), "\n".join(r.lines[n0:]))
    # a pack that always fails: given up after 5 retries; the wake still
    # restores
    n0 = len(r.lines)
    box["fail"] = 1000
    r.set_state("web", "FULL_NOTED")
    gave = r.until(lambda: len([l for l in r.lines[n0:]
                                if "giving up (pack)" in l]) == 3, 5)
    nretry = len([l for l in r.lines[n0:] if l.startswith("retry web:")])
    box["fail"] = 0
    r.set_state("web", "NOT")
    ok = r.until(lambda: r.pins("web") == orig, 2)
    check(gave and nretry == 15 and ok and r.ctx.retrier.errors == 3,
          "pin calls that always fail: each of the 3 retried 5 times, "
          "then 'error web: ... failed 6 times (...): giving up (pack)'; "
          "the wake restores", "\n".join(r.lines[n0:]))
    r.stop()


def test_dry(uri):
    r = Run(uri, "pack,suspend", suspend_after=0, dry=True)
    orig = {n: r.pins(n) for n in ["web", "cold"]}
    r.set_state("web", "FULL_NOTED")
    a = r.line(r"^suspend web: paused \(.*\) \[dry run\]$", 2)
    r.set_state("web", "NOT")
    b = r.line(r"^restore web: .* \(FULL_NOTED -> NOT\) \[dry run\]$", 2)
    r.stop()
    check(a and b and r.line(r"^pack web: .*\[dry run\]$", 0) and
          r.line(r"^pack cold: .*\[dry run\]$", 0) and
          r.line(r"^resume web: .*\[dry run\]$", 0) and
          all(r.pins(n) == orig[n] for n in orig) and
          not r.paused("web") and not r.paused("cold"),
          "--dry-run, pack,suspend --suspend-after 0: pack, suspend, "
          "resume, restore printed with [dry run]; no pinning changed, "
          "nothing paused", r.text())


def test_reconcile(uri):
    """A journal left by a run killed while cold was packed: cold still
    runs with the same id (adopted: the journaled pinning is what its
    restore puts back, not the packed one it has now), web's entry names
    another run of it (dropped), an entry of a connection not followed is
    kept."""
    state = fresh_state()
    j = journal.Journal(state)
    lines = []
    ctx = daemon.Context(common.Log(out=lines), policy.parse_policy("pack"),
                         idle=IDLE, journal=j)
    src = libvirt_source.LibvirtSource(ctx, uri, idle=IDLE, interval=0.02,
                                       events=False)
    src.open()
    conn = src.conn
    cold, web = conn.lookupByName("cold"), conn.lookupByName("web")
    mask = tuple(i in IDLE for i in range(8))
    own = ([cpus(m) for m in cold.vcpuPinInfo(0)],
           cpus(cold.emulatorPinInfo(0)))
    for i in range(2):
        cold.pinVcpuFlags(i, mask, 0)
    cold.pinEmulator(mask, 0)
    base = {"kind": "libvirt", "uri": uri, "packed": True,
            "suspended": False}
    j.put(journal.libvirt_key(uri, cold.UUIDString()), dict(
        base, name="cold", uuid=cold.UUIDString(), domid=cold.ID(),
        vcpus=[common.fmt_cpus(c) for c in own[0]],
        emulator=common.fmt_cpus(own[1])))
    j.put(journal.libvirt_key(uri, web.UUIDString()), dict(
        base, name="web", uuid=web.UUIDString(), domid=web.ID() + 100,
        vcpus=["0", "1"], emulator="0"))
    j.put("libvirt:test:///elsewhere:x", dict(
        base, name="far", uri="test:///elsewhere", uuid="x", domid=1,
        vcpus=["0"], emulator="0"))
    d = daemon.Daemon(ctx, [src])
    reconcile.reconcile(ctx, [src])
    d.step()
    pins = lambda n: ([cpus(m) for m in conn.lookupByName(n).vcpuPinInfo(
        0)], cpus(conn.lookupByName(n).emulatorPinInfo(0)))  # noqa: E731
    kept = pins("cold") == ([IDLE, IDLE], IDLE)
    check(kept and "reconcile cold: adopted (packed) from the journal" in
          lines and any(l.startswith("reconcile web: gone (domain id %d "
                                     % (web.ID() + 100)) for l in lines) and
          "reconcile far: kept (its connection test:///elsewhere is not "
          "followed: --libvirt test:///elsewhere)" in lines and
          sorted(e["name"] for e in j.entries.values()) == ["cold", "far"],
          "reconcile: cold (same id) adopted and kept packed while idle, "
          "web (another id) dropped, another connection's entry kept",
          "\n".join(lines))
    cold.setMetadata(libvirt.VIR_DOMAIN_METADATA_ELEMENT,
                     '<state name="NOT" num="0" since_unix_ms="%d"/>' %
                     int(time.time() * 1000), "sysidle", NS, 0)
    end = time.monotonic() + 3
    while time.monotonic() < end and pins("cold") != own:
        d.wait(time.monotonic() + STEP)
        d.step()
    check(pins("cold") == own and
          sorted(e["name"] for e in j.entries.values()) == ["far"],
          "the adopted domain woke: its journaled pinning %s back (not the "
          "packed one), its entry dropped" % fmt_pins(own),
          "\n".join(lines + [fmt_pins(pins("cold"))]))
    j.close()
    src.close()


def test_cli(uri):
    p = subprocess.run([TOOL, "--help"], capture_output=True, text=True,
                       timeout=30)
    check(p.returncode == 0 and all(
        o in p.stdout for o in ["--libvirt URI", "--policy", "--idle-cpus",
                                "--suspend-after", "--suspend-max",
                                "--interval", "--once", "--dry-run",
                                "urn:sysidle:1"]),
          "--help: exit 0, every option and the metadata namespace",
          p.stdout + p.stderr)
    bad = [["--policy", "sleep"], ["--policy", "pack,pack"],
           ["--suspend-after", "soon"], ["--suspend-max", "-1"],
           ["--idle-cpus", "3-1"], ["--interval", "0"], ["--frobnicate"],
           ["--stop-timeout", "0"], ["--stop-timeout", "2h"]]
    rcs = []
    for b in bad:
        p = run_tool([TOOL, "--state-dir", fresh_state(), "--once", "--dir", "none"] + b,
                           capture_output=True, text=True, timeout=30)
        rcs.append((b, p.returncode, p.stderr.strip().splitlines()[-1:]))
    check(all(rc == 2 and err and "error" in err[0] for _, rc, err in rcs),
          "bad options (%s): exit 2 with a message" %
          ", ".join(" ".join(b) for b in bad),
          "\n".join("%s: %s %s" % x for x in rcs))
    p = run_tool([TOOL, "--state-dir", fresh_state(), "--once", "--dir", "none", "--libvirt", uri,
                        "--idle-cpus", "6-7", "--policy", "pack,suspend",
                        "--suspend-after", "1m"],
                       capture_output=True, text=True, timeout=30)
    out = p.stdout.splitlines()
    want = [r"pack cold: 2 vcpus, emulator -> cpus 6-7 \(FULL_NOTED\)",
            r"leave cold: not suspended \(FULL_NOTED for 36\d\d s, "
            r"--suspend-after 60; --once: nothing would resume it\)",
            r"leave web: state NOT", r"leave db: state NOT",
            r"leave batch: state unknown \(no urn:sysidle:1 state "
            r"published\)"]
    check(p.returncode == 0 and len(out) == len(want) and
          all(any(re.fullmatch(w, l) for l in out) for w in want),
          "--once --libvirt %s: exit %d, its decisions printed" %
          (uri.split("/")[-1], p.returncode), p.stdout + p.stderr)
    p = run_tool([TOOL, "--state-dir", fresh_state(), "--once", "--dry-run", "--dir", "none",
                        "--libvirt", uri], capture_output=True, text=True,
                       timeout=30)
    check(p.returncode == 0 and re.search(
        r"^pack cold: 2 vcpus, emulator -> cpus 4 \(FULL_NOTED\) "
        r"\[dry run\]$", p.stdout, re.M),
          "--once --dry-run, default idle CPU: the host's last online CPU "
          "(the test driver reports 0,2,4 online)", p.stdout + p.stderr)
    p = run_tool([TOOL, "--state-dir", fresh_state(), "--once", "--dir", "none", "--libvirt", uri,
                        "--idle-cpus", "8"], capture_output=True, text=True,
                       timeout=30)
    check(p.returncode == 0 and p.stdout.startswith(
        "error %s: idle CPUs 8 not on this host (8 CPUs): no domain packed "
        "there\n" % uri) and not re.search(r"^pack ", p.stdout, re.M),
          "--once --idle-cpus 8 on a host of 8 CPUs: one error line, "
          "nothing packed", p.stdout + p.stderr)
    p = run_tool([TOOL, "--state-dir", fresh_state(), "--once", "--dir", "none", "--libvirt",
                        "test:///nonexistent/node.xml"], capture_output=True,
                       text=True, timeout=30)
    check(p.returncode == 0 and p.stdout.startswith(
        "error test:///nonexistent/node.xml: cannot connect ("),
          "--once with a URI that cannot be opened: one error line",
          p.stdout + p.stderr)


# --- this VMM's pause / resume, against a fake control socket ------------
class FakeVmm:
    """A control socket speaking the protocol: status, watch (events
    pushed by the test), pause, resume; @pause False: a VMM without them.
    Its "threads" are threads of this process."""

    def __init__(self, path, name, pause=True):
        self.path = path
        self.name = name
        self.pause_ok = pause
        self.state = "NOT"
        self.since = int(time.time() * 1000)
        self.paused = False
        self.requests = []
        self.watchers = []
        self.lock = threading.Lock()
        self.stop_ev = threading.Event()
        self.workers = [threading.Thread(target=self.stop_ev.wait,
                                         daemon=True) for _ in range(3)]
        for w in self.workers:
            w.start()
        self.srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.srv.bind(path)
        self.srv.listen(8)
        threading.Thread(target=self.accept, daemon=True).start()

    def tids(self):
        return [w.native_id for w in self.workers]

    def accept(self):
        while True:
            try:
                c, _ = self.srv.accept()
            except OSError:
                return
            threading.Thread(target=self.serve, args=(c,),
                             daemon=True).start()

    def send(self, c, obj):
        try:
            c.sendall((json.dumps(obj) + "\n").encode())
        except OSError:
            pass

    def broadcast(self, obj):
        obj["unix_ms"] = int(time.time() * 1000)
        with self.lock:
            for c in list(self.watchers):
                self.send(c, obj)

    def serve(self, c):
        buf = b""
        while True:
            try:
                d = c.recv(4096)
            except OSError:
                d = b""
            if not d:
                with self.lock:
                    if c in self.watchers:
                        self.watchers.remove(c)
                c.close()
                return
            buf += d
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                self.request(c, json.loads(line))

    def request(self, c, req):
        cmd = req.get("cmd")
        with self.lock:
            self.requests.append(cmd)
        if cmd == "status":
            t = self.tids()
            self.send(c, {"ok": True, "cmd": "status", "vm": {
                "name": self.name, "pid": os.getpid(), "state": self.state,
                "since_unix_ms": self.since, "paused": self.paused,
                "housekeeping_tid": t[2],
                "vcpus": [{"id": 0, "tid": t[0]}, {"id": 1, "tid": t[1]}]}})
        elif cmd == "watch":
            with self.lock:
                self.send(c, {"ok": True, "cmd": "watch",
                              "state": self.state,
                              "since_unix_ms": self.since})
                self.watchers.append(c)
        elif cmd in ("pause", "resume") and self.pause_ok:
            was = self.paused
            self.paused = cmd == "pause"
            if self.paused and not was:
                self.paused_at = time.monotonic()
                self.broadcast({"event": "paused"})
            elif was and not self.paused:
                self.broadcast({"event": "resumed", "reason": "request",
                                "paused_ms": self.paused_ms()})
            self.send(c, {"ok": True, "cmd": cmd, "paused": self.paused})
        else:
            self.send(c, {"ok": False,
                          "error": "unknown command '%s'" % cmd})

    def paused_ms(self):
        return int((time.monotonic() - self.paused_at) * 1000)

    def set_state(self, to):
        fr, self.state = self.state, to
        self.since = int(time.time() * 1000)
        self.broadcast({"event": "state", "from": fr, "to": to, "vcpu": -1})

    def self_resume(self, reason):
        self.paused = False
        self.broadcast({"event": "resumed", "reason": reason,
                        "paused_ms": self.paused_ms()})

    def close(self):
        self.srv.close()
        with self.lock:
            for c in self.watchers:
                c.close()
        self.stop_ev.set()


class VmmRun(Run):
    def __init__(self, paths, policies, suspend_after, idle):
        self.lines = []
        self.log = common.Log(out=self.lines)
        self.ctx = daemon.Context(self.log, policy.parse_policy(policies),
                                  suspend_after, 60.0, idle=idle)
        self.src = vmm_source.VmmSource(self.ctx, None, paths)
        self.d = daemon.Daemon(self.ctx, [self.src])
        self.rounds = []

    def stop(self):
        self.d.finish("SIGTERM")


def aff(tids):
    return [os.sched_getaffinity(t) for t in tids]


def test_vmm_fake():
    full = os.sched_getaffinity(0)
    idle = {max(full)}
    with tempfile.TemporaryDirectory() as tmp:
        f = FakeVmm(os.path.join(tmp, "a.sock"), "fake-a")
        old = FakeVmm(os.path.join(tmp, "b.sock"), "fake-b", pause=False)
        orig = aff(f.tids())
        r = VmmRun([f.path, old.path], "pack,suspend", 0.3, idle)
        r.until(lambda: len(f.watchers) == 1 and len(old.watchers) == 1, 3)
        t0 = time.monotonic()
        f.set_state("FULL_NOTED")
        t_set = time.monotonic()
        old.set_state("FULL_NOTED")
        k0 = len(r.rounds)
        packed = r.until(lambda: aff(f.tids()) == [idle] * 3, 2)
        ok = r.until(lambda: f.paused, 3)
        t = time.monotonic() - t0
        # The daemon runs in this thread: the pause is timed by its own
        # rounds. Paused at the first step once 0.3 s had passed since the
        # event's unix_ms (none let by); the lower bound stays in wall
        # time, which a loaded host can only make longer.
        isu = r.round_of(r"^suspend fake-a: paused")
        late = r.missed(k0, isu or 0, t_set + 0.3 + 0.002)
        check(packed and ok and 0.3 - MS_ROUND <= t and isu is not None and
              not late
              and r.line(r"^pack fake-a: 3 threads -> cpus %s "
                         r"\(FULL_NOTED\)$" % common.fmt_cpus(idle), 0) and
              r.line(r"^suspend fake-a: paused \(FULL_NOTED for \d+\.\d s, "
                     r"--suspend-after 0\.3\)$", 0),
              "fake VMM, pack,suspend --suspend-after 0.3: packed at once, "
              "{\"cmd\":\"pause\"} %.0f ms after FULL_NOTED, at the first "
              "step due (%d let by)" % (t * 1000, len(late)),
              r.text())
        nope = r.line(r"^error fake-b: cannot suspend", 1)
        r.run_for(0.4)
        check(nope == "error fake-b: cannot suspend, the VMM has no pause "
              "(unknown command 'pause')" and
              old.requests.count("pause") == 1,
              "a VMM without pause: '%s', asked once only" % nope, r.text())
        # the VMM resumes itself (a guest timer): seen, not answered
        n0 = len(r.lines)
        nres = f.requests.count("resume")
        f.self_resume("timer")
        seen = r.line(r"^resumed fake-a: by the VMM \(timer\) after \d+ ms "
                      r"paused$", 2, n0)
        again = r.until(lambda: f.paused, 3)
        # In the daemon's rounds: the resume seen in round a, the pause
        # again in round b, no sooner than 0.3 s after a began and at the
        # first step due (none let by).
        a = r.round_of(r"^resumed fake-a: by the VMM \(timer\)", n0)
        b = r.round_of(r"^suspend fake-a: paused", n0)
        rd = r.rounds
        t = rd[b][2] - rd[a][1] if a is not None and b is not None else -1
        check(seen and again and f.requests.count("resume") == nres and
              t >= 0.3 - 1e-6 and a < b and
              not r.missed(a + 1, b, rd[a][2] + 0.3 + 0.001),
              "the VMM resumed itself (timer): '%s'; no resume sent; still "
              "FULL_NOTED, paused again %.0f ms later" % (seen, t * 1000),
              r.text())
        # self-resume then the wake: the state event restores; no resume
        # request needed
        f.self_resume("input")
        f.set_state("NOT")
        ok = r.until(lambda: aff(f.tids()) == orig, 2)
        check(ok and f.requests.count("resume") == nres and
              r.line(r"^resumed fake-a: by the VMM \(input\)", 0, n0),
              "input: the VMM's own resume, then FULL_NOTED -> NOT: threads "
              "restored, no resume request", r.text())
        # the wake comes first (a kick): the tool resumes it
        f.set_state("FULL_NOTED")
        r.until(lambda: f.paused, 3)
        n0 = len(r.lines)
        f.set_state("NOT")
        ok = r.until(lambda: not f.paused and aff(f.tids()) == orig, 2)
        check(ok and r.line(r"^resume fake-a: after \d+\.\d s \(FULL_NOTED "
                            r"-> NOT\)$", 0, n0),
              "FULL_NOTED -> NOT while paused: {\"cmd\":\"resume\"} sent, "
              "threads restored", r.text())
        # exit: resumed
        f.set_state("FULL_NOTED")
        r.until(lambda: f.paused, 3)
        r.stop()
        check(not f.paused and aff(f.tids()) == orig and
              re.search(r"^resume fake-a: .*\(SIGTERM\)$", r.text(), re.M),
              "exit: the paused VM resumed, its threads restored", r.text())
        f.close()
        old.close()


class LiarVmm(FakeVmm):
    """A fake VMM whose status names the threads of another process (and,
    with @pid, claims that other process's PID): they must never be
    pinned."""

    def __init__(self, path, name, victim, pid=None):
        self.victim = victim
        self.claim = pid
        super().__init__(path, name)

    def tids(self):
        return [self.victim.pid] * 3

    def request(self, c, req):
        if req.get("cmd") != "status" or self.claim is None:
            return super().request(c, req)
        t = self.tids()
        self.send(c, {"ok": True, "cmd": "status", "vm": {
            "name": self.name, "pid": self.claim, "state": self.state,
            "since_unix_ms": self.since, "paused": False,
            "housekeeping_tid": t[2],
            "vcpus": [{"id": 0, "tid": t[0]}, {"id": 1, "tid": t[1]}]}})


def test_vmm_liar():
    """Thread IDs are checked against the socket's peer (SO_PEERCRED), not
    against the PID the reply claims."""
    full = os.sched_getaffinity(0)
    idle = {max(full)}
    victim = subprocess.Popen(["sleep", "60"])
    try:
        before = os.sched_getaffinity(victim.pid)
        with tempfile.TemporaryDirectory() as tmp:
            a = LiarVmm(os.path.join(tmp, "a.sock"), "liar-a", victim)
            b = LiarVmm(os.path.join(tmp, "b.sock"), "liar-b", victim,
                        pid=victim.pid)
            r = VmmRun([a.path, b.path], "pack", 0.3, idle)
            r.until(lambda: len(a.watchers) == 1 and len(b.watchers) == 1, 3)
            a.set_state("FULL_NOTED")
            b.set_state("FULL_NOTED")
            pa = r.line(r"^pack liar-a: ", 2)
            # never named by a status it gave: its socket's name
            pb = r.line(r"^error b: status failed, not packed", 2)
            during = os.sched_getaffinity(victim.pid)
            r.stop()
            after = os.sched_getaffinity(victim.pid)
            check(pa == "pack liar-a: 0 threads -> cpus %s (FULL_NOTED)" %
                  common.fmt_cpus(idle) and pb is not None and
                  "the status says pid %d, the socket's peer is pid %d" %
                  (victim.pid, os.getpid()) in pb and during == before and
                  after == before,
                  "a VMM naming another process's threads: none pinned "
                  "(its own: 0 threads; one claiming the other's PID: "
                  "refused); that process's affinity unchanged",
                  "%s\n%s\n%s -> %s\n%s" % (pa, pb, before, after,
                                             r.text()))
            a.close()
            b.close()
    finally:
        victim.kill()
        victim.wait()


def test_stop_hung():
    """A libvirt call that never returns (libvirtd hangs): SIGTERM still
    ends the daemon, after --stop-timeout, saying where it was; a second
    signal ends it at once."""
    with tempfile.TemporaryDirectory() as tmp:
        for tag, extra, second, bound, says in [
                ("timeout", ["--stop-timeout", "1"], None, 3.0,
                 "the stop did not end within 1 s, in the middle of "),
                ("twice", [], signal.SIGINT, 1.5,
                 "signal 2 again, in the middle of ")]:
            lv = SilentLibvirtd(os.path.join(tmp, tag + ".sock"))
            p = subprocess.Popen([TOOL, "--state-dir", fresh_state(),
                                  "--dir", tmp, "--libvirt", lv.uri] + extra,
                                 stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
            end = time.monotonic() + 10
            while not lv.asked() and time.monotonic() < end:
                time.sleep(0.05)
            asked = lv.asked()
            t0 = time.monotonic()
            p.send_signal(signal.SIGTERM)
            if second:
                time.sleep(0.2)
                p.send_signal(second)
            try:
                out, err = p.communicate(timeout=bound + 5)
            except subprocess.TimeoutExpired:
                p.kill()
                out, err = p.communicate()
            took = time.monotonic() - t0
            lv.close()
            check(asked and p.returncode == 3 and took < bound and
                  says in out and "stays in the journal" in out and
                  LOG_PREFIX.match(out) is not None,
                  "libvirtd silent, the daemon waiting in a libvirt call: %s"
                  " ends it with exit 3 in %.1f s (bound %.1f), one "
                  "warning saying where it was" %
                  ("SIGTERM and --stop-timeout 1" if not second else
                   "a second signal", took, bound),
                  "asked %s, exit %s\n%s%s" % (asked, p.returncode, out,
                                               err))


def main():
    print("# libvirt %d.%d.%d" % (libvirt.getVersion() // 1000000,
                                  libvirt.getVersion() // 1000 % 1000,
                                  libvirt.getVersion() % 1000))
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        node = os.path.join(tmp, "node.xml")
        with open(node, "w") as f:
            f.write(NODE % "\n  ".join(DOMAINS))
        uri = "test://" + node
        for t in [test_pack, test_lease, test_events, test_suspend,
                  test_suspend_max,
                  test_vanish, test_retry, test_dry, test_reconcile,
                  test_cli]:
            try:
                t(uri)
            except Exception as e:      # noqa: BLE001 (one failed check)
                import traceback
                check(False, "%s raised %s" % (t.__name__, e),
                      traceback.format_exc())
    try:
        test_vmm_fake()
        test_vmm_liar()
        test_stop_hung()
    except Exception as e:      # noqa: BLE001
        import traceback
        check(False, "test_vmm_fake raised %s" % e, traceback.format_exc())
    print("# %.1f s" % (time.monotonic() - t0))
    return finish()


if __name__ == "__main__":
    sys.exit(main())
