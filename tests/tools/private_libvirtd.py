#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""A private libvirtd for the tests and benchmarks that need a real one
(test_libvirt_e2e.py, test_libvirt_fleet.py,
test_consolidate_crash_libvirt.py, bench/libvirt-wakeups.py), and the
QEMU/KVM domain they boot on it.

The libvirtd runs as root, private from the system's: in a mount
namespace of its own (unshare -m), /etc, /run and /var are overlays whose
upper layers are in a temporary directory, so whatever libvirtd and QEMU
write there (/etc/libvirt/qemu.conf: QEMU as root, no security driver, no
cgroups, no namespaces, stdio to files; the QEMU user and group libvirtd
is built with, added to passwd and group where the distribution did not
create them; /run/libvirt, /var/lib/libvirt, /var/cache/libvirt,
/var/log/libvirt) never reaches the host's files, and two runs do not
meet. Its sockets are in the temporary directory, reached as
qemu:///system?socket=PATH. libvirtd runs in the foreground and is
stopped by its PID (SIGTERM, SIGKILL after 10 s); teardown() destroys the
domains, kills a QEMU left over by the PID in its pidfile, even on
failure.

Also: the prerequisites (root, /dev/kvm, libvirtd, QEMU, python3-libvirt),
the domain's XML (idle.elf, host-passthrough CPU without
arch-capabilities), its vCPU statistics, its urn:sysidle:1 metadata and
pinning, and the processes a test runs beside it (run_tool, start_daemon,
kill_pid). A program imports it after putting this directory and the one
above (tap.py) on sys.path."""
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                ".."))
import tap  # noqa: E402

SKIP = 77
NS = "urn:sysidle:1"
BOOT_TIMEOUT_S = 120
START_TIMEOUT_S = 60
STOP_TIMEOUT_S = 10
TOOL_TIMEOUT_S = 60
# overlaid in the namespace: what libvirtd and QEMU write there stays in
# the temporary directory
OVERLAID = ["etc", "run", "var"]
# the QEMU user and group a distribution's libvirtd is built with (Debian's
# libvirt-daemon-system creates them), and ids for them if missing
QEMU_IDS = {"libvirt-qemu": 64055, "kvm": 64056}
QEMU_CONF = """user = "root"
group = "root"
dynamic_ownership = 0
remember_owner = 0
security_driver = "none"
cgroup_controllers = [ ]
namespaces = [ ]
stdio_handler = "file"
"""


def diag(msg):
    for line in str(msg).splitlines():
        print("# " + line)
    sys.stdout.flush()


def skip_all(why):
    print("1..0 # SKIP " + why)
    return SKIP


def read(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def poll_until(fn, timeout, step=0.1):
    end = time.monotonic() + timeout
    while True:
        v = fn()
        if v:
            return v
        if time.monotonic() >= end:
            return None
        time.sleep(step)


def kill_pid(pid, timeout=STOP_TIMEOUT_S, proc=None):
    """SIGTERM to @pid, SIGKILL after @timeout s; reaped when @proc (its
    Popen) is given. True when it had to be killed."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        if proc:
            proc.wait()
        return False
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc is not None:
            if proc.poll() is not None:
                return False
        elif not os.path.exists("/proc/%d" % pid) or \
                "zombie" in read("/proc/%d/status" % pid).lower():
            return False
        time.sleep(0.05)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    if proc:
        proc.wait()
    return True


def run_tool(cmd, timeout=TOOL_TIMEOUT_S):
    """(status or None on a hang, output); a hang is killed by PID."""
    diag("$ " + " ".join(cmd))
    p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True, start_new_session=True)
    try:
        out, _ = p.communicate(timeout=timeout)
        return p.returncode, out
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, _ = p.communicate()
        return None, out


