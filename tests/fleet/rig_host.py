# SPDX-License-Identifier: GPL-2.0-only
"""One host of the test fleet (rig.py's Host): its namespaces through
host_ns.py, its libvirtd and bridge, its faults (freeze, thaw, libvirtd
killed, out of memory); and what the rig's modules share (its constants,
/proc helpers, libvirt's event loop for keepalive)."""
import json
import os
import select
import shutil
import signal
import subprocess
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

    def path(self, p):
        """Absolute path @p as the host's own processes see it: through
        its first process's root, so in its mount namespace and through
        its overlays. A file of the host's /etc, /run or /var is read,
        written or removed only this way: a change made in an overlay's
        upper directory from outside leaves the overlay's cached view
        stale (its next unlink of that name fails with ESTALE)."""
        if self.holder is None:
            raise RigError("%s: not started" % self.name)
        return "/proc/%d/root%s" % (self.holder, p)

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
        """A read-write libvirt connection to the host (kept, opened again
        once the keepalive closed it), with libvirt's keepalive: a call to
        a host that stops answering (its libvirtd stopped) fails within
        KEEPALIVE_S x 4 seconds."""
        import libvirt
        if self._conn is not None and not self._conn.isAlive():
            self.close_conn()       # closed by the keepalive (a freeze)
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
        answers nothing and makes no wake-up. Returns once each of them
        is stopped (a signal is delivered after kill() returns)."""
        pids = self.pids()
        for p in pids:
            try:
                os.kill(p, signal.SIGSTOP)
            except ProcessLookupError:
                pass
        end = time.monotonic() + START_TIMEOUT_S
        while not all(self._state(p) in ("T", "t", "Z", "X", None)
                       for p in pids):
            if time.monotonic() > end:
                raise RigError("%s: SIGSTOP sent, not all of its processes "
                               "stopped in %d s" % (self.name,
                                                    START_TIMEOUT_S))
            time.sleep(0.01)

    @staticmethod
    def _state(pid):
        """A process's state letter (/proc/PID/stat), None once it is
        gone."""
        st = read("/proc/%d/stat" % pid)
        return (st.rsplit(")", 1)[-1].split()[:1] or [None])[0]

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
        return self._state(pid) == "T"

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


