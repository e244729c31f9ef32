#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""The installed programs, run from their install prefix and never from
the build tree: `meson install` into PREFIX (a directory of the build),
then every installed program's --version and --help, a guest booted by
the installed sysidle-vmm (its image found by a bare name in
PREFIX/share/sysidle/guests), sysidlectl list/status and
sysidle-consolidate --once against it, the library through its
pkg-config file, systemd-analyze verify on the units, mandoc and groff on
the man pages, bash -n and a completion smoke test.

    test_installed.py BUILDDIR PREFIX SOURCEDIR
"""
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                ".."))
from tap import check, finish, skip  # noqa: E402

PROGRAMS = ["sysidle-vmm", "sysidlectl", "sysidle-libvirt",
            "sysidle-consolidate", "sysidle-fleet"]
POLL = 0.05


def run(cmd, timeout=60, **kw):
    try:
        r = subprocess.run(cmd, capture_output=True, text=True,
                           timeout=timeout, **kw)
        return r.returncode, r.stdout, r.stderr
    except subprocess.TimeoutExpired:
        return None, "", "timed out after %s s" % timeout


def poll_until(fn, timeout):
    end = time.monotonic() + timeout
    while True:
        v = fn()
        if v or time.monotonic() >= end:
            return v
        time.sleep(POLL)


class Installed:
    def __init__(self, build, prefix, source):
        self.build, self.prefix, self.source = build, prefix, source
        self.bin = os.path.join(prefix, "bin")
        # Only the prefix's programs and the system's: no build tree on
        # PATH, no PYTHONPATH (the installed script finds its package).
        self.env = {"PATH": self.bin + ":/usr/bin:/bin", "LC_ALL": "C.UTF-8",
                    "HOME": os.environ.get("HOME", "/root")}
        for k in ("ASAN_OPTIONS", "UBSAN_OPTIONS", "TSAN_OPTIONS"):
            if k in os.environ:
                self.env[k] = os.environ[k]

    def path(self, *parts):
        return os.path.join(self.prefix, *parts)

    def prog(self, name):
        return os.path.join(self.bin, name)

    def files(self):
        out = []
        for root, _, names in os.walk(self.prefix):
            out += [os.path.relpath(os.path.join(root, n), self.prefix)
                    for n in names]
        return sorted(out)


def test_install(t):
    shutil.rmtree(t.prefix, ignore_errors=True)
    rc, out, err = run(["meson", "install", "-C", t.build, "--no-rebuild",
                        "--quiet"], timeout=300)
    check(rc == 0, "meson install into the build's prefix %s" %
          os.path.basename(t.prefix), out + err)
    files = t.files()
    expect = ["bin/" + p for p in PROGRAMS] + [
        "share/sysidle/guests/idle.elf", "share/sysidle/guests/selftest.elf",
        "share/sysidle/prometheus/sysidle.rules.yml",
        "include/sysidle/sysidle.h", "include/sysidle/guest_abi.h",
        "include/sysidle/apic_regs.h",
        "share/man/man1/sysidle-vmm.1", "share/man/man1/sysidlectl.1",
        "share/man/man8/sysidle-libvirt.8",
        "share/man/man8/sysidle-consolidate.8",
        "share/man/man8/sysidle-fleet.8",
        "share/man/man5/sysidle-hooks.5", "share/man/man5/sysidle.conf.5",
        "share/man/man7/sysidle-urn.7", "share/man/man7/sysidle-metrics.7",
        "share/bash-completion/completions/sysidlectl",
        "share/bash-completion/completions/sysidle-vmm",
        "lib/systemd/system/sysidle-libvirt.service",
        "lib/systemd/system/sysidle-consolidate.service",
        "lib/systemd/system/sysidle-fleet.service",
        "lib/systemd/system/sysidle-vmm@.service",
        "lib/tmpfiles.d/sysidle.conf",
        "etc/sysidle/sysidle-libvirt.conf",
        "etc/sysidle/sysidle-consolidate.conf",
        "etc/sysidle/sysidle-fleet.conf",
        "share/bash-completion/completions/sysidle-fleet",
        "share/doc/sysidle-vmm/examples/hooks/vm",
        "share/doc/sysidle-vmm/examples/vm.conf",
    ]
    missing = [f for f in expect if f not in files]
    check(not missing, "the install holds the %d expected files (%d in all)"
          % (len(expect), len(files)), "missing: %s\ninstalled:\n%s" %
          (missing, "\n".join(files)))
    lib = [f for f in files if re.search(r"/libsysidle\.a$", f)]
    pc = [f for f in files if f.endswith("/pkgconfig/sysidle.pc")]
    check(lib and pc, "libsysidle.a and sysidle.pc installed (%s, %s)" %
          (lib, pc))
    py = [f for f in files if f.endswith("sysidle_consolidate/cli.py")]
    check(py, "sysidle-consolidate's package installed (%s)" % py)
    fl = [f for f in files if f.endswith("sysidle_consolidate/fleet/cli.py")]
    check(fl, "its fleet subpackage installed (%s)" % fl)
    # Nothing installed as text names the source or the build tree.
    leaks = []
    for f in files:
        p = t.path(f)
        if os.path.islink(p) or not os.path.isfile(p):
            continue
        with open(p, "rb") as fh:
            data = fh.read()
        if b"\0" in data[:4096]:
            continue  # binaries: their debug info names the sources
        # the prefix itself may be inside the build tree (this check's);
        # a man page writes '-' as '\-'
        data = data.replace(b"\\-", b"-").replace(t.prefix.encode(),
                                                   b"PREFIX")
        for tree in (t.source, t.build):
            if tree.encode() in data:
                leaks.append("%s names %s" % (f, tree))
    check(not leaks, "no installed text file names the source or build tree",
          "\n".join(leaks))
    return files


def test_version_help(t):
    version = None
    for p in PROGRAMS:
        rc, out, err = run([t.prog(p), "--version"], env=t.env,
                           cwd=tempfile.gettempdir())
        m = re.match(r"^%s (\d+\.\d+\.\d+)( \(git [0-9a-z.-]+\))?\n" %
                     re.escape(p), out)
        check(rc == 0 and m and not err,
              "%s --version: %r" % (p, out.splitlines()[0] if out else ""),
              "exit %s\n%s%s" % (rc, out, err))
        if m:
            if version is None:
                version = m.group(1)
            elif m.group(1) != version:
                check(False, "%s --version agrees with the others" % p)
        rc, out, err = run([t.prog(p), "--help"], env=t.env,
                           cwd=tempfile.gettempdir())
        check(rc == 0 and out.lower().startswith("usage: " + p) and
              "--version" in out and not err,
              "%s --help: exit 0, 'Usage: %s', --version documented" % (p, p),
              "exit %s\n%s%s" % (rc, out[:2000], err))


def test_hooks_dir(t):
    """The hooks' default directory is the one the install made."""
    hooks = t.path("etc", "sysidle", "hooks")
    check(os.path.isdir(hooks), "the install made %s" %
          os.path.relpath(hooks, t.prefix))
    for p in ("sysidle-vmm", "sysidle-libvirt", "sysidle-fleet"):
        rc, out, err = run([t.prog(p), "--help"], env=t.env,
                           cwd=tempfile.gettempdir())
        # argparse's help (sysidle-fleet) wraps a path at its hyphens
        flat = re.sub(r"\s+", " ", re.sub(r"(?<=-)\n\s+", "", out))
        check(rc == 0 and "default %s;" % hooks in flat,
              "%s --help: --hooks defaults to PREFIX/etc/sysidle/hooks" % p,
              "exit %s\n%s%s" % (rc, out[:4000], err))


