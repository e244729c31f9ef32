# SPDX-License-Identifier: GPL-2.0-only
"""Standby and wake: the fleet daemon's half that hands an empty host to
the host hooks (hooks.py) and wakes one, each step journalled before it
acts ("standby:NAME", daemon.py's doc: phase "begin" before the begin
hook, "standby" after it, "end" before the end hook, dropped once the
host answers again). The hooks run on threads of their own and report
through the daemon's inbox (_on_hook); a hook that fails leaves the host
as it was, tried again RETRY_S later. Mixed into daemon.Fleet."""
import threading
import time

from .. import steps
from . import hooks
from .model import CONNECTING, STANDBY, UP, WAKING

RETRY_S = 60.0          # a failed standby or wake is tried again after


def standby_key(name):
    return "standby:%s" % name


class Standby:
    """What daemon.Fleet gets from this module; all of it runs on the main
    thread (the loop's), but the hooks themselves."""

    def _run_hook(self, h, sub):
        """Runs @h's hooks for host-standby @sub on a thread of its own;
        the caller makes sure none runs for @h yet (hook_jobs)."""
        xml = hooks.host_xml(h.name, h.uri, h.host_uuid, h.hostname)
        self.hook_jobs[h.name] = sub

        def job():
            t0 = time.monotonic()
            ok, text = hooks.run(self.opts.hooks_dir, h.name, sub, h.uri,
                                 xml, self.opts.hook_timeout)
            self.post("hook", h.name, sub, ok, text, time.monotonic() - t0)
        threading.Thread(target=job, daemon=True,
                         name="hook %s %s" % (h.name, sub)).start()

    def _standby(self, h, now):
        """Hands the up, empty host @h to standby: journalled ("begin"),
        then its begin hook (the rules chose it: decide.standby)."""
        if self.opts.dry_run:
            self.say_once("dry " + h.name, "dry-run: would put %s in standby"
                          " (no running domain for %d s)" % (
                              h.name, now - self.memory.empty_since.get(
                                  h.name, now)))
            return
        if not self.journal.put(standby_key(h.name), {"kind": "standby",
                                                      "host": h.name,
                                                      "phase": "begin"}):
            # journalled first, or not done (tried again at the next look)
            self.say_once("nojournal " + h.name, "error %s: not put in "
                          "standby: the journal cannot be written (%s)" %
                          (h.name, self.journal.error))
            return
        steps.step("host-standby begin %s" % h.name)
        self.log("standby %s: no running domain for %.0f s: host-standby "
                 "begin" % (h.name, now - self.memory.empty_since.get(
                     h.name, now)))
        self._run_hook(h, "begin")

    def _wake(self, name, now, why):
        """Wakes host @name, in standby, with no hook running for it:
        journalled ("end"), then its end hook; it is up once it answers
        (daemon._on_host), failed after --wake-timeout (act)."""
        h = self.hosts[name]
        if self.opts.dry_run:
            self.say_once("dry " + name, "dry-run: would wake %s (%s)" %
                          (name, why))
            return
        self.journal.put(standby_key(name), {"kind": "standby", "host": name,
                                             "phase": "end"})
        h.set_state(WAKING, now)
        steps.step("host-standby end %s" % name)
        self.log("wake %s: %s: host-standby end" % (name, why))
        self._run_hook(h, "end")
        self.watchers[name].kick()

    def _wake_failed(self, h, now, why):
        """@h did not wake: back in standby (journalled), tried again
        RETRY_S later at the earliest."""
        self.journal.put(standby_key(h.name), {"kind": "standby",
                                               "host": h.name,
                                               "phase": "standby"})
        h.set_state(STANDBY, now)
        self.retry_at[h.name] = now + RETRY_S
        self.log("error wake %s: %s; it stays in standby, tried again in %d "
                 "s at the earliest" % (h.name, why, RETRY_S))

    def _on_hook(self, name, sub, ok, text, seconds):
        """A hook thread's report (through the inbox): the standby or the
        wake of @name goes on, or is undone."""
        h = self.hosts[name]
        now = time.monotonic()
        self.hook_jobs.pop(name, None)
        self.counters.add(self.counters.hooks, (sub, "ok" if ok else
                                                "failed"))
        key = standby_key(name)
        if sub == "begin":
            if ok:
                self.journal.put(key, {"kind": "standby", "host": name,
                                       "phase": "standby"})
                h.set_state(STANDBY, now)
                h.snap = None
                self.log("standby %s: ready for standby, no running domain "
                         "(host-standby begin: %s, %.1f s)" % (
                             name, text, seconds))
            else:
                self.journal.drop(key)
                h.set_state(CONNECTING if h.snap is None else UP, now)
                self.retry_at[name] = now + RETRY_S
                self.log("error standby %s: host-standby begin failed (%s); "
                         "it stays on, tried again in %d s" % (
                             name, text, RETRY_S))
        else:
            if ok and h.state != WAKING:
                self.log("wake %s: host-standby end ran (%s, %.1f s)" %
                         (name, text, seconds))
            elif ok:
                self.log("wake %s: host-standby end ran (%s, %.1f s); "
                         "waiting for its libvirtd, at most --wake-timeout "
                         "%g s" % (name, text, seconds,
                                   self.opts.wake_timeout))
                self.watchers[name].kick()
            elif h.state == WAKING:
                self._wake_failed(h, now, "host-standby end failed (%s)" %
                                  text)

