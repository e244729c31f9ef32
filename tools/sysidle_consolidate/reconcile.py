# SPDX-License-Identifier: GPL-2.0-only
"""At start (before the main loop, and for --once too): each journal entry
handed to the source of its kind. This VMM: an entry whose process is
gone (its pid no longer runs with the same start time) is dropped; one
whose socket cannot be followed has its threads restored directly from
the journal (and a resume request, best effort) and is dropped; the rest
are adopted when their VM is met, with the journaled originals as what a
restore puts back, so a packed mask is never taken for the VM's own
placement. libvirt: settled at the first listing of that connection's
running domains (same UUID and id: adopted; else dropped). An entry of a
libvirt connection that is not followed is kept for a later run."""
import os

from . import control, steps
from .common import fmt_cpus, parse_cpus
from .control import Refused, status
from .journal import proc_start_time


def reconcile(ctx, sources):
    """Hands every journal entry of @ctx.journal to its source in
    @sources (VmmSource, LibvirtSource); logs what it cannot."""
    from .vmm_source import VmmSource
    vmm = [s for s in sources if isinstance(s, VmmSource)]
    by_uri = {getattr(s, "uri", None): s for s in sources
              if not isinstance(s, VmmSource)}
    for key, entry in sorted(ctx.journal.entries.items()):
        kind = entry.get("kind")
        if kind == "vmm" and vmm:
            vmm[0].reconcile(key, entry)
        elif kind == "libvirt" and entry.get("uri") in by_uri:
            by_uri[entry["uri"]].reconcile(key, entry)
        elif kind == "libvirt":
            ctx.log("reconcile %s: kept (its connection %s is not followed: "
                    "--libvirt %s)" % (entry.get("name"), entry.get("uri"),
                                       entry.get("uri")))
        else:
            ctx.log("reconcile %s: unknown entry %r: dropped" %
                    (entry.get("name", key), key))
            ctx.journal.drop(key)
            ctx.reconciled("dropped")


def reconcile_vmm(src, key, entry):
    """At start, the journal's @entry (kind vmm) of the VmmSource @src:
    dropped when its process is gone; restored directly from the journal
    when its socket cannot be followed; else kept, adopted when its VM is
    met (VmmSource.adopt())."""
    name = entry.get("name", "?")
    pid, start = entry.get("pid"), entry.get("start")
    if not isinstance(pid, int) or proc_start_time(pid) != start:
        src.log("reconcile %s: gone (pid %s no longer runs): entry "
                "dropped" % (name, pid))
        src.ctx.journal.drop(key)
        src.ctx.reconciled("dropped")
        return
    path = entry.get("socket")
    why = None
    if path not in src.wanted():
        why = "its socket %s is not followed" % path
    else:
        try:
            st = status(path)
            if st.get("_peer_pid") != pid:
                why = "%s is served by pid %d" % (path, st["_peer_pid"])
        except (OSError, ValueError, Refused) as e:
            why = "%s: %s" % (path, e)
    if why is None:
        src.reconciling.add(key)
        return
    restore_from(src, entry, pid)
    src.log("reconcile %s: restored from the journal (%s): entry "
            "dropped" % (name, why))
    src.ctx.journal.drop(key)
    src.ctx.reconciled("restored")


def restore_from(src, entry, pid):
    """The journal's originals put back directly (threads of @pid only),
    and a resume request if it was suspended (best effort)."""
    if entry.get("packed"):
        for tid, cpus in (entry.get("threads") or {}).items():
            try:
                tid = int(tid)
                if not os.path.exists("/proc/%d/task/%d" % (pid, tid)):
                    continue
                c = parse_cpus(cpus)
                steps.step("sched_setaffinity(%d, %s) (reconcile)" %
                           (tid, fmt_cpus(c)))
                os.sched_setaffinity(tid, c)
            except (OSError, ValueError) as e:
                src.log("error %s: thread %s: its affinity could not be "
                        "restored (%s)" % (entry.get("name"), tid, e))
    if entry.get("suspended") and entry.get("socket"):
        try:
            steps.step("resume request to %s (reconcile)" %
                       entry["socket"])
            control.command(entry["socket"], "resume")
        except (OSError, ValueError, Refused):
            pass
