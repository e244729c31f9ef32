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
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
HOST_NS = os.path.join(HERE, "host_ns.py")
PREFIX = "sysidle-fleet-"
PY = "/usr/bin/python3"
START_TIMEOUT_S = 60
STOP_GRACE_S = 10
BOOT_TIMEOUT_S = 120
# 64 migration ports a host, up to 8 hosts a rig, apart for rigs of
# different processes
PORT_BASE = 40000 + (os.getpid() % 40) * 512
MIGRATE_URI = "tcp://127.0.0.1"


KEEPALIVE_S = 1


class RigError(Exception):
    pass


_loop = []


def event_loop():
    """libvirt's event loop on a thread of its own (once a process): what
    keepalive needs."""
    import libvirt
    if not _loop:
        libvirt.virEventRegisterDefaultImpl()

        def run():
            while True:
                libvirt.virEventRunDefaultImpl()
        t = threading.Thread(target=run, daemon=True, name="libvirt-events")
        t.start()
        _loop.append(t)


def read(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def kvm_usable():
    """None when /dev/kvm can be opened, else why not (a str)."""
    try:
        st = os.stat("/dev/kvm")
    except OSError as e:
        return "/dev/kvm: %s" % e.strerror
    import stat
    if not stat.S_ISCHR(st.st_mode):
        return "/dev/kvm is not a character device"
    try:
        os.close(os.open("/dev/kvm", os.O_RDWR | os.O_CLOEXEC))
    except OSError as e:
        return "/dev/kvm: %s" % e.strerror
    return None


def prerequisites():
    """None when a fleet can run here, else why not."""
    if os.geteuid() != 0:
        return "not root: private libvirt daemons need root"
    for what in ("/usr/sbin/libvirtd", shutil.which("unshare"),
                 shutil.which("setpriv"),
                 shutil.which("qemu-system-x86_64")):
        if not what or not os.access(what, os.X_OK):
            return "%s not installed" % (what or "a program")
    if not os.path.exists(PY):
        return "%s missing" % PY
    r = subprocess.run([PY, "-c", "import libvirt"], capture_output=True)
    if r.returncode:
        return "python3-libvirt missing for %s" % PY
    return None


def ns_of(pid):
    try:
        return os.readlink("/proc/%d/ns/pid" % pid)
    except OSError:
        return None


def ctx_switches(pid):
    """Context switches (voluntary + involuntary) of every thread of @pid,
    0 when it is gone."""
    n = 0
    try:
        tids = os.listdir("/proc/%d/task" % pid)
    except OSError:
        return 0
    for tid in tids:
        for line in read("/proc/%d/task/%s/status" % (pid, tid)).splitlines():
            if line.startswith(("voluntary_ctxt_switches:",
                                "nonvoluntary_ctxt_switches:")):
                n += int(line.split()[1])
    return n


def comm(pid):
    return read("/proc/%d/comm" % pid).strip()


class Host:
    """One host of the fleet (see the module's doc)."""

    def __init__(self, fleet, index):
        self.fleet = fleet
        self.index = index
        self.name = "fleet-h%d" % (index + 1)
        # a UUID libvirt accepts (not one digit repeated), distinct per host
        self.uuid = "5e1d1e00-f1ee-4000-8000-%012x" % (
            (os.getpid() << 8) + index + 1)
        self.dir = os.path.join(fleet.dir, self.name)
        self.sock = os.path.join(self.dir, "sock", "libvirt-sock")
        self.uri = "qemu+unix:///system?socket=%s" % self.sock
        self.port_min = PORT_BASE + index * 64
        self.proc = None            # setpriv -> unshare
        self.holder = None          # the namespace's first process
        self.ns = None
        self.lock = threading.Lock()
        self._conn = None

    # --- the namespace's service manager ----------------------------------
    def request(self, obj, timeout=30):
        """One request to host_ns.py, its answer (a dict)."""
        with self.lock:
            if self.proc is None or self.proc.poll() is not None:
                raise RigError("%s: its host process is gone" % self.name)
            self.proc.stdin.write((json.dumps(obj) + "\n").encode())
            self.proc.stdin.flush()
            return self._answer(timeout)

    def _answer(self, timeout):
        end = time.monotonic() + timeout
        buf = b""
        fd = self.proc.stdout.fileno()
        while not buf.endswith(b"\n"):
            left = end - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise RigError("%s: no answer in %d s" % (self.name, timeout))
            data = os.read(fd, 4096)
            if not data:
                raise RigError("%s: its host process ended (%s)" % (
                    self.name, read(os.path.join(self.dir, "host.log"))
                    [-500:]))
            buf += data
        return json.loads(buf)

    def start(self):
        os.makedirs(self.dir)
        self.hostlog = open(os.path.join(self.dir, "host.log"), "w")
        self.proc = subprocess.Popen(
            ["setpriv", "--pdeathsig", "KILL", "--",
             "unshare", "--pid", "--fork", "--kill-child", "--mount-proc",
             "--mount", "--uts", "--propagation", "private", "--",
             PY, HOST_NS, self.dir, self.name, self.uuid,
             str(self.port_min)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=self.hostlog, start_new_session=True)
        ans = self._answer(START_TIMEOUT_S)
        if not ans.get("ready"):
            raise RigError("%s: %s" % (self.name, ans.get("error", ans)))
        # the first process of the namespace: unshare's child
        end = time.monotonic() + 5
        while self.holder is None and time.monotonic() < end:
            for p in os.listdir("/proc"):
                if p.isdigit() and self._ppid(int(p)) == self.proc.pid:
                    self.holder = int(p)
            time.sleep(0.01)
        if self.holder is None:
            raise RigError("%s: its first process was not found" % self.name)
        self.ns = ns_of(self.holder)
        with open(os.path.join(self.dir, "holder.pid"), "w") as f:
            f.write("%d\n" % self.holder)

    @staticmethod
    def _ppid(pid):
        for line in read("/proc/%d/status" % pid).splitlines():
            if line.startswith("PPid:"):
                return int(line.split()[1])
        return None

    def pids(self):
        """Global PIDs of every process of the host but its first one."""
        if self.ns is None:
            return []
        out = []
        for p in os.listdir("/proc"):
            if p.isdigit() and int(p) != self.holder and \
                    ns_of(int(p)) == self.ns:
                out.append(int(p))
        return out

    # --- libvirtd ---------------------------------------------------------
    def start_libvirtd(self, timeout=START_TIMEOUT_S):
        """Starts the host's libvirtd and waits until it answers."""
        ans = self.request({
            "op": "start", "name": "libvirtd",
            "argv": ["/usr/sbin/libvirtd", "-f",
                     os.path.join(self.dir, "libvirtd.conf"), "-p",
                     os.path.join(self.dir, "libvirtd.pid")],
            "log": os.path.join(self.dir, "libvirtd.log")})
        if "error" in ans:
            raise RigError("%s: libvirtd: %s" % (self.name, ans["error"]))
        self.close_conn()
        import libvirt
        event_loop()
        end = time.monotonic() + timeout
        while True:
            st = self.request({"op": "status", "name": "libvirtd"})
            if not st.get("running"):
                raise RigError("%s: libvirtd exited %s: %s" % (
                    self.name, st.get("exit"),
                    read(os.path.join(self.dir, "libvirtd.log"))[-1500:]))
            if os.path.exists(self.sock):
                try:
                    c = libvirt.open(self.uri)
                    c.setKeepAlive(KEEPALIVE_S, 3)
                    self._conn = c
                    return
                except libvirt.libvirtError:
                    pass
            if time.monotonic() > end:
                raise RigError("%s: libvirtd did not answer in %d s" %
                               (self.name, timeout))
            time.sleep(0.1)

    def libvirtd_pid(self):
        """The global PID of the host's libvirtd, or None."""
        for p in self.pids():
            if comm(p) == "libvirtd":
                return p
        return None

    def kill_libvirtd(self, sig=signal.SIGKILL, wait=True):
        """@sig to the host's libvirtd; with @wait and a deadly signal,
        until it has ended."""
        self.close_conn()
        ans = self.request({"op": "signal", "name": "libvirtd",
                            "sig": int(sig)})
        if wait and sig in (signal.SIGKILL, signal.SIGTERM):
            end = time.monotonic() + STOP_GRACE_S
            while time.monotonic() < end:
                if not self.request({"op": "status",
                                     "name": "libvirtd"}).get("running"):
                    break
                time.sleep(0.05)
        return ans.get("sent")

    def conn(self):
        """A read-write libvirt connection to the host (kept), with
        libvirt's keepalive: a call to a host that stops answering (its
        libvirtd stopped) fails within KEEPALIVE_S x 4 seconds."""
        import libvirt
        if self._conn is None:
            event_loop()
            c = libvirt.open(self.uri)
            c.setKeepAlive(KEEPALIVE_S, 3)
            self._conn = c
        return self._conn

    def close_conn(self):
        if self._conn is not None:
            try:
                self._conn.close()
            except Exception:
                pass
            self._conn = None

    def start_bridge(self, exe, args=()):
        ans = self.request({
            "op": "start", "name": "bridge",
            "argv": [exe, "--libvirt", self.uri, "--source", "proc",
                     "--hooks", os.path.join(self.dir, "no-hooks"),
                     "--metrics-file",
                     os.path.join(self.dir, "bridge.prom")] + list(args),
            "log": os.path.join(self.dir, "bridge.log")})
        if "error" in ans:
            raise RigError("%s: bridge: %s" % (self.name, ans["error"]))

    def out_of_memory(self, on=True):
        """While on, an incoming migration fails here as on a host out of
        memory (the fleet's QEMU wrapper, QEMU_WRAPPER)."""
        path = os.path.join(self.dir, "qemu-oom")
        if on:
            open(path, "w").close()
        elif os.path.exists(path):
            os.unlink(path)

    # --- standby, as the rig's host hook (standby_hook.py) does it ---------
    def freeze(self):
        """Every process of the host stopped (SIGSTOP): a host in standby
        answers nothing and makes no wake-up."""
        for p in self.pids():
            try:
                os.kill(p, signal.SIGSTOP)
            except ProcessLookupError:
                pass

    def thaw(self):
        for p in self.pids():
            try:
                os.kill(p, signal.SIGCONT)
            except ProcessLookupError:
                pass

    @property
    def frozen(self):
        """Its libvirtd is stopped (by freeze() or the rig's hook)."""
        pid = self.libvirtd_pid()
        if pid is None:
            return False
        st = read("/proc/%d/stat" % pid)
        return st.rsplit(")", 1)[-1].split()[:1] == ["T"]

    def stop(self):
        """Stops the host: its services, then every process left, then its
        first process. Returns what had to be killed."""
        killed = []
        self.close_conn()
        if self.proc is None:
            return killed
        if self.proc.poll() is None:
            self.thaw()
            try:
                ans = self.request({"op": "stop", "grace": STOP_GRACE_S},
                                   timeout=STOP_GRACE_S + 20)
                killed += ["%s %s" % (self.name, c)
                           for _, c in ans.get("stopped", [])]
            except (RigError, OSError, ValueError) as e:
                killed.append("%s: %s" % (self.name, e))
            try:
                self.proc.wait(timeout=STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                killed.append("%s unshare %d" % (self.name, self.proc.pid))
                self.proc.wait()
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                f.close()
            except OSError:
                pass
        self.hostlog.close()
        return killed


class Busy(threading.Thread):
    """See Fleet.busy(); stop() ends it. Its output is drained (a pty
    nobody reads would block the guest's serial line)."""

    def __init__(self, fleet, names, period):
        super().__init__(daemon=True, name="busy")
        self.fleet = fleet
        self.names = list(names)
        self.period = period
        self.stopping = threading.Event()
        self.fds = {}           # name -> (pty path, fd)
        self.sent = 0

    def _fd(self, name):
        path = self.fleet.pty(name)
        if path is None:
            return None
        old = self.fds.get(name)
        if old and old[0] == path:
            return old[1]
        if old:
            os.close(old[1])
        fd = os.open(path, os.O_RDWR | os.O_NOCTTY | os.O_NONBLOCK)
        import termios
        import tty
        try:
            tty.setraw(fd)
        except termios.error:
            pass
        self.fds[name] = (path, fd)
        return fd

    def run(self):
        import libvirt
        while not self.stopping.is_set():
            for name in self.names:
                try:
                    fd = self.fds[name][1] if name in self.fds else \
                        self._fd(name)
                    if fd is None:
                        continue
                    os.write(fd, b"x")
                    self.sent += 1
                    while True:
                        os.read(fd, 4096)
                except BlockingIOError:
                    pass
                except (OSError, libvirt.libvirtError, RigError):
                    # it moved (its pty is gone) or is moving: find it again
                    old = self.fds.pop(name, None)
                    if old:
                        os.close(old[1])
            self.stopping.wait(self.period)

    def stop(self):
        self.stopping.set()
        self.join()
        for _, fd in self.fds.values():
            os.close(fd)
        self.fds = {}


QEMU_WRAPPER = """#!/bin/sh
# The fleet's QEMU (the domains' emulator): the machine's, but for an
# incoming migration on a host whose directory holds qemu-oom, which fails
# as QEMU does on a host out of memory (Host.out_of_memory).
if [ -e "%(dir)s/$(hostname)/qemu-oom" ]; then
	case " $* " in *" -incoming "*)
		echo "qemu-system-x86_64: cannot set up guest memory 'pc.ram': Cannot allocate memory" >&2
		exit 1 ;;
	esac
fi
exec %(qemu)s "$@"
"""


def domain_xml(name, kernel, virt, vcpus, mib, serial_log, cmdline="hz=0",
               emulator=None):
    """A domain booting @kernel (idle.elf) as a KVM (@virt "kvm") or TCG
    ("qemu") domain; its serial console a pty, logged to @serial_log (the
    same file wherever the domain runs); @emulator: QEMU's path (default
    the machine's)."""
    cpu = ("<cpu mode='host-passthrough' check='none' migratable='on'>"
           "<feature policy='disable' name='arch-capabilities'/></cpu>"
           if virt == "kvm" else "")
    return """<domain type='%s'>
  <name>%s</name>
  <memory unit='MiB'>%d</memory>
  <vcpu placement='static'>%d</vcpu>
  <os>
    <type arch='x86_64' machine='pc'>hvm</type>
    <kernel>%s</kernel>
    <cmdline>%s</cmdline>
  </os>
  %s
  <clock offset='utc'/>
  <on_poweroff>destroy</on_poweroff>
  <on_reboot>destroy</on_reboot>
  <on_crash>destroy</on_crash>
  <devices>
    <emulator>%s</emulator>
    <controller type='usb' model='none'/>
    <serial type='pty'><log file='%s' append='on'/><target port='0'/></serial>
    <video><model type='none'/></video>
    <memballoon model='none'/>
  </devices>
</domain>
""" % (virt, name, mib, vcpus, kernel, cmdline, cpu,
       emulator or shutil.which("qemu-system-x86_64"), serial_log)


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
