#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""--metrics-file (the Prometheus text file) with the VMM, and sysidlectl
against it.

usage: test_metrics.py VMM GUEST_DIR GUEST_TOOLS_DIR SYSIDLECTL
Exit: 0 all passed, 1 a check failed, 77 skipped (no usable /dev/kvm).

idle.elf runs with --metrics-file and --control: the file written at
start and complete, every family, the file against sysidlectl --json
status, sysidlectl's commands against the VM, no rewrite while fully
idle, the file after exit; a directory that goes away; a name with quotes
and backslashes. When the VMM does not serve its control socket (the file
appears, the socket does not), the end-to-end sysidlectl checks are
skipped with a message. The parser and sysidlectl's runner are in
metrics_file.py; sysidlectl against fake servers is
test_sysidlectl_fake.py."""
import json
import os
import re
import signal
import socket
import stat
import sys
import tempfile
import threading
import time

import vmmtest
from vmmtest import check, tool

vmmtest.init(sys.argv)
from metrics_file import (  # noqa: E402
    CLOCK, CTL, Metrics, Vm, Watch, all_halted, check_format, ctl,
    fully_idle, poll_until, read_metrics, read_versioned,
    text_string_to_metric_families)


def status_json(sock):
    rc, out, err, _ = ctl(["--json", "status", sock])
    try:
        return json.loads(out) if rc == 0 else None
    except ValueError:
        return None


def socket_served(sock):
    try:
        if not stat.S_ISSOCK(os.stat(sock).st_mode):
            return False
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(2)
        s.connect(sock)
        s.close()
        return True
    except OSError:
        return False



def test_consistency(sock, f):
    """The file against the socket, while fully idle (nothing changes).
    Right after a change the file's snapshot may be one the VMM is about to
    replace (a vCPU caught just before its HLT): compared again, bounded,
    until they agree."""
    def agree():
        m = fully_idle(f)
        s1 = status_json(sock)
        s2 = status_json(sock)
        bad = []
        try:
            compare(m, s1, s2, bad)
        except (KeyError, TypeError, IndexError) as e:
            bad.append("status object: %r" % e)
        return bad
    bad = vmmtest.poll_until(agree, 10, step=0.05, done=lambda b: not b)
    if bad is None:
        bad = agree()
    check(not bad, "the metrics file agrees with sysidlectl --json status",
          "\n".join(bad))


def compare_duty(m, s1, bad):
    """The duty cycle: the file's leave and longest busy stretch against
    the status object's; its windows (the VM is younger than a day: the
    day's covers its life, its idle time the live full-idle seconds)."""
    d, c = s1["duty"], s1["counters"]
    left = m.value("sysidle_vm_left_full_idle_timestamp_seconds")
    if abs(left * 1000 - d["left_full_idle_unix_ms"]) > 0.5:
        bad.append("left full idle: file %s, status %s" % (
            left, d["left_full_idle_unix_ms"]))
    if abs(m.value("sysidle_vm_longest_busy_seconds") -
           d["longest_busy_s"]) > 2e-6:
        bad.append("longest busy: file %s, status %s" % (
            m.value("sysidle_vm_longest_busy_seconds"), d["longest_busy_s"]))
    for w in ["1m", "1h", "24h"]:
        span, idle, r = d["span_s"][w], d["full_idle_s"][w], \
            d["full_idle_ratio"][w]
        if not (0 <= idle <= span + 1e-6 and
                abs(r - (idle / span if span else 0)) < 2e-6):
            bad.append("duty %s: ratio %s, %s of %s s" % (w, r, idle, span))
    if abs(d["span_s"]["24h"] - s1["uptime_s"]) > 0.01 or \
            abs(d["full_idle_s"]["24h"] - c["full_idle_seconds"]) > 0.01:
        bad.append("duty 24h: %s of %s s, uptime %s, full idle %s s" % (
            d["full_idle_s"]["24h"], d["span_s"]["24h"], s1["uptime_s"],
            c["full_idle_seconds"]))
    if not (d["longest_busy_24h_s"] == d["longest_busy_s"] > 0):
        bad.append("longest busy %s, in 24 h %s" % (
            d["longest_busy_s"], d["longest_busy_24h_s"]))


