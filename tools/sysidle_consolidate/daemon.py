# SPDX-License-Identifier: GPL-2.0-only
"""The main loop: every source's VMs followed, the policies applied, the
retries run, the journal kept up to date; --once; the exit (everything
undone). It sleeps in select() on what the sources hand it (sockets,
pidfds, the inotify descriptor) with no timeout when nothing is due: a
steady state costs no wake-up."""
import select
import signal
import socket
import time

from .journal import NoJournal
from .policy import Policy
from .retry import Retrier
from .stopwatch import StopWatch


class Context:
    """What the sources share: the log, the retrier, the policy, and the
    options that apply to every VM."""

    def __init__(self, log, policies, suspend_after=10.0, suspend_max=60.0,
                 idle=None, dry=False, once=False, pack_after=0.0,
                 restore_after=0.0, max_actions=0, journal=None,
                 metrics=None):
        self.log = log
        self.metrics = metrics
        self.retrier = Retrier(log, self.count)
        self.policy = Policy(policies, suspend_after, suspend_max, log,
                             once=once, pack_after=pack_after,
                             restore_after=restore_after,
                             max_actions=max_actions, on_hold=self.held)
        self.journal = journal if journal is not None else NoJournal()
        self.idle = idle            # this VMM's idle CPUs (a set)
        self.dry = dry
        self.once = once
        self.wake_rd, self.wake_wr = socket.socketpair()
        self.wake_rd.setblocking(False)
        self.wake_wr.setblocking(False)

    def held(self, t, what):
        self.count("hold", "ok")

    def reconciled(self, result):
        """One journal entry reconciled at start (adopted, restored,
        dropped), for the metrics."""
        if self.metrics is not None:
            self.metrics.reconciled(result)

    def count(self, action, result):
        """One action for the metrics (pack, restore, suspend, resume, hold;
        ok, failed, retried, gone)."""
        if self.metrics is not None:
            self.metrics.action(action, result)

    def journal_sync(self, t):
        """@t's journal entry made to match what is held of it: written
        when it is packed or suspended (or its restore or resume is still
        retried), dropped otherwise. Called BEFORE a pack or a suspend
        acts, and after a restore or a resume completed. Returns False
        when the journal could not be written (a full disk): a pack or a
        suspend must then not act (journal.py)."""
        if self.dry or not self.journal.enabled:
            return True
        key = t.journal_key()
        if key is None:
            return True
        failed = getattr(t, "failed_undo", ())
        packed = t.packed is not None or "restore" in failed or \
            self.retrier.has(t, ("restore",))
        suspended = t.suspended or "resume" in failed or \
            self.retrier.has(t, ("resume",))
        if packed or suspended:
            return self.journal.put(key, t.journal_entry(packed, suspended))
        return self.journal.drop(key)

    def not_journalled(self, t, action):
        """A pack or a suspend of @t not done: its journal entry could not
        be written (tried again when it idles again)."""
        self.log("error %s: not %s: the journal cannot be written (%s)" %
                 (t.name, "packed" if action == "pack" else "suspended",
                  self.journal.error))
        self.count(action, "failed")

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
    def __init__(self, ctx, sources, stop_timeout=30.0):
        self.ctx = ctx
        self.sources = sources
        self.stopping = None
        self.stop_timeout = stop_timeout
        self.watch = None    # the StopWatch while signals are handled
        self.old_handlers = None

    def phase(self, what):
        """What the main thread is doing, for a forced stop's message."""
        if self.watch is not None:
            self.watch.phase = what

    def targets(self):
        return [t for s in self.sources for t in s.targets()]

    def step(self, now=None):
        """One round without waiting: polls, time-based decisions,
        retries. Returns the monotonic time of the next thing due."""
        ctx = self.ctx
        now = ctx.now() if now is None else now
        self.phase("a pass over the VMs (their states, the actions due)")
        for s in self.sources:
            s.poll(now)
        for t in self.targets():
            ctx.policy.tick(t, now)
        ctx.retrier.run_due()
        ctx.journal.flush()
        for t in self.targets():
            ctx.journal_sync(t)
        if ctx.metrics is not None:
            ctx.metrics.update(self.targets(), ctx.journal)
        dues = [s.next_due() for s in self.sources]
        # a file whose writes fail: tried again (only while they fail)
        dues.append(ctx.journal.next_due())
        if ctx.metrics is not None:
            dues.append(ctx.metrics.next_due())
        dues += [ctx.policy.next_due(t) for t in self.targets()]
        dues.append(ctx.retrier.next_due())
        dues = [d for d in dues if d is not None]
        return min(dues) if dues else None

    def wait(self, until):
        """Sleeps until @until (None: until something arrives), or until a
        descriptor of a source is readable, a libvirt event or a signal
        arrives; handles what arrived."""
        fds = {}
        for s in self.sources:
            if hasattr(s, "fds"):
                fds.update(s.fds())
        timeout = None if until is None else \
            max(0.0, until - self.ctx.now())
        try:
            ready, _, _ = select.select(list(fds) + [self.ctx.wake_rd], [],
                                        [], timeout)
        except InterruptedError:
            return
        for r in ready:
            if r is self.ctx.wake_rd:
                self.ctx.drain_wake()
                continue
            # each callback checks that its object is still the current one
            fds[r]()

    def run(self, until=None):
        """Until SIGTERM / SIGINT (or the monotonic time @until: tests).
        Returns the signal name or "end"; finish() then undoes everything.
        The signals stay handled until finish() has ended, and the stop is
        bounded by --stop-timeout (stopwatch.py)."""
        if until is None:
            def stop(signum, frame):
                self.stopping = signum
            self.old_handlers = [signal.signal(signal.SIGTERM, stop),
                                 signal.signal(signal.SIGINT, stop)]
            self.watch = StopWatch(self.stop_timeout, self.ctx.wake)
            self.watch.start()
        while not self.stopping:
            due = self.step()
            if until is not None:
                if self.ctx.now() >= until:
                    break
                due = until if due is None else min(due, until)
            self.wait(due)
        return signal.Signals(self.stopping).name if self.stopping else "end"

    def finish(self, why):
        """Every suspended VM resumed, every packed VM restored, the
        retries run out; the exit line."""
        before = self.ctx.retrier.errors
        self.phase("the exit: resuming and restoring every VM held")
        for s in self.sources:
            s.shutdown(why)
        self.ctx.retrier.finish()
        for t in self.targets():
            self.ctx.journal_sync(t)
        for s in self.sources:
            if hasattr(s, "after_shutdown"):
                s.after_shutdown()
        self.ctx.journal.flush()
        if self.ctx.metrics is not None:
            self.ctx.metrics.update(self.targets(), self.ctx.journal,
                                    final=True)
        failed = self.ctx.retrier.errors - before
        if failed:
            self.ctx.log("exit (%s): %d actions could not be undone" %
                         (why, failed))
        else:
            self.ctx.log("exit (%s): every packed VM restored, every "
                         "suspended VM resumed" % why)
        if self.watch is not None:
            self.watch.close()
            self.watch = None
            signal.signal(signal.SIGTERM, self.old_handlers[0])
            signal.signal(signal.SIGINT, self.old_handlers[1])

    def once(self):
        """One pass over every source, the retries of failed actions
        within their back-off. Returns 1 when an action was given up."""
        for s in self.sources:
            s.once()
        if not self.ctx.dry:
            self.ctx.retrier.finish()
        for t in self.targets():
            self.ctx.journal_sync(t)
        if self.ctx.metrics is not None:
            self.ctx.metrics.update(self.targets(), self.ctx.journal)
        return 1 if self.ctx.retrier.errors else 0
