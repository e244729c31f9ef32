# SPDX-License-Identifier: GPL-2.0-only
"""The migration planner: make_plan(inventory, Budget(...)) -> Plan, the
rules in plan.py's doc. No I/O: same inventory and budget, byte-identical
plan. Also the plan's exit statuses and the number formats of its lines."""
from fractions import Fraction

from .inventory import parse_inventory
from .states import FULL_NOTED as IDLE_STATE
from .urndoc import NS as METADATA_NS

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_NOTHING = 3
EXIT_INFEASIBLE = 4
EXIT_APPLY_FAILED = 5
EXIT_INVENTORY = 6

DEFAULT_MEM_RESERVE_MIB = 1024


def fmt_num(x):
    """A Fraction or int as text: an integer as is, else up to 2 decimals."""
    x = Fraction(x)
    if x.denominator == 1:
        return str(x.numerator)
    s = "%.2f" % float(x)
    return s.rstrip("0").rstrip(".")


def fmt_mib(kib):
    return fmt_num(Fraction(kib, 1024))


def plural(n, word):
    return "%d %s%s" % (n, word, "" if n == 1 else "s")


# --- budget ----------------------------------------------------------------

class Budget:
    """Per-host limits, the same rule for every host. Numbers are exact
    (Fraction, int): no float rounding in the plan."""

    def __init__(self, cpu_budget=None, cpu_overcommit=1, idle_vcpu_weight=1,
                 mem_budget_mib=None, mem_reserve_mib=DEFAULT_MEM_RESERVE_MIB,
                 min_idle_s=0):
        self.cpu_budget = None if cpu_budget is None else Fraction(cpu_budget)
        self.cpu_overcommit = Fraction(cpu_overcommit)
        self.idle_vcpu_weight = Fraction(idle_vcpu_weight)
        self.mem_budget_mib = mem_budget_mib
        self.mem_reserve_mib = mem_reserve_mib
        self.min_idle_ms = int(Fraction(min_idle_s) * 1000)

    def cpu_cap(self, host):
        if self.cpu_budget is not None:
            return self.cpu_budget
        return host.cpus * self.cpu_overcommit

    def mem_cap_kib(self, host):
        if self.mem_budget_mib is not None:
            return self.mem_budget_mib * 1024
        return host.memory_kib - self.mem_reserve_mib * 1024

    def cpu_weight(self, dom):
        return dom.vcpus * (self.idle_vcpu_weight if dom.fully_idle() else 1)

    def describe(self):
        if self.cpu_budget is not None:
            cpu = "vCPUs <= %s" % fmt_num(self.cpu_budget)
        else:
            cpu = "vCPUs <= host CPUs x %s" % fmt_num(self.cpu_overcommit)
        if self.mem_budget_mib is not None:
            mem = "memory <= %d MiB" % self.mem_budget_mib
        else:
            mem = "memory <= host memory - %d MiB" % self.mem_reserve_mib
        return ("budget per host: %s (idle vCPUs weigh %s), %s; a domain "
                "moves after %s s in %s" %
                (cpu, fmt_num(self.idle_vcpu_weight), mem,
                 fmt_num(Fraction(self.min_idle_ms, 1000)), IDLE_STATE))


# --- the planner -----------------------------------------------------------

class Move:
    def __init__(self, name, uuid, src, dst, line):
        self.name = name
        self.uuid = uuid
        self.src = src
        self.dst = dst
        self.line = line


class Plan:
    def __init__(self):
        self.lines = []         # every line, in order, the summary last
        self.moves = []         # [Move] in plan order, grouped by source
        self.hosts = []         # every host URI
        self.stay_on = []       # URIs that stay on
        self.power_down = []    # URIs that can be powered down, plan order
        self.infeasible = []    # the "infeasible budget" lines
        self.status = EXIT_OK   # EXIT_OK, EXIT_NOTHING or EXIT_INFEASIBLE
        self.summary = ""
        self.min_idle_ms = 0    # the budget's, checked again by --apply


