#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-only
"""The configuration files of sysidle-libvirt and sysidle-consolidate
(sysidle.conf(5), the same rules for both): a file's options applied, the
command line winning, every kind of bad line named by FILE:LINE with exit
2, --config of a missing file; the bridge's default file (overridden for
tests by SYSIDLE_LIBVIRT_CONFIG); --version of both; sysidle-consolidate
--status of a state directory that does not exist. (The VMM's --config:
tests/vmm/test_vmm.py; --status of a running daemon:
tests/vmm/test_consolidate.py.)

usage: test_config_files.py SYSIDLE-LIBVIRT SYSIDLE-CONSOLIDATE
TAP on stdout (tap.py through PYTHONPATH)."""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

from tap import check, finish

BRIDGE, CONS = sys.argv[1:3]
TMP = tempfile.mkdtemp(prefix="test-config-files-")


def run(argv, env=None):
    e = dict(os.environ, SYSIDLE_LIBVIRT_CONFIG="")
    e.update(env or {})
    p = subprocess.run(argv, capture_output=True, text=True, timeout=60,
                       env=e, cwd=TMP)
    return p.returncode, p.stdout, p.stderr


def conf(name, text):
    path = os.path.join(TMP, name)
    with open(path, "w") as f:
        f.write(text)
    return path


def errors(prog, exe, cases):
    """Each (text, line, message) as a file: exit 2, 'PROG: FILE:LINE:
    ...message' and nothing else on stderr."""
    for text, line, msg in cases:
        c = conf("bad.conf", text)
        rc, out, err = run([exe, "--config", c])
        want = "%s: %s:%d: " % (prog, c, line)
        check(rc == 2 and err.startswith(want) and msg in err,
              "%s: %r: exit 2, %r" % (prog, text[:40], want + "..." + msg),
              "exit %s\nstdout: %s\nstderr: %s" % (rc, out[:500], err))


def common_cases(flag, valued):
    return [
        ("# comment\n\nbogus = 1\n", 3, "unknown key 'bogus'"),
        ("%s = maybe\n" % flag, 1, "key '%s' takes no value" % flag),
        ("%s =\n" % valued, 1, "key '%s' needs a value" % valued),
        ("%s\n" % valued, 1, "key '%s' needs a value" % valued),
        ("help\n", 1, "key 'help' is not allowed"),
        ("config = x\n", 1, "key 'config' is not allowed"),
        ("--%s = 1\n" % valued, 1, "without '--'"),
        ("x" * 5000 + "\n", 1, "a line longer than 4096 bytes"),
    ]


def test_bridge():
    rc, out, err = run([BRIDGE, "--version"])
    check(rc == 0 and re.match(r"sysidle-libvirt \d+\.\d+\.\d+( \(git \S+\))?"
                               r"\nLicense", out),
          "sysidle-libvirt --version: %r" % out.split("\n")[0], out + err)
    errors("sysidle-libvirt", BRIDGE, common_cases("once", "interval") + [
        ("interval = 0\n", 1, "--interval '0': expected milliseconds"),
    ])
    c = conf("bridge.conf", "interval = 50\n  idle-interval = 10  \n")
    rc, out, err = run([BRIDGE, "--config", c])
    check(rc == 2 and "--idle-interval 10 is shorter than --interval 50" in err,
          "sysidle-libvirt: both values of the file applied (their "
          "conflict reported)", err)
    rc, out, err = run([BRIDGE, "--config", c, "--interval", "5",
                        "--stats-file", "/nonexistent"])
    check(rc == 1 and "--stats-file '/nonexistent'" in err,
          "sysidle-libvirt: the command line's --interval wins over the "
          "file's (the options pass, the missing stats file stops it)", err)
    rc, out, err = run([BRIDGE, "--config", os.path.join(TMP, "none.conf")])
    check(rc == 2 and "none.conf: No such file" in err,
          "sysidle-libvirt --config of a missing file: exit 2", err)
    bad = conf("default.conf", "intervall = 5\n")
    rc, out, err = run([BRIDGE, "--stats-file", "/nonexistent"],
                       env={"SYSIDLE_LIBVIRT_CONFIG": bad})
    check(rc == 2 and "%s:1: unknown key 'intervall'" % bad in err,
          "sysidle-libvirt reads its default file (here moved by "
          "SYSIDLE_LIBVIRT_CONFIG)", err)
    rc, out, err = run([BRIDGE, "--stats-file", "/nonexistent"],
                       env={"SYSIDLE_LIBVIRT_CONFIG":
                            os.path.join(TMP, "absent.conf")})
    check(rc == 1 and "absent" not in err,
          "sysidle-libvirt: a default file that does not exist is no error",
          err)


def test_consolidate():
    rc, out, err = run([CONS, "--version"])
    check(rc == 0 and re.match(r"sysidle-consolidate \d+\.\d+\.\d+"
                               r"( \(git \S+\))?\nLicense", out),
          "sysidle-consolidate --version: %r" % out.split("\n")[0], out + err)
    errors("sysidle-consolidate", CONS,
           common_cases("once", "interval") + [
               ("pack-after = soon\n", 1, "key 'pack-after': 'soon' is not "
                "a time"),
               ("status\n", 1, "key 'status' is not allowed"),
           ])
    d1, d2 = os.path.join(TMP, "state1"), os.path.join(TMP, "state2")
    os.mkdir(d1)
    os.mkdir(d2)
    c = conf("cons.conf", "# the journal\nstate-dir = %s\n" % d1)
    rc, out, err = run([CONS, "--config", c, "--status"])
    check(rc == 0 and out.startswith("state directory %s: no daemon running, "
                                     "0 VMs held" % d1),
          "sysidle-consolidate: --state-dir from the file applied", out + err)
    rc, out, err = run([CONS, "--config", c, "--status", "--json",
                        "--state-dir", d2])
    st = json.loads(out) if rc == 0 else {}
    check(st.get("state_dir") == d2 and st.get("running") is False and
          st.get("vms") == [],
          "sysidle-consolidate: the command line's --state-dir wins "
          "(--status --json)", out + err)
    rc, out, err = run([CONS, "--status", "--state-dir",
                        os.path.join(TMP, "nothing")])
    check(rc == 1 and "no state directory" in err and not out,
          "sysidle-consolidate --status without a state directory: exit 1, "
          "one line", out + err)
    rc, out, err = run([CONS, "--json"])
    check(rc == 2 and "--json goes with --status" in err,
          "sysidle-consolidate --json alone: a usage error", err)


def main():
    try:
        test_bridge()
        test_consolidate()
    finally:
        shutil.rmtree(TMP, ignore_errors=True)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
