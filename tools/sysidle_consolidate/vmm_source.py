# SPDX-License-Identifier: GPL-2.0-only
"""This project's VMM instances, through their control sockets
(vmm/export/README.md, "Control socket protocol", spoken by control.py): one
watch connection per VM, a "status" request to learn its threads
(vmm_target.py), short request connections for "pause" and "resume".

The watch asks for settled full-idle edges (the filtered watch: "idle"
true once the VM has been FULL_NOTED for --pack-after, false once it has
been out of it for --restore-after), and the policy acts on each at once.
A VMM without the filter (its reply has no "edges") sends every state
change: the policy then applies the same hysteresis itself.

The socket directory is watched with inotify; only when inotify cannot be
used, or while a socket there is not connected yet, is it rescanned every
RESCAN_S. Each VMM's pidfd is watched too: its death is seen at once and
its threads are never touched again. So with VMs idle (or waking for less
than --restore-after) this source causes no wake-up at all."""
import os
import select

from . import control
from .common import mono_since
from .control import Refused
from .journal import proc_start_time
from .states import FULL_NOTED
from .vmm_target import VmmVm
from .watchdir import DirWatch

RESCAN_S = 1.0
FIRST_RETRY_S = 0.05
# a socket of the watched directory that refuses connections (a VMM that
# died without removing it) is tried again at most this often: a VMM
# starting there creates its socket anew, and inotify says so at once
STALE_RETRY_S = 60.0
# the policy's state of a VM FULL_NOTED for less than --pack-after, with
# settled edges (not idle yet)
UNSETTLED = "FULL_NOTED (not yet settled)"


