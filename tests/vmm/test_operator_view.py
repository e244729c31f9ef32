#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""The operator's view: sysidlectl why (what keeps a VM out of full idle,
in plain words, with rates and advice), report (every VM with its duty
cycle and a recommendation by the stated rules, the bridge's domains too)
and timeline (the last hour as SVG, from the VMM's "history" request),
on VMs played by vmm-scripted (tests/vmm/scripted/), so every source and
rate is known and the test runs on every host.

usage: test_operator_view.py VMM_SCRIPTED GUEST_DIR GUEST_TOOLS_DIR SYSIDLECTL
Exit: 0 all passed, 1 a check failed."""
import json
import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import zlib

import vmmtest
from vmmtest import Vm, check, poll_until

vmmtest.init(sys.argv)
CTL = sys.argv[4]
KERNEL = os.path.join(vmmtest.GUESTS, "hello.elf")  # loaded, never run
TMP = tempfile.mkdtemp(prefix="vmm-opview-")
DIR = os.path.join(TMP, "run")
os.mkdir(DIR)
TIMER_HZ, IPI_HZ = 200, 50
from scripted_guests import halted_with_serial, timer_and_ipis  # noqa: E402

# vCPU 0 (the timekeeper): a periodic LAPIC timer; vCPU 1 woken by vCPU
# 2's IPIs; vCPU 2 busy between them. IDLE: halted, serial on vCPU 0.
MIXED = timer_and_ipis(TIMER_HZ, IPI_HZ)
IDLE = halted_with_serial()

# vCPU 1's own periodic tick (250/s), its handler working 0.4 ms: idle
# 90 % of the time, but out of full idle at each tick.
TICKING = """
vcpu 0
  sti
  mmio-write 0xfee000f0 4 0x1ff
  start-ap 1 0x10
  loop
    hlt
  end
vcpu 1
  sti
  mmio-write 0xfee000f0 4 0x1ff
  mmio-write 0xfee003e0 4 0xb
  mmio-write 0xfee00320 4 0x20030
  mmio-write 0xfee00380 4 4000000
  loop
    hlt
  end
on 0x30
  busy 400000
  eoi
"""

# vCPU 1 spinning.
BUSY = """
vcpu 0
  sti
  mmio-write 0xfee000f0 4 0x1ff
  start-ap 1 0x10
  loop
    hlt
  end
vcpu 1
  spin
"""


def start(name, script, extra=(), sysidle=True):
    path = os.path.join(TMP, name + ".script")
    with open(path, "w") as f:
        f.write(script)
    os.environ["SYSIDLE_VMM_SCRIPT"] = path
    sock = os.path.join(DIR, name + ".sock")
    vm = Vm(["--cpus", "3" if "vcpu 2" in script else "2", "--name", name,
             "--control", sock] + (["--sysidle"] if sysidle else []) +
            list(extra) + [KERNEL], stop_timeout=20)
    poll_until(lambda: vmmtest.status(sock), 20)
    return vm, sock


def ctl(*args, timeout=30):
    p = subprocess.run([CTL, "--dir", DIR] + list(args), text=True,
                       capture_output=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def why_json(name):
    rc, out, err = ctl("--json", "why", name)
    try:
        return rc, json.loads(out), err
    except ValueError:
        return rc, {}, err + out


def source(w, vcpu, src):
    return next((s for s in w.get("sources", []) if s["vcpu"] == vcpu and
                 s["source"] == src), {})


def test_why_rates():
    """A periodic LAPIC timer and IPIs: why names each with its rate
    (within 20 %) and the rule's words; the spinning vCPU is named."""
    vm, sock = start("mixed", MIXED)

    def settled():
        rc, w, _ = why_json("mixed")
        t, i = source(w, 0, "lapic-timer"), source(w, 1, "ipi")
        return w if t.get("last_minute", 0) >= 3 * TIMER_HZ and \
            i.get("last_minute", 0) >= 3 * IPI_HZ else None
    w = poll_until(settled, 30) or {}
    t, i = source(w, 0, "lapic-timer"), source(w, 1, "ipi")
    check(t.get("label") == "LAPIC periodic timer" and
          abs(t.get("per_second", 0) - TIMER_HZ) <= TIMER_HZ * 0.2 and
          t.get("what") == "the guest's own tick" and
          "--lapic-tick-policy catchup" in t.get("advice", ""),
          "why --json: vCPU 0's LAPIC periodic timer, %s/s, the guest's "
          "tick, advice a tick policy" % t.get("per_second"), json.dumps(w))
    check(i.get("label") == "IPIs from vCPU 2" and
          abs(i.get("per_second", 0) - IPI_HZ) <= IPI_HZ * 0.2 and
          "spread across its vCPUs" in i.get("what", ""),
          "why --json: vCPU 1's IPIs from vCPU 2, %s/s, guest work spread "
          "across vCPUs" % i.get("per_second"), json.dumps(w))
    check(2 in w.get("running_vcpus", []), "why: vCPU 2 running now",
          json.dumps(w))
    rc, out, err = ctl("why", "mixed")
    m = re.search(r"^  vCPU 0 LAPIC periodic timer, (\d+)/s: the guest's own "
                  r"tick; --lapic-tick-policy catchup would hold it while the "
                  r"VM is idle", out, re.M)
    check(rc == 0 and m and abs(int(m.group(1)) - TIMER_HZ) <= TIMER_HZ *
          0.2 and re.search(r"^  vCPU 1 IPIs from vCPU 2, \d+/s: ", out, re.M)
          and "Running now (not halted): vCPU 2" in out,
          "why: 'vCPU 0 LAPIC periodic timer, N/s: the guest's own tick; "
          "--lapic-tick-policy catchup would hold it ...', the IPIs, the "
          "running vCPU", "exit %d\n%s%s" % (rc, out, err))
    check(vm.stop() == 143, "SIGTERM: 143", vm.err)


def png_pixels(path):
    """(width, height, set of RGB tuples) of an 8-bit RGB/RGBA PNG."""
    with open(path, "rb") as f:
        data = f.read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, ihdr = 8, b"", None
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            ihdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    w, h, depth, ctype = ihdr[:4]
    assert depth == 8 and ctype in (2, 6), ihdr
    bpp = 3 if ctype == 2 else 4
    raw, stride = zlib.decompress(idat), w * bpp
    prev, colours, i = bytearray(stride), set(), 0
    for _ in range(h):
        ft, line = raw[i], bytearray(raw[i + 1:i + 1 + stride])
        i += 1 + stride
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b, c = prev[x], prev[x - bpp] if x >= bpp else 0
            if ft == 1:
                line[x] = (line[x] + a) & 255
            elif ft == 2:
                line[x] = (line[x] + b) & 255
            elif ft == 3:
                line[x] = (line[x] + (a + b) // 2) & 255
            elif ft == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pr = a if pa <= pb and pa <= pc else b if pb <= pc else c
                line[x] = (line[x] + pr) & 255
        for x in range(0, stride, bpp):
            colours.add(tuple(line[x:x + 3]))
        prev = line
    return w, h, colours


def test_outside_and_timeline():
    """A fully idle VM ended by a kick and by serial input: why says so;
    the history request lists both ends with their causes and checks its
    input; the timeline renders, full idle and the causes in it."""
    vm, sock = start("idle", IDLE)

    def full():
        st = vmmtest.status(sock)
        return st and st.get("state") == "FULL_NOTED"
    poll_until(full, 20)
    vmmtest.Client(sock).request({"cmd": "kick"})
    time.sleep(0.2)
    poll_until(full, 20)
    vm.send("A")
    time.sleep(0.2)
    poll_until(full, 20)
    rc, w, err = why_json("idle")
    s = source(w, 0, "serial-input")
    check(rc == 0 and w.get("full_idle_exits", {}).get("kick") == 1 and
          w.get("full_idle_exits", {}).get("serial-input") == 1 and
          s.get("label") == "serial input" and
          s.get("what") == "input arriving on the serial console",
          "why --json: ends of full idle kick 1, serial-input 1; vCPU 0 "
          "woken by serial input", json.dumps(w) + err)
    rc, out, err = ctl("why", "idle")
    check(rc == 0 and re.search(r"^Ends of full idle by cause:.* kick 1",
                                out, re.M) and "serial-input 1" in out and
          "vCPU 0 serial input, " in out and
          "\n  kick: someone outside woke it" in out and
          "\n  serial-input: input arriving on the serial console" in out,
          "why: 'Ends of full idle by cause: kick 1, serial-input 1'",
          out + err)
    c = vmmtest.Client(sock)
    h = c.request({"cmd": "history", "since_s": 3600})
    ends = [(e.get("by"), e.get("vcpu")) for e in h.get("changes", [])
            if e.get("from") == "FULL_NOTED"]
    check(h.get("ok") and h.get("state") == "FULL_NOTED" and
          h.get("capacity") == 4096 and "truncated_before_unix_ms" not in h
          and [b for b, _ in ends] == ["kick", "serial-input"] and
          h["from_unix_ms"] == h["start_unix_ms"] <= h["now_unix_ms"],
          "history: the two ends of full idle by kick and serial-input, "
          "from the VM's start", json.dumps(h))
    bad = [c.request({"cmd": "history", "since_s": v}) for v in
           (0, 3601, "60", 1.5)]
    check(all(b.get("ok") is False and "since_s" in b.get("error", "")
              for b in bad), "history: since_s 0, 3601, a string, 1.5 are "
          "errors", json.dumps(bad))
    c.close()
    svg, png = os.path.join(TMP, "idle.svg"), os.path.join(TMP, "idle.png")
    rc, out, err = ctl("timeline", "idle", "--svg", svg)
    check(rc == 0 and "state changes drawn into" in out and
          subprocess.run(["xmllint", "--noout", svg]).returncode == 0,
          "timeline --svg: written, well-formed XML", out + err)
    r = subprocess.run(["rsvg-convert", svg, "-o", png],
                       capture_output=True, text=True)
    w_, h_, colours = png_pixels(png) if r.returncode == 0 else (0, 0, set())
    check(w_ == 960 and 250 <= h_ <= 400 and (44, 160, 44) in colours and
          (188, 189, 34) in colours and (127, 127, 127) in colours,
          "timeline: rendered %dx%d, full idle (#2ca02c), the kick "
          "(#bcbd22) and serial-input (#7f7f7f) markers" % (w_, h_),
          r.stderr)
    rc, _, err = ctl("timeline", "idle", "--svg",
                     os.path.join(TMP, "missing", "x.svg"))
    check(rc == 1 and "cannot write" in err, "timeline: an unwritable FILE "
          "is an error (exit 1)", err)
    rc, _, err = ctl("timeline", "idle")
    check(rc == 2 and "--svg" in err, "timeline without --svg: usage, 2", err)
    rc, _, err = ctl("timeline", "nope", "--svg", svg)
    check(rc == 1 and "no such VM 'nope'" in err, "timeline: unknown VM, 1",
          err)
    check(vm.stop() == 143, "SIGTERM: 143", vm.err)


def test_errors():
    """why: an unknown VM, a stale socket, a VMM without --sysidle."""
    vm, sock = start("nosys", TICKING, sysidle=False)
    poll_until(lambda: source(why_json("nosys")[1], 1, "lapic-timer"), 20)
    rc, out, err = ctl("why", "nosys")
    check(rc == 3 and "full idle is off" in out and "full idle is off" in
          err and "vCPU 1 LAPIC periodic timer" in out,
          "why without --sysidle: the wake-ups shown, full idle off, exit 3",
          "exit %d\n%s%s" % (rc, out, err))
    check(vm.stop() == 143, "SIGTERM: 143", vm.err)
    rc, _, err = ctl("why", "nope")
    check(rc == 1 and "no such VM 'nope'" in err, "why: unknown VM, exit 1",
          err)
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(os.path.join(DIR, "stale.sock"))
    stale.close()
    rc, _, err = ctl("why", "stale")
    check(rc == 1 and "stale socket" in err, "why: a stale socket, exit 1",
          err)
    os.unlink(os.path.join(DIR, "stale.sock"))


def test_report():
    """An idle, a ticking and a busy VM, and two bridge domains: each row
    as the rules say."""
    vms = [start("r-idle", IDLE), start("r-tick", TICKING),
           start("r-busy", BUSY)]
    prom = os.path.join(TMP, "bridge.prom")
    now = time.time()
    with open(prom, "w") as f:
        f.write("sysidle_libvirt_up 1\n"
                'sysidle_vm_state{vm="db",uuid="u1"} 4\n'
                'sysidle_vm_state_since_timestamp_seconds{vm="db",uuid="u1"}'
                ' %.3f\n' % (now - 2 * 86400) +
                'sysidle_vm_full_idle_since_timestamp_seconds{vm="db",'
                'uuid="u1"} %.3f\n' % (now - 2 * 86400) +
                'sysidle_vm_state{vm="web \\"x\\"",uuid="u2"} 0\n')

    def rows():
        rc, out, err = ctl("--json", "report", "--bridge-metrics", prom)
        try:
            return {r["name"]: r for r in map(json.loads, out.splitlines())}
        except ValueError:
            return {}

    def settled():
        r = rows()
        return r if r.get("r-tick", {}).get("advice") == "a tick policy" \
            and r.get("r-busy", {}).get("advice") == "nothing" else None
    time.sleep(2)
    r = poll_until(settled, 20) or rows()
    has_duty = "duty" in (vmmtest.status(vms[0][1]) or {})
    idle = r.get("r-idle", {})
    check(idle.get("advice") == "suspend or pack" if has_duty else
          idle.get("advice") == "unknown" and
          idle.get("full_idle_ratio") is None,
          "report: the idle VM: %s" % ("suspend or pack" if has_duty else
                                       "unknown (no duty cycle)"),
          json.dumps(r))
    check(r.get("r-tick", {}).get("advice") == "a tick policy" and
          r.get("r-busy", {}).get("advice") == "nothing",
          "report: the ticking VM 'a tick policy', the busy one 'nothing'",
          json.dumps(r))
    db, web = r.get("db", {}), r.get("web \"x\"", {})
    check(db.get("kind") == "libvirt" and db.get("advice") ==
          "suspend or pack" and db.get("full_idle_ratio") == 1 and
          web.get("state") == "NOT" and web.get("advice") == "unknown",
          "report --bridge-metrics: a domain idle for 2 days 'suspend or "
          "pack', another unknown", json.dumps(r))
    rc, out, err = ctl("report")
    check(rc == 0 and re.search(r"^r-busy +vmm +NOT .* nothing ", out, re.M)
          and re.search(r"^r-tick +vmm .* a tick policy +vCPU 1 LAPIC "
                        r"periodic timer", out, re.M),
          "report: the table", out + err)
    tick_sock, last = vms[1][1], [{}]

    def truncated():
        """A history reply of the ticking VM once its ring overwrote a
        change (a connection each: a reply of 0.5 MiB read whole)."""
        c = vmmtest.Client(tick_sock)
        try:
            last[0] = c.request({"cmd": "history"}, 20) or {}
        finally:
            c.close()
        return last[0] if "truncated_before_unix_ms" in last[0] else None
    # 4096 changes: seconds of ticks, more on a loaded host
    h = poll_until(truncated, 120, 0.5) or {}
    ch = h.get("changes", [])
    check(len(ch) == 4096 and h["truncated_before_unix_ms"] ==
          ch[0]["unix_ms"] > h["from_unix_ms"],
          "history: a VM ticking out of full idle fills the ring; the reply "
          "says from when it is whole (truncated_before_unix_ms)",
          json.dumps({k: (len(v) if k == "changes" else v)
                      for k, v in (h or last[0]).items()}))
    m = h.get("minutes", [])
    check(m and m[0]["start_unix_ms"] <= h["from_unix_ms"] and all(0 <= x[
        "full_idle_ratio"] <= 1 >= x["span_s"] / 60 for x in m) and 0 < m[
        -1]["full_idle_ratio"] < 1, "history: each minute's full-idle share "
        "from the VM's start, whatever the ring lost", json.dumps(m))
    svg = os.path.join(TMP, "tick.svg")
    rc, out, err = ctl("timeline", "r-tick", "--svg", svg)
    check(rc == 0 and "not kept" in open(svg).read() and "full idle/min" in
          open(svg).read() and subprocess.run(["xmllint", "--noout", svg])
          .returncode == 0, "timeline of a truncated history: says so, draws "
          "each minute's full-idle share whole; well-formed", err)
    rc, _, err = ctl("report", "--bridge-metrics", prom + ".missing")
    check(rc == 1 and "--bridge-metrics" in err,
          "report: a missing --bridge-metrics file, exit 1", err)
    for vm, _ in vms:
        check(vm.stop() == 143, "SIGTERM: 143", vm.err)


class CannedVmm:
    """A control socket at DIR/@name.sock answering every status request
    with the status object @vm (as a VMM with a duty cycle would), and a
    history request with @history when given."""

    def __init__(self, name, vm, history=None):
        self.replies = {
            "status": {"ok": True, "cmd": "status", "vm": vm},
            "history": dict(history or {}, ok=True, cmd="history")}
        self.srv = socket.socket(socket.AF_UNIX)
        self.srv.bind(os.path.join(DIR, name + ".sock"))
        self.srv.listen(8)
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        while True:
            try:
                c, _ = self.srv.accept()
            except OSError:
                return
            with c:
                try:
                    cmd = json.loads(c.recv(4096)).get("cmd")
                except ValueError:
                    cmd = None
                c.sendall((json.dumps(self.replies.get(cmd, {})) +
                           "\n").encode())

    def close(self):
        os.unlink(self.srv.getsockname())
        self.srv.close()


def canned(name, ratio, span_s, tick_per_minute=0, running=False):
    vm = {"name": name, "state": "FULL_NOTED" if ratio > 0.9 else "NOT",
          "in_state_s": 5.0, "sysidle": True, "timekeeper": 0,
          "vcpus": [{"id": 0, "idle": True}, {"id": 1, "idle": not running}],
          "wake_sources": {"window_s": 60, "vcpus": [
              {"vcpu": 0, "source": "lapic-timer",
               "last": "lapic-timer periodic", "total": tick_per_minute,
               "last_minute": tick_per_minute,
               "per_second": tick_per_minute / 60}] if tick_per_minute
              else []},
          "duty": {"full_idle_ratio": {"1m": ratio, "1h": ratio,
                                       "24h": ratio},
                   "span_s": {"1m": min(span_s, 60), "1h": min(span_s, 3600),
                              "24h": span_s},
                   "tracked_s": span_s}}
    return CannedVmm(name, vm)


def test_report_rules():
    """The rules on VMs with a duty cycle (canned statuses): 97 % of the
    day or of a younger VM's life fully idle, suspend or pack, whatever
    wakes it; below, a tick policy only for a VM halted and woken by its
    tick; else nothing."""
    fakes = [canned("c-day", 0.98, 86400.5, tick_per_minute=600),
             canned("c-young", 0.975, 1200),
             canned("c-tick", 0.60, 86400.5, tick_per_minute=15000),
             canned("c-work", 0.60, 86400.5),
             canned("c-run", 0.10, 86400.5, tick_per_minute=15000,
                    running=True)]
    rc, out, err = ctl("--json", "report")
    try:
        r = {x["name"]: x for x in map(json.loads, out.splitlines())}
    except ValueError:
        r = {}
    got = {n: (r.get(n, {}).get("advice"), r.get(n, {}).get("window"))
           for n in ("c-day", "c-young", "c-tick", "c-work", "c-run")}
    check(rc == 0 and got == {"c-day": ("suspend or pack", "24h"),
                              "c-young": ("suspend or pack", "life"),
                              "c-tick": ("a tick policy", "24h"),
                              "c-work": ("nothing", "24h"),
                              "c-run": ("nothing", "24h")},
          "report: the rules in order on duty cycles (97 % of the 24 h "
          "window, or of a younger VM's life)", "%s\n%s%s" % (got, out, err))
    rc, out, err = ctl("report")
    check(re.search(r"^c-young +vmm +FULL_NOTED +5\.0s +97\.5% +20m00s +"
                    r"suspend or pack", out, re.M) and
          re.search(r"^c-day +vmm .* 98\.0% +24h +suspend or pack", out,
                    re.M),
          "report: the table shows the share and the span used", out + err)
    for f in fakes:
        f.close()


def test_malformed():
    """Replies of the wrong shapes: why, report and timeline say what they
    can and never crash."""
    vm = {"name": "odd", "state": "FULL_NOTED", "vcpus": [1, "x", {}],
          "sysidle": True, "in_state_s": "x",
          "wake_sources": {"vcpus": [1, None, {"source": 5},
                                     {"source": "ipi", "last": "ipi from",
                                      "last_minute": 3, "per_second": -1},
                                     {"source": "zzz", "last_minute": 1}],
                           "full_idle_exits": [], "housekeeping": [{}]},
          "duty": {"full_idle_ratio": {"24h": "x"}, "span_s": []}}
    history = {"from_unix_ms": 2000, "now_unix_ms": 1000, "state": "??",
               "capacity": "x", "truncated_before_unix_ms": 1500,
               "changes": [1, {"to": "BAD", "unix_ms": -5},
                           {"from": "FULL_NOTED", "to": "NOT",
                            "unix_ms": 10 ** 15, "by": 3},
                           {"from": "NOT", "to": "FULL_NOTED"}]}
    f = CannedVmm("odd", vm, history)
    svg = os.path.join(TMP, "odd.svg")
    res = [ctl("why", "odd"), ctl("--json", "why", "odd"), ctl("report"),
           ctl("--json", "report"), ctl("timeline", "odd", "--svg", svg)]
    check(all(rc in (0, 1) for rc, _, _ in res) and
          subprocess.run(["xmllint", "--noout", svg]).returncode == 0,
          "malformed replies: why, report and timeline exit 0 or 1, the "
          "SVG well-formed", "\n".join("%d %s %s" % r for r in res))
    f.close()


def test_why_libvirt():
    """why --wakes-file: a libvirt domain as the bridge's file shows the
    host's view of it, said as such; a domain not there, one without
    figures and a file that is not the bridge's are errors."""
    kvm = {k: {"total": 100, "per_s": v} for k, v in
           [("halt_exits", 200.0), ("halt_wakeup", 200.0),
            ("irq_injections", 199.9), ("signal_exits", 0.0),
            ("halt_successful_poll", 1.0)]}
    doc = {"version": 1, "writer_pid": 1, "written_unix_ms": 1,
           "period_ms": 1000, "window_ms": 60000, "domains": [
               {"vm": "web1", "uuid": "5a1d1e00-0000-4000-8000-000000000001",
                "host_wakeups": {"source": "host", "pid": 5150,
                                 "window_s": 59.998, "samples": 61,
                                 "kvm": dict(kvm, scope="vm"),
                                 "threads": [
                                     {"name": "CPU 0/KVM", "threads": 1,
                                      "wakeups_total": 6010,
                                      "per_s": 100.017},
                                     {"name": "qemu-system-x86",
                                      "threads": 1, "wakeups_total": 130,
                                      "per_s": 2.0}],
                                 "threads_capped": False}},
               {"vm": "gone", "uuid": "x",
                "host_wakeups": {"source": "host",
                                 "absent": "a remote --libvirt host"}}]}
    path = os.path.join(TMP, "wakes.json")
    with open(path, "w") as f:
        json.dump(doc, f)
    rc, out, err = ctl("why", "web1", "--wakes-file", path)
    check(rc == 0 and "web1: libvirt domain, the host's view" in out and
          "  halt_wakeup 200/s: vCPU wake-ups from HLT" in out and
          "  CPU 0/KVM 100/s: a vCPU thread" in out and
          "  qemu-system-x86 2.0/s: QEMU's main loop" in out,
          "why --wakes-file: the host's view of a libvirt domain, its "
          "KVM counters and threads with their rates", out + err)
    rc2, out2, _ = ctl("--json", "why", "5a1d1e00-0000-4000-8000-000000000001",
                       "--wakes-file", path)
    check(rc2 == 0 and json.loads(out2).get("vm") == "web1",
          "why --json --wakes-file by uuid: the domain's object", out2)
    bad = os.path.join(TMP, "bad.json")
    with open(bad, "w") as f:
        f.write("[1, 2")
    res = [ctl("why", "nope", "--wakes-file", path),
           ctl("why", "gone", "--wakes-file", path),
           ctl("why", "web1", "--wakes-file", bad),
           ctl("why", "web1", "--wakes-file", bad + ".missing")]
    check([r[0] for r in res] == [1, 1, 1, 1] and
          "no libvirt domain 'nope'" in res[0][2] and
          "a remote --libvirt host" in res[1][2] and
          "not the bridge's wakes file" in res[2][2],
          "why --wakes-file: an unknown domain, one without figures, a bad "
          "or missing file: exit 1", "\n".join(r[2] for r in res))


if __name__ == "__main__":
    try:
        test_why_rates()
        test_outside_and_timeline()
        test_errors()
        test_report()
        test_report_rules()
        test_malformed()
        test_why_libvirt()
    finally:
        shutil.rmtree(TMP, ignore_errors=True)
    sys.exit(vmmtest.finish())