def compare(m, s1, s2, bad):
    """File @m, then status objects @s1 and @s2 read after it: what
    disagrees goes into @bad."""
    if not m or not s1 or not s2:
        bad.append("file %s, status %s %s" % (bool(m), s1, s2))
    else:
        if s1["state"] != "FULL_NOTED" or s1["state_num"] != 4:
            bad.append("state %s" % s1["state"])
        if s1["name"] != m.samples["sysidle_vm_info"][0][0]["vm"] or \
                s1["uuid"] != m.samples["sysidle_vm_info"][0][0]["uuid"]:
            bad.append("name/uuid")
        if abs(s1["since_unix_ms"] / 1000 -
               m.value("sysidle_vm_state_since_timestamp_seconds")) > 0.0015:
            bad.append("since %s vs %s" % (
                s1["since_unix_ms"],
                m.value("sysidle_vm_state_since_timestamp_seconds")))
        c = s1["counters"]
        if c["full_idle_periods"] != \
                m.value("sysidle_vm_full_idle_periods_total"):
            bad.append("full_idle_periods")
        if c["full_idle_seconds"] + 0.001 < \
                m.value("sysidle_vm_full_idle_seconds_total"):
            bad.append("full_idle_seconds went back")
        # vmm/export/README.md's live value ("Metrics"): the file's ended
        # periods plus the current one from its start, the socket's live
        # total
        live = m.value("sysidle_vm_full_idle_seconds_total") + \
            m.value("sysidle_vm_full_idle") * (
                s1["since_unix_ms"] / 1000 - m.value(
                    "sysidle_vm_full_idle_since_timestamp_seconds") +
                s1["in_state_s"])
        if abs(live - c["full_idle_seconds"]) > 0.003:
            bad.append("live full-idle seconds %.6f (file %s + since), "
                       "socket %s" % (live, m.value(
                           "sysidle_vm_full_idle_seconds_total"),
                           c["full_idle_seconds"]))
        compare_duty(m, s1, bad)
        for k, fam in [("ticks_suppressed", "sysidle_ticks_suppressed_total"),
                       ("host_timer_wakeups",
                        "sysidle_host_timer_wakeups_total")]:
            if c[k] < m.value(fam):
                bad.append("%s %s < %s" % (k, c[k], m.value(fam)))
        for v1, v2 in zip(s1["vcpus"], s2["vcpus"]):
            i = v1["id"]
            if v1["idle"] != (m.value("sysidle_vcpu_halted", i) == 1):
                bad.append("vcpu %d idle %s" % (i, v1["idle"]))
            if not (m.value("sysidle_vcpu_halt_exits_total", i) <=
                    v1["halt_exits"] <= v2["halt_exits"]):
                bad.append("vcpu %d halt exits %s %s %s" % (
                    i, m.value("sysidle_vcpu_halt_exits_total", i),
                    v1["halt_exits"], v2["halt_exits"]))


