# SPDX-License-Identifier: GPL-2.0-only
"""sysidle-fleet's command line: its --help (HELP), its options (declared
once, below: parsing, --help, the configuration file's keys and their
errors come from the one table), and main()."""
import argparse
import os
import sys
from fractions import Fraction

from .. import logsetup, steps
from ..cli import (HelpFormatter, add_state_options, count, seconds,
                   stop_seconds, with_config)
from ..common import Log
from ..journal import Journal, JournalError, JournalLocked
from ..planner import DEFAULT_MEM_RESERVE_MIB, Budget
from ..version import version
from . import uri as urimod

PROG = "sysidle-fleet"
DEFAULT_STATE_DIR = "/var/lib/sysidle/fleet"

HELP = """Gather the fully idle libvirt domains of several hosts onto the
fewest hosts by live migration, hand the emptied hosts to standby, and
spread the domains out again, waking a host first, when they wake.

It watches every --host (each host's libvirtd, read-only, with libvirt's
keepalive) and reads the idle state that the host's sysidle-libvirt
publishes in each domain's metadata (urn:sysidle:1, with a lease: a state
whose lease ran out is unknown). A domain is fully idle when that state is
FULL_NOTED.

Budget per host (the same rule as the migration plan of
sysidle-consolidate --hosts): --cpu-budget vCPUs (default: its CPUs x
--cpu-overcommit), --mem-budget MiB (default: its memory - --mem-reserve),
a fully idle domain's vCPUs weighing --idle-vcpu-weight each (default
0.25: the overcommit allowed for domains that do not run).

pack     Once every domain that would move has been FULL_NOTED for
         --settle, the domains of whole hosts are live-migrated onto the
         fewest hosts that hold them within budget (least loaded hosts
         emptied first; all of a host's domains move or none does), at
         most --parallel at a time. A host with no active domain for
         --standby-after is handed to standby: the host hook
         HOOKS/host NAME host-standby begin URI, and the metric
         sysidle_fleet_host_standby{host="NAME"} 1; at least
         --min-active-hosts hosts stay up.
unpack   A host over its budget, its domains out of FULL_NOTED for
         --unpack-after counting as busy (full weight), has busy domains
         migrated off, largest first, to the up host with the most room;
         when none has room, a host in standby is woken first (the hook
         with host-standby end), and its libvirtd must answer within
         --wake-timeout.
flapping A domain is packed again no sooner than --vm-cooldown after its
         last migration; a woken host is neither emptied nor handed to
         standby for --host-cooldown. Unpack is never held back.

Migration is libvirt's live migration, peer to peer (the source host's
libvirtd reaches the destination's URI itself), persistent domains with
their definition (it moves with them: a host in standby never keeps a
copy that could be started twice). Each migration is journalled in
--state-dir before it starts and after it ends; after a failure or a
crash, libvirt's own state on both hosts says where the domain runs, and
the daemon makes it run on exactly one with one definition. A host that
stops answering (keepalive), or whose libvirtd restarts, is lost: its
domains are unknown and nothing migrates to or from it until it answers.

Every decision and action is one "TIME LEVEL message" line on stdout,
also kept in STATE_DIR/history.log (--history); --status shows the hosts
as the running daemon sees them. SIGTERM: no new action; the migrations
under way end first (at most --stop-timeout); hosts in standby stay so.

Exit status: 0 stopped by a signal; 1 the state directory cannot be used
(another sysidle-fleet holds it); 2 bad usage (a bad --host URI, a name
or URI given twice, a bad option or configuration file); 3 forced exit
(the stop took longer than --stop-timeout, or a second signal)."""

USAGE = ("%(prog)s --host NAME=URI --host NAME=URI ... [--migrate-uri "
         "[NAME=]URI ...]\n"
         "       [BUDGET] [--settle T] [--unpack-after T] [--vm-cooldown T]\n"
         "       [--host-cooldown T] [--standby-after T] "
         "[--min-active-hosts N]\n"
         "       [--parallel N] [--migrate-timeout T] [--wake-timeout T]\n"
         "       [--hooks DIR] [--hook-timeout T] [--interval T] "
         "[--keepalive S]\n"
         "       [--state-dir DIR] [--metrics-file PATH] [--stop-timeout "
         "T]\n"
         "       [--dry-run] [--verbose] [--config FILE]\n"
         "       %(prog)s --status [--json] [--state-dir DIR]\n"
         "       %(prog)s --history [--state-dir DIR]\n"
         "       %(prog)s --version")


def _fraction(text):
    try:
        f = Fraction(text)
    except (ValueError, ZeroDivisionError):
        raise argparse.ArgumentTypeError("%r is not a number" % text)
    if f < 0:
        raise argparse.ArgumentTypeError("%r is negative" % text)
    return f


