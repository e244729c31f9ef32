#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-only
"""The host hook of the test fleet (rig.py installs it as HOOKS/host):
sysidle-fleet runs it as

  host NAME host-standby begin|end URI     (the host's XML on stdin)

"begin" stops every process of host NAME (SIGSTOP): a host in standby
answers nothing and makes no wake-up, as a suspended machine; "end"
continues them (SIGCONT). Each call is one JSON line in RIGDIR/hooks.log:
{"argv": [...], "stdin": "...", "unix_ms": N}. A file RIGDIR/NAME/hook-fail
makes the call exit 1 (doing nothing); RIGDIR/NAME/hook-hang makes it
sleep 3600 s first (the daemon's --hook-timeout kills it).

usage: standby_hook.py RIGDIR NAME host-standby begin|end URI"""
import json
import os
import signal
import sys
import time


def main():
    if len(sys.argv) != 6 or sys.argv[3] != "host-standby" or \
            sys.argv[4] not in ("begin", "end"):
        sys.stderr.write(__doc__)
        return 2
    rigdir, name, _, sub, uri = sys.argv[1:]
    data = sys.stdin.read(65536)
    with open(os.path.join(rigdir, "hooks.log"), "a") as f:
        f.write(json.dumps({"argv": sys.argv[2:], "stdin": data,
                            "unix_ms": int(time.time() * 1000)}) + "\n")
    hostdir = os.path.join(rigdir, name)
    if os.path.exists(os.path.join(hostdir, "hook-hang")):
        time.sleep(3600)
    if os.path.exists(os.path.join(hostdir, "hook-fail")):
        sys.stderr.write("standby_hook: %s: failing as asked\n" % name)
        return 1
    with open(os.path.join(hostdir, "holder.pid")) as f:
        holder = int(f.read())
    ns = os.readlink("/proc/%d/ns/pid" % holder)
    sig = signal.SIGSTOP if sub == "begin" else signal.SIGCONT
    for p in os.listdir("/proc"):
        if not p.isdigit() or int(p) == holder:
            continue
        try:
            if os.readlink("/proc/%s/ns/pid" % p) == ns:
                os.kill(int(p), sig)
        except OSError:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
