#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""--hooks: libvirt-style hooks DIR/vm and DIR/vm.d/* on start, idle begin,
idle end and stop, from the VMM's hooks worker thread: each event with
its exact argv, stdin (libvirt's domain XML with the state element) and
environment, vm.d's order, a name with spaces and quotes intact; pending
idle events of a slow hook coalesced (begin and end alternate, nothing
out of order); a missing --hooks directory and a file. The timeout and
the stop are test_hooks_timeout.py, the sample hook test_hooks_sample.py.

usage: test_hooks.py VMM GUEST_DIR GUEST_TOOLS_DIR SYSIDLECTL
Exit: 0 all passed, 1 a check failed, 77 skipped (no usable /dev/kvm)."""
import os
import re
import sys
import tempfile
import xml.etree.ElementTree as ET

import vmmtest
from vmmtest import check, poll_until, read_lines

vmmtest.init(sys.argv)
from hook_recorder import (  # noqa: E402
    ENV, GUESTS, NAME, Vm, check_xml, children, event, fully_idle, recorder,
    records, vm_args, write_hook)


def element(rs):
    """The urn:sysidle:1 element of the first record of @rs (None)."""
    try:
        return ET.fromstring(rs[0]["stdin"]).find(
            "metadata/{urn:sysidle:1}state")
    except (ET.ParseError, TypeError, IndexError):
        return None


RATIOS = ["full_idle_ratio_1m", "full_idle_ratio_1h", "full_idle_ratio_24h"]


def check_duty(started, begin, end, again, stopped):
    """The duty cycle in the hooks' element: none at "started"; the three
    ratios in the others, as of their since; "idle end" left full idle at
    its since, the next "idle begin" says so; the first "idle begin" has
    no leave yet."""
    els = [element(rs) if rs else None
           for rs in (started, begin, end, again, stopped)]
    if not all(e is not None for e in els):
        check(False, "hooks: the duty cycle attributes (an event missing)",
              els)
        return
    s, b, e, a, st = els
    check(all(s.get(k) is None for k in RATIOS + ["left_full_idle_unix_ms"]),
          "hooks started: no duty cycle attributes", s.attrib)
    ok = all(re.fullmatch(r"0\.\d{3}|1\.000", x.get(k) or "")
             for x in (b, e, a, st) for k in RATIOS)
    check(ok, "hooks idle begin / end / stopped: full_idle_ratio_1m, _1h, "
          "_24h, 3 decimals", [x.attrib for x in (b, e, a, st)])
    check(b.get("left_full_idle_unix_ms") is None and
          e.get("left_full_idle_unix_ms") == e.get("since_unix_ms") and
          a.get("left_full_idle_unix_ms") == e.get("since_unix_ms"),
          "hooks: left_full_idle_unix_ms absent before the first leave, "
          "the leave's since at idle end and at the next idle begin",
          [x.attrib for x in (b, e, a)])
    # the VM was busy from its start to its first full idle: below 1; at
    # the end of a full idle period, the last minute mostly idle
    check(float(b.get("full_idle_ratio_24h", "1")) < 1 and
          float(e.get("full_idle_ratio_1m", "0")) > 0,
          "hooks: the ratios as of since (below 1 at the first idle begin, "
          "above 0 at idle end)", [x.attrib for x in (b, e)])


def test_events(tmp):
    """DIR/vm then vm.d/ in strcmp order, for each event, exactly."""
    d = os.path.join(tmp, "events")
    record = os.path.join(tmp, "events.rec")
    os.makedirs(os.path.join(d, "vm.d", "30-dir"))
    write_hook(os.path.join(d, "vm"), recorder(record))
    for n in ["10-b", "2-a", ".hidden"]:
        write_hook(os.path.join(d, "vm.d", n), recorder(record))
    write_hook(os.path.join(d, "vm.d", "noexec"), recorder(record), 0o644)
    order = [os.path.join(d, "vm"), os.path.join(d, "vm.d", "10-b"),
             os.path.join(d, "vm.d", "2-a")]

    log = os.path.join(tmp, "events.log")

    def groups():
        """The records, three by three (one event, each hook in turn)."""
        rs = records(record)
        return [rs[i:i + 3] for i in range(0, len(rs) - len(rs) % 3, 3)]

    def find(pattern, start=0):
        for i, g in enumerate(groups()[start:], start):
            if re.fullmatch(pattern, event(g[0])):
                return i
        return None

    vm = Vm(vm_args(d, "--sysidle-log", log))
    i_started = poll_until(lambda: find("started begin -") is not None, 30)
    i_begin = i_end = i_again = None
    i_begin = poll_until(lambda: find("idle begin -"), 30)
    # A wake-up while a hook still runs may coalesce "idle end" away (the
    # next "idle begin" replaces it): wake the guest when no hook runs, and
    # again if it happened all the same.
    for attempt in range(5):
        if i_end is not None or not poll_until(
                lambda: fully_idle(vm, log) and not children(vm.p.pid), 30):
            break
        n = len(groups())
        vm.send("x")
        i_end = poll_until(lambda: find(r"idle end \d+", n), 5)
    if i_end is not None:
        i_again = poll_until(lambda: find("idle begin -", i_end), 30)
    rc = vm.stop()
    g = groups()
    started = g[0] if i_started and g else None
    begin, end, again = [g[i] if i is not None else None
                         for i in [i_begin, i_end, i_again]]
    stopped = g[-1] if g and event(g[-1][0]) == "stopped end -" else None
    recs = records(record)
    check(rc == 143, "SIGTERM: exit 143", "exit %s\n%s" % (rc, vm.err))
    uuids = set()
    for ev, rs, state in [("started begin -", started, "NOT"),
                          ("idle begin -", begin, "FULL_NOTED"),
                          ("idle end MS", end, None),
                          ("idle begin - (again)", again, "FULL_NOTED"),
                          ("stopped end -", stopped, None)]:
        what = "hooks %s" % ev
        if not rs:
            check(False, what + ": run", "\n".join(map(event, recs)))
            continue
        want = ev.split()[:3]
        if ev == "idle end MS":
            ok = all(re.fullmatch(r"\d+", r["argv"][4]) for r in rs)
            check(ok, what + ": MS a non-negative integer",
                  [r["argv"] for r in rs])
            want[2] = rs[0]["argv"][4]
        check([r["argv"] for r in rs] == [[p, NAME] + want for p in order],
              what + ": exact argv, DIR/vm then vm.d/10-b then vm.d/2-a",
              [r["argv"] for r in rs])
        uuids.add(check_xml(rs[0], state, what))
        check(all(sorted(r["env"]) == sorted(ENV) for r in rs),
              what + ": environment exactly LC_ALL, PATH, HOME",
              [r["env"] for r in rs])
        check(all(r["ppid"] == vm.p.pid and r["cwd"] == "/" and
                  r["pgid"] == r["pid"] for r in rs),
              what + ": child of the VMM, in /, own process group",
              [(r["ppid"], r["cwd"], r["pgid"], r["pid"]) for r in rs] +
              [vm.p.pid])
    check_duty(started, begin, end, again, stopped)
    check(uuids == {vmmtest.vm_uuid(NAME)},
          "the same uuid in every event: the version-5 uuid of the name",
          "%s, expected %s" % (uuids, vmmtest.vm_uuid(NAME)))
    check(recs and event(recs[-1]) == "stopped end -" and
          [event(r) for r in recs].count("stopped end -") == 3,
          "stopped end - is the last event, run once per hook",
          "\n".join(map(event, recs)))
    ran = {r["argv"][0] for r in recs}
    check(ran == set(order), "hidden, non-executable files and directories "
          "in vm.d are not run", ran)
    check("warning" not in vm.err, "no warning on stderr", vm.err)


def test_coalesce(tmp):
    """A slow hook and quick state changes: pending idle events coalesce,
    the latest state wins, nothing runs out of order."""
    d = os.path.join(tmp, "slow")
    record = os.path.join(tmp, "slow.rec")
    log = os.path.join(tmp, "slow.log")
    os.makedirs(d)
    write_hook(os.path.join(d, "vm"), recorder(record, sleep=2))
    vm = Vm(vm_args(d, "--sysidle-log", log))

    def noted():
        return len([l for l in read_lines(log) if "-> FULL_NOTED" in l])

    first = poll_until(lambda: fully_idle(vm, log) and
                       [r for r in records(record)
                        if event(r) == "idle begin -"], 30)
    cycles = 0
    if first:
        for i in range(6):
            n = noted()
            vm.send("x")
            if not poll_until(lambda: noted() > n, 5):
                break
            cycles += 1
    # Fully idle again, then stop: hooks_stop runs what is still queued,
    # so the records are then complete.
    poll_until(lambda: fully_idle(vm, log), 15)
    rc = vm.stop()
    recs = records(record)
    idle = [r for r in recs if r["argv"][2] == "idle"]
    check(rc == 143 and first and cycles == 6, "6 wake-ups while a slow hook "
          "runs: exit 143", "exit %s, %d cycles\n%s" % (rc, cycles,
                                                       vm.err))
    states = []
    for r in recs:
        st = ET.fromstring(r["stdin"]).find("metadata/{urn:sysidle:1}state")
        states.append((st.get("since"), event(r), st.get("state")))
    idle_states = [s for s in states if s[1].startswith("idle ")]
    check(1 <= len(idle) < 1 + 2 * cycles,
          "%d idle hooks ran for %d idle state changes (coalesced)" %
          (len(idle), 1 + 2 * cycles), "\n".join(map(str, states)))
    check(idle_states == sorted(idle_states) and
          all(ev.startswith("idle begin") == (s == "FULL_NOTED")
              for _, ev, s in idle_states),
          "idle hooks in order, each with its event's state", states)
    check(all(ev.startswith("idle begin") == (i % 2 == 0)
              for i, (_, ev, _) in enumerate(idle_states)) and
          idle_states and re.fullmatch(r"idle end \d+", idle_states[-1][1]),
          "idle begin and idle end alternate, and the stop of the fully "
          "idle VM ends its idle period ('idle end' before 'stopped end')",
          "\n".join(map(str, states)))
    check(event(recs[0]) == "started begin -" and
          event(recs[-1]) == "stopped end -",
          "started first, stopped last (never dropped)",
          [event(r) for r in recs])


def test_dirs(tmp):
    h = os.path.join(GUESTS, "hello.elf")
    rc, out, err = vmmtest.run(["--hooks", os.path.join(tmp, "nonexistent"),
                                "--control", "none", h])
    check(rc == 0 and "warning" not in err, "--hooks DIR missing: no hooks, "
          "silently", "exit %s\n%s" % (rc, err))
    f = os.path.join(tmp, "a-file")
    write_hook(f, "")
    rc, out, err = vmmtest.run(["--hooks", f, "--control", "none", h])
    check(rc == 0 and "warning: --hooks '%s'" % f in err,
          "--hooks FILE: a warning, no hooks", "exit %s\n%s" % (rc, err))


def main():
    skip = vmmtest.vm_or_skip("idle.elf")
    if skip:
        return skip
    with tempfile.TemporaryDirectory() as tmp:
        test_dirs(tmp)
        test_events(tmp)
        test_coalesce(tmp)
    return vmmtest.finish()


if __name__ == "__main__":
    sys.exit(main())
