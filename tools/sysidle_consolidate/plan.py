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
status; make_plan(inventory, Budget(...)) -> Plan is the pure planner
(planner.py; the inventory's checks in inventory.py, the libvirt side in
plan_libvirt.py). Standalone: python3 -m sysidle_consolidate.plan OPTIONS.
Options besides the budget: --hosts URI,... (repeatable), --plan-input
FILE ('-': stdin; at most PLAN_INPUT_MAX, 16 MiB, read: a longer file is
refused as unreadable, exit 6), --dump-inventory FILE ('-': stdout),
--apply, --migrate-uri URI (with --apply: where the migration streams go,
tcp://ADDRESS; default: the destination's host name).

Idle state. A domain is fully idle when its urn:sysidle:1 metadata element
(published by the bridge, <state name="FULL_NOTED" num="4"
since_unix_ms="..."/>, read by urndoc.py) says FULL_NOTED and it is
running. Everything else never moves: a busy domain (any other state), a
domain without the metadata or with one that cannot be read (unknown,
taken for busy), an active domain that is not running (paused, ...), and a
FULL_NOTED domain idle for less than --min-idle-s. Only active domains
count; shut-off ones use no CPU or memory.

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
absent) means no idle metadata. A domain may also carry "hold": a reason
(a string) why it must not move now, printed as it is in the "keep host"
line (the fleet daemon's cool-downs and migrations under way).
"""
import io
import json
import sys
from fractions import Fraction

from .inventory import InventoryError, parse_inventory
from .planner import DEFAULT_MEM_RESERVE_MIB, EXIT_APPLY_FAILED, \
    EXIT_INFEASIBLE, EXIT_INVENTORY, EXIT_NOTHING, EXIT_OK, EXIT_USAGE, \
    IDLE_STATE, METADATA_NS, Budget, Move, Plan, make_plan

# The plan's API: the command line here, the planner and the inventory's
# parser from planner.py and inventory.py.
__all__ = [
    "DEFAULT_MEM_RESERVE_MIB", "EXIT_APPLY_FAILED", "EXIT_INFEASIBLE",
    "EXIT_INVENTORY", "EXIT_NOTHING", "EXIT_OK", "EXIT_USAGE", "IDLE_STATE",
    "METADATA_NS", "Budget", "InventoryError", "Move", "Plan",
    "add_arguments", "budget_from_args", "host_uris", "main", "make_plan",
    "parse_inventory", "run",
]


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


PLAN_INPUT_MAX = 16 << 20   # the longest --plan-input accepted, in bytes


def read_plan_input(path):
    """The JSON document in @path ('-': stdin), read up to PLAN_INPUT_MAX
    bytes; raises OSError, or ValueError for a longer file (the rest is
    not read) or one that is not JSON."""
    f = sys.stdin.buffer if path == "-" else open(path, "rb")
    try:
        data = f.read(PLAN_INPUT_MAX + 1)
    finally:
        if f is not sys.stdin.buffer:
            f.close()
    if len(data) > PLAN_INPUT_MAX:
        raise ValueError("longer than %d bytes" % PLAN_INPUT_MAX)
    return json.load(io.BytesIO(data))


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
                        "stdin; at most 16 MiB) instead of libvirt")
    g.add_argument("--dump-inventory", metavar="FILE",
                   help="also write the inventory read as JSON ('-': "
                        "stdout, before the plan)")
    g.add_argument("--apply", action="store_true",
                   help="make the moves (live migration); default: print "
                        "the plan only")
    g.add_argument("--migrate-uri", metavar="URI",
                   help="with --apply: where the migration streams go "
                        "(tcp://ADDRESS[:PORT]; default: the destination's "
                        "host name)")
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
    from . import plan_libvirt
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
            inv = read_plan_input(args.plan_input)
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
    if args.migrate_uri:
        from .fleet.uri import BadHost, migrate_uri
        try:
            migrate_uri(args.migrate_uri)
        except BadHost as e:
            log("error: %s" % e)
            return EXIT_USAGE
    return _libvirt_module().apply_plan(plan, log, args.migrate_uri)


def main(argv=None):
    """Standalone: python3 -m sysidle_consolidate.plan OPTIONS."""
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
