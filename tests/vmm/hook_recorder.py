# SPDX-License-Identifier: GPL-2.0-only
"""What the hook tests (test_hooks*.py) share: hooks written into a
--hooks directory (a recorder that appends one JSON line per run, a hook
that hangs, one that fails), the records read back, a VM's arguments with
--hooks, its children, full idle seen in its --sysidle-log, and libvirt's
domain XML on a hook's stdin checked against the schema. Imported after
vmmtest.init(sys.argv)."""
import functools
import json
import os
import re
import sys
import xml.etree.ElementTree as ET

import vmmtest
from vmmtest import check, read_lines, tool
import urnschema  # noqa: E402

GUESTS = vmmtest.GUESTS
NAME = "it's a \"test\" vm"
ENV = ["LC_ALL=C", "HOME=/",
       "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]
SINCE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
STATE_NUMS = {"NOT": 0, "SHORT": 1, "LONG": 2, "FULL": 3, "FULL_NOTED": 4}
UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-"
                  r"[0-9a-f]{12}$")

# Appends one JSON line per run to RECORD: argv, stdin, the environment as
# exec'd, its parent, process group and working directory. SLEEP: seconds
# to sleep after recording an "idle" event (a slow hook).
RECORDER = r'''#!%(python)s
import json, os, sys, time
data = sys.stdin.read()
with open("/proc/self/environ", "rb") as f:
    env = [e for e in f.read().decode().split("\0") if e]
rec = {"argv": sys.argv, "stdin": data, "env": env, "ppid": os.getppid(),
       "pid": os.getpid(), "pgid": os.getpgid(0), "cwd": os.getcwd(),
       "t": time.time()}
with open(%(record)r, "a") as f:
    f.write(json.dumps(rec) + "\n")
if %(sleep)r and sys.argv[2] == "idle":
    time.sleep(%(sleep)r)
'''
# On "idle begin": says so on stderr, keeps its stdin in MARKER.xml,
# records its PID, its child's and the time it started (wall clock, s), and
# hangs (the child is in its process group: a timeout must kill both).
HANG = r'''#!/bin/sh
t=$(date +%%s.%%N)
[ "$2 $3" = "idle begin" ] || exit 0
cat > '%(marker)s.xml'
echo "hanging on purpose" >&2
sleep 1000 &
echo "$$ $! $t" >> '%(marker)s'
wait
'''
FAIL = r'''#!/bin/sh
echo "failing on purpose: $2 $3" >&2
exit 3
'''


def write_hook(path, text, mode=0o755):
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, mode)


def recorder(record, sleep=0):
    return RECORDER % {"python": sys.executable, "record": record,
                       "sleep": sleep}


def records(path):
    out = []
    for line in read_lines(path):
        try:
            out.append(json.loads(line))
        except ValueError:
            pass  # a line being written
    return out


def event(r):
    return " ".join(r["argv"][2:])


# The VMM in the background; here it may take up to 20 s to stop.
Vm = functools.partial(vmmtest.Vm, stop_timeout=20)


def vm_args(hooks, *extra):
    return ["--cpus", "2", "--sysidle", "--append", "hz=250", "--hooks",
            hooks, "--control", "none", "--name", NAME] + list(extra) + \
        [tool("idle.elf")]


def children(pid):
    """The PIDs of @pid's child processes (running hooks)."""
    out = []
    for p in os.listdir("/proc"):
        try:
            with open("/proc/%s/stat" % p) as f:
                if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                    out.append(int(p))
        except (OSError, ValueError, IndexError):
            pass
    return out


def fully_idle(vm, log):
    """The guest is up (serial interrupt routed: a byte wakes it) and the
    VM's latest state in the --sysidle-log is FULL_NOTED."""
    if not any(re.match(r"idle: \d+ cpus up", l) for l in vm.lines):
        return False
    states = re.findall(r"state \S+ -> (\S+)", "\n".join(read_lines(log)))
    return states[-1:] == ["FULL_NOTED"]


def check_xml(r, state, what):
    try:
        dom = ET.fromstring(r["stdin"])
        st = dom.find("metadata/{urn:sysidle:1}state")
        ok = (dom.tag == "domain" and dom.get("type") == "kvm" and
              dom.findtext("name") == NAME and
              UUID.match(dom.findtext("uuid") or "") is not None and
              dom.findtext("vcpu") == "2" and st is not None and
              (st.get("state") == state if state else
               st.get("state") != "FULL_NOTED") and
              SINCE.match(st.get("since", "")) is not None and
              st.get("since_unix_ms", "").isdigit() and
              st.get("num") == str(STATE_NUMS.get(st.get("state"))))
        bad = urnschema.validate(r["stdin"])
    except ET.ParseError as e:
        ok, dom, bad = False, e, str(e)
    check(ok and not bad, "%s: domain XML on stdin (name, uuid, 2 vCPUs, "
          "state %s), its element valid against common/urn-sysidle.rng" %
          (what, state or "not FULL_NOTED"), "%s\n%s" % (bad, r["stdin"]))
    return dom.findtext("uuid") if ok else None
