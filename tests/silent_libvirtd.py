# SPDX-License-Identifier: GPL-2.0-only
"""A libvirtd that hangs: a UNIX socket that takes libvirt's connection and
its first call and never answers, so the client waits in that call for
good. For the tests of a bounded stop (libvirt-bridge-stop,
consolidate-libvirt-cli): its URI is qemu+unix:///system?socket=PATH."""
import socket
import threading


class SilentLibvirtd:
    def __init__(self, path):
        self.uri = "qemu+unix:///system?socket=" + path
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.bind(path)
        self.sock.listen(4)
        self.conns, self.got = [], 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(c)
            try:
                self.got += len(c.recv(65536))
            except OSError:
                pass

    def asked(self):
        """A client connected and sent its first call."""
        return self.got > 0

    def close(self):
        for c in self.conns:
            c.close()
        self.sock.close()
