#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-only
"""sysidle-consolidate's state, without a VMM: the policy's hysteresis on
a fake clock (--pack-after, --restore-after, --max-actions and its hold),
the journal (atomic rewrite, a stale .tmp removed, the lock that refuses
a second instance, reloaded), the reconciliation at start (entries of
processes gone, of a reused pid, restored directly, adopted), and the
crash-test hook SYSIDLE_CONSOLIDATE_KILL_AT: the daemon, killed at each
step of a pack and a restore against a fake VMM socket, leaves a journal
from which the next run puts every thread back.

usage: test_consolidate_state.py TOOLS_DIR
(the package is imported through PYTHONPATH: TOOLS_DIR and tests/.) TAP
on stdout; exit 0 when every check passes, 77 with fewer than 2 CPUs."""
import contextlib
import io
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

from edge_vmm import EdgeVmm
from tap import check, finish

from sysidle_consolidate import common, daemon, journal, logsetup, policy
from sysidle_consolidate import reconcile
from sysidle_consolidate import vmm_source
from sysidle_consolidate.states import FULL_NOTED

TOOLS = os.path.abspath(sys.argv[1])
TOOL = os.path.join(TOOLS, "sysidle-consolidate")


class FakeTarget(policy.Target):
    def __init__(self, name="vm"):
        super().__init__(("fake", name), name)
        self.calls = []

    def do_pack(self, why):
        self.calls.append("pack")
        self.packed = {}

    def do_restore(self, why):
        self.calls.append("restore")
        self.packed = None

    def do_suspend(self, why):
        self.calls.append("suspend")
        self.suspended = True

    def do_resume(self, why):
        self.calls.append("resume")
        self.suspended = False


def test_hysteresis():
    lines = []
    p = policy.Policy({"pack"}, 10.0, 60.0, common.Log(out=lines),
                      pack_after=0.5, restore_after=0.2, max_actions=3)
    t = FakeTarget()
    p.state(t, FULL_NOTED, since=100.0, now=100.0)
    p.tick(t, 100.4)
    early = list(t.calls)
    due = p.next_due(t)
    p.tick(t, 100.5)
    check(early == [] and due == 100.5 and t.calls == ["pack"],
          "--pack-after 0.5: not packed 0.4 s into FULL_NOTED, due at 0.5 "
          "s, packed then", "%s %s %s" % (early, due, t.calls))
    p.state(t, "NOT", since=101.0, now=101.0)
    due = p.next_due(t)
    p.tick(t, 101.15)
    p.state(t, FULL_NOTED, since=101.15, now=101.15)
    p.tick(t, 102.0)
    check(t.calls == ["pack"] and due == 101.2 and t.packed is not None and
          p.next_due(t) is None,
          "a wake of 150 ms (< --restore-after 0.2): no restore, no pack, "
          "nothing due", "%s %s" % (t.calls, due))
    p.state(t, "NOT", since=103.0, now=103.0)
    p.tick(t, 103.19)
    mid = list(t.calls)
    p.tick(t, 103.2)
    check(mid == ["pack"] and t.calls == ["pack", "restore"],
          "out of FULL_NOTED for 200 ms: restored then, not before",
          str(t.calls))
    # settled edges: the source reports since = when it began
    p.state(t, FULL_NOTED, since=104.0 - 0.5, now=104.0)
    packed_at_once = t.calls[-1] == "pack"
    p.state(t, "NOT", since=105.0 - 0.2, now=105.0)
    check(packed_at_once and t.calls[-1] == "restore",
          "settled edges (since = start of the edge): pack and restore at "
          "once, in the call that reports them", str(t.calls))
    # --max-actions 3: packs at 100.5, 104.0; a third at 106, a fourth held
    p.state(t, FULL_NOTED, since=105.5, now=106.0)
    p.state(t, "NOT", since=106.8, now=107.0)
    n = len(lines)
    p.state(t, FULL_NOTED, since=107.0, now=108.0)
    held = t.calls.count("pack") == 3 and t.packed is None
    due = p.next_due(t)
    p.tick(t, 159.0)
    p.tick(t, 159.5)
    hold = [l for l in lines[n:] if l.startswith("hold ")]
    p.tick(t, 160.5)
    check(held and due == 160.5 and hold == [
        "hold vm: 3 actions in the last 60 s (--max-actions 3): next pack "
        "not before +52.5 s"] and t.calls.count("pack") == 4,
          "--max-actions 3: the 4th pack in 60 s held (one hold line), done "
          "when the first leaves the window (due %s)" % due,
          "%s\n%s" % (t.calls, "\n".join(lines)))
    t2 = FakeTarget("b")
    for i in range(3):
        p.state(t2, FULL_NOTED, since=200.0 + i, now=200.5 + i)
        p.state(t2, "NOT", since=200.6 + i, now=200.8 + i)
    p.state(t2, FULL_NOTED, since=204.0, now=204.5)
    p.state(t2, "NOT", since=205.0, now=205.0)
    p.tick(t2, 270.0)
    check(t2.calls.count("pack") == 3 and t2.packed is None,
          "a held pack is dropped when the VM no longer qualifies",
          str(t2.calls))


