# SPDX-License-Identifier: GPL-2.0-only
"""Watching the hosts: one thread per host (Watcher) keeps a read-only
connection to its libvirtd and reports a Snapshot (model.py) of it at
each change and every --interval, or that it does not answer.

Nothing here blocks the daemon: a libvirtd that hangs (or a host asleep)
holds only its own watcher, in libvirt's open or in a call. Every
connection has libvirt's keepalive (--keepalive S: a probe every S
seconds, the connection closed after KEEPALIVE_COUNT unanswered ones),
which needs libvirt's event loop (started once, on a thread of its own):
a host that stops answering is reported lost within S x
(KEEPALIVE_COUNT + 1) seconds, a call waiting on it then fails. A lost
connection is opened again with back-off (1 s, doubling, at most
RECONNECT_MAX_S); the daemon can kick() a watcher to try at once.

A snapshot is read at once on libvirt's lifecycle events of the host's
domains, one domain at a time on its metadata-change events (Watcher),
coalesced (at most one read every MIN_GAP_S), and the whole host every
--interval in case an event was lost. What is read:
virNodeGetInfo (CPUs, memory), the host UUID (capabilities) and name once
per connection; per active domain its name, UUID, state and reason,
vCPUs, current memory, whether it is persistent, and its urn:sysidle:1
metadata (urndoc.py: a state whose lease ran out is unknown); the names
and UUIDs of the inactive domains. None of it asks QEMU to run anything
on a vCPU."""
import re
import threading
import time

from .. import urndoc
from ..libvirt_source import start_event_loop
from .model import Dom, Snapshot

import libvirt

KEEPALIVE_COUNT = 3
RECONNECT_MAX_S = 30.0
MIN_GAP_S = 0.2

_PAUSED_REASONS = {
    libvirt.VIR_DOMAIN_PAUSED_USER: "user",
    libvirt.VIR_DOMAIN_PAUSED_MIGRATION: "migration",
    libvirt.VIR_DOMAIN_PAUSED_SAVE: "save",
    libvirt.VIR_DOMAIN_PAUSED_DUMP: "dump",
    libvirt.VIR_DOMAIN_PAUSED_IOERROR: "I/O error",
    libvirt.VIR_DOMAIN_PAUSED_WATCHDOG: "watchdog",
    libvirt.VIR_DOMAIN_PAUSED_FROM_SNAPSHOT: "snapshot",
    libvirt.VIR_DOMAIN_PAUSED_SHUTTING_DOWN: "shutting down",
    libvirt.VIR_DOMAIN_PAUSED_SNAPSHOT: "snapshot",
    libvirt.VIR_DOMAIN_PAUSED_CRASHED: "crashed",
    libvirt.VIR_DOMAIN_PAUSED_STARTING_UP: "starting up",
    libvirt.VIR_DOMAIN_PAUSED_POSTCOPY: "postcopy",
    libvirt.VIR_DOMAIN_PAUSED_POSTCOPY_FAILED: "postcopy failed",
}


def err_text(e):
    return e.get_error_message() or str(e)


def run_state(code):
    return {
        libvirt.VIR_DOMAIN_NOSTATE: "no state",
        libvirt.VIR_DOMAIN_RUNNING: "running",
        libvirt.VIR_DOMAIN_BLOCKED: "running",
        libvirt.VIR_DOMAIN_PAUSED: "paused",
        libvirt.VIR_DOMAIN_SHUTDOWN: "shutting down",
        libvirt.VIR_DOMAIN_SHUTOFF: "shut off",
        libvirt.VIR_DOMAIN_CRASHED: "crashed",
        libvirt.VIR_DOMAIN_PMSUSPENDED: "suspended to memory",
    }.get(code, "state %d" % code)


def paused_reason(code, reason):
    if code != libvirt.VIR_DOMAIN_PAUSED:
        return None
    return _PAUSED_REASONS.get(reason, "reason %d" % reason)


def idle_state(dom):
    """(state name or None, since_unix_ms or None, why it is not trusted
    or None) of @dom's urn:sysidle:1 metadata."""
    try:
        text = dom.metadata(libvirt.VIR_DOMAIN_METADATA_ELEMENT, urndoc.NS,
                            0)
    except libvirt.libvirtError as e:
        if e.get_error_code() == libvirt.VIR_ERR_NO_DOMAIN_METADATA:
            return None, None, "no %s metadata" % urndoc.NS
        raise
    try:
        doc = urndoc.parse(text)
    except urndoc.BadState as e:
        return None, None, "unreadable metadata (%s)" % e
    why = urndoc.stale(doc)
    if why:
        return None, None, why
    return doc.name, doc.since_unix_ms, None


