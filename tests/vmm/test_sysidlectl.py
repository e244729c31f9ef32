#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""sysidlectl for people, against real VMMs: list by the VMs' own names
(spaces, a socket named otherwise), status by name, a missing --dir,
--json on every read command, watch with no name (every VM, one started
later, one that stops), top as a snapshot (rates) and on a real terminal
(tmux: the rows, a change appearing, q quits).

usage: test_sysidlectl.py VMM GUEST_DIR GUEST_TOOLS_DIR SYSIDLECTL
Exit: 0 all passed, 1 a check failed, 77 skipped (no usable /dev/kvm)."""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile

import vmmtest
from vmmtest import Vm, check, poll_until, tool

vmmtest.init(sys.argv)
CTL = sys.argv[4]


def ctl(d, *args, timeout=30):
    r = subprocess.run([CTL, "--dir", d] + list(args), capture_output=True,
                       text=True, timeout=timeout)
    return r.returncode, r.stdout, r.stderr


def full_noted(sock):
    st = vmmtest.status(sock)
    return st if st and st["state"] == "FULL_NOTED" else None


def start(d, name, sock, sysidle=True):
    args = (["--sysidle"] if sysidle else []) + [
        "--cpus", "2", "--name", name, "--control", os.path.join(d, sock),
        tool("idle.elf")]
    return Vm(args)


def test_list_status(d, vms):
    rc, out, err = ctl(d, "list")
    lines = out.splitlines()
    rows = {l.split("  ")[0]: l for l in lines[1:]}
    check(rc == 0 and lines and lines[0].split() ==
          ["NAME", "STATE", "SINCE", "HALTED", "PID"] and
          set(rows) == {"web 1", "db 2", "plain"} and
          "FULL_NOTED" in rows["web 1"] and
          str(vms["db 2"].p.pid) in rows["db 2"].split() and
          "2/2" in rows["web 1"].split(),
          "list: a header, each VM by its own name ('web 1', 'db 2' whose "
          "socket is w2.sock), state, halted/total, PID",
          "exit %s\n%s%s" % (rc, out, err))
    rc, out, err = ctl(d, "status", "db 2")
    check(rc == 0 and "db 2" in out and "FULL_NOTED" in out,
          "status 'db 2': found by the name it reports (socket w2.sock)",
          "exit %s\n%s%s" % (rc, out, err))
    rc, out, err = ctl(d, "status", "web 1")
    check(rc == 0 and "web 1" in out, "status 'web 1': a name with a space",
          "exit %s\n%s%s" % (rc, out, err))
    rc, out, err = ctl(d, "status", "nosuch")
    check(rc == 1 and "no such VM 'nosuch'" in err and not out,
          "status of an unknown name: exit 1, one line", err)
    for args in (["list"], ["status", "web 1"], ["top"], ["watch"]):
        rc, out, err = ctl("/nonexistent/dir", *args)
        check(rc == 1 and "--dir /nonexistent/dir: No such file" in err,
              "--dir missing, %s: exit 1 and one line saying so" % args[0],
              "exit %s\n%s%s" % (rc, out, err))
    e = tempfile.mkdtemp(prefix="sysidlectl-empty.")
    rc, out, err = ctl(e, "list")
    check(rc == 0 and out.split() == ["NAME", "STATE", "SINCE", "HALTED",
                                      "PID"],
          "list of an empty directory: the header, exit 0", out + err)
    os.rmdir(e)


def test_json(d):
    rc, out, err = ctl(d, "--json", "list")
    objs = [json.loads(l) for l in out.splitlines()]
    check(rc == 0 and sorted(o["name"] for o in objs) ==
          ["db 2", "plain", "web 1"] and
          all({"state", "pid", "vcpus", "in_state_s"} <= set(o) for o in objs),
          "list --json: one object per VM, with name, state, pid, vcpus",
          out + err)
    rc, out, err = ctl(d, "--json", "status", "db 2")
    o = json.loads(out) if rc == 0 else {}
    check(o.get("name") == "db 2" and o.get("state") == "FULL_NOTED",
          "status --json: the status object", out + err)
    rc, out, err = ctl(d, "--json", "top", "-n", "1", "--interval", "0.5")
    objs = {o["name"]: o for o in map(json.loads, out.splitlines())}
    check(rc == 0 and set(objs) == {"web 1", "db 2", "plain"} and
          objs["web 1"]["wakeups_per_s"] < 5 and
          objs["plain"]["wakeups_per_s"] > 50 and
          all("cpu_percent" in o for o in objs.values()),
          "top --json: each VM's wake-ups/s (a fully idle --sysidle VM "
          "%.1f, a plain one with its tick %.1f) and CPU %%" %
          (objs.get("web 1", {}).get("wakeups_per_s", -1),
           objs.get("plain", {}).get("wakeups_per_s", -1)), out + err)


def test_watch_all(d, vms):
    w = Vm(["--dir", d, "watch"], exe=CTL, tag="sysidlectl")
    ok = all(w.wait_line("^%s: watching" % n, 10) for n in vms)
    check(ok, "watch (no name): every VM of the directory", "\n".join(w.lines))
    late = start(d, "late 3", "late3.sock")
    got = w.wait_line("^late 3: watching", 20)
    check(got is not None, "watch: a VM started later is watched",
          "\n".join(w.lines))
    n = len(w.lines)
    rc, _, err = ctl(d, "kick", "web 1")
    got = w.wait_line(r"^web 1: \S+ FULL_NOTED -> NOT", 10, start=n)
    check(rc == 0 and got is not None,
          "watch: the kick of 'web 1' is seen, after its name",
          "\n".join(w.lines) + err)
    late.stop()
    got = w.wait_line("^late 3: stopped", 10)
    check(got is not None, "watch: a VM that stops is reported",
          "\n".join(w.lines))
    rc = w.stop(signal.SIGTERM)
    check(rc == 143, "watch (no name): SIGTERM -> 143", "exit %s" % rc)


def test_top_terminal(d, vms):
    if not shutil.which("tmux"):
        vmmtest.skip("top on a terminal", "tmux is not installed")
        return
    sock = "sysidlectl-test-%d" % os.getpid()
    tmux = ["tmux", "-L", sock, "-f", "/dev/null"]
    cmd = "%s --dir '%s' top --interval 0.3" % (CTL, d)
    subprocess.run(tmux + ["new-session", "-d", "-x", "120", "-y", "30", cmd],
                   check=True, env=dict(os.environ, TERM="xterm"))

    def screen():
        r = subprocess.run(tmux + ["capture-pane", "-p"], capture_output=True,
                           text=True)
        return r.stdout if r.returncode == 0 else ""

    def row(text, name):
        for line in text.splitlines():
            if line.startswith(name + "  "):
                return line
        return ""
    try:
        s = poll_until(lambda: (lambda t: t if all(row(t, n) for n in vms)
                                else None)(screen()), 15)
        check(s is not None and "q quits" in s and
              "WAKEUP/s" in s and "HELD" in s,
              "top on a terminal (tmux): a row for each VM, the header",
              s or screen())
        rc, _, err = ctl(d, "pause", "db 2")
        s = poll_until(lambda: (lambda t: t if "suspended" in row(t, "db 2")
                                else None)(screen()), 10)
        check(rc == 0 and s is not None,
              "top: 'db 2' paused shows as suspended in place", s or screen())
        print("# top, as the terminal showed it:")
        for line in (s or screen()).rstrip().splitlines():
            print("#   " + line)
        ctl(d, "resume", "db 2")
        subprocess.run(tmux + ["send-keys", "q"], check=True)
        gone = poll_until(lambda: subprocess.run(
            tmux + ["has-session"], capture_output=True).returncode != 0, 10)
        check(gone, "top: q quits (the session's only program exited)")
    finally:
        subprocess.run(tmux + ["kill-server"], capture_output=True)


def main():
    skip = vmmtest.vm_or_skip()
    if skip:
        return skip
    d = tempfile.mkdtemp(prefix="sysidlectl.")
    vms = {"web 1": start(d, "web 1", "web 1.sock"),
           "db 2": start(d, "db 2", "w2.sock"),
           "plain": start(d, "plain", "plain.sock", sysidle=False)}
    try:
        ok = poll_until(lambda: full_noted(os.path.join(d, "web 1.sock")) and
                        full_noted(os.path.join(d, "w2.sock")), 30)
        check(ok, "two --sysidle VMs fully idle, one plain VM running")
        test_list_status(d, vms)
        test_json(d)
        test_watch_all(d, vms)
        test_top_terminal(d, vms)
    finally:
        for name, v in vms.items():
            rc = v.stop()
            check(rc == 143, "VM %r: SIGTERM -> 143" % name, v.err)
        shutil.rmtree(d, ignore_errors=True)
    return vmmtest.finish()


if __name__ == "__main__":
    sys.exit(main())
