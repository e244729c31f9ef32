# SPDX-License-Identifier: GPL-2.0-only
"""The fleet daemon's main loop: the hosts' reports (hosts.py), the rules
(decide.py), the actions on threads of their own (migrate.py, the hooks of
hooks.py), the journal; the stop.

One thread decides; everything that can block runs elsewhere and reports
back through the inbox, which wakes the loop (a socket pair). The loop
sleeps with no timeout when nothing is due: a settled fleet costs the
daemon libvirt's keepalive, the --interval reads, and one read of a
domain when its host's bridge renews its lease (hosts.py).

Order of a pass: the reports taken in; the busy and empty times updated;
unresolved migrations settled (their hosts and domains are left out of
every decision meanwhile); nothing decided in the first START_GRACE_S
while a host has neither answered nor failed yet (a plan made without it
would not know its room); then, only on snapshots newer than the last
migration's end: unpack (a host over budget: busy domains off it, a
standby host woken first when none has room); else, when nothing moves
and no host is waking, the pack plan (carried out as a batch: all its
moves, --parallel at a time, before anything is planned again; a move
that fails or is not started stops the other moves of its source, which
then stays on); else the empty hosts to standby.

Journal (journal.py's file in --state-dir): "migration:UUID" entries
(migrate.py) and "standby:NAME" {"kind": "standby", "host", "phase":
"begin" (written before the begin hook), "standby" (after it), "end"
(before the end hook)}: dropped once the host answers again. At start an
entry "begin" or "end" runs its hook again (hooks are idempotent), a
"standby" host is taken as in standby, and "migration" entries are
settled (migrate.settle) before their hosts are used."""
import queue
import select
import signal
import socket
import time

from ..planner import EXIT_OK
from . import decide
from .hosts import Watcher
from .migrate import Migration, Resolver
from .model import CONNECTING, LOST, REFUSED, STANDBY, UP, WAKING
from .standby import Standby, standby_key

SETTLE_RETRY_S = 5.0    # unresolved migrations are settled again after
START_GRACE_S = 15.0    # at most this long, nothing is decided before
#                         every host has answered or failed once


class Options:
    """What the loop needs of the command line besides the rules."""

    def __init__(self, parallel=2, migrate_timeout=300.0, wake_timeout=300.0,
                 keepalive=5, interval=30.0, hooks_dir=None,
                 hook_timeout=60.0, dry_run=False):
        self.parallel = parallel
        self.migrate_timeout = migrate_timeout
        self.wake_timeout = wake_timeout
        self.keepalive = keepalive
        self.interval = interval
        self.hooks_dir = hooks_dir
        self.hook_timeout = hook_timeout
        self.dry_run = dry_run


class Counters:
    def __init__(self):
        self.migrations = {}        # (why, result) -> n
        self.migration_s = {}       # why -> total seconds of those done
        self.hooks = {}             # (sub, ok|failed) -> n
        self.lost = 0
        self.settled = {}           # outcome -> n
        self.last_action = 0.0

    def add(self, table, key, n=1):
        table[key] = table.get(key, 0) + n
        self.last_action = time.time()


