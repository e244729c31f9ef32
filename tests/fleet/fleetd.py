# SPDX-License-Identifier: GPL-2.0-only
"""sysidle-fleet run against a test fleet (rig.py), for the tests and the
benchmark: its command line for the rig's hosts, its log, its metrics,
its stop by PID; and the fleet-wide checks (census: every domain runs on
exactly one host, its persistent definition on that host only)."""
import os
import re
import signal
import subprocess
import time

import rig

PY = "/usr/bin/python3"


class FleetDaemon:
    """sysidle-fleet (@script) for @fleet's hosts, its state directory and
    metrics in @workdir, the rig's standby hook, the migration URI of the
    rig; @args are added."""

    def __init__(self, fleet, script, workdir, args=(), env=None,
                 name="fleetd"):
        self.fleet = fleet
        self.script = script
        self.workdir = workdir
        self.state_dir = os.path.join(workdir, "state")
        self.metrics_path = os.path.join(workdir, "fleet.prom")
        self.hooks_dir = os.path.join(workdir, "hooks")
        self.log_path = os.path.join(workdir, name + ".log")
        self.args = list(args)
        self.env = env
        self.proc = None
        os.makedirs(workdir, exist_ok=True)
        fleet.install_hook(self.hooks_dir)

    def argv(self, hosts=None):
        a = [PY, self.script]
        for h in hosts or self.fleet.hosts:
            a += ["--host", "%s=%s" % (h.name, h.uri)]
        return a + ["--migrate-uri", rig.MIGRATE_URI, "--hooks",
                    self.hooks_dir, "--state-dir", self.state_dir,
                    "--metrics-file", self.metrics_path] + self.args

    def start(self, extra=(), env=None, hosts=None):
        self.logf = open(self.log_path, "a")
        e = dict(os.environ)
        e.pop("JOURNAL_STREAM", None)
        e.update(self.env or {})
        e.update(env or {})
        self.offset = os.path.getsize(self.log_path)
        self.proc = subprocess.Popen(self.argv(hosts) + list(extra),
                                     stdin=subprocess.DEVNULL,
                                     stdout=self.logf,
                                     stderr=subprocess.STDOUT, env=e,
                                     start_new_session=True)
        return self.proc

    def log(self, all_runs=False):
        try:
            with open(self.log_path, errors="replace") as f:
                if not all_runs:
                    f.seek(self.offset)
                return f.read()
        except OSError:
            return ""

    def wait_log(self, pattern, timeout, since=0):
        """The first match of @pattern in this run's log after character
        @since, within @timeout s (None: not seen, or the daemon ended)."""
        end = time.monotonic() + timeout
        rx = re.compile(pattern, re.M)
        while True:
            m = rx.search(self.log(), since)
            if m:
                return m
            if time.monotonic() > end or self.proc.poll() is not None:
                return None
            time.sleep(0.1)

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self, sig=signal.SIGTERM, timeout=40):
        """@sig to the daemon by its PID; its exit status (None: it had to
        be killed after @timeout s)."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            try:
                os.kill(self.proc.pid, sig)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
                self.logf.close()
                return None
        self.logf.close()
        return self.proc.returncode

    def metrics(self):
        """{'name{labels}': value} of the metrics file."""
        out = {}
        try:
            with open(self.metrics_path) as f:
                for ln in f:
                    if ln and not ln.startswith("#"):
                        k, _, v = ln.rstrip("\n").rpartition(" ")
                        out[k] = float(v)
        except OSError:
            pass
        return out

    def journal(self):
        import json
        try:
            with open(os.path.join(self.state_dir, "journal.json")) as f:
                return json.load(f)["entries"]
        except (OSError, ValueError):
            return {}


def _on_frozen(h, name):
    """(runs, defined) of domain @name on host @h whose libvirtd is
    stopped, without asking it: a QEMU process of the host named for the
    domain, its definition file in the host's /etc."""
    runs = any(("guest=%s," % name) in rig.read("/proc/%d/cmdline" % p)
               .replace("\0", " ") for p in h.pids()
               if rig.comm(p).startswith("qemu"))
    defined = os.path.isfile(h.path("/etc/libvirt/qemu/%s.xml" % name))
    return runs, defined


def where_all(fleet, name):
    """(hosts running @name, hosts holding its persistent definition), a
    host whose libvirtd is stopped (standby) seen from outside."""
    on, defs = [], []
    for h in fleet.hosts:
        if h.frozen:
            runs, defined = _on_frozen(h, name)
            if runs:
                on.append(h.name)
            if defined:
                defs.append(h.name)
    on += fleet.where(name)
    defs += fleet.defined(name)
    return sorted(on), sorted(defs)


def census(fleet, names):
    """[problems]: a domain of @names not running on exactly one host, or
    whose persistent definition is not on exactly that host."""
    problems = []
    for n in names:
        on, defs = where_all(fleet, n)
        if len(on) != 1:
            problems.append("%s runs on %s" % (n, on or "no host"))
        elif defs != on:
            problems.append("%s runs on %s, defined on %s" %
                            (n, on[0], defs or "no host"))
    return problems


def placement(fleet, names):
    """{name: the host running it (the first, if several) or None}."""
    return {n: (where_all(fleet, n)[0] or [None])[0] for n in names}


def idle_states(fleet, names):
    """{name: its urn:sysidle:1 state name or None} where it runs."""
    import libvirt
    out = {}
    for n in names:
        out[n] = None
        for hn in fleet.where(n):
            try:
                xml = fleet.host(hn).conn().lookupByName(n).metadata(
                    libvirt.VIR_DOMAIN_METADATA_ELEMENT, "urn:sysidle:1")
                m = re.search(r'name="([A-Z_]+)"', xml)
                out[n] = m.group(1) if m else None
            except libvirt.libvirtError:
                pass
    return out