def test_vmm_errors(t):
    """The installed VMM's error lines carry its installed name."""
    rc, out, err = run([t.prog("sysidle-vmm"), "--bogus", "x.elf"],
                       env=t.env, cwd=tempfile.gettempdir())
    check(rc == 110 and err == "sysidle-vmm: unknown option '--bogus' "
          "(see sysidle-vmm --help)\n" and not out,
          "sysidle-vmm --bogus: exit 110, the error line names "
          "sysidle-vmm", "exit %s\n%s%s" % (rc, out, err))


def kvm_usable():
    try:
        fd = os.open("/dev/kvm", os.O_RDWR)
    except OSError:
        return False
    os.close(fd)
    return True


def test_guest(t):
    if not kvm_usable():
        for what in ["a guest booted by the installed sysidle-vmm",
                     "sysidlectl list/status against it",
                     "sysidle-consolidate --once against it"]:
            skip(what, "no usable /dev/kvm")
        return
    d = tempfile.mkdtemp(prefix="sysidle-installed.")
    name = "installed vm"
    sock = os.path.join(d, name + ".sock")
    # A bare image name: found in PREFIX/share/sysidle/guests.
    vm = subprocess.Popen([t.prog("sysidle-vmm"), "--sysidle", "--cpus", "2",
                           "--name", name, "--control", sock, "idle.elf"],
                          env=t.env, cwd=d, stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True)
    try:
        def full():
            if vm.poll() is not None:
                return "exited"
            rc, out, _ = run([t.prog("sysidlectl"), "--dir", d, "--json",
                              "status", name], env=t.env, timeout=10)
            if rc != 0:
                return None
            try:
                st = json.loads(out)
            except ValueError:
                return None
            return st if st.get("state") == "FULL_NOTED" else None
        st = poll_until(full, 30)
        check(isinstance(st, dict),
              "installed sysidle-vmm --sysidle idle.elf (found in the "
              "guests directory) reaches FULL_NOTED, seen by the installed "
              "sysidlectl status %r" % name,
              "VMM: %s" % (vm.poll() if st == "exited" else "running"))
        rc, out, err = run([t.prog("sysidlectl"), "--dir", d, "list"],
                           env=t.env, timeout=10)
        check(rc == 0 and name in out and "FULL_NOTED" in out,
              "installed sysidlectl list names the VM %r" % name,
              "exit %s\n%s%s" % (rc, out, err))
        rc, out, err = run([t.prog("sysidle-consolidate"), "--dir", d,
                            "--state-dir", os.path.join(d, "state"),
                            "--policy", "pack", "--once"],
                           env=t.env, timeout=60)
        check(rc == 0 and name in out,
              "installed sysidle-consolidate --once sees the VM and exits 0",
              "exit %s\n%s%s" % (rc, out, err))
    finally:
        if vm.poll() is None:
            vm.send_signal(signal.SIGTERM)
        try:
            _, err = vm.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            vm.kill()
            _, err = vm.communicate()
        check(vm.returncode == 143, "installed sysidle-vmm: SIGTERM -> 143",
              "exit %s\n%s" % (vm.returncode, err))
        shutil.rmtree(d, ignore_errors=True)


