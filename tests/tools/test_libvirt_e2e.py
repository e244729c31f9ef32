#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""End to end with a real libvirtd: this project's idle.elf booted as a
transient QEMU/KVM domain, its vCPU statistics, build/sysidle-libvirt
publishing FULL_NOTED into the domain's metadata, and
tools/sysidle-consolidate --libvirt packing its vCPUs.

The test starts its own libvirtd (root only), private from the system's:
in a mount namespace of its own (unshare -m), /etc, /run and /var are
overlays whose upper layers are in a temporary directory, so whatever
libvirtd and QEMU write there (/etc/libvirt/qemu.conf: QEMU as root, no
security driver, no cgroups, no namespaces, stdio to files; the QEMU user
and group libvirtd is built with, added to passwd and group where the
distribution did not create them; /run/libvirt, /var/lib/libvirt,
/var/cache/libvirt, /var/log/libvirt) never reaches the host's files, and
two runs do not meet. Its sockets are in the temporary directory, reached
as qemu:///system?socket=PATH. libvirtd runs in the foreground and is
stopped by its PID (SIGTERM, SIGKILL after 10 s); the domain is
destroyed, a QEMU left over is killed by the PID in its pidfile, the
temporary directory removed, even on failure.

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
Then both as daemons on the domain, its pinning first set by the test
(vCPU 0 on the first CPU, the others on all, the emulator thread on the
first: --once left them packed) and its metadata removed (--once left it):
tools/sysidle-consolidate --libvirt URI --policy pack,suspend --idle-cpus
IDLE --suspend-after 1s --suspend-max 3s --interval 100ms --verbose,
following the domain before build/sysidle-libvirt --libvirt URI
--interval 100 starts. States are polled, each with a deadline; each
check's line has the times measured:
  6. the bridge daemon brings the metadata to FULL_NOTED
  7. the consolidator pins every vCPU and the emulator thread to the idle
     CPU (vcpuPinInfo, emulatorPinInfo), "pack NAME: ..." logged
  8. it pauses the domain (VIR_DOMAIN_PAUSED) --suspend-after after the
     since_unix_ms of its FULL_NOTED, "suspend NAME: paused ..." logged
  9. while it is paused, the metadata read every 0.25 s stays that
     FULL_NOTED (the bridge keeps a paused domain's state)
 10. it resumes the domain --suspend-max after the pause, "resume NAME:
     after ... (--suspend-max 3.0)" logged
 11. it pauses it again, --suspend-after after the later of the resume
     and the domain's FULL_NOTED again
 12. SIGTERM to the consolidator: exit 0, the domain running, its pinning
     as the test set it
 13. SIGTERM to the bridge: exit 0, the metadata element removed
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
import signal
import subprocess
import sys
import tempfile
import time
import traceback

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                ".."))
import tap  # noqa: E402
from tap import check, skip  # noqa: E402

SKIP = 77
NS = "urn:sysidle:1"
# sysidle-consolidate's log prefix, "2026-12-04T17:30:00.123Z INFO "
LOGP = r"^\S+ [A-Z]+ "
BOOT_TIMEOUT_S = 120
START_TIMEOUT_S = 60
STOP_TIMEOUT_S = 10
TOOL_TIMEOUT_S = 60
DAEMON_S = 10
# the daemons' steps: --suspend-after and --suspend-max of the
# consolidator; a time measured against them may be early by EARLY_S
# (milliseconds in since_unix_ms, the polling here) or late by LATE_S (the
# consolidator's --interval, libvirt's calls); the states are polled every
# POLL_S, the metadata of the paused domain read every READ_S
SUSPEND_AFTER_S = 1
SUSPEND_MAX_S = 3
EARLY_S = 0.15
LATE_S = 1.0
# how late the consolidator's own resume at --suspend-max may be by its own
# clock on a loaded host (its --interval, libvirt's calls)
RESUME_LATE_S = 1.5
POLL_S = 0.02
READ_S = 0.25
DAEMON_CHECKS = [
    "daemons: sysidle-libvirt publishes FULL_NOTED",
    "sysidle-consolidate --policy pack,suspend: every vCPU and the emulator "
    "packed onto the idle CPU",
    "the domain is paused --suspend-after its FULL_NOTED",
    "while it is paused its metadata stays FULL_NOTED",
    "the domain is resumed at --suspend-max",
    "the domain is paused again once idle again",
    "sysidle-consolidate SIGTERM: exit 0, the domain running, its pinning "
    "back",
    "sysidle-libvirt SIGTERM: exit 0, the metadata removed",
]
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


