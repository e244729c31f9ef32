#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""The VMM's outputs never block it: --stats-json, --sysidle-log and
--metrics-file on FIFOs (with no reader, a reader that reads, a reader that
stalls), paths that cannot be written (refused at start), and --control on
a path that is not a socket.

usage: test_outputs.py VMM GUEST_DIR GUEST_TOOLS_DIR
Exit: 0 all passed, 1 a check failed, 77 skipped (no usable /dev/kvm)."""
import fcntl
import json
import os
import re
import stat
import sys
import tempfile
import time

import vmmtest
from vmmtest import STATUS, Vm, check, poll_until, run, tool

vmmtest.init(sys.argv)
F_SETPIPE_SZ = 1031  # fcntl.F_SETPIPE_SZ, Linux; Python 3.10 names it
START_TIMEOUT = 30   # seconds for a guest to print its first line
STOP_BOUND = 2.0     # seconds a SIGTERM may take to end the VMM


def hello():
    return os.path.join(vmmtest.GUESTS, "hello.elf")


def reader(path):
    """A reader on the FIFO @path that reads nothing until asked: opening
    it non-blocking neither waits for a writer nor makes one wait."""
    return os.open(path, os.O_RDONLY | os.O_NONBLOCK)


def read_all(fd):
    """What the pipe holds now (its writer has ended)."""
    data = b""
    while True:
        try:
            d = os.read(fd, 65536)
        except BlockingIOError:
            return data
        if not d:
            return data
        data += d


def fill(path):
    """Fills the FIFO @path (shrunk to one page) through a writer of the
    test's own, so that the VMM's writes find it full: a stalled reader.
    Returns the writer's fd (keep it open)."""
    w = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
    fcntl.fcntl(w, F_SETPIPE_SZ, 4096)
    try:
        while True:
            os.write(w, b"x" * 512)
    except BlockingIOError:
        pass
    return w


def vmm_errors(err):
    return [l for l in err.splitlines()
            if l.startswith("vmm: ") and not l.startswith("vmm: warning")]


def stop_within(vm, status, what):
    rc = vm.stop(timeout=10)
    ok = rc == status and vm.stop_seconds is not None and \
        vm.stop_seconds < STOP_BOUND
    return ok, "%s: exit %s after %s s (expected %d within %.0f s)\n%s" % (
        what, rc, None if vm.stop_seconds is None else
        round(vm.stop_seconds, 2), status, STOP_BOUND, vm.err)


def test_stats_fifo_no_reader(tmp):
    fifo = os.path.join(tmp, "stats-noreader")
    os.mkfifo(fifo)
    vm = Vm(["--control", "none", "--stats-json", fifo, "--append",
             "stay=1", hello()])
    up = vm.wait_line("^hello", START_TIMEOUT) is not None
    ok, detail = stop_within(vm, STATUS["stats"],
                             "--stats-json FIFO, no reader")
    errs = vmm_errors(vm.err)
    check(up and ok and len(errs) == 1 and fifo in errs[0] and
          "FIFO with no reader" in errs[0],
          "--stats-json on a FIFO with no reader: the VM runs, SIGTERM "
          "ends it at once with 115 and one clear message", detail)


def test_stats_fifo_reader(tmp):
    fifo = os.path.join(tmp, "stats-reader")
    os.mkfifo(fifo)
    r = reader(fifo)
    try:
        vm = Vm(["--control", "none", "--stats-json", fifo, "--append",
                 "stay=1", hello()])
        up = vm.wait_line("^hello", START_TIMEOUT) is not None
        ok, detail = stop_within(vm, 143, "--stats-json FIFO, a reader")
        data = read_all(r)
    finally:
        os.close(r)
    try:
        d = json.loads(data)
        parsed = d.get("exit_status") == 143 and len(d.get("vcpus")) == 1
    except ValueError as e:
        parsed, detail = False, "%s\n%r" % (e, data[:200])
    check(up and ok and parsed, "--stats-json on a FIFO with a reader: "
          "the JSON arrives whole, exit 143 within %.0f s" % STOP_BOUND,
          detail)


def test_stats_fifo_stalled(tmp):
    """16 vCPUs: a document larger than the one page the test leaves
    free; the reader never reads."""
    fifo = os.path.join(tmp, "stats-stalled")
    os.mkfifo(fifo)
    r = reader(fifo)
    fcntl.fcntl(r, F_SETPIPE_SZ, 4096)
    try:
        vm = Vm(["--control", "none", "--cpus", "16", "--stats-json", fifo,
                 "--append", "stay=1", hello()])
        up = vm.wait_line("^hello", START_TIMEOUT) is not None
        ok, detail = stop_within(vm, STATUS["stats"],
                                 "--stats-json FIFO, stalled")
        got = len(read_all(r))
    finally:
        os.close(r)
    errs = vmm_errors(vm.err)
    m = re.search(r"took (\d+) of (\d+) bytes", errs[0]) if errs else None
    check(up and ok and len(errs) == 1 and m and
          int(m.group(1)) == got < int(m.group(2)),
          "--stats-json on a FIFO whose reader stalls: abandoned after "
          "its bound, exit 115, a message saying how much was taken",
          "%s\npipe held %d bytes" % (detail, got))


