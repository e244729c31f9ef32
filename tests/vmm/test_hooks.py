#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""--hooks: libvirt-style hooks DIR/vm and DIR/vm.d/* on start, idle begin,
idle end and stop, from the VMM's hooks worker thread.

usage: test_hooks.py VMM GUEST_DIR GUEST_TOOLS_DIR SYSIDLECTL
Exit: 0 all passed, 1 a check failed, 77 skipped (no usable /dev/kvm)."""
import functools
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET

import vmmtest
from vmmtest import check, poll_until, read_lines, tool
from procfs import alive  # noqa: E402 (after vmmtest: it sets the path)
import urnschema  # noqa: E402

vmmtest.init(sys.argv)
GUESTS = vmmtest.GUESTS
NAME = "it's a \"test\" vm"
ENV = ["LC_ALL=C", "HOME=/",
       "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]
SINCE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
STATE_NUMS = {"NOT": 0, "SHORT": 1, "LONG": 2, "FULL": 3, "FULL_NOTED": 4}
UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-"
                  r"[0-9a-f]{12}$")

# Appends one JSON line per run to RECORD: argv, stdin, the environment as
# exec'd, its parent, process group and working directory. SLEEP: seconds
# to sleep after recording an "idle" event (a slow hook).
RECORDER = r'''#!%(python)s
import json, os, sys, time
data = sys.stdin.read()
with open("/proc/self/environ", "rb") as f:
    env = [e for e in f.read().decode().split("\0") if e]
rec = {"argv": sys.argv, "stdin": data, "env": env, "ppid": os.getppid(),
       "pid": os.getpid(), "pgid": os.getpgid(0), "cwd": os.getcwd(),
       "t": time.time()}
with open(%(record)r, "a") as f:
    f.write(json.dumps(rec) + "\n")
if %(sleep)r and sys.argv[2] == "idle":
    time.sleep(%(sleep)r)
'''
# On "idle begin": says so on stderr, keeps its stdin in MARKER.xml,
# records its PID, its child's and the time it started (wall clock, s), and
# hangs (the child is in its process group: a timeout must kill both).
HANG = r'''#!/bin/sh
t=$(date +%%s.%%N)
[ "$2 $3" = "idle begin" ] || exit 0
cat > '%(marker)s.xml'
echo "hanging on purpose" >&2
sleep 1000 &
echo "$$ $! $t" >> '%(marker)s'
wait
'''
FAIL = r'''#!/bin/sh
echo "failing on purpose: $2 $3" >&2
exit 3
'''


def write_hook(path, text, mode=0o755):
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, mode)


def recorder(record, sleep=0):
    return RECORDER % {"python": sys.executable, "record": record,
                       "sleep": sleep}


def records(path):
    out = []
    for line in read_lines(path):
        try:
            out.append(json.loads(line))
        except ValueError:
            pass  # a line being written
    return out


def event(r):
    return " ".join(r["argv"][2:])


# The VMM in the background; here it may take up to 20 s to stop.
Vm = functools.partial(vmmtest.Vm, stop_timeout=20)


def vm_args(hooks, *extra):
    return ["--cpus", "2", "--sysidle", "--append", "hz=250", "--hooks",
            hooks, "--control", "none", "--name", NAME] + list(extra) + \
        [tool("idle.elf")]


def children(pid):
    """The PIDs of @pid's child processes (running hooks)."""
    out = []
    for p in os.listdir("/proc"):
        try:
            with open("/proc/%s/stat" % p) as f:
                if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                    out.append(int(p))
        except (OSError, ValueError, IndexError):
            pass
    return out


def fully_idle(vm, log):
    """The guest is up (serial interrupt routed: a byte wakes it) and the
    VM's latest state in the --sysidle-log is FULL_NOTED."""
    if not any(re.match(r"idle: \d+ cpus up", l) for l in vm.lines):
        return False
    states = re.findall(r"state \S+ -> (\S+)", "\n".join(read_lines(log)))
    return states[-1:] == ["FULL_NOTED"]