def test_ctl_vm(vm, sock, f, name):
    d = os.path.dirname(sock)
    # FULL_NOTED comes before the timekeeper's last tick-only wake-up has
    # ended (README, timekeeper rule): a vCPU may show running for a
    # moment. Asked again, bounded, until the row is the one expected.

    def listed():
        r = ctl(["--dir", d, "list"])
        row = [l.split() for l in r[1].splitlines()[1:]]
        ok = r[0] == 0 and len(row) == 1 and \
            [name, "FULL_NOTED"] == row[0][:2] and \
            row[0][3:] == ["2/2", str(vm.p.pid)]
        return ok, r
    ok, (rc, out, err, _) = vmmtest.poll_until(listed, 10, step=0.05,
                                               done=lambda v: v[0]) or \
        listed()
    check(ok,
          "sysidlectl list: the VM, FULL_NOTED, 2/2 vCPUs idle, its PID",
          "exit %s\n%s%s" % (rc, out, err))
    rc, out, err, _ = ctl(["--dir", d, "--json", "list"])
    try:
        o = json.loads(out)
    except ValueError:
        o = {}
    check(rc == 0 and o.get("name") == name and o.get("pid") == vm.p.pid,
          "sysidlectl --json list: the VM's status object",
          "exit %s\n%s%s" % (rc, out, err))

    def status_ok():
        r = ctl(["--dir", d, "status", "vm"])
        return (r[0] == 0 and
                re.search(r"^state +FULL_NOTED since", r[1], re.M) and
                re.search(r"^duty cycle \(fully idle\)\n  1m +\d+\.\d % of "
                          r"[\d.]+s\n  1h .*\n  24h .*\n  longest_busy +\S+ "
                          r"\(24h: \S+\)\n  left_full_idle +\S+$", r[1],
                          re.M) and
                re.search(r"^ +1 +\d+ +yes +\d+ +\d+$", r[1], re.M)), r
    ok, (rc, out, err, _) = vmmtest.poll_until(status_ok, 10, step=0.05,
                                               done=lambda v: v[0]) or \
        status_ok()
    check(ok,
          "sysidlectl status NAME: FULL_NOTED, the vCPU table, the duty "
          "cycle",
          "exit %s\n%s%s" % (rc, out, err))
    test_consistency(sock, f)

    periods = fully_idle(f).value("sysidle_vm_full_idle_periods_total")
    w = Watch(["watch", sock])
    wj = Watch(["--json", "watch", sock])
    first = w.wait_line(r"FULL_NOTED \(current state\)", 10)
    firstj = wj.wait_line(r'"cmd":\s*"watch"', 10)
    check(first and firstj, "sysidlectl watch: the current state first",
          w.detail() + "\n" + wj.detail())
    rc, out, err, _ = ctl(["--dir", d, "kick", "vm"])
    check(rc == 0, "sysidlectl kick NAME: exit 0", "exit %s\n%s%s" %
          (rc, out, err))
    line = w.wait_line(r"^%s FULL_NOTED -> NOT( vcpu \d+)? full idle \d+ ms$"
                       % CLOCK, 10)
    check(line, "after kick, watch prints FULL_NOTED -> NOT", w.detail())
    linej = wj.wait_line(r'"from":\s*"FULL_NOTED"', 10)
    try:
        ev = json.loads(linej or "{}")
    except ValueError:
        ev = {}
    check(ev.get("event") == "state" and ev.get("to") == "NOT" and
          isinstance(ev.get("full_idle_ms"), int),
          "after kick, watch --json prints the raw event", wj.detail())
    m = poll_until(lambda: fully_idle(f, periods + 1), 30)
    check(m, "after kick the VM idles again: a new full-idle period in "
          "the file", read_metrics(f) and read_metrics(f).text)
    return [w, wj]


def check_stable(f, what):
    """Measured from a settled full idle: the file FULL_NOTED with every
    vCPU halted (else the VMM rewrites it once more, by design). A window
    in which the VM left full idle (its state changed: a new since; the
    timekeeper's tick-only window can age out on a loaded host just after
    FULL_NOTED) measures nothing: then measured again, at most 5 times. A
    rewrite without a state change fails at once."""
    for _ in range(5):
        poll_until(lambda: fully_idle(f, halted=True), 30)
        m, a, _ = read_versioned(f)
        time.sleep(2)  # the measurement window itself, not synchronisation
        n, b, _ = read_versioned(f)
        left = a != b and m and n and m.ok() and n.ok() and (
            n.value("sysidle_vm_state_since_timestamp_seconds") !=
            m.value("sysidle_vm_state_since_timestamp_seconds"))
        if not left:
            break
    ok = a and a == b and m.value("sysidle_vm_state") == 4 and all_halted(m)
    check(ok, "%s: the file is not rewritten while fully idle "
          "(inode and mtime stable over 2 s)" % what, "%s %s\n%s\n%s" %
          (a, b, m and m.text, n and n.text))


