# SPDX-License-Identifier: GPL-2.0-only
"""A fake VMM control socket for the tests of its clients (sysidlectl,
sysidle-consolidate): it answers the first request line of a connection
with given bytes, then sends a line without end or nothing at all."""
import socket
import threading


class FakeVmm:
    """A unix socket server at @path for one connection: it gets @first
    (bytes) after its first request line, then, when @endless, 64 KiB
    chunks with no newline until the client goes; else nothing (it
    stalls)."""

    def __init__(self, path, first=b"", endless=True):
        self.path, self.first, self.endless = path, first, endless
        self.sent = 0
        self.srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.srv.bind(path)
        self.srv.listen(4)
        self.conns = []
        self.t = threading.Thread(target=self.serve, daemon=True)
        self.t.start()

    def serve(self):
        try:
            c, _ = self.srv.accept()
        except OSError:
            return
        self.conns.append(c)
        try:
            req = b""
            while b"\n" not in req:
                d = c.recv(4096)
                if not d:
                    return
                req += d
            c.sendall(self.first)
            chunk = b"x" * 65536
            while self.endless:
                c.sendall(chunk)
                self.sent += len(chunk)
        except OSError:
            pass        # the client went away

    def close(self):
        self.srv.close()
        for c in self.conns:
            c.close()
        self.t.join(5)
