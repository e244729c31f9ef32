#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""--metrics-file against promtool and the documented semantics: the file
Prometheus' own linter accepts (in full idle and the one left at exit),
sysidle_vm_full_idle_since_timestamp_seconds, the uuid label on every
sample (Python's uuid.uuid5 of the name; the same in a second run of the
same name; --uuid's value otherwise) and the same in the status object and
the hooks' domain XML, the hook counters (in full idle too), and --uuid's
errors.

usage: test_metrics_lint.py VMM GUEST_DIR GUEST_TOOLS_DIR
Exit: 0 all passed, 1 a check failed, 77 skipped (no usable /dev/kvm; or
no promtool, Debian's prometheus package: the other checks run, and fail
the test if they fail)."""
import functools
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import vmmtest
from tap import skip
from vmmtest import check, tool

vmmtest.init(sys.argv)
PROMTOOL = shutil.which("promtool")
SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)\{(.*)\} (\S+)$")
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
Vm = functools.partial(vmmtest.Vm, stop_timeout=20)
# The hook: records its event and the <uuid> of its stdin, fails the idle
# ones (counted failed).
HOOK = """#!/bin/sh
u=$(sed -n 's|.*<uuid>\\([^<]*\\)</uuid>.*|\\1|p')
echo "$2 $3 $u" >> %s
case "$2" in idle) exit 3;; esac
exit 0
"""


def parse(text):
    """[(name, {label: value}, float)] of every sample line; None when a
    line is neither a comment nor a sample."""
    out = []
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        if not m:
            return None
        out.append((m.group(1), dict(LABEL.findall(m.group(2))),
                    float(m.group(3))))
    return out


def value(samples, name):
    for n, _, v in samples:
        if n == name:
            return v
    return None


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def settled(path):
    """(text, samples) once the file shows FULL_NOTED with every vCPU
    halted (the snapshot taken at the change may catch the timekeeper just
    before its HLT: the VMM rewrites it then), else None."""
    text = read(path)
    s = parse(text) if text else None
    if s and value(s, "sysidle_vm_state") == 4 and \
            all(v == 1 for n, _, v in s if n == "sysidle_vcpu_halted"):
        return text, s
    return None


def hooks_shown(path, record):
    """settled(), once its hook counters are those of the hooks' record
    (2 at least: "started", "idle begin"; the idle ones fail)."""
    got = settled(path)
    lines = (read(record) or "").splitlines()
    if got and len(lines) >= 2 and \
            value(got[1], "sysidle_hooks_run_total") == len(lines) and \
            value(got[1], "sysidle_hooks_failed_total") == \
            len([e for e in lines if e.startswith("idle ")]):
        return got
    return None


def promtool_check(text, what):
    if not PROMTOOL:
        skip("%s: promtool check metrics" % what, "promtool not found")
        return
    r = subprocess.run([PROMTOOL, "check", "metrics"], input=text,
                       capture_output=True, text=True, timeout=60)
    check(r.returncode == 0 and not r.stdout.strip() and
          not r.stderr.strip(),
          "%s: promtool check metrics exits 0 with no lint output" % what,
          "exit %d\n%s%s\n%s" % (r.returncode, r.stdout, r.stderr, text))


def uuids_of(samples):
    """The uuid labels of the file, and the samples without one."""
    return ({l.get("uuid") for _, l, _ in samples},
            [n for n, l, _ in samples if "uuid" not in l or "vm" not in l])


def run_idle(tmp, tag, name, extra=()):
    """One run of idle.elf until it is settled in FULL_NOTED, then stopped:
    (the file in full idle, its samples, the file at exit, its samples,
    the hooks' record, the wall-clock times before the start and before
    the stop). Checks that the status object and the hooks' XML have the
    uuid of the file."""
    f = os.path.join(tmp, tag + ".prom")
    sock = os.path.join(tmp, tag + ".sock")
    hooks = os.path.join(tmp, tag + "-hooks")
    record = os.path.join(tmp, tag + "-hooks.log")
    os.mkdir(hooks)
    with open(os.path.join(hooks, "vm"), "w") as h:
        h.write(HOOK % record)
    os.chmod(os.path.join(hooks, "vm"), 0o755)
    t0 = time.time()
    vm = Vm(["--cpus", "2", "--sysidle", "--append", "hz=250", "--control",
             sock, "--hooks", hooks, "--name", name, "--metrics-file", f]
            + list(extra) + [tool("idle.elf")])
    try:
        got = vmmtest.poll_until(lambda: settled(f), 30, step=0.01)
        if got:
            # the "idle begin" hook ends after the change: its counters
            # are rewritten then, in full idle (bounded wait on the file)
            hooked = vmmtest.poll_until(lambda: hooks_shown(f, record), 10,
                                        step=0.01)
            check(hooked, "%s: in full idle, the file's hook counters "
                  "catch up with the hooks run (run %s failed %s)" %
                  (tag, hooked and value(hooked[1],
                                         "sysidle_hooks_run_total"),
                   hooked and value(hooked[1],
                                    "sysidle_hooks_failed_total")),
                  "%s\n%s" % (read(record), read(f)))
            got = hooked or got
            st = vmmtest.status(sock)
            hooked_uuids = {l.split()[2] if len(l.split()) > 2 else None
                            for l in (read(record) or "").splitlines()}
            file_uuids = uuids_of(got[1])[0]
            check(st and len(file_uuids) == 1 and
                  {st.get("uuid")} == file_uuids == hooked_uuids,
                  "%s: the status object's uuid and the hooks' <uuid> are "
                  "the file's" % tag, "%s %s %s" % (
                      st and st.get("uuid"), file_uuids, hooked_uuids))
    finally:
        t_stop = time.time()
        rc = vm.stop()
    check(got and rc == 143, "%s: FULL_NOTED in the file, then exit 143 on "
          "SIGTERM" % tag, "exit %s\n%s\n%s" % (rc, read(f), vm.err))
    last = read(f)
    return (got[0] if got else None, got[1] if got else None, last,
            parse(last) if last else None,
            "\n".join(" ".join(l.split()[:2])
                      for l in (read(record) or "").splitlines()),
            t0, t_stop)


def test_file(tmp):
    name = "lint-%d" % os.getpid()
    text, s, last, ls, record, t0, t_stop = run_idle(tmp, "first", name)
    if not s or not ls:
        return
    promtool_check(text, "in FULL_NOTED")
    promtool_check(last, "the file left at exit")

    since = value(s, "sysidle_vm_full_idle_since_timestamp_seconds")
    state_since = value(s, "sysidle_vm_state_since_timestamp_seconds")
    check(value(s, "sysidle_vm_full_idle") == 1 and since == state_since and
          t0 - 0.5 <= since <= time.time() + 0.5,
          "in FULL_NOTED: sysidle_vm_full_idle_since_timestamp_seconds is "
          "the state's since (%.3f), between the start and now" % since,
          text)
    # The period the file showed, when the stop ended it, is in the
    # counter left at exit (it was not in the one of full idle); when the
    # VM left it before the stop, the counter grew by it anyway.
    done, left = (value(s, "sysidle_vm_full_idle_seconds_total"),
                  value(ls, "sysidle_vm_full_idle_seconds_total"))
    same = value(ls, "sysidle_vm_state_since_timestamp_seconds") == since
    check(value(ls, "sysidle_vm_full_idle") == 0 and
          value(ls, "sysidle_vm_full_idle_since_timestamp_seconds") == 0 and
          (left >= done + (t_stop - since) - 0.002 if same else
           left > done),
          "at exit: full_idle 0, its since 0, the seconds counter %.3f "
          "holds the period the stop ended (%.3f before it, idle since "
          "%.3f s before the stop)" % (left, done, t_stop - since), last)

    want = vmmtest.vm_uuid(name)
    for what, samples in [("in FULL_NOTED", s), ("at exit", ls)]:
        got, missing = uuids_of(samples)
        check(got == {want} and not missing and len(samples) >= 20,
              "%s: every sample has vm and uuid=\"%s\" (uuid.uuid5 of the "
              "name)" % (what, want), "%s %s" % (got, missing))

    events = record.splitlines()
    idle = [e for e in events if e.startswith("idle ")]
    check(events[:1] == ["started begin"] and
          events[-1:] == ["stopped end"] and len(idle) >= 2 and
          value(ls, "sysidle_hooks_run_total") == len(events) and
          value(ls, "sysidle_hooks_failed_total") == len(idle) and
          value(ls, "sysidle_hooks_dropped_total") is not None,
          "at exit: sysidle_hooks_run_total %s and "
          "sysidle_hooks_failed_total %s are the hooks run and failed "
          "(%d, %d)" % (value(ls, "sysidle_hooks_run_total"),
                        value(ls, "sysidle_hooks_failed_total"),
                        len(events), len(idle)),
          "%s\n%s" % (record, last))
    for fam in ["sysidle_hooks_run_total", "sysidle_hooks_failed_total",
                "sysidle_hooks_dropped_total",
                "sysidle_vm_full_idle_since_timestamp_seconds"]:
        typ = "gauge" if fam.endswith("_seconds") else "counter"
        check(re.search(r"^# HELP %s \S" % fam, last, re.M) and
              re.search(r"^# TYPE %s %s$" % (fam, typ), last, re.M),
              "%s: HELP and TYPE %s" % (fam, typ), last)

    # The same name again: the same uuid. --uuid: that one, lowercase.
    s2 = run_idle(tmp, "second", name)[1]
    got2 = uuids_of(s2)[0] if s2 else None
    check(got2 == {want}, "a second run of the same name: the same uuid",
          "%s vs %s" % (got2, want))
    given = "0F4C1A2B-3C4D-5E6F-8A9B-0123456789AB"
    s3 = run_idle(tmp, "given", name, ["--uuid", given])[1]
    got3 = uuids_of(s3)[0] if s3 else None
    check(got3 == {given.lower()} and given.lower() != want,
          "--uuid %s: that uuid, lowercase, on every sample" % given,
          "%s" % got3)


def main():
    skip = vmmtest.vm_or_skip()
    if skip:
        return skip
    if not PROMTOOL:
        print("# SKIP: promtool not found on PATH (Debian package "
              "prometheus): the promtool checks are skipped, the rest runs")
    if not os.path.exists(tool("idle.elf")):
        print("# SKIP: %s not built" % tool("idle.elf"))
        return 77
    with tempfile.TemporaryDirectory() as tmp:
        test_file(tmp)
    rc = vmmtest.finish()
    if rc == 0 and not PROMTOOL:
        print("# SKIP: promtool not found: not a pass (exit 77)")
        return 77
    return rc


if __name__ == "__main__":
    sys.exit(main())
