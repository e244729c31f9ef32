#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""The sample hook tools/hooks/vm with stand-ins for virsh and logger: the
VMM's state copied into the metadata of the libvirt domain of the same
name (valid against the schema), logged when there is no such domain, no
virsh or no logger; started and stopped ignored; the libvirt bridge's
leased state only logged, and ignored once its lease ran out or its
writer is gone.

usage: test_hooks_sample.py VMM GUEST_DIR GUEST_TOOLS_DIR SYSIDLECTL
Exit: 0 all passed, 1 a check failed, 77 skipped (no usable /dev/kvm)."""
import json
import os
import re
import subprocess
import sys
import tempfile
import time

import vmmtest
from vmmtest import check, read_lines

vmmtest.init(sys.argv)
import urnschema  # noqa: E402
from hook_recorder import NAME, write_hook  # noqa: E402


SAMPLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                      "..", "tools", "hooks", "vm")
# A stand-in for virsh / logger: records its argv; "virsh dominfo" knows
# the domain named in KNOWN only.
FAKE = r"""#!%(python)s
import json, sys
with open(%(record)r, "a") as f:
    f.write(json.dumps(sys.argv) + "\n")
if sys.argv[1:2] == ["dominfo"]:
    sys.exit(0 if sys.argv[3] == %(known)r else 1)