def host_identity(conn):
    """(host UUID or None, host name) of a connection's host."""
    m = re.search(r"<host>\s*<uuid>([^<]+)</uuid>", conn.getCapabilities())
    return (m.group(1).strip().lower() if m else None), conn.getHostname()


def read_domain(dom):
    """The Dom of an active domain; raises libvirtError (VIR_ERR_NO_DOMAIN
    when it went away meanwhile)."""
    code, reason = dom.state()
    _st, _maxmem, mem_kib, vcpus, _cpu = dom.info()
    state, since, stale = idle_state(dom)
    return Dom(dom.name(), dom.UUIDString(), vcpus, mem_kib, run_state(code),
               paused_reason(code, reason), state, since, stale,
               bool(dom.isPersistent()))


def read_snapshot(conn, identity):
    """A Snapshot of the host of @conn; @identity: host_identity()'s. Its
    times are those of the start of the reading: what it shows is at
    least that recent."""
    unix_ms, mono = int(time.time() * 1000), time.monotonic()
    info = conn.getInfo()       # model, MiB, cpus, ...
    doms = []
    for dom in conn.listAllDomains(libvirt.VIR_CONNECT_LIST_DOMAINS_ACTIVE):
        try:
            d = read_domain(dom)
        except libvirt.libvirtError as e:
            if e.get_error_code() == libvirt.VIR_ERR_NO_DOMAIN:
                continue
            raise
        if d.run_state != "shut off":
            doms.append(d)
    inactive = []
    for dom in conn.listAllDomains(libvirt.VIR_CONNECT_LIST_DOMAINS_INACTIVE):
        try:
            inactive.append((dom.name(), dom.UUIDString()))
        except libvirt.libvirtError as e:
            if e.get_error_code() != libvirt.VIR_ERR_NO_DOMAIN:
                raise
    return Snapshot(identity[0], identity[1], info[2], info[1] * 1024, doms,
                    inactive, unix_ms, mono)


def open_within(uri, timeout, readonly=False, keepalive=None):
    """A libvirt connection to @uri, or raises libvirtError / TimeoutError
    when it is not open within @timeout seconds (the thread opening it is
    left to finish by itself; a connection it opens late is closed)."""
    box = {}
    done = threading.Event()
    abandoned = []

    def attempt():
        try:
            c = (libvirt.openReadOnly if readonly else libvirt.open)(uri)
            if keepalive:
                c.setKeepAlive(keepalive, KEEPALIVE_COUNT)
            box["conn"] = c
        except libvirt.libvirtError as e:
            box["error"] = e
        done.set()
        if abandoned and "conn" in box:
            try:
                box["conn"].close()
            except libvirt.libvirtError:
                pass
    threading.Thread(target=attempt, daemon=True,
                     name="open %s" % uri).start()
    if not done.wait(timeout):
        abandoned.append(True)
        if done.is_set() and "conn" in box:
            return box["conn"]
        raise TimeoutError("%s did not answer in %g s" % (uri, timeout))
    if "error" in box:
        raise box["error"]
    return box["conn"]


