#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""End to end with a real libvirtd: this project's idle.elf booted as a
transient QEMU/KVM domain, its vCPU statistics, build/sysidle-libvirt
publishing FULL_NOTED into the domain's metadata, and
tools/sysidle-consolidate --libvirt packing its vCPUs.

The test starts its own libvirtd (root only), private from the system's
(private_libvirtd.py: a mount namespace of its own, /etc, /run and /var
overlaid with upper layers in a temporary directory, its sockets there,
reached as qemu:///system?socket=PATH). libvirtd is stopped by its PID
(SIGTERM, SIGKILL after 10 s); the domain is destroyed, a QEMU left over
is killed by the PID in its pidfile, the temporary directory removed, even
on failure.

Steps (TAP on stdout, one check each):
  1. libvirtd starts and answers on its socket
  2. the domain (idle.elf hz=0, 2 vCPUs, host-passthrough CPU without
     arch-capabilities) boots: "idle: 2 cpus up" on its serial console
  3. virConnectGetAllDomainStats(VCPU) has vcpu.N.halt_exits.sum and
     vcpu.N.blocking.cur for every vCPU (the keys seen are listed)
  4. build/sysidle-libvirt --libvirt URI --interval 100 --once (then the
     daemon for up to 10 s if needed) brings the domain's metadata
     (urn:sysidle:1) to <state name="FULL_NOTED" .../>
  5. tools/sysidle-consolidate --libvirt URI --once packs every vCPU onto
     the idle CPU (the last CPU), read back with virDomainGetVcpuPinInfo
Then both as daemons on the domain, steps 6-13 (e2e_daemons.py): the
bridge publishes FULL_NOTED, the consolidator packs, pauses the domain
--suspend-after its FULL_NOTED, its metadata stays FULL_NOTED while it is
paused, it is resumed at --suspend-max and paused again, and both
daemons' SIGTERM put everything back.
A step whose program is missing (not built, no --libvirt yet) or whose
input is missing (no KVM statistics) is "ok N # SKIP reason"; when step 4
is skipped, step 5 runs on metadata written by the test itself, and
steps 6-13 are all skipped. A step whose premise failed (no FULL_NOTED,
not paused, not resumed) skips those that need it; 12 and 13 always run.
The daemons are stopped by their PIDs like libvirtd, whatever happens.

usage: test_libvirt_e2e.py BUILD_DIR SOURCE_DIR
Exit: 0 passed (maybe with skips), 1 a check failed, 77 nothing could run
(not root, no /dev/kvm, no libvirtd, QEMU or python3-libvirt, libvirtd
did not start)."""
import os
import re
import shutil
import subprocess
import sys
import time
import traceback

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                ".."))
import tap  # noqa: E402
from tap import check, skip  # noqa: E402
from private_libvirtd import (  # noqa: E402
    BOOT_TIMEOUT_S, NS, SKIP, START_TIMEOUT_S, cpus, diag, domain_xml,
    finish, kill_pid, metadata_state, poll_until, prepare, prerequisites,
    read, run_tool, skip_all, teardown, vcpu_stats)
from e2e_daemons import DAEMON_CHECKS, DAEMON_S, daemons  # noqa: E402


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    build, src = sys.argv[1], sys.argv[2]
    kernel = os.path.abspath(os.path.join(build, "guest-tools", "idle.elf"))
    bridge = os.path.join(build, "sysidle-libvirt")
    consolidate = os.path.join(src, "tools", "sysidle-consolidate")
    libvirt, why = prerequisites(kernel)
    if libvirt is None:
        return skip_all(why)

    tmp, lv = prepare(libvirt, "sysidle-e2e-")
    conn = None
    helpers = []
    started = False
    try:
        t0 = time.monotonic()
        lv.start()
        c = lv.connect(libvirt)
        if c is None or c == "exited":
            print("1..0 # SKIP libvirtd did not start (%s)" %
                  ("exited %s" % lv.proc.returncode if c else "no socket in "
                   "%d s" % START_TIMEOUT_S))
            diag(read(lv.log)[-3000:])
            return SKIP
        started = True
        conn = c
        check(True, "private libvirtd %s answers on %s (%.1f s)" %
              (conn.getLibVersion(), lv.uri, time.monotonic() - t0))
        return steps(libvirt, lv, conn, tmp, kernel, bridge, consolidate,
                     helpers)
    except KeyboardInterrupt as e:
        check(False, "interrupted (%s)" % e)
        return 1
    except Exception as e:
        check(False, "unexpected error: %s" % e, traceback.format_exc())
        return 1
    finally:
        teardown(libvirt, lv, conn, helpers, "sysidle-e2e-")
        if started and tap.failures:
            diag("libvirtd log (end):\n" + read(lv.log)[-3000:])
        shutil.rmtree(tmp, ignore_errors=True)
        if tap.count:
            tap.finish()


def steps(libvirt, lv, conn, tmp, kernel, bridge, consolidate, helpers):
    ncpu = 2
    name = "sysidle-e2e-%d" % os.getpid()
    serial = os.path.join(tmp, "serial.log")
    t0 = time.monotonic()
    try:
        dom = conn.createXML(domain_xml(name, kernel, serial, ncpu), 0)
    except libvirt.libvirtError as e:
        check(False, "transient domain %s created" % name,
              "%s\n%s" % (e, lv.domain_log(name)))
        return finish()
    up = poll_until(lambda: "idle: %d cpus up" % ncpu in read(serial),
                    BOOT_TIMEOUT_S, 0.2)
    if not check(bool(up), "domain %s boots idle.elf hz=0 on %d vCPUs "
                 "(%.1f s)" % (name, ncpu, time.monotonic() - t0),
                 "serial:\n%s\nqemu log:\n%s" % (
                     read(serial), lv.domain_log(name))):
        return finish()
    time.sleep(1)

    # 3. KVM's per-vCPU statistics through libvirt
    st = vcpu_stats(conn, libvirt, dom)
    keys = sorted({re.sub(r"^vcpu\.\d+\.", "vcpu.N.", k) for k in st})
    diag("vcpu statistics keys: " + " ".join(keys))
    want = ["vcpu.%d.%s" % (i, s) for i in range(ncpu)
            for s in ("halt_exits.sum", "blocking.cur")]
    have_stats = all(k in st for k in want)
    if have_stats:
        # Three more samples 0.5 s apart: what an idle guest's vCPUs look
        # like to a poller, next to what the host says of their threads
        # (QEMU reads a vCPU's statistics on that vCPU's thread: a query
        # may itself take the vCPU out of kvm_vcpu_block).
        samples = [st]
        for _ in range(3):
            time.sleep(0.5)
            samples.append(vcpu_stats(conn, libvirt, dom))
        for i in range(ncpu):
            diag("vcpu.%d over %d queries 0.5 s apart: %s" % (
                i, len(samples), ", ".join(
                    "%s %s" % (k, [s.get("vcpu.%d.%s" % (i, k))
                                   for s in samples])
                    for k in ("halt_exits.sum", "blocking.cur",
                              "signal_exits.sum", "halt_wait_ns.sum"))))
        for pid in lv.qemu_pids():
            for tid in sorted(os.listdir("/proc/%d/task" % pid), key=int):
                comm = read("/proc/%d/task/%s/comm" % (pid, tid)).strip()
                if "/KVM" in comm:
                    diag("host thread %s (%s): state %s, wchan %s" % (
                        tid, comm, read("/proc/%d/task/%s/stat" % (
                            pid, tid)).rsplit(")", 1)[-1].split()[:1],
                        read("/proc/%d/task/%s/wchan" % (pid, tid)) or "-"))
        check(True, "vcpu.N.halt_exits.sum and vcpu.N.blocking.cur for "
              "every vCPU")
    else:
        skip("vcpu.N.halt_exits.sum and vcpu.N.blocking.cur for every vCPU",
             "this KVM/QEMU gives no such statistics (missing: %s)" %
             " ".join(k for k in want if k not in st))

    # 4. the bridge publishes FULL_NOTED
    what = "sysidle-libvirt: the domain's metadata reaches FULL_NOTED"
    daemon = None       # the bridge left running for step 5
    if not have_stats:
        skip(what, "no KVM vCPU statistics to feed it")
    elif not os.access(bridge, os.X_OK):
        skip(what, "%s not built" % bridge)
    else:
        rc, out = run_tool([bridge, "--libvirt", lv.uri, "--interval",
                            "100", "--once"])
        diag(out.strip())
        ms = metadata_state(libvirt, dom)
        how = "--once (exit %s)" % rc
        if (ms or (None,))[0] != "FULL_NOTED" and rc not in (None, 2):
            diag("not FULL_NOTED after --once (%s): the daemon for up to "
                 "%d s" % (ms and ms[0], DAEMON_S))
            # its output goes to a file: it runs on through step 5 (on
            # SIGTERM it removes the metadata that step 5 reads)
            daemon_log = os.path.join(tmp, "bridge.log")
            with open(daemon_log, "w") as f:
                daemon = subprocess.Popen(
                    [bridge, "--libvirt", lv.uri, "--interval", "100"],
                    stdin=subprocess.DEVNULL, stdout=f,
                    stderr=subprocess.STDOUT, start_new_session=True)
            helpers.append(daemon)
            ms = poll_until(lambda: (lambda m: m if m and m[0] ==
                                     "FULL_NOTED" else None)(
                metadata_state(libvirt, dom)), DAEMON_S, 0.2) or \
                metadata_state(libvirt, dom)
            out = read(daemon_log)
            how = "the daemon, %s" % ("running" if daemon.poll() is None
                                      else "exit %s" % daemon.returncode)
        check(bool(ms) and ms[0] == "FULL_NOTED", what + " (%s)" % how,
              "metadata: %s\n%s" % (ms and ms[1], out))
        if ms:
            diag("metadata: " + ms[1].strip())

    # 5. consolidation packs the vCPUs
    what = "sysidle-consolidate --libvirt --once: every vCPU pinned to the " \
        "idle CPU"
    rc, helptext = run_tool([sys.executable, consolidate, "--help"])
    host = sorted(os.sched_getaffinity(0))
    idle = host[-1]
    if "--libvirt" not in (helptext or ""):
        skip(what, "sysidle-consolidate has no --libvirt option yet")
    elif len(host) < 2:
        skip(what, "only one host CPU: packing would not be visible")
    else:
        ms = metadata_state(libvirt, dom)
        if not ms or ms[0] != "FULL_NOTED":
            # no bridge, or it did not publish: the state it would write
            dom.setMetadata(
                libvirt.VIR_DOMAIN_METADATA_ELEMENT,
                '<state name="FULL_NOTED" num="4" since_unix_ms="%d"/>' %
                int(time.time() * 1000), "sysidle", NS,
                libvirt.VIR_DOMAIN_AFFECT_LIVE)
            diag("metadata FULL_NOTED written by the test (the bridge did "
                 "not publish it)")
        before = dom.vcpuPinInfo(libvirt.VIR_DOMAIN_AFFECT_LIVE)
        # --dir: an empty directory, so that no VMM control socket of the
        # host (the default directory) is looked at, let alone packed
        novmm = os.path.join(tmp, "no-vmm")
        os.makedirs(novmm, exist_ok=True)
        rc, out = run_tool([sys.executable, consolidate, "--libvirt", lv.uri,
                            "--dir", novmm, "--once", "--idle-cpus",
                            str(idle), "--state-dir",
                            os.path.join(tmp, "consolidate-once")])
        diag(out.strip())
        after = dom.vcpuPinInfo(libvirt.VIR_DOMAIN_AFFECT_LIVE)
        check(rc == 0 and all(cpus(m) == [idle] for m in after),
              what + " %d (exit %s)" % (idle, rc),
              "before %s\nafter %s\n%s" % (
                  [cpus(m) for m in before], [cpus(m) for m in after], out))
    if daemon is not None:
        killed = kill_pid(daemon.pid, proc=daemon)
        diag("sysidle-libvirt daemon %s:\n%s" % (
            "killed" if killed else "exit %s" % daemon.returncode,
            read(daemon_log).strip()))

    # 6-13. both daemons on the domain
    why = None
    if not have_stats:
        why = "no KVM vCPU statistics to feed sysidle-libvirt"
    elif not os.access(bridge, os.X_OK):
        why = "%s not built" % bridge
    elif "--libvirt" not in (helptext or ""):
        why = "sysidle-consolidate has no --libvirt option yet"
    elif "--suspend-max" not in (helptext or ""):
        why = "sysidle-consolidate has no --suspend-max option yet"
    elif len(host) < 2:
        why = "only one host CPU: packing would not be visible"
    if why:
        for what in DAEMON_CHECKS:
            skip(what, why)
    else:
        daemons(libvirt, lv, conn, tmp, dom, name, bridge, consolidate,
                helpers, host)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
