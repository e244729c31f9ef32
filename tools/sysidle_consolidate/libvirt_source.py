# SPDX-License-Identifier: GPL-2.0-only
"""libvirt domains, through `--libvirt URI` (one connection each).

Idle state: the element <state name="FULL_NOTED" num="4"
since_unix_ms="..."/> that the libvirt bridge publishes in each domain's
metadata, namespace urn:sysidle:1 (its shape and reader: urndoc.py), read
every --interval (and at once on a metadata-change or lifecycle event when
the driver delivers events). No element, one that cannot be read
(urndoc.BadState), or one not to be trusted (urndoc.stale: its lease ran
out, its writer is gone; one warning): the state is unknown; nothing new is done to the
domain, and what was done is undone (its wake could not be seen any
more). Only running domains are followed; a domain that stops or
disappears is forgotten (its saved pinning dropped: a stopped domain's
live pinning is gone anyway).

pack: virDomainPinVcpuFlags for each vCPU and virDomainPinEmulator, onto
the idle CPUs (default: the host's last online CPU), the pinning read
before (vcpuPinInfo, emulatorPinInfo) remembered and put back exactly.
Live only: VIR_DOMAIN_AFFECT_LIVE, or AFFECT_CURRENT (of a running domain:
the same) on a driver that refuses LIVE; the persistent configuration is
never changed.

suspend: virDomainSuspend, virDomainResume. From outside, libvirt cannot
tell what a paused guest is waiting for (its timers), so a suspended
domain is resumed when its published state leaves FULL_NOTED, when the
tool exits, and at the latest --suspend-max seconds after it was paused;
it then runs at least --suspend-after before it is paused again, time for
its due timers and for its state to be published. A domain resumed by
someone else is seen (its libvirt state) and no longer counted as
suspended; one paused by someone else is left alone.

Journal: before a pack the domain's pinning (its originals) is journaled
with packed true, before a suspend suspended true; the entry names the
domain's UUID and its id (dom.ID(): a new run has a new one). At start an
entry whose domain still runs with that id is adopted (its originals are
what a restore puts back); one whose domain does not is dropped."""
import logging
import threading

import libvirt

from .common import fmt_cpus, fmt_s, mono_since
from .libvirt_domain import Domain, err_text
from .retry import Gone
from .states import FULL_NOTED

RECONNECT_S = 1.0

libvirt.registerErrorHandler(lambda ctx, err: None, None)

_events_lock = threading.Lock()
_events_started = None          # None: not tried; True / False


def start_event_loop():
    """libvirt's default event loop on a thread of its own (once per
    process, before the first connection). False when it cannot run."""
    global _events_started
    with _events_lock:
        if _events_started is None:
            try:
                libvirt.virEventRegisterDefaultImpl()

                def loop():
                    while True:
                        libvirt.virEventRunDefaultImpl()
                threading.Thread(target=loop, daemon=True,
                                 name="libvirt-events").start()
                _events_started = True
            except libvirt.libvirtError:
                _events_started = False
        return _events_started


