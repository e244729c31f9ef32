#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-only
"""sysidle-consolidate's reader of the urn:sysidle:1 document
(sysidle_consolidate/urndoc.py) and the state table (states.py): the
element as the C side writes it, the minimal one with and without a
namespace, the old hooks' `state` attribute, and what is refused; then
that the package has one reader of the document (urndoc.py) and one
client of the VMM's control socket (control.py).

usage: test_consolidate_urndoc.py TOOLS_DIR
(the package is imported through PYTHONPATH: TOOLS_DIR and tests/, for
tap.py.) TAP on stdout; exit 0 when every check passes."""
import os
import re
import socket
import sys

from tap import check, finish

from sysidle_consolidate import states, urndoc

MIN = '<state name="FULL_NOTED" num="4" since_unix_ms="1767323045678"/>'


def parsed(text):
    """(StateDoc, None) or (None, the BadState)."""
    try:
        return urndoc.parse(text), None
    except urndoc.BadState as e:
        return None, e


def test_table():
    check(states.STATES == ["NOT", "SHORT", "LONG", "FULL", "FULL_NOTED"]
          and [states.NUM[s] for s in states.STATES] == [0, 1, 2, 3, 4] and
          states.FULL_NOTED == "FULL_NOTED",
          "states: NOT, SHORT, LONG, FULL, FULL_NOTED are 0..4",
          repr((states.STATES, states.NUM)))
    from sysidle_consolidate import common
    check(common.STATES is states.STATES, "common.STATES is the same table")


def test_accepted():
    want = ("FULL_NOTED", 4, 1767323045678)
    for what, text in [
            ("no namespace", MIN),
            ("a prefix and its declaration",
             MIN.replace("<state ", '<sysidle:state xmlns:sysidle="%s" ' %
                         urndoc.NS)),
            ("a default namespace",
             MIN.replace("<state ", '<state xmlns="%s" ' % urndoc.NS)),
            ("the hook's extra attributes",
             MIN.replace("/>", " event='begin' idle_ms='-'/>"))]:
        d, e = parsed(text)
        check(d is not None and (d.name, d.num, d.since_unix_ms) == want
              and d.since is None and d.full_idle_periods is None and
              d.vcpus is None,
              "the minimal element, %s: FULL_NOTED, 4, since_unix_ms" % what,
              "%s -> %r %r" % (text, d, e))
    full = ('<sysidle:state xmlns:sysidle="urn:sysidle:1" name="LONG" '
            'num="2" since_unix_ms="1767323045678" '
            'since="2026-01-02T03:04:05.678Z" full_idle_periods="3" '
            'vcpus="2" state="LONG"/>')
    d, e = parsed(full)
    check(d == urndoc.StateDoc("LONG", 2, 1767323045678,
                               "2026-01-02T03:04:05.678Z", 3, 2,
                               None, None, None, None),
          "every attribute of the C side's element", "%r %r" % (d, e))
    d, e = parsed('<state state="SHORT" num="1" since_unix_ms="5"/>')
    check(d is not None and d.name == "SHORT" and d.since_unix_ms == 5,
          "no name: the old hooks' state attribute", "%r %r" % (d, e))
    d, e = parsed('<state name="NOT" state="FULL_NOTED" num="0"/>')
    check(d is not None and d.name == "NOT" and d.since_unix_ms is None,
          "name wins over state; no since_unix_ms: None", "%r %r" % (d, e))
    ok = all(parsed('<state name="%s" num="%d" since_unix_ms="1"/>' %
                    (s, n))[0].name == s for s, n in states.NUM.items())
    check(ok, "every state of the table is read")


