# SPDX-License-Identifier: GPL-2.0-only
"""What the parts of sysidle-consolidate share: the log (one line per
action, "# " comments with --verbose; its format: logsetup.py) and CPU
lists."""
import logging
import time

from .states import STATES

__all__ = ["STATES", "Log", "parse_cpus", "fmt_cpus", "fmt_s", "mono_since"]


class Log:
    """One line per action through the logger of logsetup.py (its level
    from the message: logsetup.level_of), or appended to the list @out
    (tests); v() lines only with @verbose, prefixed "# ", at DEBUG."""

    def __init__(self, verbose=False, out=None):
        self.verbose = verbose
        self.out = out          # a list: the lines are appended to it

    def __call__(self, msg, level=None):
        if isinstance(self.out, list):
            self.out.append(msg)
            return
        from .logsetup import LOGGER, level_of
        logging.getLogger(LOGGER).log(level or level_of(msg), msg)

    def v(self, msg):
        if self.verbose:
            self("# " + msg, logging.DEBUG)


def parse_cpus(text):
    """"0-2,5" -> {0, 1, 2, 5}; ValueError on a malformed list."""
    cpus = set()
    for part in text.split(","):
        part = part.strip()
        if not part:
            raise ValueError("empty CPU list element")
        if "-" in part:
            a, b = part.split("-", 1)
            a, b = int(a), int(b)
            if a < 0 or b < a:
                raise ValueError("bad range %s" % part)
            cpus.update(range(a, b + 1))
        else:
            c = int(part)
            if c < 0:
                raise ValueError("negative CPU %s" % part)
            cpus.add(c)
    return cpus


def fmt_cpus(cpus):
    """{0, 1, 2, 5} -> "0-2,5"; the empty set -> "none"."""
    out = []
    cs = sorted(cpus)
    i = 0
    while i < len(cs):
        j = i
        while j + 1 < len(cs) and cs[j + 1] == cs[j] + 1:
            j += 1
        out.append(str(cs[i]) if i == j else "%d-%d" % (cs[i], cs[j]))
        i = j + 1
    return ",".join(out) or "none"


def fmt_s(seconds):
    """Seconds for a log line: 0.3, 12.5, 61."""
    return ("%.1f" % seconds) if seconds < 60 else "%.0f" % seconds


def mono_since(unix_ms, now=None):
    """The monotonic time at which the wall-clock time @unix_ms was (not
    later than now)."""
    now = time.monotonic() if now is None else now
    if not isinstance(unix_ms, (int, float)) or isinstance(unix_ms, bool):
        return now
    ago = max(0.0, time.time() - unix_ms / 1000.0)
    return now - ago
