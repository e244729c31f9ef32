"""The load of a soak run (tools/soak.py) on its VMs, as a part of Soak:
host events at random times from a seeded RNG (serial input, SIGUSR2,
kick, pause and a later resume) and control clients (sysidlectl
status/list/watch and raw socket clients that stay silent, vanish
mid-request or never read), all of which hold still at a quiescent point.
Python 3 standard library only."""
import heapq
import json
import signal
import socket
import subprocess
import time

from soak_vm import POLL


class Load:
    """Soak's workers: events() and client(), run on threads of their own
    by Soak.run."""

    # -- host events: wake-ups, pause and resume ---------------------------
    def events(self, rng):
        heap = []
        for v in self.vms:
            heapq.heappush(heap, (time.monotonic() + rng.expovariate(
                1 / self.o.event_mean), v.idx, "event"))
        while not self.stop.is_set():
            if self.quiet.is_set():
                while self.quiet.is_set() and not self.stop.is_set():
                    time.sleep(POLL)
                continue
            t, idx, what = heap[0]
            delay = t - time.monotonic()
            if delay > 0:
                self.pause_point(min(delay, 0.5))
                continue
            heapq.heappop(heap)
            v = self.vms[idx]
            if what == "event":
                heapq.heappush(heap, (time.monotonic() + rng.expovariate(
                    1 / self.o.event_mean), idx, "event"))
            if v.died is not None or not self.enter():
                continue
            try:
                if what == "resume":
                    if v.pending_resume:
                        v.pending_resume = False
                        self.ctl_expect_ok("host: resume", v, "resume",
                                           v.name)
                    continue
                acts = ["sigusr2", "kick", "pause"]
                if v.kind.startswith("idle"):
                    acts += ["serial", "serial"]
                act = rng.choice(acts)
                if act == "serial":
                    if v.send_input(b"x\n"):
                        self.count("host: serial input")
                elif act == "sigusr2":
                    try:
                        v.p.send_signal(signal.SIGUSR2)
                        self.count("host: SIGUSR2")
                    except ProcessLookupError:
                        pass
                elif act == "kick":
                    self.ctl_expect_ok("host: kick", v, "kick", v.name)
                elif act == "pause":
                    rc, _ = self.ctl_expect_ok("host: pause", v, "pause",
                                               v.name)
                    if rc == 0:
                        v.pending_resume = True
                        heapq.heappush(heap, (time.monotonic() +
                                              rng.uniform(0.05, 5),
                                              idx, "resume"))
            finally:
                self.leave()

    def resume_all(self):
        for v in self.vms:
            if v.pending_resume and v.p.poll() is None:
                v.pending_resume = False
                self.ctl_expect_ok("host: resume", v, "resume", v.name)

    # -- control clients ---------------------------------------------------
    def client(self, rng):
        acts = [("status", 4), ("list", 1), ("watch", 2), ("silent", 1),
                ("half", 1), ("noread", 1), ("raw-status", 2), ("bad", 1),
                ("slow-watch", 1)]
        names = [a for a, w in acts for _ in range(w)]
        while not self.stop.is_set():
            if self.quiet.is_set():
                time.sleep(POLL)
                continue
            if not self.pause_point(rng.uniform(0.1, 2)):
                continue
            live = self.live_vms()
            if not live or not self.enter():
                continue
            try:
                getattr(self, "c_" + rng.choice(names).replace("-", "_"))(
                    rng, rng.choice(live))
            except Exception as e:  # a client's own error: a finding
                self.fail("client error: %r" % (e,))
            finally:
                self.leave()

    def c_status(self, rng, v):
        rc, out = self.ctl_expect_ok("client: sysidlectl status", v,
                                     "--json", "status", v.name)
        if rc == 0:
            try:
                ok = json.loads(out)["name"] == v.name
            except (ValueError, KeyError, TypeError):
                ok = False
            if not ok:
                self.fail("%s: sysidlectl --json status: %r" %
                          (v.name, out[:200]))

    def c_list(self, rng, v):
        rc, out = self.ctl_expect_ok("client: sysidlectl list", v,
                                     "--json", "list")
        if rc != 0:
            return
        seen = {}
        for line in out.splitlines():
            try:
                o = json.loads(line)
                seen[o["name"]] = o
            except (ValueError, KeyError, TypeError):
                self.fail("sysidlectl --json list: bad line %r" % line[:200])
        for w in self.live_vms():
            o = seen.get(w.name)
            if (o is None or o.get("state") == "?") and w.p.poll() is None:
                self.fail("%s: sysidlectl list: %r" % (w.name, o))

    def connect(self, v):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(10)
        s.connect(v.sock)
        return s

    def c_watch(self, rng, v):
        p = subprocess.Popen([self.ctl, "--dir", self.sockdir, "--json",
                              "watch", v.name], stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
        self.pause_point(rng.uniform(0.5, 20))
        vanish = rng.random() < 0.3
        if p.poll() is None:
            p.send_signal(signal.SIGKILL if vanish else signal.SIGTERM)
        try:
            out, err = p.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
            self.fail("%s: sysidlectl watch did not end on SIGTERM" % v.name)
            return
        self.count("client: sysidlectl watch" +
                   (" (killed)" if vanish else ""))
        first = out.split("\n", 1)[0]
        try:
            ok = json.loads(first).get("ok") is True
        except (ValueError, AttributeError):
            ok = False
        if not ok and v.p.poll() is None:
            self.fail("%s: sysidlectl watch: first line %r, status %s: %s" %
                      (v.name, first[:200], p.returncode, err.strip()[-200:]))
        elif not vanish and p.returncode != 143:
            self.fail("%s: sysidlectl watch: status %s on SIGTERM" %
                      (v.name, p.returncode))

    def c_slow_watch(self, rng, v):
        """A watcher that never reads (a small receive buffer)."""
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
        s.settimeout(10)
        s.connect(v.sock)
        s.sendall(b'{"cmd":"watch"}\n')
        self.pause_point(rng.uniform(1, 20))
        s.close()
        self.count("client: watch, never read")

    def c_silent(self, rng, v):
        s = self.connect(v)
        wait = rng.uniform(0, 13)
        self.pause_point(wait)
        s.close()
        self.count("client: silent" + (" > 10 s" if wait > 10 else ""))

    def c_half(self, rng, v):
        s = self.connect(v)
        s.sendall(b'{"cmd":"sta')
        s.close()
        self.count("client: half a request, gone")

    def c_noread(self, rng, v):
        s = self.connect(v)
        s.sendall(rng.choice([b'{"cmd":"status"}\n', b'{"cmd":"watch"}\n']))
        s.close()
        self.count("client: request, gone before the reply")

    def raw_request(self, v, data):
        s = self.connect(v)
        try:
            s.sendall(data)
            buf = b""
            while b"\n" not in buf:
                d = s.recv(65536)
                if not d:
                    break
                buf += d
        finally:
            s.close()
        return json.loads(buf.split(b"\n", 1)[0])

    def c_raw_status(self, rng, v):
        try:
            r = self.raw_request(v, b'{"cmd":"status","id":7}\n')
            ok = r.get("ok") is True and r.get("id") == 7 and \
                r["vm"]["name"] == v.name
        except (OSError, ValueError, KeyError, TypeError) as e:
            r, ok = e, False
        if not ok and v.p.poll() is None:
            self.fail("%s: raw status: %r" % (v.name, r))
        self.count("client: raw status")

    def c_bad(self, rng, v):
        try:
            r = self.raw_request(v, rng.choice([b"not json\n", b"[1]\n",
                                                b'{"cmd":"nope"}\n']))
            ok = r.get("ok") is False and "error" in r
        except (OSError, ValueError, AttributeError) as e:
            r, ok = e, False
        if not ok and v.p.poll() is None:
            self.fail("%s: malformed request: reply %r" % (v.name, r))
        self.count("client: malformed request")