class Libvirtd:
    """A private libvirtd in a mount namespace of its own, /etc, /run and
    /var overlaid there with upper layers in @tmp."""

    def __init__(self, tmp):
        self.tmp = tmp
        self.proc = None
        self.sockdir = os.path.join(tmp, "sock")
        self.uri = "qemu:///system?socket=%s/libvirt-sock" % self.sockdir
        self.log = os.path.join(tmp, "libvirtd.log")
        self.conf = os.path.join(tmp, "conf")
        self.ovl = os.path.join(tmp, "ovl")

    def upper(self, path):
        """Where what the namespace wrote to @path (under /etc, /run or
        /var) is, seen from outside."""
        top, rest = path.strip("/").split("/", 1)
        return os.path.join(self.ovl, top, "upper", rest)

    def start(self):
        os.makedirs(self.sockdir, mode=0o700)
        os.makedirs(self.conf)
        with open(os.path.join(self.conf, "libvirtd.conf"), "w") as f:
            f.write('unix_sock_dir = "%s"\n' % self.sockdir)
            f.write('unix_sock_rw_perms = "0700"\n')
            f.write('auth_unix_rw = "none"\nauth_unix_ro = "none"\n')
            f.write('log_outputs = "3:stderr"\n')
        with open(os.path.join(self.conf, "qemu.conf"), "w") as f:
            f.write(QEMU_CONF)
        # libvirtd resolves its built-in QEMU user and group before it
        # reads qemu.conf: where the distribution's package did not create
        # them, the namespace's passwd and group get them
        for f, line in [("passwd", "%s:x:%d:%d::/nonexistent:/bin/false\n"),
                        ("group", "%s:x:%d:\n")]:
            names = {l.split(":", 1)[0]
                     for l in read("/etc/" + f).splitlines()}
            with open(os.path.join(self.conf, f + ".add"), "w") as fo:
                for n in QEMU_IDS:
                    if n not in names:
                        fo.write(line % ((n, QEMU_IDS[n], QEMU_IDS[n])
                                         if f == "passwd" else
                                         (n, QEMU_IDS[n])))
        script = "set -e\n"
        for top in OVERLAID:
            up, work = (os.path.join(self.ovl, top, d)
                        for d in ("upper", "work"))
            os.makedirs(up)
            os.makedirs(work)
            script += ("mount -t overlay overlay -o lowerdir=/%s,upperdir=%s,"
                       "workdir=%s /%s\n" % (top, up, work, top))
        script += (
            'mkdir -p /etc/libvirt\n'
            'cp "$1/qemu.conf" /etc/libvirt/qemu.conf\n'
            'cat "$1/passwd.add" >> /etc/passwd\n'
            'cat "$1/group.add" >> /etc/group\n'
            'exec /usr/sbin/libvirtd -f "$1/libvirtd.conf" -p "$2"\n')
        self.logf = open(self.log, "w")
        self.proc = subprocess.Popen(
            ["unshare", "--mount", "--propagation", "private", "--",
             "sh", "-c", script, "sh", self.conf,
             os.path.join(self.tmp, "libvirtd.pid")],
            stdin=subprocess.DEVNULL, stdout=self.logf,
            stderr=subprocess.STDOUT, start_new_session=True)

    def connect(self, libvirt):
        """A read-write connection once libvirtd answers on its socket
        (within START_TIMEOUT_S); "exited" when it ended, None when it
        did not answer in time."""
        def attempt():
            if self.proc.poll() is not None:
                return "exited"
            if not os.path.exists(os.path.join(self.sockdir,
                                               "libvirt-sock")):
                return None
            try:
                return libvirt.open(self.uri)
            except libvirt.libvirtError:
                return None
        return poll_until(attempt, START_TIMEOUT_S, 0.2)

    def domain_log(self, name):
        return read(self.upper("/var/log/libvirt/qemu/%s.log" % name))

    def qemu_pids(self):
        """PIDs in the private /run/libvirt/qemu/*.pid that still run
        QEMU."""
        out = []
        d = self.upper("/run/libvirt/qemu")
        try:
            names = os.listdir(d)
        except OSError:
            return out
        for n in names:
            if not n.endswith(".pid"):
                continue
            try:
                pid = int(read(os.path.join(d, n)).strip())
            except ValueError:
                continue
            if "qemu" in read("/proc/%d/cmdline" % pid):
                out.append(pid)
        return out

    def stop(self):
        """libvirtd by its PID, then any QEMU it left; returns a list of
        what had to be killed."""
        killed = []
        qemus = self.qemu_pids()
        if self.proc is not None:
            if kill_pid(self.proc.pid, proc=self.proc):
                killed.append("libvirtd %d" % self.proc.pid)
            self.logf.close()
        for pid in qemus + self.qemu_pids():
            if os.path.exists("/proc/%d" % pid):
                os.kill(pid, signal.SIGKILL)
                killed.append("qemu %d" % pid)
        return killed


# The domains' type: "kvm", or "qemu" (TCG) where /dev/kvm is not usable
# (prerequisites() decides).
VIRT = "kvm"


def prerequisites(kernel):
    """(the libvirt module, None) when a private libvirtd with a QEMU
    domain booting @kernel can run here; else (None, why not). The domain
    is KVM where /dev/kvm is usable, else TCG (VIRT; a comment says so):
    then the KVM statistics the bridge reads are missing, and the steps
    that need them skip."""
    global VIRT
    if os.geteuid() != 0:
        return None, "not root: a private libvirtd needs root"
    try:
        os.close(os.open("/dev/kvm", os.O_RDWR))
    except OSError as e:
        VIRT = "qemu"
        diag("/dev/kvm is not usable (%s): TCG domains" % e)
    for what, path in [("libvirtd", "/usr/sbin/libvirtd"),
                       ("unshare", shutil.which("unshare")),
                       ("qemu-system-x86_64",
                        shutil.which("qemu-system-x86_64"))]:
        if not path or not os.access(path, os.X_OK):
            return None, "%s not installed" % what
    try:
        import libvirt
    except ImportError:
        return None, "python3-libvirt missing for %s" % sys.executable
    if not os.path.exists(kernel):
        return None, "%s not built" % kernel
    return libvirt, None


def _on_term(signum, frame):
    raise KeyboardInterrupt("signal %d" % signum)


