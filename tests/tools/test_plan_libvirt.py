#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""Tests of sysidle-consolidate's migration plan
(tools/sysidle_consolidate/plan.py) with libvirt: the libvirt inventory
(--hosts) and --apply through libvirt's test driver (node files written
here; migration is not supported by that driver, so --apply must report
the failure), then --apply with the migration faked: every move in plan
order, its flags, a failure reported and the rest of that host skipped.
Skipped without the libvirt binding.

usage: test_plan_libvirt.py [TOOLS_DIR]    (default: ../../tools from this
file)
TAP on stdout; exit 0 when every test passes.
"""
import json
import os
import re
import shutil
import sys

from plan_inventory import (
    BUDGET_LINE, HAVE_LIBVIRT, P, TMP, GiB, cli, same_lines)
from tap import check as ok, finish, skip

NODE = """<node xmlns:test="http://libvirt.org/schemas/domain/test/1.0">
  <cpu><mhz>2000</mhz><model>i686</model><active>8</active><total>8</total>
    <nodes>1</nodes><sockets>1</sockets><cores>8</cores><threads>1</threads>
  </cpu>
  <memory>16777216</memory>
%s</node>
"""


def node_dom(name, uuid, vcpus, mib, state=None, since=None, runstate=None,
             transient=False):
    meta = ""
    if state is not None:
        meta = ('<metadata><s:state xmlns:s="urn:sysidle:1" name="%s" '
                'num="4" since_unix_ms="%d"/></metadata>' % (state, since))
    rs = "" if runstate is None else "<test:runstate>%d</test:runstate>" % \
        runstate
    if transient:
        rs += "<test:transient/>"
    return ("""  <domain type="test"><name>%s</name><uuid>%s</uuid>%s
    <memory unit="MiB">%d</memory><currentMemory unit="MiB">%d</currentMemory>
    <vcpu>%d</vcpu>%s<os><type>hvm</type></os></domain>