"""


def test_sample(tmp):
    """tools/hooks/vm with stand-ins for virsh and logger: the VMM's state
    copied into a libvirt domain of the same name (the element as it is,
    valid against the schema), the bridge's leased state only logged, a
    stale one (lease run out, writer gone) ignored."""
    record = os.path.join(tmp, "sample.rec")
    element = ("name='FULL_NOTED' state='FULL_NOTED' num='4' "
               "since='2026-01-02T03:04:05.678Z' since_unix_ms='1767323045678' "
               "full_idle_periods='1' vcpus='2' full_idle_ratio_1m='1.000' "
               "full_idle_ratio_1h='0.500' full_idle_ratio_24h='0.021' "
               "left_full_idle_unix_ms='1767323040001'")
    vmm_xml = ("<domain type='kvm'><name>x</name><uuid>u</uuid><vcpu>2</vcpu>"
               "<metadata><sysidle:state xmlns:sysidle='urn:sysidle:1' "
               "%s/></metadata></domain>\n" % element)
    host = re.sub(r"[^A-Za-z0-9._-]", "-", os.uname().nodename)
    with open("/proc/self/stat") as f:
        ticks = f.read().rsplit(")", 1)[1].split()[19]

    def bridge_xml(until_ms, pid=os.getpid(), start=ticks):
        # libvirt's own XML: several lines, double quotes
        return ('<domain type="kvm" id="3">\n  <name>x</name>\n  <metadata>'
                '\n    <sysidle:state xmlns:sysidle="urn:sysidle:1" %s '
                'writer_host="%s" writer_pid="%d" writer_start_ticks="%s" '
                'valid_until_unix_ms="%d"/>\n  </metadata>\n</domain>\n' %
                (element.replace("'", '"'), host, pid, start, until_ms))
    bins = {}
    for kind, progs in [("both", ["virsh", "logger"]), ("logger", ["logger"]),
                        ("none", [])]:
        bins[kind] = os.path.join(tmp, "bin-" + kind)
        os.makedirs(bins[kind])
        for prog in progs:
            write_hook(os.path.join(bins[kind], prog), FAKE % {
                "python": sys.executable, "record": record, "known": NAME})
        for prog in ["cat", "sed", "tr", "date", "uname", "cut"]:
            os.symlink(subprocess.check_output(["sh", "-c", "command -v " +
                                                prog], text=True).strip(),
                       os.path.join(bins[kind], prog))

    def run(kind, name, *args, xml=vmm_xml):
        if os.path.exists(record):
            os.unlink(record)
        p = subprocess.run([SAMPLE, name] + list(args), input=xml, text=True,
                           capture_output=True, timeout=10,
                           env={"LC_ALL": "C", "HOME": "/",
                                "PATH": bins[kind]})
        calls = [json.loads(l)[1:] for l in read_lines(record)]
        return p.returncode, calls, p.stderr

    rc, calls, err = run("both", NAME, "idle", "begin", "-")
    meta = ["metadata", "--domain", NAME, "--uri", "urn:sysidle:1", "--key",
            "sysidle", "--live", "--set", "<state %s/>" % element]
    check(rc == 0 and calls == [["dominfo", "--domain", NAME], meta],
          "sample hook, idle begin from the VMM, a libvirt domain of that "
          "name: virsh metadata --set with the element as it came, the name "
          "intact", "%s\n%s\n%s" % (rc, calls, err))
    bad = urnschema.validate(meta[-1].replace(
        "<state ", "<state xmlns='urn:sysidle:1' "))
    check(not bad, "the element the sample hook sets validates against "
          "common/urn-sysidle.rng", bad)
    rc, calls, err = run("both", "other vm", "idle", "end", "1234")
    line = ("vm 'other vm': idle end, state FULL_NOTED since "
            "2026-01-02T03:04:05.678Z (idle_ms 1234)")
    check(rc == 0 and calls == [["dominfo", "--domain", "other vm"],
                                ["-t", "sysidle-hook", "--", line]],
          "sample hook, no such libvirt domain: one logger line",
          "%s\n%s\n%s" % (rc, calls, err))
    rc, calls, err = run("logger", NAME, "idle", "end", "5")
    check(rc == 0 and len(calls) == 1 and calls[0][:3] ==
          ["-t", "sysidle-hook", "--"] and NAME in calls[0][3],
          "sample hook, no virsh: one logger line", "%s\n%s\n%s" %
          (rc, calls, err))
    rc, calls, err = run("none", NAME, "idle", "begin", "-")
    check(rc == 0 and not calls and err.startswith("sysidle-hook: vm '%s'"
                                                   % NAME),
          "sample hook, no virsh, no logger: one line on stderr",
          "%s\n%s\n%s" % (rc, calls, err))
    rc, calls, err = run("both", NAME, "started", "begin", "-")
    check(rc == 0 and not calls and not err,
          "sample hook: started/stopped ignored", "%s\n%s\n%s" %
          (rc, calls, err))
    now = int(time.time() * 1000)
    rc, calls, err = run("both", NAME, "idle", "begin", "-",
                         xml=bridge_xml(now + 30000))
    check(rc == 0 and calls == [["-t", "sysidle-hook", "--",
                                 "vm '%s': idle begin, state FULL_NOTED "
                                 "since 2026-01-02T03:04:05.678Z (idle_ms "
                                 "-)" % NAME]],
          "sample hook, the bridge's leased state (libvirt's XML): one log "
          "line, the metadata left to the bridge", "%s\n%s\n%s" %
          (rc, calls, err))
    rc, calls, err = run("both", NAME, "idle", "begin", "-",
                         xml=bridge_xml(now - 5000))
    check(rc == 0 and len(calls) == 1 and "ignored: state FULL_NOTED not "
          "trusted, its lease ran out" in calls[0][-1],
          "sample hook, a lease run out: ignored, saying so",
          "%s\n%s\n%s" % (rc, calls, err))
    rc, calls, err = run("both", NAME, "idle", "end", "7",
                         xml=bridge_xml(now + 30000, pid=0, start=0))
    check(rc == 0 and len(calls) == 1 and "ignored" not in calls[0][-1],
          "sample hook, writer pid 0 (a one-shot writer) in its lease: "
          "trusted, logged", "%s\n%s\n%s" % (rc, calls, err))
    rc, calls, err = run("both", NAME, "idle", "end", "7",
                         xml=bridge_xml(now + 30000, start=int(ticks) + 1))
    check(rc == 0 and len(calls) == 1 and "its writer (pid %d) is gone" %
          os.getpid() in calls[0][-1],
          "sample hook, its writer gone (a pid started at another time): "
          "ignored, saying so", "%s\n%s\n%s" % (rc, calls, err))


def main():
    skip = vmmtest.vm_or_skip("idle.elf")
    if skip:
        return skip
    with tempfile.TemporaryDirectory() as tmp:
        test_sample(tmp)
    return vmmtest.finish()


if __name__ == "__main__":
    sys.exit(main())
