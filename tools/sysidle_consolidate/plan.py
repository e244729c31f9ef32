# SPDX-License-Identifier: GPL-2.0-only
"""Migration plan: gather fully idle libvirt domains onto the fewest hosts.

Given several libvirt hosts (--hosts URI,URI,...) or their inventory as
JSON (--plan-input FILE), print a plan that moves the fully idle domains
off as many hosts as possible, onto hosts that stay on, within a CPU and a
memory budget per host, so that the emptied hosts can be powered down.
With --apply the moves are made, in plan order, by live peer-to-peer
migration (flags and checks in plan_libvirt.py); printing is the default.
The planner itself (make_plan) does no I/O: same inventory and budget,
byte-identical plan.

API: add_arguments(parser) adds the options below to an argparse parser;
run(args, log) reads the inventory, prints the plan through log (a
function taking one line), applies it with --apply and returns the exit
status; make_plan(inventory, Budget(...)) -> Plan is the pure planner.
Standalone: python3 -m sysidle_consolidate.plan OPTIONS (from tools/).
Options besides the budget: --hosts URI,... (repeatable), --plan-input
FILE ('-': stdin), --dump-inventory FILE ('-': stdout), --apply.

Idle state. A domain is fully idle when its urn:sysidle:1 metadata element
(published by the bridge, <state name="FULL_NOTED" num="4"
since_unix_ms="..."/>) says FULL_NOTED and it is running. Everything else
never moves: a busy domain (any other state), a domain without the
metadata (unknown, taken for busy), an active domain that is not running
(paused, ...), and a FULL_NOTED domain idle for less than --min-idle-s.
Only active domains count; shut-off ones use no CPU or memory.

Budget (the same rule for every host; a host's "load" is what its domains
use):
  --cpu-budget N       vCPUs a host may carry (default: its CPUs x
                       --cpu-overcommit, default 1: one host CPU per vCPU)
  --idle-vcpu-weight W a fully idle domain's vCPUs count W each (default
                       1). A FULL_NOTED domain uses no CPU now, but it may
                       wake at any moment (its own timers, an interrupt) and
                       this tool never moves a busy domain back; below 1 a
                       host may end up overcommitted when its idle domains
                       wake, so lower it only where that is acceptable.
  --mem-budget MiB     memory a host may carry (default: its memory minus
                       --mem-reserve, default 1024 MiB for the host itself;
                       the per-domain overhead of the hypervisor is not
                       counted, keep the reserve large enough for it).
  --min-idle-s S       a FULL_NOTED domain moves only once idle for S
                       seconds (default 0), measured at the inventory time.
A domain's memory is its current memory (after ballooning); its vCPUs are
its current vCPUs. The arithmetic is exact (fractions); the output shows
non-integers with up to 2 decimals.

Rules. A host with any domain that does not move stays on ("keep host").
The other hosts (only fully idle domains, or none) are candidates to empty,
tried least loaded first (memory, then vCPU load, then domain count, then
URI): all their domains move or none does. The domains of a candidate are
placed first-fit decreasing (memory, then vCPUs, descending; ties by name)
onto, in this order: the hosts already staying on (URI order), then the
candidates not tried yet, most loaded first; a candidate that receives a
domain stays on (it is not tried later, so no domain moves twice). A
domain never goes to a host that has a domain of the same name or UUID
(running or only defined), except the same domain's own definition. When
one domain fits nowhere the candidate stays on ("cannot empty") and may
receive domains later. Every sort has explicit keys: the order of the
hosts and domains in the input does not matter.

Infeasible budget: when a host that stays on carries more than its budget
(its domains cannot move and are already over it, or it holds only idle
domains that fit nowhere else), the plan says so and nothing is applied.

Output: one line per decision with its reason, then a summary:
  budget per host: ...         the rule in force
  host URI: ...                each host in URI order: its CPUs and memory,
                               its budget, what it carries now
  keep host URI: domains that do not move: db1 (busy: NOT), x (unknown: no
      urn:sysidle:1 state), y (paused), w (FULL_NOTED 5 s < 60 s)
  keep host URI: receives domains from URI
  move web1 (2 vCPUs, 1024 MiB, FULL_NOTED 42 s) qemu+ssh://b/system ->
      qemu+ssh://a/system (then 6/8 vCPUs, 5120/15360 MiB)
                               (one line; "then": the destination's load
                               and budget once this domain is there)
  power-down candidate: URI (all 3 domains move | its only domain moves |
      no running domains)
  cannot empty URI: big1 (6 vCPUs, 8192 MiB, FULL_NOTED 100 s) fits no host
      (qemu+ssh://a/system has 5 vCPUs, 16384 MiB left); it stays on
  infeasible budget: host URI carries 4 vCPUs > cpu budget 3 (its domains
      do not move)
  plan: 4 hosts -> 2, 3 migrations

Exit status of run(): 0 a plan that powers down at least one host (with
--apply: every move done); 2 bad usage; 3 nothing to do (no host can be
emptied); 4 infeasible budget (nothing applied); 5 --apply: a migration
failed or a domain changed since the plan (the rest of that host's moves
are not attempted); 6 the inventory could not be read (libvirt error, bad
JSON).

Inventory JSON (--plan-input; the libvirt inventory builds the same, and
--dump-inventory FILE writes it):
  {"taken_unix_ms": 1767323087678,          # ages are measured at it
   "hosts": [{"uri": "qemu+ssh://a/system", "cpus": 8,
              "memory_kib": 16777216,
              "domains": [{"name": "web1", "uuid": "...", "vcpus": 2,
                           "memory_kib": 1048576, "run_state": "running",
                           "state": "FULL_NOTED",
                           "since_unix_ms": 1767323045678}],
              "inactive_domains": [{"name": "old", "uuid": "..."}]}]}
"uuid", "run_state" (default "running"), "since_unix_ms",
"inactive_domains" and "taken_unix_ms" may be left out; "state" null (or
absent) means no idle metadata.
"""
import json
import sys
from fractions import Fraction

