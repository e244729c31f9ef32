#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-only
"""A fleet of N libvirt hosts on one machine, for the tests and the
benchmarks (root only).

Each host is a PID, mount and UTS namespace of its own run by
host_ns.py (its first process): its own host name (fleet-h1, ...), host
UUID, /etc, /run and /var (overlays in its directory), libvirtd socket
and migration ports. libvirt takes them for separate hosts, so a domain
live-migrates between them (peer to peer, over loopback: the migration
URI tcp://127.0.0.1 is given explicitly, as the host names resolve to
nothing outside). Domains boot this project's idle.elf, as KVM domains
where /dev/kvm is usable and TCG domains (<domain type='qemu'>) where it
is not (or where SYSIDLE_FLEET_VIRT=qemu says so); Fleet.virt says which,
and Fleet.describe() why.

Everything is stopped by PID: Fleet.teardown() destroys the domains,
stops each host's services (SIGTERM, then SIGKILL) and ends its first
process; whatever still runs in a host's PID namespace then is killed by
the kernel. If the process that made the rig dies, however (SIGKILL
included), each host's unshare gets SIGKILL (setpriv --pdeathsig), which
kills the namespace's first process (unshare --kill-child), which ends
every process of the host; the mounts go with the mount namespaces. A
rig's directory left behind by such a death is removed by the next rig
(Fleet.sweep: directories "sysidle-fleet-PID-*" whose PID is gone).

API (tests/fleet/README.md has the same with examples):
  fleet = Fleet(hosts=3, build=BUILD_DIR)        nothing started yet
  fleet.start(bridge=True, bridge_args=[...])    hosts, libvirtds, bridges
  fleet.create_domain(host, name, vcpus=2, mib=128, persistent=True)
  fleet.wait_booted(name)                        'idle: N cpus up' seen
  fleet.where(name) -> [host names running it]
  fleet.teardown()                               every exit path
  host.uri, host.name, host.uuid, host.conn() (a libvirt connection),
  host.kill_libvirtd(sig), host.start_libvirtd(), host.freeze(),
  host.thaw(), host.pids() (global PIDs of every process of the host)

python3 tests/fleet/rig.py --hosts N --domains M [--tcg] BUILD_DIR starts
one by hand, prints its URIs and waits for Enter (or SIGINT/SIGTERM)."""
import json
import os
import re
import shutil
import signal
import sys
import tempfile
import time

from rig_domains import QEMU_WRAPPER, Busy, domain_xml
from rig_host import (BOOT_TIMEOUT_S, HERE, KEEPALIVE_S, MIGRATE_URI,
                      PREFIX, PY, Host, RigError, comm, ctx_switches,
                      event_loop, kvm_usable, ns_of, prerequisites, read)

# what the tests and the benchmark use (rig_host.py, rig_domains.py)
__all__ = ["BOOT_TIMEOUT_S", "Busy", "Fleet", "Host", "KEEPALIVE_S",
           "MIGRATE_URI", "PREFIX", "PY", "QEMU_WRAPPER", "RigError", "comm",
           "ctx_switches", "domain_xml", "event_loop", "kvm_usable", "ns_of",
           "prerequisites", "read"]