class VmmSource:
    """Every socket *.sock in @dir and every path in @sockets."""

    def __init__(self, ctx, dir, sockets):
        self.ctx = ctx
        self.log = ctx.log
        self.retrier = ctx.retrier
        self.policy = ctx.policy
        self.dry = ctx.dry
        self.idle = ctx.idle
        self.dir = dir
        self.explicit = [os.path.abspath(p) for p in sockets]
        self.vms = {}           # path -> VmmVm
        self.next_scan = 0.0    # None: nothing to rescan by time
        self.dirty = True       # the directory changed: rescan
        self.dirwatch = None
        self.reconciling = set()    # journal keys awaiting their VM
        if dir and not ctx.once:
            self.dirwatch = DirWatch(dir)
            if self.dirwatch.fd is None:
                self.log.v("%s: %s: rescanned every %s s" %
                           (dir, self.dirwatch.error, RESCAN_S))

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

    # --- the journal -----------------------------------------------------
    def reconcile(self, key, entry):
        """At start, the journal's @entry (kind vmm): see reconcile.py."""
        from .reconcile import reconcile_vmm
        reconcile_vmm(self, key, entry)

    def adopt(self, vm, st):
        """@vm's process is known (learn(), its status @st): its journal
        entry, if any, taken over, and what a run killed half-way left
        completed: a pack's threads all on the idle CPUs again (the policy
        restores them if the VM is awake), a suspend whose pause never
        came (or that the VMM has ended itself since) no longer held."""
        key = vm.journal_key()
        entry = self.ctx.journal.entries.get(key)
        if entry is None or entry.get("kind") != "vmm":
            return
        vm.adopt(entry)
        if vm.suspended and st.get("paused") is False:
            vm.suspended = False
            vm.suspended_at = None
        if vm.packed is not None and not self.dry:
            for tid in list(vm.packed):
                vm.setaff(tid, self.idle, "pack")
        self.ctx.journal_sync(vm)
        if key in self.reconciling:
            self.reconciling.discard(key)
            held = [w for w in ("packed", "suspended") if entry.get(w)]
            self.log("reconcile %s: adopted (%s) from the journal" %
                     (vm.name, ", ".join(held) or "nothing held"))
            self.ctx.reconciled("adopted")

    # --- connections ------------------------------------------------------
    def connect(self, vm):
        p = self.policy
        try:
            w = control.open_watch(vm.path,
                                   enter_after_ms=p.pack_after * 1000,
                                   leave_after_ms=p.restore_after * 1000)
        except OSError as e:
            if vm.connect_error != str(e):
                self.log.v("%s: cannot connect (%s)" % (vm.path, e))
            vm.connect_error = str(e)
            vm.connect_tries += 1
            return
        vm.connect_error = None
        vm.connect_tries = 0
        vm.sock = w
        vm.state = None
        vm.gone = False
        vm.settled = None
        try:
            vm.learn()
        except (OSError, ValueError, Refused) as e:
            vm.relearn = True
            self.log.v("%s: status failed (%s): learnt at the first pack" %
                       (vm.name, e))
        self.log.v("%s: watching %s" % (vm.name, vm.path))

    def forget(self, vm, why, died=False):
        """The watch connection is gone (@died: its process ended): undo
        what was done as far as the VMM is still there, then forget the
        VM's state. A dead process's threads are never touched."""
        if vm.sock:
            vm.sock.close()
            vm.sock = None
        if died:
            held = [w for w, on in (("packed", vm.packed is not None),
                                    ("suspended", vm.suspended)) if on]
            if held:
                self.log("forget %s: %s (was %s)" %
                         (vm.name, why, " and ".join(held)))
            self.retrier.cancel(vm)
            vm.packed = None
            vm.suspended = False
            key = vm.journal_key()
            if key is not None:
                self.ctx.journal.drop(key)
        else:
            self.policy.wake(vm, why)
        vm.close_pidfd()
        vm.state = None
        vm.idle_since = None
        vm.left_since = None
        vm.acted.clear()
        vm.gone = True
        vm.tids = None
        vm.relearn = True
        # retries for a VM no longer followed: none if its process is gone,
        # else within their back-off
        if vm.pid is None or proc_start_time(vm.pid) != vm.start:
            self.retrier.cancel(vm)
        else:
            for e in self.retrier.pending.values():
                if e.target is vm:
                    e.undo = False
        self.log.v("%s: forgotten (%s)" % (vm.name, why))

    def poll(self, now):
        """The directory rescan, when it changed or its timer is due."""
        dw = self.dirwatch
        if not self.dirty and (self.next_scan is None or
                               now < self.next_scan):
            return
        changed, self.dirty = self.dirty, False
        if dw is not None and not dw.active:
            dw.rearm()
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
                if changed:
                    # the directory changed: maybe a new VMM on an old
                    # socket's path; its back-off starts again
                    vm.connect_tries = 0
                self.connect(vm)
        # a socket just created may not listen yet: tried again after 50,
        # 100, 200, ... ms, then every retry_cap()
        waits = [min(self.retry_cap(vm.path),
                     FIRST_RETRY_S * 2 ** (vm.connect_tries - 1))
                 for vm in self.vms.values() if vm.sock is None]
        if self.dir and (dw is None or not dw.active):
            waits.append(RESCAN_S)
        self.next_scan = now + min(waits) if waits else None

    def retry_cap(self, path):
        """The longest wait between two connection attempts to @path:
        STALE_RETRY_S in a directory inotify watches (its new sockets are
        seen at once), else RESCAN_S."""
        dw = self.dirwatch
        if dw is not None and dw.active and path not in self.explicit:
            return STALE_RETRY_S
        return RESCAN_S

    def next_due(self):
        return 0.0 if self.dirty else self.next_scan

    def fds(self):
        """What to select() on: descriptor -> what to call when readable."""
        out = {}
        for vm in self.vms.values():
            if vm.sock:
                out[vm.sock] = (lambda vm=vm, s=vm.sock:
                                self.readable(vm) if vm.sock is s else None)
            if vm.pidfd is not None:
                out[vm.pidfd] = (lambda vm=vm, fd=vm.pidfd:
                                 self.died(vm) if vm.pidfd == fd else None)
        dw = self.dirwatch
        if dw is not None and dw.fd is not None:
            out[dw.fd] = self.dir_changed
        return out

    def dir_changed(self):
        if self.dirwatch.read():
            self.dirty = True

    @staticmethod
    def is_dead(vm):
        """True when @vm's process has ended (its pidfd is readable)."""
        if vm.pidfd is None:
            return False
        return bool(select.select([vm.pidfd], [], [], 0)[0])

    def died(self, vm):
        self.log.v("%s: its process %d ended" % (vm.name, vm.pid))
        self.forget(vm, "its process ended", died=True)
        self.dirty = True

    # --- events -------------------------------------------------------------
    def handle_line(self, vm, ev, line):
        if ev is None:
            self.log.v("%s: not JSON: %r" % (vm.name, line[:200]))
            return
        if not isinstance(ev, dict):
            return
        if ev.get("cmd") == "watch":
            self.watch_reply(vm, ev)
            return
        kind = ev.get("event")
        if kind == "dropped":
            self.log.v("%s: %s events dropped: reading status" %
                       (vm.name, ev.get("count")))
            try:
                st = vm.learn()
            except (OSError, ValueError, Refused) as e:
                self.log("error %s: status failed (%s)" % (vm.name, e))
                return
            if vm.suspended and st.get("paused") is False:
                self.log("resumed %s: by the VMM (seen in its status)" %
                         vm.name)
                self.policy.resumed_by_itself(vm, "status")
            self.settled_state(vm, st.get("state"),
                               mono_since(st.get("since_unix_ms")),
                               "status after dropped events: %s" %
                               st.get("state"))
        elif kind == "full_idle":
            # the VMM applied the hold: a since a few ms short of it (the
            # clocks' rounding) must not cost a timer wake-up
            now = mono_since(None)
            since = mono_since(ev.get("since_unix_ms"), now)
            if ev.get("idle") is True:
                self.log.v("%s: full idle (settled)" % vm.name)
                self.policy.state(vm, FULL_NOTED,
                                  min(since, now - self.policy.pack_after),
                                  "settled", now)
            else:
                to = ev.get("state") or "NOT"
                self.policy.state(vm, to,
                                  min(since, now - self.policy.restore_after),
                                  "FULL_NOTED -> %s" % to, now)
        elif kind == "state" and not vm.settled:
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
                self.ctx.journal_sync(vm)
            else:
                self.log.v("%s: resumed (%s)" % (vm.name, reason))

    def watch_reply(self, vm, ev):
        """The reply to the watch request: the VM's state now; whether the
        VMM filters (settled edges) or sends every change."""
        state = ev.get("state")
        vm.settled = ev.get("edges") == "full_idle"
        if not vm.settled and not vm.told_raw:
            vm.told_raw = True
            self.log.v("%s: the VMM has no filtered watch: hysteresis on "
                       "its raw state changes" % vm.name)
        self.log.v("%s: current state %s" % (vm.name, state))
        if vm.suspended and ev.get("paused") is False:
            self.log("resumed %s: by the VMM (seen on a new watch)" %
                     vm.name)
            self.policy.resumed_by_itself(vm, "watch")
            self.ctx.journal_sync(vm)
        since = mono_since(ev.get("since_unix_ms"))
        if vm.settled and ev.get("full_idle") is True:
            # FULL_NOTED for --pack-after already: act at once
            since = min(since, mono_since(None) - self.policy.pack_after)
        elif vm.settled and state == FULL_NOTED:
            # not for --pack-after yet: its idle:true edge will come (or,
            # if it wakes first, nothing will): no timer of our own
            state, since = UNSETTLED, None
        self.policy.state(vm, state, since, "current state %s" % state)

    def settled_state(self, vm, state, since, why):
        """A raw @state since @since (a status) given to the policy; with
        settled edges, FULL_NOTED counts only after --pack-after (the
        VMM's edge will say so)."""
        if vm.settled and state == FULL_NOTED and \
                since > mono_since(None) - self.policy.pack_after:
            state, since = UNSETTLED, None
        self.policy.state(vm, state, since, why)

    def readable(self, vm):
        try:
            lines = vm.sock.read()
        except control.Closed as e:
            # a VMM that died closed its socket too: its threads are not
            # touched (a tid of a dead process may be reused)
            self.forget(vm, str(e), died=self.is_dead(vm))
            self.dirty = True
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
                st = vm.learn()
            except (OSError, ValueError, Refused) as e:
                self.log("skip %s: no status (%s)" % (vm.name, e))
                continue
            self.vms[path] = vm
            if st.get("state") == FULL_NOTED:
                if st.get("paused"):
                    vm.acted.add("suspend")
                self.policy.state(vm, FULL_NOTED,
                                  mono_since(st.get("since_unix_ms")))
            else:
                self.log("leave %s: state %s" % (vm.name, st.get("state")))
                vm.gone = True

    def shutdown(self, why):
        for vm in self.vms.values():
            if vm.sock:
                vm.sock.close()
                vm.sock = None
            self.policy.wake(vm, why)
