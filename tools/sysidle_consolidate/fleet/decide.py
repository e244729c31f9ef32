# SPDX-License-Identifier: GPL-2.0-only
"""The fleet's rules, as pure functions of the hosts' snapshots, what the
daemon remembers (Memory) and the time: what to migrate, which host to
wake, which host to hand to standby. No I/O: the daemon (daemon.py) acts
on what they return, and tests call them with made-up hosts and clocks.

Signal. A domain is fully idle when its urn:sysidle:1 state (published by
its host's bridge, with a lease: model.Dom.state is None when there is
none or it is not to be trusted) is FULL_NOTED and it is running or
paused. Hysteresis: a domain that leaves full idle counts as busy only
once it has been out of FULL_NOTED continuously for --unpack-after; until
then it still weighs what an idle one does (a wake that lasts a moment, or
the dip of a freshly migrated domain whose new host's bridge starts
again, moves nothing).

Load. A host's vCPU load is the sum over its active domains of their
vCPUs, times --idle-vcpu-weight for those that count as idle; its memory
load the sum of their current memory. Its budget: planner.Budget (the
same rule as the migration plan's: --cpu-budget or CPUs x
--cpu-overcommit, --mem-budget or memory - --mem-reserve).

Unpack (first). A host that is up and over its budget moves busy domains
off: known busy ones only (a domain without a trusted state is counted
busy but never chosen), largest first (vCPUs, memory, name), each to the
up host with the most vCPU room that takes it within budget (no domain of
the same name or UUID there); until the host is within budget. When a
domain fits nowhere and no host is being woken, the first host in
standby (by name) is woken; the moves wait for it. Unpack moves ignore
the cool-downs (a busy domain over budget is never held), but a domain
whose migration failed is chosen again only UNPACK_RETRY_S later.

Pack (when no host is over budget and nothing is moving). The migration
planner (planner.make_plan) on the hosts that are up, a domain moving
only once FULL_NOTED for --settle; held (never moved): a domain migrating
now, one migrated less than --vm-cooldown ago (per domain: at most one
pack in that time) or whose migration failed less than that ago, every domain of a host woken, or that an unpack moved
a domain to or from, less than --host-cooldown ago (per host: no pack
undoes an unpack before then). The plan is carried out only when it
empties at least one host.

Standby. A host that is up and has had no active domain for
--standby-after, with no migration to or from it, not woken less than
--host-cooldown ago, is handed to standby, as long as at least
--min-active-hosts hosts stay up (or waking)."""
from fractions import Fraction

from ..planner import fmt_mib, fmt_num, make_plan, plural
from ..states import FULL_NOTED
from .model import STANDBY, UP, WAKING

# A domain whose migration failed (or was not started) is chosen again by
# unpack no sooner than this, by pack no sooner than --vm-cooldown.
UNPACK_RETRY_S = 30.0
# What is remembered of a domain no host that is up shows any more.
FORGET_S = 300.0


class Knobs:
    """The options the rules read (seconds as floats)."""

    def __init__(self, budget, settle_s=60.0, unpack_after_s=5.0,
                 vm_cooldown_s=600.0, host_cooldown_s=600.0,
                 standby_after_s=30.0, min_active=1):
        self.budget = budget            # planner.Budget, min_idle unused
        self.settle_s = settle_s
        self.unpack_after_s = unpack_after_s
        self.vm_cooldown_s = vm_cooldown_s
        self.host_cooldown_s = host_cooldown_s
        self.standby_after_s = standby_after_s
        self.min_active = min_active


