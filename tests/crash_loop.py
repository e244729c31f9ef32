# SPDX-License-Identifier: GPL-2.0-only
"""What the consolidator's SIGKILL-at-every-step tests share
(tests/vmm/test_consolidate_crash.py for this VMM's VMs,
tests/tools/test_consolidate_crash_libvirt.py for a libvirt domain): the
tool run in the background (with SYSIDLE_CONSOLIDATE_KILL_AT), waits that
end when the tool dies, the journal's entries, and the loop over N.

A test gives run_loop() two functions: scenario(tool) drives a run of the
tool with KILL_AT=N and returns "killed", "done" (it ran through to its
SIGTERM, exit 0) or what went wrong; recover() runs a new tool on the same
state directory to the end and returns what is wrong afterwards ("" when
nothing). One TAP line per N, then the matrix."""
import json
import os
import re
import signal
import subprocess
import threading
import time

from tap import check

ENV = "SYSIDLE_CONSOLIDATE_KILL_AT"
WAIT_S = 20


class Tool:
    """@cmd in the background (KILL_AT=@kill_at if given), its stdout and
    stderr lines collected."""

    def __init__(self, cmd, kill_at=None):
        env = dict(os.environ)
        env.pop(ENV, None)
        if kill_at is not None:
            env[ENV] = str(kill_at)
        self.p = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL,
                                  stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True,
                                  start_new_session=True)
        self.lines, self.err = [], []
        self.t = [threading.Thread(target=self._read, args=(s, l),
                                   daemon=True)
                  for s, l in [(self.p.stdout, self.lines),
                               (self.p.stderr, self.err)]]
        for t in self.t:
            t.start()

    @staticmethod
    def _read(stream, lines):
        for line in stream:
            lines.append(line.rstrip("\n"))

    def count(self, pattern):
        return sum(1 for line in list(self.lines) if re.search(pattern, line))

    def killed_at(self):
        """What it was about to do when it killed itself, or None."""
        for line in self.err:
            m = re.match(r"kill-at (\d+): (.*)", line)
            if m:
                return m.group(2)
        return None

    def until(self, fn, timeout=WAIT_S):
        """Polls fn() until true (True), the tool has died (False) or
        @timeout (None)."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if fn():
                return True
            if self.p.poll() is not None:
                return False
            time.sleep(0.02)
        return None

    def stop(self, timeout=20):
        """SIGTERM (if still running); its exit status (None: it had to be
        killed)."""
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
        try:
            rc = self.p.wait(timeout)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
            rc = None
        for t in self.t:
            t.join(2)
        return rc


def journal_entries(state_dir):
    """The entries of the journal in @state_dir ({} without one)."""
    try:
        with open(os.path.join(state_dir, "journal.json")) as f:
            return json.load(f).get("entries")
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as e:
        return "unreadable: %s" % e


def supported(cmd):
    """True when the tool's --help names the journal and the hook."""
    p = subprocess.run(cmd + ["--help"], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    return "--state-dir" in p.stdout and ENV in p.stdout


def run_loop(kind, cmd, scenario, recover, max_steps):
    """N = 1, 2, ...: the tool (@cmd) with KILL_AT=N through scenario(),
    then recover(); until a run goes through without a kill. Returns the
    matrix [(N, what it was about to do, "ok" | "FAIL")]."""
    matrix = []
    for n in range(1, max_steps + 1):
        d = Tool(cmd, kill_at=n)
        how = scenario(d)
        d.stop()
        where = d.killed_at()
        wrong = recover() if how in ("killed", "done") else how
        if how == "killed" and where is None:
            wrong = "it died without reaching step %d (exit %s): %s" % (
                n, d.p.returncode, " | ".join(d.err[-5:]))
        label = where or "no step %d: the scenario ran through" % n
        matrix.append((n, label, "ok" if not wrong else "FAIL"))
        check(not wrong, "%s: killed at step %d (%s), restarted, SIGTERM: "
              "placement and run state as before" % (kind, n, label), wrong)
        if how == "done" or (how != "killed" and wrong):
            break
    else:
        check(False, "%s: the scenario ends within %d steps" %
              (kind, max_steps))
    return matrix


def print_matrix(matrix, t0):
    print("# matrix (step: what it was about to do: result):")
    for n, label, res in matrix:
        print("#   %3d %-70s %s" % (n, label[:70], res))
    print("# %d runs, %.1f s" % (len(matrix), time.monotonic() - t0))
