# SPDX-License-Identifier: GPL-2.0-only
"""tools/sysidle-consolidate as the VMM's consolidate tests run it
(test_consolidate.py, consolidate_phases.py): in the background (Tool)
or once (run_tool), its log lines without their "TIME LEVEL " prefix
(a line without one kept in unprefixed), its --state-dir, the options of
a daemon without hysteresis; the VMs' vCPU and housekeeping threads and
their affinities from /proc. The tool is the fifth argument; imported
after vmmtest.init(sys.argv)."""
import os
import re
import subprocess
import sys
import tempfile

from vmmtest import Vm
from procfs import allowed_cpus  # noqa: E402

CONSOLIDATE = sys.argv[5]
RESTORE_LIMIT_S = 0.1


LOG_PREFIX = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z "
                        r"(DEBUG|INFO|WARNING|ERROR) ")
unprefixed = []     # the tool's stdout lines without the log prefix


def strip_prefix(line):
    """A line of the tool's log without its "TIME LEVEL " prefix (noted in
    unprefixed when it has none)."""
    m = LOG_PREFIX.match(line)
    if not m:
        unprefixed.append(line)
        return line
    return line[m.end():]


class Tool(Vm):
    """sysidle-consolidate in the background: its stdout lines in .lines
    without their log prefix."""

    def __init__(self, args, **kw):
        super().__init__(args, exe=CONSOLIDATE, **kw)

    @staticmethod
    def _read(stream, lines):
        for line in stream:
            lines.append(strip_prefix(line.rstrip("\n")))


def run_tool(argv, **kw):
    """subprocess.run of the tool; its stdout without the log prefixes."""
    p = subprocess.run(argv, **kw)
    p.stdout = "".join(strip_prefix(l) + "\n"
                       for l in p.stdout.splitlines())
    return p


def state_dir(tmp, name=None):
    """A --state-dir for one run (@name: shared by the runs that name
    it), inside the test's temporary directory."""
    if name is not None:
        return os.path.join(tmp, "state-" + name)
    return tempfile.mkdtemp(prefix="state-", dir=tmp)


def fast(tmp):
    """A daemon that packs and restores at once (no hysteresis), on the
    test's shared state directory."""
    return ["--pack-after", "0", "--restore-after", "0", "--state-dir",
            state_dir(tmp, "daemon")]


def threads(vm):
    """[(pid, tid)] of the vCPU and housekeeping threads in a status."""
    tids = [v["tid"] for v in vm["vcpus"]] + [vm["housekeeping_tid"]]
    return [(vm["pid"], t) for t in tids]


def affinities(vm):
    return {t: allowed_cpus(p, t) for p, t in threads(vm)}


def fmt(aff):
    return " ".join("%d:%s" % (t, ",".join(map(str, sorted(c))) if c else c)
                    for t, c in sorted(aff.items()))
