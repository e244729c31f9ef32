# SPDX-License-Identifier: GPL-2.0-only
"""The libvirt side of the migration plan (plan.py): read the inventory of
the hosts, and make the plan's moves (--apply).

Inventory: each URI is opened read-only; its host CPUs and memory come from
virNodeGetInfo, its active domains from virConnectListAllDomains (name,
UUID, state, current memory, current vCPUs from virDomainGetInfo; the idle
state from the urn:sysidle:1 metadata element, read by urndoc.py), and the
names and UUIDs of its defined but inactive domains, so that no move lands
on a host where the same name is taken. A domain that vanishes while being read is left out;
any other error fails the whole inventory: a plan on part of a cluster
could empty a host onto one it does not know is full. Each URI must reach
a different host.

Apply: the moves are made in plan order with virDomainMigrateToURI3 on a
read-write connection to the source host, flags VIR_MIGRATE_LIVE |
VIR_MIGRATE_PEER2PEER, plus VIR_MIGRATE_PERSIST_DEST |
VIR_MIGRATE_UNDEFINE_SOURCE for a persistent domain (its definition moves
with it: a powered-down host must not keep a copy that could be started
twice; a transient domain stays transient). Peer to peer: the source's
libvirt daemon opens the destination URI itself, so the URIs given must
reach the destinations from the source hosts too (qemu+ssh://host/system,
qemu+tls://host/system; not qemu:///system, which libvirt refuses as "the
same host"; a libvirtd of this machine on a socket of its own,
qemu:///system?socket=PATH, is given to the source as
qemu+unix:///system?socket=PATH, the form libvirt accepts: fleet/uri.py);
--migrate-uri tcp://ADDRESS sends the migration streams there (libvirt's
default is the destination's host name). Just before its migration a
domain is looked up again (by UUID) and must still be running and
FULL_NOTED (for at least the plan's --min-idle-s); otherwise, or when the
migration fails, the remaining moves of that source host are not attempted
and the host is reported as not emptied (it stays on; the domains that
already left stay where they went). Moves of the other hosts go on.
Nothing else is measured again: the destinations' budget is the plan's,
and a host planned empty is reported ready to power down once its moves
are done (check that nothing was started there meanwhile).
"""
import time

try:
    import libvirt
    # a directory named libvirt on sys.path would import as an empty
    # namespace package: make sure this is the binding
    if not hasattr(libvirt, "openReadOnly"):
        libvirt = None
except ImportError:         # reported when the libvirt side is used
    libvirt = None

from . import urndoc
from .planner import EXIT_APPLY_FAILED, EXIT_OK, plural
from .states import FULL_NOTED as IDLE_STATE


class LibvirtInventoryError(Exception):
    pass


def _errmsg(e):
    return e.get_error_message() or str(e)


def _require():
    if libvirt is None:
        raise LibvirtInventoryError(
            "the libvirt Python binding (python3-libvirt) is not installed "
            "for this Python")
    # errors are reported by this code, not printed by libvirt on stderr
    libvirt.registerErrorHandler(lambda ctx, err: None, None)


def _run_state(code):
    names = {
        libvirt.VIR_DOMAIN_NOSTATE: "no state",
        libvirt.VIR_DOMAIN_RUNNING: "running",
        libvirt.VIR_DOMAIN_BLOCKED: "blocked",
        libvirt.VIR_DOMAIN_PAUSED: "paused",
        libvirt.VIR_DOMAIN_SHUTDOWN: "shutting down",
        libvirt.VIR_DOMAIN_SHUTOFF: "shut off",
        libvirt.VIR_DOMAIN_CRASHED: "crashed",
        libvirt.VIR_DOMAIN_PMSUSPENDED: "suspended to memory",
    }
    return names.get(code, "state %d" % code)


def read_idle_state(dom):
    """The domain's (state, since_unix_ms); (None, None) when it has no
    (readable, trusted: urndoc.stale) urn:sysidle:1 metadata: unknown,
    never moved."""
    try:
        text = dom.metadata(libvirt.VIR_DOMAIN_METADATA_ELEMENT,
                            urndoc.NS, 0)
    except libvirt.libvirtError:
        return None, None
    try:
        doc = urndoc.parse(text)
    except urndoc.BadState:
        return None, None
    if urndoc.stale(doc):
        return None, None   # a lease run out, a writer gone: unknown
    return doc.name, doc.since_unix_ms


def _host_inventory(uri):
    conn = libvirt.openReadOnly(uri)
    try:
        info = conn.getInfo()       # model, MiB, cpus, mhz, ...
        doms = []
        for dom in conn.listAllDomains(
                libvirt.VIR_CONNECT_LIST_DOMAINS_ACTIVE):
            try:
                name = dom.name()
                uuid = dom.UUIDString()
                st, _maxmem, mem_kib, vcpus, _cputime = dom.info()
                if st == libvirt.VIR_DOMAIN_SHUTOFF:
                    continue
                state, since = read_idle_state(dom)
            except libvirt.libvirtError as e:
                if e.get_error_code() == libvirt.VIR_ERR_NO_DOMAIN:
                    continue        # gone meanwhile
                raise
            doms.append({"name": name, "uuid": uuid, "vcpus": vcpus,
                         "memory_kib": mem_kib, "run_state": _run_state(st),
                         "state": state, "since_unix_ms": since})
        inactive = []
        for dom in conn.listAllDomains(
                libvirt.VIR_CONNECT_LIST_DOMAINS_INACTIVE):
            try:
                inactive.append({"name": dom.name(),
                                 "uuid": dom.UUIDString()})
            except libvirt.libvirtError as e:
                if e.get_error_code() != libvirt.VIR_ERR_NO_DOMAIN:
                    raise
        doms.sort(key=lambda d: d["name"])
        inactive.sort(key=lambda d: (d["name"], d["uuid"]))
        return {"uri": uri, "cpus": info[2], "memory_kib": info[1] * 1024,
                "domains": doms, "inactive_domains": inactive}
    finally:
        conn.close()


