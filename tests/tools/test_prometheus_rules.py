#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""The shipped Prometheus rules (tools/prometheus/sysidle.rules.yml):
promtool check rules on them, and promtool test rules on the shipped
sysidle.rules.test.yml beside them (the duty cycle's recording rules, exact
values, and each alert example firing or not on fixed series).

usage: test_prometheus_rules.py DIR
Without promtool (Debian package prometheus) each check is a TAP skip."""
import os
import shutil
import subprocess
import sys

from tap import check, finish, skip

RULES = "sysidle.rules.yml"
TESTS = "sysidle.rules.test.yml"


def main():
    d = sys.argv[1]
    promtool = shutil.which("promtool")
    if not promtool:
        why = "promtool not found on PATH (Debian package prometheus)"
        skip("promtool check rules " + RULES, why)
        skip("promtool test rules " + TESTS, why)
        return finish()
    r = subprocess.run([promtool, "check", "rules", RULES], cwd=d,
                       capture_output=True, text=True, timeout=60)
    check(r.returncode == 0 and "SUCCESS: 7 rules found" in r.stdout,
          "promtool check rules %s: the 4 recording rules and 3 alerts" %
          RULES, "exit %d\n%s%s" % (r.returncode, r.stdout, r.stderr))
    # in its directory: the test file names the rule file relatively
    r = subprocess.run([promtool, "test", "rules", TESTS], cwd=d,
                       capture_output=True, text=True, timeout=120)
    check(r.returncode == 0 and "SUCCESS" in r.stdout,
          "promtool test rules %s: the live full-idle seconds and the "
          "1m/1h/24h ratios exact for idle, busy, young, gone VMs and a "
          "long idle period crossing the windows; SysidleVMIdle, "
          "SysidleVMNeverFullyIdle and SysidleMetricsStale fire for "
          "their VM only, after their 'for'" % TESTS,
          "exit %d\n%s%s" % (r.returncode, r.stdout, r.stderr))
    with open(os.path.join(d, TESTS)) as f:
        text = f.read()
    check(all(("alertname: %s" % a) in text for a in
               ("SysidleVMIdle", "SysidleVMNeverFullyIdle",
                "SysidleMetricsStale")) and text.count("exp_alerts: []") >= 4,
          "every alert of %s is tested firing and not firing" % RULES)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
