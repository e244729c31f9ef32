# SPDX-License-Identifier: GPL-2.0-only
"""The host hooks (sysidle-hooks(5)), run as libvirt runs its own and as
the VMM and the bridge run the vm hooks: DIR/host, then every executable
regular file of DIR/host.d/ in name order (dot files skipped), one at a
time, as

  HOOK NAME host-standby begin URI    the host is empty: put it in
                                      standby (suspend, power off, ...)
  HOOK NAME host-standby end URI      wake it (Wake-on-LAN, IPMI, ...)

with a host XML on stdin

  <host><name>NAME</name><uri>URI</uri><uuid>HOST UUID</uuid>
        <hostname>ITS HOST NAME</hostname></host>

stdout to /dev/null, stderr kept (its last STDERR_KEEP bytes, for the
error line), an environment of LC_ALL=C, PATH and HOME=/ only, in /, in a
process group of its own: at --hook-timeout the whole group is killed.
Every hook must exit 0 for the step to count as done; a hook that fails
leaves the host as it was (the daemon tries again later). Hooks must be
idempotent: after a crash the daemon runs the step again. No hook at all
is a success (the host is only reported ready for standby)."""
import os
import select
import signal
import subprocess
import time
from xml.sax.saxutils import escape

STDERR_KEEP = 4096
ENV = {"LC_ALL": "C", "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:"
       "/usr/bin:/sbin:/bin", "HOME": "/"}


def host_xml(name, uri, host_uuid, hostname):
    return ("<host><name>%s</name><uri>%s</uri><uuid>%s</uuid>"
            "<hostname>%s</hostname></host>\n" % (
                escape(name), escape(uri), escape(host_uuid or ""),
                escape(hostname or "")))


def hook_paths(directory):
    """DIR/host and DIR/host.d/* that are executable regular files."""
    out = []
    main = os.path.join(directory, "host")
    if os.path.isfile(main) and os.access(main, os.X_OK):
        out.append(main)
    d = os.path.join(directory, "host.d")
    try:
        names = sorted(n for n in os.listdir(d) if not n.startswith("."))
    except OSError:
        names = []
    for n in names:
        p = os.path.join(d, n)
        if os.path.isfile(p) and os.access(p, os.X_OK):
            out.append(p)
    return out


def _run_one(path, argv, xml, timeout):
    """(exit status or None when killed at @timeout, stderr's tail)."""
    p = subprocess.Popen([path] + argv, stdin=subprocess.PIPE,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         cwd="/", env=ENV, start_new_session=True,
                         close_fds=True)
    end = time.monotonic() + timeout
    try:
        p.stdin.write(xml.encode())
        p.stdin.close()
    except (BrokenPipeError, OSError):
        pass
    tail = b""
    fd = p.stderr.fileno()
    killed = False
    while True:
        left = end - time.monotonic()
        if left <= 0:
            killed = True
            break
        r, _, _ = select.select([fd], [], [], left)
        if not r:
            continue
        data = os.read(fd, 65536)
        if not data:
            break
        tail = (tail + data)[-STDERR_KEEP:]
    if killed:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    try:
        rc = p.wait(timeout=max(0.0, end - time.monotonic()) + 1)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        rc = p.wait()
        killed = True
    p.stderr.close()
    return (None if killed else rc), tail.decode(errors="replace").strip()


def run(directory, name, sub, uri, xml, timeout):
    """Runs the hooks for host @name, "host-standby" @sub ("begin" or
    "end"). Returns (ok, text): text says what ran, or why it failed."""
    if directory is None:
        return True, "no hooks directory"
    paths = hook_paths(directory)
    if not paths:
        return True, "no host hook in %s" % directory
    for path in paths:
        try:
            rc, err = _run_one(path, [name, "host-standby", sub, uri], xml,
                               timeout)
        except OSError as e:
            return False, "%s: %s" % (path, e.strerror)
        if rc is None:
            return False, "%s killed after --hook-timeout %g s%s" % (
                path, timeout, (": " + err) if err else "")
        if rc != 0:
            return False, "%s exited %d%s" % (path, rc,
                                              (": " + err) if err else "")
    return True, "%s ran" % ", ".join(paths)
