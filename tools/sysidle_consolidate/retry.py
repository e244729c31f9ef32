# SPDX-License-Identifier: GPL-2.0-only
"""Actions retried with back-off.

An action is one call that changes a VM (one thread's affinity, one vCPU's
pinning, a pause, a resume). attempt() runs it at once; when it fails it
is queued and run again after 10, 50, 200, 500, 1000 ms. An action that
takes something away from a VM (pack, suspend) is given up after those 5
retries (logged, counted in .errors). One that gives it back (restore,
resume: undo=True) is never given up while the VM is followed: after the
5 back-offs it is tried again every second, so a VM is never left on the
idle CPUs or paused after it woke; only when the VM is forgotten or the
tool exits (finish()) is it given up.

An action function returns normally when done, raises Gone when there is
nothing left to do (the thread or the domain no longer exists: dropped, a
"# " line with --verbose), and raises anything else (its str() is the
reason) to be retried."""
import time

DELAYS_S = [0.01, 0.05, 0.2, 0.5, 1.0]
UNDO_DELAY_S = 1.0
UNDO_ACTIONS = ("restore", "resume")


class Gone(Exception):
    """The action's object no longer exists: nothing to do."""


class Entry:
    __slots__ = ("target", "item", "fn", "what", "done", "action", "undo",
                 "attempt", "due")


class Retrier:
    def __init__(self, log, count=None):
        self.log = log
        self.count = count      # count(action, result) for the metrics
        self.pending = {}       # (target key, item) -> Entry
        self.errors = 0         # actions given up on

    def attempt(self, target, item, fn, what, done, action, undo=False):
        """Runs fn() for @target (its .key, .name); @item names the object
        within the VM ("thread 4246", "vcpu 1"), @what the call for the
        log ("thread 4246: sched_setaffinity(1)"), @done its result ("thread
        4246 -> cpus 1"), @action the reason ("pack", "restore", ...).
        Replaces a pending retry of the same item. Returns True when done
        (or nothing left to do), False when queued for retry."""
        self.pending.pop((target.key, item), None)
        if action in UNDO_ACTIONS:
            getattr(target, "failed_undo", set()).discard(action)
        e = Entry()
        e.target, e.item, e.fn, e.what, e.done = target, item, fn, what, done
        e.action, e.undo, e.attempt, e.due = action, undo, 0, 0.0
        return self._run(e, first=True)

    def _run(self, e, first=False):
        key = (e.target.key, e.item)
        try:
            e.fn()
        except Gone as g:
            self.log.v("%s: %s is gone: nothing to do (%s)" %
                       (e.target.name, e.item, g))
            self.pending.pop(key, None)
            if self.count:
                self.count(e.action, "gone")
            return True
        except Exception as ex:      # noqa: BLE001 (every failure retried)
            reason = getattr(ex, "strerror", None) or str(ex) or \
                type(ex).__name__
            if e.attempt >= len(DELAYS_S) and not e.undo:
                self.log("error %s: %s failed %d times (%s): giving up (%s)"
                         % (e.target.name, e.what, e.attempt + 1, reason,
                            e.action))
                self.pending.pop(key, None)
                self.errors += 1
                if e.action in UNDO_ACTIONS:
                    # the journal keeps what could not be given back
                    e.target.failed_undo = getattr(
                        e.target, "failed_undo", set()) | {e.action}
                if self.count:
                    self.count(e.action, "failed")
                return False
            delay = DELAYS_S[e.attempt] if e.attempt < len(DELAYS_S) \
                else UNDO_DELAY_S
            self.log("retry %s: %s failed (%s), again in %d ms (%s)" %
                     (e.target.name, e.what, reason, delay * 1000, e.action))
            e.attempt += 1
            e.due = time.monotonic() + delay
            self.pending[key] = e
            return False
        self.pending.pop(key, None)
        if not first:
            self.log("retry %s: %s done (%s)" % (e.target.name, e.done,
                                                 e.action))
        return True

    def run_due(self, now=None):
        now = time.monotonic() if now is None else now
        for key, e in list(self.pending.items()):
            if e.due <= now and self.pending.get(key) is e:
                self._run(e)

    def cancel(self, target, actions=None):
        """Drops @target's pending retries (only those of @actions, a
        collection of action names, if given)."""
        for key, e in list(self.pending.items()):
            if key[0] == target.key and (actions is None or
                                         e.action in actions):
                del self.pending[key]

    def has(self, target, actions=None):
        return any(k[0] == target.key and (actions is None or
                                           e.action in actions)
                   for k, e in self.pending.items())

    def next_due(self):
        return min((e.due for e in self.pending.values()), default=None)

    def finish(self):
        """At exit: the pending retries, each within its 5 back-offs
        (undo actions too), then given up. Blocks a few seconds at most."""
        for e in self.pending.values():
            e.undo = False
        while self.pending:
            time.sleep(max(0.0, self.next_due() - time.monotonic()))
            self.run_due()
