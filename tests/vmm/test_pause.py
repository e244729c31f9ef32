#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""The control socket's pause and resume (vmm/export/README.md, "Control socket
protocol"): a fully idle VM paused (its threads asleep, no exits while
paused) and resumed by request, by a kick and by serial input; the watch
events, the status fields, the metrics file and sysidlectl pause /
resume; SIGTERM and SIGINT while paused; a busy vCPU parked out of
KVM_RUN; pause without --sysidle; pause and resume racing with kicks and
serial input. The VM resuming itself for its guest's timers is
test_pause_wake.py.

usage: test_pause.py VMM GUEST_DIR GUEST_TOOLS_DIR SYSIDLECTL
Exit: 0 all passed, 1 a check failed, 77 skipped (no usable /dev/kvm)."""
import json
import os
import re
import signal
import sys
import tempfile
import threading
import time

import vmmtest
from vmmtest import Client, Vm, check, poll_until, tool

vmmtest.init(sys.argv)
from pause_client import (  # noqa: E402
    REASONS, Watcher, connect, ctl, halt_exits, is_event, metric, metric_in,
    quiescent, started, thread_cpu, thread_states, wait_status)


def test_idle(tmp):
    """A fully idle VM (--sysidle, 2 vCPUs, pv tick 250 Hz): pause and
    resume by request, idempotence, kick and serial input while paused,
    the watch events, the metrics file, sysidlectl."""
    sock = os.path.join(tmp, "idle.sock")
    prom = os.path.join(tmp, "idle.prom")
    log = os.path.join(tmp, "idle.log")
    stats = os.path.join(tmp, "idle.json")
    vm = Vm(["--cpus", "2", "--sysidle", "--sysidle-log", log, "--append",
             "hz=250", "--control", sock, "--metrics-file", prom,
             "--stats-json", stats, tool("idle.elf")])
    c = connect(sock, vm.p)
    check(c is not None, "idle VM: the control socket answers", vm.err)
    if c is None:
        vm.stop(signal.SIGKILL)
        return
    v = quiescent(c, log)
    check(v is not None and v.get("paused") is False and
          all(v["counters"].get(k) == 0 for k in
              ["pauses", "resumes_requested", "resumes_self"]),
          "status before any pause: FULL_NOTED, paused false, counters "
          "pauses / resumes_requested / resumes_self 0", json.dumps(v))
    if v is None:
        vm.stop(signal.SIGKILL)
        return
    w = Watcher(sock)
    check(isinstance(w.reply, dict) and w.reply.get("paused") is False,
          "watch reply says paused false", w.reply)

    r = c.request({"cmd": "pause", "id": [7]})
    check(r == {"ok": True, "cmd": "pause", "id": [7], "paused": True},
          "pause: {\"ok\":true,\"cmd\":\"pause\",\"paused\":true}, id "
          "copied", r)
    v0 = c.status()
    tids = [x["tid"] for x in v0["vcpus"]]
    check(v0["paused"] is True and v0["state"] == "FULL_NOTED" and
          v0["counters"]["pauses"] == 1 and
          all(x["idle"] for x in v0["vcpus"]),
          "status while paused: paused true, still FULL_NOTED, pauses 1, "
          "every vCPU idle", json.dumps(v0))
    i = w.wait(is_event("paused"))
    check(i is not None and isinstance(w.events[i].get("unix_ms"), int),
          "watch: {\"event\":\"paused\",\"unix_ms\":N}", w.events)
    # The last vCPU to park completes the pause just before it sleeps.
    asleep = poll_until(lambda: set(thread_states(vm.p.pid, tids)) ==
                        {"S"}, 5)
    # Nothing may change while paused: observed over a bounded window.
    t_end = time.monotonic() + 0.4
    states = set()
    while time.monotonic() < t_end:
        states.update(thread_states(vm.p.pid, tids))
        time.sleep(0.02)
    v1 = c.status()
    check(asleep and states <= {"S"} and
          halt_exits(v1) == halt_exits(v0) and
          v1["paused"] is True,
          "paused 0.4 s: vCPU threads sleeping (%s), halt_exits unchanged "
          "(%s)" % ("".join(sorted(states)), halt_exits(v1)),
          json.dumps(v1))
    # The export thread rewrites the file after it has sent the "paused"
    # event to the watchers: wait for the values (bounded), not one read.

    def paused_metrics():
        t = metric(prom, "sysidle_vm_paused")[1]
        return t if metric_in(t, "sysidle_vm_paused") == 1 and \
            metric_in(t, "sysidle_vm_pauses_total") == 1 else None
    text = poll_until(paused_metrics, 5) or \
        metric(prom, "sysidle_vm_paused")[1]
    val = metric_in(text, "sysidle_vm_paused")
    pz = metric_in(text, "sysidle_vm_pauses_total")
    check(val == 1 and pz == 1 and
          all("# TYPE %s %s" % (n, t) in text and "# HELP %s " % n in text
              for n, t in [("sysidle_vm_paused", "gauge"),
                           ("sysidle_vm_pauses_total", "counter"),
                           ("sysidle_vm_resumes_requested_total", "counter"),
                           ("sysidle_vm_resumes_self_total", "counter")]),
          "metrics while paused: sysidle_vm_paused 1, pauses_total 1, HELP "
          "and TYPE for the gauge and the three counters", text)

    r2 = c.request({"cmd": "pause", "junk": {"x": 1}})
    n_ev = len(w.pauses())
    check(r2 == {"ok": True, "cmd": "pause", "paused": True} and
          c.status()["counters"]["pauses"] == 1,
          "pause a paused VM (extra fields ignored): ok, paused true, no "
          "new pause", r2)
    rc, out, err = ctl(["status", sock])
    check(rc == 0 and re.search(r"^paused\s+yes", out, re.M),
          "sysidlectl status shows paused", out + err)

    r = c.request({"cmd": "resume", "id": "r", "extra": 1})
    check(r == {"ok": True, "cmd": "resume", "id": "r", "paused": False},
          "resume: {\"ok\":true,\"cmd\":\"resume\",\"paused\":false}", r)
    i = w.wait(is_event("resumed"))
    ev = w.events[i] if i is not None else {}
    check(ev.get("reason") == "request" and
          isinstance(ev.get("paused_ms"), int) and ev["paused_ms"] >= 400,
          "watch: resumed, reason request, paused_ms >= 400 (%s)" %
          ev.get("paused_ms"), w.events)
    v2 = c.status()
    check(v2["paused"] is False and
          v2["counters"]["resumes_requested"] == 1 and
          v2["counters"]["resumes_self"] == 0,
          "status after resume: paused false, resumes_requested 1", v2)
    r = c.request({"cmd": "resume"})
    check(r == {"ok": True, "cmd": "resume", "paused": False} and
          c.status()["counters"]["resumes_requested"] == 1 and
          len(w.pauses()) == n_ev + 1,
          "resume a running VM: ok, paused false, nothing counted", r)
    r = c.request({"cmd": "pausex"})
    check(r == {"ok": False, "error": "unknown command 'pausex'"},
          "unknown command still an error", r)
    val = poll_until(lambda: metric(prom, "sysidle_vm_paused")[0], 5,
                     done=lambda x: x == 0)
    rq, _ = metric(prom, "sysidle_vm_resumes_requested_total")
    check(val == 0 and rq == 1, "metrics after resume: sysidle_vm_paused 0, "
          "resumes_requested_total 1", metric(prom, "sysidle_vm_paused")[1])

    # kick while paused
    quiescent(c, log)
    start = len(w.events)
    r = c.request({"cmd": "pause"})
    k = c.request({"cmd": "kick"})
    i = w.wait(is_event("resumed"), 10, start)
    ev = w.events[i] if i is not None else {}
    check(r.get("paused") is True and k == {"ok": True, "cmd": "kick"} and
          ev.get("reason") == "kick",
          "kick while paused: ok, resumed with reason kick", w.events[start:])
    j = w.wait(is_event("state", to="FULL_NOTED"), 10, start)
    check(j is not None, "after the kick the VM goes back to FULL_NOTED",
          w.events[start:])

    # serial input while paused: the guest takes its byte, jiffies exact
    # (after the kick the timekeeper takes ticks again until the VM is
    # fully idle: a pause before its tick is stopped could end by a tick)
    quiescent(c, log)
    start, nl = len(w.events), len(vm.lines)
    r = c.request({"cmd": "pause"})
    vm.send("s")
    i = w.wait(is_event("resumed"), 10, start)
    ev = w.events[i] if i is not None else {}
    woke = vm.wait_line(r"^idle: woken by serial", 10, nl)
    jiffies = not vmmtest.SCRIPTED  # a scripted idle.elf counts none
    ok = vm.wait_line(r"^idle: jiffies (ok|off)", 10, nl) if jiffies \
        else None
    check(r.get("paused") is True and ev.get("reason") == "input" and
          woke is not None and (ok == "idle: jiffies ok" or not jiffies),
          "serial input while paused: resumed with reason input; the guest "
          "takes the byte" + (", jiffies exact (%s)" % ok if jiffies else
                              " (no jiffies: a scripted guest)"),
          [w.events[start:], vm.lines[nl:]])

    # sysidlectl pause / resume
    quiescent(c, log)
    rc1, out1, err1 = ctl(["pause", sock])
    p1 = c.status()["paused"]
    rc2, out2, err2 = ctl(["--json", "resume", sock])
    p2 = c.status()["paused"]
    check(rc1 == 0 and out1 == "" and p1 is True and rc2 == 0 and
          json.loads(out2 or "{}").get("paused") is False and p2 is False,
          "sysidlectl pause NAME (exit 0, silent), --json resume NAME",
          [rc1, out1, err1, rc2, out2, err2])

    # the whole stream: pause events alternate, state events stay in order.
    # The "resume" reply goes out at once, its event through the
    # housekeeping thread: wait (bounded) until the 8 events came.
    poll_until(lambda: len(w.pauses()) >= 8, 10)
    seq = [e["event"] for e in w.pauses()]
    alt = all(seq[k] == ("paused" if k % 2 == 0 else "resumed")
              for k in range(len(seq)))
    states = [e for e in w.events if isinstance(e, dict) and
              e.get("event") == "state"]
    chain = all(a["to"] == b["from"] for a, b in zip(states, states[1:]))
    ms = [e["unix_ms"] for e in w.events if isinstance(e, dict)]
    v = c.status()
    check(alt and len(seq) == 8 and chain and ms == sorted(ms) and
          all(e.get("reason") in REASONS for e in w.pauses()
              if e["event"] == "resumed") and
          v["counters"]["pauses"] == 4 and
          v["counters"]["resumes_requested"] == 2 and
          v["counters"]["resumes_self"] == 2 and
          v["counters"]["events_dropped"] == 0,
          "watch stream: paused / resumed alternate (%d), state events "
          "chained, times in order; counters pauses 4, resumes 2 + 2" %
          len(seq), w.events)
    w.close()
    c.close()
    rc = vm.stop()
    check(rc == 143, "idle VM: SIGTERM, exit 143", "exit %s\n%s" %
          (rc, vm.err))
    try:
        with open(stats) as f:
            sp = json.load(f).get("pause")
    except (OSError, ValueError) as e:
        sp = repr(e)
    want = dict((k, v["counters"][k]) for k in
                ("pauses", "resumes_requested", "resumes_self"))
    check(sp == want, "--stats-json at exit: \"pause\" holds the counters "
          "status gave (%s)" % want, sp)


def test_busy(tmp):
    """spin.elf spins with interrupts off: pause parks its vCPU out of
    KVM_RUN (the thread sleeps, uses no CPU); resume lets it spin again;
    SIGTERM while paused exits promptly."""
    g = os.path.join(vmmtest.GUESTS, "spin.elf")
    sock = os.path.join(tmp, "spin.sock")
    vm, c = started(["--control", sock, g], sock, r"^spinning", "spin.elf")
    if vm is None:
        return
    tid = c.status()["vcpus"][0]["tid"]
    t0 = time.monotonic()
    r = c.request({"cmd": "pause"})
    took = time.monotonic() - t0
    # The vCPU completes the pause just before it sleeps.
    asleep = poll_until(lambda: thread_states(vm.p.pid, [tid]) == ["S"], 5)
    cpu0 = thread_cpu(vm.p.pid, tid)
    end = time.monotonic() + 0.5
    states = set()
    while time.monotonic() < end:
        states.update(thread_states(vm.p.pid, [tid]))
        time.sleep(0.02)
    cpu1 = thread_cpu(vm.p.pid, tid)
    v = c.status()
    check(r == {"ok": True, "cmd": "pause", "paused": True} and asleep and
          states == {"S"} and cpu1 - cpu0 <= 2 and v["paused"] and
          v["vcpus"][0]["idle"] is True,
          "busy vCPU (spins, interrupts off): pause replied in %.3f s; its "
          "thread sleeps (%s), %d CPU ticks in 0.5 s" %
          (took, "".join(sorted(states)), cpu1 - cpu0), v)
    r = c.request({"cmd": "resume"})
    running = poll_until(lambda: thread_cpu(vm.p.pid, tid) - cpu1 >= 10, 10)
    check(r.get("paused") is False and running,
          "resume: the vCPU spins again (CPU time grows)", r)
    r = c.request({"cmd": "pause"})
    check(r.get("paused") is True, "paused again", r)
    rc = vm.stop()
    check(rc == 143 and vm.stop_seconds < 2,
          "SIGTERM while paused (busy vCPU parked): exit 143 in %.2f s" %
          vm.stop_seconds, "exit %s\n%s" % (rc, vm.err))
    c.close()


def test_no_sysidle_idle(tmp):
    """No tick, no --sysidle: a paused VM stays paused; SIGTERM exits."""
    sock = os.path.join(tmp, "notick.sock")
    vm, c = started(["--cpus", "2", "--append", "hz=0", "--control", sock,
                     tool("idle.elf")], sock, r"^idle: \d+ cpus up",
                    "idle.elf hz=0")
    if vm is None:
        return
    v0 = wait_status(c, lambda v: all(x["idle"] for x in v["vcpus"]), 10)
    r = c.request({"cmd": "pause"})
    time.sleep(0.3)  # an observation window: nothing may happen in it
    v1 = c.status()
    check(r.get("paused") is True and v1["paused"] and
          halt_exits(v1) == halt_exits(v0) and
          v1["counters"]["resumes_self"] == 0,
          "without --sysidle, no tick: paused stays paused (halt_exits "
          "%s)" % halt_exits(v1), [r, v1])
    rc = vm.stop(signal.SIGINT)
    check(rc == 130 and vm.stop_seconds < 2,
          "SIGINT while paused: exit 130 in %.2f s" % vm.stop_seconds,
          "exit %s\n%s" % (rc, vm.err))
    c.close()


def test_race(tmp):
    """Pause and resume from two clients, kicks and serial input, all at
    once, many times: every request answered, the events alternate and
    match the counters, the final state is consistent."""
    sock = os.path.join(tmp, "race.sock")
    vm = Vm(["--cpus", "2", "--sysidle", "--append", "hz=250", "--control",
             sock, tool("idle.elf")])
    c = connect(sock, vm.p)
    if c is None:
        check(False, "race VM: socket up", vm.err)
        vm.stop(signal.SIGKILL)
        return
    wait_status(c, lambda v: v["state"] == "FULL_NOTED")
    w = Watcher(sock)
    bad = []
    rounds = 150

    def client(n, kick):
        k = Client(sock)
        for j in range(rounds):
            for cmd in ["pause", "resume"] if (j + n) % 2 == 0 else \
                    ["pause", "pause", "resume"]:
                r = k.request({"cmd": cmd, "id": j})
                if not isinstance(r, dict) or r.get("id") != j or \
                        r.get("paused") is not (cmd == "pause"):
                    bad.append((n, cmd, r))
                    return
            if kick and j % 10 == 0:
                r = k.request({"cmd": "kick"})
                if r != {"ok": True, "cmd": "kick"}:
                    bad.append((n, "kick", r))
                    return
        k.close()

    ts = [threading.Thread(target=client, args=(n, n == 1))
          for n in range(2)]
    t0 = time.monotonic()
    for t in ts:
        t.start()
    for j in range(20):
        vm.send("r")
        time.sleep(0.005)
    for t in ts:
        t.join(120)
    took = time.monotonic() - t0
    hung = any(t.is_alive() for t in ts)
    r = c.request({"cmd": "resume"})
    v = c.status()
    # every event reached the watcher: its count matches the counters
    total = v["counters"]["pauses"] + v["counters"]["resumes_requested"] + \
        v["counters"]["resumes_self"]
    poll_until(lambda: len(w.pauses()) >= total, 10)
    seq = [e["event"] for e in w.pauses()]
    alt = all(seq[k] == ("paused" if k % 2 == 0 else "resumed")
              for k in range(len(seq)))
    reasons = {e.get("reason") for e in w.pauses()
               if e["event"] == "resumed"}
    check(not hung and not bad and r.get("paused") is False and
          not v["paused"] and alt and seq and seq[-1] == "resumed" and
          seq.count("paused") == v["counters"]["pauses"] and
          seq.count("resumed") == v["counters"]["resumes_requested"] +
          v["counters"]["resumes_self"] and
          v["counters"]["events_dropped"] == 0 and
          v["counters"]["watch_dropped"] == 0 and reasons <= REASONS,
          "race: 2 clients x %d rounds of pause / resume, kicks, serial "
          "input (%.1f s): all answered, %d events alternate and match the "
          "counters (pauses %d, resumes %d + %d; reasons %s)" %
          (rounds, took, len(seq), v["counters"]["pauses"],
           v["counters"]["resumes_requested"],
           v["counters"]["resumes_self"], sorted(reasons)),
          [bad, seq[-6:], v["counters"]])
    back = wait_status(c, lambda v: v["state"] == "FULL_NOTED", 20)
    check(back is not None and not back["paused"] and
          back["counters"]["violations"] == 0,
          "race: afterwards the VM idles again (FULL_NOTED), no violation",
          back)
    w.close()
    c.close()
    rc = vm.stop()
    check(rc == 143, "race VM: SIGTERM, exit 143", "exit %s\n%s" %
          (rc, vm.err))


def main():
    skip = vmmtest.vm_or_skip("idle.elf")
    if skip:
        return skip
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        test_idle(tmp)
        test_busy(tmp)
        test_no_sysidle_idle(tmp)
        test_race(tmp)
    print("# %.1f s" % (time.monotonic() - t0))
    return vmmtest.finish()


if __name__ == "__main__":
    sys.exit(main())
