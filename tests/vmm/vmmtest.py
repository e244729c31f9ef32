"""What the VMM test scripts share: TAP checks, bounded VMM runs, a VMM run
in the background (Vm), bounded polling (poll_until), the /dev/kvm skip or,
without KVM, the VMM on a scripted KVM with idle.elf played by a script
(use_scripted), and the selftest boots. Each script calls init(sys.argv) first, with arguments
VMM GUESTS_DIR GUEST_TOOLS_DIR."""
import atexit
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                ".."))
from tap import check, finish, skip  # noqa: E402,F401 (the tests' reporter)
from procfs import tasks  # noqa: E402,F401 (the tests' /proc reader)
import scripted_guests  # noqa: E402 (the guests' scripts)

VMM = GUESTS = TOOLS = None
# A sanitizer build's VMM (meson sets it): a test may then leave out a
# case that runs no VMM code the others do not (CI runs each test in the
# plain build too), saying so, to keep the sanitizer runs short.
SANITIZED = os.environ.get("SYSIDLE_TEST_SANITIZED") == "1"
SELFTEST_TIMEOUT = 180  # seconds, one selftest boot (64 vCPUs is slow here)
POLL_STEP = 0.02  # seconds between two looks in the polling loops
# The VMM's exit statuses (vmm/base/error.h) and those of its signals.
STATUS = {"usage": 110, "image": 111, "kvm": 112, "triple": 113,
          "internal": 114, "stats": 115, "sigint": 130, "sigterm": 143}
# The namespace of the VMs' default uuids (vmm/export/README.md, "Metrics").
UUID_NS = uuid.UUID("515d85be-6f26-497a-a590-01cdee562eb4")
SANITIZER = re.compile(r"ThreadSanitizer|AddressSanitizer|LeakSanitizer|"
                       r"runtime error:")


def init(argv):
    global VMM, GUESTS, TOOLS
    VMM, GUESTS, TOOLS = argv[1], argv[2], argv[3]


# ---------------------------------------------------------------------------
# Without KVM: the VMM on a scripted KVM (tests/vmm/scripted/README.md).
SCRIPTED = None  # the script directory once use_scripted() switched over
SCRIPTED_ENV = "SYSIDLE_VMM_SCRIPTED"  # vmm-scripted, if not in GUESTS


def use_scripted():
    """On a host without a usable /dev/kvm: run vmm-scripted (the VMM's
    objects on a scripted KVM) instead of the VMM, and idle.elf as a script
    that does what idle.elf does as the VMM sees it (scripted_guests.py).
    Returns whether it switched (vmm-scripted is built beside the test
    guests, never installed); says which in a TAP comment."""
    global VMM, SCRIPTED
    if SCRIPTED:
        return True
    exe = os.environ.get(SCRIPTED_ENV) or os.path.join(GUESTS,
                                                       "vmm-scripted")
    if not os.access(exe, os.X_OK):
        print("# no usable /dev/kvm and no %s: skipping the VMM tests" % exe)
        return False
    SCRIPTED = tempfile.mkdtemp(prefix="vmm-scripted-")
    atexit.register(shutil.rmtree, SCRIPTED, True)
    # under the VMM's own name: its messages and thread names start "vmm"
    VMM = os.path.join(SCRIPTED, "vmm")
    os.symlink(os.path.abspath(exe), VMM)
    print("# no usable /dev/kvm: the VMM runs on a scripted KVM "
          "(vmm-scripted), idle.elf is played by a script")
    return True


def vm_or_skip(*guests):
    """Whether a test's VMs can run here: None when they can, on KVM or on
    a scripted KVM (use_scripted), with the guest-tools images @guests
    built; else 77, after a TAP skip-all line saying why; 1 when the VMM
    itself is missing."""
    if not os.path.exists(VMM):
        print("# %s missing" % VMM)
        return 1
    if not kvm_usable(say=False) and not use_scripted():
        print("1..0 # SKIP no usable /dev/kvm and no vmm-scripted")
        return 77
    for g in guests:
        if not os.path.exists(tool(g)):
            print("1..0 # SKIP %s is not built" % tool(g))
            return 77
    return None


def scripted_skip(what):
    """On a scripted KVM (use_scripted), a check of what a guest's own code
    does is skipped, saying so; returns whether it was."""
    if SCRIPTED:
        skip(what, "the guest's own code does not run on a scripted KVM")
        return True
    return False


