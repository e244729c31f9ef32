# SPDX-License-Identifier: GPL-2.0-only
"""The daemon's stop, bounded whatever libvirt does.

Python runs a signal handler in the main thread between two bytecodes, so
a main thread waiting in a libvirt call that never returns (a libvirtd
that hangs) never sees SIGTERM. The C-level handler still writes the
signal's number to the wakeup descriptor at once; a thread of its own
reads it there. After the first SIGTERM or SIGINT it wakes the main loop
and gives the clean stop (resume, restore, the journal) --stop-timeout
seconds; past that, or at a second signal, the process exits at once with
FORCED_STATUS, one warning saying what the main thread was in the middle
of. What was held stays in the journal, which the next run puts back."""
import logging
import os
import select
import signal
import threading
import time

from . import logsetup

FORCED_STATUS = 3
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class StopWatch:
    def __init__(self, grace, wake, program="sysidle-consolidate",
                 on_force=None):
        """@grace: seconds the clean stop may take; @wake(): any thread,
        makes the main loop look again; @program: the name the warning
        gives; @on_force(): called just before a forced exit, from this
        thread (no lock the main thread may hold)."""
        self.grace = grace
        self.wake = wake
        self.program = program
        self.on_force = on_force
        self.phase = "the stop"  # the main thread's, for the message
        self.rd, self.wr = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self.done_rd, self.done_wr = os.pipe2(os.O_CLOEXEC)
        self.journal = bool(os.environ.get("JOURNAL_STREAM"))
        self.thread = threading.Thread(target=self._watch, daemon=True,
                                       name="sysidle-stop")

    def start(self):
        """The main thread, with the stop signals' handlers in place."""
        signal.set_wakeup_fd(self.wr, warn_on_full_buffer=False)
        self.thread.start()

    def close(self):
        """The main thread: the clean stop is done; no forced exit now."""
        os.write(self.done_wr, b"x")
        self.thread.join()
        signal.set_wakeup_fd(-1)
        for fd in (self.rd, self.wr, self.done_rd, self.done_wr):
            os.close(fd)

    def _watch(self):
        deadline = None
        while True:
            timeout = None if deadline is None else \
                max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([self.rd, self.done_rd], [], [],
                                        timeout)
            if self.done_rd in ready:
                return
            if not ready:
                self._force("the stop did not end within %g s" %
                            self.grace)
            try:
                got = os.read(self.rd, 64)
            except BlockingIOError:
                continue
            for signo in got:
                if signo not in STOP_SIGNALS:
                    continue
                if deadline is not None:
                    self._force("signal %d again" % signo)
                deadline = time.monotonic() + self.grace
            self.wake()

    def _force(self, why):
        """Exit now: one warning on stdout (the log's), written only if
        stdout takes it at once (no lock the main thread may hold)."""
        msg = ("%s: %s, in the middle of %s: exiting now "
               "(what is held stays in the journal; the next run puts it "
               "back)" % (self.program, why, self.phase))
        if self.on_force is not None:
            try:
                self.on_force()
            except Exception:
                pass
        data = (logsetup.line(logging.WARNING, msg, time.time(),
                              self.journal) + "\n").encode()
        p = select.poll()
        p.register(1, select.POLLOUT)
        try:
            if p.poll(0):
                os.write(1, data)
        except OSError:
            pass
        os._exit(FORCED_STATUS)
