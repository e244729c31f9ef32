# SPDX-License-Identifier: GPL-2.0-only
"""The urn:sysidle:1 document: the one reader of the idle state that the C
side (the libvirt bridge, sysidle-libvirt; the sample hook tools/hooks/vm)
publishes in a libvirt domain's metadata. Every part of this package that
looks at a domain's idle state (the daemon's libvirt source, the migration
plan's inventory and its --apply check) reads it here.

The shape: one element `state` in namespace urn:sysidle:1 (libvirt stores
it under the key prefix "sysidle"; a reader gets it with or without a
prefix and namespace declaration, the namespace is not checked), e.g.

  <sysidle:state xmlns:sysidle="urn:sysidle:1" name="FULL_NOTED" num="4"
      since_unix_ms="1767323045678" since="2026-01-02T03:04:05.678Z"
      full_idle_periods="3" vcpus="2" state="FULL_NOTED"/>

  name               the state's name, one of states.STATES (NOT, SHORT,
                     LONG, FULL, FULL_NOTED); required
  num                its number, 0..4 (informational: name decides)
  since_unix_ms      when the state began, milliseconds since the epoch
                     (an integer >= 0)
  since              the same time as ISO-8601 UTC with milliseconds
                     (informational, optional)
  full_idle_periods  how many fully idle periods the domain had (optional)
  vcpus              its vCPUs (optional)
  state              the same value as name, kept for old hooks: read
                     only when name is absent

  valid_until_unix_ms  the writer's lease: the state holds until then
  writer_host, writer_pid, writer_start_ticks
                     who wrote it: host name, pid, and that process's
                     start (/proc/PID/stat field 22); pid 0: a one-shot
                     writer (sysidle-libvirt --once), only the lease
                     counts

The minimal element <state name="FULL_NOTED" num="4" since_unix_ms="N"/>
is enough. Other attributes are ignored.

stale(doc) says why a parsed state must not be trusted, or None: its lease
ran out, or its writer ran on this host and that process is gone (no such
pid, or one that started at another time). A state without a lease (a
writer that does not lease, a test) is not stale.

Bound: the text (the element alone, as libvirt's metadata returns it) has
at most MAX_TEXT characters (64 KiB; the C side writes about 250); a
longer one is refused before it is parsed.

Unreadable (parse() raises BadState, a ValueError): longer than MAX_TEXT,
not XML, an element
other than `state`, no name (nor state), a name that is not a state of
the table, a since_unix_ms that is not an integer >= 0. A missing
since_unix_ms is None (the state's start unknown). The optional numeric
attributes are None when absent or not an integer."""
import collections
import re
import socket
import time
import xml.etree.ElementTree as ET

from .states import STATES

NS = "urn:sysidle:1"
PREFIX = "sysidle"
ELEMENT = "state"
MAX_TEXT = 65536    # the longest element text parse() reads

StateDoc = collections.namedtuple(
    "StateDoc", "name num since_unix_ms since full_idle_periods vcpus "
    "valid_until_unix_ms writer_host writer_pid writer_start_ticks")


class BadState(ValueError):
    """The element is not a readable urn:sysidle:1 state."""


def _int(text):
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def parse(text):
    """The StateDoc of the metadata element @text (a str); BadState when
    it is not readable (see the module's doc)."""
    if len(text) > MAX_TEXT:
        raise BadState("%d characters, more than %d" % (len(text), MAX_TEXT))
    try:
        el = ET.fromstring(text)
    except ET.ParseError as e:
        raise BadState(str(e))
    tag = el.tag.rsplit("}", 1)[-1]
    if tag != ELEMENT:
        raise BadState("element <%s>, not <%s>" % (el.tag, ELEMENT))
    name = el.get("name")
    if name is None:
        name = el.get("state")
    if name not in STATES:
        raise BadState("unknown state %r" % name)
    since = el.get("since_unix_ms")
    if since is not None:
        try:
            since = int(since)
        except ValueError:
            raise BadState("since_unix_ms %r is not an integer" % since)
        if since < 0:
            raise BadState("since_unix_ms %d is negative" % since)
    return StateDoc(name, _int(el.get("num")), since, el.get("since"),
                    _int(el.get("full_idle_periods")), _int(el.get("vcpus")),
                    _int(el.get("valid_until_unix_ms")),
                    el.get("writer_host"), _int(el.get("writer_pid")),
                    _int(el.get("writer_start_ticks")))


def _host_name():
    """This host's name as a writer spells it (characters other than
    letters, digits, '.', '_' and '-' made '-')."""
    return re.sub(r"[^A-Za-z0-9._-]", "-", socket.gethostname()) or \
        "localhost"


def _start_ticks(pid):
    """Field 22 of /proc/PID/stat, or None (no such process)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return int(f.read().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def stale(doc, now_ms=None):
    """Why @doc (a StateDoc) must not be trusted, or None."""
    if doc.valid_until_unix_ms is None:
        return None
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    if now_ms > doc.valid_until_unix_ms:
        return ("its lease ran out %.1f s ago (writer pid %s on %s)" %
                ((now_ms - doc.valid_until_unix_ms) / 1000.0,
                 doc.writer_pid, doc.writer_host))
    if doc.writer_host == _host_name() and doc.writer_pid:
        ticks = _start_ticks(doc.writer_pid)
        if ticks is None or (doc.writer_start_ticks is not None and
                             ticks != doc.writer_start_ticks):
            return "its writer (pid %d on this host) is gone" % \
                doc.writer_pid
    return None
