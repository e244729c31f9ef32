# SPDX-License-Identifier: GPL-2.0-only
"""One of this project's VMMs as the policies see it (a Target): its
identity and threads, learnt once, and the four actions.

Learning (learn()): one "status" request, after the watch connected (and
again after a "dropped" event, a reconnection, a thread id that was 0 or
a sched_setaffinity that found no such thread). Checked then: the status's
pid is the peer of that request (control.status) and of the watch socket
(SO_PEERCRED), and each thread id is in /proc/PID/task. The process is
named by its pid and its start time (field 22 of /proc/PID/stat): the key
of its journal entry, so that a reused pid is never taken for it. A
pidfd of the process lets the source see its death at once.

pack: the original affinity of each thread is read once, at the first
pack, and kept; a pack or a restore is then exactly one sched_setaffinity
per thread, no request and no /proc read. The journal gets the originals
(packed true) before the first thread moves. suspend: {"cmd":"pause"}
(the journal says suspended first), {"cmd":"resume"} when the VM wakes."""
import errno
import json
import os
import time

from . import control, steps
from .common import fmt_cpus, fmt_s, parse_cpus
from .control import Refused, status, vm_gone, vm_tids
from .journal import proc_start_time, vmm_key
from .policy import Target
from .retry import Gone


class VmmVm(Target):
    """One followed socket."""
    kind = "vmm"

    def __init__(self, src, path):
        super().__init__(("vmm", path), control.socket_name(path))
        self.src = src
        self.ctx = src.ctx
        self.path = path
        self.sock = None            # its control.Watch while connected
        self.pid = None
        self.start = None           # the process's start time (/proc stat)
        self.pidfd = None
        self.tids = None            # learnt thread ids, None: not yet
        self.relearn = True         # learn() before the next action
        self.orig = {}              # tid -> its own affinity (first pack)
        self.settled = None         # the VMM's filtered watch: True/False
        self.told_raw = False       # its lack of the filter logged
        self.connect_error = None
        self.connect_tries = 0      # failed connections in a row
        self.no_pause = None        # the VMM's refusal of "pause"
        self.seen_paused = False    # its "paused" event since our pause

    # --- identity ------------------------------------------------------
    def learn(self):
        """One status request: the VM's name, pid, start time and thread
        ids; the journal's entry of that process adopted. Returns the
        status; raises OSError, ValueError, Refused (nothing learnt)."""
        st = status(self.path)
        pid = st.get("pid") if isinstance(st.get("pid"), int) else \
            st["_peer_pid"]
        if self.sock is not None and self.sock.peer_pid() != pid:
            raise ValueError("the status says pid %d, the watch socket's "
                             "peer is pid %d" % (pid, self.sock.peer_pid()))
        start = proc_start_time(pid)
        if start is None:
            raise ValueError("pid %d does not run" % pid)
        raw = [v.get("tid") for v in st.get("vcpus", [])
               if isinstance(v, dict)] + [st.get("housekeeping_tid")]
        self.name = st.get("name", self.name)
        if (pid, start) != (self.pid, self.start):
            self.orig = {}
            self.close_pidfd()
            self.pid, self.start = pid, start
            try:
                self.pidfd = os.pidfd_open(pid)
            except OSError:
                self.pidfd = None
            self.src.adopt(self, st)
        self.tids = vm_tids(st)
        self.relearn = any(not t for t in raw)
        return st

    def close_pidfd(self):
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None

    def adopt(self, entry):
        """The journal's @entry of this process: its originals kept, packed
        and suspended as it says."""
        orig = {}
        for tid, cpus in (entry.get("threads") or {}).items():
            try:
                orig[int(tid)] = parse_cpus(cpus)
            except (ValueError, TypeError):
                continue
        self.orig = orig
        if entry.get("packed"):
            self.packed = dict(orig)
        if entry.get("suspended"):
            self.suspended = True
            self.suspended_at = time.monotonic()
            self.seen_paused = True

    def journal_key(self):
        if self.pid is None or self.start is None:
            return None
        return vmm_key(self.pid, self.start)

    def journal_entry(self, packed, suspended):
        threads = self.packed if self.packed is not None else self.orig
        return {"kind": "vmm", "name": self.name, "socket": self.path,
                "pid": self.pid, "start": self.start,
                "threads": {str(t): fmt_cpus(c) for t, c in
                            sorted(threads.items())},
                "packed": packed, "suspended": suspended}

    # --- pack ----------------------------------------------------------
    def setaff(self, tid, cpus, action):
        cpus = set(cpus)

        def fn():
            if self.pidfd is None and self.pid is not None and \
                    proc_start_time(self.pid) != self.start:
                raise Gone("its process is gone")
            steps.step("sched_setaffinity(%d, %s) (%s %s)" %
                       (tid, fmt_cpus(cpus), action, self.name))
            try:
                os.sched_setaffinity(tid, cpus)
            except OSError as e:
                if e.errno == errno.ESRCH:
                    self.relearn = True
                    raise Gone("no such thread")
                raise
        return self.src.retrier.attempt(
            self, "thread %d" % tid, fn,
            "thread %d: sched_setaffinity(%s)" % (tid, fmt_cpus(cpus)),
            "thread %d -> cpus %s" % (tid, fmt_cpus(cpus)), action,
            undo=(action == "restore"))

    def do_pack(self, why):
        src = self.src
        if self.packed is not None:
            return
        if self.relearn or self.tids is None:
            try:
                self.learn()
            except (OSError, ValueError, Refused) as e:
                src.log("error %s: status failed, not packed (%s)" %
                        (self.name, e))
                self.ctx.count("pack", "failed")
                return
        for tid in self.tids:
            if tid not in self.orig:
                try:
                    self.orig[tid] = os.sched_getaffinity(tid)
                except OSError as e:
                    src.log("error %s: thread %d: sched_getaffinity failed "
                            "(%s): left alone" % (self.name, tid, e.strerror))
        self.packed = {t: self.orig[t] for t in self.tids if t in self.orig}
        n = len(self.packed)
        if src.dry:
            src.log("pack %s: %d threads -> cpus %s (%s) [dry run]" %
                    (self.name, n, fmt_cpus(src.idle), why))
            return
        if not self.ctx.journal_sync(self):
            self.packed = None
            self.ctx.not_journalled(self, "pack")
            return
        failed = sum(not self.setaff(tid, src.idle, "pack")
                     for tid in list(self.packed))
        self.ctx.count("pack", "retried" if failed else "ok")
        src.log("pack %s: %d threads -> cpus %s (%s)%s" %
                (self.name, n, fmt_cpus(src.idle), why,
                 ": %d failed, retrying" % failed if failed else ""))

    def do_restore(self, why):
        src = self.src
        if self.packed is None:
            return
        orig, self.packed = self.packed, None
        src.retrier.cancel(self, ("pack",))
        if src.dry:
            src.log("restore %s: %d threads -> their own affinity (%s) "
                    "[dry run]" % (self.name, len(orig), why))
            return
        failed = sum(not self.setaff(tid, cpus, "restore")
                     for tid, cpus in orig.items())
        self.ctx.count("restore", "retried" if failed else "ok")
        src.log("restore %s: %d threads -> their own affinity %s (%s)%s" %
                (self.name, len(orig),
                 " ".join("%d:%s" % (t, fmt_cpus(c)) for t, c in orig.items()),
                 why, ": %d failed, retrying" % failed if failed else ""))
        self.ctx.journal_sync(self)

    # --- suspend -------------------------------------------------------
    def pause_req(self, cmd):
        def fn():
            steps.step("%s request to %s" % (cmd, self.path))
            try:
                r = control.command(self.path, cmd)
            except OSError as e:
                if vm_gone(e):
                    raise Gone(e.strerror)
                raise
            except Refused as e:
                if "unknown command" in str(e):
                    self.no_pause = str(e)
                    return
                raise
            if r.get("paused") is not (cmd == "pause"):
                # paused and already resumed by a wake source (its
                # "resumed" event follows), or paused again by someone
                self.src.log.v("%s: %s reply %s" %
                               (self.name, cmd, json.dumps(r)))
        return fn

    def do_suspend(self, why):
        src = self.src
        if self.no_pause:
            return
        self.suspended = True
        self.suspended_at = time.monotonic()
        self.seen_paused = False
        src.retrier.cancel(self, ("resume",))
        if src.dry:
            src.log("suspend %s: paused (%s) [dry run]" % (self.name, why))
            return
        if not self.ctx.journal_sync(self):
            self.suspended = False
            self.suspended_at = None
            self.ctx.not_journalled(self, "suspend")
            return
        ok = src.retrier.attempt(self, "pause", self.pause_req("pause"),
                                 "pause request", "paused", "suspend")
        if self.no_pause:
            self.suspended = False
            self.ctx.journal_sync(self)
            src.log("error %s: cannot suspend, the VMM has no pause (%s)" %
                    (self.name, self.no_pause))
            self.ctx.count("suspend", "failed")
            return
        self.ctx.count("suspend", "ok" if ok else "retried")
        src.log("suspend %s: paused (%s)%s" %
                (self.name, why, "" if ok else ": failed, retrying"))

    def do_resume(self, why):
        src = self.src
        if not self.suspended:
            return
        took = time.monotonic() - (self.suspended_at or time.monotonic())
        self.suspended = False
        self.suspended_at = None
        src.retrier.cancel(self, ("suspend",))
        if src.dry:
            src.log("resume %s: after %s s (%s) [dry run]" %
                    (self.name, fmt_s(took), why))
            return
        ok = src.retrier.attempt(self, "pause", self.pause_req("resume"),
                                 "resume request", "resumed", "resume",
                                 undo=True)
        self.ctx.count("resume", "ok" if ok else "retried")
        src.log("resume %s: after %s s (%s)%s" %
                (self.name, fmt_s(took), why,
                 "" if ok else ": failed, retrying"))
        self.ctx.journal_sync(self)