def check_xml(r, state, what):
    try:
        dom = ET.fromstring(r["stdin"])
        st = dom.find("metadata/{urn:sysidle:1}state")
        ok = (dom.tag == "domain" and dom.get("type") == "kvm" and
              dom.findtext("name") == NAME and
              UUID.match(dom.findtext("uuid") or "") is not None and
              dom.findtext("vcpu") == "2" and st is not None and
              (st.get("state") == state if state else
               st.get("state") != "FULL_NOTED") and
              SINCE.match(st.get("since", "")) is not None and
              st.get("since_unix_ms", "").isdigit() and
              st.get("num") == str(STATE_NUMS.get(st.get("state"))))
        bad = urnschema.validate(r["stdin"])
    except ET.ParseError as e:
        ok, dom, bad = False, e, str(e)
    check(ok and not bad, "%s: domain XML on stdin (name, uuid, 2 vCPUs, "
          "state %s), its element valid against common/urn-sysidle.rng" %
          (what, state or "not FULL_NOTED"), "%s\n%s" % (bad, r["stdin"]))
    return dom.findtext("uuid") if ok else None


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


def wall_ms(lines, n, xml_path):
    """The wall-clock time (ms) of the first "FULL_NOTED -> NOT" line of
    the --sysidle-log @lines from index @n on; the log's last
    "-> FULL_NOTED" line before @n is the instant whose since_unix_ms is in
    the domain XML at @xml_path. None if any of them is missing."""
    try:
        st = ET.parse(xml_path).find("metadata/{urn:sysidle:1}state")
        since = int(st.get("since_unix_ms"))
    except (OSError, ET.ParseError, AttributeError, TypeError, ValueError):
        return None
    stamp = [float(l.split()[0]) if re.match(r"^\d+\.\d+ ", l) else None
             for l in lines]
    noted = [stamp[i] for i in range(min(n, len(lines)))
             if "-> FULL_NOTED" in lines[i]]
    woke = next((stamp[i] for i in range(n, len(lines))
                 if "state FULL_NOTED -> NOT" in lines[i]), None)
    if not noted or noted[-1] is None or woke is None:
        return None
    return since + (woke - noted[-1])


def hooks_thread_syscall(pid):
    """What the VMM's vmm-hooks thread is doing: its syscall number (poll is
    7 and ppoll 271 on x86-64), "-" when not found."""
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/comm" % (pid, tid)) as f:
                if f.read().strip() != "vmm-hooks":
                    continue
            with open("/proc/%d/task/%s/syscall" % (pid, tid)) as f:
                return f.read().split()[0]
        except (OSError, IndexError):
            pass
    return "-"


