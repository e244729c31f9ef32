# SPDX-License-Identifier: GPL-2.0-only
"""Where does a domain run after a migration that failed, or that a crash
interrupted? libvirt's own state is the truth: this module reads the
domain on both hosts and, once neither has a job on it, makes it run on
exactly one with its persistent definition (if it had one) on that one
only.

decide(src, dst, persistent) is the rule, pure: @src and @dst are Side
views of the domain on the source and the destination (None: that host
does not answer), @persistent whether it had a persistent definition
before the migration. It returns (outcome, [actions]):

  "waiting"      a side does not answer, or has a job on the domain (a
                 migration libvirt is still finishing or undoing): ask
                 again later; nothing is done. Except: the destination
                 has a job (an incoming migration) while the domain runs
                 on the source with none: the source, which drives a
                 peer-to-peer migration, has given up, and the incoming
                 copy is a leftover ("stayed": destroyed)
  "moved"        it runs on the destination only
  "stayed"       it runs on the source only
  "lost"         it runs on neither: reported, never started again here
                 (its memory is gone; starting it is a boot, the
                 operator's call)
  "conflict"     it runs on both (never seen from libvirt): reported,
                 nothing done

Actions, in order, each (verb, side): ("destroy", S) the copy on S that
is not the live one (a paused leftover: an incoming domain never resumed,
or a source whose state moved on); ("resume", S) the live copy, when it
is paused for the migration's sake (reason "migration" or "postcopy
failed"; a domain paused by anyone else stays paused); ("define", S) the
live side's definition written from its running XML when the domain was
persistent and S has none; ("undefine", S) the other side's definition.

Which copy is live when both are there: the one running; of two paused
copies, the source (pre-copy migration: the destination runs the guest
only once libvirt resumed it there)."""
import collections

Side = collections.namedtuple("Side", "present active running paused_reason "
                              "persistent job")

ABSENT = Side(False, False, False, None, False, False)
MIGRATION_PAUSES = ("migration", "postcopy failed")


def decide(src, dst, persistent):
    """See the module's doc."""
    if src is None or dst is None:
        return "waiting", []
    if src.job:
        return "waiting", []
    if dst.job:
        if src.active and src.running:
            # the source drives a peer-to-peer migration: with no job
            # there it has given up, and the destination's incoming copy
            # (a libvirtd restarted mid-migration keeps its job) is left
            # over; the domain runs on the source
            return "stayed", [("destroy", "dst")] + (
                [("undefine", "dst")] if dst.persistent and
                not (persistent and not src.persistent) else [])
        return "waiting", []
    a_src, a_dst = src.active, dst.active
    if a_src and a_dst:
        if src.running and dst.running:
            return "conflict", []
        if dst.running:
            live, other = "dst", "src"
        else:
            live, other = "src", "dst"
        actions = [("destroy", other)]
    elif a_src:
        live, other = "src", "dst"
        actions = []
    elif a_dst:
        live, other = "dst", "src"
        actions = []
    else:
        return "lost", []
    views = {"src": src, "dst": dst}
    lv = views[live]
    if not lv.running and lv.paused_reason in MIGRATION_PAUSES:
        actions.append(("resume", live))
    if persistent:
        if not lv.persistent:
            actions.append(("define", live))
        if views[other].present and views[other].persistent:
            actions.append(("undefine", other))
    elif views[other].present and not views[other].active and \
            views[other].persistent:
        # a transient domain left a definition behind on the other side
        actions.append(("undefine", other))
    return ("moved" if live == "dst" else "stayed"), actions


def read_side(conn, uuid, libvirt):
    """The Side of domain @uuid on @conn's host (ABSENT when it has none);
    raises libvirtError when the host does not answer."""
    try:
        dom = conn.lookupByUUIDString(uuid)
    except libvirt.libvirtError as e:
        if e.get_error_code() == libvirt.VIR_ERR_NO_DOMAIN:
            return ABSENT
        raise
    try:
        code, reason = dom.state()
        active = bool(dom.isActive())
        persistent = bool(dom.isPersistent())
        job = False
        if active:
            try:
                job = dom.jobInfo()[0] != libvirt.VIR_DOMAIN_JOB_NONE
            except libvirt.libvirtError as e:
                # libvirt refuses the statistics of an incoming
                # migration: the job there is one
                if e.get_error_code() != \
                        libvirt.VIR_ERR_OPERATION_UNSUPPORTED:
                    raise
                job = True
    except libvirt.libvirtError as e:
        if e.get_error_code() == libvirt.VIR_ERR_NO_DOMAIN:
            return ABSENT
        raise
    from .hosts import paused_reason
    running = code in (libvirt.VIR_DOMAIN_RUNNING, libvirt.VIR_DOMAIN_BLOCKED)
    return Side(True, active, active and running,
                paused_reason(code, reason), persistent, job)


def carry_out(actions, conns, uuid, libvirt, step, log, what):
    """Performs @actions on the connections {"src": conn, "dst": conn};
    each preceded by @step(description) (the crash-test hook), each logged
    as "@what: ...". Raises libvirtError."""
    for verb, side in actions:
        conn = conns[side]
        dom = conn.lookupByUUIDString(uuid)
        step("%s %s on the %s" % (verb, what, "source" if side == "src"
                                  else "destination"))
        if verb == "destroy":
            dom.destroy()
        elif verb == "resume":
            dom.resume()
        elif verb == "define":
            conn.defineXML(dom.XMLDesc(libvirt.VIR_DOMAIN_XML_SECURE |
                                       libvirt.VIR_DOMAIN_XML_MIGRATABLE))
        elif verb == "undefine":
            try:
                dom.undefineFlags(
                    libvirt.VIR_DOMAIN_UNDEFINE_KEEP_NVRAM)
            except libvirt.libvirtError:
                dom.undefine()
        log("%s: %s on the %s host" % (what, {
            "destroy": "destroyed the leftover copy",
            "resume": "resumed (it was paused for the migration)",
            "define": "defined (its persistent definition)",
            "undefine": "undefined (a second persistent definition)",
        }[verb], "source" if side == "src" else "destination"))
