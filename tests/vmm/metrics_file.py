# SPDX-License-Identifier: GPL-2.0-only
"""The VMM's --metrics-file (the Prometheus text file, vmm/export/README.md,
"Metrics") as the tests read it: parsed with prometheus_client (Metrics),
read with its inode and mtime (read_versioned), every family checked for
its type, HELP and labels (check_format), the file when it shows full
idle (fully_idle); and sysidlectl run by the tests (ctl, Watch) with the
clock its output prints. Used by test_metrics.py and
test_sysidlectl_fake.py, after vmmtest.init(sys.argv); sysidlectl is
their fourth argument."""
import functools
import os
import re
import subprocess
import sys
import time

import vmmtest
from vmmtest import sanitizer_check

CTL = sys.argv[4] if len(sys.argv) > 4 else None

try:
    from prometheus_client.parser import text_string_to_metric_families
except ImportError:
    # Debian's python3-prometheus-client is in the system interpreter's
    # dist-packages, which another python3 on PATH does not search.
    sys.path.append("/usr/lib/python3/dist-packages")
    try:
        from prometheus_client.parser import text_string_to_metric_families
    except ImportError:
        text_string_to_metric_families = None

# sample name -> (type, label names), as documented in vmm/export/README.md
VM = {"vm", "uuid"}
FAMILIES = {
    "sysidle_vm_up": ("gauge", VM),
    "sysidle_vm_info": ("gauge", VM | {"sysidle"}),
    "sysidle_vm_state": ("gauge", VM),
    "sysidle_vm_state_since_timestamp_seconds": ("gauge", VM),
    "sysidle_vm_full_idle": ("gauge", VM),
    "sysidle_vm_full_idle_since_timestamp_seconds": ("gauge", VM),
    "sysidle_vm_full_idle_seconds_total": ("counter", VM),
    "sysidle_vm_full_idle_periods_total": ("counter", VM),
    "sysidle_vm_start_timestamp_seconds": ("gauge", VM),
    "sysidle_vm_left_full_idle_timestamp_seconds": ("gauge", VM),
    "sysidle_vm_longest_busy_seconds": ("gauge", VM),
    "sysidle_vm_metrics_written_timestamp_seconds": ("gauge", VM),
    "sysidle_vcpu_halted": ("gauge", VM | {"vcpu"}),
    "sysidle_vcpu_halt_exits_total": ("counter", VM | {"vcpu"}),
    "sysidle_ticks_suppressed_total": ("counter", VM),
    "sysidle_host_timer_wakeups_total": ("counter", VM),
    "sysidle_vm_paused": ("gauge", VM),
    "sysidle_hooks_run_total": ("counter", VM),
    "sysidle_hooks_failed_total": ("counter", VM),
    "sysidle_hooks_dropped_total": ("counter", VM),
}
STATES = ["NOT", "SHORT", "LONG", "FULL", "FULL_NOTED"]
CLOCK = r"\d\d:\d\d:\d\d\.\d{3}"
# Polls every 10 ms here (the file's rewrites are timed).
poll_until = functools.partial(vmmtest.poll_until, step=0.01)


class Metrics:
    """One parsed file: samples[name] = [(labels, value)], types[name],
    helps[name], problems = what makes it incomplete or malformed."""

    def __init__(self, text, ncpus):
        self.text = text
        self.samples, self.types, self.helps = {}, {}, {}
        self.problems = []
        if not text.endswith("\n"):
            self.problems.append("no final newline")
        try:
            for fam in text_string_to_metric_families(text):
                for s in fam.samples:
                    self.samples.setdefault(s.name, []).append(
                        (s.labels, s.value))
                    self.types[s.name] = fam.type
                    self.helps[s.name] = fam.documentation
        except Exception as e:  # the parser raises ValueError and others
            self.problems.append("parser: %r" % e)
        for name, (typ, labels) in FAMILIES.items():
            want = ncpus if "vcpu" in labels else 1
            got = self.samples.get(name, [])
            if len(got) != want:
                self.problems.append("%s: %d samples, expected %d" %
                                     (name, len(got), want))

    def ok(self):
        return not self.problems

    def value(self, name, vcpu=None):
        for labels, v in self.samples.get(name, []):
            if vcpu is None or labels.get("vcpu") == str(vcpu):
                return v
        return None