class Fleet(Standby):
    def __init__(self, hosts, knobs, opts, journal, log, outputs=None):
        self.hosts = {h.name: h for h in hosts}
        self.knobs = knobs
        self.opts = opts
        self.journal = journal
        self.log = log
        self.outputs = outputs      # outputs.Outputs, or None
        self.memory = decide.Memory()
        self.counters = Counters()
        self.inbox = queue.Queue()
        self.wake_rd, self.wake_wr = socket.socketpair()
        self.wake_rd.setblocking(False)
        self.wake_wr.setblocking(False)
        self.watchers = {}
        self.migrations = {}        # uuid -> Migration
        self.batch = []             # pack moves not started yet
        self.hook_jobs = {}         # host name -> "begin" | "end"
        self.unresolved = {}        # journal key -> entry
        self.resolver = None
        self.settle_at = 0.0
        self.last_end = 0.0         # monotonic end of the last migration
        self.retry_at = {}          # host name -> no standby / wake before
        self.said = {}              # what was said, to say it once
        self.stopping = None
        self.started = None         # monotonic time of start()

    # --- plumbing ---------------------------------------------------------
    def wake(self):
        try:
            self.wake_wr.send(b"x")
        except OSError:
            pass

    def post(self, *item):
        """Any thread: a report for the loop."""
        self.inbox.put(item)
        self.wake()

    def say_once(self, key, text):
        """Logs @text unless it is what was said last under @key."""
        if self.said.get(key) != text:
            self.said[key] = text
            self.log(text)

    # --- start --------------------------------------------------------------
    def start(self):
        self.started = time.monotonic()
        for key, e in sorted(self.journal.entries.items()):
            if e.get("kind") == "migration":
                missing = [e.get(s) for s in ("src", "dst")
                           if e.get(s) not in self.hosts]
                if missing:
                    self.log("error journal %s: migration of %s names host "
                             "%s, not configured: settle it by hand, then "
                             "remove the entry" % (key, e.get("name"),
                                                   ", ".join(map(str,
                                                                 missing))))
                self.unresolved[key] = e
                self.log("journal: migration of %s %s -> %s (%s) was under "
                         "way: settling it before its hosts are used" % (
                             e.get("name"), e.get("src"), e.get("dst"),
                             e.get("phase")))
            elif e.get("kind") == "standby":
                name = e.get("host")
                h = self.hosts.get(name)
                if h is None:
                    self.log("warning journal %s: host %s is not configured "
                             "any more: entry dropped" % (key, name))
                    self.journal.drop(key)
                    continue
                phase = e.get("phase")
                self.log("journal: host %s %s" % (name, {
                    "begin": "was being put in standby: its begin hook "
                             "runs again",
                    "standby": "is in standby",
                    "end": "was being woken: its end hook runs again"}.get(
                        phase, "(phase %s)" % phase)))
                if phase == "end":
                    h.set_state(WAKING, time.monotonic())
                    self._run_hook(h, "end")
                else:
                    h.set_state(STANDBY, time.monotonic())
                    if phase == "begin":
                        self._run_hook(h, "begin")
        for h in self.hosts.values():
            h.set_state(h.state, time.monotonic())     # its start time
            w = Watcher(h.name, h.uri, self._report, self.opts.interval,
                        self.opts.keepalive)
            self.watchers[h.name] = w
            w.start()

    def _report(self, name, snap, err):
        self.post("host", name, snap, err)

    # --- reports ------------------------------------------------------------
    def drain(self):
        try:
            while self.wake_rd.recv(4096):
                pass
        except OSError:
            pass
        while True:
            try:
                item = self.inbox.get_nowait()
            except queue.Empty:
                return
            getattr(self, "_on_" + item[0])(*item[1:])

    def _on_host(self, name, snap, err):
        h = self.hosts[name]
        now = time.monotonic()
        if h.state == REFUSED:
            return
        if snap is None:
            h.error = err
            if h.state == UP:
                h.set_state(LOST, now)
                h.snap = None
                self.log("error host %s lost (%s): its domains are unknown; "
                         "nothing migrates to or from it until it answers" %
                         (name, err))
            elif h.state in (CONNECTING, LOST):
                self.say_once("down " + name, "error host %s does not answer"
                              " (%s): trying again" % (name, err))
            return
        others = [o.name for o in self.hosts.values()
                  if o is not h and o.host_uuid and
                  o.host_uuid == snap.host_uuid]
        if others:
            h.set_state(REFUSED, now)
            h.snap = None
            h.error = "the host UUID of %s" % others[0]
            self.log("error host %s (%s) has host UUID %s, as host %s: one "
                     "machine given twice; %s is not used" % (
                         name, h.uri, snap.host_uuid, others[0], name))
            self.watchers[name].stop()
            return
        h.host_uuid = snap.host_uuid
        h.hostname = snap.hostname
        self.said.pop("down " + name, None)
        if h.state in (STANDBY, WAKING) and snap.mono < h.since:
            return              # read before it went to standby or woke
        if h.state == STANDBY:
            if not snap.domains:
                return          # awake and empty: still ready for standby
            self.log("warning host %s left standby by itself: %d domains "
                     "run there" % (name, len(snap.domains)))
            self.journal.drop(standby_key(name))
        elif h.state == WAKING:
            self.memory.woken_at[name] = now
            self.journal.drop(standby_key(name))
            self.log("wake %s: it answers, %.1f s after the wake began" %
                     (name, now - h.since))
        elif h.state in (CONNECTING, LOST):
            n_idle = sum(1 for d in snap.domains if decide.idle(d))
            self.log("host %s up: %s (host name %s, UUID %s), %d CPUs, %d "
                     "MiB, %d active domains (%d fully idle)" % (
                         name, h.uri, snap.hostname, snap.host_uuid,
                         snap.cpus, snap.memory_kib // 1024,
                         len(snap.domains), n_idle))
        h.set_state(UP, now)
        h.snap = snap
        h.error = None

    def _on_migrated(self, mig):
        m, o = mig.move, mig.outcome
        now = time.monotonic()
        self.migrations.pop(m.uuid, None)
        self.last_end = now
        for n in (m.src, m.dst):
            if n in self.watchers:
                self.watchers[n].kick()
        self.counters.add(self.counters.migrations, (m.why, o.result))
        what = "%s %s -> %s (%s)" % (m.name, m.src, m.dst, m.why)
        if o.result == "ok":
            self.memory.migrated_at[m.uuid] = now
            if m.why == "unpack":
                self.memory.unpacked_at[m.src] = now
                self.memory.unpacked_at[m.dst] = now
            self.counters.add(self.counters.migration_s, m.why, o.seconds)
            self.log("migrated %s in %.1f s%s" % (
                what, o.seconds, "; " + o.why if o.why else ""))
            return
        self.memory.failed_at[m.uuid] = now
        if o.result == "skipped":
            self.log("warning migration %s not started: %s" % (what, o.why))
        else:
            where = {"stayed": "it runs on %s" % m.src,
                     "lost": "it runs on neither host",
                     "conflict": "it runs on both hosts: settle it by hand",
                     "waiting": "where it runs is not known yet (settled "
                                "when both hosts answer)"}.get(o.where,
                                                                o.where)
            self.log("error migration %s failed after %.1f s: %s; %s" %
                     (what, o.seconds, o.why, where))
            if o.where == "lost":
                self.counters.lost += 1
            if o.where in ("waiting", "conflict"):
                key = "migration:%s" % m.uuid
                self.unresolved[key] = self.journal.entries.get(key, {
                    "kind": "migration", "name": m.name, "uuid": m.uuid,
                    "src": m.src, "dst": m.dst})
        if m.why == "pack":
            left = [x for x in self.batch if x.src == m.src]
            self.batch = [x for x in self.batch if x.src != m.src]
            self.log("host %s not emptied, it stays on%s" % (
                m.src, ": %d moves not attempted (%s)" % (
                    len(left), ", ".join(x.name for x in left))
                if left else ""))

    def _on_settled(self, res):
        self.resolver = None
        self.settle_at = time.monotonic() + SETTLE_RETRY_S
        for key, where in res.results.items():
            entry = self.unresolved.get(key, {})
            if where == "waiting":
                continue
            self.unresolved.pop(key, None)
            self.counters.add(self.counters.settled, where)
            if where == "lost":
                self.counters.lost += 1
            level = "error " if where in ("lost", "conflict") else ""
            self.log("%ssettled migration of %s %s -> %s: %s" % (
                level, entry.get("name"), entry.get("src"), entry.get("dst"),
                {"moved": "it runs on %s" % entry.get("dst"),
                 "stayed": "it runs on %s" % entry.get("src"),
                 "lost": "it runs on neither host",
                 "conflict": "it runs on both: settle it by hand"}[where]))
            if where == "conflict":
                self.unresolved[key] = entry    # never forgotten
            for side in ("src", "dst"):
                w = self.watchers.get(entry.get(side))
                if w:
                    w.kick()

    # --- actions -----------------------------------------------------------
    def _migrate(self, m):
        if self.opts.dry_run:
            self.say_once("dry " + m.uuid, "dry-run: would migrate %s %s -> "
                          "%s (%s)" % (m.name, m.src, m.dst, m.why))
            return
        src, dst = self.hosts[m.src], self.hosts[m.dst]
        mig = Migration(m, src, dst, self.hosts, self.journal, self.log,
                        lambda x: self.post("migrated", x),
                        self.opts.migrate_timeout, self.opts.keepalive)
        self.migrations[m.uuid] = mig
        self.log("migrating %s %s -> %s (%s)" % (m.name, m.src, m.dst,
                                                  m.why))
        mig.start()

    def _settle(self, now):
        if self.resolver is not None or not self.unresolved or \
                now < self.settle_at:
            return
        todo = {k: e for k, e in self.unresolved.items()
                if all(self.hosts.get(e.get(s)) is not None and
                       self.hosts[e.get(s)].state == UP for s in ("src",
                                                                  "dst"))}
        if not todo:
            return
        self.resolver = Resolver(todo, self.hosts, self.journal, self.log,
                                 lambda r: self.post("settled", r),
                                 self.opts.keepalive)
        self.resolver.start()

    # --- a pass -------------------------------------------------------------
    def view(self):
        """The hosts the rules may use: not those going to standby (their
        begin hook runs), nor those an unresolved migration names. (A host
        whose end hook still runs once it answers is up: usable.)"""
        blocked = {n for n, sub in self.hook_jobs.items() if sub == "begin"}
        for e in self.unresolved.values():
            blocked.update((e.get("src"), e.get("dst")))
        return [h for h in self.hosts.values() if h.name not in blocked]

    def act(self, now):
        hosts = list(self.hosts.values())
        self.memory.observe(hosts, now)
        for h in hosts:
            if h.state == WAKING and h.name not in self.hook_jobs and \
                    now - h.since > self.opts.wake_timeout:
                self._wake_failed(h, now, "no answer within --wake-timeout "
                                  "%g s" % self.opts.wake_timeout)
        self._settle(now)
        if now - self.started < START_GRACE_S and any(
                h.state == CONNECTING and h.error is None for h in hosts):
            return      # a plan without a host that is about to answer
        view = self.view()
        stale = [h for h in view if h.state == UP and
                 h.snap.mono < self.last_end]
        if stale:
            for h in stale:
                self.watchers[h.name].kick()
            return
        moving = set(self.migrations)
        moving.update(e.get("uuid") for e in self.unresolved.values())
        if self.migrations or self.batch:
            # a batch under way: decided on snapshots from before it, it
            # goes on; only a host over budget stops a pack batch's moves
            # not started yet
            if self.batch and self.batch[0].why == "pack":
                u = decide.unpack(view, self.memory, now, self.knobs, moving)
                if u.over:
                    self.log("pack stopped: %s over budget (%d moves not "
                             "started)" % (", ".join(sorted(u.over)),
                                           len(self.batch)))
                    self.batch = []
            self._next_of_batch()
            return
        u = decide.unpack(view, self.memory, now, self.knobs, moving)
        for line in u.stuck:
            self.say_once("stuck " + line.split(" ", 1)[0],
                          "warning " + line)
        waking = any(h.state == WAKING for h in hosts) or \
            "end" in self.hook_jobs.values()
        if u.wake and not waking and self.retry_at.get(u.wake, 0) <= now:
            self._wake(u.wake, now, "no host that is up has room for the "
                       "busy domains of %s" % ", ".join(sorted(u.over)))
        if u.moves:
            for m in u.moves:
                self.log(m.line)
            self.batch = list(u.moves)
            self._next_of_batch()
            return
        if u.over or any(h.state == WAKING for h in hosts):
            return
        plan = decide.pack(view, self.memory, now, self.knobs,
                           int(time.time() * 1000), moving)
        if plan is not None and plan.status == EXIT_OK and plan.moves:
            sig = " ".join("%s:%s:%s" % (m.name, m.src, m.dst)
                           for m in plan.moves)
            if self.opts.dry_run and self.said.get("plan") == sig:
                return
            self.said["plan"] = sig
            for line in plan.lines:
                self.log("plan: " + line)
            self.batch = [decide.Move(m.name, m.uuid, m.src, m.dst, "pack",
                                      m.line) for m in plan.moves]
            self._next_of_batch()
            return
        busy = set(self.hook_jobs)
        for name in decide.standby(view, self.memory, now, self.knobs, busy):
            if self.retry_at.get(name, 0) <= now:
                self._standby(self.hosts[name], now)

    def _next_of_batch(self):
        """Starts the batch's next moves, up to --parallel under way. A
        dry run only logs them, and the batch ends there."""
        while self.batch and (self.opts.dry_run or
                              len(self.migrations) < self.opts.parallel):
            m = self.batch.pop(0)
            src, dst = self.hosts[m.src], self.hosts[m.dst]
            if src.state != UP or dst.state != UP:
                self.log("warning migration %s %s -> %s (%s) not started: "
                         "%s is %s" % (m.name, m.src, m.dst, m.why,
                                       m.src if src.state != UP else m.dst,
                                       (src if src.state != UP
                                        else dst).state))
                if m.why == "pack":
                    self.batch = [x for x in self.batch if x.src != m.src]
                continue
            self._migrate(m)

    def next_due(self, now):
        dues = [decide.next_due(list(self.hosts.values()), self.memory, now,
                                self.knobs, int(time.time() * 1000))]
        dues += [t for t in self.retry_at.values() if t > now]
        dues += [h.since + self.opts.wake_timeout
                 for h in self.hosts.values() if h.state == WAKING]
        if self.unresolved and self.resolver is None:
            dues.append(max(self.settle_at, now + 0.001))
        if now - self.started < START_GRACE_S:
            dues.append(self.started + START_GRACE_S)
        dues = [d for d in dues if d is not None]
        return min(dues) if dues else None

    # --- the loop -----------------------------------------------------------
    def busy(self):
        return bool(self.migrations or self.hook_jobs or
                    self.resolver is not None)

    def run(self, until=None):
        """Until SIGTERM / SIGINT (or the monotonic time @until: tests) and
        then until what is under way has ended. Returns the signal's name
        or "end"."""
        self.start()
        while True:
            self.drain()
            now = time.monotonic()
            if self.stopping is not None or (until is not None and
                                              now >= until):
                if self.stopping is None:
                    self.stopping = "end"
                if not self.busy():
                    break
                self.say_once("stopping", "stopping: waiting for %d "
                              "migrations, %d hooks%s to end" % (
                                  len(self.migrations), len(self.hook_jobs),
                                  ", a settling" if self.resolver else ""))
                due = None
            else:
                self.act(now)
                due = self.next_due(now)
                if until is not None:
                    due = until if due is None else min(due, until)
            if self.outputs is not None:
                self.outputs.update(self)
            self.wait(due)
        for w in self.watchers.values():
            w.stop()
        return self.stopping if isinstance(self.stopping, str) else \
            signal.Signals(self.stopping).name

    def wait(self, until):
        timeout = None if until is None else max(0.0,
                                                 until - time.monotonic())
        try:
            select.select([self.wake_rd], [], [], timeout)
        except InterruptedError:
            pass