def test_journal(tmp):
    d = os.path.join(tmp, "a", "b")
    j = journal.Journal(d)
    mode = os.stat(d).st_mode & 0o777
    j.put("vmm:1:2", {"kind": "vmm", "name": "x", "packed": True})
    with open(os.path.join(d, "journal.json")) as f:
        doc = json.load(f)
    check(mode == 0o700 and doc["version"] == 1 and
          doc["entries"]["vmm:1:2"]["name"] == "x" and
          isinstance(doc["entries"]["vmm:1:2"]["unix_ms"], int) and
          not os.path.exists(os.path.join(d, "journal.json.tmp")),
          "journal: created 0700 with its parents, written, no .tmp left",
          "%o %s" % (mode, doc))
    w = j.writes
    j.put("vmm:1:2", {"kind": "vmm", "name": "x", "packed": True})
    check(j.writes == w, "journal: the same entry again is not rewritten")
    try:
        journal.Journal(d)
        second = None
    except journal.JournalLocked as e:
        second = str(e)
    check(second is not None and "in use" in second,
          "journal: a second instance on the same directory is refused "
          "(%s)" % second)
    p = subprocess.run([TOOL, "--state-dir", d, "--dir", "none", "--once"],
                       capture_output=True, text=True, timeout=30)
    check(p.returncode == 1 and "is in use by another sysidle-consolidate"
          in p.stderr, "the tool on a locked --state-dir: exit %d, '%s'" %
          (p.returncode, p.stderr.strip()), p.stdout + p.stderr)
    j.close()
    with open(os.path.join(d, "journal.json.tmp"), "w") as f:
        f.write("{half")
    j2 = journal.Journal(d)
    check(not os.path.exists(os.path.join(d, "journal.json.tmp")) and
          j2.entries.get("vmm:1:2", {}).get("name") == "x",
          "journal: reloaded after the lock is released; a stale .tmp "
          "removed at start", str(j2.entries))
    j2.drop("vmm:1:2")
    j2.close()
    with open(os.path.join(d, "journal.json")) as f:
        check(json.load(f)["entries"] == {}, "journal: entry dropped")


def make_ctx(state, lines, idle):
    ctx = daemon.Context(common.Log(out=lines), {"pack"}, idle=idle,
                         journal=journal.Journal(state))
    return ctx


