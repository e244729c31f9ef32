# SPDX-License-Identifier: GPL-2.0-only
"""What the fleet knows of its hosts: a host's states, and a Snapshot of
one host at one moment (read by hosts.py from its libvirtd, never by
asking QEMU to run anything on a vCPU: names, UUIDs, sizes, run states and
the urn:sysidle:1 metadata the host's bridge publishes).

A host's state (Host.state), as the daemon keeps it:

  connecting  configured, not answered yet since the start (or a wake)
  up          its libvirtd answers; its snapshot is current
  lost        it answered, then stopped (keepalive, a closed connection,
              libvirtd restarting): its domains are unknown; nothing
              migrates to or from it until it answers again
  refused     it answered with the host UUID of another configured host
              (one machine given twice): never used, one error
  standby     emptied and handed to the host hook (host-standby begin)
  waking      the hook was told to wake it (host-standby end); waiting
              for its libvirtd to answer, at most --wake-timeout"""
import collections
import time

CONNECTING = "connecting"
UP = "up"
LOST = "lost"
REFUSED = "refused"
STANDBY = "standby"
WAKING = "waking"
STATES = (CONNECTING, UP, LOST, REFUSED, STANDBY, WAKING)

# One active domain of a host. run_state: "running", "paused", ...;
# paused_reason: libvirt's reason for a paused domain ("migration",
# "user", ...), else None; state, since_ms: its urn:sysidle:1 state and
# its start (None: no metadata, or one not to be trusted: stale says why).
Dom = collections.namedtuple(
    "Dom", "name uuid vcpus memory_kib run_state paused_reason state "
    "since_ms stale persistent")


class Snapshot:
    """One host as read at @unix_ms (wall clock) / @mono (monotonic)."""

    def __init__(self, host_uuid, hostname, cpus, memory_kib, domains,
                 inactive, unix_ms, mono):
        self.host_uuid = host_uuid
        self.hostname = hostname
        self.cpus = cpus
        self.memory_kib = memory_kib
        self.domains = tuple(sorted(domains, key=lambda d: d.name))
        self.inactive = tuple(sorted(inactive))    # (name, uuid)
        self.unix_ms = unix_ms
        self.mono = mono

    def domain(self, uuid):
        for d in self.domains:
            if d.uuid == uuid:
                return d
        return None


class Host:
    """A configured host: its name, its libvirt URI (as given, and as the
    source hosts' libvirtds reach it: dest_uri), the migration URI into
    it, its state and its latest snapshot."""

    def __init__(self, name, uri, dest_uri, migrate_uri=None):
        self.name = name
        self.uri = uri
        self.dest_uri = dest_uri
        self.migrate_uri = migrate_uri
        self.state = CONNECTING
        self.since = None           # monotonic time of the state's start
        self.since_unix_ms = None   # the same, wall clock
        self.snap = None            # the latest Snapshot, None when unknown
        self.error = None           # why it is lost, connecting or refused
        self.host_uuid = None       # learnt at its first answer
        self.hostname = None        # the same

    def set_state(self, state, now):
        if state != self.state or self.since is None:
            self.state = state
            self.since = now
            self.since_unix_ms = int(time.time() * 1000 - (
                time.monotonic() - now) * 1000)
            return True
        return False