def test_stats_bad_path(tmp):
    for path, says in [(os.path.join(tmp, "no-such-dir", "s.json"),
                        "does not exist"),
                       (tmp, "is a directory")]:
        rc, out, err = run(["--control", "none", "--stats-json", path,
                            "--append", "stay=1", hello()], timeout=10)
        errs = vmm_errors(err)
        check(rc == STATUS["stats"] and "hello" not in out and
              len(errs) == 1 and path in errs[0] and says in errs[0],
              "--stats-json %s: refused at start (115, the guest never "
              "runs): %s" % ("in a missing directory" if says[0] == "d"
                             else "a directory", says),
              "exit %s\nstdout %r\n%s" % (rc, out[:200], err))


def test_log_fifo_no_reader(tmp):
    fifo = os.path.join(tmp, "log-noreader")
    os.mkfifo(fifo)
    t0 = time.monotonic()
    rc, out, err = run(["--control", "none", "--sysidle", "--sysidle-log",
                        fifo, "--append", "stay=1", hello()], timeout=10)
    took = time.monotonic() - t0
    errs = vmm_errors(err)
    check(rc == STATUS["usage"] and took < STOP_BOUND and
          len(errs) == 1 and fifo in errs[0] and
          "FIFO with no reader" in errs[0],
          "--sysidle-log on a FIFO with no reader: refused at once (110, "
          "a clear message), no hang in open",
          "exit %s after %.2f s\n%s" % (rc, took, err))


def log_vm_args(log, metrics, *extra):
    return ["--cpus", "2", "--sysidle", "--sysidle-log", log,
            "--control", "none", "--metrics-file", metrics] + \
        list(extra) + ["--append", "hz=250", tool("idle.elf")]


def full_idle(metrics):
    return any(re.match(r"sysidle_vm_full_idle\{.*\} 1$", l)
               for l in vmmtest.read_lines(metrics))


def test_log_fifo_reader(tmp):
    fifo = os.path.join(tmp, "log-reader")
    os.mkfifo(fifo)
    r = reader(fifo)
    buf = [b""]

    def stopped():
        try:
            buf[0] += os.read(r, 65536)
        except BlockingIOError:
            pass
        return b"tick stopped" in buf[0]

    try:
        vm = Vm(log_vm_args(fifo, os.path.join(tmp, "reader.prom")))
        seen = poll_until(stopped, START_TIMEOUT)
        ok, detail = stop_within(vm, 143, "--sysidle-log FIFO, a reader")
    finally:
        os.close(r)
    lines = buf[0].decode(errors="replace").splitlines()
    check(seen and ok and all(re.match(r"\d+\.\d{3} ", l) for l in lines),
          "--sysidle-log on a FIFO with a reader: the lines arrive as they "
          "come (\"tick stopped\"), exit 143 within %.0f s" % STOP_BOUND,
          "%s\nlog %r" % (detail, lines[:10]))


def test_log_fifo_stalled(tmp):
    fifo = os.path.join(tmp, "log-stalled")
    metrics = os.path.join(tmp, "stalled.prom")
    stats = os.path.join(tmp, "stalled.json")
    os.mkfifo(fifo)
    r = reader(fifo)
    w = fill(fifo)
    try:
        vm = Vm(log_vm_args(fifo, metrics, "--stats-json", stats))
        idle = poll_until(lambda: full_idle(metrics), START_TIMEOUT)
        ok, detail = stop_within(vm, 143, "--sysidle-log FIFO, stalled")
    finally:
        os.close(w)
        os.close(r)
    try:
        with open(stats) as f:
            dropped = json.load(f)["sysidle"]["log_lines_dropped"]
    except (OSError, ValueError, KeyError) as e:
        dropped, detail = None, "%s\n%s" % (detail, e)
    warn = [l for l in vm.err.splitlines()
            if l.startswith("vmm: warning: --sysidle-log: %s lines dropped"
                            % dropped)]
    check(idle and ok and dropped and len(warn) == 1,
          "--sysidle-log on a FIFO whose reader stalls: the VM idles and "
          "stops at once (143); the lines lost are counted in --stats-json "
          "and on stderr", "%s\nlog_lines_dropped %s" % (detail, dropped))