def test_reconcile(tmp, orig, idle):
    me = os.getpid()
    start = journal.proc_start_time(me)
    dead = subprocess.Popen(["true"])
    dead.wait()
    f = EdgeVmm(os.path.join(tmp, "r.sock"), "rvm", edges=False)
    tids = f.tids()
    for t in tids:
        os.sched_setaffinity(t, idle)
    entry = {"kind": "vmm", "name": "rvm", "socket": f.path, "pid": me,
             "start": start, "packed": True, "suspended": False,
             "threads": {str(t): common.fmt_cpus(orig) for t in tids}}
    # gone, reused pid, and not followed: restored directly
    lines = []
    ctx = make_ctx(os.path.join(tmp, "s1"), lines, idle)
    ctx.journal.put("vmm:%d:1" % dead.pid, dict(entry, pid=dead.pid,
                                                 start=1, name="dead"))
    ctx.journal.put("vmm:%d:%d" % (me, start + 1),
                    dict(entry, start=start + 1, name="reused"))
    ctx.journal.put("vmm:%d:%d" % (me, start), entry)
    src = vmm_source.VmmSource(ctx, None, [])
    reconcile.reconcile(ctx, [src])
    affs = [os.sched_getaffinity(t) for t in tids]
    check(ctx.journal.entries == {} and affs == [orig] * 3 and
          "reconcile dead: gone (pid %d no longer runs): entry dropped" %
          dead.pid in lines and
          "reconcile reused: gone (pid %d no longer runs): entry dropped" %
          me in lines and
          any(l.startswith("reconcile rvm: restored from the journal (its "
                           "socket %s is not followed)" % f.path)
              for l in lines),
          "reconcile: a dead pid and a reused pid (other start time) "
          "dropped; a VMM whose socket is not followed restored from the "
          "journal", "\n".join(lines + [str(affs)]))
    ctx.journal.close()
    # followed: adopted with the journaled originals, restored on wake
    for t in tids:
        os.sched_setaffinity(t, idle)
    lines = []
    ctx = make_ctx(os.path.join(tmp, "s2"), lines, idle)
    ctx.journal.put("vmm:%d:%d" % (me, start), entry)
    f.state = FULL_NOTED
    src = vmm_source.VmmSource(ctx, None, [f.path])
    d = daemon.Daemon(ctx, [src])
    reconcile.reconcile(ctx, [src])
    d.step()
    vm = src.vms[f.path]
    adopted = vm.packed == {t: orig for t in tids} and \
        [os.sched_getaffinity(t) for t in tids] == [idle] * 3
    f.set_state("NOT")
    end = time.monotonic() + 3
    while time.monotonic() < end and vm.packed is not None:
        d.wait(time.monotonic() + 0.05)
        d.step()
    affs = [os.sched_getaffinity(t) for t in tids]
    check(adopted and "reconcile rvm: adopted (packed) from the journal" in
          lines and affs == [orig] * 3 and ctx.journal.entries == {},
          "reconcile: a followed VMM adopted with the journaled originals "
          "(its packed mask not taken for its own), restored exactly on "
          "wake, entry dropped", "\n".join(lines + [str(affs)]))
    ctx.journal.close()
    f.close()


def threads_at(tids):
    return [os.sched_getaffinity(t) for t in tids]


def journal_entries(state):
    """The entries of the journal in @state ({} when there is none yet)."""
    try:
        with open(os.path.join(state, "journal.json")) as fh:
            return json.load(fh)["entries"]
    except FileNotFoundError:
        return {}


