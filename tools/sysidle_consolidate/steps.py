# SPDX-License-Identifier: GPL-2.0-only
"""The crash-test hook: SYSIDLE_CONSOLIDATE_KILL_AT=N (an integer >= 1)
makes the process kill itself with SIGKILL just before its N-th "step".

A step is each journal write's two halves (before the temporary file is
written, and just before it is renamed over the journal) and each call
that changes a VM (a sched_setaffinity, a libvirt pin call, a pause or
resume request, a virDomainSuspend / virDomainResume). Before it dies the
process writes "kill-at N: DESCRIPTION" to stderr. A testing aid: it
shows that whatever step a crash interrupts, the journal lets the next
run put every VM back."""
import os
import signal
import sys

ENV = "SYSIDLE_CONSOLIDATE_KILL_AT"

_kill_at = None
_count = 0


def configure(environ=None, warn=None):
    """Reads ENV from @environ (default os.environ); a value that is not an
    integer >= 1 is ignored, with one line to @warn (a callable)."""
    global _kill_at, _count
    environ = os.environ if environ is None else environ
    _count = 0
    _kill_at = None
    text = environ.get(ENV)
    if text is None:
        return
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        if warn:
            warn("warning: %s=%r is not an integer >= 1: ignored" %
                 (ENV, text))
        return
    _kill_at = n


def step(description):
    """Counts one step; the caller is about to perform @description. Dies
    here (SIGKILL) when this is the configured step."""
    global _count
    _count += 1
    if _kill_at is not None and _count == _kill_at:
        sys.stderr.write("kill-at %d: %s\n" % (_count, description))
        sys.stderr.flush()
        os.kill(os.getpid(), signal.SIGKILL)


def count():
    return _count