IDLE_STATE = "FULL_NOTED"
METADATA_NS = "urn:sysidle:1"

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_NOTHING = 3
EXIT_INFEASIBLE = 4
EXIT_APPLY_FAILED = 5
EXIT_INVENTORY = 6

DEFAULT_MEM_RESERVE_MIB = 1024


class InventoryError(ValueError):
    pass


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


# --- inventory -------------------------------------------------------------

class Domain:
    def __init__(self, name, uuid, vcpus, memory_kib, run_state, state,
                 since_ms):
        self.name = name
        self.uuid = uuid
        self.vcpus = vcpus
        self.memory_kib = memory_kib
        self.run_state = run_state
        self.state = state
        self.since_ms = since_ms

    def fully_idle(self):
        return self.run_state == "running" and self.state == IDLE_STATE


class Host:
    def __init__(self, uri, cpus, memory_kib, domains, inactive):
        self.uri = uri
        self.cpus = cpus
        self.memory_kib = memory_kib
        self.domains = sorted(domains, key=lambda d: d.name)
        self.inactive = sorted(inactive)       # [(name, uuid or None)]


def _field(obj, key, kind, where, required=True, default=None):
    if key not in obj or obj[key] is None:
        if required:
            raise InventoryError("%s: %r missing" % (where, key))
        return default
    v = obj[key]
    if kind is int:
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise InventoryError("%s: %r must be an integer >= 0, not %r" %
                                 (where, key, v))
    elif kind is str:
        if not isinstance(v, str) or not v:
            raise InventoryError("%s: %r must be a non-empty string, not %r"
                                 % (where, key, v))
    elif not isinstance(v, kind):
        raise InventoryError("%s: %r has the wrong type" % (where, key))
    return v