def test_hang(tmp):
    """A hung hook is killed at --hook-timeout; the guest and the state
    machine go on meanwhile; a failing hook is reported with its stderr."""
    d = os.path.join(tmp, "hang")
    record = os.path.join(tmp, "hang.rec")
    marker = os.path.join(tmp, "hang.pids")
    log = os.path.join(tmp, "hang.log")
    os.makedirs(os.path.join(d, "vm.d"))
    write_hook(os.path.join(d, "vm.d", "10-fail"), FAIL)
    write_hook(os.path.join(d, "vm.d", "50-hang"), HANG % {"marker": marker})
    write_hook(os.path.join(d, "vm.d", "90-rec"), recorder(record))
    vm = Vm(vm_args(d, "--hook-timeout", "1", "--sysidle-log", log))
    killed_re = re.compile(r"hook %s/vm.d/50-hang %s idle begin: killed after "
                           r"1s; stderr: hanging on purpose" %
                           (re.escape(d), re.escape(NAME)))

    def kills():
        return len(killed_re.findall(vm.err))

    def leaves():
        return len([l for l in read_lines(log) if "FULL_NOTED ->" in l])

    def fresh_hang():
        """Once no hook runs, a wake-up makes an idle end and then a fresh
        idle begin, whose hanging hook starts. (A wake-up while a hook
        runs can coalesce both away: then try again.)"""
        for attempt in range(5):
            if not poll_until(lambda: fully_idle(vm, log) and
                              not children(vm.p.pid), 15):
                return None
            n = len(read_lines(marker))
            vm.send("x")
            h = poll_until(lambda: len(read_lines(marker)) > n and
                           fully_idle(vm, log) and read_lines(marker), 10)
            if h:
                return h
        return None

    hang = None
    if poll_until(lambda: fully_idle(vm, log) and read_lines(marker), 30):
        hang = fresh_hang()
    check(hang is not None, "the hanging hook runs on idle begin",
          vm.err)
    # The wake-up below must come while the hook hangs (1 s): a loaded host
    # can make this test see the hang too late for that; then again with a
    # fresh hang (bounded). The vmm-hooks thread is looked at meanwhile,
    # each look valid only if the hook was still alive after it.
    waiter = None
    for attempt in range(3):
        if not hang:
            break
        hook_pid, sleep_pid = map(int, hang[-1].split()[:2])
        t_hook = float(hang[-1].split()[2])  # when the hook started

        def look():
            w = hooks_thread_syscall(vm.p.pid)
            return w if alive(hook_pid) else "gone"
        waiter = poll_until(look, 0.3,
                            done=lambda w: w in ("7", "271", "gone"))
        if waiter in ("7", "271") and time.time() - t_hook < 0.5:
            break
        print("# the hang was seen %.0f ms after the hook started: again "
              "with a fresh one" % ((time.time() - t_hook) * 1000))
        hang = fresh_hang()
    if hang:
        lines0 = read_lines(log)
        n0 = leaves()
        t_send = time.time()
        vm.send("x")
        woke = poll_until(lambda: leaves() > n0, 5)
        # Timed by the VMM's clock, not by when this test read the log:
        # the hook's stdin has the wall-clock time (since_unix_ms) of the
        # FULL_NOTED it runs for, the log's latest "-> FULL_NOTED" line the
        # same instant in ms since the VM started; the wake-up's "FULL_NOTED
        # -> NOT" line follows on that clock.
        wake_ms = wall_ms(read_lines(log), len(lines0), marker + ".xml")
        dt = wake_ms - t_send * 1000 if wake_ms is not None else None
        # The hook is killed once 1 s (--hook-timeout) has passed since just
        # before it was started, about 1 s after the start it recorded
        # itself: a wake-up before that came while it hung.
        hung = wake_ms is not None and wake_ms < (t_hook + 1) * 1000
        check(woke and hung and dt < 500,
              "while the hook hangs, a serial byte wakes the guest and the "
              "state leaves FULL_NOTED in %s ms (the VMM's clock), %s ms "
              "after the hook started" %
              ("-" if dt is None else "%.0f" % dt,
               "-" if wake_ms is None else "%.0f" %
               (wake_ms - t_hook * 1000)),
              "woke %s\n%s" % (woke, "\n".join(read_lines(log)[-5:])))
        check(waiter in ("7", "271"), "the hung hook is waited for by the "
              "vmm-hooks thread, in poll", waiter)
        # every hang so far (a line of the marker each) is killed once, the
        # earlier ones before the next began (fresh_hang waits for that)
        killed = poll_until(lambda: kills() >= len(hang), 10)
        # From the start the hook recorded itself (the VMM's deadline runs
        # from just before it spawned it) to when this test saw the kill.
        dt = time.time() - t_hook
        check(killed and 0.7 < dt < 4, "--hook-timeout 1: the hook is killed "
              "after %.1f s, logged with its stderr" % dt, vm.err)
        gone = poll_until(lambda: not alive(hook_pid) and
                          not alive(sleep_pid), 5)
        check(gone, "the hook's process group is killed (its child too)",
              "hook %d alive %s, child %d alive %s" % (
                  hook_pid, alive(hook_pid), sleep_pid,
                  alive(sleep_pid)))
        # a hook hangs again; stop meanwhile
        fresh_hang()
    rc = vm.stop()
    dt = vm.stop_seconds
    check(rc == 143 and dt < 4, "SIGTERM while a hook hangs: exit 143 in "
          "%.1f s (the hook bounded by its timeout)" % dt,
          "exit %s\n%s" % (rc, vm.err))
    err = vm.err
    check(re.search(r"hook %s/vm.d/10-fail %s started begin: exit status 3; "
                    r"stderr: failing on purpose: started begin" %
                    (re.escape(d), re.escape(NAME)), err),
          "a failing hook is logged with its exit status and stderr", err)
    evs = [event(r) for r in records(record)]
    check(evs[:1] == ["started begin -"] and evs[-1:] == ["stopped end -"]
          and "idle begin -" in evs,
          "the hooks after the hung one still run, stopped last", evs)