def test_metrics(tmp):
    path = os.path.join(tmp, "no-such-dir", "m.prom")
    rc, out, err = run(["--control", "none", "--metrics-file", path,
                        "--append", "stay=1", hello()], timeout=10)
    errs = vmm_errors(err)
    check(rc == STATUS["usage"] and "hello" not in out and
          len(errs) == 1 and path in errs[0] and "does not exist" in errs[0],
          "--metrics-file in a missing directory: refused at start (110)",
          "exit %s\n%s" % (rc, err))
    fifo = os.path.join(tmp, "metrics-fifo")
    os.mkfifo(fifo)
    vm = Vm(["--control", "none", "--metrics-file", fifo, "--append",
             "stay=1", hello()])
    up = vm.wait_line("^hello", START_TIMEOUT) is not None
    written = poll_until(lambda: stat.S_ISREG(os.stat(fifo).st_mode) and
                         "sysidle_vm_up" in "".join(
                             vmmtest.read_lines(fifo)), 10)
    ok, detail = stop_within(vm, 143, "--metrics-file over a FIFO")
    check(up and written and ok, "--metrics-file at a FIFO: replaced by "
          "the metrics file (rename), nothing blocks", detail)


def test_control(tmp):
    os.mkfifo(os.path.join(tmp, "ctl-fifo"))
    open(os.path.join(tmp, "ctl-file"), "w").close()
    os.mkdir(os.path.join(tmp, "ctl-dir"))
    for name, kind, is_kind in [("ctl-fifo", "a FIFO", stat.S_ISFIFO),
                                ("ctl-file", "a regular file", stat.S_ISREG),
                                ("ctl-dir", "a directory", stat.S_ISDIR)]:
        path = os.path.join(tmp, name)
        t0 = time.monotonic()
        rc, out, err = run(["--control", path, "--append", "stay=1",
                            hello()], timeout=10)
        took = time.monotonic() - t0
        errs = vmm_errors(err)
        check(rc == STATUS["usage"] and took < STOP_BOUND and
              len(errs) == 1 and path in errs[0] and
              "is %s, not a socket" % kind in errs[0]
              and is_kind(os.lstat(path).st_mode),
              "--control on %s: refused at once (110), says what is "
              "there, leaves it as it is" % kind,
              "exit %s after %.2f s\n%s" % (rc, took, err))
    path = os.path.join(tmp, "no-such-dir", "c.sock")
    rc, out, err = run(["--control", path, "--append", "stay=1", hello()],
                       timeout=10)
    errs = vmm_errors(err)
    check(rc == STATUS["usage"] and len(errs) == 1 and
          "does not exist" in errs[0],
          "--control in a missing directory: refused, says so",
          "exit %s\n%s" % (rc, err))


def test_sweep():
    """The default directory's sweep of stale *.sock files removes sockets
    only: a FIFO and a directory named so, looking old, stay as they are
    (and the sweep neither opens the FIFO nor blocks on it)."""
    d = "/run/sysidle"
    try:
        os.makedirs(d, mode=0o700, exist_ok=True)
        fifo = os.path.join(d, "fifo-%d.sock" % os.getpid())
        sub = os.path.join(d, "dir-%d.sock" % os.getpid())
        os.mkfifo(fifo)
        os.mkdir(sub)
    except OSError as e:
        print("# %s: %s: sweep check skipped" % (d, e))
        return
    try:
        old = time.time() - 60
        for p in (fifo, sub):
            os.utime(p, (old, old))
        name = "outputs-%d" % os.getpid()
        vm = Vm(["--name", name, "--append", "stay=1", hello()])
        up = vm.wait_line("^hello", START_TIMEOUT) is not None and \
            poll_until(lambda: os.path.exists(
                os.path.join(d, name + ".sock")), 10)
        ok, detail = stop_within(vm, 143, "default control path")
        kept = stat.S_ISFIFO(os.lstat(fifo).st_mode) and \
            stat.S_ISDIR(os.lstat(sub).st_mode)
        check(up and ok and kept, "the sweep of %s leaves a FIFO and a "
              "directory named *.sock as they are" % d, detail)
    finally:
        for p, rm in ((fifo, os.unlink), (sub, os.rmdir)):
            try:
                rm(p)
            except OSError:
                pass


def main():
    skip = vmmtest.vm_or_skip()
    if skip:
        return skip
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        test_stats_fifo_no_reader(tmp)
        test_stats_fifo_reader(tmp)
        test_stats_fifo_stalled(tmp)
        test_stats_bad_path(tmp)
        test_log_fifo_no_reader(tmp)
        if os.path.exists(tool("idle.elf")):
            test_log_fifo_reader(tmp)
            test_log_fifo_stalled(tmp)
        else:
            print("# %s not built: --sysidle-log FIFO runs skipped" %
                  tool("idle.elf"))
        test_metrics(tmp)
        test_control(tmp)
    test_sweep()
    print("# %.1f s" % (time.monotonic() - t0))
    return vmmtest.finish()


if __name__ == "__main__":
    sys.exit(main())
