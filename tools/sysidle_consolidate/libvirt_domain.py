# SPDX-License-Identifier: GPL-2.0-only
"""One libvirt domain as the policies see it (a Target), for
libvirt_source.py: its idle state read from its metadata, and the four
actions. pack: virDomainPinVcpuFlags for each vCPU and
virDomainPinEmulator onto the idle CPUs, the pinning read before
(vcpuPinInfo, emulatorPinInfo) remembered, journaled and put back
exactly. suspend: virDomainSuspend, virDomainResume. A domain is touched
only through libvirt."""
import libvirt

from . import steps, urndoc
from .common import fmt_cpus, fmt_s, parse_cpus
from .journal import libvirt_key
from .policy import Target
from .retry import Gone
from .urndoc import NS


def gone_error(e):
    """A libvirtError that means the domain is not there (or not running)."""
    return isinstance(e, libvirt.libvirtError) and e.get_error_code() in (
        libvirt.VIR_ERR_NO_DOMAIN, libvirt.VIR_ERR_OPERATION_INVALID)


def err_text(e):
    if isinstance(e, libvirt.libvirtError):
        return e.get_error_message() or str(e)
    return str(e) or type(e).__name__


def cpuset(cpumap):
    return {i for i, b in enumerate(cpumap) if b}


class Domain(Target):
    kind = "libvirt"
    can_suspend_max = True

    def __init__(self, src, dom):
        super().__init__(("libvirt", src.uri, dom.UUIDString()), dom.name())
        self.src = src
        self.dom = src.wrap(dom) if src.wrap else dom
        self.gen = src.gen          # the connection @dom belongs to
        self.meta_error = None
        self.saved = None           # the pinning before the first pack
        self.ctx = src.ctx
        self.uuid = dom.UUIDString()
        self.domid = dom.ID()

    def journal_key(self):
        return libvirt_key(self.src.uri, self.uuid)

    def journal_entry(self, packed, suspended):
        saved = self.packed or self.saved or {"vcpus": [], "emulator": ()}
        return {"kind": "libvirt", "name": self.name, "uri": self.src.uri,
                "uuid": self.uuid, "domid": self.domid,
                "vcpus": [fmt_cpus(cpuset(m)) for m in saved["vcpus"]],
                "emulator": fmt_cpus(cpuset(saved["emulator"])),
                "packed": packed, "suspended": suspended}

    def adopt(self, entry, ncpu):
        """The journal's @entry of this domain: its pinning then is what a
        restore puts back; packed and suspended as it says."""
        def cpumap(text):
            c = parse_cpus(text)
            return tuple(i in c for i in range(max(ncpu, max(c) + 1)))
        saved = {"vcpus": [cpumap(v) for v in entry.get("vcpus", [])],
                 "emulator": cpumap(entry.get("emulator", "0"))}
        self.saved = saved
        if entry.get("packed"):
            self.packed = saved
        if entry.get("suspended"):
            self.suspended = True
            self.suspended_at = self.ctx.now()
    # --- state ---------------------------------------------------------
    def read_state(self):
        """(state name or None, since_unix_ms, why when None); raises Gone."""
        try:
            xml = self.dom.metadata(libvirt.VIR_DOMAIN_METADATA_ELEMENT, NS,
                                    0)
        except libvirt.libvirtError as e:
            if gone_error(e):
                raise Gone(err_text(e))
            if e.get_error_code() == libvirt.VIR_ERR_NO_DOMAIN_METADATA:
                return None, None, "no %s state published" % NS
            return None, None, "metadata: %s" % err_text(e)
        try:
            doc = urndoc.parse(xml)
        except urndoc.BadState as e:
            return None, None, "bad %s state (%s)" % (NS, e)
        why = urndoc.stale(doc)
        if why:
            return None, None, "%s state %s not trusted: %s" % (
                NS, doc.name, why)
        return doc.name, doc.since_unix_ms, None

    # --- pack ----------------------------------------------------------
    def pin(self, which, cpumap, action):
        src = self.src
        if which == "emulator":
            call = ("pinEmulator", (cpumap,))
            what = "emulator: virDomainPinEmulator(%s)" % \
                fmt_cpus(cpuset(cpumap))
        else:
            call = ("pinVcpuFlags", (which, cpumap))
            what = "vcpu %d: virDomainPinVcpuFlags(%s)" % \
                (which, fmt_cpus(cpuset(cpumap)))
        label = which if which == "emulator" else "vcpu %d" % which

        def fn():
            steps.step("%s (%s %s)" % (what, action, self.name))
            try:
                src.live(self.dom, call[0], *call[1])
            except libvirt.libvirtError as e:
                if gone_error(e):
                    raise Gone(err_text(e))
                raise
        return src.ctx.retrier.attempt(
            self, label, fn, what,
            "%s -> cpus %s" % (label, fmt_cpus(cpuset(cpumap))), action,
            undo=(action == "restore"))

    def do_pack(self, why):
        src = self.src
        log = src.ctx.log
        if self.packed is not None:
            return
        idle = src.idle_map
        if idle is None:
            log.v("%s: no idle CPUs on this host: not packed" % self.name)
            return
        try:
            vcpus = [tuple(m) for m in src.live(self.dom, "vcpuPinInfo")]
            emu = tuple(src.live(self.dom, "emulatorPinInfo"))
        except libvirt.libvirtError as e:
            log("error %s: its pinning could not be read (%s): not packed"
                % (self.name, err_text(e)))
            return
        self.packed = self.saved = {"vcpus": vcpus, "emulator": emu}
        what = "%d vcpus, emulator -> cpus %s (%s)" % (
            len(vcpus), fmt_cpus(cpuset(idle)), why)
        if src.ctx.dry:
            log("pack %s: %s [dry run]" % (self.name, what))
            return
        if not self.ctx.journal_sync(self):
            self.packed = None
            self.ctx.not_journalled(self, "pack")
            return
        failed = 0
        for i in range(len(vcpus)):
            failed += not self.pin(i, idle, "pack")
        failed += not self.pin("emulator", idle, "pack")
        self.ctx.count("pack", "retried" if failed else "ok")
        log("pack %s: %s%s" % (self.name, what, ": %d failed, retrying" %
                               failed if failed else ""))

    def do_restore(self, why):
        src = self.src
        log = src.ctx.log
        if self.packed is None:
            return
        saved, self.packed = self.packed, None
        src.ctx.retrier.cancel(self, ("pack",))
        vcpus, emu = saved["vcpus"], saved["emulator"]
        desc = " ".join(["%d:%s" % (i, fmt_cpus(cpuset(m)))
                         for i, m in enumerate(vcpus)] +
                        ["emulator:%s" % fmt_cpus(cpuset(emu))])
        if src.ctx.dry:
            log("restore %s: %d vcpus, emulator -> their own pinning %s (%s) "
                "[dry run]" % (self.name, len(vcpus), desc, why))
            return
        failed = 0
        for i, m in enumerate(vcpus):
            failed += not self.pin(i, m, "restore")
        failed += not self.pin("emulator", emu, "restore")
        self.ctx.count("restore", "retried" if failed else "ok")
        log("restore %s: %d vcpus, emulator -> their own pinning %s (%s)%s"
            % (self.name, len(vcpus), desc, why,
               ": %d failed, retrying" % failed if failed else ""))
        self.ctx.journal_sync(self)

    # --- suspend -------------------------------------------------------
    def paused(self):
        st = self.dom.state()[0]
        return st == libvirt.VIR_DOMAIN_PAUSED

    def do_suspend(self, why):
        src = self.src
        log = src.ctx.log
        if src.ctx.once:
            log("leave %s: not suspended (%s; --once: nothing would resume "
                "it)" % (self.name, why))
            return
        try:
            if self.paused():
                log.v("%s: paused by someone else: left alone" % self.name)
                return
        except libvirt.libvirtError as e:
            if gone_error(e):
                return
        self.suspended = True
        self.suspended_at = src.ctx.now()
        src.ctx.retrier.cancel(self, ("resume",))
        if src.ctx.dry:
            log("suspend %s: paused (%s) [dry run]" % (self.name, why))
            return
        if not self.ctx.journal_sync(self):
            self.suspended = False
            self.suspended_at = None
            self.ctx.not_journalled(self, "suspend")
            return

        def fn():
            try:
                if not self.paused():
                    steps.step("virDomainSuspend(%s)" % self.name)
                    self.dom.suspend()
            except libvirt.libvirtError as e:
                if gone_error(e):
                    raise Gone(err_text(e))
                raise
        ok = src.ctx.retrier.attempt(self, "suspend", fn, "virDomainSuspend",
                                     "paused", "suspend")
        self.ctx.count("suspend", "ok" if ok else "retried")
        log("suspend %s: paused (%s)%s" %
            (self.name, why, "" if ok else ": failed, retrying"))

    def do_resume(self, why):
        src = self.src
        log = src.ctx.log
        if not self.suspended:
            return
        took = src.ctx.now() - (self.suspended_at or src.ctx.now())
        self.suspended = False
        self.suspended_at = None
        src.ctx.retrier.cancel(self, ("suspend",))
        if src.ctx.dry:
            log("resume %s: after %s s (%s) [dry run]" %
                (self.name, fmt_s(took), why))
            return

        def fn():
            try:
                if self.paused():
                    steps.step("virDomainResume(%s)" % self.name)
                    self.dom.resume()
            except libvirt.libvirtError as e:
                if gone_error(e):
                    raise Gone(err_text(e))
                raise
        ok = src.ctx.retrier.attempt(self, "suspend", fn, "virDomainResume",
                                     "resumed", "resume", undo=True)
        self.ctx.count("resume", "ok" if ok else "retried")
        log("resume %s: after %s s (%s)%s" %
            (self.name, fmt_s(took), why, "" if ok else ": failed, retrying"))
        self.ctx.journal_sync(self)
