# SPDX-License-Identifier: GPL-2.0-only
"""The command line of sysidle-consolidate: its help (HELP), its options,
and the run they ask for (the daemon, --once, or the migration plan);
main() is the program, for the script tools/sysidle-consolidate and for
python3 -m sysidle_consolidate."""
import argparse
import os
import re
import sys

from . import logsetup, plan, steps
from .common import Log, parse_cpus
from .journal import Journal, JournalError, JournalLocked, NoJournal
from .policy import parse_policy

# The help: its first two paragraphs are the usage, the rest is --help's
# description.
HELP = """sysidle-consolidate: act on fully idle VMs: pack them onto a few host
CPUs, suspend them.

usage: sysidle-consolidate [--dir DIR] [--socket PATH ...] [--libvirt URI ...]
                           [--policy pack|suspend|pack,suspend]
                           [--idle-cpus LIST] [--suspend-after T]
                           [--suspend-max T] [--interval T]
                           [--once] [--dry-run] [--verbose]
       sysidle-consolidate --hosts URI,... | --plan-input FILE
                           [--apply] [BUDGET OPTIONS] [--dump-inventory FILE]

It follows every VM it can see and applies a policy when a VM becomes
fully idle (its idle state reaches FULL_NOTED) and when it wakes (leaves
FULL_NOTED):

- this project's VMM (build/vmm --sysidle): every socket *.sock in DIR
  (default /run/sysidle, scanned again every second; --dir none: no
  directory) and every --socket PATH, one "watch" connection each
  (vmm/README.md, "Control socket protocol");
- libvirt domains: the running domains of each --libvirt URI; their idle
  state is what the libvirt bridge publishes in their metadata (namespace
  urn:sysidle:1, element <state name=.. num=.. since_unix_ms=..>), read
  every --interval (default 100 ms) and at once on a metadata or lifecycle
  event. No such element: the state is unknown; nothing is done to the
  domain, and what was done (packed, suspended) is undone, since its wake
  could no longer be seen. A domain that stops or disappears is forgotten.

Policies (--policy, default pack; pack,suspend for both):

pack     At FULL_NOTED the VM's vCPU threads and its housekeeping thread
         (libvirt: its vCPUs and its emulator thread) go onto the idle
         CPUs (--idle-cpus LIST, e.g. 1 or 0-1,3; default the last CPU:
         for this VMM the last one this process may run on, for libvirt
         the host's last online CPU). What they were on is remembered and
         put back exactly the moment the VM leaves FULL_NOTED. This VMM:
         sched_setaffinity on the thread ids of its status. libvirt:
         virDomainPinVcpuFlags and virDomainPinEmulator on the live domain
         only (the persistent configuration is never changed), the
         pinning read first with vcpuPinInfo and emulatorPinInfo.
suspend  A VM FULL_NOTED for --suspend-after T (default 10 s; counted
         from when its state began, as the VM reports it) is paused, and
         resumed when it leaves FULL_NOTED. This VMM: {"cmd":"pause"}
         and {"cmd":"resume"} on its socket; the VMM resumes itself when a
         guest timer falls due or input arrives and reports it ("resumed"
         event): the VM is no longer counted as suspended, and may be
         paused again after another --suspend-after of full idle.
         libvirt: virDomainSuspend / virDomainResume. From outside, libvirt
         cannot tell what a paused guest waits for (its timers), so a
         suspended domain is also resumed at the latest --suspend-max T
         after it was paused (default 60 s; 0: never by time, only when
         its state changes or at exit): no guest timer is ever served more
         than that late. It then runs at least --suspend-after before it
         is paused again, time for its due timers and for its new state
         to be published. A domain resumed by someone else is no longer
         counted as suspended; one paused by someone else is left alone.
Times (T) are seconds, or a number with ms, s or m: 0.3, 300ms, 2m.

Each action is one line on stdout, with its reason (NAME: the VMM's name,
or the libvirt domain's name):

  pack NAME: 3 threads -> cpus 1 (FULL_NOTED)
  restore NAME: 3 threads -> their own affinity 4246:0-1 4247:0-1 4243:0-1 (FULL_NOTED -> NOT)
  pack NAME: 2 vcpus, emulator -> cpus 7 (FULL_NOTED)
  restore NAME: 2 vcpus, emulator -> their own pinning 0:0 1:1-2 emulator:3 (FULL_NOTED -> NOT)
  suspend NAME: paused (FULL_NOTED for 10.0 s, --suspend-after 10.0)
  resume NAME: after 4.2 s (FULL_NOTED -> NOT)
  resume NAME: after 60 s (--suspend-max 60)
  resumed NAME: by the VMM (timer) after 4210 ms paused
  resumed NAME: by someone else after 3.0 s
  forget NAME: no longer running (was packed and suspended)
  leave NAME: state NOT                            (--once)

"[dry run]" ends the line with --dry-run; ": N failed, retrying" when some
calls failed. A failed call is logged and retried with back-off, after 10,
50, 200, 500, 1000 ms:

  retry NAME: WHAT failed (REASON), again in 10 ms (ACTION)
  retry NAME: WHAT done (ACTION)
  error NAME: WHAT failed 6 times (REASON): giving up (ACTION)

A pack or a pause is given up after those 5 retries. A restore or a resume
is never given up while the VM is followed (after the 5 back-offs it is
tried every second), so no VM stays on the idle CPUs or paused after it
woke; a thread or a domain that no longer exists needs nothing and is
dropped. A VM whose socket closes or disappears gets its restore and resume
attempted and is then forgotten. A watch connection that reports dropped
events makes the tool read the VM's status again. A line from a VMM's
socket has at most 1 MiB: a longer one ends its connection like a close
("SOCKET: line N: longer than 1048576 bytes"); a status request waits 2 s
at most. A domain's urn:sysidle:1 element has at most 65536 characters
(longer: its state is unknown).

--once      one pass: each VM's state now, the policies applied (for
            suspend, a VM counts as idle since its state's since_unix_ms),
            print and exit. Nothing is undone later: a VM packed (or this
            VMM's VM paused) by --once stays so after it wakes (this VMM
            resumes itself; move its threads back yourself), and its
            previous affinity is not kept anywhere. libvirt domains are
            never suspended by --once, since nothing would resume them.
--dry-run   print the decisions, change nothing.
--verbose   also log connections, state changes and events ("# " lines).

SIGTERM / SIGINT: every suspended VM is resumed and every packed VM
restored, then exit 0. What was there before lives only in this process:
if it is killed otherwise (SIGKILL), packed VMs stay packed and paused
libvirt domains stay paused.
Migration plan (--hosts URI,URI,... or --plan-input FILE): instead of the
daemon, one plan that gathers the fully idle libvirt domains of several
hosts onto the fewest hosts within a CPU and memory budget per host, one
line per decision with its reason; --apply makes the moves by live
migration (virDomainMigrateToURI3). The rules, the budget options and the
plan's own exit status (0 a host can be powered down, 3 nothing to do,
4 infeasible budget, 5 a migration failed, 6 inventory unreadable) are in
tools/sysidle_consolidate/plan.py.

Exit status (daemon): 0 done; 1 (--once only) an action was given up after its
retries, or --libvirt without the libvirt Python binding; 2 bad usage.
"""