def _positive(text):
    n = count(text)
    if n < 1:
        raise argparse.ArgumentTypeError("%r is not at least 1" % text)
    return n


def _keepalive(text):
    n = count(text)
    if not 1 <= n <= 600:
        raise argparse.ArgumentTypeError("%r is not 1 to 600 seconds" % text)
    return n


def build_parser(default_hooks):
    ap = argparse.ArgumentParser(prog=PROG, usage=USAGE, description=HELP,
                                 formatter_class=HelpFormatter)
    a = ap.add_argument
    a("--host", action="append", default=[], metavar="NAME=URI",
      help="a host of the fleet: its name (for the logs, metrics and "
           "hooks) and its libvirt URI, which the other hosts reach too "
           "(qemu+ssh://host1/system, qemu+tls://host1/system; "
           "qemu+unix:///system?socket=PATH for a libvirtd of this machine)"
           "; repeatable, at least two")
    a("--migrate-uri", action="append", default=[], metavar="[NAME=]URI",
      help="where migration streams into host NAME go (tcp://ADDRESS"
           "[:PORT]); without NAME=: every host; default: libvirt's, the "
           "destination's host name")
    g = ap.add_argument_group("budget per host")
    g.add_argument("--cpu-budget", type=_fraction, metavar="N",
                   help="vCPUs a host may carry (default: its CPUs x "
                        "--cpu-overcommit)")
    g.add_argument("--cpu-overcommit", type=_fraction, default=Fraction(1),
                   metavar="R", help="vCPUs per host CPU (default 1)")
    g.add_argument("--idle-vcpu-weight", type=_fraction,
                   default=Fraction(1, 4), metavar="W",
                   help="what a fully idle domain's vCPU counts (default "
                        "0.25)")
    g.add_argument("--mem-budget", type=count, metavar="MiB",
                   help="memory a host may carry (default: its memory - "
                        "--mem-reserve)")
    g.add_argument("--mem-reserve", type=count,
                   default=DEFAULT_MEM_RESERVE_MIB, metavar="MiB",
                   help="memory kept for the host itself (default %d)" %
                   DEFAULT_MEM_RESERVE_MIB)
    g = ap.add_argument_group("rules")
    g.add_argument("--settle", type=seconds, default=60.0, metavar="T",
                   help="pack a domain FULL_NOTED for this long (default "
                        "60 s)")
    g.add_argument("--unpack-after", type=seconds, default=5.0, metavar="T",
                   help="a domain out of FULL_NOTED for this long counts "
                        "as busy (default 5 s)")
    g.add_argument("--vm-cooldown", type=seconds, default=600.0,
                   metavar="T", help="pack a domain again no sooner than "
                   "this after its last migration (default 10 m)")
    g.add_argument("--host-cooldown", type=seconds, default=600.0,
                   metavar="T", help="a woken host is not emptied nor put "
                   "in standby for this long (default 10 m)")
    g.add_argument("--standby-after", type=seconds, default=30.0,
                   metavar="T", help="hand a host with no active domain for"
                   " this long to standby (default 30 s)")
    g.add_argument("--min-active-hosts", type=_positive, default=1,
                   metavar="N", help="hosts that always stay up (default 1)")
    g.add_argument("--parallel", type=_positive, default=2, metavar="N",
                   help="migrations at once (default 2)")
    g.add_argument("--migrate-timeout", type=seconds, default=300.0,
                   metavar="T", help="abort a migration that takes longer "
                   "(default 5 m; the domain stays where it was)")
    g.add_argument("--wake-timeout", type=seconds, default=300.0,
                   metavar="T", help="a woken host's libvirtd must answer "
                   "within this (default 5 m)")
    g = ap.add_argument_group("hooks, connections, files")
    g.add_argument("--hooks", default=default_hooks, metavar="DIR",
                   help="run DIR/host and DIR/host.d/* for host-standby "
                        "begin and end (sysidle-hooks(5); default "
                        "%(default)s; 'none': no hooks)")
    g.add_argument("--hook-timeout", type=seconds, default=60.0,
                   metavar="T", help="kill a hook still running after T "
                   "(default 60 s)")
    g.add_argument("--interval", type=seconds, default=30.0, metavar="T",
                   help="read every host at least this often (default 30 "
                        "s; libvirt's events make it read at once on a "
                        "change)")
    g.add_argument("--keepalive", type=_keepalive, default=5, metavar="S",
                   help="libvirt keepalive probe every S seconds, a host "
                        "lost after %d unanswered ones (default 5)" % 3)
    g.add_argument("--state-dir", default=DEFAULT_STATE_DIR, metavar="DIR",
                   help="the journal, the history and status.json "
                        "(default %(default)s)")
    g.add_argument("--metrics-file", metavar="PATH",
                   help="write Prometheus text-format metrics there after "
                        "each change (sysidle-metrics(7))")
    g.add_argument("--stop-timeout", type=stop_seconds, default=30.0,
                   metavar="T", help="after SIGTERM or SIGINT, exit at once "
                   "(status 3) when the migrations under way have not "
                   "ended within T, 1 s to 1 h (default 30 s)")
    g.add_argument("--dry-run", action="store_true",
                   help="log the decisions, act on none")
    g.add_argument("--verbose", action="store_true",
                   help="also log each host's reads")
    add_state_options(g, "sysidle-fleet.conf", "print the hosts as the "
                      "daemon of --state-dir sees them, and exit")
    return ap