def parse_inventory(inv):
    """(taken_unix_ms or None, [Host] in URI order) from the inventory
    structure; raises InventoryError."""
    if not isinstance(inv, dict):
        raise InventoryError("inventory: not a JSON object")
    taken = _field(inv, "taken_unix_ms", int, "inventory", required=False)
    raw_hosts = _field(inv, "hosts", list, "inventory")
    hosts = []
    seen = set()
    for i, rh in enumerate(raw_hosts):
        if not isinstance(rh, dict):
            raise InventoryError("inventory: host %d: not an object" % i)
        uri = _field(rh, "uri", str, "host %d" % i)
        if uri in seen:
            raise InventoryError("host %s: given twice" % uri)
        seen.add(uri)
        where = "host %s" % uri
        cpus = _field(rh, "cpus", int, where)
        mem = _field(rh, "memory_kib", int, where)
        doms = []
        names = set()
        for j, rd in enumerate(_field(rh, "domains", list, where,
                                      required=False, default=[])):
            if not isinstance(rd, dict):
                raise InventoryError("%s: domain %d: not an object" %
                                     (where, j))
            name = _field(rd, "name", str, "%s: domain %d" % (where, j))
            dw = "%s: domain %s" % (where, name)
            if name in names:
                raise InventoryError("%s: listed twice" % dw)
            names.add(name)
            doms.append(Domain(
                name,
                _field(rd, "uuid", str, dw, required=False),
                _field(rd, "vcpus", int, dw),
                _field(rd, "memory_kib", int, dw),
                _field(rd, "run_state", str, dw, required=False,
                       default="running"),
                _field(rd, "state", str, dw, required=False),
                _field(rd, "since_unix_ms", int, dw, required=False)))
        inactive = []
        for j, ri in enumerate(_field(rh, "inactive_domains", list, where,
                                      required=False, default=[])):
            if not isinstance(ri, dict):
                raise InventoryError("%s: inactive domain %d: not an object"
                                     % (where, j))
            iw = "%s: inactive domain %d" % (where, j)
            inactive.append((_field(ri, "name", str, iw),
                             _field(ri, "uuid", str, iw, required=False)))
        hosts.append(Host(uri, cpus, mem, doms, inactive))
    hosts.sort(key=lambda h: h.uri)
    return taken, hosts


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


# --- command line ----------------------------------------------------------

def _fraction(text):
    try:
        f = Fraction(text)
    except (ValueError, ZeroDivisionError):
        raise ValueError("not a number: %r" % text)
    if f < 0:
        raise ValueError("negative: %r" % text)
    return f


def _nonneg_int(text):
    v = int(text)
    if v < 0:
        raise ValueError("negative: %r" % text)
    return v


def add_arguments(parser):
    """Add the plan's options to @parser (an argparse parser)."""
    import argparse

    def typed(fn, what):
        def conv(text):
            try:
                return fn(text)
            except ValueError as e:
                raise argparse.ArgumentTypeError("bad %s: %s" % (what, e))
        return conv

    g = parser.add_argument_group(
        "migration plan", "gather fully idle libvirt domains onto the "
        "fewest hosts (see tools/sysidle_consolidate/plan.py)")
    g.add_argument("--hosts", action="append", default=[], metavar="URI,...",
                   help="libvirt URIs of the cluster's hosts (comma "
                        "separated, repeatable)")
    g.add_argument("--plan-input", metavar="FILE",
                   help="read the inventory from this JSON file ('-': "
                        "stdin) instead of libvirt")
    g.add_argument("--dump-inventory", metavar="FILE",
                   help="also write the inventory read as JSON ('-': "
                        "stdout, before the plan)")
    g.add_argument("--apply", action="store_true",
                   help="make the moves (live migration); default: print "
                        "the plan only")
    g.add_argument("--cpu-budget", type=typed(_fraction, "--cpu-budget"),
                   metavar="N", help="vCPUs a host may carry (default: its "
                   "CPUs x --cpu-overcommit)")
    g.add_argument("--cpu-overcommit", type=typed(_fraction,
                   "--cpu-overcommit"), default=Fraction(1), metavar="R",
                   help="vCPUs per host CPU (default 1)")
    g.add_argument("--idle-vcpu-weight", type=typed(_fraction,
                   "--idle-vcpu-weight"), default=Fraction(1), metavar="W",
                   help="what a fully idle domain's vCPU counts (default 1)")
    g.add_argument("--mem-budget", type=typed(_nonneg_int, "--mem-budget"),
                   metavar="MiB", help="memory a host may carry (default: "
                   "its memory - --mem-reserve)")
    g.add_argument("--mem-reserve", type=typed(_nonneg_int, "--mem-reserve"),
                   default=DEFAULT_MEM_RESERVE_MIB, metavar="MiB",
                   help="memory kept for the host itself (default %d)" %
                   DEFAULT_MEM_RESERVE_MIB)
    g.add_argument("--min-idle-s", type=typed(_fraction, "--min-idle-s"),
                   default=Fraction(0), metavar="S",
                   help="move a domain only after S seconds in FULL_NOTED "
                        "(default 0)")