class Watcher(threading.Thread):
    """Watches one host (see the module's doc). @report(name, snapshot,
    error) is called from this thread: a Snapshot and None, or None and
    why the host does not answer.

    A lifecycle event (a domain started, stopped, migrated) reads the
    whole host again; a metadata-change event of urn:sysidle:1 reads that
    element of that one domain (one call) and reports only when the state
    changed (a lease renewed by the bridge changes nothing), keeping the
    snapshot's time, which is that of its last whole read."""

    def __init__(self, name, uri, report, interval=10.0, keepalive=5,
                 log=None):
        super().__init__(daemon=True, name="watch %s" % name)
        self.host_name = name
        self.uri = uri
        self.report = report
        self.interval = interval
        self.keepalive = keepalive
        self.log = log
        self.cond = threading.Condition()
        self.full = False           # a whole read is asked for
        self.changed = {}           # uuid -> virDomain: metadata changed
        self.stopping = False
        self.closed = False
        self.reads = 0              # whole reads
        self.domain_reads = 0       # one-domain reads

    def kick(self, uuid=None, dom=None):
        """Any thread: read the host (@uuid: that domain's metadata, @dom
        its virDomain) again at once."""
        with self.cond:
            if uuid is None:
                self.full = True
            else:
                self.changed[uuid] = dom
            self.cond.notify()

    def stop(self):
        with self.cond:
            self.stopping = True
            self.cond.notify()

    def _wait(self, seconds):
        """Until a kick or @seconds; returns (go on, whole read, UUIDs)."""
        end = time.monotonic() + seconds
        with self.cond:
            while not (self.full or self.changed or self.stopping):
                left = end - time.monotonic()
                if left <= 0:
                    self.full = True
                    break
                self.cond.wait(left)
            full, changed = self.full, self.changed
            self.full, self.changed = False, {}
            return not self.stopping, full, changed

    def run(self):
        start_event_loop()
        backoff = 1.0
        while not self.stopping:
            try:
                conn = libvirt.openReadOnly(self.uri)
            except libvirt.libvirtError as e:
                self.report(self.host_name, None, err_text(e))
                go, _, _ = self._wait(backoff)
                if not go:
                    return
                backoff = min(backoff * 2, RECONNECT_MAX_S)
                continue
            backoff = 1.0
            why = self._watch(conn)
            if why is not None:
                self.report(self.host_name, None, why)

    def _update(self, snap, changed):
        """@snap with the urn:sysidle:1 state of the domains @changed
        ({uuid: virDomain from the event}) read again (one call each: a
        metadata change changes nothing else); None when one is not in
        it (a whole read is needed)."""
        doms = {d.uuid: d for d in snap.domains}
        new = False
        for uuid, dom in changed.items():
            if uuid not in doms or dom is None:
                return None
            try:
                state, since, stale = idle_state(dom)
            except libvirt.libvirtError as e:
                if e.get_error_code() == libvirt.VIR_ERR_NO_DOMAIN:
                    return None
                raise
            self.domain_reads += 1
            d = doms[uuid]._replace(state=state, since_ms=since, stale=stale)
            if d != doms[uuid]:
                doms[uuid] = d
                new = True
        if not new:
            return snap
        return Snapshot(snap.host_uuid, snap.hostname, snap.cpus,
                        snap.memory_kib, doms.values(), snap.inactive,
                        snap.unix_ms, snap.mono)

    def _watch(self, conn):
        """Reads snapshots over @conn until it fails or the watcher stops;
        returns why it ended (None: stopped)."""
        cbs = []
        self.closed = False

        def lifecycle(_conn, _dom, *_):
            self.kick()

        def metadata(_conn, dom, _type, nsuri, *_):
            if nsuri and nsuri != urndoc.NS:
                return          # another program's metadata
            try:
                self.kick(dom.UUIDString(), dom)
            except libvirt.libvirtError:
                self.kick()

        def on_close(*_):
            self.closed = True
            self.kick()
        try:
            conn.setKeepAlive(self.keepalive, KEEPALIVE_COUNT)
            conn.registerCloseCallback(on_close, None)
            cbs.append(conn.domainEventRegisterAny(
                None, libvirt.VIR_DOMAIN_EVENT_ID_LIFECYCLE, lifecycle,
                None))
            cbs.append(conn.domainEventRegisterAny(
                None, libvirt.VIR_DOMAIN_EVENT_ID_METADATA_CHANGE, metadata,
                None))
            identity = host_identity(conn)
            snap = None
            full, changed = True, {}
            while not self.stopping:
                if self.closed:
                    return "the connection was closed (keepalive or " \
                        "libvirtd gone)"
                t0 = time.monotonic()
                new = None if full or snap is None else \
                    self._update(snap, changed)
                if new is None:
                    new = read_snapshot(conn, identity)
                    self.reads += 1
                if new is not snap:
                    snap = new
                    self.report(self.host_name, snap, None)
                gap = MIN_GAP_S - (time.monotonic() - t0)
                if gap > 0:
                    time.sleep(gap)
                go, full, changed = self._wait(self.interval)
                if not go:
                    return None
            return None
        except libvirt.libvirtError as e:
            return err_text(e)
        finally:
            for cb in cbs:
                try:
                    conn.domainEventDeregisterAny(cb)
                except libvirt.libvirtError:
                    pass
            try:
                conn.unregisterCloseCallback()
            except libvirt.libvirtError:
                pass
            try:
                conn.close()
            except libvirt.libvirtError:
                pass
