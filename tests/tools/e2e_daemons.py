#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""Steps 6-13 of test_libvirt_e2e.py: build/sysidle-libvirt and
tools/sysidle-consolidate as daemons on the booted domain.

The domain's pinning is first set by the test (vCPU 0 on the first CPU,
the others on all, the emulator thread on the first: --once left them
packed) and its metadata removed (--once left it):
tools/sysidle-consolidate --libvirt URI --policy pack,suspend --idle-cpus
IDLE --suspend-after 1s --suspend-max 3s --interval 100ms --verbose,
following the domain before build/sysidle-libvirt --libvirt URI
--interval 100 starts. States are polled, each with a deadline; each
check's line has the times measured:
  6. the bridge daemon brings the metadata to FULL_NOTED
  7. the consolidator pins every vCPU and the emulator thread to the idle
     CPU (vcpuPinInfo, emulatorPinInfo), "pack NAME: ..." logged
  8. it pauses the domain (VIR_DOMAIN_PAUSED) --suspend-after after the
     since_unix_ms of its FULL_NOTED, "suspend NAME: paused ..." logged
  9. while it is paused, the metadata read every 0.25 s stays that
     FULL_NOTED (the bridge keeps a paused domain's state)
 10. it resumes the domain --suspend-max after the pause, "resume NAME:
     after ... (--suspend-max 3.0)" logged
 11. it pauses it again, --suspend-after after the later of the resume
     and the domain's FULL_NOTED again
 12. SIGTERM to the consolidator: exit 0, the domain running, its pinning
     as the test set it
 13. SIGTERM to the bridge: exit 0, the metadata element removed
A step whose premise failed (no FULL_NOTED, not paused, not resumed)
skips those that need it; 12 and 13 always run. The daemons are stopped
by their PIDs like libvirtd (private_libvirtd.py), whatever happens."""
import os
import re
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                ".."))
from tap import check, skip  # noqa: E402
from private_libvirtd import (  # noqa: E402
    NS, diag, fmt_pin, kill_pid, metadata_state, pinning, poll_until, read,
    since_s, start_daemon)

# sysidle-consolidate's log prefix, "2026-12-04T17:30:00.123Z INFO "
LOGP = r"^\S+ [A-Z]+ "
DAEMON_S = 10
# the daemons' steps: --suspend-after and --suspend-max of the
# consolidator; a time measured against them may be early by EARLY_S
# (milliseconds in since_unix_ms, the polling here) or late by LATE_S (the
# consolidator's --interval, libvirt's calls); the states are polled every
# POLL_S, the metadata of the paused domain read every READ_S
SUSPEND_AFTER_S = 1
SUSPEND_MAX_S = 3
EARLY_S = 0.15
LATE_S = 1.0
# how late the consolidator's own resume at --suspend-max may be by its own
# clock on a loaded host (its --interval, libvirt's calls)
RESUME_LATE_S = 1.5
POLL_S = 0.02
READ_S = 0.25
DAEMON_CHECKS = [
    "daemons: sysidle-libvirt publishes FULL_NOTED",
    "sysidle-consolidate --policy pack,suspend: every vCPU and the emulator "
    "packed onto the idle CPU",
    "the domain is paused --suspend-after its FULL_NOTED",
    "while it is paused its metadata stays FULL_NOTED",
    "the domain is resumed at --suspend-max",
    "the domain is paused again once idle again",
    "sysidle-consolidate SIGTERM: exit 0, the domain running, its pinning "
    "back",
    "sysidle-libvirt SIGTERM: exit 0, the metadata removed",
]


def daemons(libvirt, lv, conn, tmp, dom, name, bridge, consolidate, helpers,
            host):
    """Steps 6-13: sysidle-libvirt and sysidle-consolidate --policy
    pack,suspend as daemons on the domain, DAEMON_CHECKS in that order."""
    live = libvirt.VIR_DOMAIN_AFFECT_LIVE
    paused, running = libvirt.VIR_DOMAIN_PAUSED, libvirt.VIR_DOMAIN_RUNNING
    idle = host[-1]
    todo = list(DAEMON_CHECKS)

    def done(ok, times, detail=""):
        return check(ok, todo.pop(0) + " (%s)" % times, detail)

    def skip_to_stop(why):
        # the checks before the two stops, which always run
        while todo and todo[0] != DAEMON_CHECKS[-2]:
            skip(todo.pop(0), why)

    def state():
        try:
            return dom.state()[0]
        except libvirt.libvirtError:
            return None

    # When a pause or a resume happened is known only between two looks:
    # after the start of the last look that did not see it, before the
    # end of the first that did. A lower bound on a duration is checked on
    # its longest reading, an upper bound on its shortest, so that a
    # loaded host slowing these looks (a libvirt call each) fails neither.
    seen = {"other": None}  # wall time: start of the last look not @want

    def state_is(want):
        t = time.time()
        st = state()
        if st != want:
            seen["other"] = t
        return st == want

    # Step 5's --once left the domain packed (it undoes nothing), and the
    # metadata that --once (or the test) wrote stays with its old
    # since_unix_ms, which would have the consolidator pause the domain at
    # once. So: a pinning of the test's own, which the pack changes and
    # the restore must give back exactly, and no metadata, so that the
    # consolidator sees the bridge's states as they come.
    nhost = conn.getCPUMap()[0]

    def mask(cs):
        return tuple(i in cs for i in range(nhost))
    nvcpu = len(dom.vcpuPinInfo(live))
    for i in range(nvcpu):
        dom.pinVcpuFlags(i, mask({host[0]} if i == 0 else set(host)), live)
    dom.pinEmulator(mask({host[0]}), live)
    pin0 = pinning(libvirt, dom)
    packed = ([[idle]] * nvcpu, [idle])
    diag("pinning before the daemons: " + fmt_pin(pin0))
    try:
        dom.setMetadata(libvirt.VIR_DOMAIN_METADATA_ELEMENT, None, None, NS,
                        live)
    except libvirt.libvirtError as e:
        diag("removing the metadata: %s" % e)

    clog = os.path.join(tmp, "consolidate-daemon.log")
    blog = os.path.join(tmp, "bridge-daemon.log")
    novmm = os.path.join(tmp, "no-vmm")
    os.makedirs(novmm, exist_ok=True)

    def logs():
        return "sysidle-consolidate:\n%s\nsysidle-libvirt:\n%s" % (
            read(clog).strip(), read(blog).strip())

    # the consolidator first, following the domain (--verbose says when)
    # before the bridge publishes anything; --dir: an empty directory (no
    # VMM socket of the host); the bridge's --hooks: a missing directory
    # (no hook of the host run)
    t0 = time.monotonic()
    cons = start_daemon(
        [sys.executable, consolidate, "--libvirt", lv.uri, "--dir", novmm,
         "--state-dir", os.path.join(tmp, "consolidate-state"),
         "--pack-after", "0", "--restore-after", "0",
         "--policy", "pack,suspend", "--idle-cpus", str(idle),
         "--suspend-after", "%gs" % SUSPEND_AFTER_S,
         "--suspend-max", "%gs" % SUSPEND_MAX_S, "--interval", "100ms",
         "--verbose"], clog, helpers)
    following = poll_until(
        lambda: cons.poll() is not None or
        ("following domain %s\n" % name) in read(clog), DAEMON_S, POLL_S)
    following = following and cons.poll() is None
    t_follow = time.monotonic() - t0
    t0 = time.monotonic()
    br = start_daemon([bridge, "--libvirt", lv.uri, "--interval", "100",
                       "--hooks", os.path.join(tmp, "no-hooks")], blog,
                      helpers)

    # 6. the bridge publishes FULL_NOTED
    def full_noted():
        ms = metadata_state(libvirt, dom)
        if ms and ms[0] == "FULL_NOTED":
            return ms
        return "exited" if br.poll() is not None else None
    ms = poll_until(full_noted, DAEMON_S, POLL_S) if following else None
    ok = following and isinstance(ms, tuple)
    done(ok, "%.2f s after its start; sysidle-consolidate following the "
         "domain after %.2f s" % (time.monotonic() - t0, t_follow),
         "consolidator %s, bridge %s, metadata %s\n%s" % (
             "following" if following else "exit %s" % cons.poll(),
             "running" if br.poll() is None else "exit %s" % br.poll(),
             ms and ms[1], logs()))
    if not ok:
        skip_to_stop("no FULL_NOTED from the daemons")
    else:
        t_full = since_s(ms[1])
        diag("metadata: " + ms[1].strip())

        # 7. packed: every vCPU and the emulator thread on the idle CPU
        pin = poll_until(lambda: (lambda p: p if p == packed else None)(
            pinning(libvirt, dom)), DAEMON_S, POLL_S)
        t_pack = time.time()
        line = poll_until(lambda: re.search(
            LOGP + r"pack %s: .*$" % re.escape(name), read(clog),
            re.M),
            DAEMON_S if pin else 0, POLL_S)
        done(pin is not None and line is not None,
             "%.2f s after FULL_NOTED: %s; %s" % (
                 t_pack - t_full, fmt_pin(pin or pinning(libvirt, dom)),
                 line.group(0) if line else "no pack line"), logs())

        # 8. paused --suspend-after after its FULL_NOTED
        seen["other"] = None
        ok = poll_until(lambda: state_is(paused),
                        SUSPEND_AFTER_S + LATE_S + DAEMON_S, POLL_S)
        t_pause, t_pause_w = time.monotonic(), time.time()
        # the pause came after this (running at its FULL_NOTED anyway)
        t_pause_lo_w = seen["other"] if seen["other"] is not None else t_full
        ms = metadata_state(libvirt, dom)
        # the FULL_NOTED it was paused in (a later one than t_full if the
        # domain woke in between)
        since = since_s(ms[1]) if ms and ms[0] == "FULL_NOTED" else None
        if ok:
            line = poll_until(lambda: re.search(
                LOGP + r"suspend %s: paused .*$" % re.escape(name),
                read(clog),
                re.M), DAEMON_S, POLL_S)
            dt = t_pause_w - (since or t_full)
            ok = line is not None and since is not None and \
                SUSPEND_AFTER_S - EARLY_S <= dt <= SUSPEND_AFTER_S + LATE_S
            done(ok, "%.2f s after its FULL_NOTED%s, --suspend-after %g; %s"
                 % (dt, "" if since == t_full else
                    " (metadata %s)" % (ms and ms[1]) if since is None else
                    " (a later one, %.2f s after the first)" %
                    (since - t_full), SUSPEND_AFTER_S,
                    line.group(0) if line else "no suspend line"), logs())
        else:
            done(False, "not paused %.1f s after FULL_NOTED: state %s, "
                 "metadata %s" % (t_pause_w - t_full, state(), ms and ms[0]),
                 logs())
            skip_to_stop("the domain was not paused")

    if todo[0] == DAEMON_CHECKS[3]:
        # 9. while paused, the metadata stays; 10. resumed at --suspend-max
        reads = []
        resumed = None
        t_last_paused_w = t_pause_w  # start of the last look seeing it paused
        next_read = time.monotonic()
        end = t_pause + SUSPEND_MAX_S + LATE_S + DAEMON_S
        while time.monotonic() < end:
            t_look_w = time.time()
            st = state()
            if st != paused:
                resumed = time.monotonic()
                resumed_w = time.time()
                break
            t_last_paused_w = t_look_w
            if time.monotonic() >= next_read:
                m = metadata_state(libvirt, dom)
                if state() == paused:
                    reads.append((time.monotonic() - t_pause, m))
                next_read = time.monotonic() + READ_S
            time.sleep(POLL_S)
        t_res_w = time.time()
        kept = [r for r in reads if r[1] and r[1][0] == "FULL_NOTED" and
                since_s(r[1][1]) == since]
        done(len(reads) >= 3 and len(kept) == len(reads),
             "%d of %d reads over %.1f s while paused FULL_NOTED since the "
             "pause's since_unix_ms" % (len(kept), len(reads),
                                        reads[-1][0] if reads else 0),
             "\n".join("%.2f s: %s" % (t, m and m[1]) for t, m in reads) +
             "\n" + logs())
        if resumed is None:
            done(False, "still paused %.1f s after the pause" %
                 (time.monotonic() - t_pause), logs())
            skip_to_stop("the domain was not resumed")
        else:
            # Timed by what the consolidator says it did: "resume NAME:
            # after X s (--suspend-max 3.0)" is its own clock from its pause
            # to its resume, which a loaded host cannot make look early or
            # late through this test's polling (a shortest reading taken
            # from the polling once failed under load). Bounds: not before
            # --suspend-max (EARLY_S for the rounding of X), within
            # RESUME_LATE_S of it (its --interval, libvirt's calls on a
            # loaded host); a resume at --suspend-after fails the first, no
            # resume at all (--suspend-max ignored) gives no line. The
            # polling keeps only the bound load cannot break: its longest
            # reading of the pause is at least --suspend-max.
            line = poll_until(lambda: re.search(
                LOGP + r"resume %s: after ([0-9.]+) s \(--suspend-max "
                r"[0-9.]+\)" % re.escape(name), read(clog), re.M),
                DAEMON_S, POLL_S)
            said = float(line.group(line.lastindex)) if line else None
            dt = resumed - t_pause
            dt_hi = resumed_w - t_pause_lo_w
            ok = st == running and said is not None and \
                SUSPEND_MAX_S - EARLY_S <= said <= \
                SUSPEND_MAX_S + RESUME_LATE_S and \
                SUSPEND_MAX_S - EARLY_S <= dt_hi
            done(ok, "the consolidator: %s s after its pause (bounds "
                 "%g..%g); seen %.2f s after the pause (at most %.2f s), "
                 "--suspend-max %g; %s" % (
                     "-" if said is None else "%g" % said,
                     SUSPEND_MAX_S - EARLY_S, SUSPEND_MAX_S + RESUME_LATE_S,
                     dt, dt_hi, SUSPEND_MAX_S, line.group(0) if line
                     else "no resume line with (--suspend-max ...)"),
                 "state %s\n%s" % (st, logs()))

            # 11. paused again once idle again
            ok = poll_until(lambda: state() == paused,
                            SUSPEND_AFTER_S + LATE_S + DAEMON_S, POLL_S)
            t_p2, t_p2_w = time.monotonic(), time.time()
            ms = metadata_state(libvirt, dom)
            since2 = since_s(ms[1]) if ms else None
            # The consolidator logs its suspend once virDomainSuspend has
            # returned, so its line can come just after the state this
            # test saw: waited for (bounded) before it is counted.

            def suspend_lines():
                return len(re.findall(LOGP + r"suspend %s: paused " %
                                      re.escape(name), read(clog), re.M))
            poll_until(lambda: suspend_lines() >= 2, DAEMON_S, POLL_S)
            n = suspend_lines()
            if ok and since2 is not None:
                ref = max(since2, t_res_w)
                # the resume came after t_last_paused_w: the longest
                # reading of resume -> pause again starts there
                ref_lo = max(since2, t_last_paused_w)
                ok = ms[0] == "FULL_NOTED" and n >= 2 and \
                    t_p2_w - t_last_paused_w >= SUSPEND_AFTER_S - EARLY_S \
                    and SUSPEND_AFTER_S - EARLY_S <= t_p2_w - ref_lo and \
                    t_p2_w - ref <= SUSPEND_AFTER_S + LATE_S
                done(ok, "%.2f s after the resume; FULL_NOTED again %+.2f s "
                     "from the resume; %d suspend lines" % (
                         t_p2 - resumed, since2 - t_res_w, n), logs())
            else:
                done(False, "not paused again %.1f s after the resume: state "
                     "%s, metadata %s" % (t_p2 - resumed, state(),
                                          ms and ms[0]), logs())

    # 12. SIGTERM: the consolidator resumes and restores, exit 0
    t0 = time.monotonic()
    killed = kill_pid(cons.pid, proc=cons)
    dt = time.monotonic() - t0
    st, pin = state(), pinning(libvirt, dom)
    done(not killed and cons.returncode == 0 and st == running and
         pin == pin0, "%s in %.2f s; domain %s; pinning %s" % (
             "killed" if killed else "exit %s" % cons.returncode, dt,
             "running" if st == running else "state %s" % st,
             fmt_pin(pin) + (" (was " + fmt_pin(pin0) + ")"
                             if pin != pin0 else "")), logs())

    # 13. SIGTERM: the bridge removes the metadata, exit 0
    t0 = time.monotonic()
    killed = kill_pid(br.pid, proc=br)
    dt = time.monotonic() - t0
    ms = metadata_state(libvirt, dom)
    done(not killed and br.returncode == 0 and ms is None,
         "%s in %.2f s; metadata %s" % (
             "killed" if killed else "exit %s" % br.returncode, dt,
             "removed" if ms is None else "left: %s" % ms[1].strip()),
         logs())
    diag(logs())
