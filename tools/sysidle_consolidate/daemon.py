# SPDX-License-Identifier: GPL-2.0-only
"""The main loop: every source's VMs followed, the policies applied, the
retries run; --once; the exit (everything undone)."""
import select
import signal
import socket
import time

from .policy import Policy
from .retry import Retrier


class Context:
    """What the sources share: the log, the retrier, the policy, and the
    options that apply to every VM."""

    def __init__(self, log, policies, suspend_after=10.0, suspend_max=60.0,
                 idle=None, dry=False, once=False):
        self.log = log
        self.retrier = Retrier(log)
        self.policy = Policy(policies, suspend_after, suspend_max, log,
                             once=once)
        self.idle = idle            # this VMM's idle CPUs (a set)
        self.dry = dry
        self.once = once
        self.wake_rd, self.wake_wr = socket.socketpair()
        self.wake_rd.setblocking(False)
        self.wake_wr.setblocking(False)

    @staticmethod
    def now():
        return time.monotonic()

    def wake(self):
        """Any thread: the main loop looks again at once."""
        try:
            self.wake_wr.send(b"x")
        except OSError:
            pass

    def drain_wake(self):
        try:
            while self.wake_rd.recv(4096):
                pass
        except OSError:
            pass


class Daemon:
    def __init__(self, ctx, sources):
        self.ctx = ctx
        self.sources = sources
        self.stopping = None

    def targets(self):
        return [t for s in self.sources for t in s.targets()]

    def step(self, now=None):
        """One round without waiting: polls, time-based decisions,
        retries. Returns the monotonic time of the next thing due."""
        ctx = self.ctx
        now = ctx.now() if now is None else now
        for s in self.sources:
            s.poll(now)
        for t in self.targets():
            ctx.policy.tick(t, now)
        ctx.retrier.run_due()
        dues = [s.next_due() for s in self.sources]
        dues += [ctx.policy.next_due(t) for t in self.targets()]
        dues.append(ctx.retrier.next_due())
        dues = [d for d in dues if d is not None]
        return min(dues) if dues else now + 1.0

    def wait(self, until):
        """Sleeps until @until, or until a VMM socket is readable, a
        libvirt event or a signal arrives; handles what arrived."""
        fds = {}
        for s in self.sources:
            if hasattr(s, "fds"):
                for sock, vm in s.fds().items():
                    fds[sock] = (s, vm)
        timeout = max(0.0, until - self.ctx.now())
        try:
            ready, _, _ = select.select(list(fds) + [self.ctx.wake_rd], [],
                                        [], timeout)
        except InterruptedError:
            return
        for r in ready:
            if r is self.ctx.wake_rd:
                self.ctx.drain_wake()
                continue
            src, vm = fds[r]
            if vm.sock is r:
                src.readable(vm)

    def run(self, until=None):
        """Until SIGTERM / SIGINT (or the monotonic time @until: tests);
        then everything undone. Returns the signal name or "end"."""
        old = None
        if until is None:
            signal.set_wakeup_fd(self.ctx.wake_wr.fileno())

            def stop(signum, frame):
                self.stopping = signum
            old = [signal.signal(signal.SIGTERM, stop),
                   signal.signal(signal.SIGINT, stop)]
        while not self.stopping:
            due = self.step()
            if until is not None:
                if self.ctx.now() >= until:
                    break
                due = min(due, until)
            self.wait(due)
        why = signal.Signals(self.stopping).name if self.stopping else "end"
        if old is not None:
            signal.signal(signal.SIGTERM, old[0])
            signal.signal(signal.SIGINT, old[1])
            signal.set_wakeup_fd(-1)
        return why

    def finish(self, why):
        """Every suspended VM resumed, every packed VM restored, the
        retries run out; the exit line."""
        before = self.ctx.retrier.errors
        for s in self.sources:
            s.shutdown(why)
        self.ctx.retrier.finish()
        failed = self.ctx.retrier.errors - before
        if failed:
            self.ctx.log("exit (%s): %d actions could not be undone" %
                         (why, failed))
        else:
            self.ctx.log("exit (%s): every packed VM restored, every "
                         "suspended VM resumed" % why)

    def once(self):
        """One pass over every source, the retries of failed actions
        within their back-off. Returns 1 when an action was given up."""
        for s in self.sources:
            s.once()
        if not self.ctx.dry:
            self.ctx.retrier.finish()
        return 1 if self.ctx.retrier.errors else 0
