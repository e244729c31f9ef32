#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-only
"""The fleet end to end (make test): three hosts of a test fleet
(rig.py: private libvirtds, each with sysidle-libvirt), one idle domain
on each (idle.elf hz=0, 2 vCPUs, 128 MiB; KVM where /dev/kvm works, TCG
where not), and sysidle-fleet with a budget of 4 vCPUs a host, idle vCPUs
weighing 0.25, short times (--settle 2s --unpack-after 1s --standby-after
1s --vm-cooldown 4s --host-cooldown 4s).

Checks (TAP), each with its times:
  the rig: three hosts with their own host names and host UUIDs
  the domains boot; each host's bridge publishes FULL_NOTED
  pack: every domain on one host, by live migration, within PACK_S; the
    two emptied hosts handed to standby (the rig's hook: its libvirtd and
    bridge stopped) with libvirt-style arguments and the host's XML; the
    metrics say so; every domain runs once, defined on that host only
  --status shows the two hosts in standby
  unpack: two domains made busy (bytes on their serial consoles): a host
    in standby is woken (hook "host-standby end") and a busy domain moved
    to it within UNPACK_S; no host over budget after; census
  no flapping: no migration before --vm-cooldown after the unpack; once
    idle again, the fleet packs again and the woken host goes back to
    standby
  SIGTERM: exit 0, sysidle_fleet_up 0, the journal holds the hosts in
    standby and no migration
  a new daemon on the same state directory takes them as in standby and
    moves nothing
  teardown: no process of any host left, no mount

usage: test_fleet.py BUILD_DIR SOURCE_DIR
Exit 0 passed, 1 a check failed, 77 the fleet cannot run here (not root,
no libvirtd, QEMU or python3-libvirt), with the reason."""
import os
import re
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, ".."))
import tap  # noqa: E402
from tap import check  # noqa: E402
import rig  # noqa: E402
from fleetd import PY, FleetDaemon, census, idle_states, placement  # noqa: E402
from scene import diag, poll, prepare  # noqa: E402

SKIP = 77
BOOT_S = 120
IDLE_S = 30
PACK_S = 60
UNPACK_S = 30
BUDGET = 4
NAMES = ["vm1", "vm2", "vm3"]
ARGS = ["--cpu-budget", str(BUDGET), "--idle-vcpu-weight", "0.25",
        "--settle", "2s", "--unpack-after", "1s", "--standby-after", "1s",
        "--vm-cooldown", "4s", "--host-cooldown", "4s", "--keepalive", "1",
        "--interval", "2s", "--parallel", "2", "--stop-timeout", "30s"]


def loads(fleet, names):
    """{host: weighted vCPU load} from the domains' published states."""
    where = placement(fleet, names)
    st = idle_states(fleet, names)
    out = {}
    for n, h in where.items():
        if h:
            out[h] = out.get(h, 0) + (0.5 if st[n] == "FULL_NOTED" else 2)
    return out


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    build, src = sys.argv[1:3]
    script = os.path.join(src, "tools", "sysidle-fleet")
    try:
        fleet = rig.Fleet(3, build)
    except rig.RigError as e:
        print("1..0 # SKIP %s" % e)
        return SKIP
    prepare()
    d = None
    try:
        fleet.start(bridge_args=["--interval", "100"])
        names = {h.conn().getHostname() for h in fleet.hosts}
        uuids = [host_uuid(h) for h in fleet.hosts]
        check(len(names) == 3 and uuids == [h.uuid for h in fleet.hosts]
              and len(set(uuids)) == 3,
              "rig: %s, host names %s, host UUIDs distinct" % (
                  fleet.describe(), sorted(names)), uuids)
        for h, n in zip(fleet.hosts, NAMES):
            fleet.create_domain(h, n)
        t0 = time.monotonic()
        booted = all(fleet.wait_booted(n, BOOT_S) for n in NAMES)
        check(booted, "%s boot idle.elf (%.1f s)" % (
            ", ".join(NAMES), time.monotonic() - t0))
        if not booted:
            return 1
        idle = poll(lambda: set(idle_states(fleet, NAMES).values()) ==
                    {"FULL_NOTED"}, IDLE_S)
        check(idle, "each host's bridge publishes FULL_NOTED",
              idle_states(fleet, NAMES))
        d = FleetDaemon(fleet, script, os.path.join(fleet.dir, "fleetd"),
                        ARGS)
        steps(fleet, d)
    except Exception as e:
        check(False, "unexpected error: %s" % e, traceback.format_exc())
    finally:
        if d is not None and d.running():
            d.stop()
        if d is not None and tap.failures:
            diag("sysidle-fleet's log (end):\n" + d.log(True)[-4000:])
        pids = [p for h in fleet.hosts for p in h.pids()]
        killed = fleet.teardown()
        if killed:
            diag("killed with SIGKILL: " + ", ".join(killed))
        left = [p for p in pids if os.path.exists("/proc/%d" % p) and
                rig.read("/proc/%d/stat" % p).rsplit(")", 1)[-1].split()[:1]
                != ["Z"]]
        mounts = [ln for ln in rig.read("/proc/mounts").splitlines()
                  if rig.PREFIX in ln]
        check(not left and not mounts, "teardown: no process of any host "
              "left (%d were there), no mount" % len(pids),
              "left: %s\nmounts: %s" % (left, mounts))
    return tap.finish()


def host_uuid(h):
    """The host UUID libvirt reports for @h."""
    m = re.search(r"<host>\s*<uuid>([^<]+)", h.conn().getCapabilities())
    return m.group(1) if m else None