""" % (name, uuid, rs, mib, mib, vcpus, meta))


def test_libvirt():
    if not HAVE_LIBVIRT:
        for d in ("libvirt inventory plan", "libvirt inventory dump",
                  "--apply failure"):
            skip(d, "no libvirt binding for %s" % sys.executable)
        return
    since = 1767323045678
    files = {
        "a": [node_dom("db1", "11111111-0000-0000-0000-000000000001", 4,
                       4096, "NOT", since),
              node_dom("old", "11111111-0000-0000-0000-000000000002", 1,
                       512, runstate=5)],
        "b": [node_dom("web1", "22222222-0000-0000-0000-000000000001", 2,
                       1024, "FULL_NOTED", since),
              node_dom("web2", "22222222-0000-0000-0000-000000000002", 1,
                       2048, "FULL_NOTED", since)],
        "c": [node_dom("batch", "33333333-0000-0000-0000-000000000001", 2,
                       2048, "FULL_NOTED", since),
              node_dom("nometa", "33333333-0000-0000-0000-000000000002", 1,
                       512)],
    }
    uris = []
    for h in sorted(files):
        path = os.path.join(TMP, h + ".xml")
        with open(path, "w") as f:
            f.write(NODE % "".join(files[h]))
        uris.append("test://" + path)
    ua, ub, uc = uris
    hosts = ",".join([uc, ua, ub])     # order given does not matter
    dump = os.path.join(TMP, "dump.json")
    rc, lines = cli(["--hosts", hosts, "--dump-inventory", dump])
    norm = [re.sub(r"FULL_NOTED \d+ s", "FULL_NOTED N s", l) for l in lines]
    hl = "8 CPUs, 16384 MiB; budget 8 vCPUs, 15360 MiB; carries"
    want = [
        BUDGET_LINE,
        "host %s: %s 4 vCPUs, 4096 MiB in 1 running domain (0 fully idle)"
        % (ua, hl),
        "host %s: %s 3 vCPUs, 3072 MiB in 2 running domains (2 fully idle)"
        % (ub, hl),
        "host %s: %s 3 vCPUs, 2560 MiB in 2 running domains (1 fully idle)"
        % (uc, hl),
        "keep host %s: domains that do not move: db1 (busy: NOT)" % ua,
        "keep host %s: domains that do not move: nometa (unknown: no "
        "urn:sysidle:1 state)" % uc,
        "move web2 (1 vCPU, 2048 MiB, FULL_NOTED N s) %s -> %s (then 5/8 "
        "vCPUs, 6144/15360 MiB)" % (ub, ua),
        "move web1 (2 vCPUs, 1024 MiB, FULL_NOTED N s) %s -> %s (then 7/8 "
        "vCPUs, 7168/15360 MiB)" % (ub, ua),
        "power-down candidate: %s (all 2 domains move)" % ub,
        "plan: 3 hosts -> 2, 2 migrations",
    ]
    same_lines(norm, want, "--hosts with 3 test-driver hosts: the plan")
    ok(rc == 0, "--hosts: exit 0", "rc %d" % rc)
    try:
        with open(dump) as f:
            inv = json.load(f)
        a = [h for h in inv["hosts"] if h["uri"] == ua][0]
        b = [h for h in inv["hosts"] if h["uri"] == ub][0]
        good = (a["cpus"] == 8 and a["memory_kib"] == 16 * GiB and
                a["inactive_domains"] == [
                    {"name": "old",
                     "uuid": "11111111-0000-0000-0000-000000000002"}] and
                b["domains"][0] == {
                    "name": "web1", "uuid":
                    "22222222-0000-0000-0000-000000000001", "vcpus": 2,
                    "memory_kib": 1024 * 1024, "run_state": "running",
                    "state": "FULL_NOTED", "since_unix_ms": since})
        ok(good, "--dump-inventory: host info, domains, metadata, inactive "
           "domains", json.dumps(inv, indent=1))
        rc2, again = cli(["--plan-input", dump])
        ok(again == lines and rc2 == rc, "the dumped inventory gives the "
           "same plan through --plan-input", "\n".join(again))
    except (OSError, ValueError, KeyError, IndexError) as e:
        ok(False, "--dump-inventory readable", str(e))
        ok(False, "the dumped inventory gives the same plan")

    rc, lines = cli(["--hosts", hosts, "--apply"])
    tail = lines[len(want):]
    want_tail = [
        "migration web2 %s -> %s not done: failed: argument unsupported: "
        "p2p migration is not supported by the source host" % (ub, ua),
        "host %s not emptied, it stays on: 0 domains moved (none), web2 "
        "not done, 1 move not attempted (web1)" % ub,
        "apply: 0 of 2 migrations done, 1 failed, 1 not attempted; ready to "
        "power down: none; not emptied: %s" % ub,
    ]
    same_lines(tail, want_tail, "--apply: the migration failure is reported, "
               "the host's other move not attempted")
    ok(rc == P.EXIT_APPLY_FAILED, "--apply failure: exit 5", "rc %d" % rc)

    # a domain that wakes between the plan and its move is not migrated
    from sysidle_consolidate import plan_libvirt as PL
    inv = PL.inventory([ua, ub, uc])
    p = P.make_plan(inv, P.Budget())
    path_b = ub[len("test://"):]
    with open(path_b) as f:
        text = f.read()
    with open(path_b, "w") as f:
        f.write(text.replace('name="FULL_NOTED"', 'name="NOT"'))
    out = []
    rc = PL.apply_plan(p, out.append)
    ok(rc == P.EXIT_APPLY_FAILED and out[0] ==
       "migration web2 %s -> %s not done: no longer fully idle (NOT)" %
       (ub, ua), "--apply: a domain no longer idle is not migrated",
       "\n".join(out))

    rc, lines = cli(["--hosts", hosts, "--apply", "--cpu-budget", "3"])
    ok(rc == P.EXIT_INFEASIBLE and lines[-1] ==
       "apply: nothing done (infeasible budget)" and
       not any(l.startswith("migrat") for l in lines),
       "--apply with an infeasible budget: nothing attempted, exit 4",
       "\n".join(lines))

    test_apply_fake_migration(files, since)

    rc, lines = cli(["--hosts", ua + ",test://" +
                     os.path.join(TMP, "nothere.xml")])
    ok(rc == P.EXIT_INVENTORY and len(lines) == 1 and
       lines[0].startswith("error: inventory: test://"),
       "--hosts with an unreadable host: exit 6", "\n".join(lines))
    rc, lines = cli(["--hosts", ua + "," + ua])
    ok(rc == P.EXIT_INVENTORY and lines == [
        "error: inventory: host given twice: " + ua],
       "--hosts with a URI twice: exit 6", "\n".join(lines))


def test_apply_fake_migration(files, since):
    """--apply's success path, its flags and a failure in the middle: the
    test driver's domains, with migrateToURI3 replaced by a recorder."""
    import types
    import libvirt
    from sysidle_consolidate import plan_libvirt as PL
    files = dict(files)
    files["d"] = [node_dom("cron", "44444444-0000-0000-0000-000000000001", 1,
                           256, "FULL_NOTED", since, transient=True)]
    uris = []
    for h in sorted(files):
        path = os.path.join(TMP, "f" + h + ".xml")
        with open(path, "w") as f:
            f.write(NODE % "".join(files[h]))
        uris.append("test://" + path)
    ua, ub, uc, ud = uris
    calls = []
    fail = set()

    class Dom:
        def __init__(self, real):
            self.real = real

        def __getattr__(self, name):
            return getattr(self.real, name)

        def migrateToURI3(self, uri, params, flags):
            calls.append((self.real.name(), uri, flags))
            if self.real.name() in fail:
                raise libvirt.libvirtError("injected failure")

    class Conn:
        def __init__(self, real):
            self.real = real

        def __getattr__(self, name):
            return getattr(self.real, name)

        def lookupByUUIDString(self, uuid):
            return Dom(self.real.lookupByUUIDString(uuid))

    fake = types.ModuleType("libvirt")
    fake.__dict__.update(libvirt.__dict__)
    fake.open = lambda uri: Conn(libvirt.open(uri))
    real = PL.libvirt
    PL.libvirt = fake
    try:
        rc, lines = cli(["--hosts", ",".join(uris), "--apply"])
        moves = [l for l in lines if l.startswith("move ")]
        applied = [re.sub(r" \([0-9.]+ s\)$", "", l) for l in lines
                   if l.startswith("migrated ")]
        live = libvirt.VIR_MIGRATE_LIVE | libvirt.VIR_MIGRATE_PEER2PEER
        keep_def = libvirt.VIR_MIGRATE_PERSIST_DEST | \
            libvirt.VIR_MIGRATE_UNDEFINE_SOURCE
        ok(rc == 0 and len(moves) == 3 and applied == [
            "migrated cron %s -> %s" % (ud, ua),
            "migrated web2 %s -> %s" % (ub, ua),
            "migrated web1 %s -> %s" % (ub, ua)] and lines[-1] ==
           "apply: 3 of 3 migrations done; ready to power down: %s, %s" %
           (ud, ub), "--apply (migration faked): every move in plan order, "
           "exit 0", "\n".join(lines))
        ok(calls == [("cron", ua, live), ("web2", ua, live | keep_def),
                     ("web1", ua, live | keep_def)],
           "--apply flags: live peer to peer; the definition moves with a "
           "persistent domain only", repr(calls))
        del calls[:]
        fail.add("web2")
        rc, lines = cli(["--hosts", ",".join(uris), "--apply"])
        tail = [re.sub(r" \([0-9.]+ s\)$", "", l) for l in lines[-5:-1]]
        same_lines(tail, [
            "plan: 4 hosts -> 2, 3 migrations",
            "migrated cron %s -> %s" % (ud, ua),
            "migration web2 %s -> %s not done: failed: injected failure"
            % (ub, ua),
            "host %s not emptied, it stays on: 0 domains moved (none), "
            "web2 not done, 1 move not attempted (web1)" % ub],
            "--apply with a failure: reported, the rest of that host "
            "skipped")
        ok(lines[-1] == "apply: 1 of 3 migrations done, 1 failed, 1 not "
           "attempted; ready to power down: %s; not emptied: %s" % (ud, ub)
           and rc == P.EXIT_APPLY_FAILED and [c[0] for c in calls] ==
           ["cron", "web2"], "--apply with a failure: summary, exit 5, "
           "web1 never tried", "\n".join(lines) + "\n" + repr(calls))
    finally:
        PL.libvirt = real


def main():
    try:
        test_libvirt()
    finally:
        shutil.rmtree(TMP, ignore_errors=True)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