class Memory:
    """What the daemon remembers from pass to pass (monotonic times)."""

    def __init__(self):
        self.busy_since = {}    # uuid -> out of FULL_NOTED since
        self.migrated_at = {}   # uuid -> end of its last migration
        self.woken_at = {}      # host name -> it answered after a wake
        self.unpacked_at = {}   # host name -> end of an unpack to or from it
        self.failed_at = {}     # uuid -> end of its last migration that
        #                         failed or was not started
        self.last_seen = {}     # uuid -> last seen on a host that is up
        self.empty_since = {}   # host name -> no active domain since

    def observe(self, hosts, now):
        """Updates the busy and empty times from the up hosts' snapshots.
        A domain's busy time outlives a moment unseen (between its source
        and its destination during a migration, its host lost for a
        while): a busy domain that moves counts busy where it arrives at
        once; it is forgotten FORGET_S after it was last seen."""
        seen = set()
        for h in hosts:
            if h.state != UP or h.snap is None:
                continue
            if h.snap.domains:
                self.empty_since.pop(h.name, None)
            else:
                self.empty_since.setdefault(h.name, now)
            for d in h.snap.domains:
                seen.add(d.uuid)
                if idle(d):
                    self.busy_since.pop(d.uuid, None)
                else:
                    self.busy_since.setdefault(d.uuid, now)
        for h in hosts:
            if h.state != UP:
                self.empty_since.pop(h.name, None)
        for uuid in seen:
            self.last_seen[uuid] = now
        for uuid in list(self.last_seen):
            if now - self.last_seen[uuid] > FORGET_S:
                del self.last_seen[uuid]
                self.busy_since.pop(uuid, None)


def idle(d):
    """Fully idle: FULL_NOTED by a trusted state, running or paused."""
    return d.state == FULL_NOTED and d.run_state in ("running", "paused")


def counts_busy(d, memory, now, knobs):
    """Out of FULL_NOTED for --unpack-after at least (unknown included)."""
    if idle(d):
        return False
    return now - memory.busy_since.get(d.uuid, now) >= knobs.unpack_after_s


def weight(d, memory, now, knobs):
    """What @d's vCPUs weigh on its host now."""
    w = 1 if counts_busy(d, memory, now, knobs) else \
        knobs.budget.idle_vcpu_weight
    return d.vcpus * Fraction(w)


class _Inv:
    """The planner's view of a snapshot (host CPUs and memory), for the
    Budget's caps."""

    def __init__(self, snap):
        self.cpus = snap.cpus
        self.memory_kib = snap.memory_kib


class Load:
    """A host's load while unpacking, trial moves applied."""

    def __init__(self, host, memory, now, knobs):
        self.name = host.name
        snap = host.snap
        self.cpu = sum((weight(d, memory, now, knobs) for d in snap.domains),
                       Fraction(0))
        self.mem = sum(d.memory_kib for d in snap.domains)
        self.cpu_cap = knobs.budget.cpu_cap(_Inv(snap))
        self.mem_cap = knobs.budget.mem_cap_kib(_Inv(snap))
        self.ids = {(d.name, d.uuid) for d in snap.domains}
        self.ids |= set(snap.inactive)

    def over(self):
        return self.cpu > self.cpu_cap or self.mem > self.mem_cap

    def room(self):
        return self.cpu_cap - self.cpu

    def takes(self, d, w):
        if any(n == d.name or (u is not None and u == d.uuid)
               for n, u in self.ids):
            # a domain of the same name or UUID runs or is defined here
            return False
        return self.cpu + w <= self.cpu_cap and \
            self.mem + d.memory_kib <= self.mem_cap

    def usage(self):
        return "%s/%s vCPUs, %s/%s MiB" % (
            fmt_num(self.cpu), fmt_num(self.cpu_cap), fmt_mib(self.mem),
            fmt_mib(self.mem_cap))


class Move:
    """One migration to make: @why "pack" or "unpack"; @line says why."""

    def __init__(self, name, uuid, src, dst, why, line):
        self.name = name
        self.uuid = uuid
        self.src = src
        self.dst = dst
        self.why = why
        self.line = line


class Unpack:
    def __init__(self):
        self.moves = []         # [Move]
        self.wake = None        # the host to wake first, or None
        self.stuck = []         # lines: over budget, nothing can be done
        self.over = {}          # host name -> its usage text


