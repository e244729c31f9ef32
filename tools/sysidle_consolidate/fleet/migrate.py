# SPDX-License-Identifier: GPL-2.0-only
"""One live migration, on a thread of its own, journalled before it starts
and after it ends; and the settling of a migration whose end is unknown
(a failure, a crash: resolve.py's rule against both hosts' libvirtds).

The call: virDomainMigrateToURI3 on a read-write connection to the source
host, flags VIR_MIGRATE_LIVE | VIR_MIGRATE_PEER2PEER, plus
VIR_MIGRATE_PERSIST_DEST | VIR_MIGRATE_UNDEFINE_SOURCE for a persistent
domain (its definition moves with it: a host in standby must not keep a
copy that could be started twice); the destination as its URI for the
source hosts (uri.dest_uri), the migration stream to the destination's
--migrate-uri when it has one. Just before it, the domain is read again on
the source: it must still run and, for a pack, still be FULL_NOTED (a
domain that woke meanwhile stays). A migration that runs longer than
--migrate-timeout is aborted (virDomainAbortJob): the domain stays on the
source.

Journal entry "migration:UUID" (journal.py's file): written before the
call {"kind": "migration", "name", "uuid", "src", "dst", "persistent",
"why", "phase": "started"}; dropped once the domain is known to run on
exactly one host (the call succeeded, or resolve.py settled it); kept
with "phase": "unresolved" while a host does not answer or libvirt still
has a job on the domain, and settled again later (Resolver)."""
import threading
import time

import libvirt

from .. import steps
from ..states import FULL_NOTED
from . import resolve
from .hosts import err_text, idle_state, open_within

OPEN_TIMEOUT_S = 30.0
# what a settle's failed action says when libvirt keeps the domain locked
# (a copy held by a job that nobody ends: an incoming migration that a
# libvirtd restarted mid-migration kept)
STUCK_HINT = (": libvirt keeps a job on that copy that nobody ends; remove "
              "it there by hand (virsh destroy, or: stop that host's "
              "libvirtd, kill the copy's QEMU, remove its state file "
              "/run/libvirt/qemu/NAME.xml, start libvirtd); both hosts stay "
              "out of every decision until it is settled")
_said = {}      # uuid -> the last settle error logged for it
SETTLE_WAIT_S = 60.0        # how long a failed migration's end is awaited
SETTLE_POLL_S = 0.5


def journal_key(uuid):
    return "migration:%s" % uuid


class Outcome:
    """What became of a migration: @result "ok" (it moved), "skipped" (not
    started: @why), "failed" (@why; @where: "moved", "stayed", "lost",
    "conflict" or "waiting", resolve.py's outcome)."""

    def __init__(self, result, why=None, where=None, seconds=0.0):
        self.result = result
        self.why = why
        self.where = where
        self.seconds = seconds


def settle(entry, hosts, log, keepalive, wait_s=SETTLE_WAIT_S):
    """resolve.py's rule for the journal @entry against its hosts (model.Host
    by name in @hosts), its actions carried out; asks again every
    SETTLE_POLL_S while the outcome is "waiting", for up to @wait_s.
    Returns the outcome."""
    end = time.monotonic() + wait_s
    what = "%s (%s -> %s)" % (entry.get("name"), entry.get("src"),
                              entry.get("dst"))
    while True:
        conns = {}
        why = {}
        try:
            for side in ("src", "dst"):
                h = hosts.get(entry.get(side))
                conns[side] = None
                if h is None:
                    why[side] = "not configured"
                    continue
                try:
                    conns[side] = open_within(h.uri, min(OPEN_TIMEOUT_S,
                                                         max(wait_s, 1.0)),
                                              keepalive=keepalive)
                except libvirt.libvirtError as e:
                    why[side] = err_text(e)
                except TimeoutError as e:
                    why[side] = str(e)
            sides = {}
            for side, c in conns.items():
                sides[side] = None
                if c is None:
                    continue
                try:
                    sides[side] = resolve.read_side(c, entry["uuid"],
                                                    libvirt)
                except libvirt.libvirtError as e:
                    why[side] = err_text(e)
            outcome, actions = resolve.decide(sides["src"], sides["dst"],
                                              bool(entry.get("persistent")))
            if hasattr(log, "v"):
                log.v("settle %s: source %s, destination %s: %s %s" % (
                    what, sides["src"] or why.get("src"),
                    sides["dst"] or why.get("dst"), outcome, actions))
            if outcome != "waiting":
                try:
                    resolve.carry_out(actions, conns, entry["uuid"], libvirt,
                                      steps.step, log, what)
                    _said.pop(entry["uuid"], None)
                except libvirt.libvirtError as e:
                    text = "error settle %s: %s; %s failed (%s)%s" % (
                        what, "it runs on %s" % entry.get(
                            "src" if outcome == "stayed" else "dst")
                        if outcome in ("stayed", "moved") else outcome,
                        " then ".join("%s on the %s" % (v, {
                            "src": "source", "dst": "destination"}[sd])
                            for v, sd in actions), err_text(e),
                        STUCK_HINT if e.get_error_code() ==
                        libvirt.VIR_ERR_OPERATION_TIMEOUT else "")
                    if _said.get(entry["uuid"]) != text:
                        _said[entry["uuid"]] = text
                        log(text)
                    outcome = "waiting"
            if outcome != "waiting" or time.monotonic() >= end:
                return outcome
        finally:
            for c in conns.values():
                if c is not None:
                    try:
                        c.close()
                    except libvirt.libvirtError:
                        pass
        time.sleep(SETTLE_POLL_S)


