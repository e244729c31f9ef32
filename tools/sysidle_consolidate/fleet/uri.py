# SPDX-License-Identifier: GPL-2.0-only
"""The hosts of the command line: --host NAME=URI and --migrate-uri
[NAME=]URI, checked before anything is opened.

A libvirt URI is DRIVER[+TRANSPORT]://[USER@][HOST][:PORT]/PATH[?PARAMS].
Migration is peer to peer: the source host's libvirtd opens the
destination's URI itself, so each URI must reach its host from the other
hosts, not only from here. Refused: a URI with no scheme or path; a local
URI with no host (qemu:///system), which would make every source connect
to itself (libvirt: "Attempt to migrate guest to the same host"), unless
it names a socket (?socket=PATH: a libvirtd of this machine, a test
fleet); a remote driver that cannot migrate (test://). A local URI with a
socket is passed to the sources as DRIVER+unix:///PATH?socket=... (the
form libvirt accepts as a destination); the host's own connection uses
the URI as given.

The migration URI (--migrate-uri) is where the migration stream goes
(libvirt's VIR_MIGRATE_PARAM_URI: tcp://ADDRESS[:PORT], rdma://...);
without one libvirt uses the destination's host name, which must then
resolve, from the source, to an address of the destination."""
import re
import urllib.parse

NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}\Z")
MIGRATE_SCHEMES = ("tcp", "rdma", "unix")
DRIVERS = ("qemu", "kvm")


class BadHost(ValueError):
    """A --host or --migrate-uri that cannot be used; str() says why."""


def _split_name(text, what):
    name, eq, rest = text.partition("=")
    if not eq or not name or not rest:
        raise BadHost("%s %r: give NAME=URI" % (what, text))
    if not NAME_RE.match(name):
        raise BadHost("%s %r: the name %r is not 1 to 63 letters, digits, "
                      "'.', '_' or '-' (starting with a letter or digit)" %
                      (what, text, name))
    return name, rest


def dest_uri(uri, what=None):
    """The URI the other hosts' libvirtds are given to reach this one;
    raises BadHost (its text starts with @what, default the URI)."""
    what = what or uri
    u = urllib.parse.urlsplit(uri)
    if not u.scheme or "://" not in uri:
        raise BadHost("%s: not a libvirt URI (DRIVER[+TRANSPORT]://"
                      "HOST/system, e.g. qemu+ssh://host1/system)" % what)
    driver, _, transport = u.scheme.partition("+")
    if driver not in DRIVERS:
        raise BadHost("%s: driver %r cannot live-migrate (a QEMU host "
                      "is qemu://, qemu+ssh://, qemu+tls://, ...)" %
                      (what, driver))
    if not u.path or u.path == "/":
        raise BadHost("%s: no path (/system or /session)" % what)
    params = urllib.parse.parse_qs(u.query)
    if u.hostname:
        if u.hostname in ("localhost", "127.0.0.1", "::1") and \
                "socket" not in params:
            raise BadHost("%s: names this machine: a source host's "
                          "libvirtd would migrate to itself; give each host "
                          "by a name or address the other hosts reach" % what)
        return uri
    if "socket" not in params:
        raise BadHost("%s: names the local libvirtd, which every source "
                      "host would take for itself; give each host a URI "
                      "the others reach (qemu+ssh://HOST/system, "
                      "qemu+tls://HOST/system; ?socket=PATH for a "
                      "libvirtd of this machine)" % what)
    if transport not in ("", "unix"):
        raise BadHost("%s: a socket with transport %r" % (what, transport))
    # (urlunsplit would drop the empty authority's "//")
    return "%s+unix://%s?%s" % (driver, u.path, u.query)


def p2p_form(uri):
    """@uri as a source host's libvirtd is to be given it: a local URI
    with a socket in the form libvirt accepts as a destination, any other
    as it is (libvirt's own error then says what is wrong with it)."""
    try:
        return dest_uri(uri)
    except BadHost:
        return uri


def migrate_uri(uri, what=None):
    """@uri checked as a migration URI; raises BadHost."""
    what = what or "--migrate-uri %s" % uri
    u = urllib.parse.urlsplit(uri)
    if u.scheme not in MIGRATE_SCHEMES or "://" not in uri:
        raise BadHost("%s: not a migration URI (tcp://ADDRESS[:PORT], "
                      "rdma://ADDRESS[:PORT] or unix:///PATH)" % what)
    if u.scheme != "unix" and not u.hostname:
        raise BadHost("%s: no address" % what)
    return uri


def parse_hosts(host_args, migrate_args):
    """[(name, uri, dest_uri, migrate_uri or None)] in the order given;
    raises BadHost (a bad URI, a name or URI given twice, a migration URI
    for a host that is not given)."""
    hosts = []
    names, uris = set(), set()
    for text in host_args:
        name, uri = _split_name(text, "--host")
        if name in names:
            raise BadHost("--host %s: the name %s is given twice" %
                          (text, name))
        if uri in uris:
            raise BadHost("--host %s: the URI %s is given twice" %
                          (text, uri))
        names.add(name)
        uris.add(uri)
        hosts.append([name, uri, dest_uri(uri, "--host " + text), None])
    every = None
    per = {}
    for text in migrate_args:
        if "=" in text.split("://", 1)[0]:
            name, uri = _split_name(text, "--migrate-uri")
            if name not in names:
                raise BadHost("--migrate-uri %s: no --host named %s" %
                              (text, name))
            per[name] = migrate_uri(uri, "--migrate-uri " + text)
        else:
            every = migrate_uri(text)
    for h in hosts:
        h[3] = per.get(h[0], every)
    return [tuple(h) for h in hosts]