def unpack(hosts, memory, now, knobs, moving=()):
    """The unpack moves (see the module's doc). @moving: UUIDs under
    migration now (never chosen again)."""
    res = Unpack()
    up = sorted((h for h in hosts if h.state == UP and h.snap is not None),
                key=lambda h: h.name)
    loads = {h.name: Load(h, memory, now, knobs) for h in up}
    unplaced = []
    for h in up:
        ld = loads[h.name]
        if not ld.over():
            continue
        res.over[h.name] = ld.usage()
        cands = [d for d in h.snap.domains
                 if d.uuid not in moving and now - memory.failed_at.get(
                     d.uuid, -UNPACK_RETRY_S) >= UNPACK_RETRY_S and
                 d.run_state == "running" and
                 d.state is not None and counts_busy(d, memory, now, knobs)]
        cands.sort(key=lambda d: (-d.vcpus, -d.memory_kib, d.name))
        before = ld.usage()
        for d in cands:
            if not ld.over():
                break
            w_here = weight(d, memory, now, knobs)
            dests = sorted((loads[n] for n in loads if n != h.name),
                           key=lambda t: (-t.room(), t.name))
            for t in dests:
                if t.takes(d, Fraction(d.vcpus)):
                    t.cpu += d.vcpus
                    t.mem += d.memory_kib
                    t.ids.add((d.name, d.uuid))
                    ld.cpu -= w_here
                    ld.mem -= d.memory_kib
                    busy_s = now - memory.busy_since.get(d.uuid, now)
                    res.moves.append(Move(
                        d.name, d.uuid, h.name, t.name, "unpack",
                        "unpack %s (%s, %s MiB, busy %d s) %s -> %s: %s "
                        "carries %s (then %s; %s then %s)" % (
                            d.name, plural(d.vcpus, "vCPU"),
                            fmt_mib(d.memory_kib), busy_s, h.name, t.name,
                            h.name, before, ld.usage(), t.name,
                            t.usage())))
                    break
            else:
                unplaced.append((h.name, d))
        if ld.over() and not cands:
            res.stuck.append("%s is over budget (%s) and has no known busy "
                             "domain to move" % (h.name, ld.usage()))
    if unplaced:
        waking = [h for h in hosts if h.state == WAKING]
        standby = sorted(h.name for h in hosts if h.state == STANDBY)
        names = ", ".join("%s (%s)" % (d.name, src) for src, d in unplaced)
        if waking:
            res.stuck.append("no room for %s: waiting for %s to wake" %
                             (names, ", ".join(h.name for h in waking)))
        elif standby:
            res.wake = standby[0]
        else:
            res.stuck.append("no room for %s on any host that is up, and "
                             "no host in standby" % names)
    return res


def holds(hosts, memory, now, knobs, moving=()):
    """{uuid: why it must not be packed now} for the up hosts' domains."""
    out = {}
    for h in hosts:
        if h.state != UP or h.snap is None:
            continue
        woke = memory.woken_at.get(h.name)
        unpacked = memory.unpacked_at.get(h.name)
        host_hold = None
        if woke is not None and now - woke < knobs.host_cooldown_s:
            host_hold = "its host woke %d s ago, --host-cooldown %d s" % (
                now - woke, knobs.host_cooldown_s)
        elif unpacked is not None and now - unpacked < knobs.host_cooldown_s:
            host_hold = "its host took part in an unpack %d s ago, " \
                "--host-cooldown %d s" % (now - unpacked,
                                          knobs.host_cooldown_s)
        for d in h.snap.domains:
            moved = memory.migrated_at.get(d.uuid)
            failed = memory.failed_at.get(d.uuid)
            if d.uuid in moving:
                out[d.uuid] = "migrating"
            elif failed is not None and now - failed < knobs.vm_cooldown_s:
                out[d.uuid] = "its migration failed %d s ago, " \
                    "--vm-cooldown %d s" % (now - failed, knobs.vm_cooldown_s)
            elif moved is not None and now - moved < knobs.vm_cooldown_s:
                out[d.uuid] = "migrated %d s ago, --vm-cooldown %d s" % (
                    now - moved, knobs.vm_cooldown_s)
            elif host_hold:
                out[d.uuid] = host_hold
    return out