def test_library(t, files):
    pcdir = [os.path.dirname(t.path(f)) for f in files
             if f.endswith("/pkgconfig/sysidle.pc")]
    if not pcdir:
        check(False, "a program built against the installed library",
              "no sysidle.pc")
        return
    env = dict(t.env, PKG_CONFIG_PATH=pcdir[0])
    rc, flags, err = run(["pkg-config", "--cflags", "--libs", "--static",
                          "sysidle"], env=env)
    d = tempfile.mkdtemp(prefix="sysidle-pc.")
    src = os.path.join(d, "use.c")
    with open(src, "w") as f:
        f.write('#include <stdio.h>\n#include <sysidle/sysidle.h>\n'
                'int main(void) {\n'
                '\tstruct sysidle_config cfg;\n'
                '\tsysidle_config_init(&cfg, 2);\n'
                '\tstruct sysidle *s = sysidle_create(&cfg);\n'
                '\tif (!s) return 1;\n'
                '\tputs(sysidle_state_name(sysidle_state(s)));\n'
                '\tsysidle_destroy(s);\n\treturn 0;\n}\n')
    exe = os.path.join(d, "use")
    rc2, out, err2 = run(["cc", "-o", exe, src] + flags.split(), env=env)
    rc3, out3, err3 = run([exe]) if rc2 == 0 else (None, "", "")
    check(rc == 0 and rc2 == 0 and rc3 == 0 and out3.strip() == "NOT",
          "a program built with `pkg-config --cflags --libs sysidle` against "
          "the installed header and library runs (%s)" % out3.strip(),
          "pkg-config: %s %s %s\ncc: %s %s\nrun: %s %s" %
          (rc, flags, err, rc2, err2, rc3, err3))
    shutil.rmtree(d, ignore_errors=True)