def test_vm(tmp):
    idle = tool("idle.elf")
    cdir, mdir = os.path.join(tmp, "ctl"), os.path.join(tmp, "met")
    os.mkdir(cdir)
    os.mkdir(mdir)
    sock, f = os.path.join(cdir, "vm.sock"), os.path.join(mdir, "vm.prom")
    name = "metrics-%d" % os.getpid()
    t0 = time.time()
    vm = Vm(["--cpus", "2", "--sysidle", "--append", "hz=250", "--control",
             sock, "--metrics-file", f, "--name", name, idle])
    watches = []
    try:
        first = poll_until(lambda: read_metrics(f), 30)
        check(first and first.ok(), "--metrics-file: written at start, "
              "complete", first and "\n".join(first.problems))
        if not first:
            return
        bad = check_format(first, name, 2, True)
        check(not bad, "every family present: type, HELP, labels",
              "\n".join(bad) + "\n" + first.text)
        m = poll_until(lambda: fully_idle(f, halted=True), 30)
        check(m and m.value("sysidle_vm_full_idle") == 1 and
              m.value("sysidle_vm_up") == 1 and
              m.value("sysidle_vm_full_idle_periods_total") >= 1 and
              all(m.value("sysidle_vcpu_halted", i) == 1 for i in (0, 1)),
              "the guest idles: sysidle_vm_up 1, sysidle_vm_state 4, "
              "sysidle_vm_full_idle 1, both vCPUs halted", read_metrics(f).text)
        if not m:
            return
        since = m.value("sysidle_vm_state_since_timestamp_seconds")
        check(t0 - 1 < since < time.time() + 1,
              "sysidle_vm_state_since_timestamp_seconds is the wall clock "
              "time of the change", "%s not in %s..%s" % (since, t0,
                                                        time.time()))
        check(m.value("sysidle_vm_full_idle_since_timestamp_seconds") ==
              since, "in FULL_NOTED, sysidle_vm_full_idle_since_timestamp_"
              "seconds is the change's time", m.text)
        check(os.listdir(mdir) == ["vm.prom"], "no temporary file left in "
              "the directory", os.listdir(mdir))

        served = poll_until(lambda: socket_served(sock), 2)
        if served:
            watches = test_ctl_vm(vm, sock, f, name)
        else:
            print("# the VMM does not serve --control %s (the control "
                  "socket server is not in place yet): end-to-end "
                  "sysidlectl checks skipped" % sock)

        # A serial byte wakes the guest: rewritten at the change.
        check_stable(f, "FULL_NOTED (before a serial byte)")
        m, before, _ = read_versioned(f)
        periods = m.value("sysidle_vm_full_idle_periods_total")
        secs = m.value("sysidle_vm_full_idle_seconds_total")
        t_byte = time.time()
        vm.send("x")
        # The first new version this test sees: how long after the state
        # change it shows was it written? Both times are the VMM's own (the
        # change's timestamp in the file, the file's mtime), so a loaded
        # host delaying this reader or the byte's delivery does not count;
        # a rewrite left to the 1 s periodic timer would be >= 1 s late.
        got = poll_until(lambda: (lambda v: v if v[1] not in (None, before)
                                  else None)(read_versioned(f)), 5,
                         step=0.002)
        after, _, mtime = got or (read_metrics(f), None, None)
        since_a = after.value("sysidle_vm_state_since_timestamp_seconds") \
            if after and after.ok() else None
        dt = mtime - since_a if got and since_a is not None else -1
        check(got and -0.05 < dt < 0.9 and after.ok() and
              (after.value("sysidle_vm_state") != 4 or
               after.value("sysidle_vm_full_idle_periods_total") > periods),
              "a serial byte: the file is rewritten at the state change "
              "(written %.3f s after the change it shows, no periodic "
              "rewrite is armed in full idle)" % dt,
              after and after.text)
        m = poll_until(lambda: fully_idle(f, periods + 1), 30)
        # The new period began after the byte was sent (the old one is
        # over 2 s older), and is not in the future.
        since = m and m.value("sysidle_vm_state_since_timestamp_seconds")
        check(m and m.value("sysidle_vm_full_idle_seconds_total") >=
              secs + 1.9 and t_byte - 0.002 <= since <= time.time() + 0.002,
              "the guest idles again: one more full-idle period, the "
              "seconds counter includes the last (>= 2 s) period",
              "periods %s secs %s\n%s" % (periods, secs,
                                          read_metrics(f).text))
        if not m:
            return

        # Atomic replacement: a reader parsing every version it sees.
        stop = threading.Event()
        seen = {"reads": 0, "bad": [], "texts": set()}

        def reader():
            while not stop.is_set():
                try:
                    with open(f) as fh:
                        text = fh.read()
                except OSError as e:
                    seen["bad"].append("open: %s" % e)
                    continue
                mm = Metrics(text, 2)
                seen["reads"] += 1
                seen["texts"].add(text)
                if not mm.ok():
                    seen["bad"].append("; ".join(mm.problems))

        rt = threading.Thread(target=reader, daemon=True)
        rt.start()
        n, periods = 0, m.value("sysidle_vm_full_idle_periods_total")
        for i in range(8):
            if i % 2:
                os.kill(vm.p.pid, signal.SIGUSR2)
            else:
                vm.send("y")
            m = poll_until(lambda: fully_idle(f, periods + 1), 20)
            if not m:
                break
            # the reader thread has had its look at this version before
            # the next wake-up replaces it (bounded)
            poll_until(lambda: m.text in seen["texts"], 5)
            periods = m.value("sysidle_vm_full_idle_periods_total")
            n += 1
        stop.set()
        rt.join(5)
        check(n == 8 and not seen["bad"] and len(seen["texts"]) >= 8,
              "8 wake-ups (serial, SIGUSR2): a reader looping on the file "
              "(%d reads, %d versions) never sees a partial one" %
              (seen["reads"], len(seen["texts"])),
              "%d cycles\n%s" % (n, "\n".join(seen["bad"][:10])))
        check_stable(f, "FULL_NOTED again")
    finally:
        rc = vm.stop()
        check(rc == 143, "the VM stops on SIGTERM (exit 143)",
              "exit %s\n%s" % (rc, vm.err))
        for w in watches:
            wrc = w.wait(10)
            check(wrc == 0, "sysidlectl watch %s: exit 0 when the VM stops"
                  % " ".join(w.args[:-1]), w.detail())
        last = read_metrics(f)
        check(last and last.ok() and os.listdir(mdir) == ["vm.prom"],
              "after exit: the file complete, no temporary file",
              "%s %s" % (last and last.problems, os.listdir(mdir)))
        check(last and last.value("sysidle_vm_up") == 0 and
              last.value("sysidle_vm_full_idle") == 0 and
              last.value("sysidle_vm_paused") == 0,
              "after exit the file says the VM is gone: sysidle_vm_up 0, "
              "sysidle_vm_full_idle 0, sysidle_vm_paused 0",
              last and last.text)
        check("warning" not in vm.err, "no warning from the VMM", vm.err)