def inventory(hosts, held, now_unix_ms):
    """The planner's inventory (plan.py's JSON) of the up hosts, host
    names as their "uri"."""
    inv = {"taken_unix_ms": now_unix_ms, "hosts": []}
    for h in sorted(hosts, key=lambda h: h.name):
        if h.state != UP or h.snap is None:
            continue
        s = h.snap
        inv["hosts"].append({
            "uri": h.name, "cpus": s.cpus, "memory_kib": s.memory_kib,
            "domains": [dict({"name": d.name, "uuid": d.uuid,
                              "vcpus": d.vcpus, "memory_kib": d.memory_kib,
                              "run_state": d.run_state, "state": d.state,
                              "since_unix_ms": d.since_ms},
                             **({"hold": held[d.uuid]} if d.uuid in held
                                else {}))
                        for d in s.domains],
            "inactive_domains": [{"name": n, "uuid": u}
                                 for n, u in s.inactive]})
    return inv


def pack(hosts, memory, now, knobs, now_unix_ms, moving=()):
    """The planner's Plan for the up hosts (None when fewer than two are
    up), with --settle as its minimum idle time and the holds above."""
    if sum(1 for h in hosts if h.state == UP and h.snap) < 2:
        return None
    b = knobs.budget
    budget = type(b)(cpu_budget=b.cpu_budget, cpu_overcommit=b.cpu_overcommit,
                     idle_vcpu_weight=b.idle_vcpu_weight,
                     mem_budget_mib=b.mem_budget_mib,
                     mem_reserve_mib=b.mem_reserve_mib,
                     min_idle_s=Fraction(knobs.settle_s).limit_denominator(
                         1000))
    held = holds(hosts, memory, now, knobs, moving)
    return make_plan(inventory(hosts, held, now_unix_ms), budget)


def standby(hosts, memory, now, knobs, busy_hosts=()):
    """The up hosts to hand to standby now (see the module's doc), by name;
    @busy_hosts: hosts a migration or a hook is under way on."""
    on = sum(1 for h in hosts if h.state in (UP, WAKING))
    out = []
    for h in sorted(hosts, key=lambda h: h.name, reverse=True):
        if h.state != UP or h.snap is None or h.name in busy_hosts or \
                h.snap.domains:
            continue
        empty = memory.empty_since.get(h.name)
        if empty is None or now - empty < knobs.standby_after_s:
            continue
        woke = memory.woken_at.get(h.name)
        if woke is not None and now - woke < knobs.host_cooldown_s:
            continue
        if on - len(out) - 1 < knobs.min_active:
            break
        out.append(h.name)
    return out


def next_due(hosts, memory, now, knobs, now_unix_ms):
    """The monotonic time at which a rule may decide differently with no
    new snapshot (a settle, an unpack-after, a cool-down or a
    standby-after running out), or None."""
    dues = []
    for h in hosts:
        if h.state != UP or h.snap is None:
            continue
        for d in h.snap.domains:
            if idle(d) and d.since_ms is not None:
                dues.append(now + (d.since_ms + knobs.settle_s * 1000 -
                                   now_unix_ms) / 1000.0)
            elif d.uuid in memory.busy_since:
                dues.append(memory.busy_since[d.uuid] +
                            knobs.unpack_after_s)
            m = memory.migrated_at.get(d.uuid)
            if m is not None:
                dues.append(m + knobs.vm_cooldown_s)
            f = memory.failed_at.get(d.uuid)
            if f is not None:
                dues += [f + knobs.vm_cooldown_s, f + UNPACK_RETRY_S]
        if h.name in memory.empty_since:
            dues.append(memory.empty_since[h.name] + knobs.standby_after_s)
        for t in (memory.woken_at.get(h.name),
                  memory.unpacked_at.get(h.name)):
            if t is not None:
                dues.append(t + knobs.host_cooldown_s)
    dues = [d for d in dues if d > now]
    return min(dues) if dues else None