def vmm_env(args):
    """The VMM's environment for @args: ours, or on a scripted KVM the
    script for their guest (scripted_guests.py)."""
    if not SCRIPTED:
        return None
    env = dict(os.environ)
    env["SYSIDLE_VMM_SCRIPT"] = scripted_guests.script_for(args, SCRIPTED)
    return env


def vm_uuid(name):
    """The uuid a VM named @name has without --uuid: version 5 of the
    name's UTF-8 bytes in UUID_NS."""
    return str(uuid.uuid5(UUID_NS, name))


def sanitizer_check(err, args):
    """Sanitizer builds: any report on the VMM's stderr fails the run."""
    if err and SANITIZER.search(err):
        check(False, "sanitizer report from vmm %s" % " ".join(args), err)


def communicate(p, timeout=30):
    """Waits for @p; returns (status, stdout, stderr), status None on a hang
    (the process is then killed)."""
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        return None, out, err
    return p.returncode, out, err


def popen(args, **kw):
    """subprocess.Popen of the VMM on @args (on a scripted KVM, with the
    script for their guest)."""
    return subprocess.Popen([VMM] + args, env=vmm_env(args), **kw)


def run(args, timeout=30, stdin=subprocess.DEVNULL):
    """Runs the VMM, as communicate(). In sanitizer builds any report on the
    VMM's stderr is a failure of its own."""
    p = subprocess.Popen([VMM] + args, stdin=stdin, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True,
                         env=vmm_env(args))
    rc, out, err = communicate(p, timeout)
    if rc is not None:
        sanitizer_check(err, args)
    return rc, out, err


def expect(args, status, stderr_has, what, stdout_has=None, one_line=True,
           timeout=30):
    """One check: the VMM run with @args exits @status, @stderr_has on its
    stderr (and @stdout_has on its stdout); an error status (110 and up)
    comes with exactly one "vmm: " line that is not a warning."""
    rc, out, err = run(args, timeout=timeout)
    lines = [l for l in err.splitlines() if l.startswith("vmm: ")
             and not l.startswith("vmm: warning")]
    ok = rc == status and stderr_has in err
    if one_line and status >= 110:
        ok = ok and len(lines) == 1
    if stdout_has is not None:
        ok = ok and stdout_has in out
    check(ok, "%s: exit %s, %r" % (what, status, stderr_has),
          "got exit %s\nstdout: %s\nstderr: %s" % (rc, out, err))


def read_lines(path):
    """The lines of the file @path; [] when it cannot be read (yet)."""
    try:
        with open(path) as f:
            return f.read().splitlines()
    except OSError:
        return []


def metric(path, name, **labels):
    """The value of the sample @name in the metrics file @path whose
    labels include @labels (others, vm and uuid among them, are not
    looked at), else None."""
    want = ",".join('%s="%s"' % kv for kv in sorted(labels.items()))
    for line in read_lines(path):
        m = re.match(r"(\w+)\{([^}]*)\} (\S+)$", line)
        if not m or m.group(1) != name:
            continue
        have = ",".join(sorted(p for p in m.group(2).split(",")
                               if p.split("=")[0] in labels))
        if have == want:
            return float(m.group(3))
    return None


def poll_until(fn, timeout, step=POLL_STEP, done=bool):
    """Calls @fn every @step seconds until done(its value) holds, at most
    @timeout seconds (and at least once); returns that value, else None."""
    end = time.monotonic() + timeout
    while True:
        v = fn()
        if done(v):
            return v
        if time.monotonic() >= end:
            return None
        time.sleep(step)


