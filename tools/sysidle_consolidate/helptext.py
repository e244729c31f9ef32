# SPDX-License-Identifier: GPL-2.0-only
"""sysidle-consolidate's --help (HELP): what the tool does, in full; the
command line (cli.py) shows it."""

# The help: its first two paragraphs are the usage, the rest is --help's
# description.
HELP = """sysidle-consolidate: act on fully idle VMs: pack them onto a few host
CPUs, suspend them.

usage: sysidle-consolidate [--dir DIR] [--socket PATH ...] [--libvirt URI ...]
                           [--policy pack|suspend|pack,suspend]
                           [--idle-cpus LIST] [--suspend-after T]
                           [--suspend-max T] [--interval T]
                           [--pack-after T] [--restore-after T]
                           [--max-actions N] [--state-dir DIR]
                           [--metrics-file PATH] [--stop-timeout T]
                           [--once] [--dry-run] [--verbose]
       sysidle-consolidate --history [--state-dir DIR]
       sysidle-consolidate --hosts URI,... | --plan-input FILE
                           [--apply] [BUDGET OPTIONS] [--dump-inventory FILE]

It follows every VM it can see and applies a policy when a VM becomes
fully idle (its idle state reaches FULL_NOTED) and when it wakes (leaves
FULL_NOTED):

- this project's VMM (build/vmm --sysidle): every socket *.sock in DIR
  (default /run/sysidle, watched with inotify: a new socket is seen at
  once; --dir none: no directory) and every --socket PATH, one "watch"
  connection each (vmm/export/README.md, "Control socket protocol"). A socket
  that does not answer yet is tried again after 50 ms, 100 ms, ...,
  then every second (a --socket PATH) or every minute (a socket in the
  watched DIR: a VMM that starts there creates its socket anew, which
  inotify reports at once); the whole directory is rescanned every
  second when inotify cannot be used;
- libvirt domains: the running domains of each --libvirt URI; their idle
  state is what the libvirt bridge publishes in their metadata (namespace
  urn:sysidle:1, element <state name=.. num=.. since_unix_ms=..>), read
  every --interval (default 100 ms) and at once on a metadata or lifecycle
  event. No such element, or one not to be trusted (its lease,
  valid_until_unix_ms, ran out, or its writer ran on this host and is
  gone: a warning): the state is unknown; nothing is done to the domain,
  and what was done (packed, suspended) is undone, since its wake could no
  longer be seen. A domain that stops or disappears is forgotten.

Policies (--policy, default pack; pack,suspend for both):

pack     A VM FULL_NOTED continuously for --pack-after T (default 500
         ms) has its vCPU threads and its housekeeping thread (libvirt:
         its vCPUs and its emulator thread) moved onto the idle CPUs
         (--idle-cpus LIST, e.g. 1 or 0-1,3; default the last CPU: for
         this VMM the last one this process may run on, for libvirt the
         host's last online CPU). What they were on is remembered and put
         back exactly once the VM has been out of FULL_NOTED continuously
         for --restore-after T (default 200 ms); back in FULL_NOTED before
         that, nothing happens. This VMM: the thread ids are learnt once
         (one status request after the watch connects, again after
         dropped events or a thread that is gone), checked against the
         socket's peer (SO_PEERCRED) and /proc/PID/task; each thread's
         own affinity is read once, at the first pack; a pack or a
         restore is then one sched_setaffinity per thread and nothing
         else. The VMM's pidfd is watched: its death is seen at once and
         its threads are never touched again. libvirt:
         virDomainPinVcpuFlags and virDomainPinEmulator on the live domain
         only (the persistent configuration is never changed), the
         pinning read first with vcpuPinInfo and emulatorPinInfo.
         The defaults, from bench/consolidate.py (8 VMs of 2 vCPUs):
         500 ms is below the full idle periods of a guest with a job
         once a second (about 980 ms: packed, and then its jobs run
         where it is parked: 97% of its CPU time on the idle CPU, no
         action in steady state, no more CPU or wake-ups than not
         packing) and above those of a job ten times a second (about
         80 ms: never packed, nothing spent on it); 200 ms is far above
         such a job's time out of full idle (a few ms) and short for
         real work, which gets its CPUs back within 200 ms.
suspend  A VM FULL_NOTED for --suspend-after T (default 10 s; counted
         from when its state began, as the VM reports it) is paused, and
         resumed at once when it leaves FULL_NOTED. This VMM: {"cmd":"pause"}
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
--max-actions N (default 6; 0: no limit): at most N packs and suspends
         per VM in any 60 s; one more is held (one "hold" line) until the
         window allows it, and done then if the VM still qualifies.
         Restores and resumes are never held back.
Times (T) are seconds, or a number with ms, s or m: 0.3, 300ms, 2m.

Settled edges: the watch asks this VMM for its filtered watch ("edges":
"full_idle", "enter_after_ms" = --pack-after, "leave_after_ms" =
--restore-after): the VMM then reports a VM only once it has been
FULL_NOTED for --pack-after, or out of it for --restore-after, and the
tool acts on each report at once; a guest that wakes briefly and often
costs the tool nothing. A VMM without the filter (its reply has no
"edges") sends every state change: the tool applies the same hysteresis
itself (said once per VM with --verbose). With settled edges, the
"FULL_NOTED for --suspend-after" of the suspend policy is not reset by
wakes shorter than --restore-after (the VMM does not report them); on raw
state changes each wake starts it again. When the VMs are idle (or wake
for less than --restore-after with settled edges) the tool sleeps with
no timer at all: no wake-up. (libvirt domains are still read every
--interval.)

Each action is one line on stdout, "TIME LEVEL message" (UTC, ms;
actions INFO, failures ERROR, retries and holds WARNING, --verbose lines
DEBUG); run by systemd (JOURNAL_STREAM set), "<6>message" instead: the
syslog priority and no time. NAME is the VMM's name, or the libvirt
domain's:

  2026-12-04T17:30:00.123Z INFO pack NAME: 3 threads -> cpus 1 (FULL_NOTED)
  ... INFO restore NAME: 3 threads -> their own affinity 4246:0-1 4247:0-1 4243:0-1 (FULL_NOTED -> NOT)
  ... INFO pack NAME: 2 vcpus, emulator -> cpus 7 (FULL_NOTED)
  ... INFO restore NAME: 2 vcpus, emulator -> their own pinning 0:0 1:1-2 emulator:3 (FULL_NOTED -> NOT)
  ... INFO suspend NAME: paused (FULL_NOTED for 10.0 s, --suspend-after 10.0)
  ... INFO resume NAME: after 4.2 s (FULL_NOTED -> NOT)
  ... INFO resume NAME: after 60 s (--suspend-max 60)
  ... INFO resumed NAME: by the VMM (timer) after 4210 ms paused
  ... INFO resumed NAME: by someone else after 3.0 s
  ... WARNING hold NAME: 6 actions in the last 60 s (--max-actions 6): next pack not before +12.5 s
  ... INFO forget NAME: no longer running (was packed and suspended)
  ... INFO reconcile NAME: adopted (packed, suspended) from the journal
  ... INFO reconcile NAME: gone (pid 1234 no longer runs): entry dropped
  ... INFO leave NAME: state NOT                            (--once)

"[dry run]" ends the line with --dry-run; ": N failed, retrying" when some
calls failed. A failed call is logged and retried with back-off, after 10,
50, 200, 500, 1000 ms:

  ... WARNING retry NAME: WHAT failed (REASON), again in 10 ms (ACTION)
  ... INFO retry NAME: WHAT done (ACTION)
  ... ERROR error NAME: WHAT failed 6 times (REASON): giving up (ACTION)

A pack or a pause is given up after those 5 retries. A restore or a resume
is never given up while the VM is followed (after the 5 back-offs it is
tried every second), so no VM stays on the idle CPUs or paused after it
woke; a thread or a domain that no longer exists needs nothing and is
dropped. A VM whose socket closes or disappears gets its restore and resume
attempted and is then forgotten. A line from a VMM's socket has at most
1 MiB: a longer one ends its connection like a close ("SOCKET: line N:
longer than 1048576 bytes"); a status request waits 2 s at most. A
domain's urn:sysidle:1 element has at most 65536 characters (longer: its
state is unknown).

The journal (--state-dir DIR, default /var/lib/sysidle/consolidate,
created mode 0700; 'none': no journal, with a warning): DIR/journal.json
holds, for each VM packed or suspended, its original affinities (libvirt:
pinning) and what is held, keyed by the VMM's pid and start time (libvirt:
the domain's UUID and id), rewritten atomically (a temporary file, fsync,
rename, fsync of DIR) before every pack and suspend and after every
restore and resume. A second instance on the same DIR is refused (DIR/lock;
exit 1). At start each entry is reconciled ("reconcile NAME: ..." lines):
a VM that still runs is adopted, its journaled originals being what a
restore puts back, and what the killed run left half done is completed
(all its threads on the idle CPUs again; a pause that never came, or
that the VMM has ended since, no longer held); it is restored or resumed
as soon as it is seen awake (or at SIGTERM); a VM that is gone is
dropped; a VMM that still runs but whose socket cannot be followed has
its threads restored directly from the journal (and a resume request if
it was paused). So a run killed in any way (SIGKILL, a crash, a reboot
of the tool) leaves the next run on the same DIR able to put every VM
back. The action lines are also kept in DIR/history.log (at 1 MiB it
becomes history.log.1, one older copy); --history prints them and exits.
--dry-run neither reads nor writes the journal.

--metrics-file PATH: the tool's own metrics in the Prometheus text format
(for node_exporter's textfile collector), rewritten atomically after each
change, never periodically: sysidle_consolidate_vms{state=watched|packed|
suspended}, sysidle_consolidate_actions_total{action=pack|restore|suspend|
resume|hold,result=ok|failed|retried|gone},
sysidle_consolidate_journal_entries, sysidle_consolidate_reconcile_total{
result=adopted|restored|dropped},
sysidle_consolidate_last_action_timestamp_seconds,
sysidle_consolidate_start_time_seconds and
sysidle_consolidate_settled_edges{watch=filtered|raw}.

--once      one pass: each VM's state now, the policies applied (no
            --pack-after; for suspend, a VM counts as idle since its
            state's since_unix_ms), print and exit. Nothing is undone by
            --once itself: a VM packed (or this VMM's VM paused) by --once
            stays so after it wakes (this VMM resumes itself), but what
            it did is journaled, so a later daemon on the same --state-dir
            restores it when the VM is awake. libvirt domains are never
            suspended by --once, since nothing would resume them.
--dry-run   print the decisions, change nothing.
--verbose   also log connections, state changes and events ("# " lines).

SIGTERM / SIGINT: every suspended VM is resumed and every packed VM
restored, then exit 0 (their journal entries dropped). Killed otherwise,
the journal lets the next run put them back (see above). The stop is
bounded whatever libvirt does: when it has not ended within
--stop-timeout (a libvirt call that never returns), or at a second
SIGTERM / SIGINT, it exits 3 at once, one warning saying what it was in
the middle of; what it still held stays in the journal.

Testing aid: with SYSIDLE_CONSOLIDATE_KILL_AT=N (an integer >= 1; other
values are ignored with a warning) the process kills itself with SIGKILL
just before its N-th step, after writing "kill-at N: WHAT" to stderr. The
steps, counted from the start: each journal write counts two (before its
temporary file is written, and before the rename), each call that changes
a VM one (a sched_setaffinity, a libvirt pin call, a pause or resume
request, a virDomainSuspend or virDomainResume).

Migration plan (--hosts URI,URI,... or --plan-input FILE): instead of the
daemon, one plan that gathers the fully idle libvirt domains of several
hosts onto the fewest hosts within a CPU and memory budget per host, one
line per decision with its reason; --apply makes the moves by live
migration (virDomainMigrateToURI3). The rules, the budget options and the
plan's own exit status (0 a host can be powered down, 3 nothing to do,
4 infeasible budget, 5 a migration failed, 6 inventory unreadable) are in
tools/sysidle_consolidate/plan.py.

--status [--json]: whether a daemon runs on --state-dir (it holds
DIR/lock) and what its journal holds: each VM packed or suspended, since
when, and the CPUs its threads were on before; a table, or one JSON
object {"state_dir","running","vms":[{"name","kind","packed","suspended",
"since_unix_ms","pid","uri","original_cpus"}]}. 1 when DIR is no state
directory.

Configuration file: the installed program first reads
SYSCONFDIR/sysidle/sysidle-consolidate.conf (/etc/sysidle/... for the
prefix /usr) when it exists, or --config FILE (which must exist): one
"key = value" per line, a long option's name as the key, a flag as the
bare key or "key = true|false|yes|no", '#' comment lines (sysidle.conf(5)).
The command line wins; its --socket and --libvirt replace the file's. A
bad key or value: "FILE:LINE: message", exit 2.

Exit status (daemon): 0 done; 1 (--once only) an action was given up after its
retries, or --libvirt without the libvirt Python binding, or the state
directory is in use or cannot be used; 1 (--status) no state directory;
2 bad usage or a bad configuration file; 3 stopped before the exit's
resumes and restores ended (--stop-timeout, or a second signal).
"""