def inventory(uris, now_ms=None):
    """The inventory structure (plan.py's JSON) of the hosts @uris; raises
    LibvirtInventoryError."""
    _require()
    if len(set(uris)) != len(uris):
        dup = sorted(u for u in set(uris) if uris.count(u) > 1)
        raise LibvirtInventoryError("host given twice: %s" % ", ".join(dup))
    taken = int(time.time() * 1000) if now_ms is None else now_ms
    hosts = []
    for uri in uris:
        try:
            hosts.append(_host_inventory(uri))
        except libvirt.libvirtError as e:
            raise LibvirtInventoryError("%s: %s" % (uri, _errmsg(e)))
    return {"taken_unix_ms": taken, "hosts": hosts}


def _check_and_migrate(move, conn, min_idle_ms, migrate_uri=None):
    """Migrate @move's domain; returns None when done, else why not."""
    from .fleet.uri import p2p_form
    dconnuri = p2p_form(move.dst)
    if move.uuid:
        dom = conn.lookupByUUIDString(move.uuid)
    else:
        dom = conn.lookupByName(move.name)
    if dom.name() != move.name:
        return "its UUID is now domain %s" % dom.name()
    st = dom.state()[0]
    if st != libvirt.VIR_DOMAIN_RUNNING:
        return "no longer running (%s)" % _run_state(st)
    state, since = read_idle_state(dom)
    if state != IDLE_STATE:
        return "no longer fully idle (%s)" % (state or "no idle state")
    if min_idle_ms > 0:
        if since is None:
            return "%s since an unknown time" % IDLE_STATE
        if time.time() * 1000 - since < min_idle_ms:
            return "%s again for less than the minimum idle time" % \
                IDLE_STATE
    flags = libvirt.VIR_MIGRATE_LIVE | libvirt.VIR_MIGRATE_PEER2PEER
    if dom.isPersistent():
        flags |= libvirt.VIR_MIGRATE_PERSIST_DEST | \
            libvirt.VIR_MIGRATE_UNDEFINE_SOURCE
    params = {}
    if migrate_uri:
        params[libvirt.VIR_MIGRATE_PARAM_URI] = migrate_uri
    dom.migrateToURI3(dconnuri, params, flags)
    return None


def apply_plan(plan, log, migrate_uri=None):
    """Make @plan's moves (plan.Plan) in order, one line each on @log;
    @migrate_uri: where the migration streams go (tcp://ADDRESS), or None
    (libvirt's default: the destination's host name).
    Returns plan.EXIT_OK when every move is done, else
    plan.EXIT_APPLY_FAILED."""
    try:
        _require()
    except LibvirtInventoryError as e:
        log("apply: error: %s" % e)
        return EXIT_APPLY_FAILED
    by_src = {}
    for m in plan.moves:
        by_src.setdefault(m.src, []).append(m)
    conns = {}
    done = []
    failed = []
    not_tried = []
    stopped = set()
    try:
        for m in plan.moves:
            if m.src in stopped:
                continue
            t0 = time.monotonic()
            try:
                conn = conns.get(m.src)
                if conn is None:
                    conn = conns[m.src] = libvirt.open(m.src)
                why = _check_and_migrate(m, conn, plan.min_idle_ms,
                                         migrate_uri)
            except libvirt.libvirtError as e:
                why = "failed: %s" % _errmsg(e)
            if why is None:
                done.append(m)
                log("migrated %s %s -> %s (%.1f s)" %
                    (m.name, m.src, m.dst, time.monotonic() - t0))
                continue
            failed.append(m)
            stopped.add(m.src)
            log("migration %s %s -> %s not done: %s" %
                (m.name, m.src, m.dst, why))
            mine = by_src[m.src]
            left = mine[mine.index(m) + 1:]
            not_tried += left
            moved = [x.name for x in mine if x in done]
            log("host %s not emptied, it stays on: %s moved (%s), %s "
                "not done, %s not attempted (%s)" % (
                    m.src, plural(len(moved), "domain"),
                    ", ".join(moved) or "none", m.name,
                    plural(len(left), "move"),
                    ", ".join(x.name for x in left) or "none"))
    finally:
        for conn in conns.values():
            try:
                conn.close()
            except libvirt.libvirtError:
                pass
    ready = [u for u in plan.power_down if u not in stopped]
    kept = [u for u in plan.power_down if u in stopped]
    text = "apply: %d of %s done" % (len(done),
                                     plural(len(plan.moves), "migration"))
    if failed:
        text += ", %d failed, %d not attempted" % (len(failed),
                                                   len(not_tried))
    text += "; ready to power down: %s" % (", ".join(ready) or "none")
    if kept:
        text += "; not emptied: %s" % ", ".join(kept)
    log(text)
    return EXIT_APPLY_FAILED if failed else EXIT_OK
