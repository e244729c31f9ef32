#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-only
"""tools/completion/sysidle.bash against the option tables of sysidle-vmm
and sysidle-libvirt (their hidden --list-options): every option of the
table is in --help and every long option --help shows is in the table;
the completion offers exactly the table's options, knows which take an
argument, and completes an option's fixed values (--device, the enums)
from the table; a program without --list-options (sysidle-consolidate's
kind) still gets its options from --help.

usage: test_completion.py COMPLETION VMM SYSIDLE-LIBVIRT
TAP on stdout (tap.py through PYTHONPATH)."""
import os
import re
import stat
import subprocess
import sys
import tempfile

from tap import check, finish

COMPLETION, VMM, BRIDGE = sys.argv[1:4]


def run(argv):
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True, timeout=60)
    return p.returncode, p.stdout, p.stderr


def table(prog):
    """{option: (metavar or None, [values])} from PROG --list-options."""
    rc, out, err = run([prog, "--list-options"])
    rows = {}
    for line in out.splitlines():
        f = line.split(" ")
        rows[f[0]] = (None if f[1] == "-" else f[1], f[2:])
    return rc, rows, err


def complete(prog, words):
    """COMPREPLY of the completion for PROG with WORDS after it (the last
    one being completed), as a sorted list."""
    script = r'''
source "$1"; shift
prog=$1; shift
COMP_WORDS=("$prog" "$@"); COMP_CWORD=$#
_sysidle_generic "$prog"
printf '%s\n' "${COMPREPLY[@]}"
'''
    rc, out, err = run(["bash", "-c", script, "bash", COMPLETION, prog] +
                       words)
    if rc:
        return ["exit %d: %s" % (rc, err)]
    return sorted(w for w in out.splitlines() if w)


def takes_arg(prog, option):
    rc, _, _ = run(["bash", "-c", 'source "$1"; _sysidle_takes_arg "$2" "$3"',
                    "bash", COMPLETION, prog, option])
    return rc == 0


def check_program(name, prog):
    rc, rows, err = table(prog)
    check(rc == 0 and rows and not err, "%s --list-options: exit 0, %d "
          "options" % (name, len(rows)), "exit %d\n%s" % (rc, err))
    rc, helptext, _ = run([prog, "--help"])
    shown = set(re.findall(r"^ +(?:-[A-Za-z], )?(--[a-z][a-z0-9-]*)",
                           helptext, re.M))
    check(shown == set(rows), "%s: --help shows every option of the table "
          "and no other" % name, "only in --help: %s\nonly in the table: %s"
          % (sorted(shown - set(rows)), sorted(set(rows) - shown)))
    for opt, (metavar, values) in sorted(rows.items()):
        if metavar and not re.search(r"^ +(?:-[A-Za-z], )?%s %s" %
                                     (re.escape(opt), re.escape(metavar)),
                                     helptext, re.M):
            check(False, "%s: --help shows %s %s" % (name, opt, metavar),
                  helptext)
    offered = complete(prog, ["--"])
    check(offered == sorted(rows), "%s: '--' completes to the table's %d "
          "options" % (name, len(rows)), "offered: %s" % offered)
    wrong = [o for o, (m, _) in rows.items() if takes_arg(prog, o) !=
             (m is not None)]
    check(not wrong, "%s: the completion knows which options take an "
          "argument" % name, "wrong: %s" % wrong)
    with_values = {o: v for o, (m, v) in rows.items() if v}
    for opt, values in sorted(with_values.items()):
        got = complete(prog, [opt, ""])
        check(got == sorted(values), "%s: %s completes to its values %s" %
              (name, opt, " ".join(values)), "got: %s" % got)
        first = values[0][:1]
        got = complete(prog, [opt, first])
        check(got == sorted(v for v in values if v.startswith(first)),
              "%s: %s %s completes to the values starting so" %
              (name, opt, first), "got: %s" % got)
    return with_values


def main():
    vmm_values = check_program("sysidle-vmm", VMM)
    check(vmm_values.get("--device") == ["pc-testdev", "intel-iommu", "edu"]
          and vmm_values.get("--lapic-tick-policy") ==
          ["honour", "catchup", "discard"],
          "sysidle-vmm: --device's values are the opt-in devices, "
          "--lapic-tick-policy's its three policies", str(vmm_values))
    bridge_values = check_program("sysidle-libvirt", BRIDGE)
    check(bridge_values.get("--source") == ["auto", "kvm", "proc", "libvirt"],
          "sysidle-libvirt: --source's values", str(bridge_values))
    # A program with --help only, no table.
    with tempfile.TemporaryDirectory(prefix="test-completion-") as tmp:
        prog = os.path.join(tmp, "helponly")
        with open(prog, "w") as f:
            f.write("#!/bin/sh\n[ \"$1\" = --help ] || exit 2\n"
                    "echo '  --alpha N   a number'\n"
                    "echo '  --beta      a flag'\n")
        os.chmod(prog, stat.S_IRWXU)
        got = complete(prog, ["--"])
        check(got == ["--alpha", "--beta"] and takes_arg(prog, "--alpha")
              and not takes_arg(prog, "--beta"),
              "a program without --list-options: its options and their "
              "arguments from --help", "got: %s" % got)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
