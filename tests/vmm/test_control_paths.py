#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""The control socket's paths and limits: a stale socket file replaced, a
VM without --sysidle (status, kick refused, watch), too many clients,
clients that connect and say nothing, the default path (/run/sysidle/NAME.sock,
a name with spaces) and --control none (no socket at all). The client
side is Python's socket module (the protocol is in vmm/export/README.md), not
sysidlectl.

usage: test_control_paths.py VMM GUEST_DIR GUEST_TOOLS_DIR SYSIDLECTL
Exit: 0 all passed, 1 a check failed, 77 skipped (no usable /dev/kvm)."""
import os
import socket
import stat
import sys
import tempfile
import time

import vmmtest
from vmmtest import Client, Vm, check, connect, tool

vmmtest.init(sys.argv)
DEFAULT_DIR = "/run/sysidle"


def test_silent(sock):
    """Clients that connect and say nothing cannot lock the socket: 40 of
    them, then a client asking for status is served (the oldest silent
    ones were closed with a reason to make room); a silent client is
    closed after 10 s even when the table is not full."""
    silent = [Client(sock) for _ in range(40)]
    y = Client(sock)
    r = y.request({"cmd": "status"})
    y.close()
    got = []
    for x in silent[:12]:
        line = x.line(1)
        got.append(line if isinstance(line, dict) else None)
    for x in silent:
        x.close()
    evicted = sum(1 for g in got if g and g.get("error") ==
                  "closed: no request, and another client needed the place")
    check(isinstance(r, dict) and r.get("ok") and evicted >= 8 and
          got[0] is not None and
          all(g is None or g.get("error", "").startswith("closed: no request")
              for g in got),
          "40 silent connections with 1 client in the table: a new client's "
          "status is served; the oldest silent ones made room, each told why",
          "%s\n%s" % (r, got))
    t0 = time.monotonic()
    x = Client(sock)
    got = x.line(15)
    took = time.monotonic() - t0
    x.close()
    check(isinstance(got, dict) and got.get("error") ==
          "closed: no request in 10 s" and 9.5 <= took <= 13,
          "a silent client is closed after 10 s, with the reason",
          "%s after %.1f s" % (got, took))


def test_too_many(sock, c):
    """32 clients at most (@c is one): the next gets an error line."""
    more = []
    replies = []
    for _ in range(31):
        more.append(Client(sock))
        replies.append(more[-1].request({"cmd": "status"}))
    x = Client(sock)
    r = x.line()
    closed = x.line(5) is None and x.eof
    x.close()
    more.pop().close()
    end = time.monotonic() + 10
    r2 = None
    while time.monotonic() < end:
        # until the VMM has seen the close, a new client is still the
        # 33rd: refused and closed, maybe before it could even write
        y = Client(sock)
        try:
            r2 = y.request({"cmd": "status"})
        except OSError:
            r2 = None
        y.close()
        if isinstance(r2, dict) and r2.get("ok"):
            break
        time.sleep(0.02)
    for m in more:
        m.close()
    check(all(isinstance(a, dict) and a.get("ok") for a in replies) and
          r == {"ok": False, "error": "too many clients"} and closed and
          isinstance(r2, dict) and r2.get("ok"),
          "32 clients served, the 33rd gets 'too many clients' and is "
          "closed; once one leaves a new one is served", [r, r2])
    for m in more:
        m.close()


def test_stale_and_no_sysidle(tmp):
    sock = os.path.join(tmp, "stale.sock")
    s = socket.socket(socket.AF_UNIX)
    s.bind(sock)
    s.close()  # the file stays, nobody listens: stale
    vm = Vm(["--append", "hz=250", "--control", sock, "--name", "plain vm",
             tool("idle.elf")])
    c = connect(sock, 30, vm.p)
    r = c.request({"cmd": "status"}) if c else None
    v = r.get("vm", {}) if isinstance(r, dict) else {}
    check(c is not None and r.get("ok") and v.get("sysidle") is False and
          v.get("state") == "NOT" and v.get("name") == "plain vm" and
          "warning" not in vm.err,
          "a stale socket file is replaced; without --sysidle status says "
          "sysidle false, state NOT", "%s\n%s" % (r, vm.err))
    r = c.request({"cmd": "kick"}) if c else None
    check(r == {"ok": False, "error": "kick needs --sysidle"},
          "kick without --sysidle: 'kick needs --sysidle'", r)
    r = c.request({"cmd": "watch"}) if c else None
    check(isinstance(r, dict) and r.get("ok") and r.get("state") == "NOT",
          "watch without --sysidle: ok, state NOT", r)
    if c:
        test_too_many(sock, c)
        r = c.request({"cmd": "status"})  # the closes above are seen
        test_silent(sock)
        c.close()
    rc = vm.stop()
    check(rc == 143 and not os.path.exists(sock), "stopped, socket removed",
          "exit %s\n%s" % (rc, vm.err))


def test_default_path():
    name = "ctl test %d with spaces" % os.getpid()
    sock = os.path.join(DEFAULT_DIR, name + ".sock")
    try:
        before = stat.S_IMODE(os.stat(DEFAULT_DIR).st_mode)
    except OSError:
        before = None  # the VMM creates it
    want_dir = 0o700
    if before is not None and before != 0o700:
        print("# %s exists with mode %o, not made by the VMM: its mode is "
              "checked to be left alone" % (DEFAULT_DIR, before))
        want_dir = before
    # What a VMM killed with SIGKILL leaves: a socket file no one listens
    # on; and one someone still listens on, and a file that is no socket.
    os.makedirs(DEFAULT_DIR, mode=0o700, exist_ok=True)
    stale = os.path.join(DEFAULT_DIR, "stale-%d.sock" % os.getpid())
    live = os.path.join(DEFAULT_DIR, "live-%d.sock" % os.getpid())
    plain = os.path.join(DEFAULT_DIR, "plain-%d.sock" % os.getpid())
    for path in (stale, live, plain):
        if os.path.lexists(path):
            os.unlink(path)
    s1 = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s1.bind(stale)
    s1.close()
    s2 = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s2.bind(live)
    s2.listen(1)
    open(plain, "w").close()
    # A socket made within the last 10 s may belong to a VMM between its
    # bind() and listen(): the sweep leaves it; these look older.
    for path in (stale, live, plain):
        os.utime(path, (time.time() - 60, time.time() - 60),
                 follow_symlinks=False)
    vm = Vm(["--cpus", "2", "--sysidle", "--append", "hz=250", "--name",
             name, tool("idle.elf")])
    c = connect(sock, 30, vm.p)
    check(c is not None and not os.path.lexists(stale) and
          os.path.exists(live) and os.path.exists(plain),
          "a VM with the default socket directory removes the sockets "
          "there no one listens on (a killed VMM's), and leaves a live "
          "socket and a plain file", os.listdir(DEFAULT_DIR))
    s2.close()
    for path in (stale, live, plain):
        if os.path.lexists(path):
            os.unlink(path)
    try:
        dmode = stat.S_IMODE(os.stat(DEFAULT_DIR).st_mode)
        smode = stat.S_IMODE(os.stat(sock).st_mode)
    except OSError:
        dmode = smode = None
    check(c is not None and smode == 0o600 and dmode == want_dir,
          "default path %s exists while running: socket 0600 (%s), %s "
          "%o (%s)" % (sock, smode and oct(smode), DEFAULT_DIR, want_dir,
                       dmode and oct(dmode)), vm.err)
    r = c.request({"cmd": "status"}) if c else None
    check(isinstance(r, dict) and r.get("ok") and
          r["vm"]["name"] == name, "default path: status gives the --name "
          "with its spaces", r)
    if c:
        c.close()
    rc = vm.stop()
    check(rc == 143 and not os.path.exists(sock),
          "default path: removed after SIGTERM (exit %s)" % rc, vm.err)


def test_none():
    name = "ctl-none-%d" % os.getpid()
    vm = Vm(["--sysidle", "--append", "hz=250", "--name", name, "--control",
             "none", tool("idle.elf")])
    up = vm.wait_line(r"^idle: \d+ cpus up", 30) is not None
    socks = []
    try:
        for fd in os.listdir("/proc/%d/fd" % vm.p.pid):
            try:
                if os.readlink("/proc/%d/fd/%s" % (vm.p.pid, fd)).startswith(
                        "socket:"):
                    socks.append(fd)
            except OSError:
                pass
    except OSError:
        pass
    exists = os.path.exists(os.path.join(DEFAULT_DIR, name + ".sock"))
    rc = vm.stop()
    check(up and not socks and not exists and rc == 143,
          "--control none: no socket file, no socket fd in the VMM",
          "up %s, socket fds %s, file %s, exit %s\n%s" %
          (up, socks, exists, rc, vm.err))


def main():
    skip = vmmtest.vm_or_skip("idle.elf")
    if skip:
        return skip
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        test_stale_and_no_sysidle(tmp)
    test_default_path()
    test_none()
    print("# %.1f s" % (time.monotonic() - t0))
    return vmmtest.finish()


if __name__ == "__main__":
    sys.exit(main())
