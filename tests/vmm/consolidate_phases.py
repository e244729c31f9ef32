# SPDX-License-Identifier: GPL-2.0-only
"""The later phases of test_consolidate.py's run on its VMs: what --once
packed is journaled and a later daemon adopts and restores it
(once_then_daemon); the hysteresis, the steady state and the journal with
distinctive affinities (run_state); the suspend policy with the VMM's
pause and resume (run_suspend)."""
import json
import os
import re
import signal
import subprocess
import time

import vmmtest
from vmmtest import Client, check, status
from procfs import allowed_cpus  # noqa: E402
from consolidate_tool import Tool, fast, state_dir, threads


def cpu_list(cpus):
    """{0, 1, 2, 5} -> "0-2,5" (as the tool writes CPU lists)."""
    out = []
    for c in sorted(cpus):
        if out and out[-1][1] == c - 1:
            out[-1][1] = c
        else:
            out.append([c, c])
    return ",".join(str(a) if a == b else "%d-%d" % (a, b) for a, b in out)


def once_then_daemon(tmp, once_dir, vms, sts, names, orig, now_aff, packed,
                     idle_arg):
    """What --once packed is in its journal (the originals); a daemon on
    the same --state-dir adopts the VMs, restores idle0 when it wakes (a
    serial byte) and the other two at its SIGTERM."""
    try:
        with open(os.path.join(once_dir, "journal.json")) as f:
            entries = json.load(f)["entries"]
    except (OSError, ValueError) as e:
        entries = {"error": str(e)}
    want = {st["name"]: {str(t): cpu_list(orig[st["name"]][t])
                         for _, t in threads(st)} for st in sts
            if st["name"] in names}
    got = {e.get("name"): e.get("threads") for e in entries.values()
           if isinstance(e, dict) and e.get("packed")}
    check(got == want,
          "--once journals what it packed: an entry per VM, packed, with "
          "its threads' original affinities", json.dumps(entries))
    d = Tool(["--dir", tmp, "--idle-cpus", idle_arg, "--pack-after", "0",
              "--restore-after", "0", "--state-dir", once_dir],
             stdin=subprocess.DEVNULL, tag="sysidle-consolidate")
    adopted = [d.wait_line(r"^reconcile %s: adopted \(packed\) from the "
                           r"journal$" % n, 10) for n in names]
    n0 = len(d.lines)
    vms[0].send("x")
    if vmmtest.SCRIPTED:  # idle again within ms: the restore is logged
        woke = d.wait_line(r"^restore %s: 3 threads .*\(FULL_NOTED -> " %
                           names[0], 5, n0)
    else:
        woke = vmmtest.poll_until(lambda: now_aff()[names[0]] ==
                                  orig[names[0]], 5, step=0.005)
    others = all(packed(n, now_aff()) for n in names[1:])
    rc = d.stop()
    aff = now_aff()
    check(all(adopted) and woke and others and rc == 0 and
          all(aff[n] == orig[n] for n in names),
          "a daemon on --once's --state-dir: the 3 VMs adopted, idle0 "
          "restored when it wakes, the others at SIGTERM (exit %s), all "
          "on their original affinity" % rc, "\n".join(d.lines + d.err_lines))