class Client:
    """One control socket connection: JSON lines out, JSON lines in, bounded waits."""

    def __init__(self, path, timeout=10, rcvbuf=None):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        if rcvbuf:
            self.s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.s.settimeout(timeout)
        # A Unix socket's non-blocking connect() fails with EAGAIN while
        # the listen backlog is full: retried, bounded.
        end = time.monotonic() + timeout
        while True:
            try:
                self.s.connect(path)
                break
            except BlockingIOError:
                if time.monotonic() > end:
                    self.s.close()
                    raise
                time.sleep(0.01)
        self.buf = b""
        self.eof = False

    def send(self, obj):
        data = obj if isinstance(obj, bytes) else \
            (json.dumps(obj) + "\n").encode()
        self.s.sendall(data)

    def line(self, timeout=10):
        """The next line, parsed (a str if it is not JSON); None at EOF or
        after @timeout seconds."""
        end = time.monotonic() + timeout
        while b"\n" not in self.buf:
            left = end - time.monotonic()
            if left <= 0 or self.eof:
                return None
            self.s.settimeout(left)
            try:
                d = self.s.recv(65536)
            except socket.timeout:
                return None
            except OSError:
                d = b""
            if not d:
                self.eof = True
                return None
            self.buf += d
        raw, self.buf = self.buf.split(b"\n", 1)
        try:
            return json.loads(raw)
        except ValueError:
            return raw.decode(errors="replace")

    def request(self, obj, timeout=10):
        self.send(obj)
        return self.line(timeout)

    def status(self):
        """The VM object of a status request; None on any error."""
        r = self.request({"cmd": "status"})
        return r["vm"] if isinstance(r, dict) and r.get("ok") else None

    def close(self):
        self.s.close()



def connect(path, timeout=30, proc=None):
    """A Client once the VMM listens on @path, or None (after @timeout
    seconds, or as soon as the process @proc, if given, has ended)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            return Client(path)
        except OSError:
            if proc is not None and proc.poll() is not None:
                return None
            time.sleep(0.02)
    return None


def status(path):
    """The "vm" object of a status request on a new connection to @path,
    or None (no VMM there, no reply in 5 s, or not ok)."""
    try:
        c = Client(path, 5)
    except OSError:
        return None
    try:
        r = c.request({"cmd": "status"}, 5)
    finally:
        c.close()
    return r["vm"] if isinstance(r, dict) and r.get("ok") else None


class Vm:
    """A process run in the background, by default the VMM on @args, with a
    pipe on its stdin (send()). Threads collect its output as it comes: the
    stdout lines in .lines, the stderr lines in .err_lines (.err as text).
    @stop_timeout: the seconds stop() allows for the exit; @tag: a word put
    before @args in a sanitizer report (another program than the VMM)."""

    def __init__(self, args, exe=None, stdin=subprocess.PIPE, stop_timeout=10,
                 tag=None):
        self.args = args
        self.tag = tag
        self.stop_timeout = stop_timeout
        self.stop_seconds = None
        self.p = subprocess.Popen([exe or VMM] + args, stdin=stdin,
                                  stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True,
                                  env=None if exe else vmm_env(args))
        self.lines, self.err_lines = [], []
        self.threads = [threading.Thread(target=self._read, daemon=True,
                                         args=(stream, lines))
                        for stream, lines in [(self.p.stdout, self.lines),
                                              (self.p.stderr, self.err_lines)]]
        for t in self.threads:
            t.start()

    @staticmethod
    def _read(stream, lines):
        for line in stream:
            lines.append(line.rstrip("\n"))

    @property
    def err(self):
        """The stderr read so far: all of it once stop() returned a status."""
        return "\n".join(self.err_lines)

    def wait_line(self, pattern, timeout, start=0, step=POLL_STEP):
        """The first stdout line from index @start on that matches @pattern,
        within @timeout seconds, looked for every @step seconds; None if
        none came (or the process ended and its stdout was read without
        one)."""
        end = time.monotonic() + timeout
        while True:
            ended = self.p.poll() is not None and \
                not self.threads[0].is_alive()
            for line in self.lines[start:]:
                if re.search(pattern, line):
                    return line
            if ended or time.monotonic() >= end:
                return None
            time.sleep(step)

    def send(self, data):
        self.p.stdin.write(data)
        self.p.stdin.flush()

    def stop(self, sig=signal.SIGTERM, timeout=None):
        """Sends @sig (None: none, just waits) unless the process has ended,
        waits for it at most @timeout seconds (default: stop_timeout) and
        returns its exit status, None on a hang (it is then killed). The
        seconds it took are left in .stop_seconds. With a status, its
        output has been read, and a sanitizer report on its stderr is a
        failure of its own."""
        t0 = time.monotonic()
        if sig is not None and self.p.poll() is None:
            self.p.send_signal(sig)
        try:
            self.p.wait(timeout=self.stop_timeout if timeout is None
                        else timeout)
        except subprocess.TimeoutExpired:
            for line in threads_report(self.p.pid).splitlines():
                print("# hang: " + line)
            sys.stdout.flush()
            self.p.kill()
            self.p.wait()
            self.stop_seconds = time.monotonic() - t0
            return None
        self.stop_seconds = time.monotonic() - t0
        for t in self.threads:
            t.join(2)
        sanitizer_check(self.err, ([self.tag] if self.tag else []) +
                        self.args)
        return self.p.returncode


def threads_report(pid):
    """What each thread of @pid is doing, for a process that did not stop:
    name, state and wait channel, its kernel stack (root only), then every
    thread's user stack when gdb is installed (bounded)."""
    out = []
    for tid, name, state in tasks(pid):
        base = "/proc/%d/task/%d/" % (pid, tid)
        try:
            with open(base + "wchan") as f:
                wchan = f.read().strip()
        except OSError:
            wchan = "?"
        out.append("thread %d %s state %s wchan %s" % (tid, name, state,
                                                       wchan or "-"))
        try:
            with open(base + "stack") as f:
                out.extend("    " + l for l in f.read().splitlines())
        except OSError:
            pass
    gdb = shutil.which("gdb")
    if gdb:
        try:
            r = subprocess.run([gdb, "-p", str(pid), "-batch", "-nx", "-ex",
                                "thread apply all bt"],
                               stdin=subprocess.DEVNULL,
                               capture_output=True, text=True, timeout=30)
            out.extend(l for l in r.stdout.splitlines()
                       if l.startswith(("Thread ", "#")))
        except (OSError, subprocess.TimeoutExpired) as e:
            out.append("gdb: %s" % e)
    return "\n".join(out)


