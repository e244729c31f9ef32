# SPDX-License-Identifier: GPL-2.0-only
"""The command line of sysidle-consolidate: its help (HELP), its options,
and the run they ask for (the daemon, --once, or the migration plan);
main() is the program, for the script tools/sysidle-consolidate and for
python3 -m sysidle_consolidate."""
import argparse
import os
import re
import sys

from . import conffile, logsetup, plan, status, steps
from .helptext import HELP
from .common import Log, parse_cpus
from .journal import Journal, JournalError, JournalLocked, NoJournal
from .policy import parse_policy
from .version import version


DEFAULT_STATE_DIR = "/var/lib/sysidle/consolidate"

USAGE = ("%(prog)s [--dir DIR] [--socket PATH ...] [--libvirt URI ...]\n"
         "       [--policy pack|suspend|pack,suspend] [--idle-cpus LIST]\n"
         "       [--suspend-after T] [--suspend-max T] [--interval T]\n"
         "       [--pack-after T] [--restore-after T] [--max-actions N]\n"
         "       [--state-dir DIR] [--metrics-file PATH] [--stop-timeout T]\n"
         "       [--once] [--dry-run] [--verbose] [--config FILE]\n"
         "       %(prog)s --status [--json] [--state-dir DIR]\n"
         "       %(prog)s --history [--state-dir DIR]\n"
         "       %(prog)s --version")


def seconds(text):
    """"0.3", "300ms", "10s", "2m" -> seconds (a float >= 0)."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*(ms|s|m|)\s*", text)
    if not m:
        raise argparse.ArgumentTypeError(
            "%r is not a time (seconds, or a number with ms, s or m)" % text)
    v = float(m.group(1))
    return v / 1000 if m.group(2) == "ms" else v * 60 \
        if m.group(2) == "m" else v


def stop_seconds(text):
    """--stop-timeout: a time from 1 s to 1 h."""
    v = seconds(text)
    if not 1.0 <= v <= 3600.0:
        raise argparse.ArgumentTypeError("%r is not from 1 s to 1 h" % text)
    return v


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


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """argparse's, with "Usage:" as GNU programs (and help2man) write it."""

    def add_usage(self, usage, actions, groups, prefix=None):
        super().add_usage(usage, actions, groups, "Usage: ")


def build_parser(doc):
    ap = argparse.ArgumentParser(
        prog="sysidle-consolidate", usage=USAGE,
        description=doc.split("\n\n", 2)[2] if doc else None,
        formatter_class=HelpFormatter)
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
    ap.add_argument("--stop-timeout", type=stop_seconds, default=30.0,
                    metavar="T", help="after SIGTERM or SIGINT, exit at once "
                    "(status 3) when the exit's resumes and restores have "
                    "not ended within T, 1 s to 1 h (default 30 s): a "
                    "libvirt call that does not return")
    ap.add_argument("--max-actions", type=count, default=6, metavar="N",
                    help="at most N packs and suspends per VM in any 60 s "
                         "(default 6; 0: no limit)")
    ap.add_argument("--state-dir", default=DEFAULT_STATE_DIR, metavar="DIR",
                    help="where the journal and the history are kept "
                         "(default %(default)s; 'none': no journal)")
    ap.add_argument("--metrics-file", metavar="PATH",
                    help="write Prometheus text-format metrics there after "
                         "each change (default: none)")
    ap.add_argument("--once", action="store_true",
                    help="apply the policies to the VMs fully idle now and "
                         "exit (nothing undone; journaled)")
    ap.add_argument("--dry-run", action="store_true",
                    help="print the decisions only")
    ap.add_argument("--verbose", action="store_true",
                    help="also log connections, events and retries")
    add_state_options(ap, "sysidle-consolidate.conf",
                      "print what the daemon of --state-dir holds (the VMs "
                      "it packed or suspended) as a table, and exit")
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
    d = Daemon(ctx, sources, stop_timeout=args.stop_timeout)
    if not args.dry_run:
        reconcile(ctx, sources)
    if args.once:
        return d.once()
    why = d.run()
    d.finish(why)
    return 0


def with_config(parser, argv, default_config, prog="sysidle-consolidate"):
    """@argv after the entries of the configuration file: --config's, else
    @default_config when it exists. Exits 2 (usage) on a bad file, its
    line saying @prog."""
    path = conffile.config_arg(argv)
    if path is None and default_config and os.path.exists(default_config):
        path = default_config
    if path is None:
        return argv
    try:
        return conffile.read(path, parser, argv) + argv
    except conffile.ConfError as e:
        sys.stderr.write("%s: %s\n" % (prog, e))
    except OSError as e:
        sys.stderr.write("%s: %s: %s\n" % (prog, path, e.strerror))
    sys.exit(2)


def add_state_options(g, conf_name, status_help):
    """The options every daemon of this package has besides its own:
    --status, --json, --history, --config (@conf_name: its file in
    SYSCONFDIR/sysidle), --version; @g: an argparse parser or group."""
    g.add_argument("--status", action="store_true", help=status_help)
    g.add_argument("--json", action="store_true",
                   help="with --status: one JSON object instead")
    g.add_argument("--history", action="store_true",
                   help="print the action history of --state-dir and exit")
    g.add_argument("--config", metavar="FILE",
                   help="read options from FILE first (sysidle.conf(5); "
                        "default: the installed program's "
                        "SYSCONFDIR/sysidle/%s when it exists); the command "
                        "line wins" % conf_name)
    g.add_argument("--version", action="version",
                   version="%(prog)s " + version() +
                   "\nLicense GPL-2.0-only: this is free software, "
                   "there is NO WARRANTY.",
                   help="print the version and exit")


def main(argv=None, default_config=None):
    """The program: parses @argv (default sys.argv[1:]) after the entries of
    the configuration file (--config, else @default_config: the installed
    script's), runs the daemon, --once or the plan. Returns the exit
    status."""
    parser = build_parser(HELP)
    plan.add_arguments(parser)
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(with_config(parser, argv, default_config))
    if args.json and not args.status:
        parser.error("--json goes with --status")
    if args.status:
        return status.print_status(args.state_dir, args.json)
    if args.history:
        return logsetup.print_history(args.state_dir)
    plain = bool(args.hosts or args.plan_input)
    logsetup.setup(args.verbose, plain=plain)
    log = Log(args.verbose)
    if plain:
        return plan.run(args, log)
    return run(parser, args, log)
