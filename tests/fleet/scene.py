# SPDX-License-Identifier: GPL-2.0-only
"""The scene the fleet's fault and crash tests share: a test fleet
(rig.py) whose first hosts are the homes of vm1 and vm2 (idle.elf hz=0,
2 vCPUs, 128 MiB), a new sysidle-fleet (fleetd.FleetDaemon) and state
directory for each part of a test, and between parts every host thawed
and answering, each domain back home and fully idle. Also the TAP helpers
the fleet tests use (diag, poll) and the migrations throttled so that a
test can act while one is under way."""
import os
import signal
import sys
import time

import rig
from fleetd import FleetDaemon, census, idle_states, placement
from tap import check
import tap

NAMES = ["vm1", "vm2"]


def diag(msg):
    for line in str(msg).splitlines():
        print("# " + line)
    sys.stdout.flush()


def poll(fn, timeout, step=0.1):
    """@fn() until it is true or @timeout s passed; its last value."""
    end = time.monotonic() + timeout
    while True:
        v = fn()
        if v or time.monotonic() > end:
            return v
        time.sleep(step)


class Scene:
    def __init__(self, fleet, script, base_args):
        self.fleet = fleet
        self.script = script
        self.base = list(base_args)
        self.h1, self.h2 = fleet.hosts[:2]
        self.home = {"vm1": self.h1, "vm2": self.h2}
        self.n = 0
        self.d = None

    def boot(self):
        for n, h in self.home.items():
            self.fleet.create_domain(h, n)
        return all(self.fleet.wait_booted(n) for n in NAMES)

    def daemon(self, args, hosts=None, extra=(), env=None):
        """A new sysidle-fleet, state directory of its own."""
        self.n += 1
        self.d = FleetDaemon(self.fleet, self.script,
                             os.path.join(self.fleet.dir, "d%d" % self.n),
                             self.base + list(args))
        self.d.start(extra=extra, hosts=hosts, env=env)
        return self.d

    def stop(self):
        if self.d is not None and self.d.running():
            rc = self.d.stop()
            if rc != 0:
                diag("sysidle-fleet exit %s; its log:\n%s" % (
                    rc, self.d.log()[-3000:]))
        if self.d is not None and tap.failures:
            diag("log:\n" + self.d.log()[-2500:])

    def reset(self):
        """Every host thawed and answering, each domain on its home host
        and fully idle."""
        for h in self.fleet.hosts:
            h.thaw()
            h.out_of_memory(False)
            if h.libvirtd_pid() is None:
                h.start_libvirtd()
        for name, h in self.home.items():
            if poll(lambda: len(self.fleet.where(name)) == 1, 30):
                self.fleet.migrate(name, h)
        # (a bridge whose libvirtd was restarted connects again with its
        # back-off, up to a minute)
        ok = poll(lambda: set(idle_states(self.fleet, NAMES).values()) ==
                  {"FULL_NOTED"}, 120, 0.2)
        if not ok:
            diag("reset: not idle: %s" % idle_states(self.fleet, NAMES))
        return ok

    def census(self, what):
        """After the daemon's stop (which waits for the migrations under
        way), the census."""
        self.stop()
        problems = census(self.fleet, NAMES)
        check(not problems, "%s: census: each domain runs once, defined "
              "there only (%s)" % (what, placement(self.fleet, NAMES)),
              problems)
        return not problems

    def part(self, name, fn):
        """@fn(), then the daemon stopped and the scene reset; a stop
        signal (SystemExit, KeyboardInterrupt) skips the reset and goes
        on up, to the teardown."""
        try:
            fn()
        except Exception as e:
            import traceback
            check(False, "%s: unexpected error: %s" % (name, e),
                  traceback.format_exc())
        except BaseException:
            self.stop()
            raise
        self.stop()
        try:
            self.reset()
        except Exception as e:
            diag("reset after %s: %s" % (name, e))

    def throttled(self):
        """Both domains' migrations throttled to 1 MiB/s (the transfer
        lasts about a second); {name: virDomain} on their hosts."""
        doms = {}
        for n, h in self.home.items():
            doms[n] = h.conn().lookupByName(n)
            doms[n].migrateSetMaxSpeed(1, 0)
        return doms

    @staticmethod
    def in_job(doms):
        """The name of a domain of @doms with a job under way, or None."""
        import libvirt
        for n, dom in doms.items():
            try:
                if dom.jobInfo()[0] != libvirt.VIR_DOMAIN_JOB_NONE:
                    return n
            except libvirt.libvirtError:
                pass
        return None

    def other(self, h):
        return self.h2 if h is self.h1 else self.h1

    def unstick(self, d, host, name, what):
        """libvirt (9.0) may keep the incoming copy of a libvirtd restarted
        mid-migration with a job it never ends, and refuse to destroy it;
        the daemon says so and waits. Does what its message asks when it
        said so (that copy's QEMU killed and its state file removed,
        @host's libvirtd restarted); returns whether it did."""
        if not d.wait_log(r"keeps a job on that copy that nobody ends", 1):
            return False
        diag("%s: libvirt on %s kept the incoming copy of %s locked; the "
             "daemon said so; doing what it asks" % (what, host.name, name))
        host.kill_libvirtd(signal.SIGKILL)
        for p in host.pids():
            if ("guest=%s," % name) in rig.read("/proc/%d/cmdline" % p):
                os.kill(p, signal.SIGKILL)
        # libvirtd would recover the copy from its state file again (with
        # the same job): the copy's state removed, as an operator would
        for ext in (".xml", ".pid"):
            try:
                os.unlink(host.path("/run/libvirt/qemu/%s%s" % (name, ext)))
            except FileNotFoundError:
                pass
        host.start_libvirtd()
        return True


def prepare():
    """What every fleet test does before its fleet starts: a stack dump
    on SIGUSR1 (where it waits), libvirt's own error printing off (its
    errors are raised anyway), SIGTERM (a harness's timeout) ending the
    test through its teardown."""
    import faulthandler
    import libvirt
    faulthandler.register(signal.SIGUSR1)
    libvirt.registerErrorHandler(lambda c, e: None, None)
    signal.signal(signal.SIGTERM, lambda s, f: sys.exit(1))


def fleet_or_skip(n, build):
    """(a Fleet of @n hosts, None) or (None, the TAP skip-all line)."""
    try:
        return rig.Fleet(n, build), None
    except rig.RigError as e:
        return None, "1..0 # SKIP %s" % e