def test_kill_at(tmp, orig, idle):
    f = EdgeVmm(os.path.join(tmp, "k.sock"), "kvm", edges=False)
    tids = f.tids()
    state = os.path.join(tmp, "kstate")
    args = [TOOL, "--dir", "none", "--socket", f.path, "--state-dir", state,
            "--pack-after", "0", "--restore-after", "0", "--idle-cpus",
            common.fmt_cpus(idle)]
    bad = []
    for n in range(1, 11):
        for t in tids:
            os.sched_setaffinity(t, orig)
        f.set_state(FULL_NOTED)
        env = dict(os.environ, SYSIDLE_CONSOLIDATE_KILL_AT=str(n))
        p = subprocess.Popen(args, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        end = time.monotonic() + 5
        while p.poll() is None and time.monotonic() < end and \
                threads_at(tids) != [idle] * 3:
            time.sleep(0.01)
        if p.poll() is None:
            f.set_state("NOT")
        try:
            out, err = p.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
        moved = threads_at(tids) != [orig] * 3
        entries = journal_entries(state)
        ent = list(entries.values())
        ok = p.returncode == -signal.SIGKILL and \
            ("kill-at %d: " % n) in err and \
            (not moved or (len(ent) == 1 and ent[0]["threads"] ==
                           {str(t): common.fmt_cpus(orig) for t in tids}))
        # the next run puts everything back, its SIGTERM exits 0
        # (it handles SIGTERM once it watches: its first watch request)
        f.set_state("NOT")
        watches = len(f.watch_requests())
        q = subprocess.Popen(args, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        end = time.monotonic() + 5
        while time.monotonic() < end and (
                threads_at(tids) != [orig] * 3 or
                len(f.watch_requests()) == watches):
            time.sleep(0.01)
        q.send_signal(signal.SIGTERM)
        qout, qerr = q.communicate(timeout=10)
        left = journal_entries(state)
        ok = ok and q.returncode == 0 and left == {} and \
            threads_at(tids) == [orig] * 3
        if not ok:
            bad.append("N=%d rc %s moved %s entries %s: %s | next rc %s "
                       "left %s %s" % (n, p.returncode, moved, entries,
                                       err.strip(), q.returncode, left,
                                       qout + qerr))
    check(not bad, "KILL_AT=1..10 (a pack's journal write and 3 "
          "sched_setaffinity, a restore's and its journal drop): killed "
          "with SIGKILL at that step each time; a moved thread is always "
          "journaled with its original; the next run restores every "
          "thread and empties the journal", "\n".join(bad))
    p = subprocess.run(args + ["--once", "--dry-run"], capture_output=True,
                       text=True, timeout=30,
                       env=dict(os.environ, SYSIDLE_CONSOLIDATE_KILL_AT="x"))
    check(p.returncode == 0 and "SYSIDLE_CONSOLIDATE_KILL_AT='x' is not an "
          "integer >= 1: ignored" in p.stdout, "KILL_AT=x: ignored with a "
          "warning", p.stdout + p.stderr)
    f.close()


def test_history(tmp):
    d = os.path.join(tmp, "h")
    os.mkdir(d)
    logsetup.setup(False)
    logsetup.add_history(d)
    path = os.path.join(d, "history.log")
    with open(path, "w") as f:
        f.write("x" * (logsetup.HISTORY_MAX - 10) + "\n")
    log = common.Log()
    # the log's own stdout line kept out of the TAP stream
    with contextlib.redirect_stdout(io.StringIO()):
        log("pack vm: 3 threads -> cpus 1 (FULL_NOTED)")
        log.v("not in the history")
    with open(path) as f:
        new = f.read()
    old_size = os.path.getsize(path + ".1")
    p = subprocess.run([TOOL, "--history", "--state-dir", d],
                       capture_output=True, text=True, timeout=30)
    check(old_size == logsetup.HISTORY_MAX - 9 and
          re.fullmatch(r"\d{4}-\d\d-\d\dT[0-9:.]{12}Z INFO pack vm: 3 "
                       r"threads -> cpus 1 \(FULL_NOTED\)\n", new) and
          p.returncode == 0 and p.stdout.endswith(new) and
          len(p.stdout) == old_size + len(new),
          "history: an action line appended with its time; at 1 MiB the "
          "file becomes history.log.1; --history prints both", new)
    q = subprocess.run([TOOL, "--state-dir", "none", "--dir", "none",
                        "--once"], capture_output=True, text=True,
                       timeout=30, env=dict(os.environ, JOURNAL_STREAM="8:9"))
    check(q.returncode == 0 and q.stdout.startswith(
        "<4>warning: --state-dir none: no journal"),
          "JOURNAL_STREAM set: syslog priority prefixes, no time ('%s')" %
          q.stdout.strip(), q.stdout + q.stderr)


def main():
    full = os.sched_getaffinity(0)
    if len(full) < 2:
        print("1..0 # SKIP only one CPU to run on")
        return 77
    orig, idle = {min(full)}, {max(full)}
    test_hysteresis()
    with tempfile.TemporaryDirectory() as tmp:
        test_journal(tmp)
        test_reconcile(tmp, orig, idle)
        test_kill_at(tmp, orig, idle)
        test_history(tmp)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
