# SPDX-License-Identifier: GPL-2.0-only
"""The log of sysidle-consolidate, through Python's logging: one line per
action on stdout, "2026-12-04T17:30:00.123Z INFO pack NAME: ..." (UTC,
milliseconds): actions INFO, failures ERROR, retries and warnings
WARNING, --verbose lines ("# ...") DEBUG. Run by systemd (JOURNAL_STREAM
set) a line is "<6>pack NAME: ..." instead: the syslog priority the
journal reads, and no time (the journal has its own).

The history: every line but the DEBUG ones is also appended, with its
time, to STATE_DIR/history.log; at HISTORY_MAX bytes that file becomes
history.log.1 (the one older copy kept) and a new one is started. A line
that cannot be appended (a full disk, a read-only file system) is counted;
the first failure is logged once, with its cause, on stdout only (not to
the history it concerns); the next line that can be appended is preceded
in the history by "history: N lines not written (CAUSE)", and that is
logged too (writefail.py)."""
import logging
import os
import sys
import time

from .writefail import WriteHealth

LOGGER = "sysidle_consolidate"
HISTORY = "history.log"
HISTORY_MAX = 1 << 20
PRIORITY = {logging.DEBUG: 7, logging.INFO: 6, logging.WARNING: 4,
            logging.ERROR: 3}


def stamp(created):
    """A record's time: 2026-12-04T17:30:00.123Z."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(created)) + \
        ".%03dZ" % (int(created * 1000) % 1000)


def line(levelno, msg, created, journal):
    """One log line: "TIME LEVEL message", or "<PRIO>message" for the
    journal."""
    if journal:
        return "<%d>%s" % (PRIORITY.get(levelno, 6), msg)
    return "%s %s %s" % (stamp(created), logging.getLevelName(levelno), msg)


class LineFormatter(logging.Formatter):
    def format(self, record):
        return line(record.levelno, record.getMessage(), record.created,
                    False)


class JournalFormatter(logging.Formatter):
    def format(self, record):
        return line(record.levelno, record.getMessage(), record.created,
                    True)


class FlushingHandler(logging.StreamHandler):
    """stdout, looked up at each line (tests replace sys.stdout)."""

    def __init__(self):
        super().__init__(sys.stdout)

    def emit(self, record):
        self.stream = sys.stdout
        super().emit(record)
        self.flush()


class HistoryHandler(logging.Handler):
    """Appends each INFO-or-above line to @directory/history.log, which is
    renamed history.log.1 when it reaches HISTORY_MAX bytes."""

    def __init__(self, directory):
        super().__init__(logging.INFO)
        self.path = os.path.join(directory, HISTORY)
        self.setFormatter(LineFormatter())
        self.health = WriteHealth("history", self.path, self.say)
        self.lost = 0           # lines not written since the last that was

    @staticmethod
    def say(msg):
        """A line about the history itself: to the log, not to it."""
        logging.getLogger(LOGGER).log(level_of(msg), msg,
                                      extra={"no_history": True})

    def append(self, data):
        """@data appended whole, or OSError."""
        try:
            if os.stat(self.path).st_size + len(data) > HISTORY_MAX:
                os.replace(self.path, self.path + ".1")
        except FileNotFoundError:
            pass
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND |
                     os.O_CLOEXEC, 0o600)
        try:
            while data:
                data = data[os.write(fd, data):]
        finally:
            os.close(fd)

    def emit(self, record):
        if getattr(record, "no_history", False):
            return
        line = (self.format(record) + "\n").encode()
        if self.lost:
            line = (line_of_loss(self.lost, self.health.error) +
                    line)
        try:
            self.append(line)
        except OSError as e:
            self.lost += 1
            self.health.failed(e)
            return
        self.lost = 0
        self.health.worked()


def line_of_loss(n, cause):
    """The history's note of @n lines it could not take."""
    return (line(logging.WARNING, "warning history: %d lines not written "
                 "(%s)" % (n, cause), time.time(), False) + "\n").encode()


class PlainFormatter(logging.Formatter):
    def format(self, record):
        return record.getMessage()


def setup(verbose, environ=None, plain=False):
    """The logger, its stdout handler as the environment says (@plain:
    the bare messages, for the migration plan); returns it."""
    environ = os.environ if environ is None else environ
    logger = logging.getLogger(LOGGER)
    logger.handlers = []
    logger.propagate = False
    logger.setLevel(logging.DEBUG if verbose else logging.INFO)
    h = FlushingHandler()
    h.setFormatter(PlainFormatter() if plain else JournalFormatter()
                   if environ.get("JOURNAL_STREAM") else LineFormatter())
    logger.addHandler(h)
    return logger


def add_history(directory):
    """Action lines also go to @directory/history.log from now on."""
    logging.getLogger(LOGGER).addHandler(HistoryHandler(directory))


def print_history(directory, out=None):
    """--history: history.log.1 then history.log of @directory to @out.
    Returns the exit status (1: no such directory)."""
    out = out or sys.stdout
    if not os.path.isdir(directory):
        sys.stderr.write("sysidle-consolidate: --history: no state "
                         "directory %s\n" % directory)
        return 1
    for name in (HISTORY + ".1", HISTORY):
        try:
            with open(os.path.join(directory, name)) as f:
                out.write(f.read())
        except FileNotFoundError:
            pass
    out.flush()
    return 0


def level_of(msg):
    """The level of a message of this tool, from its first word."""
    if msg.startswith("error "):
        return logging.ERROR
    if msg.startswith(("retry ", "warning", "hold ")):
        return logging.WARNING
    return logging.INFO