def test_stop_bound(tmp):
    """Two hooks that hang on every event, --hook-timeout 2: SIGTERM while
    the first runs "started begin" cuts the hook then running at 2 s from
    the stop, and the last hooks ("stopped end") share one --hook-timeout:
    the first is killed at its end, the second is not run. About 4 s in
    all, where one hook after the other took 8 s."""
    d = os.path.join(tmp, "stopbound")
    os.makedirs(os.path.join(d, "vm.d"))
    marker = os.path.join(tmp, "stopbound-started")
    for name in ["a", "b"]:
        write_hook(os.path.join(d, "vm.d", name),
                   "#!/bin/sh\ntouch %s\nexec sleep 1000\n" % marker)
    vm = Vm(vm_args(d, "--hook-timeout", "2"))
    started = poll_until(lambda: os.path.exists(marker), 10)
    rc = vm.stop(timeout=20)
    took = vm.stop_seconds
    err = vm.err
    a_end = re.search(r"vm\.d/a .* stopped end: killed: stopping, and the "
                      r"hooks' time is spent", err)
    b_end = re.search(r"vm\.d/b .* stopped end: not run: stopping, and the "
                      r"hooks' time is spent", err)
    check(started and rc == 143 and took is not None and took < 5.5 and
          "started begin: killed: stopping" in err and a_end and b_end,
          "hung hooks at exit: the running one cut at one --hook-timeout "
          "after SIGTERM, the 'stopped end' hooks within one more (the "
          "first killed, the next not run, each said): exit after %.1f s "
          "(one after the other: 8 s)" % (took or -1),
          "exit %s\n%s" % (rc, err))


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


SAMPLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                      "..", "tools", "hooks", "vm")
# A stand-in for virsh / logger: records its argv; "virsh dominfo" knows
# the domain named in KNOWN only.
FAKE = r"""#!%(python)s
import json, sys
with open(%(record)r, "a") as f:
    f.write(json.dumps(sys.argv) + "\n")
if sys.argv[1:2] == ["dominfo"]:
    sys.exit(0 if sys.argv[3] == %(known)r else 1)
"""


