# SPDX-License-Identifier: GPL-2.0-only
"""The client of this project's VMM control socket: the one place in this
package that opens the socket and reads its lines (Unix stream, one JSON
object per line; the protocol is in vmm/README.md, "Control socket
protocol").

request() / status() / command(): one request on a connection of its own
(status, pause, resume). Watch: a connection that sent {"cmd":"watch"}
and then carries event lines; open_watch() connects it (non-blocking
afterwards) and Watch.read() returns the objects of the complete lines
received so far."""
import errno
import json
import os
import socket
import struct
import time

REQUEST_TIMEOUT_S = 2.0


class Refused(Exception):
    """The VMM answered {"ok":false,...}."""


def _line(obj):
    return (json.dumps(obj, separators=(",", ":")) + "\n").encode()


def _connect(path, timeout):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.settimeout(timeout)
        s.connect(path)
    except OSError:
        s.close()
        raise
    return s


def peer_pid(s):
    """The PID of the process at the other end of the Unix socket @s, as
    the kernel knows it (SO_PEERCRED), not as any reply claims it."""
    cred = s.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                        struct.calcsize("3i"))
    return struct.unpack("3i", cred)[0]


def request(path, obj, timeout=REQUEST_TIMEOUT_S):
    """One request on a new connection to @path; the reply object, with
    "_peer_pid": the PID of the process that answered (SO_PEERCRED).
    Raises OSError (no VMM, no reply within @timeout), ValueError (not
    JSON), Refused (ok false)."""
    s = _connect(path, timeout)
    try:
        peer = peer_pid(s)
        s.sendall(_line(obj))
        buf = b""
        end = time.monotonic() + timeout
        while b"\n" not in buf:
            left = end - time.monotonic()
            if left <= 0:
                raise OSError(errno.ETIMEDOUT, "no reply")
            s.settimeout(left)
            d = s.recv(65536)
            if not d:
                raise OSError(errno.ECONNRESET, "closed before the reply")
            buf += d
        r = json.loads(buf.split(b"\n", 1)[0])
        if not isinstance(r, dict):
            raise ValueError("bad reply: %r" % (r,))
        if not r.get("ok"):
            raise Refused(str(r.get("error", r)))
        r["_peer_pid"] = peer
        return r
    finally:
        s.close()


def status(path):
    """The VM's status object, with "_peer_pid" (see request), or raises
    OSError / ValueError / Refused. A status whose "pid" is not the
    socket's peer is refused (ValueError): its thread IDs cannot be
    trusted."""
    r = request(path, {"cmd": "status"})
    vm = r.get("vm")
    if not isinstance(vm, dict):
        raise ValueError("bad status reply: %r" % (r,))
    if "pid" in vm and vm["pid"] != r["_peer_pid"]:
        raise ValueError("the status says pid %r, the socket's peer is pid "
                         "%d" % (vm["pid"], r["_peer_pid"]))
    vm["_peer_pid"] = r["_peer_pid"]
    return vm


def command(path, cmd):
    """{"cmd": @cmd} ("pause", "resume"): the reply object; raises as
    request()."""
    return request(path, {"cmd": cmd})


def vm_tids(vm):
    """The thread ids of a status object: its vCPUs', its housekeeping's;
    only threads of the process that answered (status()'s "_peer_pid"),
    so that no other process's thread is ever pinned."""
    tids = [v.get("tid") for v in vm.get("vcpus", []) if isinstance(v, dict)]
    tids.append(vm.get("housekeeping_tid"))
    tids = [t for t in tids if isinstance(t, int) and t > 0]
    peer = vm.get("_peer_pid")
    if peer is None:
        return tids
    return [t for t in tids
            if os.path.exists("/proc/%d/task/%d" % (peer, t))]


def vm_gone(e):
    """True when the error @e of a request means the VMM is not there."""
    return isinstance(e, OSError) and e.errno in (
        errno.ENOENT, errno.ECONNREFUSED, errno.ENOTDIR)


def socket_name(path):
    """A VM's name from its socket path: NAME.sock -> NAME."""
    name = os.path.basename(path)
    return name[:-5] if name.endswith(".sock") else name


class Closed(Exception):
    """The watch connection is gone; str() says why."""


class Watch:
    """A watch connection: {"cmd":"watch"} sent, its lines read as they
    arrive (.sock is what to select() on)."""

    def __init__(self, sock):
        self.sock = sock
        self.buf = b""

    def fileno(self):
        return self.sock.fileno()

    def close(self):
        self.sock.close()

    def read(self):
        """What arrived: [(object, or None for a line that is not JSON,
        the line)] for the complete lines; [] when nothing is there yet.
        Raises Closed when the VMM closed the connection or it failed."""
        try:
            d = self.sock.recv(65536)
        except BlockingIOError:
            return []
        except OSError as e:
            raise Closed("connection error: %s" % e)
        if not d:
            raise Closed("the VMM closed its socket")
        self.buf += d
        out = []
        while b"\n" in self.buf:
            line, self.buf = self.buf.split(b"\n", 1)
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except ValueError:
                obj = None
            out.append((obj, line))
        return out


def open_watch(path, timeout=REQUEST_TIMEOUT_S):
    """A Watch on @path, or raises OSError."""
    s = _connect(path, timeout)
    try:
        s.sendall(b'{"cmd":"watch"}\n')
        s.setblocking(False)
    except OSError:
        s.close()
        raise
    return Watch(s)