def steps(fleet, d):
    t0 = time.monotonic()
    d.start()

    def packed():
        where = placement(fleet, NAMES)
        frozen = [h.name for h in fleet.hosts if h.frozen]
        return len(set(where.values())) == 1 and None not in \
            where.values() and len(frozen) == 2 and (where, frozen)
    got = poll(packed, PACK_S, 0.2)
    took = time.monotonic() - t0
    log = d.log()
    n_pack = len(re.findall(r"INFO migrated \S+ \S+ -> \S+ \(pack\)", log))
    check(bool(got) and n_pack == 2, "pack: every domain on one host, the "
          "two others in standby, %d migrations, %.1f s after the start" %
          (n_pack, took), log[-3000:])
    if not got:
        return
    where, frozen = got
    home = list(where.values())[0]
    calls = fleet.hooks_log()
    begin = sorted(c["argv"][0] for c in calls if c["argv"][2] == "begin")
    args_ok = all(c["argv"] == [c["argv"][0], "host-standby", "begin",
                                fleet.host(c["argv"][0]).uri] and
                  "<name>%s</name>" % c["argv"][0] in c["stdin"] and
                  "<uuid>%s</uuid>" % fleet.host(c["argv"][0]).uuid
                  in c["stdin"] for c in calls)
    check(begin == sorted(frozen) and args_ok, "the host hook: NAME "
          "host-standby begin URI for %s, the host's XML on stdin" %
          ", ".join(begin), calls)
    m = d.metrics()
    check(all(m.get('sysidle_fleet_host_standby{host="%s"}' % h) == 1
              for h in frozen) and
          m.get('sysidle_fleet_hosts{state="standby"}') == 2 and
          m.get('sysidle_fleet_migrations_total{reason="pack",'
                'result="ok"}') == 2,
          "metrics: host_standby 1 for both, hosts{standby} 2, 2 pack "
          "migrations ok")
    problems = census(fleet, NAMES)
    check(not problems, "census: each domain runs once, on %s, defined "
          "there only" % home, problems)
    import subprocess
    r = subprocess.run([PY, d.script, "--status", "--state-dir",
                        d.state_dir], capture_output=True, text=True)
    check(r.returncode == 0 and "daemon running" in r.stdout and
          all(re.search(r"^%s\s+standby" % h, r.stdout, re.M)
              for h in frozen), "--status: daemon running, %s in standby" %
          " and ".join(frozen), r.stdout + r.stderr)

    # unpack: two domains busy
    busy = fleet.busy(["vm1", "vm2"])
    t1 = time.monotonic()
    busy.start()
    try:
        def unpacked():
            if any(h.frozen for h in fleet.hosts) and \
                    sum(1 for h in fleet.hosts if h.frozen) == 2:
                return False
            if not re.search(r"INFO migrated \S+ \S+ -> \S+ \(unpack\)",
                             d.log()):
                return False
            ld = loads(fleet, NAMES)
            return ld and max(ld.values()) <= BUDGET and \
                len([x for x in ld]) >= 2 and ld
        ld = poll(unpacked, UNPACK_S, 0.2)
        took = time.monotonic() - t1
        log = d.log()
        woke = [c["argv"][0] for c in fleet.hooks_log()
                if c["argv"][2] == "end"]
        n_unpack = len(re.findall(r"INFO migrated \S+ \S+ -> \S+ \(unpack\)",
                                  log))
        check(bool(ld) and len(woke) == 1 and n_unpack >= 1,
              "unpack: vm1, vm2 busy: %s woken, %d busy domain moved, every "
              "host within %d vCPUs (%s), %.1f s after they woke" % (
                  woke, n_unpack, BUDGET, ld, took), log[-3000:])
        check(not census(fleet, NAMES), "census after the unpack",
              census(fleet, NAMES))
        t_unpack = time.monotonic()
    finally:
        busy.stop()
    # no flapping: the hosts of the unpack keep their domains for
    # --host-cooldown, although the domains are idle again at once
    n_before = len(re.findall(r"INFO migrated ", d.log()))
    time.sleep(max(0.0, t_unpack + 3.0 - time.monotonic()))
    n_after = len(re.findall(r"INFO migrated ", d.log()))
    check(n_after == n_before, "no migration within --host-cooldown of the "
          "unpack, its domains idle again (%d then %d)" % (n_before,
                                                          n_after))
    got = poll(packed, PACK_S, 0.2)
    check(bool(got), "idle again: packed again, two hosts in standby (%s)" %
          (got,), d.log()[-2000:])
    problems = census(fleet, NAMES)
    check(not problems, "census after the second pack", problems)
    rc = d.stop()
    m = d.metrics()
    j = d.journal()
    frozen = sorted(h.name for h in fleet.hosts if h.frozen)
    check(rc == 0 and m.get("sysidle_fleet_up") == 0 and
          sorted(k for k in j) == ["standby:%s" % h for h in frozen],
          "SIGTERM: exit %s, sysidle_fleet_up 0, the journal holds %s" % (
              rc, sorted(j)), d.log()[-1500:])
    d.start()
    seen = d.wait_log(r"journal: host \S+ is in standby", 20)
    time.sleep(3)
    log = d.log()
    check(seen is not None and len(re.findall(r"is in standby", log)) == 2
          and "migrating" not in log and "host-standby" not in
          "".join(ln for ln in log.splitlines() if "hook" in ln),
          "a new daemon takes both hosts as in standby and moves nothing",
          log[-2000:])
    rc = d.stop()
    check(rc == 0, "its SIGTERM: exit 0")


if __name__ == "__main__":
    sys.exit(main())
