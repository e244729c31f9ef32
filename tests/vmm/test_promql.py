#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""The PromQL examples of vmm/export/README.md ("Metrics"), evaluated by
promtool on fixed series shaped as the VMM's metrics file (promql/examples.yml:
which VMs are idle for more than an hour, the idle fraction per host now
and over an hour, the live full-idle seconds, with their exact values).

usage: test_promql.py
Exit: 0 passed, 1 failed, 77 skipped (no promtool: Debian's prometheus
package)."""
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                ".."))
from tap import check, finish  # noqa: E402

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "promql")


def main():
    promtool = shutil.which("promtool")
    if not promtool:
        print("# SKIP: promtool not found on PATH (Debian package "
              "prometheus): nothing checked")
        return 77
    # run in its directory: the test file names its rule file relatively
    r = subprocess.run([promtool, "test", "rules", "examples.yml"], cwd=HERE,
                       capture_output=True, text=True, timeout=120)
    check(r.returncode == 0 and "SUCCESS" in r.stdout,
          "promtool test rules promql/examples.yml: the README's queries "
          "give the expected series and values",
          "exit %d\n%s%s" % (r.returncode, r.stdout, r.stderr))
    return finish()


if __name__ == "__main__":
    sys.exit(main())