class _Load:
    """What a host carries while planning: weighted vCPUs, memory, and the
    identities (name, uuid) of its active and defined domains."""

    def __init__(self, host, budget):
        self.host = host
        self.cpu = sum((budget.cpu_weight(d) for d in host.domains),
                       Fraction(0))
        self.mem = sum(d.memory_kib for d in host.domains)
        self.active = [(d.name, d.uuid) for d in host.domains]
        self.inactive = list(host.inactive)
        self.cpu_cap = budget.cpu_cap(host)
        self.mem_cap = budget.mem_cap_kib(host)

    def copy(self):
        c = _Load.__new__(_Load)
        c.__dict__.update(self.__dict__)
        c.active = list(self.active)
        c.inactive = list(self.inactive)
        return c

    def key(self):
        return (self.mem, self.cpu, len(self.host.domains), self.host.uri)

    def clash(self, dom):
        """Why @dom cannot come here because of a domain already here, or
        None."""
        for name, uuid in self.active:
            if name == dom.name:
                return "has a running domain named %s" % dom.name
            if uuid is not None and uuid == dom.uuid:
                return "runs a domain with %s's UUID (%s)" % (dom.name, name)
        for name, uuid in self.inactive:
            same_uuid = uuid is not None and uuid == dom.uuid
            if name == dom.name and not same_uuid:
                return "has a domain named %s defined" % dom.name
            if same_uuid and name != dom.name:
                return "has %s's UUID defined as %s" % (dom.name, name)
        return None

    def usage(self):
        return "%s/%s vCPUs, %s/%s MiB" % (
            fmt_num(self.cpu), fmt_num(self.cpu_cap),
            fmt_mib(self.mem), fmt_mib(self.mem_cap))

    def left(self):
        return "%s vCPUs, %s MiB left" % (
            fmt_num(self.cpu_cap - self.cpu), fmt_mib(self.mem_cap - self.mem))


def _stays_reason(dom, budget, taken_ms):
    """Why @dom cannot move, or None when it can."""
    if dom.hold is not None:
        return "%s (%s)" % (dom.name, dom.hold)
    if dom.run_state != "running":
        return "%s (%s)" % (dom.name, dom.run_state)
    if dom.state is None:
        return "%s (unknown: no %s state)" % (dom.name, METADATA_NS)
    if dom.state != IDLE_STATE:
        return "%s (busy: %s)" % (dom.name, dom.state)
    if budget.min_idle_ms > 0:
        if taken_ms is None or dom.since_ms is None:
            return "%s (%s since an unknown time)" % (dom.name, IDLE_STATE)
        age = taken_ms - dom.since_ms
        if age < budget.min_idle_ms:
            return "%s (%s %s s < %s s)" % (
                dom.name, IDLE_STATE, fmt_num(Fraction(max(age, 0), 1000)),
                fmt_num(Fraction(budget.min_idle_ms, 1000)))
    return None


