#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""sysidle-libvirt on a real QEMU/KVM domain of a private libvirtd
(private_libvirtd.py, the one of test_libvirt_e2e.py): what watching costs
the guest, what a dead bridge leaves behind, what the hooks are told.

  1. The domain (idle.elf hz=0: no tick, 2 vCPUs) boots.
  2. Wake-ups of its vCPU threads (the context switches of the QEMU
     threads "CPU N/KVM", /proc/PID/task/TID/status) over WINDOW_S while
     the guest is idle: without the bridge, then with the bridge scanning
     every 100 ms (--interval 100 --idle-interval 100) for each --source:
     kvm, proc, libvirt. Each line prints the figures (per second per
     vCPU) and the bridge's own CPU time and wake-ups. kvm and proc fail
     when they add more than MAX_ADDED per second per vCPU; libvirt is
     expected to add some (QEMU runs its statistics job on every vCPU
     thread): if it does not, the measurement is blind and that fails.
  3. The bridge's metadata (with its lease) validates against
     common/urn-sysidle.rng.
  4. SIGKILL: sysidle-consolidate --libvirt packs the domain on the
     bridge's FULL_NOTED (--lease 5); the bridge is killed with SIGKILL;
     the consolidator restores the domain's pinning within one lease
     (its writer gone: at once), saying why.
  5. Hooks: the bridge with --hooks (a recorder): "watched begin" with
     libvirt's own domain XML on stdin (its <devices>, <emulator>), the
     element in it valid; SIGTERM: "unwatched end", never "stopped"; a new
     bridge: "watched begin" again; the domain destroyed: "stopped end".

usage: test_libvirt_fleet.py BUILD_DIR SOURCE_DIR
TAP on stdout. Exit: 0 passed, 1 a check failed, 77 nothing could run (as
test_libvirt_e2e.py)."""
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                ".."))
import private_libvirtd as plv  # noqa: E402
import tap  # noqa: E402
import urnschema  # noqa: E402
from procfs import thread_usage  # noqa: E402
from tap import check  # noqa: E402

NS = plv.NS
WINDOW_S = 5.0
MAX_ADDED = 1.0          # wake-ups per second per vCPU the bridge may add
LEASE_S = 5
SETTLE_S = 20            # for the bridge to reach FULL_NOTED

RECORDER = """#!%(python)s
import json, sys
with open(%(record)r, "a") as f:
    f.write(json.dumps({"argv": sys.argv[1:], "stdin": sys.stdin.read()})
            + "\\n")
"""


def vcpu_tids(pid):
    """QEMU's vCPU threads: "CPU N/KVM", or "CPU N/TCG" in a TCG domain."""
    out = []
    mark = "/KVM" if plv.VIRT == "kvm" else "/TCG"
    for tid in os.listdir("/proc/%d/task" % pid):
        if mark in plv.read("/proc/%d/task/%s/comm" % (pid, tid)):
            out.append(int(tid))
    return sorted(out)


def qemu_pid(lv, name):
    pids = lv.qemu_pids()
    return pids[0] if pids else None


def window(qpid, tids, bridge_pid=None):
    """(vCPU wake-ups/s per vCPU, bridge wake-ups/s, bridge CPU ms/s) over
    WINDOW_S."""
    v0 = thread_usage(qpid, tids)[1]
    b0 = thread_usage(bridge_pid) if bridge_pid else None
    t0 = time.monotonic()
    time.sleep(WINDOW_S)    # the measurement window itself
    dt = time.monotonic() - t0
    v = (thread_usage(qpid, tids)[1] - v0) / dt / len(tids)
    if not bridge_pid:
        return v, None, None
    b1 = thread_usage(bridge_pid)
    return v, (b1[1] - b0[1]) / dt, (b1[0] - b0[0]) / 1e6 / dt


def metadata(libvirt, dom):
    try:
        return dom.metadata(libvirt.VIR_DOMAIN_METADATA_ELEMENT, NS)
    except libvirt.libvirtError:
        return None


def start(cmd, log, helpers):
    return plv.start_daemon(cmd, log, helpers)


def stop(p):
    plv.kill_pid(p.pid, proc=p)
    return p.returncode


