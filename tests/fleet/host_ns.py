#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-only
"""One host of the test fleet: the first process (PID 1) of a PID, mount
and UTS namespace of its own, started by rig.py as

  setpriv --pdeathsig KILL -- unshare --pid --fork --kill-child
      --mount-proc --mount --uts --propagation private --
      /usr/bin/python3 host_ns.py HOSTDIR NAME HOST_UUID PORT_MIN

What makes it a host of its own to libvirt: its host name (sethostname in
its UTS namespace, also in its /etc/hosts as 127.0.0.1), its host_uuid
(libvirtd.conf), its libvirtd socket (HOSTDIR/sock), its migration ports
(qemu.conf migration_port_min..+63), and its own /etc, /run and /var:
overlays whose upper layers are HOSTDIR/ovl/{etc,run,var}/upper, so that
what its libvirtd and QEMUs write never reaches the machine's files nor
another host's. QEMU runs as root without security driver, cgroups or
namespaces (qemu.conf). The PID namespace is what makes the teardown
certain: when this process ends, however (its parent gone: the
pdeathsig chain setpriv -> unshare --kill-child; a SIGKILL), the kernel
kills every process of the host, QEMUs that libvirtd daemonized included,
and its mounts go with its mount namespace.

As PID 1 it reaps every orphan (a daemonized QEMU's parent is this
process), and it is the host's service manager: one JSON request per line
on stdin, one JSON answer per line on stdout.

  {"op": "start", "name": N, "argv": [...], "log": PATH, "env": {...}}
        start service N (stdout and stderr to PATH): {"pid": P}
  {"op": "signal", "name": N, "sig": S}    {"sent": true|false}
  {"op": "status", "name": N}
        {"running": bool, "pid": P, "exit": STATUS or null}
  {"op": "pids"}        every other process of the host: {"pids": [[P,
                        COMM], ...]} (namespace PIDs)
  {"op": "stop", "grace": S}
        SIGTERM to every service, up to S seconds for them to end, then
        SIGKILL to every process of the host; answers {"stopped": [...]}
        (what had to be killed) and exits 0

Bad requests get {"error": "..."}. End of file on stdin (the rig's process
is gone) is a stop with no grace. The first line written is {"ready":
true, "hostname": NAME} once the host is set up, or {"error": "..."} and
exit 1."""
import json
import os
import select
import signal
import socket
import sys
import time

QEMU_CONF = """user = "root"
group = "root"
dynamic_ownership = 0
remember_owner = 0
security_driver = "none"
cgroup_controllers = [ ]
namespaces = [ ]
stdio_handler = "file"
migration_port_min = %d
migration_port_max = %d
"""
# the QEMU user and group libvirtd resolves before it reads qemu.conf (a
# distribution's libvirt-daemon-system creates them), added where missing
QEMU_IDS = {"libvirt-qemu": 64055, "kvm": 64056}
OVERLAID = ["etc", "run", "var"]
PORTS = 64


