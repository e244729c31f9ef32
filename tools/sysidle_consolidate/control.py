# SPDX-License-Identifier: GPL-2.0-only
"""The client of this project's VMM control socket: the one place in this
package that opens the socket and reads its lines (Unix stream, one JSON
object per line; the protocol is in vmm/export/README.md, "Control socket
protocol").

request() / status() / command(): one request on a connection of its own
(status, pause, resume). Watch: a connection that sent {"cmd":"watch"}
(or the filtered watch, watch_request()) and then carries event lines; open_watch() connects it (non-blocking
afterwards) and Watch.read() returns the objects of the complete lines
received so far.

Bounds: a line the VMM sends (a reply, an event) has at most MAX_LINE
bytes; a longer one, or a peer that sends bytes without a newline past
that, ends the request (ValueError) or the watch (Closed) with the socket
and the line number named, and the bytes kept never exceed MAX_LINE plus
one read. A request has a deadline (@timeout) however the peer drips."""
import errno
import json
import os
import socket
import struct
import time

REQUEST_TIMEOUT_S = 2.0
MAX_LINE = 1 << 20   # the longest line read from the socket (as sysidlectl)
RECV_SIZE = 65536


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
        buf = bytearray()
        end = time.monotonic() + timeout
        while b"\n" not in buf:
            if len(buf) > MAX_LINE:
                raise ValueError("%s: line 1 (the reply): longer than %d "
                                 "bytes" % (path, MAX_LINE))
            left = end - time.monotonic()
            if left <= 0:
                raise OSError(errno.ETIMEDOUT, "no reply")
            s.settimeout(left)
            d = s.recv(RECV_SIZE)
            if not d:
                raise OSError(errno.ECONNRESET, "closed before the reply")
            buf += d
        line = bytes(buf.split(b"\n", 1)[0])
        if len(line) > MAX_LINE:
            raise ValueError("%s: line 1 (the reply): longer than %d bytes" %
                             (path, MAX_LINE))
        r = json.loads(line)
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

    def __init__(self, sock, path="the socket"):
        self.sock = sock
        self.path = path
        self.buf = bytearray()  # the partial line after the last newline
        self.lines = 0      # complete lines read

    def fileno(self):
        return self.sock.fileno()

    def peer_pid(self):
        return peer_pid(self.sock)

    def close(self):
        self.sock.close()

    def read(self):
        """What arrived: [(object, or None for a line that is not JSON,
        the line)] for the complete lines; [] when nothing is there yet.
        Raises Closed when the VMM closed the connection or it failed, or
        a line is longer than MAX_LINE bytes."""
        try:
            d = self.sock.recv(RECV_SIZE)
        except BlockingIOError:
            return []
        except OSError as e:
            raise Closed("connection error: %s" % e)
        if not d:
            raise Closed("the VMM closed its socket")
        out = []
        if b"\n" in d:
            # the pending partial line is copied only when a line ends
            lines = (bytes(self.buf) + d).split(b"\n")
            self.buf = bytearray(lines.pop())
        else:
            lines = []
            self.buf += d
        for i, line in enumerate(lines + [self.buf]):
            if len(line) > MAX_LINE:
                raise Closed("%s: line %d: longer than %d bytes" %
                             (self.path, self.lines + i + 1, MAX_LINE))
        for line in lines:
            self.lines += 1
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except ValueError:
                obj = None
            out.append((obj, line))
        return out


def watch_request(enter_after_ms=None, leave_after_ms=None):
    """The watch request line: plain, or (both given) the filtered watch
    that asks for settled full-idle edges only: {"event":"full_idle",
    "idle":true} once the VM has been FULL_NOTED for @enter_after_ms,
    "idle":false once it has been out of it for @leave_after_ms. A VMM
    without the filter ignores the extra fields (its reply has no
    "edges") and sends every state change."""
    if enter_after_ms is None or leave_after_ms is None:
        return b'{"cmd":"watch"}\n'
    return _line({"cmd": "watch", "edges": "full_idle",
                  "enter_after_ms": int(enter_after_ms),
                  "leave_after_ms": int(leave_after_ms)})


def open_watch(path, timeout=REQUEST_TIMEOUT_S, enter_after_ms=None,
               leave_after_ms=None):
    """A Watch on @path (filtered when both times are given, see
    watch_request), or raises OSError."""
    s = _connect(path, timeout)
    try:
        s.sendall(watch_request(enter_after_ms, leave_after_ms))
        s.setblocking(False)
    except OSError:
        s.close()
        raise
    return Watch(s, path)