def make_hosts(ap, args):
    from .model import Host
    if len(args.host) < 2:
        ap.error("give at least two --host NAME=URI (%d given)" %
                 len(args.host))
    try:
        parsed = urimod.parse_hosts(args.host, args.migrate_uri)
    except urimod.BadHost as e:
        ap.error(str(e))
    return [Host(n, u, d, m) for n, u, d, m in parsed]


def run(ap, args, log, default_hooks):
    import signal
    early = []      # a stop signal before the loop runs: kept for it

    def stop_early(signum, frame):
        early.append(signum)
    old = [signal.signal(signal.SIGTERM, stop_early),
           signal.signal(signal.SIGINT, stop_early)]
    hosts = make_hosts(ap, args)
    import importlib.util
    if importlib.util.find_spec("libvirt") is None:
        e = "no module named libvirt"
        sys.stderr.write("%s: needs the libvirt Python binding "
                         "(python3-libvirt): %s\n" % (PROG, e))
        return 1
    from . import daemon
    from .decide import Knobs
    from .outputs import Outputs
    from ..stopwatch import StopWatch
    steps.configure(warn=log)
    try:
        journal = Journal(args.state_dir, log, program=PROG)
    except (JournalLocked, JournalError) as e:
        sys.stderr.write("%s: %s\n" % (PROG, e))
        return 1
    logsetup.add_history(journal.dir)
    budget = Budget(cpu_budget=args.cpu_budget,
                    cpu_overcommit=args.cpu_overcommit,
                    idle_vcpu_weight=args.idle_vcpu_weight,
                    mem_budget_mib=args.mem_budget,
                    mem_reserve_mib=args.mem_reserve)
    knobs = Knobs(budget, args.settle, args.unpack_after, args.vm_cooldown,
                  args.host_cooldown, args.standby_after,
                  args.min_active_hosts)
    hooks_dir = None if args.hooks in ("", "none") else \
        os.path.abspath(args.hooks)
    opts = daemon.Options(args.parallel, args.migrate_timeout,
                          args.wake_timeout, args.keepalive, args.interval,
                          hooks_dir, args.hook_timeout, args.dry_run)
    outputs = Outputs(args.metrics_file, journal.dir, log)
    fleet = daemon.Fleet(hosts, knobs, opts, journal, log, outputs)
    log("%s %s: %d hosts (%s); %s; settle %g s, unpack after %g s%s" % (
        PROG, version(), len(hosts), ", ".join(h.name for h in hosts),
        budget.describe().split(";")[0], args.settle, args.unpack_after,
        "; dry run: nothing is done" if args.dry_run else ""))
    def stop(signum, frame):
        fleet.stopping = signum
        fleet.wake()
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    if early:
        fleet.stopping = early[0]
    watch = StopWatch(args.stop_timeout, fleet.wake, program=PROG,
                      on_force=outputs.force_down)
    watch.start()
    why = "?"
    try:
        watch.phase = "the fleet's loop"
        why = fleet.run()
        watch.phase = "the exit"
    finally:
        outputs.update(fleet, running=False)
        standby = [h.name for h in fleet.hosts.values()
                   if h.state == "standby"]
        log("exit (%s): %s; %d journal entries kept" % (
            why, "hosts in standby stay so: %s" % ", ".join(standby)
            if standby else "no host in standby",
            len(journal.entries)))
        watch.close()
        signal.signal(signal.SIGTERM, old[0])
        signal.signal(signal.SIGINT, old[1])
        journal.close()
    return 0


def main(argv=None, default_config=None, default_hooks=None):
    default_hooks = default_hooks or "/etc/sysidle/hooks"
    ap = build_parser(default_hooks)
    argv = list(sys.argv[1:] if argv is None else argv)
    args = ap.parse_args(with_config(ap, argv, default_config, PROG))
    if args.json and not args.status:
        ap.error("--json goes with --status")
    if args.status:
        from .status import print_status
        return print_status(args.state_dir, args.json)
    if args.history:
        return logsetup.print_history(args.state_dir)
    logsetup.setup(args.verbose)
    log = Log(args.verbose)
    return run(ap, args, log, default_hooks)
