# SPDX-License-Identifier: GPL-2.0-only
"""A fake VMM control socket that speaks the protocol sysidle-consolidate
uses (vmm/export/README.md, "Control socket protocol"): status, pause, resume,
kick, and watch, plain or filtered. Filtered ({"cmd":"watch","edges":
"full_idle","enter_after_ms":P,"leave_after_ms":R}) it replies with
"edges", the times and "full_idle", then sends only the settled edges the
test pushes (full_idle()); @edges False: a VMM that ignores the filter
(plain reply, every state change). Its "threads" are three idle threads
of this process (tids()), its pid this process's."""
import json
import os
import socket
import threading
import time


def now_ms():
    return int(time.time() * 1000)


class EdgeVmm:
    def __init__(self, path, name, edges=True):
        self.path = path
        self.name = name
        self.edges = edges
        self.state = "NOT"
        self.since = now_ms()
        self.idle = False           # the settled edge last sent
        self.paused = False
        self.requests = []          # every request object
        self.watchers = []          # (connection, filtered)
        self.lock = threading.Lock()
        self.stop_ev = threading.Event()
        self.workers = [threading.Thread(target=self.stop_ev.wait,
                                         daemon=True) for _ in range(3)]
        for w in self.workers:
            w.start()
        self.srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.srv.bind(path)
        self.srv.listen(8)
        threading.Thread(target=self.accept, daemon=True).start()

    def tids(self):
        return [w.native_id for w in self.workers]

    def accept(self):
        while True:
            try:
                c, _ = self.srv.accept()
            except OSError:
                return
            threading.Thread(target=self.serve, args=(c,),
                             daemon=True).start()

    @staticmethod
    def send(c, obj):
        try:
            c.sendall((json.dumps(obj) + "\n").encode())
        except OSError:
            pass

    def serve(self, c):
        buf = b""
        while True:
            try:
                d = c.recv(4096)
            except OSError:
                d = b""
            if not d:
                with self.lock:
                    self.watchers = [w for w in self.watchers if w[0] is not c]
                c.close()
                return
            buf += d
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                self.request(c, json.loads(line))

    def request(self, c, req):
        cmd = req.get("cmd")
        with self.lock:
            self.requests.append(req)
        if cmd == "status":
            t = self.tids()
            self.send(c, {"ok": True, "cmd": "status", "vm": {
                "name": self.name, "pid": os.getpid(), "state": self.state,
                "since_unix_ms": self.since, "paused": self.paused,
                "housekeeping_tid": t[2],
                "vcpus": [{"id": 0, "tid": t[0]}, {"id": 1, "tid": t[1]}]}})
        elif cmd == "watch":
            filtered = self.edges and req.get("edges") == "full_idle"
            r = {"ok": True, "cmd": "watch", "state": self.state,
                 "since_unix_ms": self.since, "paused": self.paused}
            if filtered:
                r.update(edges="full_idle",
                         enter_after_ms=req.get("enter_after_ms"),
                         leave_after_ms=req.get("leave_after_ms"),
                         full_idle=self.idle)
            with self.lock:
                self.send(c, r)
                self.watchers.append((c, filtered))
        elif cmd in ("pause", "resume", "kick"):
            self.paused = cmd == "pause"
            self.send(c, {"ok": True, "cmd": cmd, "paused": self.paused})
        else:
            self.send(c, {"ok": False,
                          "error": "unknown command '%s'" % cmd})

    def broadcast(self, obj, filtered):
        with self.lock:
            for c, f in self.watchers:
                if f == filtered:
                    self.send(c, obj)

    def set_state(self, to):
        """A raw state change (sent to plain watchers only)."""
        fr, self.state = self.state, to
        self.since = now_ms()
        self.broadcast({"event": "state", "from": fr, "to": to, "vcpu": -1,
                        "unix_ms": self.since}, False)

    def full_idle(self, idle, since_ms):
        """A settled edge (sent to filtered watchers only): @idle since the
        wall-clock time @since_ms."""
        self.idle = idle
        ev = {"event": "full_idle", "idle": idle, "unix_ms": now_ms(),
              "since_unix_ms": since_ms}
        if not idle:
            ev["state"] = "NOT"
        self.broadcast(ev, True)

    def watch_requests(self):
        return [r for r in self.requests if r.get("cmd") == "watch"]

    def close(self):
        self.srv.close()
        with self.lock:
            for c, _ in self.watchers:
                c.close()
        self.stop_ev.set()