class LibvirtSource:
    """One `--libvirt URI` connection and its running domains. @wrap, if
    given, is applied to every virDomain before use (tests inject
    failures with it)."""

    def __init__(self, ctx, uri, idle=None, interval=0.1, events=True,
                 wrap=None):
        self.ctx = ctx
        self.uri = uri
        self.idle = idle            # --idle-cpus, None: the last host CPU
        self.idle_map = None
        self.interval = interval
        self.events = events
        self.wrap = wrap
        self.conn = None
        self.domains = {}           # uuid -> Domain
        self.next_poll = 0.0
        self.next_open = 0.0
        self.open_error = None
        self.fallback = set()       # calls the driver refuses with LIVE
        self.kicked = False
        self.callbacks = []
        self.gen = 0                # connections opened
        self.ncpu = 0
        self.reconciling = {}       # uuid -> (journal key, entry)
        if events:
            self.events = start_event_loop()

    def targets(self):
        return list(self.domains.values())

    # --- connection ----------------------------------------------------
    def open(self):
        log = self.ctx.log
        try:
            conn = libvirt.open(self.uri)
            ncpu, online, _ = conn.getCPUMap()
        except libvirt.libvirtError as e:
            if self.open_error != err_text(e):
                log("error %s: cannot connect (%s): trying again every "
                    "%s s" % (self.uri, err_text(e), fmt_s(RECONNECT_S)))
            self.open_error = err_text(e)
            return False
        self.open_error = None
        self.conn = conn
        self.ncpu = ncpu
        self.gen += 1
        if self.idle is None:
            cpus = [i for i, b in enumerate(online) if b] or [ncpu - 1]
            idle = {cpus[-1]}
        else:
            idle = set(self.idle)
        if max(idle) >= ncpu and self.ctx.policy.pack:
            log("error %s: idle CPUs %s not on this host (%d CPUs): no "
                "domain packed there" % (self.uri, fmt_cpus(idle), ncpu))
            self.idle_map = None
        elif max(idle) < ncpu:
            self.idle_map = tuple(i in idle for i in range(ncpu))
        if self.events:
            for ev in (libvirt.VIR_DOMAIN_EVENT_ID_METADATA_CHANGE,
                       libvirt.VIR_DOMAIN_EVENT_ID_LIFECYCLE):
                try:
                    self.callbacks.append(conn.domainEventRegisterAny(
                        None, ev, self._event, None))
                except libvirt.libvirtError as e:
                    log.v("%s: no events %d (%s): polling only" %
                          (self.uri, ev, err_text(e)))
        log.v("%s: connected, %d host CPUs, idle CPUs %s, events %s" %
              (self.uri, ncpu, fmt_cpus(idle),
               "on" if self.callbacks else "off"))
        return True

    def _event(self, conn, dom, *rest):
        # on the event loop's thread: only a flag and a wake-up
        self.kicked = True
        self.ctx.wake()

    def close(self):
        if self.conn is not None:
            for cb in self.callbacks:
                try:
                    self.conn.domainEventDeregisterAny(cb)
                except libvirt.libvirtError:
                    pass
            self.callbacks = []
            try:
                self.conn.close()
            except libvirt.libvirtError:
                pass
            self.conn = None

    def live(self, dom, name, *args):
        """dom.NAME(*args, VIR_DOMAIN_AFFECT_LIVE), or with flags 0
        (AFFECT_CURRENT) for a running domain when the driver refuses LIVE
        for this call ("unsupported flags")."""
        fn = getattr(dom, name)
        if name not in self.fallback:
            try:
                return fn(*args, libvirt.VIR_DOMAIN_AFFECT_LIVE)
            except libvirt.libvirtError as e:
                if e.get_error_code() != libvirt.VIR_ERR_INVALID_ARG or \
                        "flags" not in err_text(e):
                    raise
                self.ctx.log.v("%s: %s refuses AFFECT_LIVE: AFFECT_CURRENT "
                               "on running domains" % (self.uri, name))
                self.fallback.add(name)
        if not dom.isActive():
            # CURRENT on a stopped domain would change its configuration
            raise libvirt.libvirtError("domain is not running")
        return fn(*args, 0)

    # --- the periodic look ---------------------------------------------
    def next_due(self):
        if self.conn is None:
            return self.next_open
        return self.next_poll

    def poll(self, now):
        if self.conn is None:
            if now < self.next_open:
                return
            self.next_open = now + RECONNECT_S
            if not self.open():
                return
        if now < self.next_poll and not self.kicked:
            return
        self.kicked = False
        self.next_poll = now + self.interval
        log = self.ctx.log
        try:
            doms = self.conn.listAllDomains(
                libvirt.VIR_CONNECT_LIST_DOMAINS_ACTIVE)
        except libvirt.libvirtError as e:
            # the domains are kept: after the reconnection each one still
            # running goes on where it was (restored when it woke)
            log("error %s: listing domains failed (%s): connecting again" %
                (self.uri, err_text(e)))
            self.close()
            return
        seen = set()
        for dom in doms:
            try:
                uuid = dom.UUIDString()
            except libvirt.libvirtError:
                continue
            seen.add(uuid)
            d = self.domains.get(uuid)
            if d is not None and d.gen != self.gen:
                d.dom = self.wrap(dom) if self.wrap else dom
                d.gen = self.gen
            if d is None:
                try:
                    d = self.domains[uuid] = Domain(self, dom)
                except libvirt.libvirtError:
                    continue
                log.v("%s: following domain %s" % (self.uri, d.name))
                self.adopt(d)
            self.look(d, now)
        for uuid, d in list(self.domains.items()):
            if uuid not in seen:
                self.forget(d, "no longer running")
        for uuid, (key, entry) in list(self.reconciling.items()):
            del self.reconciling[uuid]
            log("reconcile %s: gone (domain %s id %s no longer runs): "
                "entry dropped" % (entry.get("name"), uuid,
                                   entry.get("domid")))
            self.ctx.journal.drop(key)
            self.ctx.reconciled("dropped")

    def reconcile(self, key, entry):
        """At start, the journal's @entry of this connection: settled at the
        first listing of the running domains (adopt())."""
        self.reconciling[entry.get("uuid")] = (key, entry)
        return None

    def adopt(self, d):
        """The new Domain @d: the journal's entry of it taken over, when it
        is the same run of the domain (its id)."""
        entry = self.ctx.journal.entries.get(d.journal_key())
        if entry is None or entry.get("kind") != "libvirt":
            return
        pending = self.reconciling.pop(d.uuid, None)
        if entry.get("domid") != d.domid:
            if pending:
                self.ctx.log("reconcile %s: gone (domain id %s no longer "
                             "runs, now %s): entry dropped" %
                             (d.name, entry.get("domid"), d.domid))
                self.ctx.reconciled("dropped")
            self.ctx.journal.drop(d.journal_key())
            return
        d.adopt(entry, self.ncpu)
        # what a run killed half-way left, completed (see VmmSource.adopt)
        try:
            if d.suspended and not d.paused():
                d.suspended = False
                d.suspended_at = None
        except libvirt.libvirtError:
            pass
        if d.packed is not None and self.idle_map is not None and \
                not self.ctx.dry:
            for i in range(len(d.packed["vcpus"])):
                d.pin(i, self.idle_map, "pack")
            d.pin("emulator", self.idle_map, "pack")
        self.ctx.journal_sync(d)
        if pending:
            held = [w for w in ("packed", "suspended") if entry.get(w)]
            self.ctx.log("reconcile %s: adopted (%s) from the journal" %
                         (d.name, ", ".join(held) or "nothing held"))
            self.ctx.reconciled("adopted")

    def look(self, d, now):
        log = self.ctx.log
        try:
            name, since, why = d.read_state()
        except Gone as g:
            self.forget(d, "gone: %s" % g)
            return
        if name is None and why != d.meta_error:
            if "not trusted" in why:
                # a lease run out or its writer gone: always said (once)
                log("warning: %s: state unknown (%s)" % (d.name, why),
                    logging.WARNING)
            else:
                log.v("%s: state unknown (%s)" % (d.name, why))
        d.meta_error = why
        if name is not None and name != d.state:
            log.v("%s: %s -> %s" % (d.name, d.state, name))
        self.ctx.policy.state(
            d, name, mono_since(since, now) if name else None,
            why if name is None else None, now, period=since)
        if d.suspended and not self.ctx.dry and \
                not self.ctx.retrier.has(d, ("suspend", "resume")):
            try:
                running = d.dom.state()[0] == libvirt.VIR_DOMAIN_RUNNING
            except libvirt.libvirtError:
                running = False
            if running:
                log("resumed %s: by someone else after %s s" %
                    (d.name, fmt_s(now - (d.suspended_at or now))))
                self.ctx.policy.resumed_by_itself(d, "other", now)

    def forget(self, d, why):
        held = [w for w, on in (("packed", d.packed is not None),
                                ("suspended", d.suspended)) if on]
        self.ctx.retrier.cancel(d)
        d.gone = True
        d.packed = None
        d.suspended = False
        self.ctx.journal.drop(d.journal_key())
        self.domains.pop(d.key[2], None)
        if held:
            self.ctx.log("forget %s: %s (was %s)" %
                         (d.name, why, " and ".join(held)))
        else:
            self.ctx.log.v("%s: forgotten (%s)" % (d.name, why))

    def once(self):
        """One look at every running domain, the policies applied; the
        domains left alone are listed."""
        self.poll(self.ctx.now())
        for d in self.domains.values():
            if d.state != FULL_NOTED:
                self.ctx.log("leave %s: state %s" % (
                    d.name, d.state or "unknown (%s)" % d.meta_error))

    def shutdown(self, why):
        for d in list(self.domains.values()):
            self.ctx.policy.wake(d, why)