def budget_from_args(args):
    return Budget(cpu_budget=args.cpu_budget,
                  cpu_overcommit=args.cpu_overcommit,
                  idle_vcpu_weight=args.idle_vcpu_weight,
                  mem_budget_mib=args.mem_budget,
                  mem_reserve_mib=args.mem_reserve,
                  min_idle_s=args.min_idle_s)


def host_uris(args):
    uris = []
    for item in args.hosts:
        uris += [u.strip() for u in item.split(",") if u.strip()]
    return uris


def _write_json(path, inv):
    text = json.dumps(inv, indent=1, sort_keys=True) + "\n"
    if path == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
    else:
        with open(path, "w") as f:
            f.write(text)


def _libvirt_module():
    """The libvirt side, imported only when used (the planner and
    --plan-input need no libvirt binding)."""
    if __package__:
        from . import plan_libvirt
    else:
        import plan_libvirt
    return plan_libvirt


def run(args, log):
    """Print (and with --apply make) the plan; @log takes one line.
    Returns the exit status (see the module's doc)."""
    uris = host_uris(args)
    if bool(uris) == bool(args.plan_input):
        log("error: give either --hosts or --plan-input")
        return EXIT_USAGE
    if args.apply and not uris:
        log("error: --apply needs --hosts (a file inventory may be stale)")
        return EXIT_USAGE
    budget = budget_from_args(args)
    if uris:
        plan_libvirt = _libvirt_module()
        try:
            inv = plan_libvirt.inventory(uris)
        except plan_libvirt.LibvirtInventoryError as e:
            log("error: inventory: %s" % e)
            return EXIT_INVENTORY
    else:
        try:
            if args.plan_input == "-":
                inv = json.load(sys.stdin)
            else:
                with open(args.plan_input) as f:
                    inv = json.load(f)
        except (OSError, ValueError) as e:
            log("error: --plan-input %s: %s" % (args.plan_input, e))
            return EXIT_INVENTORY
    if args.dump_inventory:
        try:
            _write_json(args.dump_inventory, inv)
        except OSError as e:
            log("error: --dump-inventory %s: %s" % (args.dump_inventory, e))
            return EXIT_INVENTORY
    try:
        plan = make_plan(inv, budget)
    except InventoryError as e:
        log("error: inventory: %s" % e)
        return EXIT_INVENTORY
    for line in plan.lines:
        log(line)
    if not args.apply or plan.status != EXIT_OK:
        if args.apply and plan.status == EXIT_INFEASIBLE:
            log("apply: nothing done (infeasible budget)")
        elif args.apply:
            log("apply: nothing to do")
        return plan.status
    return _libvirt_module().apply_plan(plan, log)


def main(argv=None):
    """Standalone: python3 -m sysidle_consolidate.plan OPTIONS (from the
    tools directory)."""
    import argparse
    ap = argparse.ArgumentParser(
        prog="python3 -m sysidle_consolidate.plan",
        description="Print (or apply) a migration plan that gathers fully "
                    "idle libvirt domains onto the fewest hosts.")
    add_arguments(ap)
    args = ap.parse_args(argv)

    def log(line):
        sys.stdout.write(line + "\n")
        sys.stdout.flush()
    return run(args, log)


if __name__ == "__main__":
    sys.exit(main())