def test_wakeups(libvirt, lv, dom, name, bridge, tmp, helpers):
    qpid = qemu_pid(lv, name)
    tids = vcpu_tids(qpid) if qpid else []
    if not check(len(tids) == 2, "QEMU process %s: 2 vCPU threads (%s)" %
                 (qpid, tids)):
        return None
    base, _, _ = window(qpid, tids)
    plv.diag("without the bridge: %.2f vCPU wake-ups/s per vCPU" % base)
    result = {}
    for source in ["kvm", "proc", "libvirt"]:
        if source != "proc" and plv.VIRT != "kvm":
            tap.skip("--source %s: no vCPU wake-up added" % source,
                     "a TCG domain (no usable /dev/kvm) has no KVM "
                     "statistics to read")
            continue
        if source == "kvm" and not os.path.isdir("/sys/kernel/debug/kvm"):
            tap.skip("--source kvm: no vCPU wake-up added",
                     "no KVM debugfs here (/sys/kernel/debug/kvm), and it "
                     "could not be mounted")
            continue
        log = os.path.join(tmp, "bridge-%s.log" % source)
        b = start([bridge, "--libvirt", lv.uri, "--source", source,
                   "--interval", "100", "--idle-interval", "100",
                   "--hooks", os.path.join(tmp, "no-hooks")], log, helpers)
        noted = plv.poll_until(
            lambda: b.poll() is not None or
            "FULL_NOTED" in (metadata(libvirt, dom) or ""), SETTLE_S, 0.1)
        if b.poll() is not None or not noted:
            check(False, "--source %s: the bridge reaches FULL_NOTED" %
                  source, plv.read(log))
            stop(b)
            continue
        v, bw, bcpu = window(qpid, tids, b.pid)
        xml = metadata(libvirt, dom)
        stop(b)
        added = v - base
        result[source] = (v, bw, bcpu)
        line = ("--source %s, scanning every 100 ms: %.2f vCPU wake-ups/s "
                "per vCPU (%.2f without the bridge: %+.2f); the bridge "
                "itself %.1f wake-ups/s, %.2f ms CPU/s" %
                (source, v, base, added, bw, bcpu))
        if source == "libvirt":
            check(added > MAX_ADDED, line + ": libvirt's statistics wake "
                  "the vCPUs, and the measurement sees it", plv.read(log))
        else:
            check(added <= MAX_ADDED and
                  ("source %s (process %d" % (source, qpid)) in plv.read(log),
                  line + ": at most %g added" % MAX_ADDED, plv.read(log))
        if "schema" not in result:
            result["schema"] = True
            bad = urnschema.validate(xml or "")
            check(not bad and "valid_until_unix_ms" in (xml or ""),
                  "the bridge's metadata (leased) validates against "
                  "common/urn-sysidle.rng", "%s\n%s" % (bad, xml))
    return result


def test_sigkill(libvirt, lv, conn, dom, bridge, consolidate, tmp, helpers):
    live = libvirt.VIR_DOMAIN_AFFECT_LIVE
    host = sorted(os.sched_getaffinity(0))
    if len(host) < 2:
        tap.skip("SIGKILL of the bridge: the consolidator restores within "
                 "one lease", "one host CPU: no packing to see")
        return
    idle = host[-1]
    nhost = conn.getCPUMap()[0]
    mask = tuple(i == host[0] for i in range(nhost))
    for i in range(2):
        dom.pinVcpuFlags(i, mask, live)
    before = [plv.cpus(m) for m in dom.vcpuPinInfo(live)]
    blog = os.path.join(tmp, "bridge-kill.log")
    clog = os.path.join(tmp, "consolidate-kill.log")
    novmm = os.path.join(tmp, "no-vmm")
    os.makedirs(novmm, exist_ok=True)
    b = start([bridge, "--libvirt", lv.uri, "--interval", "100",
               "--lease", str(LEASE_S), "--hooks",
               os.path.join(tmp, "no-hooks")], blog, helpers)
    c = start([sys.executable, consolidate, "--libvirt", lv.uri, "--dir",
               novmm, "--state-dir", os.path.join(tmp, "cons-kill"),
               "--pack-after", "0", "--restore-after", "0", "--idle-cpus",
               str(idle), "--interval", "100ms", "--verbose"], clog, helpers)

    def pins():
        return [plv.cpus(m) for m in dom.vcpuPinInfo(live)]
    packed = plv.poll_until(lambda: pins() == [[idle]] * 2, SETTLE_S, 0.1)
    if not check(packed, "the consolidator packs the domain on the "
                 "bridge's FULL_NOTED (vCPUs on CPU %d)" % idle,
                 plv.read(blog) + plv.read(clog)):
        stop(c)
        stop(b)
        return
    os.kill(b.pid, signal.SIGKILL)
    b.wait()
    t0 = time.monotonic()
    back = plv.poll_until(lambda: pins() == before, LEASE_S + 5, 0.05)
    dt = time.monotonic() - t0
    check(back and dt <= LEASE_S and "not trusted" in plv.read(clog),
          "bridge SIGKILLed: the consolidator stops acting on its state "
          "and restores the pinning %.2f s later (--lease %d), saying why" %
          (dt, LEASE_S), plv.read(clog)[-3000:])
    xml = metadata(libvirt, dom)
    plv.diag("the dead bridge's metadata, left on the domain: %s" % xml)
    rc = stop(c)
    check(rc == 0 and pins() == before, "the consolidator's SIGTERM: exit "
          "0, the pinning as before", plv.read(clog)[-2000:])
    try:
        dom.setMetadata(libvirt.VIR_DOMAIN_METADATA_ELEMENT, None, None,
                        NS, live)
    except libvirt.libvirtError:
        pass


