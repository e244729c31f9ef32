#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-only
"""The test fleet itself (rig.py), so that the fleet tests stand on
something checked:

  two hosts that libvirt takes for two: their own host names (UTS
    namespaces), host UUIDs, sockets, /etc /run /var (a definition made on
    one is not on the other), migration port ranges
  a domain (KVM where /dev/kvm works, TCG where not) live-migrates from
    one to the other peer to peer, its definition with it, over loopback
  the out-of-memory fault: an incoming migration fails with QEMU's error
  freeze (the standby hook's SIGSTOP): the host's libvirtd answers
    nothing, a call to it fails within the rig's keepalive; thaw: answers
  the teardown by PID: no process of either host, no mount, no directory
  a process that made a rig, killed with SIGKILL while its domain runs:
    every process of its hosts ends (the kernel, through the pdeathsig
    chain and the PID namespaces), no mount is left, and the next rig
    removes its directory

usage: test_fleet_rig.py BUILD_DIR SOURCE_DIR
Exit 0 passed, 1 a check failed, 77 the fleet cannot run here."""
import os
import re
import signal
import subprocess
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, ".."))
import tap  # noqa: E402
from tap import check  # noqa: E402
import rig  # noqa: E402
from scene import diag, fleet_or_skip, poll  # noqa: E402

SKIP = 77
CHILD = """
import os, signal, sys
sys.path.insert(0, %(here)r)
import rig
f = rig.Fleet(2, %(build)r)
f.start(bridge=False)
f.create_domain(f.hosts[0], "orphan")
f.wait_booted("orphan")
print(f.dir, " ".join(h.ns for h in f.hosts), flush=True)
signal.pause()
"""


def alive(pid):
    st = rig.read("/proc/%d/stat" % pid)
    return bool(st) and st.rsplit(")", 1)[-1].split()[:1] != ["Z"]


def in_namespaces(nss):
    out = []
    for p in os.listdir("/proc"):
        if p.isdigit() and rig.ns_of(int(p)) in nss and alive(int(p)):
            out.append(int(p))
    return out


def killed_child(build):
    """A rig made by a child process killed with SIGKILL leaves nothing."""
    p = subprocess.Popen([rig.PY, "-c", CHILD % {"here": HERE,
                                                 "build": build}],
                         stdout=subprocess.PIPE, text=True,
                         start_new_session=True)
    line = p.stdout.readline().split()
    if len(line) < 3:
        p.kill()
        p.wait()
        check(False, "a child's rig starts", line)
        return
    d, nss = line[0], set(line[1:])
    before = in_namespaces(nss)
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    left = poll(lambda: not in_namespaces(nss), 20) or in_namespaces(nss)
    mounts = [ln for ln in rig.read("/proc/mounts").splitlines() if d in ln]
    check(before and left is True and not mounts,
          "a process holding a rig killed with SIGKILL: the %d processes of "
          "its hosts end, no mount is left" % len(before),
          "left: %s\nmounts: %s" % (left, mounts))
    rig.Fleet.sweep()
    check(not os.path.exists(d), "the next rig removes its directory")


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    build = sys.argv[1]
    fleet, skip_line = fleet_or_skip(2, build)
    if fleet is None:
        print(skip_line)
        return SKIP
    import libvirt
    libvirt.registerErrorHandler(lambda c, e: None, None)
    pids = []
    try:
        fleet.start(bridge=False)
        a, b = fleet.hosts
        ids = [(h.conn().getHostname(),
                re.search(r"<host>\s*<uuid>([^<]+)",
                          h.conn().getCapabilities()).group(1))
               for h in fleet.hosts]
        check(ids == [(a.name, a.uuid), (b.name, b.uuid)] and a.uuid !=
              b.uuid and a.sock != b.sock and a.port_min != b.port_min,
              "%s: host names %s, host UUIDs, sockets and migration ports "
              "their own" % (fleet.describe(), [i[0] for i in ids]), ids)
        fleet.create_domain(a, "vm1")
        check(fleet.wait_booted("vm1"), "vm1 boots idle.elf on %s" % a.name)
        check(fleet.defined("vm1") == [a.name], "vm1 is defined on %s only "
              "(their /etc are their own)" % a.name, fleet.defined("vm1"))
        t = time.monotonic()
        fleet.migrate("vm1", b)
        took = time.monotonic() - t
        check(fleet.where("vm1") == [b.name] and
              fleet.defined("vm1") == [b.name],
              "vm1 live-migrates peer to peer %s -> %s (%s, migration URI "
              "%s) in %.1f s, its definition with it" % (
                  a.name, b.name, b.uri.split("?")[0], rig.MIGRATE_URI,
                  took))
        pidfile = "/run/libvirt/qemu/vm1.pid"
        try:
            qemu = int(rig.read(b.path(pidfile)).strip() or 0)
        except ValueError:
            qemu = 0
        # the file holds a PID of the host's PID namespace: NSpid's last
        nspids = [int(ln.split()[-1]) for p in b.pids()
                  for ln in rig.read("/proc/%d/status" % p).splitlines()
                  if ln.startswith("NSpid:")]
        check(qemu in nspids and not os.path.exists(a.path(pidfile)),
              "each host's /run as its libvirtd sees it: vm1's PID file on "
              "%s names its QEMU, on %s it is gone" % (b.name, a.name),
              "%s on %s, its processes %s" % (qemu, b.name, nspids))
        a.out_of_memory(True)
        try:
            fleet.migrate("vm1", a)
            err = None
        except libvirt.libvirtError as e:
            err = str(e)
        a.out_of_memory(False)
        check(err and "Cannot allocate memory" in err and
              fleet.where("vm1") == [b.name],
              "out of memory at the destination: the migration fails with "
              "QEMU's error, vm1 stays", err)
        b.freeze()
        check(b.frozen, "freeze: %s's libvirtd stopped" % b.name)
        c = libvirt.open(a.uri)     # the other host answers meanwhile
        c.close()
        t = time.monotonic()
        try:
            b.conn().getHostname()
            err = None
        except libvirt.libvirtError as e:
            err = str(e)
        took = time.monotonic() - t
        check(err is not None and took < rig.KEEPALIVE_S * 4 + 3,
              "a call to the frozen host fails in %.1f s (keepalive): %s" %
              (took, err))
        b.thaw()
        b.close_conn()
        check(not b.frozen and b.conn().getHostname() == b.name,
              "thaw: it answers again")
        pids = [p for h in fleet.hosts for p in h.pids()]
    except Exception as e:
        check(False, "unexpected error: %s" % e, traceback.format_exc())
    finally:
        d = fleet.dir
        killed = fleet.teardown()
        if killed:
            diag("killed with SIGKILL: " + ", ".join(killed))
        left = [p for p in pids if alive(p)]
        mounts = [ln for ln in rig.read("/proc/mounts").splitlines()
                  if d in ln]
        check(pids and not left and not mounts and not os.path.exists(d),
              "teardown: the %d processes of the hosts ended, no mount, no "
              "directory" % len(pids), "left %s mounts %s" % (left, mounts))
    try:
        killed_child(build)
    except Exception as e:
        check(False, "unexpected error: %s" % e, traceback.format_exc())
    return tap.finish()


if __name__ == "__main__":
    sys.exit(main())