def read_metrics(path, ncpus=2):
    """The file parsed, or None when it does not exist (yet)."""
    try:
        with open(path) as f:
            return Metrics(f.read(), ncpus)
    except FileNotFoundError:
        return None


def file_id(path):
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns)


def read_versioned(path, ncpus=2):
    """(the file parsed, its (inode, mtime_ns), its mtime in s) from one
    open: the three belong to the same version; (None, None, None) when it
    cannot be read."""
    try:
        with open(path) as fh:
            st = os.fstat(fh.fileno())
            text = fh.read()
    except OSError:
        return None, None, None
    return Metrics(text, ncpus), (st.st_ino, st.st_mtime_ns), \
        st.st_mtime_ns / 1e9


def check_format(m, name, ncpus, sysidle):
    """Every family: type, HELP, TYPE line, labels."""
    bad = []
    for fam, (typ, labels) in FAMILIES.items():
        if m.types.get(fam) != typ:
            bad.append("%s: type %s, expected %s" % (fam, m.types.get(fam),
                                                     typ))
        if not m.helps.get(fam):
            bad.append("%s: no HELP" % fam)
        if not re.search(r"^# TYPE %s %s$" % (fam, typ), m.text, re.M):
            bad.append("%s: no '# TYPE %s %s' line" % (fam, fam, typ))
        for lab, _ in m.samples.get(fam, []):
            if set(lab) != labels or lab.get("vm") != name or \
                    lab.get("uuid") != vmmtest.vm_uuid(name):
                bad.append("%s: labels %r" % (fam, lab))
    vcpus = sorted(l["vcpu"] for l, _ in m.samples.get("sysidle_vcpu_halted",
                                                       []))
    if vcpus != [str(i) for i in range(ncpus)]:
        bad.append("vcpu labels %r" % vcpus)
    info = m.samples.get("sysidle_vm_info", [({}, None)])[0]
    if info[1] != 1 or not re.match(r"^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-"
                                    r"[89ab][0-9a-f]{3}-[0-9a-f]{12}$",
                                    info[0].get("uuid", "")) or \
            info[0].get("sysidle") != ("true" if sysidle else "false"):
        bad.append("sysidle_vm_info %r" % (info,))
    help_s = m.helps.get("sysidle_vm_full_idle_seconds_total", "")
    if "time() - sysidle_vm_full_idle_since_timestamp_seconds" not in \
            help_s or "current period is not in it" not in help_s:
        bad.append("the full-idle seconds HELP does not say how to "
                   "extrapolate: %r" % help_s)
    return bad


# The VMM in the background; here it may take up to 20 s to stop.
Vm = functools.partial(vmmtest.Vm, stop_timeout=20)


def ctl(args, timeout=20):
    """Runs sysidlectl: (status, stdout, stderr, seconds); status None on a
    hang."""
    t0 = time.monotonic()
    try:
        r = subprocess.run([CTL] + args, stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        return None, e.stdout or "", e.stderr or "", timeout
    sanitizer_check(r.stderr, ["(sysidlectl)"] + args)
    return r.returncode, r.stdout, r.stderr, time.monotonic() - t0


class Watch(vmmtest.Vm):
    """sysidlectl watch in the background, its lines collected."""

    def __init__(self, args):
        super().__init__(args, exe=CTL, stdin=subprocess.DEVNULL,
                         tag="(sysidlectl)")

    def wait(self, timeout):
        """Its exit status (no signal sent), None on a hang."""
        return self.stop(None, timeout)

    def detail(self):
        return "exit %s\n%s\n%s" % (self.p.poll(), "\n".join(self.lines),
                                    self.err)


def fully_idle(path, periods=None, halted=False):
    """The file when it shows FULL_NOTED (and at least @periods periods, if
    given: a loaded host may see one wake-up make two periods, e.g. when
    the timekeeper's tick-only window is aged out and entered again; and,
    with @halted, every vCPU halted: the snapshot taken at the change may
    catch the timekeeper just before its HLT, the VMM then rewrites it a
    moment later)."""
    m = read_metrics(path)
    if m and m.ok() and m.value("sysidle_vm_state") == 4 and \
            (periods is None or
             m.value("sysidle_vm_full_idle_periods_total") >= periods) and \
            (not halted or all_halted(m)):
        return m
    return None


def all_halted(m, ncpus=2):
    return all(m.value("sysidle_vcpu_halted", i) == 1 for i in range(ncpus))