def hook_records(path):
    try:
        with open(path) as f:
            return [json.loads(l) for l in f if l.strip()]
    except FileNotFoundError:
        return []


def test_hooks(libvirt, lv, dom, name, bridge, tmp, helpers):
    hooks = os.path.join(tmp, "hooks")
    record = os.path.join(tmp, "hooks.rec")
    os.makedirs(hooks)
    with open(os.path.join(hooks, "vm"), "w") as f:
        f.write(RECORDER % {"python": sys.executable, "record": record})
    os.chmod(os.path.join(hooks, "vm"), 0o755)
    args = [bridge, "--libvirt", lv.uri, "--interval", "100", "--hooks",
            hooks]

    def events():
        return [" ".join(r["argv"][1:]) for r in hook_records(record)
                if r["argv"][:1] == [name]]
    b = start(args, os.path.join(tmp, "bridge-hooks1.log"), helpers)
    plv.poll_until(lambda: "idle begin -" in events(), SETTLE_S, 0.1)
    rc = stop(b)
    first = events()
    recs = [r for r in hook_records(record) if r["argv"][:1] == [name]]
    xml = recs[0]["stdin"] if recs else ""
    bad = urnschema.validate(xml) if xml else "no hook ran"
    check(first[:1] == ["watched begin -"] and "<devices>" in xml and
          "<emulator>" in xml and "id=" in xml.split(">", 1)[0] and
          not bad,
          "watched begin: libvirt's own domain XML on the hook's stdin "
          "(its id, <devices>, <emulator>), its urn:sysidle:1 element valid",
          "%s\n%s\n%s" % (first, bad, xml[:2000]))
    check(rc == 0 and first[-1:] == ["unwatched end -"] and
          not any(e.startswith("stopped") for e in first),
          "bridge SIGTERM with the domain running: unwatched end, no "
          "stopped (%s)" % ", ".join(first), plv.read(os.path.join(
              tmp, "bridge-hooks1.log")))
    n = len(first)
    b = start(args, os.path.join(tmp, "bridge-hooks2.log"), helpers)
    again = plv.poll_until(lambda: events()[n:n + 1] == ["watched begin -"],
                           SETTLE_S, 0.1)
    check(again, "a new bridge: watched begin again (not started)",
          events()[n:])
    dom.destroy()
    gone = plv.poll_until(lambda: events()[-1:] == ["stopped end -"],
                          SETTLE_S, 0.1)
    last = [r for r in hook_records(record) if r["argv"][:1] == [name]][-1]
    check(gone and "<devices>" in last["stdin"],
          "the domain destroyed: stopped end, with the domain's XML",
          events()[n:])
    stop(b)


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    build, src = sys.argv[1], sys.argv[2]
    kernel = os.path.abspath(os.path.join(build, "guest-tools", "idle.elf"))
    bridge = os.path.join(build, "sysidle-libvirt")
    consolidate = os.path.join(src, "tools", "sysidle-consolidate")
    libvirt, why = plv.prerequisites(kernel)
    if libvirt is None:
        return plv.skip_all(why)
    if not os.access(bridge, os.X_OK):
        return plv.skip_all("%s not built" % bridge)
    if not os.path.isdir("/sys/kernel/debug/kvm"):
        subprocess.run(["mount", "-t", "debugfs", "none",
                        "/sys/kernel/debug"], capture_output=True)

    tmp, lv = plv.prepare(libvirt, "sysidle-fleet-")
    conn = None
    helpers = []
    try:
        lv.start()
        c = lv.connect(libvirt)
        if c is None or c == "exited":
            print("1..0 # SKIP libvirtd did not start")
            plv.diag(plv.read(lv.log)[-3000:])
            return 77
        conn = c
        name = "sysidle-e2e-fleet-%d" % os.getpid()
        serial = os.path.join(tmp, "serial.log")
        dom = conn.createXML(plv.domain_xml(name, kernel, serial, 2), 0)
        up = plv.poll_until(lambda: "idle: 2 cpus up" in plv.read(serial),
                            plv.BOOT_TIMEOUT_S, 0.2)
        if not check(bool(up), "domain %s boots idle.elf hz=0 on 2 vCPUs" %
                     name, plv.read(serial) + lv.domain_log(name)):
            return 1
        time.sleep(1)       # the guest's own start-up work settles
        test_wakeups(libvirt, lv, dom, name, bridge, tmp, helpers)
        test_sigkill(libvirt, lv, conn, dom, bridge, consolidate, tmp,
                     helpers)
        test_hooks(libvirt, lv, dom, name, bridge, tmp, helpers)
    except KeyboardInterrupt as e:
        check(False, "interrupted (%s)" % e)
    except Exception as e:
        check(False, "unexpected error: %s" % e, traceback.format_exc())
    finally:
        plv.teardown(libvirt, lv, conn, helpers, "sysidle-e2e-")
        shutil.rmtree(tmp, ignore_errors=True)
    return tap.finish()


if __name__ == "__main__":
    sys.exit(main())