DEFAULT_STATE_DIR = "/var/lib/sysidle/consolidate"

USAGE = ("%(prog)s [--dir DIR] [--socket PATH ...] [--libvirt URI ...]\n"
         "       [--policy pack|suspend|pack,suspend] [--idle-cpus LIST]\n"
         "       [--suspend-after T] [--suspend-max T] [--interval T]\n"
         "       [--once] [--dry-run] [--verbose]")


def seconds(text):
    """"0.3", "300ms", "10s", "2m" -> seconds (a float >= 0)."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*(ms|s|m|)\s*", text)
    if not m:
        raise argparse.ArgumentTypeError(
            "%r is not a time (seconds, or a number with ms, s or m)" % text)
    v = float(m.group(1))
    return v / 1000 if m.group(2) == "ms" else v * 60 \
        if m.group(2) == "m" else v


def count(text):
    try:
        n = int(text)
    except ValueError:
        n = -1
    if n < 0:
        raise argparse.ArgumentTypeError("%r is not a count (an integer >= "
                                         "0)" % text)
    return n


def policies(text):
    try:
        return parse_policy(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError("%r: %s" % (text, e))


def cpus(text):
    try:
        c = parse_cpus(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError("%r: %s" % (text, e))
    return c


def build_parser(doc):
    ap = argparse.ArgumentParser(
        prog="sysidle-consolidate", usage=USAGE,
        description=doc.split("\n\n", 2)[2] if doc else None,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", default="/run/sysidle",
                    help="the VMMs' socket directory (default %(default)s; "
                         "'none': no directory)")
    ap.add_argument("--socket", action="append", default=[], metavar="PATH",
                    help="a VMM control socket to follow too (repeatable)")
    ap.add_argument("--libvirt", action="append", default=[], metavar="URI",
                    help="follow the running domains of this libvirt "
                         "connection (repeatable)")
    ap.add_argument("--policy", type=policies, default=frozenset(["pack"]),
                    metavar="pack|suspend|pack,suspend",
                    help="what to do with fully idle VMs (default pack)")
    ap.add_argument("--idle-cpus", type=cpus, metavar="LIST",
                    help="where packed threads go, e.g. 1 or 0-1,3 "
                         "(default: the last CPU, see above)")
    ap.add_argument("--suspend-after", type=seconds, default=10.0,
                    metavar="T", help="suspend: pause a VM fully idle for "
                    "this long (default 10 s)")
    ap.add_argument("--suspend-max", type=seconds, default=60.0,
                    metavar="T", help="suspend: resume a paused libvirt "
                    "domain after this long at the latest (default 60 s; "
                    "0: never by time)")
    ap.add_argument("--interval", type=seconds, default=0.1, metavar="T",
                    help="how often libvirt domains' states are read "
                         "(default 100 ms)")
    ap.add_argument("--pack-after", type=seconds, default=0.5, metavar="T",
                    help="pack a VM FULL_NOTED continuously for this long "
                         "(default 500 ms)")
    ap.add_argument("--restore-after", type=seconds, default=0.2,
                    metavar="T", help="restore a packed VM out of "
                    "FULL_NOTED continuously for this long (default 200 ms)")
    ap.add_argument("--max-actions", type=count, default=6, metavar="N",
                    help="at most N packs and suspends per VM in any 60 s "
                         "(default 6; 0: no limit)")
    ap.add_argument("--state-dir", default=DEFAULT_STATE_DIR, metavar="DIR",
                    help="where the journal and the history are kept "
                         "(default %(default)s; 'none': no journal)")
    ap.add_argument("--metrics-file", metavar="PATH",
                    help="write Prometheus text-format metrics there after "
                         "each change (default: none)")
    ap.add_argument("--history", action="store_true",
                    help="print the action history of --state-dir and exit")
    ap.add_argument("--once", action="store_true",
                    help="apply the policies to the VMs fully idle now and "
                         "exit (nothing undone)")
    ap.add_argument("--dry-run", action="store_true",
                    help="print the decisions only")
    ap.add_argument("--verbose", action="store_true",
                    help="also log connections, events and retries")
    return ap


def make_sources(args, ctx, wrap=None):
    """The sources the options ask for; raises ImportError when --libvirt
    is given and the libvirt binding is missing."""
    from .vmm_source import VmmSource
    dir_ = None if args.dir in ("", "none") else args.dir
    sources = [VmmSource(ctx, dir_, args.socket)]
    if args.libvirt:
        from .libvirt_source import LibvirtSource
        for uri in args.libvirt:
            sources.append(LibvirtSource(ctx, uri, idle=args.idle_cpus,
                                         interval=args.interval,
                                         events=not args.once, wrap=wrap))
    return sources


def check(ap, args):
    if args.interval < 0.01:
        ap.error("--interval %g: at least 10 ms" % args.interval)


def open_journal(args, log):
    """The journal --state-dir asks for (none with --dry-run, which changes
    nothing); raises JournalLocked / JournalError."""
    if args.state_dir in ("", "none"):
        log("warning: --state-dir none: no journal; a run killed while VMs "
            "are packed or suspended leaves them so")
        return NoJournal()
    if args.dry_run:
        return NoJournal()
    return Journal(args.state_dir, log)


def run(ap, args, log):
    """The daemon or --once, as @args say. Returns the exit status."""
    from .daemon import Context, Daemon
    from .reconcile import reconcile
    check(ap, args)
    idle = args.idle_cpus
    if idle is None:
        idle = {max(os.sched_getaffinity(0))}
    steps.configure(warn=log)
    try:
        journal = open_journal(args, log)
    except (JournalLocked, JournalError) as e:
        sys.stderr.write("sysidle-consolidate: %s\n" % e)
        return 1
    if journal.enabled:
        logsetup.add_history(journal.dir)
    metrics = None
    if args.metrics_file:
        from .metrics import Metrics
        metrics = Metrics(args.metrics_file)
    ctx = Context(log, args.policy, args.suspend_after, args.suspend_max,
                  idle=idle, dry=args.dry_run, once=args.once,
                  pack_after=0.0 if args.once else args.pack_after,
                  restore_after=args.restore_after,
                  max_actions=args.max_actions, journal=journal,
                  metrics=metrics)
    try:
        sources = make_sources(args, ctx)
    except ImportError as e:
        sys.stderr.write("sysidle-consolidate: --libvirt needs the libvirt "
                         "Python binding (python3-libvirt): %s\n" % e)
        return 1
    d = Daemon(ctx, sources)
    if not args.dry_run:
        reconcile(ctx, sources)
    if args.once:
        return d.once()
    why = d.run()
    d.finish(why)
    return 0


def main(argv=None):
    """The program: parses @argv (default sys.argv[1:]), runs the daemon,
    --once or the plan. Returns the exit status."""
    parser = build_parser(HELP)
    plan.add_arguments(parser)
    args = parser.parse_args(argv)
    if args.history:
        return logsetup.print_history(args.state_dir)
    plain = bool(args.hosts or args.plan_input)
    logsetup.setup(args.verbose, plain=plain)
    log = Log(args.verbose)
    if plain:
        return plan.run(args, log)
    return run(parser, args, log)