def test_unwritable(tmp):
    """The file's directory goes away while the VM runs (a missing one at
    start is refused: test_outputs.py)."""
    d = os.path.join(tmp, "going-dir")
    f = os.path.join(d, "m.prom")
    log = os.path.join(tmp, "unwritable.log")
    os.mkdir(d)
    vm = Vm(["--cpus", "2", "--sysidle", "--sysidle-log", log, "--append",
             "hz=250", "--control", "none", "--metrics-file", f,
             tool("idle.elf")])

    def remove_dir():
        """False while a rewrite's temporary file races the removal."""
        try:
            for e in os.listdir(d):
                os.unlink(os.path.join(d, e))
            os.rmdir(d)
            return True
        except FileNotFoundError:
            return not os.path.exists(d)
        except OSError:
            return False

    gone = poll_until(lambda: os.path.exists(f), 30) and \
        poll_until(remove_dir, 10)

    def stopped(n):
        try:
            with open(log) as fh:
                return fh.read().count("tick stopped") >= n
        except OSError:
            return False

    ok = poll_until(lambda: stopped(1), 30)
    if ok:
        vm.send("x")
        ok = poll_until(lambda: stopped(2), 30)
    rc = vm.stop()
    warns = [l for l in vm.err.splitlines() if "--metrics-file" in l]
    check(gone and ok and rc == 143 and len(warns) == 1 and
          warns[0].startswith("vmm: warning: ") and f in warns[0],
          "an unwritable --metrics-file: one warning, the VM keeps running "
          "(idled, woke, idled again)", "exit %s\n%s" % (rc, vm.err))


def test_escaping(tmp):
    """A name with a quote and backslashes; without --sysidle."""
    f = os.path.join(tmp, "esc.prom")
    name = 'q"uo\\te\\n "x"'
    vm = Vm(["--name", name, "--control", "none", "--metrics-file", f,
             "--append", "hz=250", tool("idle.elf")])
    m = poll_until(lambda: read_metrics(f, 1), 30)
    rc = vm.stop()
    bad = check_format(m, name, 1, False) if m else ["no file"]
    check(m and m.ok() and not bad and m.value("sysidle_vm_state") == 0 and
          m.value("sysidle_vm_full_idle") == 0 and rc == 143,
          "a VM name with quotes and backslashes: the parser gives it back "
          "exactly; without --sysidle: sysidle=\"false\", state 0",
          "exit %s\n%s\n%s\n%s" % (rc, "\n".join(bad),
                                   m and m.text, vm.err))


def main():
    skip = vmmtest.vm_or_skip()
    if skip:
        return skip
    if not CTL:
        print("# usage: test_metrics.py VMM GUEST_DIR GUEST_TOOLS_DIR "
              "SYSIDLECTL")
        return 1
    if text_string_to_metric_families is None:
        check(False, "python3 prometheus_client is importable (Debian "
              "python3-prometheus-client)")
        return vmmtest.finish()
    with tempfile.TemporaryDirectory() as tmp:
        if not os.path.exists(tool("idle.elf")):
            print("# %s not built: VMM checks skipped" % tool("idle.elf"))
        else:
            test_vm(tmp)
            test_unwritable(tmp)
            test_escaping(tmp)
    return vmmtest.finish()


if __name__ == "__main__":
    sys.exit(main())