def _idle_text(dom, taken_ms):
    if taken_ms is None or dom.since_ms is None:
        return dom.state
    return "%s %d s" % (dom.state, max(taken_ms - dom.since_ms, 0) // 1000)


def _dom_text(dom, taken_ms):
    return "%s (%s, %s MiB, %s)" % (dom.name, plural(dom.vcpus, "vCPU"),
                                    fmt_mib(dom.memory_kib),
                                    _idle_text(dom, taken_ms))


def make_plan(inventory, budget):
    """The plan for @inventory (the JSON structure, see the module's doc)
    within @budget (a Budget). No I/O; raises InventoryError."""
    taken, hosts = parse_inventory(inventory)
    plan = Plan()
    plan.hosts = [h.uri for h in hosts]
    plan.min_idle_ms = budget.min_idle_ms
    out = plan.lines.append
    out(budget.describe())

    loads = {}
    fixed = {}              # uri -> [reasons] for hosts that must stay on
    for h in hosts:
        ld = _Load(h, budget)
        loads[h.uri] = ld
        idle = sum(1 for d in h.domains if d.fully_idle())
        out("host %s: %s, %s MiB; budget %s vCPUs, %s MiB; carries %s "
            "vCPUs, %s MiB in %s (%d fully idle)" % (
                h.uri, plural(h.cpus, "CPU"), fmt_mib(h.memory_kib),
                fmt_num(ld.cpu_cap), fmt_mib(ld.mem_cap), fmt_num(ld.cpu),
                fmt_mib(ld.mem), plural(len(h.domains), "running domain"),
                idle))
        reasons = [r for r in (_stays_reason(d, budget, taken)
                               for d in h.domains) if r is not None]
        if reasons:
            fixed[h.uri] = reasons

    status = {}             # uri -> "fixed" | "pending" | "kept" | "emptied"
    for h in hosts:
        if h.uri in fixed:
            status[h.uri] = "fixed"
            out("keep host %s: domains that do not move: %s" %
                (h.uri, ", ".join(fixed[h.uri])))
        else:
            status[h.uri] = "pending"

    cands = [loads[h.uri] for h in hosts if h.uri not in fixed]
    try_order = sorted(cands, key=lambda ld: ld.key())
    recv_order = sorted(cands, key=lambda ld: ld.key(), reverse=True)

    for cand in try_order:
        uri = cand.host.uri
        if status[uri] != "pending":
            continue            # it received domains: it stays on
        doms = cand.host.domains
        if not doms:
            status[uri] = "emptied"
            plan.power_down.append(uri)
            out("power-down candidate: %s (no running domains)" % uri)
            continue
        dests = [loads[h.uri] for h in hosts
                 if status[h.uri] in ("fixed", "kept")]
        dests += [ld for ld in recv_order
                  if status[ld.host.uri] == "pending" and ld is not cand]
        trial = [ld.copy() for ld in dests]
        placed = []         # (dom, its trial destination, usage text)
        failure = None
        for dom in sorted(doms, key=lambda d: (-d.memory_kib, -d.vcpus,
                                               d.name)):
            w = budget.cpu_weight(dom)
            why_not = []
            for ld in trial:
                clash = ld.clash(dom)
                if clash is not None:
                    why_not.append("%s %s" % (ld.host.uri, clash))
                    continue
                if ld.cpu + w > ld.cpu_cap or ld.mem + dom.memory_kib > \
                        ld.mem_cap:
                    why_not.append("%s has %s" % (ld.host.uri, ld.left()))
                    continue
                ld.cpu += w
                ld.mem += dom.memory_kib
                ld.active.append((dom.name, dom.uuid))
                placed.append((dom, ld, ld.usage()))
                break
            else:
                failure = (dom, why_not)
                break
        if failure is not None:
            dom, why_not = failure
            status[uri] = "kept"
            out("cannot empty %s: %s fits no host (%s); it stays on" % (
                uri, _dom_text(dom, taken),
                "; ".join(why_not) if why_not else "no other host"))
            continue
        # commit: the trial loads replace the real ones
        for ld in trial:
            loads[ld.host.uri] = ld
        for i, ld in enumerate(dests):
            if any(p[1] is trial[i] for p in placed) and \
                    status[ld.host.uri] == "pending":
                status[ld.host.uri] = "kept"
                out("keep host %s: receives domains from %s" %
                    (ld.host.uri, uri))
        for dom, ld, usage in placed:
            line = "move %s %s -> %s (then %s)" % (
                _dom_text(dom, taken), uri, ld.host.uri, usage)
            out(line)
            plan.moves.append(Move(dom.name, dom.uuid, uri, ld.host.uri,
                                   line))
        status[uri] = "emptied"
        plan.power_down.append(uri)
        out("power-down candidate: %s (%s)" % (
            uri, "its only domain moves" if len(doms) == 1 else
            "all %d domains move" % len(doms)))

    # after the plan, the hosts left on are within budget or it is infeasible
    for h in hosts:
        if status[h.uri] == "emptied":
            continue
        plan.stay_on.append(h.uri)
        ld = loads[h.uri]
        over = []
        if ld.cpu > ld.cpu_cap:
            over.append("%s vCPUs > cpu budget %s" %
                        (fmt_num(ld.cpu), fmt_num(ld.cpu_cap)))
        if ld.mem > ld.mem_cap:
            over.append("%s MiB > memory budget %s MiB" %
                        (fmt_mib(ld.mem), fmt_mib(ld.mem_cap)))
        if over:
            why = ("its domains do not move" if status[h.uri] == "fixed"
                   else "its idle domains fit on no other host")
            line = "infeasible budget: host %s carries %s (%s)" % (
                h.uri, " and ".join(over), why)
            plan.infeasible.append(line)
            out(line)

    n, k, m = len(hosts), len(plan.stay_on), len(plan.moves)
    if plan.infeasible:
        plan.status = EXIT_INFEASIBLE
        plan.summary = ("plan: infeasible budget: %s over budget; no "
                        "migration will be made (%s -> %d, %s otherwise)" % (
                            plural(len(plan.infeasible), "host"),
                            plural(n, "host"), k, plural(m, "migration")))
    elif not plan.power_down:
        plan.status = EXIT_NOTHING
        plan.summary = "plan: %s -> %d, no migrations (nothing to do)" % (
            plural(n, "host"), k)
    else:
        plan.status = EXIT_OK
        plan.summary = "plan: %s -> %d, %s" % (plural(n, "host"), k,
                                                plural(m, "migration"))
    out(plan.summary)
    return plan