def test_sample(tmp):
    """tools/hooks/vm with stand-ins for virsh and logger: the VMM's state
    copied into a libvirt domain of the same name (the element as it is,
    valid against the schema), the bridge's leased state only logged, a
    stale one (lease run out, writer gone) ignored."""
    record = os.path.join(tmp, "sample.rec")
    element = ("name='FULL_NOTED' state='FULL_NOTED' num='4' "
               "since='2026-01-02T03:04:05.678Z' since_unix_ms='1767323045678' "
               "full_idle_periods='1' vcpus='2'")
    vmm_xml = ("<domain type='kvm'><name>x</name><uuid>u</uuid><vcpu>2</vcpu>"
               "<metadata><sysidle:state xmlns:sysidle='urn:sysidle:1' "
               "%s/></metadata></domain>\n" % element)
    host = re.sub(r"[^A-Za-z0-9._-]", "-", os.uname().nodename)
    with open("/proc/self/stat") as f:
        ticks = f.read().rsplit(")", 1)[1].split()[19]

    def bridge_xml(until_ms, pid=os.getpid(), start=ticks):
        # libvirt's own XML: several lines, double quotes
        return ('<domain type="kvm" id="3">\n  <name>x</name>\n  <metadata>'
                '\n    <sysidle:state xmlns:sysidle="urn:sysidle:1" %s '
                'writer_host="%s" writer_pid="%d" writer_start_ticks="%s" '
                'valid_until_unix_ms="%d"/>\n  </metadata>\n</domain>\n' %
                (element.replace("'", '"'), host, pid, start, until_ms))
    bins = {}
    for kind, progs in [("both", ["virsh", "logger"]), ("logger", ["logger"]),
                        ("none", [])]:
        bins[kind] = os.path.join(tmp, "bin-" + kind)
        os.makedirs(bins[kind])
        for prog in progs:
            write_hook(os.path.join(bins[kind], prog), FAKE % {
                "python": sys.executable, "record": record, "known": NAME})
        for prog in ["cat", "sed", "tr", "date", "uname", "cut"]:
            os.symlink(subprocess.check_output(["sh", "-c", "command -v " +
                                                prog], text=True).strip(),
                       os.path.join(bins[kind], prog))

    def run(kind, name, *args, xml=vmm_xml):
        if os.path.exists(record):
            os.unlink(record)
        p = subprocess.run([SAMPLE, name] + list(args), input=xml, text=True,
                           capture_output=True, timeout=10,
                           env={"LC_ALL": "C", "HOME": "/",
                                "PATH": bins[kind]})
        calls = [json.loads(l)[1:] for l in read_lines(record)]
        return p.returncode, calls, p.stderr

    rc, calls, err = run("both", NAME, "idle", "begin", "-")
    meta = ["metadata", "--domain", NAME, "--uri", "urn:sysidle:1", "--key",
            "sysidle", "--live", "--set", "<state %s/>" % element]
    check(rc == 0 and calls == [["dominfo", "--domain", NAME], meta],
          "sample hook, idle begin from the VMM, a libvirt domain of that "
          "name: virsh metadata --set with the element as it came, the name "
          "intact", "%s\n%s\n%s" % (rc, calls, err))
    bad = urnschema.validate(meta[-1].replace(
        "<state ", "<state xmlns='urn:sysidle:1' "))
    check(not bad, "the element the sample hook sets validates against "
          "common/urn-sysidle.rng", bad)
    rc, calls, err = run("both", "other vm", "idle", "end", "1234")
    line = ("vm 'other vm': idle end, state FULL_NOTED since "
            "2026-01-02T03:04:05.678Z (idle_ms 1234)")
    check(rc == 0 and calls == [["dominfo", "--domain", "other vm"],
                                ["-t", "sysidle-hook", "--", line]],
          "sample hook, no such libvirt domain: one logger line",
          "%s\n%s\n%s" % (rc, calls, err))
    rc, calls, err = run("logger", NAME, "idle", "end", "5")
    check(rc == 0 and len(calls) == 1 and calls[0][:3] ==
          ["-t", "sysidle-hook", "--"] and NAME in calls[0][3],
          "sample hook, no virsh: one logger line", "%s\n%s\n%s" %
          (rc, calls, err))
    rc, calls, err = run("none", NAME, "idle", "begin", "-")
    check(rc == 0 and not calls and err.startswith("sysidle-hook: vm '%s'"
                                                   % NAME),
          "sample hook, no virsh, no logger: one line on stderr",
          "%s\n%s\n%s" % (rc, calls, err))
    rc, calls, err = run("both", NAME, "started", "begin", "-")
    check(rc == 0 and not calls and not err,
          "sample hook: started/stopped ignored", "%s\n%s\n%s" %
          (rc, calls, err))
    now = int(time.time() * 1000)
    rc, calls, err = run("both", NAME, "idle", "begin", "-",
                         xml=bridge_xml(now + 30000))
    check(rc == 0 and calls == [["-t", "sysidle-hook", "--",
                                 "vm '%s': idle begin, state FULL_NOTED "
                                 "since 2026-01-02T03:04:05.678Z (idle_ms "
                                 "-)" % NAME]],
          "sample hook, the bridge's leased state (libvirt's XML): one log "
          "line, the metadata left to the bridge", "%s\n%s\n%s" %
          (rc, calls, err))
    rc, calls, err = run("both", NAME, "idle", "begin", "-",
                         xml=bridge_xml(now - 5000))
    check(rc == 0 and len(calls) == 1 and "ignored: state FULL_NOTED not "
          "trusted, its lease ran out" in calls[0][-1],
          "sample hook, a lease run out: ignored, saying so",
          "%s\n%s\n%s" % (rc, calls, err))
    rc, calls, err = run("both", NAME, "idle", "end", "7",
                         xml=bridge_xml(now + 30000, pid=0, start=0))
    check(rc == 0 and len(calls) == 1 and "ignored" not in calls[0][-1],
          "sample hook, writer pid 0 (a one-shot writer) in its lease: "
          "trusted, logged", "%s\n%s\n%s" % (rc, calls, err))
    rc, calls, err = run("both", NAME, "idle", "end", "7",
                         xml=bridge_xml(now + 30000, start=int(ticks) + 1))
    check(rc == 0 and len(calls) == 1 and "its writer (pid %d) is gone" %
          os.getpid() in calls[0][-1],
          "sample hook, its writer gone (a pid started at another time): "
          "ignored, saying so", "%s\n%s\n%s" % (rc, calls, err))


def main():
    if not vmmtest.kvm_usable():
        print("1..0 # SKIP /dev/kvm is not usable")
        return 77
    if not os.path.exists(tool("idle.elf")):
        print("1..0 # SKIP %s is not built" % tool("idle.elf"))
        return 77
    with tempfile.TemporaryDirectory() as tmp:
        test_sample(tmp)
        test_dirs(tmp)
        test_events(tmp)
        test_hang(tmp)
        test_stop_bound(tmp)
        test_coalesce(tmp)
    return vmmtest.finish()


if __name__ == "__main__":
    sys.exit(main())
