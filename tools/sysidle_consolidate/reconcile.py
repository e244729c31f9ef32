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