class Fleet:
    """N hosts (see the module's doc). @virt: "kvm", "qemu" (TCG) or None
    (kvm where /dev/kvm is usable)."""

    def __init__(self, hosts=2, build=None, virt=None, tmp=None):
        why = prerequisites()
        if why:
            raise RigError(why)
        self.sweep()
        self.build = os.path.abspath(build) if build else None
        self.kernel = os.path.join(self.build or ".", "guest-tools",
                                   "idle.elf")
        if virt is None:
            # SYSIDLE_FLEET_VIRT=qemu: TCG domains where KVM works too
            virt = os.environ.get("SYSIDLE_FLEET_VIRT") or (
                "kvm" if kvm_usable() is None else "qemu")
        if virt not in ("kvm", "qemu"):
            raise RigError("SYSIDLE_FLEET_VIRT=%s: kvm or qemu" % virt)
        self.virt = virt
        self.why_tcg = (kvm_usable() or "SYSIDLE_FLEET_VIRT=qemu") \
            if virt == "qemu" else None
        self.dir = tempfile.mkdtemp(prefix="%s%d-" % (PREFIX, os.getpid()),
                                    dir=tmp)
        os.chmod(self.dir, 0o755)
        os.makedirs(os.path.join(self.dir, "serial"))
        self.emulator = os.path.join(self.dir, "qemu")
        with open(self.emulator, "w") as f:
            f.write(QEMU_WRAPPER % {"dir": self.dir, "qemu": shutil.which(
                "qemu-system-x86_64")})
        os.chmod(self.emulator, 0o755)
        self.hosts = [Host(self, i) for i in range(hosts)]
        self.domains = {}            # name -> its serial log

    def describe(self):
        return ("%d hosts, %s domains%s" % (
            len(self.hosts), "KVM" if self.virt == "kvm" else "TCG",
            " (%s)" % self.why_tcg if self.why_tcg else ""))

    @staticmethod
    def sweep(tmp=None):
        """Removes rig directories whose process is gone."""
        tmp = tmp or tempfile.gettempdir()
        for d in os.listdir(tmp):
            m = re.match(re.escape(PREFIX) + r"(\d+)-", d)
            if m and not os.path.exists("/proc/%s" % m.group(1)):
                shutil.rmtree(os.path.join(tmp, d), ignore_errors=True)

    def host(self, name):
        for h in self.hosts:
            if h.name == name:
                return h
        raise KeyError(name)

    def start(self, bridge=True, bridge_args=()):
        for h in self.hosts:
            h.start()
        for h in self.hosts:
            h.start_libvirtd()
        if bridge:
            exe = os.path.join(self.build, "sysidle-libvirt")
            for h in self.hosts:
                h.start_bridge(exe, bridge_args)

    def create_domain(self, host, name, vcpus=2, mib=128, persistent=True,
                      cmdline="hz=0"):
        serial = os.path.join(self.dir, "serial", name + ".log")
        self.domains[name] = serial
        xml = domain_xml(name, self.kernel, self.virt, vcpus, mib, serial,
                         cmdline, self.emulator)
        conn = host.conn()
        if persistent:
            dom = conn.defineXML(xml)
            dom.create()
        else:
            dom = conn.createXML(xml, 0)
        return dom

    def serial(self, name):
        return read(self.domains[name])

    def wait_booted(self, name, timeout=BOOT_TIMEOUT_S):
        """True once the domain printed 'idle: N cpus up'."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if re.search(r"idle: \d+ cpus up", self.serial(name)):
                return True
            time.sleep(0.1)
        return False

    def where(self, name, states=None):
        """The hosts where domain @name is active (libvirt state in
        @states, default any active state), by name."""
        import libvirt
        out = []
        for h in self.hosts:
            if h.frozen:
                continue
            try:
                d = h.conn().lookupByName(name)
                if d.isActive() and (states is None or
                                     d.state()[0] in states):
                    out.append(h.name)
            except libvirt.libvirtError:
                pass
        return out

    def defined(self, name):
        """The hosts holding a persistent definition of @name."""
        import libvirt
        out = []
        for h in self.hosts:
            if h.frozen:
                continue
            try:
                if h.conn().lookupByName(name).isPersistent():
                    out.append(h.name)
            except libvirt.libvirtError:
                pass
        return out

    def migrate(self, name, dst):
        """Live-migrates domain @name to host @dst (peer to peer, its
        definition with it), as an operator would with virsh migrate
        --live --p2p --persistent --undefinesource."""
        import libvirt
        src = self.where(name)
        if src == [dst.name]:
            return
        dom = self.host(src[0]).conn().lookupByName(name)
        flags = libvirt.VIR_MIGRATE_LIVE | libvirt.VIR_MIGRATE_PEER2PEER
        if dom.isPersistent():
            flags |= libvirt.VIR_MIGRATE_PERSIST_DEST | \
                libvirt.VIR_MIGRATE_UNDEFINE_SOURCE
        dom.migrateToURI3(dst.uri, {libvirt.VIR_MIGRATE_PARAM_URI:
                                    MIGRATE_URI}, flags)

    def pty(self, name):
        """The path of domain @name's serial pty where it runs now, or
        None."""
        for hn in self.where(name):
            xml = self.host(hn).conn().lookupByName(name).XMLDesc(0)
            m = re.search(r"<serial type=.pty.>\s*<source path=.([^'\"]+)",
                          xml)
            if m:
                return m.group(1)
        return None

    def busy(self, names, period=0.03):
        """A Busy that keeps domains @names out of full idle: a byte on
        each one's serial console every @period s (idle.elf reports each
        serial interrupt), following them when they migrate."""
        return Busy(self, names, period)

    def usage(self):
        """{global pid: (host, comm, context switches)} of every process
        of every host."""
        out = {}
        for h in self.hosts:
            for p in h.pids():
                out[p] = (h.name, comm(p), ctx_switches(p))
        return out

    def install_hook(self, hooks_dir):
        """HOOKS_DIR/host: the rig's standby hook (standby_hook.py) for
        this fleet; calls are logged in hooks_log()."""
        os.makedirs(hooks_dir, exist_ok=True)
        path = os.path.join(hooks_dir, "host")
        with open(path, "w") as f:
            f.write("#!/bin/sh\nexec %s %s %s \"$@\"\n" % (
                PY, os.path.join(HERE, "standby_hook.py"), self.dir))
        os.chmod(path, 0o755)
        return path

    def hooks_log(self):
        """The rig hook's calls: [{"argv": [...], "stdin": ..., "unix_ms"}]."""
        return [json.loads(ln) for ln in
                read(os.path.join(self.dir, "hooks.log")).splitlines() if ln]

    def teardown(self):
        """Whatever happened: the domains destroyed, the hosts stopped, the
        directory removed. Returns what had to be killed with SIGKILL."""
        import libvirt
        killed = []
        for h in self.hosts:
            if h.proc is None or h.proc.poll() is not None:
                continue
            h.thaw()
            try:
                for d in h.conn().listAllDomains():
                    if d.isActive():
                        d.destroy()
                    if d.isPersistent():
                        d.undefine()
            except (libvirt.libvirtError, RigError):
                pass
        for h in self.hosts:
            killed += h.stop()
        shutil.rmtree(self.dir, ignore_errors=True)
        return killed


def main():
    import argparse
    ap = argparse.ArgumentParser(description="Start a fleet of libvirt "
                                 "hosts on this machine, by hand.")
    ap.add_argument("build", help="the build directory (idle.elf, "
                    "sysidle-libvirt)")
    ap.add_argument("--hosts", type=int, default=2)
    ap.add_argument("--domains", type=int, default=1,
                    help="idle domains per host")
    ap.add_argument("--tcg", action="store_true",
                    help="TCG domains even where KVM works")
    args = ap.parse_args()
    fleet = Fleet(args.hosts, args.build, "qemu" if args.tcg else None)
    signal.signal(signal.SIGTERM, lambda s, f: sys.exit(1))
    try:
        fleet.start()
        print("fleet: %s in %s" % (fleet.describe(), fleet.dir))
        for h in fleet.hosts:
            for i in range(args.domains):
                fleet.create_domain(h, "%s-vm%d" % (h.name, i + 1))
            print("%s %s (migration URI %s)" % (h.name, h.uri, MIGRATE_URI))
        sys.stdout.flush()
        input("Enter stops the fleet\n")
    except (KeyboardInterrupt, EOFError):
        pass
    finally:
        killed = fleet.teardown()
        if killed:
            print("killed: " + ", ".join(killed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
