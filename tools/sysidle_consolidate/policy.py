# SPDX-License-Identifier: GPL-2.0-only
"""The policies: what to do with a VM when it becomes fully idle
(FULL_NOTED) and when it wakes, whatever kind of VM it is.

  pack     at FULL_NOTED: its vCPU threads and its housekeeping (libvirt:
           emulator) thread onto the idle CPUs, their previous affinity
           (pinning) remembered; restored exactly when the VM leaves
           FULL_NOTED.
  suspend  FULL_NOTED for --suspend-after seconds: paused; resumed when
           it leaves FULL_NOTED. This VMM resumes itself when a guest timer
           falls due or input arrives, and reports it; a libvirt domain
           cannot be seen from outside while paused, so it is also resumed
           --suspend-max seconds after it was paused (0: never by time).

Hysteresis (the same for every kind of VM): a VM is packed only once it
has been FULL_NOTED continuously for --pack-after; a packed VM that leaves
FULL_NOTED is restored only once it has been out of it continuously for
--restore-after (back in FULL_NOTED before that: nothing happens). A
resume on wake stays immediate. At most --max-actions packs and suspends
per VM in any 60 s window: one more is held (one "hold" line) until the
window allows it, and then done if the VM still qualifies; restores and
resumes are never held.

A source (vmm_source, libvirt_source) keeps one Target per VM and feeds it
the VM's state through Policy.state(t, state, since): since is when that
state began. A source that delivers settled edges (the VMM's filtered
watch) calls state(t, FULL_NOTED, since) once the VM has been fully idle
for --pack-after and state(t, "NOT", since_left) once it has been out of
it for --restore-after: the same code acts at once, since now >= since +
the hold. A source of raw states calls it on every change; the timers
(next_due, tick) then do the waiting. The sources implement the four
actions: do_pack, do_restore, do_suspend, do_resume (each logs its line
and uses the Retrier). Policy.tick() makes the decisions that depend on
time."""
import collections
import time

from .common import fmt_s
from .states import FULL_NOTED

POLICIES = ("pack", "suspend")
WINDOW_S = 60.0


def parse_policy(text):
    """"pack", "suspend", "pack,suspend" (any order) -> a frozenset;
    ValueError otherwise."""
    parts = [p.strip() for p in text.split(",")]
    if not parts or any(p not in POLICIES for p in parts) or \
            len(set(parts)) != len(parts):
        raise ValueError("expected pack, suspend or pack,suspend")
    return frozenset(parts)


class Target:
    """One VM as the policies see it. A source sets .name, .key (unique
    across sources) and .can_suspend_max (a paused VM that cannot wake
    itself)."""
    kind = "vm"
    can_suspend_max = False

    def __init__(self, key, name):
        self.key = key
        self.name = name
        self.state = None           # idle state name, None: unknown
        self.idle_since = None      # monotonic, while FULL_NOTED
        self.left_since = None      # monotonic, out of FULL_NOTED since
        self.packed = None          # what do_restore puts back, while packed
        self.suspended = False      # paused by this process
        self.suspended_at = None    # monotonic
        self.acted = set()          # "pack", "suspend": tried this period
        self.period = None          # the source's id of the idle period
        self.gone = False
        self.actions = collections.deque()  # monotonic times: packs, suspends
        self.held = None            # the action held by --max-actions
        self.wake_why = None        # the reason of the restore to come

    # --- implemented by the sources ------------------------------------
    def do_pack(self, why):
        raise NotImplementedError

    def do_restore(self, why):
        raise NotImplementedError

    def do_suspend(self, why):
        raise NotImplementedError

    def do_resume(self, why):
        raise NotImplementedError


