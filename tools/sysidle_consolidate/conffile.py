# SPDX-License-Identifier: GPL-2.0-only
"""The configuration file (sysidle.conf(5)): "key = value" lines whose
keys are the long options, turned into argv entries put before the
command line's. The same rules as the C programs' (common/conffile.c):
'#' comment lines, blank lines, a flag as the bare key or true/false/
yes/no, repeatable options repeated, whitespace trimmed, no quoting,
lines at most 4096 bytes, the file at most 1 MiB. The command line wins:
for a repeatable option its values replace the file's."""
import argparse

LINE_MAX = 4096
FILE_MAX = 1 << 20
NOT_IN_FILE = {"config", "help", "version", "status", "history", "json"}


class ConfError(Exception):
    """str(): 'FILE:LINE: message'."""


def config_arg(argv):
    """The FILE of --config FILE / --config=FILE in @argv, or None."""
    for i, a in enumerate(argv):
        if a == "--":
            break
        if a == "--config":
            return argv[i + 1] if i + 1 < len(argv) else None
        if a.startswith("--config="):
            return a[len("--config="):]
    return None


def _actions(parser):
    return {s[2:]: a for a in parser._actions for s in a.option_strings
            if s.startswith("--")}


def _check_value(action, value, where, key):
    try:
        v = action.type(value) if action.type else value
    except (argparse.ArgumentTypeError, ValueError, TypeError) as e:
        raise ConfError("%s: key '%s': %s" % (where, key, e))
    if action.choices is not None and v not in action.choices:
        raise ConfError("%s: key '%s': %r is not one of %s" %
                        (where, key, value, ", ".join(map(str, action.choices))))


def read(path, parser, argv):
    """The argv entries of @path for @parser, to put before @argv.
    Raises ConfError; OSError for an unreadable file."""
    actions = _actions(parser)
    with open(path, "rb") as f:
        data = f.read(FILE_MAX + 1)
    if len(data) > FILE_MAX:
        raise ConfError("%s: the file is longer than %d bytes" %
                        (path, FILE_MAX))
    cli_keys = {a[2:].split("=", 1)[0] for a in argv if a.startswith("--")}
    out = []
    for n, raw in enumerate(data.split(b"\n"), 1):
        where = "%s:%d" % (path, n)
        if len(raw) > LINE_MAX:
            raise ConfError("%s: a line longer than %d bytes" % (where, LINE_MAX))
        try:
            line = raw.decode("utf-8").strip(" \t\r")
        except UnicodeDecodeError:
            raise ConfError("%s: not UTF-8 text" % where)
        if not line or line.startswith("#"):
            continue
        key, eq, value = line.partition("=")
        key, value = key.strip(" \t"), value.strip(" \t") if eq else None
        if not key:
            raise ConfError("%s: a value without a key" % where)
        if key.startswith("--"):
            raise ConfError("%s: key '%s': write it without '--'" % (where, key))
        if key in NOT_IN_FILE:
            raise ConfError("%s: key '%s' is not allowed in a configuration "
                            "file" % (where, key))
        action = actions.get(key)
        if action is None or action.help == argparse.SUPPRESS:
            raise ConfError("%s: unknown key '%s'" % (where, key))
        if action.nargs == 0:  # a flag
            if value in ("false", "no"):
                continue
            if value not in (None, "true", "yes"):
                raise ConfError("%s: key '%s' takes no value (or true, false, "
                                "yes, no), not '%s'" % (where, key, value))
            out.append("--" + key)
            continue
        if not value:
            raise ConfError("%s: key '%s' needs a value" % (where, key))
        _check_value(action, value, where, key)
        if isinstance(action, argparse._AppendAction) and key in cli_keys:
            continue  # the command line's values replace the file's
        out.append("--%s=%s" % (key, value))
    return out