def test_units(t):
    unitdir = t.path("lib", "systemd", "system")
    units = sorted(glob.glob(os.path.join(unitdir, "*.service")))
    if not shutil.which("systemd-analyze"):
        skip("systemd-analyze verify on the units", "no systemd-analyze")
        return
    d = tempfile.mkdtemp(prefix="sysidle-units.")
    paths = []
    for u in units:
        base = os.path.basename(u)
        if base.endswith("@.service"):  # a template: verify an instance
            inst = os.path.join(d, base.replace("@.", "@demo."))
            shutil.copy(u, inst)
            paths.append(inst)
        else:
            paths.append(u)
    for p in paths:
        rc, out, err = run(["systemd-analyze", "verify", "--man=no", p],
                           env=dict(os.environ, SYSTEMD_LOG_LEVEL="notice"))
        text = (out + err).strip()
        check(rc == 0 and not text, "systemd-analyze verify %s: clean" %
              os.path.basename(p), "exit %s\n%s" % (rc, text))
        with open(p) as f:
            unit = f.read()
        m = re.search(r"^ExecStart=(\S+)", unit, re.M)
        check(m and m.group(1).startswith(t.bin + "/") and
              os.access(m.group(1), os.X_OK),
              "%s runs the installed %s" % (os.path.basename(p),
                                             m.group(1) if m else "?"))
    shutil.rmtree(d, ignore_errors=True)


def test_man(t, files):
    pages = [f for f in files if re.match(r"share/man/man\d/", f)]
    check(len(pages) >= 8, "%d man pages installed" % len(pages),
          "\n".join(pages))
    for f in pages:
        p = t.path(f)
        rc, out, err = run(["mandoc", "-Tlint", "-W", "warning", p])
        rc2, out2, err2 = run(["groff", "-ww", "-z", "-man", p])
        check(rc == 0 and not (out + err).strip() and rc2 == 0 and
              not (out2 + err2).strip(),
              "%s: mandoc -Tlint -W warning and groff -ww clean" %
              os.path.basename(f),
              (out + err + out2 + err2)[-3000:])


def test_completion(t):
    comp = t.path("share", "bash-completion", "completions", "sysidlectl")
    rc, out, err = run(["bash", "-n", comp])
    check(rc == 0 and not err, "bash -n on the completion script", err)
    script = r'''
source "$1"
show() { printf '%s|' "${COMPREPLY[@]}"; echo; }
COMP_WORDS=(sysidlectl st); COMP_CWORD=1; _sysidlectl sysidlectl; show
COMP_WORDS=(sysidlectl --js); COMP_CWORD=1; _sysidlectl sysidlectl; show
COMP_WORDS=(sysidle-vmm --sysi); COMP_CWORD=1; _sysidle_vmm sysidle-vmm; show
COMP_WORDS=(sysidle-vmm --vcpu-timers h); COMP_CWORD=2; _sysidle_vmm sysidle-vmm; show
COMP_WORDS=(sysidle-consolidate --pol); COMP_CWORD=1; _sysidle_consolidate sysidle-consolidate; show
complete -p sysidle-libvirt
'''
    rc, out, err = run(["bash", "-c", script, "bash", comp], env=t.env)
    lines = out.splitlines()
    want = [lambda l: "status|" in l and "stop" not in l,
            lambda l: l == "--json|",
            lambda l: "--sysidle|" in l,
            lambda l: l == "housekeeping|",
            lambda l: l == "--policy|",
            lambda l: "_sysidle_libvirt" in l]
    ok = rc == 0 and len(lines) == len(want) and \
        all(w(l) for w, l in zip(want, lines))
    check(ok, "completion: sysidlectl commands and options, sysidle-vmm "
          "options and their values, all four programs registered",
          "exit %s\n%s\n%s" % (rc, out, err))


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    build, prefix, source = [os.path.abspath(a) for a in sys.argv[1:]]
    t = Installed(build, prefix, source)
    files = test_install(t)
    test_version_help(t)
    test_hooks_dir(t)
    test_vmm_errors(t)
    test_guest(t)
    test_library(t, files)
    test_units(t)
    test_man(t, files)
    test_completion(t)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