class Policy:
    def __init__(self, policies, suspend_after, suspend_max, log,
                 once=False, pack_after=0.0, restore_after=0.0,
                 max_actions=0, on_hold=None):
        self.pack = "pack" in policies
        self.suspend = "suspend" in policies
        self.suspend_after = suspend_after
        self.suspend_max = suspend_max
        self.pack_after = pack_after
        self.restore_after = restore_after
        self.max_actions = max_actions      # 0: no limit
        self.on_hold = on_hold              # called for each hold line
        self.log = log
        self.once = once

    def state(self, t, state, since=None, why=None, now=None, period=None):
        """The VM @t is in @state (None: unknown) since the monotonic time
        @since (default: now); @why is the reason for the log
        ("FULL_NOTED -> NOT"); @period, if given, identifies the idle
        period (the published since_unix_ms): a new one while FULL_NOTED
        means the VM woke and idled again between two looks. Acts on it."""
        now = time.monotonic() if now is None else now
        prev = t.state
        t.state = state
        if state == FULL_NOTED:
            t.left_since = None
            if prev != FULL_NOTED or t.idle_since is None:
                t.idle_since = since if since is not None else now
                t.acted.clear()
            elif period is not None and t.period is not None and \
                    period != t.period:
                # woke and idled again between two looks: a new period
                if since is not None:
                    t.idle_since = max(since, t.idle_since)
                if not t.suspended:
                    t.acted.discard("suspend")
            t.period = period
        else:
            if prev == FULL_NOTED or t.left_since is None:
                t.left_since = since if since is not None else now
            t.idle_since = None
            t.period = None
            t.acted.clear()
            t.wake_why = why or ("state unknown" if state is None else
                                 "%s -> %s" % (prev, state))
            if t.suspended:
                t.do_resume(t.wake_why)
            if state is None:
                t.left_since = now - self.restore_after
        self.tick(t, now)

    def wake(self, t, why):
        """Undoes what was done to @t at once: resume, then restore."""
        if t.suspended:
            t.do_resume(why)
        if t.packed is not None:
            t.do_restore(why)

    def resumed_by_itself(self, t, how, now=None):
        """@t is running again without this process asking (the VMM's own
        wake-up, or a resume by someone else): no longer counted as
        suspended; idle again, it may be suspended again --suspend-after
        from now."""
        now = time.monotonic() if now is None else now
        t.suspended = False
        t.suspended_at = None
        t.acted.discard("suspend")
        if t.idle_since is not None:
            t.idle_since = max(t.idle_since, now)

    def allowed(self, t, what, now):
        """True when @t may have one more pack or suspend (--max-actions);
        counts it then. Otherwise logs one hold line (once per hold)."""
        if not self.max_actions or self.once:
            t.actions.append(now)
            return True
        while t.actions and t.actions[0] <= now - WINDOW_S:
            t.actions.popleft()
        if len(t.actions) < self.max_actions:
            t.actions.append(now)
            t.held = None
            return True
        if t.held != what:
            t.held = what
            self.log("hold %s: %d actions in the last %d s (--max-actions "
                     "%d): next %s not before +%s s" %
                     (t.name, len(t.actions), WINDOW_S, self.max_actions,
                      what, fmt_s(t.actions[0] + WINDOW_S - now)))
            if self.on_hold:
                self.on_hold(t, what)
        return False

    def release(self, t):
        """The monotonic time at which --max-actions lets @t act again."""
        if not self.max_actions or len(t.actions) < self.max_actions:
            return None
        return t.actions[-self.max_actions] + WINDOW_S

    def tick(self, t, now=None):
        """The decisions that depend on time, for @t."""
        if t.gone:
            return
        now = time.monotonic() if now is None else now
        if t.state != FULL_NOTED:
            if t.packed is not None and t.left_since is not None and \
                    now >= t.left_since + self.restore_after:
                t.do_restore(t.wake_why or "woke")
            return
        if self.pack and t.packed is None and "pack" not in t.acted and \
                t.idle_since is not None and \
                now >= t.idle_since + self.pack_after and \
                self.allowed(t, "pack", now):
            t.acted.add("pack")
            t.do_pack(FULL_NOTED)
        if self.suspend and not t.suspended and "suspend" not in t.acted \
                and t.idle_since is not None \
                and now >= t.idle_since + self.suspend_after:
            if self.allowed(t, "suspend", now):
                t.acted.add("suspend")
                t.do_suspend("FULL_NOTED for %s s, --suspend-after %s" %
                             (fmt_s(now - t.idle_since),
                              fmt_s(self.suspend_after)))
        elif t.suspended and t.can_suspend_max and self.suspend_max and \
                not self.once and t.suspended_at is not None and \
                now >= t.suspended_at + self.suspend_max:
            t.do_resume("--suspend-max %s" % fmt_s(self.suspend_max))
            # it runs --suspend-after before it may be paused again
            t.idle_since = now
            t.acted.discard("suspend")

    def next_due(self, t):
        """The monotonic time of @t's next time-based decision, or None."""
        if t.gone:
            return None
        if t.state != FULL_NOTED:
            if t.packed is not None and t.left_since is not None:
                return t.left_since + self.restore_after
            return None
        dues = []
        if self.pack and t.packed is None and "pack" not in t.acted and \
                t.idle_since is not None:
            dues.append(max(t.idle_since + self.pack_after,
                            self.release(t) or 0.0))
        if self.suspend and not t.suspended and "suspend" not in t.acted \
                and t.idle_since is not None:
            dues.append(max(t.idle_since + self.suspend_after,
                            self.release(t) or 0.0))
        elif t.suspended and t.can_suspend_max and self.suspend_max and \
                not self.once and t.suspended_at is not None:
            dues.append(t.suspended_at + self.suspend_max)
        return min(dues) if dues else None