def reply(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def mount_overlays(hostdir):
    import subprocess
    for top in OVERLAID:
        up, work = (os.path.join(hostdir, "ovl", top, d)
                    for d in ("upper", "work"))
        os.makedirs(up, exist_ok=True)
        os.makedirs(work, exist_ok=True)
        subprocess.run(["mount", "-t", "overlay", "overlay", "-o",
                        "lowerdir=/%s,upperdir=%s,workdir=%s" %
                        (top, up, work), "/" + top], check=True,
                       stdin=subprocess.DEVNULL)


def append_missing(path, line):
    """Adds line(name, id) to /etc/passwd or /etc/group for each of
    QEMU_IDS that it does not name yet."""
    try:
        with open(path) as f:
            have = {ln.split(":", 1)[0] for ln in f}
    except OSError:
        have = set()
    with open(path, "a") as f:
        for n, i in QEMU_IDS.items():
            if n not in have:
                f.write(line(n, i))


def setup(hostdir, name, host_uuid, port_min):
    mount_overlays(hostdir)
    socket.sethostname(name)
    with open("/etc/hosts", "a") as f:
        f.write("127.0.0.1 %s\n" % name)
    os.makedirs("/etc/libvirt", exist_ok=True)
    with open("/etc/libvirt/qemu.conf", "w") as f:
        f.write(QEMU_CONF % (port_min, port_min + PORTS - 1))
    append_missing("/etc/passwd", lambda n, i:
                   "%s:x:%d:%d::/nonexistent:/bin/false\n" % (n, i, i))
    append_missing("/etc/group", lambda n, i: "%s:x:%d:\n" % (n, i))
    sock = os.path.join(hostdir, "sock")
    os.makedirs(sock, mode=0o700, exist_ok=True)
    with open(os.path.join(hostdir, "libvirtd.conf"), "w") as f:
        f.write('unix_sock_dir = "%s"\n' % sock)
        f.write('unix_sock_rw_perms = "0700"\n')
        f.write('auth_unix_rw = "none"\nauth_unix_ro = "none"\n')
        f.write('log_outputs = "3:stderr"\n')
        f.write('host_uuid = "%s"\n' % host_uuid)


class Services:
    def __init__(self):
        self.procs = {}         # name -> pid
        self.exits = {}         # pid -> wait status

    def start(self, req):
        name = req["name"]
        pid = self.procs.get(name)
        if pid is not None and pid not in self.exits:
            return {"error": "%s is running (pid %d)" % (name, pid)}
        env = dict(os.environ)
        env.update(req.get("env") or {})
        log = os.open(req.get("log") or "/dev/null",
                      os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        pid = os.fork()
        if pid == 0:
            try:
                os.setsid()
                os.dup2(os.open("/dev/null", os.O_RDONLY), 0)
                os.dup2(log, 1)
                os.dup2(log, 2)
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                os.execvpe(req["argv"][0], req["argv"], env)
            except BaseException as e:
                os.write(2, ("host_ns: cannot start %s: %s\n" %
                             (req["argv"][0], e)).encode())
            os._exit(127)
        os.close(log)
        self.procs[name] = pid
        return {"pid": pid}

    def reap(self):
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            self.exits[pid] = status

    def status(self, name):
        pid = self.procs.get(name)
        if pid is None:
            return {"error": "no service %s" % name}
        self.reap()
        st = self.exits.get(pid)
        return {"running": st is None, "pid": pid,
                "exit": None if st is None else os.waitstatus_to_exitcode(st)}

    def signal(self, name, sig):
        pid = self.procs.get(name)
        if pid is None or pid in self.exits:
            return {"sent": False}
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return {"sent": False}
        return {"sent": True}

    @staticmethod
    def others():
        out = []
        me = os.getpid()
        for d in os.listdir("/proc"):
            if not d.isdigit() or int(d) == me:
                continue
            try:
                with open("/proc/%s/comm" % d) as f:
                    out.append([int(d), f.read().strip()])
            except OSError:
                pass
        return out

    def stop(self, grace):
        for name, pid in self.procs.items():
            if pid not in self.exits:
                try:
                    os.kill(pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        end = time.monotonic() + grace
        while time.monotonic() < end:
            self.reap()
            if all(p in self.exits for p in self.procs.values()):
                break
            time.sleep(0.05)
        killed = []
        for _ in range(100):
            self.reap()
            left = self.others()
            if not left:
                break
            for pid, comm in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                    if [pid, comm] not in killed:
                        killed.append([pid, comm])
                except ProcessLookupError:
                    pass
            time.sleep(0.05)
        return killed


def serve(services):
    rd, wr = os.pipe()
    os.set_blocking(wr, False)
    signal.set_wakeup_fd(wr)
    signal.signal(signal.SIGCHLD, lambda s, f: None)
    # as PID 1 this process gets no signal it has no handler for
    signal.signal(signal.SIGTERM, lambda s, f: None)
    buf = b""
    while True:
        try:
            ready, _, _ = select.select([0, rd], [], [])
        except InterruptedError:
            continue
        if rd in ready:
            try:
                os.read(rd, 4096)
            except BlockingIOError:
                pass
            services.reap()
        if 0 not in ready:
            continue
        data = os.read(0, 65536)
        if not data:
            services.stop(0)
            return
        buf += data
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            try:
                req = json.loads(line)
                op = req["op"]
                if op == "start":
                    ans = services.start(req)
                elif op == "signal":
                    ans = services.signal(req["name"], int(req["sig"]))
                elif op == "status":
                    ans = services.status(req["name"])
                elif op == "pids":
                    ans = {"pids": services.others()}
                elif op == "stop":
                    reply({"stopped": services.stop(
                        float(req.get("grace", 10)))})
                    return
                else:
                    ans = {"error": "unknown op %r" % op}
            except (ValueError, KeyError, TypeError, OSError) as e:
                ans = {"error": "%s: %s" % (type(e).__name__, e)}
            reply(ans)


def main():
    if len(sys.argv) != 5 or os.getpid() != 1:
        sys.stderr.write(__doc__)
        return 2
    hostdir, name, host_uuid, port_min = sys.argv[1:5]
    try:
        setup(hostdir, name, host_uuid, int(port_min))
    except Exception as e:
        reply({"error": "host setup: %s" % e})
        return 1
    reply({"ready": True, "hostname": socket.gethostname()})
    serve(Services())
    return 0


if __name__ == "__main__":
    sys.exit(main())
