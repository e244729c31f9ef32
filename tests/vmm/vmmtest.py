"""What the VMM test scripts share: TAP checks, bounded VMM runs, the /dev/kvm
skip, and the selftest boots. Each script calls init(sys.argv) first, with
arguments VMM GUESTS_DIR GUEST_TOOLS_DIR."""
import os
import re
import subprocess
import sys
import time

VMM = GUESTS = TOOLS = None
SELFTEST_TIMEOUT = 180  # seconds, one selftest boot (64 vCPUs is slow here)
SANITIZER = re.compile(r"ThreadSanitizer|AddressSanitizer|LeakSanitizer|"
                       r"runtime error:")
failures = []
count = 0


def init(argv):
    global VMM, GUESTS, TOOLS
    VMM, GUESTS, TOOLS = argv[1], argv[2], argv[3]


def check(ok, what, detail=""):
    """One TAP line; on failure the last lines of @detail as comments."""
    global count
    count += 1
    print(("ok" if ok else "not ok") + " %d - %s" % (count, what))
    if not ok:
        failures.append(what)
        for line in str(detail).splitlines()[-20:]:
            print("#   " + line)
    sys.stdout.flush()


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


def run(args, timeout=30, stdin=subprocess.DEVNULL):
    """Runs the VMM, as communicate(). In sanitizer builds any report on the
    VMM's stderr is a failure of its own."""
    p = subprocess.Popen([VMM] + args, stdin=stdin, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    rc, out, err = communicate(p, timeout)
    if rc is not None:
        sanitizer_check(err, args)
    return rc, out, err


def kvm_usable():
    try:
        os.close(os.open("/dev/kvm", os.O_RDWR))
        return True
    except OSError as e:
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


def finish():
    """Prints the TAP plan; returns the script's exit status."""
    print("1..%d" % count)
    if failures:
        print("# %d of %d failed: %s" % (len(failures), count,
                                        "; ".join(failures)))
        return 1
    return 0
