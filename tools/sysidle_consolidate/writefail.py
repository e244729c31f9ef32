# SPDX-License-Identifier: GPL-2.0-only
"""What a file of this tool does when its writes fail (a full disk, an I/O
error, a read-only file system): the failure is logged once with its
cause, not once per attempt; the write is tried again (at the next change,
and every RETRY_S while it fails: the main loop wakes for it only then);
the first write that works again is logged once, with the number of
failed attempts; the failures are counted for the metrics
(sysidle_consolidate_file_write_failures_total{file=...})."""
import time

RETRY_S = 5.0
# file kind -> failed writes since the start, for the metrics
FAILURES = {"journal": 0, "metrics": 0, "history": 0}


def cause(e):
    """An OSError's cause in words: its strerror, else str()."""
    return getattr(e, "strerror", None) or str(e)


class WriteHealth:
    """The writes of one file @path of kind @kind (a key of FAILURES),
    logged through @log (a callable taking a message, or None) as @option
    (default: the kind) and the path."""

    def __init__(self, kind, path, log=None, option=None):
        self.kind = kind
        self.path = path
        self.log = log
        self.name = "%s %s" % (option or kind, path)
        self.failing = 0        # failed attempts since the last that worked
        self.error = None       # the last failure's cause
        self.retry_at = None    # monotonic time of the next try, if failing

    def failed(self, e, level=None):
        """One failed write, @e its OSError: logged only if the first."""
        FAILURES[self.kind] = FAILURES.get(self.kind, 0) + 1
        self.error = cause(e)
        self.retry_at = time.monotonic() + RETRY_S
        self.failing += 1
        if self.failing == 1 and self.log:
            self.say("error %s: cannot write (%s): not current until a "
                     "write works again; retried, not repeated" %
                     (self.name, self.error), level)

    def worked(self, level=None):
        """One write that worked: the recovery logged if it is one."""
        if self.failing and self.log:
            self.say("%s: written again after %d failed attempts" %
                     (self.name, self.failing), level)
        self.failing = 0
        self.error = None
        self.retry_at = None

    def say(self, msg, level):
        if level is None:
            self.log(msg)
        else:
            self.log(msg, level)

    def next_due(self):
        """The monotonic time of the next try, None when not failing."""
        return self.retry_at