def ctxt_switches(pid):
    """The voluntary context switches of @pid's main thread."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("voluntary_ctxt_switches:"):
                return int(line.split()[1])
    return None


def run_state(tmp, socks, sts, names, full, idle_set, idle_arg):
    """The hysteresis, the steady state and the journal on real VMMs, with
    distinctive affinities of their own (vCPU 0 on the first CPU, the
    other threads on all): a daemon with --restore-after 2s does not
    restore a VM for a kick (a wake far shorter than 2 s); packed and
    idle, it makes no voluntary context switch in 2 s; killed with
    SIGKILL, a new daemon on the same --state-dir adopts the packed VMs
    and its SIGTERM puts back exactly those affinities."""
    own = {}
    for st in sts:
        for v in st["vcpus"]:
            own[v["tid"]] = {min(full)} if v["id"] == 0 else set(full)
        own[st["housekeeping_tid"]] = set(full)
    for tid, cpus in own.items():
        os.sched_setaffinity(tid, cpus)
    args = ["--dir", "none", "--idle-cpus", idle_arg, "--pack-after", "0",
            "--restore-after", "2s", "--state-dir",
            state_dir(tmp, "journal")]
    for s in socks:
        args += ["--socket", s]

    def now_own():
        return {t: allowed_cpus(st["pid"], t) for st in sts
                for t in [v["tid"] for v in st["vcpus"]] +
                [st["housekeeping_tid"]]}

    def all_packed():
        return all(c == idle_set for c in now_own().values())
    a = Tool(args, stdin=subprocess.DEVNULL, tag="sysidle-consolidate")
    b = None
    try:
        packed = vmmtest.poll_until(all_packed, 10, step=0.005)
        check(packed, "--restore-after 2s daemon: the 3 idle VMs packed",
              "\n".join(a.lines + a.err_lines))
        # a kick: out of FULL_NOTED briefly (the VMM's event times)
        w = Client(socks[0])
        w.request({"cmd": "watch"})
        n0 = len(a.lines)
        c = Client(socks[0])
        c.request({"cmd": "kick"})
        c.close()
        left = back = None
        restored = False
        end = time.monotonic() + 5
        while time.monotonic() < end and back is None:
            e = w.line(0.005)
            if isinstance(e, dict) and e.get("event") == "state":
                if e.get("from") == "FULL_NOTED" and left is None:
                    left = e
                elif e.get("to") == "FULL_NOTED" and left is not None:
                    back = e
            if left is not None and not all_packed():
                restored = True
        w.close()
        out_ms = back["unix_ms"] - left["unix_ms"] if back else None
        check(back is not None and (
            (out_ms < 1800 and not restored and
             a.wait_line(r"restore idle0:", 0.5, n0) is None) or
            (out_ms >= 2000 and restored)),
              "a kick to idle0: out of FULL_NOTED for %s ms; with "
              "--restore-after 2s its threads stayed packed throughout "
              "(polled every 5 ms), no restore line" % out_ms,
              "\n".join(a.lines[n0:] + ["left %s back %s" % (left, back)]))
        # steady state: no voluntary context switch of the daemon in 2 s
        time.sleep(0.3)
        c0 = ctxt_switches(a.p.pid)
        time.sleep(2)
        c1 = ctxt_switches(a.p.pid)
        check(c0 is not None and c1 == c0 and all_packed(),
              "steady state (3 idle VMs packed): the daemon's voluntary "
              "context switches stay at %s over 2 s (now %s): no wake-up" %
              (c0, c1), "\n".join(a.lines))
        # SIGKILL, then a new daemon on the same --state-dir
        a.stop(signal.SIGKILL)
        still = all_packed()
        b = Tool(args, stdin=subprocess.DEVNULL, tag="sysidle-consolidate")
        adopted = [b.wait_line(r"reconcile %s: adopted \(packed\) from the "
                               r"journal$" % n, 10) for n in names]
        time.sleep(0.2)
        kept = all_packed()
        rc = b.stop()
        back_aff = now_own()
        b = None
        check(still and all(adopted) and kept and rc == 0 and
              back_aff == own,
              "SIGKILL while packed, a new daemon on the same --state-dir: "
              "'reconcile NAME: adopted (packed) from the journal' for "
              "the 3, kept packed while idle; its SIGTERM (exit %s) puts "
              "back the exact original affinities (vCPU0 on %d only)" %
              (rc, min(full)),
              "\n".join(["%d: %s (want %s)" % (t, back_aff.get(t), c)
                         for t, c in own.items()] +
                        (adopted and [str(x) for x in adopted])))
    finally:
        a.stop()
        if b is not None:
            b.stop()


def run_suspend(tmp, socks, busy_sock, vms, names, bst, orig, now_aff, packed,
                idle_arg):
    """--policy pack,suspend --suspend-after 0.3 on the same VMs: the idle
    VMs packed and paused (status "paused"), the busy VM neither; a serial
    byte resumes a paused VM by itself (reason input), which the daemon
    reports; idle again it is paused again after 0.3 s; SIGTERM resumes
    and restores everything. Returns None (the daemon is stopped)."""
    def paused(path):
        st = status(path)
        return st.get("paused") if st else None

    daemon = Tool(["--dir", tmp, "--idle-cpus", idle_arg] + fast(tmp) +
                  ["--policy", "pack,suspend", "--suspend-after", "0.3"],
                  stdin=subprocess.DEVNULL, tag="sysidle-consolidate")
    try:
        ok = vmmtest.poll_until(lambda: all(paused(s) for s in socks), 10,
                                step=0.01)
        aff = now_aff()
        lines = [daemon.wait_line(r"^suspend %s: paused \(FULL_NOTED for "
                                  r"[0-9.]+ s, --suspend-after 0\.3\)$" % n,
                                  5) for n in names]
        check(ok and all(lines) and all(packed(n, aff) for n in names) and
              paused(busy_sock) is False and
              aff[bst["name"]] == orig[bst["name"]],
              "pack,suspend --suspend-after 0.3: the 3 idle VMs (idle for "
              "a while already) packed and paused at once, status "
              "\"paused\": true; the busy VM neither",
              "\n".join(daemon.lines + daemon.err_lines))

        # a serial byte: the VMM resumes itself (input) and says so
        w = Client(socks[0])
        w.request({"cmd": "watch"})
        n0 = len(daemon.lines)
        vms[0].send("x")
        ev = back = None
        end = time.monotonic() + 10
        while time.monotonic() < end and back is None:
            e = w.line(max(0.01, end - time.monotonic()))
            if isinstance(e, dict) and e.get("event") == "resumed" and \
                    ev is None:
                ev = e
            if ev and isinstance(e, dict) and e.get("to") == "FULL_NOTED":
                back = e
        seen = daemon.wait_line(r"^resumed %s: by the VMM \(input\) after "
                                r"\d+ ms paused$" % names[0], 5, n0)
        check(ev is not None and ev.get("reason") == "input" and seen and
              paused(socks[0]) is not None,
              "a serial byte to paused %s: the VMM resumes itself (event "
              "reason %s), the daemon reports '%s'" %
              (names[0], ev and ev.get("reason"), seen),
              "\n".join(["event %s" % ev] + daemon.lines[n0:]))
        # Timed by the VMM's own clock (the events' unix_ms), not by when
        # this test got round to reading them: a loaded host delays the
        # reader, not the daemon's timer.
        pev = None
        end = time.monotonic() + 5
        while back is not None and pev is None and time.monotonic() < end:
            e = w.line(max(0.01, end - time.monotonic()))
            if isinstance(e, dict) and e.get("event") == "paused":
                pev = e
        again = paused(socks[0])
        t_again = (pev["unix_ms"] - back["unix_ms"]) / 1000.0 \
            if pev and isinstance(back.get("unix_ms"), int) else -1
        aff = now_aff()
        line = daemon.wait_line(r"^suspend %s: paused \(FULL_NOTED for "
                                r"[0-9.]+ s, --suspend-after 0\.3\)$" %
                                names[0], 5, n0)
        check(back is not None and again and 0.29 <= t_again < 2 and
              packed(names[0], aff) and line and
              daemon.wait_line(r"^restore %s: .*\(FULL_NOTED -> " %
                               names[0], 1, n0) and
              len([l for l in daemon.lines[n0:]
                   if l.startswith("suspend %s:" % names[0])]) == 1,
              "%s woke (restored), idle again: packed and paused again "
              "%.0f ms after it was FULL_NOTED again (--suspend-after 0.3; "
              "the VMM's event times)" % (names[0], t_again * 1000),
              "\n".join(["FULL_NOTED %s" % back, "paused %s" % pev] +
                        daemon.lines[n0:]))
        w.close()
    finally:
        n0 = len(daemon.lines)
        rc = daemon.stop()
    aff = now_aff()
    check(rc == 0 and not any(paused(s) for s in socks) and aff == orig and
          len([l for l in daemon.lines[n0:]
               if re.match(r"^resume idle\d: after [0-9.]+ s \(SIGTERM\)$",
                           l)]) == 3 and not daemon.err_lines,
          "daemon SIGTERM: exit %s, the 3 VMs resumed (status \"paused\": "
          "false) and back on their own affinity" % rc,
          "\n".join(daemon.lines + daemon.err_lines))
    for l in daemon.lines:
        print("# suspend daemon: " + l)
    return None