def ctx_switches(pid):
    """Voluntary + involuntary context switches of every thread of @pid.
    The VMM names each of its threads (vmm-vcpuN, vmm-housekeep,
    vmm-serial); an unnamed thread other than the main one can only be a
    sanitizer runtime's (TSan's background thread wakes ~10 times a
    second): those are left out."""
    total = 0
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/comm" % (pid, tid)) as f:
                if int(tid) != pid and not f.read().startswith("vmm-"):
                    continue
            with open("/proc/%d/task/%s/status" % (pid, tid)) as f:
                for line in f:
                    if line.startswith(("voluntary_ctxt_switches",
                                        "nonvoluntary_ctxt_switches")):
                        total += int(line.split()[1])
        except OSError:
            pass
    return total


def all_sleeping(pid):
    """Every VMM thread of @pid (as ctx_switches counts them) sleeps."""
    return all(st == "S" for tid, name, st in tasks(pid)
               if tid == pid or name.startswith("vmm-"))


def kvm_usable(say=True):
    """/dev/kvm can be opened (and SYSIDLE_VMM_TESTS_SCRIPTED=1 does not ask
    for the scripted KVM all the same); else, with @say, a comment says
    so."""
    if os.environ.get("SYSIDLE_VMM_TESTS_SCRIPTED") == "1":
        if say:
            print("# SYSIDLE_VMM_TESTS_SCRIPTED=1: as without /dev/kvm")
        return False
    return _kvm_openable(say)


def host_has_kvm():
    """/dev/kvm can be opened here, whatever SYSIDLE_VMM_TESTS_SCRIPTED
    says."""
    return _kvm_openable(False)


def _kvm_openable(say):
    """/dev/kvm can be opened; when not, and @say, a comment says the
    VMM's tests are skipped and why."""
    try:
        os.close(os.open("/dev/kvm", os.O_RDWR))
        return True
    except OSError as e:
        if say:
            print("# /dev/kvm is not usable (%s): skipping the VMM tests" % e)
        return False


def tool(name):
    return os.path.join(TOOLS, name)


def selftest_boots(extra, label):
    """selftest.elf with 1..64 vCPUs in both APIC modes, each must exit 0."""
    st = tool("selftest.elf")
    if not os.path.exists(st):
        print("# %s not built: selftest boots skipped" % st)
        return
    for cpus in [1, 2, 4, 8, 64]:
        for mode in ["xapic", "x2apic"]:
            t0 = time.monotonic()
            rc, out, err = run(extra + ["--cpus", str(cpus), "--append",
                                        "apic=" + mode, st],
                               timeout=SELFTEST_TIMEOUT)
            bad = [l for l in out.splitlines()
                   if l.startswith(("FAIL", "not ok"))]
            check(rc == 0, "%s, %d vCPUs, %s: exit 0 (%.1f s)" %
                  (label, cpus, mode, time.monotonic() - t0),
                  "exit %s\n%s\n%s" % (rc, "\n".join(bad) or out, err))