def prerequisites(kernel):
    """(the libvirt module, None) when a private libvirtd with a QEMU/KVM
    domain booting @kernel can run here; else (None, why not)."""
    if os.geteuid() != 0:
        return None, "not root: a private libvirtd with KVM needs root"
    try:
        os.close(os.open("/dev/kvm", os.O_RDWR))
    except OSError as e:
        return None, "/dev/kvm is not usable (%s)" % e
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
    return """<domain type='kvm'>
  <name>%s</name>
  <memory unit='MiB'>128</memory>
  <vcpu placement='static'>%d</vcpu>
  <os>
    <type arch='x86_64' machine='pc'>hvm</type>
    <kernel>%s</kernel>
    <cmdline>hz=0</cmdline>
  </os>
  <cpu mode='host-passthrough' check='none' migratable='off'>
    <feature policy='disable' name='arch-capabilities'/>
  </cpu>
  <clock offset='utc'/>
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
""" % (name, cpus, kernel, shutil.which("qemu-system-x86_64"), serial)


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


def daemons(libvirt, lv, conn, tmp, dom, name, bridge, consolidate, helpers,
            host):
    """Steps 6-13: sysidle-libvirt and sysidle-consolidate --policy
    pack,suspend as daemons on the domain, DAEMON_CHECKS in that order."""
    live = libvirt.VIR_DOMAIN_AFFECT_LIVE
    paused, running = libvirt.VIR_DOMAIN_PAUSED, libvirt.VIR_DOMAIN_RUNNING
    idle = host[-1]
    todo = list(DAEMON_CHECKS)

    def done(ok, times, detail=""):
        return check(ok, todo.pop(0) + " (%s)" % times, detail)

    def skip_to_stop(why):
        # the checks before the two stops, which always run
        while todo and todo[0] != DAEMON_CHECKS[-2]:
            skip(todo.pop(0), why)

    def state():
        try:
            return dom.state()[0]
        except libvirt.libvirtError:
            return None

    # When a pause or a resume happened is known only between two looks:
    # after the start of the last look that did not see it, before the
    # end of the first that did. A lower bound on a duration is checked on
    # its longest reading, an upper bound on its shortest, so that a
    # loaded host slowing these looks (a libvirt call each) fails neither.
    seen = {"other": None}  # wall time: start of the last look not @want

    def state_is(want):
        t = time.time()
        st = state()
        if st != want:
            seen["other"] = t
        return st == want

    # Step 5's --once left the domain packed (it undoes nothing), and the
    # metadata that --once (or the test) wrote stays with its old
    # since_unix_ms, which would have the consolidator pause the domain at
    # once. So: a pinning of the test's own, which the pack changes and
    # the restore must give back exactly, and no metadata, so that the
    # consolidator sees the bridge's states as they come.
    nhost = conn.getCPUMap()[0]

    def mask(cs):
        return tuple(i in cs for i in range(nhost))
    nvcpu = len(dom.vcpuPinInfo(live))
    for i in range(nvcpu):
        dom.pinVcpuFlags(i, mask({host[0]} if i == 0 else set(host)), live)
    dom.pinEmulator(mask({host[0]}), live)
    pin0 = pinning(libvirt, dom)
    packed = ([[idle]] * nvcpu, [idle])
    diag("pinning before the daemons: " + fmt_pin(pin0))
    try:
        dom.setMetadata(libvirt.VIR_DOMAIN_METADATA_ELEMENT, None, None, NS,
                        live)
    except libvirt.libvirtError as e:
        diag("removing the metadata: %s" % e)

    clog = os.path.join(tmp, "consolidate-daemon.log")
    blog = os.path.join(tmp, "bridge-daemon.log")
    novmm = os.path.join(tmp, "no-vmm")
    os.makedirs(novmm, exist_ok=True)

    def logs():
        return "sysidle-consolidate:\n%s\nsysidle-libvirt:\n%s" % (
            read(clog).strip(), read(blog).strip())

    # the consolidator first, following the domain (--verbose says when)
    # before the bridge publishes anything; --dir: an empty directory (no
    # VMM socket of the host); the bridge's --hooks: a missing directory
    # (no hook of the host run)
    t0 = time.monotonic()
    cons = start_daemon(
        [sys.executable, consolidate, "--libvirt", lv.uri, "--dir", novmm,
         "--state-dir", os.path.join(tmp, "consolidate-state"),
         "--pack-after", "0", "--restore-after", "0",
         "--policy", "pack,suspend", "--idle-cpus", str(idle),
         "--suspend-after", "%gs" % SUSPEND_AFTER_S,
         "--suspend-max", "%gs" % SUSPEND_MAX_S, "--interval", "100ms",
         "--verbose"], clog, helpers)
    following = poll_until(
        lambda: cons.poll() is not None or
        ("following domain %s\n" % name) in read(clog), DAEMON_S, POLL_S)
    following = following and cons.poll() is None
    t_follow = time.monotonic() - t0
    t0 = time.monotonic()
    br = start_daemon([bridge, "--libvirt", lv.uri, "--interval", "100",
                       "--hooks", os.path.join(tmp, "no-hooks")], blog,
                      helpers)

    # 6. the bridge publishes FULL_NOTED
    def full_noted():
        ms = metadata_state(libvirt, dom)
        if ms and ms[0] == "FULL_NOTED":
            return ms
        return "exited" if br.poll() is not None else None
    ms = poll_until(full_noted, DAEMON_S, POLL_S) if following else None
    ok = following and isinstance(ms, tuple)
    done(ok, "%.2f s after its start; sysidle-consolidate following the "
         "domain after %.2f s" % (time.monotonic() - t0, t_follow),
         "consolidator %s, bridge %s, metadata %s\n%s" % (
             "following" if following else "exit %s" % cons.poll(),
             "running" if br.poll() is None else "exit %s" % br.poll(),
             ms and ms[1], logs()))
    if not ok:
        skip_to_stop("no FULL_NOTED from the daemons")
    else:
        t_full = since_s(ms[1])
        diag("metadata: " + ms[1].strip())

        # 7. packed: every vCPU and the emulator thread on the idle CPU
        pin = poll_until(lambda: (lambda p: p if p == packed else None)(
            pinning(libvirt, dom)), DAEMON_S, POLL_S)
        t_pack = time.time()
        line = poll_until(lambda: re.search(
            LOGP + r"pack %s: .*$" % re.escape(name), read(clog),
            re.M),
            DAEMON_S if pin else 0, POLL_S)
        done(pin is not None and line is not None,
             "%.2f s after FULL_NOTED: %s; %s" % (
                 t_pack - t_full, fmt_pin(pin or pinning(libvirt, dom)),
                 line.group(0) if line else "no pack line"), logs())

        # 8. paused --suspend-after after its FULL_NOTED
        seen["other"] = None
        ok = poll_until(lambda: state_is(paused),
                        SUSPEND_AFTER_S + LATE_S + DAEMON_S, POLL_S)
        t_pause, t_pause_w = time.monotonic(), time.time()
        # the pause came after this (running at its FULL_NOTED anyway)
        t_pause_lo_w = seen["other"] if seen["other"] is not None else t_full
        ms = metadata_state(libvirt, dom)
        # the FULL_NOTED it was paused in (a later one than t_full if the
        # domain woke in between)
        since = since_s(ms[1]) if ms and ms[0] == "FULL_NOTED" else None
        if ok:
            line = poll_until(lambda: re.search(
                LOGP + r"suspend %s: paused .*$" % re.escape(name),
                read(clog),
                re.M), DAEMON_S, POLL_S)
            dt = t_pause_w - (since or t_full)
            ok = line is not None and since is not None and \
                SUSPEND_AFTER_S - EARLY_S <= dt <= SUSPEND_AFTER_S + LATE_S
            done(ok, "%.2f s after its FULL_NOTED%s, --suspend-after %g; %s"
                 % (dt, "" if since == t_full else
                    " (metadata %s)" % (ms and ms[1]) if since is None else
                    " (a later one, %.2f s after the first)" %
                    (since - t_full), SUSPEND_AFTER_S,
                    line.group(0) if line else "no suspend line"), logs())
        else:
            done(False, "not paused %.1f s after FULL_NOTED: state %s, "
                 "metadata %s" % (t_pause_w - t_full, state(), ms and ms[0]),
                 logs())
            skip_to_stop("the domain was not paused")

    if todo[0] == DAEMON_CHECKS[3]:
        # 9. while paused, the metadata stays; 10. resumed at --suspend-max
        reads = []
        resumed = None
        t_last_paused_w = t_pause_w  # start of the last look seeing it paused
        next_read = time.monotonic()
        end = t_pause + SUSPEND_MAX_S + LATE_S + DAEMON_S
        while time.monotonic() < end:
            t_look_w = time.time()
            st = state()
            if st != paused:
                resumed = time.monotonic()
                resumed_w = time.time()
                break
            t_last_paused_w = t_look_w
            if time.monotonic() >= next_read:
                m = metadata_state(libvirt, dom)
                if state() == paused:
                    reads.append((time.monotonic() - t_pause, m))
                next_read = time.monotonic() + READ_S
            time.sleep(POLL_S)
        t_res_w = time.time()
        kept = [r for r in reads if r[1] and r[1][0] == "FULL_NOTED" and
                since_s(r[1][1]) == since]
        done(len(reads) >= 3 and len(kept) == len(reads),
             "%d of %d reads over %.1f s while paused FULL_NOTED since the "
             "pause's since_unix_ms" % (len(kept), len(reads),
                                        reads[-1][0] if reads else 0),
             "\n".join("%.2f s: %s" % (t, m and m[1]) for t, m in reads) +
             "\n" + logs())
        if resumed is None:
            done(False, "still paused %.1f s after the pause" %
                 (time.monotonic() - t_pause), logs())
            skip_to_stop("the domain was not resumed")
        else:
            # Timed by what the consolidator says it did: "resume NAME:
            # after X s (--suspend-max 3.0)" is its own clock from its pause
            # to its resume, which a loaded host cannot make look early or
            # late through this test's polling (a shortest reading taken
            # from the polling once failed under load). Bounds: not before
            # --suspend-max (EARLY_S for the rounding of X), within
            # RESUME_LATE_S of it (its --interval, libvirt's calls on a
            # loaded host); a resume at --suspend-after fails the first, no
            # resume at all (--suspend-max ignored) gives no line. The
            # polling keeps only the bound load cannot break: its longest
            # reading of the pause is at least --suspend-max.
            line = poll_until(lambda: re.search(
                LOGP + r"resume %s: after ([0-9.]+) s \(--suspend-max "
                r"[0-9.]+\)" % re.escape(name), read(clog), re.M),
                DAEMON_S, POLL_S)
            said = float(line.group(line.lastindex)) if line else None
            dt = resumed - t_pause
            dt_hi = resumed_w - t_pause_lo_w
            ok = st == running and said is not None and \
                SUSPEND_MAX_S - EARLY_S <= said <= \
                SUSPEND_MAX_S + RESUME_LATE_S and \
                SUSPEND_MAX_S - EARLY_S <= dt_hi
            done(ok, "the consolidator: %s s after its pause (bounds "
                 "%g..%g); seen %.2f s after the pause (at most %.2f s), "
                 "--suspend-max %g; %s" % (
                     "-" if said is None else "%g" % said,
                     SUSPEND_MAX_S - EARLY_S, SUSPEND_MAX_S + RESUME_LATE_S,
                     dt, dt_hi, SUSPEND_MAX_S, line.group(0) if line
                     else "no resume line with (--suspend-max ...)"),
                 "state %s\n%s" % (st, logs()))

            # 11. paused again once idle again
            ok = poll_until(lambda: state() == paused,
                            SUSPEND_AFTER_S + LATE_S + DAEMON_S, POLL_S)
            t_p2, t_p2_w = time.monotonic(), time.time()
            ms = metadata_state(libvirt, dom)
            since2 = since_s(ms[1]) if ms else None
            # The consolidator logs its suspend once virDomainSuspend has
            # returned, so its line can come just after the state this
            # test saw: waited for (bounded) before it is counted.

            def suspend_lines():
                return len(re.findall(LOGP + r"suspend %s: paused " %
                                      re.escape(name), read(clog), re.M))
            poll_until(lambda: suspend_lines() >= 2, DAEMON_S, POLL_S)
            n = suspend_lines()
            if ok and since2 is not None:
                ref = max(since2, t_res_w)
                # the resume came after t_last_paused_w: the longest
                # reading of resume -> pause again starts there
                ref_lo = max(since2, t_last_paused_w)
                ok = ms[0] == "FULL_NOTED" and n >= 2 and \
                    t_p2_w - t_last_paused_w >= SUSPEND_AFTER_S - EARLY_S \
                    and SUSPEND_AFTER_S - EARLY_S <= t_p2_w - ref_lo and \
                    t_p2_w - ref <= SUSPEND_AFTER_S + LATE_S
                done(ok, "%.2f s after the resume; FULL_NOTED again %+.2f s "
                     "from the resume; %d suspend lines" % (
                         t_p2 - resumed, since2 - t_res_w, n), logs())
            else:
                done(False, "not paused again %.1f s after the resume: state "
                     "%s, metadata %s" % (t_p2 - resumed, state(),
                                          ms and ms[0]), logs())

    # 12. SIGTERM: the consolidator resumes and restores, exit 0
    t0 = time.monotonic()
    killed = kill_pid(cons.pid, proc=cons)
    dt = time.monotonic() - t0
    st, pin = state(), pinning(libvirt, dom)
    done(not killed and cons.returncode == 0 and st == running and
         pin == pin0, "%s in %.2f s; domain %s; pinning %s" % (
             "killed" if killed else "exit %s" % cons.returncode, dt,
             "running" if st == running else "state %s" % st,
             fmt_pin(pin) + (" (was " + fmt_pin(pin0) + ")"
                             if pin != pin0 else "")), logs())

    # 13. SIGTERM: the bridge removes the metadata, exit 0
    t0 = time.monotonic()
    killed = kill_pid(br.pid, proc=br)
    dt = time.monotonic() - t0
    ms = metadata_state(libvirt, dom)
    done(not killed and br.returncode == 0 and ms is None,
         "%s in %.2f s; metadata %s" % (
             "killed" if killed else "exit %s" % br.returncode, dt,
             "removed" if ms is None else "left: %s" % ms[1].strip()),
         logs())
    diag(logs())


def cpus(mask):
    return [c for c, on in enumerate(mask) if on]


def finish():
    return 1 if tap.failures else 0


if __name__ == "__main__":
    sys.exit(main())