class Migration(threading.Thread):
    """Migrates @move (decide.Move) from @src to @dst (model.Host); calls
    @done(self) at the end, from this thread, with self.outcome set."""

    def __init__(self, move, src, dst, hosts, journal, log, done,
                 timeout=300.0, keepalive=5):
        super().__init__(daemon=True, name="migrate %s" % move.name)
        self.move = move
        self.src = src
        self.dst = dst
        self.hosts = hosts
        self.journal = journal
        self.log = log
        self.done = done
        self.timeout = timeout
        self.keepalive = keepalive
        self.outcome = None
        self.started = time.monotonic()

    def run(self):
        try:
            self.outcome = self._run()
        except Exception as e:      # never leave the daemon waiting
            self.outcome = Outcome("failed", "internal error: %r" % e,
                                   "waiting")
        self.outcome.seconds = time.monotonic() - self.started
        self.done(self)

    def _run(self):
        m = self.move
        try:
            conn = open_within(self.src.uri, OPEN_TIMEOUT_S,
                               keepalive=self.keepalive)
        except (libvirt.libvirtError, TimeoutError) as e:
            return Outcome("skipped", "the source does not answer (%s)" %
                           (err_text(e) if isinstance(
                               e, libvirt.libvirtError) else e))
        try:
            return self._migrate(conn, m)
        finally:
            try:
                conn.close()
            except libvirt.libvirtError:
                pass

    def _migrate(self, conn, m):
        try:
            dom = conn.lookupByUUIDString(m.uuid)
            code = dom.state()[0]
            if code not in (libvirt.VIR_DOMAIN_RUNNING,
                            libvirt.VIR_DOMAIN_BLOCKED):
                return Outcome("skipped", "it no longer runs")
            if m.why == "pack":
                state, _since, stale = idle_state(dom)
                if state != FULL_NOTED:
                    return Outcome("skipped", "it woke before its migration "
                                   "(%s)" % (state or stale))
            persistent = bool(dom.isPersistent())
        except libvirt.libvirtError as e:
            return Outcome("skipped", err_text(e))
        entry = {"kind": "migration", "name": m.name, "uuid": m.uuid,
                 "src": m.src, "dst": m.dst, "persistent": persistent,
                 "why": m.why, "phase": "started"}
        key = journal_key(m.uuid)
        if not self.journal.put(key, entry):
            # what must survive a crash is journalled first, or not done
            return Outcome("skipped", "the journal cannot be written (%s)"
                           % self.journal.error)
        flags = libvirt.VIR_MIGRATE_LIVE | libvirt.VIR_MIGRATE_PEER2PEER
        if persistent:
            flags |= libvirt.VIR_MIGRATE_PERSIST_DEST | \
                libvirt.VIR_MIGRATE_UNDEFINE_SOURCE
        params = {}
        if self.dst.migrate_uri:
            params[libvirt.VIR_MIGRATE_PARAM_URI] = self.dst.migrate_uri
        aborted = []

        def abort():
            aborted.append(True)
            try:
                dom.abortJob()
            except libvirt.libvirtError:
                pass
        timer = threading.Timer(self.timeout, abort)
        timer.daemon = True
        steps.step("migrate %s %s -> %s" % (m.name, m.src, m.dst))
        timer.start()
        try:
            dom.migrateToURI3(self.dst.dest_uri, params, flags)
            err = None
        except libvirt.libvirtError as e:
            err = err_text(e)
        finally:
            timer.cancel()
        if err is None:
            self.journal.drop(key)
            return Outcome("ok", where="moved")
        if aborted:
            err = "aborted after --migrate-timeout %g s (%s)" % (
                self.timeout, err)
        where = settle(entry, self.hosts, self.log, self.keepalive)
        if where in ("moved", "stayed", "lost"):
            self.journal.drop(key)
        else:
            self.journal.put(key, dict(entry, phase="unresolved"))
        if where == "moved":
            # libvirt reported a failure after the domain had moved (the
            # source lost the connection at the very end): it moved
            return Outcome("ok", "moved although libvirt said: %s" % err,
                           where="moved")
        return Outcome("failed", err, where)


class Resolver(threading.Thread):
    """Settles the unresolved journal entries @entries ({key: entry}) once,
    on a thread of its own; @done(self) with self.results {key: outcome}."""

    def __init__(self, entries, hosts, journal, log, done, keepalive=5):
        super().__init__(daemon=True, name="settle")
        self.entries = entries
        self.hosts = hosts
        self.journal = journal
        self.log = log
        self.done = done
        self.keepalive = keepalive
        self.results = {}

    def run(self):
        for key, entry in sorted(self.entries.items()):
            try:
                where = settle(entry, self.hosts, self.log, self.keepalive,
                               wait_s=0)
            except Exception as e:
                self.log("error settle %s: %r" % (entry.get("name"), e))
                where = "waiting"
            self.results[key] = where
            if where in ("moved", "stayed", "lost"):
                self.journal.drop(key)
        self.done(self)
