#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""The control socket on one VM with --control PATH: permissions, status,
watch, kick, slow and vanished clients (control_watch.py), bad requests,
a path in use. The client side is Python's socket module (the protocol is
in vmm/export/README.md), not sysidlectl. The socket's other paths and limits
(a stale file, no --sysidle, too many and silent clients, the default path,
--control none) are test_control_paths.py.

usage: test_control.py VMM GUEST_DIR GUEST_TOOLS_DIR SYSIDLECTL
Exit: 0 all passed, 1 a check failed, 77 skipped (no usable /dev/kvm)."""
import json
import os
import re
import signal
import socket
import stat
import sys
import tempfile
import time

import vmmtest
from vmmtest import STATUS, Client, Vm, check, connect, tool

vmmtest.init(sys.argv)
from control_watch import (  # noqa: E402
    STATES, test_slow_watcher, test_vanished, test_watch, wait_state)
VM_KEYS = {"name", "uuid", "pid", "sysidle", "state", "state_num",
           "since_unix_ms", "in_state_s", "uptime_s", "timekeeper",
           "housekeeping_tid", "vcpus", "counters"}
VCPU_KEYS = {"id", "tid", "idle", "halt_exits", "ticks_suppressed"}
COUNTER_KEYS = {"full_idle_periods", "full_idle_seconds", "ticks_suppressed",
                "host_timer_wakeups", "housekeeping_wakeups", "halt_exits",
                "force_exits", "violations", "scans", "tick_restarts",
                "events_dropped", "watch_dropped", "hooks_run",
                "hooks_failed", "hooks_dropped", "state_seconds"}


def as_other_uid(path):
    """Connects to @path from a forked child running as uid/gid 65534:
    "EACCES" when connect() is refused, else "DATA " and all it received
    until the VMM closed (the refusal comes before any request)."""
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:
        res = "?"
        try:
            os.close(rfd)
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
            s = socket.socket(socket.AF_UNIX)
            s.settimeout(10)
            try:
                s.connect(path)
            except PermissionError:
                res = "EACCES"
            else:
                data = b""
                while True:
                    d = s.recv(4096)
                    if not d:
                        break
                    data += d
                res = "DATA " + data.decode(errors="replace")
        except BaseException as e:  # anything: reported, never raised
            res = "child: %r" % e
        finally:
            os.write(wfd, res.encode())
            os._exit(0)
    os.close(wfd)
    out = b""
    while True:
        d = os.read(rfd, 65536)
        if not d:
            break
        out += d
    os.close(rfd)
    os.waitpid(pid, 0)
    return out.decode(errors="replace")


def test_permissions(sock, c):
    st = os.stat(sock)
    check(stat.S_ISSOCK(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600,
          "explicit --control: the socket is mode 0600 (%o)" %
          stat.S_IMODE(st.st_mode))
    out = as_other_uid(sock)
    check(out == "EACCES", "uid 65534, directory 0755: connect() refused by "
          "the socket's 0600 mode", out)
    os.chmod(sock, 0o666)
    out = as_other_uid(sock)
    os.chmod(sock, 0o600)
    want = 'DATA {"ok":false,"error":"permission denied"}\n'
    check(out == want,
          "uid 65534, socket chmod 0666: SO_PEERCRED check answers "
          "'permission denied' and closes", out)
    r = c.request({"cmd": "status"})
    check(isinstance(r, dict) and r.get("ok"), "after the refused peers the "
          "VMM still answers its owner", r)


def test_status(vm, c, sock):
    v = wait_state(c, "FULL_NOTED")
    check(v is not None and v["state"] == "FULL_NOTED",
          "status: FULL_NOTED once the guest idles (polled, 30 s deadline)",
          json.dumps(v))
    if v is None:
        return False
    # FULL_NOTED is set before the housekeeping thread reads the
    # timekeeper's state: vCPU 0 may still be in a tick-only window (it is
    # then taken as idle). Ask until every vCPU is halted, bounded.

    def all_halted():
        r = c.request({"cmd": "status", "id": {"n": [1, "x"]}})
        try:
            return r if all(x["idle"] for x in r["vm"]["vcpus"]) else None
        except (KeyError, TypeError):
            return None
    r = vmmtest.poll_until(all_halted, 5) or \
        c.request({"cmd": "status", "id": {"n": [1, "x"]}})
    ok = isinstance(r, dict) and r.get("ok") is True and \
        r.get("cmd") == "status" and r.get("id") == {"n": [1, "x"]}
    check(ok, "status: ok, cmd and the request's id copied", r)
    v = r["vm"] if ok else {}
    missing = VM_KEYS - set(v)
    vkeys = [VCPU_KEYS - set(x) for x in v.get("vcpus", [])]
    ckeys = COUNTER_KEYS - set(v.get("counters", {}))
    ss = v.get("counters", {}).get("state_seconds", {})
    check(not missing and len(v["vcpus"]) == 2 and not any(vkeys) and
          not ckeys and set(ss) == set(STATES),
          "status: every documented key (vm, 2 vcpus, counters, "
          "state_seconds)", "missing %s %s %s\n%s" %
          (missing, vkeys, ckeys, json.dumps(v)))
    if missing or ckeys or any(vkeys):
        return True
    pid = vm.p.pid
    tasks = set(os.listdir("/proc/%d/task" % pid))
    tids = [x["tid"] for x in v["vcpus"]]
    check(v["pid"] == pid and all(str(t) in tasks for t in tids) and
          str(v["housekeeping_tid"]) in tasks and
          [x["id"] for x in v["vcpus"]] == [0, 1],
          "status: pid %d, vCPU TIDs %s and housekeeping TID %d are threads "
          "of the VMM" % (v["pid"], tids, v["housekeeping_tid"]),
          "tasks %s" % sorted(tasks))
    cnt = v["counters"]
    check(v["sysidle"] is True and v["state_num"] == 4 and
          v["timekeeper"] == 0 and
          re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-"
                       r"[89ab][0-9a-f]{3}-[0-9a-f]{12}", v["uuid"]) and
          v["uuid"] == vmmtest.vm_uuid(v["name"]) and
          abs(v["since_unix_ms"] / 1000.0 - time.time()) < 600 and
          0 <= v["in_state_s"] <= v["uptime_s"] and
          cnt["full_idle_periods"] >= 1 and cnt["violations"] == 0 and
          ss_sum_ok(cnt["state_seconds"], v["uptime_s"]) and
          all(x["idle"] for x in v["vcpus"]),
          "status: values consistent (sysidle, state_num 4, uuid, times, "
          "counters, every vCPU idle)", json.dumps(v))
    return True


def ss_sum_ok(ss, uptime):
    total = sum(ss[s] for s in STATES)
    return total <= uptime + 0.01 and ss["FULL_NOTED"] > 0


def test_bad_requests(sock):
    c = Client(sock)
    r1 = c.request(b"{bad json\n")
    r2 = c.request(b"[1, 2]\n")
    r3 = c.request({"cmd": "nope", "id": 7})
    r4 = c.request({"id": 8})
    r5 = c.request(b'{"cmd":"status"} trailing\n')
    ok = isinstance(r1, dict) and r1.get("ok") is False and \
        r1.get("error", "").startswith("malformed request: ") and \
        isinstance(r2, dict) and r2.get("ok") is False and \
        r2.get("error", "").startswith("malformed request: ") and \
        r3 == {"ok": False, "error": "unknown command 'nope'", "id": 7} and \
        isinstance(r4, dict) and r4.get("ok") is False and \
        r4.get("error", "").startswith("malformed request: ") and \
        r4.get("id") == 8 and isinstance(r5, dict) and \
        r5.get("error", "").startswith("malformed request: ")
    check(ok, "malformed JSON, a non-object, a missing cmd, trailing data: "
          "'malformed request: ...'; unknown cmd: 'unknown command', id "
          "copied", [r1, r2, r3, r4, r5])
    c.send(b'{"cmd":"status","id":1}\n{"cmd":"kick","id":2}\n')
    a, b = c.line(), c.line()
    check(isinstance(a, dict) and a.get("id") == 1 and a.get("ok") and
          isinstance(b, dict) and b.get("id") == 2 and b.get("ok"),
          "two requests in one write on the same connection: two replies "
          "in order", [a, b])
    c.close()
    c = Client(sock)
    c.send(b"{" + b" " * 5000)
    r = c.line()
    end = c.line(5)
    check(isinstance(r, dict) and r.get("ok") is False and
          "4096" in r.get("error", "") and end is None and c.eof,
          "a request longer than 4096 bytes: error reply, then closed", r)
    c.close()
    c = Client(sock)
    c.send(b'{"cmd":"status"}')
    c.s.shutdown(socket.SHUT_WR)
    r = c.line()
    check(isinstance(r, dict) and r.get("ok") and c.line(5) is None,
          "a last request without newline, then end of input: answered, "
          "then closed", r)
    c.close()


def test_in_use(tmp, sock, c):
    rc, out, err = vmmtest.run(["--control", sock, "--append", "hz=250",
                                tool("idle.elf")], timeout=30)
    check(rc == STATUS["usage"] and
          "control socket %s is in use" % sock in err and
          len(err.strip().splitlines()) == 1,
          "a second VMM on the same --control path: exit 110, 'is in use'",
          "exit %s\n%s" % (rc, err))
    r = c.request({"cmd": "status"})
    check(os.path.exists(sock) and isinstance(r, dict) and r.get("ok"),
          "the first VMM's socket is left alone and still answers", r)
    f = os.path.join(tmp, "plain-file")
    with open(f, "w") as fh:
        fh.write("x")
    rc, out, err = vmmtest.run(["--control", f, tool("idle.elf")],
                               timeout=30)
    check(rc == STATUS["usage"] and "control socket %s" % f in err and
          "not a socket" in err and os.path.exists(f),
          "--control on a regular file: exit 110, the file is left alone",
          "exit %s\n%s" % (rc, err))
    d = os.path.join(tmp, "missing-dir", "s.sock")
    rc, out, err = vmmtest.run(["--control", d, tool("idle.elf")],
                               timeout=30)
    check(rc == STATUS["usage"] and "control socket %s" % d in err,
          "--control in a missing directory: exit 110, one clear line",
          "exit %s\n%s" % (rc, err))


def test_main(tmp):
    d = os.path.join(tmp, "ctl")
    os.mkdir(d)
    os.chmod(d, 0o755)
    os.chmod(tmp, 0o755)
    sock = os.path.join(d, "vm.sock")
    vm = Vm(["--cpus", "2", "--sysidle", "--append", "hz=250", "--control",
             sock, tool("idle.elf")])
    c = connect(sock, 30, vm.p)
    check(c is not None, "--control PATH: the VMM listens on it",
          vm.err)
    if c is None:
        vm.stop(signal.SIGKILL)
        return
    test_permissions(sock, c)
    if test_status(vm, c, sock):
        w = test_watch(vm, sock, c)
        test_vanished(vm, sock, c, w)
        test_slow_watcher(vm, sock, c, w)
        w.close()
    test_bad_requests(sock)
    test_in_use(tmp, sock, c)
    c.close()
    rc = vm.stop()
    check(rc == 143 and not os.path.exists(sock),
          "SIGTERM: exit 143, the socket file removed", "exit %s\n%s" %
          (rc, vm.err))


def main():
    skip = vmmtest.vm_or_skip("idle.elf")
    if skip:
        return skip
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        test_main(tmp)
    print("# %.1f s" % (time.monotonic() - t0))
    return vmmtest.finish()


if __name__ == "__main__":
    sys.exit(main())