def prepare(libvirt, prefix):
    """(a temporary directory named @prefix..., a Libvirtd in it, not
    started yet); SIGTERM from now on raises KeyboardInterrupt (the test's
    cleanup then runs), libvirt's own error printing is quiet (errors are
    raised anyway)."""
    signal.signal(signal.SIGTERM, _on_term)
    libvirt.registerErrorHandler(lambda ctx, err: None, None)
    tmp = tempfile.mkdtemp(prefix=prefix)
    os.chmod(tmp, 0o755)
    return tmp, Libvirtd(tmp)


def teardown(libvirt, lv, conn, helpers, prefix):
    """Whatever happened: stop @helpers (daemons started for the test),
    destroy the domains whose names start with @prefix, close @conn, stop
    @lv; say what had to be killed with SIGKILL. A second SIGTERM (a
    harness's timeout) does not cut it short."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    for p in helpers:
        if p.poll() is None:
            kill_pid(p.pid, proc=p)
    if conn is not None:
        try:
            for d in conn.listAllDomains():
                if d.name().startswith(prefix) and d.isActive():
                    d.destroy()
        except libvirt.libvirtError as e:
            diag("destroy: %s" % e)
        try:
            conn.close()
        except libvirt.libvirtError:
            pass
    killed = lv.stop()
    if killed:
        diag("killed with SIGKILL: " + ", ".join(killed))


def domain_xml(name, kernel, serial, cpus):
    # hz=0: no tick at all, so no halt exit while idle (the bridge has no
    # timekeeper rule: any halt exit is a busy interval)
    cpu = ("<cpu mode='host-passthrough' check='none' migratable='off'>\n"
           "    <feature policy='disable' name='arch-capabilities'/>\n"
           "  </cpu>\n  " if VIRT == "kvm" else "")
    return """<domain type='%s'>
  <name>%s</name>
  <memory unit='MiB'>128</memory>
  <vcpu placement='static'>%d</vcpu>
  <os>
    <type arch='x86_64' machine='pc'>hvm</type>
    <kernel>%s</kernel>
    <cmdline>hz=0</cmdline>
  </os>
  %s<clock offset='utc'/>
  <on_poweroff>destroy</on_poweroff>
  <on_reboot>destroy</on_reboot>
  <on_crash>destroy</on_crash>
  <devices>
    <emulator>%s</emulator>
    <controller type='usb' model='none'/>
    <serial type='file'><source path='%s'/><target port='0'/></serial>
    <video><model type='none'/></video>
    <memballoon model='none'/>
  </devices>
</domain>
""" % (VIRT, name, cpus, kernel, cpu,
       shutil.which("qemu-system-x86_64"), serial)


def vcpu_stats(conn, libvirt, dom):
    """{key: value} of the domain's vcpu.* statistics."""
    res = conn.domainListGetStats([dom], libvirt.VIR_DOMAIN_STATS_VCPU)
    return dict(res[0][1]) if res else {}


def metadata_state(libvirt, dom):
    """(name=, the XML) of <state> in the domain's urn:sysidle:1
    metadata; None when there is none."""
    try:
        xml = dom.metadata(libvirt.VIR_DOMAIN_METADATA_ELEMENT, NS)
    except libvirt.libvirtError:
        return None
    m = re.search(r"""<(?:\w+:)?state\b[^>]*\bname=["']([A-Z_]+)["']""",
                  xml)
    return (m.group(1), xml) if m else (None, xml)


def pinning(libvirt, dom):
    """([CPUs of each vCPU], CPUs of the emulator thread), live."""
    live = libvirt.VIR_DOMAIN_AFFECT_LIVE
    return ([cpus(m) for m in dom.vcpuPinInfo(live)],
            cpus(dom.emulatorPinInfo(live)))


def fmt_cpus(cs):
    """[0, 1, 2, 5] -> "0-2,5" (as sysidle-consolidate writes them)."""
    out = []
    for c in cs:
        if out and out[-1][1] == c - 1:
            out[-1][1] = c
        else:
            out.append([c, c])
    return ",".join(str(a) if a == b else "%d-%d" % (a, b)
                    for a, b in out) or "none"


def fmt_pin(pin):
    return " ".join(["%d:%s" % (i, fmt_cpus(c)) for i, c in enumerate(pin[0])]
                    + ["emulator:" + fmt_cpus(pin[1])])


def since_s(xml):
    """The since_unix_ms of a <state> element, in seconds; None."""
    m = re.search(r"""\bsince_unix_ms=["'](\d+)["']""", xml or "")
    return int(m.group(1)) / 1000.0 if m else None


def start_daemon(cmd, log, helpers):
    """@cmd in a session of its own, stdout and stderr to the file
    @log; in @helpers, so that it is stopped whatever happens."""
    diag("$ " + " ".join(cmd) + " &")
    with open(log, "w") as f:
        p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=f,
                             stderr=subprocess.STDOUT, start_new_session=True)
    helpers.append(p)
    return p


def cpus(mask):
    return [c for c, on in enumerate(mask) if on]


def finish():
    return 1 if tap.failures else 0
