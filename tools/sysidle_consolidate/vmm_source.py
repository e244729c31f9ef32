# SPDX-License-Identifier: GPL-2.0-only
"""This project's VMM instances, through their control sockets
(vmm/README.md, "Control socket protocol", spoken by control.py): one
"watch" connection per VM for its state changes; short request
connections for "status", "pause" and "resume".

pack: sched_setaffinity on the vCPU threads and the housekeeping thread
named by the status; their affinity before is remembered and put back.
suspend: {"cmd":"pause"}, and {"cmd":"resume"} when the VM wakes. The VMM
also resumes itself when something is pending for the guest (a timer
due, input); the watch stream's "resumed" event reports it and the VM is
then no longer counted as suspended."""
import errno
import json
import os
import time

from . import control
from .common import fmt_cpus, fmt_s, mono_since
from .control import Refused, status, vm_gone, vm_tids
from .policy import Target
from .retry import Gone
from .states import FULL_NOTED

RESCAN_S = 1.0


def is_thread_of(pid, tid):
    return os.path.exists("/proc/%d/task/%d" % (pid, tid))


class VmmVm(Target):
    """One followed socket."""
    kind = "vmm"

    def __init__(self, src, path):
        super().__init__(("vmm", path), control.socket_name(path))
        self.src = src
        self.path = path
        self.sock = None            # its control.Watch while connected
        self.pid = None
        self.connect_error = None
        self.no_pause = None        # the VMM's refusal of "pause"
        self.seen_paused = False    # its "paused" event since our pause

    # --- pack ----------------------------------------------------------
    def setaff(self, tid, cpus, action):
        cpus = set(cpus)

        def fn():
            if self.pid is not None and not is_thread_of(self.pid, tid):
                raise Gone("not one of its threads")
            try:
                os.sched_setaffinity(tid, cpus)
            except OSError as e:
                if e.errno == errno.ESRCH:
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
        try:
            st = status(self.path)
        except (OSError, ValueError, Refused) as e:
            src.log("error %s: status failed, not packed (%s)" %
                    (self.name, e))
            return
        self.name = st.get("name", self.name)
        self.pid = st.get("pid") if isinstance(st.get("pid"), int) else None
        if st.get("state") != FULL_NOTED:
            src.log.v("%s: state is %s by now: not packed" %
                      (self.name, st.get("state")))
            return
        orig = {}
        for tid in vm_tids(st):
            try:
                orig[tid] = os.sched_getaffinity(tid)
            except OSError as e:
                src.log("error %s: thread %d: sched_getaffinity failed (%s):"
                        " left alone" % (self.name, tid, e.strerror))
        self.packed = orig
        if src.dry:
            src.log("pack %s: %d threads -> cpus %s (%s) [dry run]" %
                    (self.name, len(orig), fmt_cpus(src.idle), why))
            return
        failed = sum(not self.setaff(tid, src.idle, "pack") for tid in orig)
        src.log("pack %s: %d threads -> cpus %s (%s)%s" %
                (self.name, len(orig), fmt_cpus(src.idle), why,
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
        src.log("restore %s: %d threads -> their own affinity %s (%s)%s" %
                (self.name, len(orig),
                 " ".join("%d:%s" % (t, fmt_cpus(c)) for t, c in orig.items()),
                 why, ": %d failed, retrying" % failed if failed else ""))

    # --- suspend -------------------------------------------------------
    def pause_req(self, cmd):
        def fn():
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
        ok = src.retrier.attempt(self, "pause", self.pause_req("pause"),
                                 "pause request", "paused", "suspend")
        if self.no_pause:
            self.suspended = False
            src.log("error %s: cannot suspend, the VMM has no pause (%s)" %
                    (self.name, self.no_pause))
            return
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
        src.log("resume %s: after %s s (%s)%s" %
                (self.name, fmt_s(took), why,
                 "" if ok else ": failed, retrying"))


class VmmSource:
    """Every socket *.sock in @dir (scanned again every RESCAN_S) and every
    path in @sockets."""

    def __init__(self, ctx, dir, sockets):
        self.log = ctx.log
        self.retrier = ctx.retrier
        self.policy = ctx.policy
        self.dry = ctx.dry
        self.idle = ctx.idle
        self.dir = dir
        self.explicit = [os.path.abspath(p) for p in sockets]
        self.vms = {}           # path -> VmmVm
        self.next_scan = 0.0

    def targets(self):
        return list(self.vms.values())

    def wanted(self):
        paths = set(self.explicit)
        if self.dir:
            try:
                for f in os.listdir(self.dir):
                    if f.endswith(".sock"):
                        paths.add(os.path.join(self.dir, f))
            except OSError:
                pass
        return paths

    def connect(self, vm):
        try:
            w = control.open_watch(vm.path)
        except OSError as e:
            if vm.connect_error != str(e):
                self.log.v("%s: cannot connect (%s)" % (vm.path, e))
            vm.connect_error = str(e)
            return
        vm.connect_error = None
        vm.sock = w
        vm.state = None
        vm.gone = False
        self.log.v("%s: watching %s" % (vm.name, vm.path))

    def forget(self, vm, why):
        """The watch connection is gone: undo what was done (as far as the
        VMM is still there), then forget the VM's state."""
        if vm.sock:
            vm.sock.close()
            vm.sock = None
        self.policy.wake(vm, why)
        vm.state = None
        vm.idle_since = None
        vm.acted.clear()
        vm.gone = True
        # retries for a VM no longer followed: none if its process is gone,
        # else within their back-off
        if vm.pid is None or not os.path.exists("/proc/%d" % vm.pid):
            self.retrier.cancel(vm)
        else:
            for e in self.retrier.pending.values():
                if e.target is vm:
                    e.undo = False
        self.log.v("%s: forgotten (%s)" % (vm.name, why))

    def poll(self, now):
        """The periodic work: the directory scan."""
        if now < self.next_scan:
            return
        self.next_scan = now + RESCAN_S
        want = self.wanted()
        for path in list(self.vms):
            if path not in want:
                vm = self.vms.pop(path)
                self.forget(vm, "socket removed")
        for path in want:
            vm = self.vms.get(path)
            if vm is None:
                vm = self.vms[path] = VmmVm(self, path)
            if vm.sock is None:
                self.connect(vm)

    def next_due(self):
        return self.next_scan

    def fds(self):
        return {vm.sock: vm for vm in self.vms.values() if vm.sock}

    def handle_line(self, vm, ev, line):
        if ev is None:
            self.log.v("%s: not JSON: %r" % (vm.name, line[:200]))
            return
        if not isinstance(ev, dict):
            return
        if ev.get("cmd") == "watch":
            state = ev.get("state")
            self.log.v("%s: current state %s" % (vm.name, state))
            if vm.suspended and ev.get("paused") is False:
                self.log("resumed %s: by the VMM (seen on a new watch)" %
                         vm.name)
                self.policy.resumed_by_itself(vm, "watch")
            self.policy.state(vm, state, mono_since(ev.get("since_unix_ms")),
                              "current state %s" % state)
            return
        kind = ev.get("event")
        if kind == "dropped":
            self.log.v("%s: %s events dropped: reading status" %
                       (vm.name, ev.get("count")))
            try:
                st = status(vm.path)
            except (OSError, ValueError, Refused) as e:
                self.log("error %s: status failed (%s)" % (vm.name, e))
                return
            if vm.suspended and st.get("paused") is False:
                self.log("resumed %s: by the VMM (seen in its status)" %
                         vm.name)
                self.policy.resumed_by_itself(vm, "status")
            self.policy.state(vm, st.get("state"),
                              mono_since(st.get("since_unix_ms")),
                              "status after dropped events: %s" %
                              st.get("state"))
        elif kind == "state":
            self.log.v("%s: %s -> %s" % (vm.name, ev.get("from"),
                                         ev.get("to")))
            self.policy.state(vm, ev.get("to"), mono_since(ev.get("unix_ms")),
                              "%s -> %s" % (ev.get("from"), ev.get("to")))
        elif kind == "paused":
            self.log.v("%s: paused" % vm.name)
            vm.seen_paused = True
        elif kind == "resumed":
            reason = ev.get("reason", "other")
            # a resume after the pause this process asked for: the VMM's
            # own (timer, input, kick) or someone else's request
            if vm.suspended and vm.seen_paused:
                self.log("resumed %s: by the VMM (%s) after %s ms paused" %
                         (vm.name, reason, ev.get("paused_ms", "?")))
                self.retrier.cancel(vm, ("suspend",))
                self.policy.resumed_by_itself(vm, reason)
            else:
                self.log.v("%s: resumed (%s)" % (vm.name, reason))

    def readable(self, vm):
        try:
            lines = vm.sock.read()
        except control.Closed as e:
            self.forget(vm, str(e))
            return
        for ev, line in lines:
            self.handle_line(vm, ev, line)
            if vm.sock is None:
                return

    def once(self):
        """One pass: each VM's status now, the policies applied to it."""
        for path in sorted(self.wanted()):
            vm = VmmVm(self, path)
            try:
                st = status(path)
            except (OSError, ValueError, Refused) as e:
                self.log("skip %s: no status (%s)" % (vm.name, e))
                continue
            vm.name = st.get("name", vm.name)
            if st.get("state") == FULL_NOTED:
                self.vms[path] = vm
                if st.get("paused"):
                    vm.acted.add("suspend")
                self.policy.state(vm, FULL_NOTED,
                                  mono_since(st.get("since_unix_ms")))
            else:
                self.log("leave %s: state %s" % (vm.name, st.get("state")))

    def shutdown(self, why):
        for vm in self.vms.values():
            if vm.sock:
                vm.sock.close()
                vm.sock = None
            self.policy.wake(vm, why)