def test_refused():
    for what, text in [
            ("an unknown state name", MIN.replace("FULL_NOTED", "SLEEPY")),
            ("a lower-case name", MIN.replace("FULL_NOTED", "full_noted")),
            ("no name nor state", '<state num="4" since_unix_ms="1"/>'),
            ("another element", MIN.replace("<state ", "<idle ")),
            ("not XML", "<state name="),
            ("an empty text", ""),
            ("a since_unix_ms that is no integer",
             MIN.replace('"1767323045678"', '"soon"')),
            ("a negative since_unix_ms",
             MIN.replace('"1767323045678"', '"-1"'))]:
        d, e = parsed(text)
        check(d is None and isinstance(e, ValueError),
              "refused (BadState, a ValueError): %s" % what,
              "%r -> %r" % (text, d))
    # the bound: a good element padded to 64 KiB is read, one character
    # more is refused (naming the limit) before it is parsed
    pad = MIN[:-2] + " " * (65536 - len(MIN)) + "/>"
    d, e = parsed(pad)
    check(d is not None and d.name == "FULL_NOTED",
          "an element of exactly 65536 characters is read", repr(e))
    d, e = parsed(pad[:-2] + " />")
    check(d is None and isinstance(e, ValueError) and
          "65537 characters, more than 65536" in str(e),
          "an element of 65537 characters: refused naming the limit",
          "%r" % (e if e else d,))


def start_ticks(pid):
    with open("/proc/%d/stat" % pid) as f:
        return int(f.read().rsplit(")", 1)[1].split()[19])


def test_lease():
    """stale(): a lease run out, a writer gone on this host (no such
    process, or one started at another time), or trusted."""
    host = re.sub(r"[^A-Za-z0-9._-]", "-", socket.gethostname())
    me, ticks = os.getpid(), start_ticks(os.getpid())
    now = 1767323045678

    def doc(until, pid=me, start=ticks, on=host):
        return urndoc.parse(
            '<state name="FULL_NOTED" num="4" since_unix_ms="1" '
            'writer_host="%s" writer_pid="%d" writer_start_ticks="%d" '
            'valid_until_unix_ms="%d"/>' % (on, pid, start, until))
    d = doc(now + 1000)
    check(d.valid_until_unix_ms == now + 1000 and d.writer_pid == me and
          d.writer_start_ticks == ticks and d.writer_host == host,
          "the lease attributes are read", repr(d))
    check(urndoc.stale(d, now) is None, "a lease running, its writer "
          "alive (this process): trusted", urndoc.stale(d, now))
    why = urndoc.stale(doc(now - 2500), now)
    check(why and "lease ran out 2.5 s ago" in why,
          "a lease run out 2.5 s ago: stale, saying so", why)
    # a pid that is no process: the highest pid the kernel gives, plus 1
    with open("/proc/sys/kernel/pid_max") as f:
        nopid = int(f.read()) + 1
    why = urndoc.stale(doc(now + 1000, pid=nopid), now)
    check(why and "writer (pid %d on this host) is gone" % nopid in why,
          "a writer pid that does not run: stale before its lease ends",
          why)
    why = urndoc.stale(doc(now + 1000, start=ticks + 1), now)
    check(why and "is gone" in why, "the writer's pid, but a process "
          "started at another time (a reused pid): stale", why)
    why = urndoc.stale(doc(now + 1000, pid=nopid, on="another-host"), now)
    check(why is None, "a writer on another host: only its lease counts",
          why)
    why = urndoc.stale(doc(now + 1000, pid=0, start=0), now)
    check(why is None, "writer pid 0 (a one-shot writer): only its lease "
          "counts", why)
    check(urndoc.stale(urndoc.parse(MIN), now) is None,
          "no lease (the minimal element): not stale")


def test_one_reader(tools):
    """Only urndoc.py parses XML; only control.py opens a socket and
    parses its JSON lines."""
    pkg = os.path.join(tools, "sysidle_consolidate")
    xml, sock = [], []
    for name in sorted(os.listdir(pkg)):
        if not name.endswith(".py"):
            continue
        with open(os.path.join(pkg, name)) as f:
            text = f.read()
        if re.search(r"xml\.etree|fromstring\(|minidom|\blxml\b", text):
            xml.append(name)
        if re.search(r"socket\.socket\(|AF_UNIX|json\.loads\(", text):
            sock.append(name)
    check(xml == ["urndoc.py"], "one reader of the document: only urndoc.py "
          "parses XML", repr(xml))
    check(sock == ["control.py"], "one client of the control socket: only "
          "control.py opens one and parses its lines", repr(sock))


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    test_table()
    test_accepted()
    test_refused()
    test_lease()
    test_one_reader(os.path.abspath(sys.argv[1]))
    return finish()


if __name__ == "__main__":
    sys.exit(main())
