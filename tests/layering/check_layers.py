#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""Keep the direction of dependencies between the parts of the tree.

    check_layers.py SOURCE_ROOT     check the tree, TAP on stdout
    check_layers.py --self-test     check a small made-up tree with known
                                    violations and assert exactly those are
                                    reported (the check can fail)

Includes: every #include "..." (and <...> that resolves into the tree) in the
.c/.h files under vmm/, tools/, common/, sysidle/ and include/ is resolved
relative to the including file's directory first, then against the include
roots vmm/, include/, common/ and last the top of the tree. An include that
resolves nowhere is a system header and is ignored; one that climbs with ..
is judged by the file it reaches.

Layers (by the path of a file):
    vmm/base/     base          may include base/
    vmm/machine/  machine       may include base/, machine/
    vmm/idle/     idle          may include base/, machine/, idle/
    vmm/export/   export        may include base/, machine/, idle/, export/,
                                common/
    vmm/main.c    main          may include anything under vmm/ and common/
    vmm/options.* main          (the command line: main.c's own)
    common/       common        never vmm/ or tools/
    tools/        tools         never vmm/
    include/, sysidle/          never vmm/, tools/, common/
Every part may include include/ and sysidle/ (the state-machine library).
A file directly under vmm/ other than main.c and options.c/.h, or under a
vmm/ directory that is not one of the four layers, is not in a layer yet (the tree is being
reorganised): it is held to main.c's rule, and a comment counts such files.

Build: in every meson.build reached through subdir() from the top, each
executable()/library()/static_library()/shared_library()/both_libraries()/
shared_module() call's sources (quoted paths, and variables holding files()
or lists of paths, followed across meson.build files as meson does) are
resolved; a target that lists a file under tools/ must not list one under
vmm/, and a library declared under common/ or built from common/ sources
must list nothing under vmm/ or tools/.

Output: one TAP line per rule family, a "# file:line: ..." line per
violation under it (also on stderr), and "# N passed, M failed". Exit
status 1 on any violation.
"""

import os
import re
import subprocess
import sys
import tempfile

SCAN_DIRS = ('vmm', 'tools', 'common', 'sysidle', 'include')
INCLUDE_ROOTS = ('vmm', 'include', 'common', '')
SOURCE_EXT = ('.c', '.h')

VMM_LAYERS = ('base', 'machine', 'idle', 'export')
LIBRARY = {'include', 'sysidle'}
ANY_VMM = {'base', 'machine', 'idle', 'export', 'main', 'vmm'}

# layer of the including file -> layers it may include
ALLOWED = {
    'base': {'base'} | LIBRARY,
    'machine': {'base', 'machine'} | LIBRARY,
    'idle': {'base', 'machine', 'idle'} | LIBRARY,
    'export': {'base', 'machine', 'idle', 'export', 'common'} | LIBRARY,
    'main': ANY_VMM | {'common'} | LIBRARY,
    'vmm': ANY_VMM | {'common'} | LIBRARY,
    'common': {'common'} | LIBRARY,
    'tools': {'tools', 'common', 'other'} | LIBRARY,
    'include': LIBRARY,
    'sysidle': LIBRARY,
}
# Files elsewhere (tests/, bench/, ...) are layer 'other'; only tools/ has a
# reason to reach them, but nothing above forbids it either: 'other' is
# allowed for every layer.
for _allowed in ALLOWED.values():
    _allowed.add('other')

# The include rule families, in output order: (name, layers they cover).
INCLUDE_FAMILIES = (
    ('base/ includes only base/', ('base',)),
    ('machine/ includes only base/, machine/', ('machine',)),
    ('idle/ includes only base/, machine/, idle/', ('idle',)),
    ('export/ includes only base/, machine/, idle/, export/, common/',
     ('export',)),
    ('vmm/main.c (and any vmm/ file in no layer) include only vmm/, common/',
     ('main', 'vmm')),
    ('common/ includes no vmm/, tools/', ('common',)),
    ('tools/ includes no vmm/', ('tools',)),
    ('include/ and sysidle/ include no vmm/, tools/, common/',
     ('include', 'sysidle')),
)
PLACED = 'vmm/: every file but main.c and options.c/.h is in a layer folder'
TOP_FILES = ('main.c', 'options.c', 'options.h')
MESON_TOOLS = 'meson: a target with tools/ sources lists no vmm/ source'
MESON_COMMON = 'meson: a common/ library lists no vmm/ or tools/ source'


def layer_of(rel):
    """The layer of a path relative to the top of the tree ('/'-separated)."""
    parts = rel.split('/')
    if parts[0] == 'vmm':
        if len(parts) == 2:
            return 'main' if parts[1] in TOP_FILES else 'vmm'
        return parts[1] if parts[1] in VMM_LAYERS else 'vmm'
    if parts[0] in ('common', 'tools', 'include', 'sysidle'):
        return parts[0]
    return 'other'


def describe(layer):
    return 'vmm/ (no layer)' if layer == 'vmm' else layer


def inside(root, path):
    """path (absolute, normalised) relative to root, or None if outside."""
    rel = os.path.relpath(path, root)
    if rel == '..' or rel.startswith('..' + os.sep) or os.path.isabs(rel):
        return None
    return rel.replace(os.sep, '/')


# ---------------------------------------------------------------- includes

C_TOKEN = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"'
                     r"|'(?:\\.|[^'\\\n])*'", re.S)
INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*([<"])([^">\n]+)[">]', re.M)


def strip_c_comments(text):
    """Comments become blanks (newlines kept, so line numbers hold)."""
    def blank(m):
        s = m.group(0)
        if s.startswith('/'):
            return re.sub(r'[^\n]', ' ', s)
        return s
    return C_TOKEN.sub(blank, text)


def resolve_include(root, including_dir, name, quoted):
    candidates = []
    if quoted:
        candidates.append(os.path.join(including_dir, name))
    for r in INCLUDE_ROOTS:
        candidates.append(os.path.join(root, r, name))
    for c in candidates:
        c = os.path.normpath(c)
        if os.path.isfile(c):
            rel = inside(root, c)
            if rel is not None:
                return rel
    return None


def source_files(root):
    for top in SCAN_DIRS:
        base = os.path.join(root, top)
        for d, dirs, files in os.walk(base):
            dirs[:] = sorted(x for x in dirs if not x.startswith('.'))
            for f in sorted(files):
                if f.endswith(SOURCE_EXT):
                    yield os.path.join(d, f)


def check_includes(root):
    """[(layer, file, line, text)] for every include a layer may not make."""
    found = []
    for path in source_files(root):
        rel = inside(root, path)
        src = layer_of(rel)
        try:
            with open(path, encoding='utf-8', errors='replace') as f:
                text = strip_c_comments(f.read())
        except OSError:
            continue
        for m in INCLUDE.finditer(text):
            target = resolve_include(root, os.path.dirname(path), m.group(2),
                                     m.group(1) == '"')
            if target is None:
                continue
            dst = layer_of(target)
            if dst not in ALLOWED[src]:
                line = text.count('\n', 0, m.start()) + 1
                found.append((src, rel, line,
                              'layer %s includes %s (layer %s)'
                              % (describe(src), target, describe(dst))))
    return found


# ------------------------------------------------------------------- meson

MESON_TOKEN = re.compile(r"'''.*?'''|'(?:\\.|[^'\\\n])*'|#[^\n]*", re.S)
TARGET_CALL = re.compile(r'(?<![\w.])(executable|static_library|shared_library'
                         r'|both_libraries|library|shared_module)\s*\(')
SUBDIR_CALL = re.compile(r"(?<![\w.])subdir\s*\(\s*'([^']*)'")
ASSIGN = re.compile(r'^[ \t]*([A-Za-z_]\w*)[ \t]*(\+?=)(?!=)', re.M)
STRING = re.compile(r"'''(.*?)'''|'((?:\\.|[^'\\\n])*)'", re.S)
IDENT = re.compile(r'(?<![\w.\'])([A-Za-z_]\w*)\b(?!\s*[(:])')
FILES_CALL = re.compile(r'(?<![\w.])files\s*\(')
OBJECT_CALL = re.compile(r'\s*(executable|static_library|shared_library'
                         r'|both_libraries|library|shared_module|custom_target'
                         r'|declare_dependency|dependency)\s*\(')


class MesonFile:
    def __init__(self, root, path):
        self.root = root
        self.path = path
        self.dir = os.path.dirname(path)
        self.rel = inside(root, path)
        with open(path, encoding='utf-8', errors='replace') as f:
            self.text = f.read()
        # comments blanked; strings kept, so offsets and lines still match
        self.code = MESON_TOKEN.sub(
            lambda m: (re.sub(r'[^\n]', ' ', m.group(0))
                       if m.group(0).startswith('#') else m.group(0)),
            self.text)

    def line(self, offset):
        return self.code.count('\n', 0, offset) + 1

    def balanced(self, start):
        """End offset of the bracketed text opening at start (a ( or [)."""
        depth = 0
        i = start
        while i < len(self.code):
            m = STRING.match(self.code, i)
            if m:
                i = m.end()
                continue
            c = self.code[i]
            if c in '([{':
                depth += 1
            elif c in ')]}':
                depth -= 1
                if depth == 0:
                    return i + 1
            i += 1
        return len(self.code)

    def top_level(self, start, end=None):
        """(index, character) of code[start:end] outside strings and
        brackets (a bracketed group is skipped whole)."""
        end = len(self.code) if end is None else end
        i = start
        while i < end:
            m = STRING.match(self.code, i)
            if m:
                i = m.end()
                continue
            c = self.code[i]
            if c in '([{':
                i = self.balanced(i)
                continue
            yield i, c
            i += 1

    def statement_end(self, start):
        """End of the expression that starts at start: the end of the line
        once all brackets are closed."""
        for i, c in self.top_level(start):
            if c == '\n':
                return i
        return len(self.code)


def meson_files(root):
    """The meson.build files the build reads: the top one and every one a
    subdir() call reaches."""
    seen = []
    todo = [os.path.join(root, 'meson.build')]
    while todo:
        path = os.path.normpath(todo.pop(0))
        if path in (m.path for m in seen) or not os.path.isfile(path):
            continue
        mf = MesonFile(root, path)
        seen.append(mf)
        for m in SUBDIR_CALL.finditer(mf.code):
            todo.append(os.path.join(mf.dir, m.group(1), 'meson.build'))
    return seen


def expression_items(mf, start, end):
    """[(kind, value, meson file, line)] in code[start:end]: ('file', path)
    for a string inside files(), ('str', text) for any other string,
    ('var', name) for an identifier."""
    items = []
    in_files = []
    for m in FILES_CALL.finditer(mf.code, start, end):
        in_files.append((m.end() - 1, mf.balanced(m.end() - 1)))
    i = start
    while i < end:
        m = STRING.match(mf.code, i)
        if m:
            value = m.group(1) if m.group(1) is not None else m.group(2)
            kind = ('file' if any(a <= i < b for a, b in in_files)
                    else 'str')
            items.append((kind, value, mf, mf.line(i)))
            i = m.end()
            continue
        m = IDENT.match(mf.code, i)
        if m and (i == 0 or not (mf.code[i - 1].isalnum()
                                 or mf.code[i - 1] in '_.')):
            items.append(('var', m.group(1), mf, mf.line(i)))
            i = m.end()
            continue
        i += 1
    return items


def split_args(mf, start, end):
    """[(start, end)] of the comma-separated arguments in code[start:end]."""
    args = []
    a = start
    for i, c in mf.top_level(start, end):
        if c == ',':
            args.append((a, i))
            a = i + 1
    if mf.code[a:end].strip():
        args.append((a, end))
    return args


KWARG = re.compile(r'\s*([A-Za-z_]\w*)\s*:')


def collect_variables(files):
    """name -> items of every assignment to it (=, +=) in any meson.build:
    meson's variables are shared by all of them. A variable holding a
    target or a dependency is not followed: linking is not listing sources."""
    variables = {}
    for mf in files:
        for m in ASSIGN.finditer(mf.code):
            end = mf.statement_end(m.end())
            items = variables.setdefault(m.group(1), [])
            if OBJECT_CALL.match(mf.code, m.end()):
                continue
            items.extend(expression_items(mf, m.end(), end))
    return variables


def resolve_items(root, items, variables, target_mf, seen=None):
    """[(rel path, meson file, line)] of the files the items name."""
    if seen is None:
        seen = set()
    out = []
    for kind, value, mf, line in items:
        if kind == 'var':
            if value in seen or value not in variables:
                continue
            out += resolve_items(root, variables[value], variables, target_mf,
                                 seen | {value})
            continue
        # files() resolves where it is called, a plain string where the
        # target is declared
        base = mf.dir if kind == 'file' else target_mf.dir
        path = os.path.normpath(os.path.join(base, value))
        if not os.path.isfile(path):
            continue
        rel = inside(root, path)
        if rel is not None:
            out.append((rel, mf, line))
    return out


def check_meson(root):
    """{family: [(file, line, text)]}"""
    files = meson_files(root)
    variables = collect_variables(files)
    found = {MESON_TOOLS: [], MESON_COMMON: []}
    for mf in files:
        for m in TARGET_CALL.finditer(mf.code):
            open_paren = m.end() - 1
            end = mf.balanced(open_paren)
            # the sources: the positional arguments after the name, and
            # sources : ...; the other keyword arguments are not sources
            args = split_args(mf, open_paren + 1, end - 1)
            if not args:
                continue
            names = [v for k, v, _, _ in expression_items(mf, *args[0])
                     if k in ('str', 'file')]
            name = names[0] if names else '?'
            items = []
            for a, b in args[1:]:
                kw = KWARG.match(mf.code, a, b)
                if kw and kw.group(1) != 'sources':
                    continue
                items += expression_items(mf, kw.end() if kw else a, b)
            sources = resolve_items(root, items, variables, mf)
            layers = {layer_of(rel) for rel, _, _ in sources}
            under_common = layer_of(mf.rel) == 'common'
            is_library = m.group(1) != 'executable'
            if 'tools' in layers:
                bad = ANY_VMM
                family = MESON_TOOLS
                what = 'tools'
            elif under_common or (is_library and 'common' in layers):
                bad = ANY_VMM | {'tools'}
                family = MESON_COMMON
                what = 'common'
            else:
                continue
            for rel, smf, line in sources:
                if layer_of(rel) in bad:
                    found[family].append(
                        (smf.rel, line, "target '%s' (%s) lists %s (layer %s)"
                         % (name, what, rel, describe(layer_of(rel)))))
    return found


# -------------------------------------------------------------------- main

def run(root):
    root = os.path.abspath(root)
    if not os.path.isfile(os.path.join(root, 'meson.build')):
        print('Bail out! no meson.build in %s' % root)
        return 2
    includes = check_includes(root)
    meson = check_meson(root)
    results = []
    for name, layers in INCLUDE_FAMILIES:
        results.append((name, [(f, l, t) for src, f, l, t in includes
                               if src in layers]))
    results.append((MESON_TOOLS, meson[MESON_TOOLS]))
    results.append((MESON_COMMON, meson[MESON_COMMON]))

    unplaced = sorted({f for f in (inside(root, p) for p in source_files(root))
                       if layer_of(f) == 'vmm'})
    # A reader knows what a file may touch from the folder it sits in.
    results.append((PLACED, [(f, 1, 'not in base/, machine/, idle/ or '
                              'export/ (only main.c and options.c/.h sit at the top)')
                             for f in unplaced]))
    print('TAP version 13')
    print('1..%d' % len(results))
    failed = 0
    for n, (name, violations) in enumerate(results, 1):
        if violations:
            failed += 1
            print('not ok %d - %s' % (n, name))
            for f, line, text in sorted(set(violations)):
                print('# %s:%d: %s' % (f, line, text))
                # and on stderr, which meson test --print-errorlogs shows
                sys.stderr.write('%s:%d: %s\n' % (f, line, text))
        else:
            print('ok %d - %s' % (n, name))
    print('# %d passed, %d failed' % (len(results) - failed, failed))
    return 1 if failed else 0


# --------------------------------------------------------------- self-test

# A small tree; each file's content, and for the bad files the lines the
# check must report.
GOOD_TREE = {
    'meson.build': """project('fake', 'c')
inc = include_directories('include')
subdir('common')
vmm_sources = files(
  'vmm/main.c',
  'vmm/base/event.c',
  'vmm/machine/vcpu.c',
  'vmm/idle/idle.c',
  'vmm/export/control.c',
)
executable('vmm', vmm_sources, include_directories : inc)
executable('ctl', 'tools/ctl.c', link_with : common_lib)
subdir('tools')
""",
    'common/meson.build': """common_lib = static_library('common',
  'proto.c')  # a comment with 'vmm/main.c' in it is no source
""",
    'tools/meson.build': """bridge_srcs = files('bridge/bridge.c')
executable('bridge', bridge_srcs)
""",
    'include/sysidle/sysidle.h': '#pragma once\n',
    'sysidle/sysidle.c': '#include "sysidle/sysidle.h"\n#include <stdint.h>\n',
    'common/proto.h': '#pragma once\n#include <stddef.h>\n',
    'common/proto.c': '#include "proto.h"\n#include <stdio.h>\n',
    'vmm/base/log.h': '#pragma once\n',
    'vmm/base/event.h': '#pragma once\n#include "log.h"\n',
    'vmm/base/event.c': ('#include "event.h"\n#include "base/log.h"\n'
                         '#include <pthread.h>\n'
                         '/* #include "../machine/kvm.h" */\n'
                         '// #include "idle/pvtick.h"\n'),
    'vmm/machine/kvm.h': '#pragma once\n#include "base/event.h"\n',
    'vmm/machine/vcpu.c': ('#include "kvm.h"\n#include "../base/log.h"\n'
                           '#include "sysidle/sysidle.h"\n'),
    'vmm/machine/devices/serial.c': ('#include "../kvm.h"\n'
                                     '#include "machine/kvm.h"\n'
                                     '#include "base/log.h"\n'),
    'vmm/idle/pvtick.h': '#pragma once\n#include "machine/kvm.h"\n',
    'vmm/idle/idle.c': '#include "pvtick.h"\n#include "base/event.h"\n',
    'vmm/export/metrics.h': '#pragma once\n#include "idle/pvtick.h"\n',
    'vmm/export/control.c': ('#include "metrics.h"\n#include "proto.h"\n'
                             '#include "machine/kvm.h"\n'),
    'vmm/main.c': ('#include "base/event.h"\n#include "machine/kvm.h"\n'
                   '#include "idle/pvtick.h"\n#include "export/metrics.h"\n'
                   '#include "proto.h"\n'),
    'tools/ctl.c': '#include "proto.h"\n#include "sysidle/sysidle.h"\n',
    'tools/bridge/bridge.c': '#include "publish.h"\n',
    'tools/bridge/publish.h': '#pragma once\n#include <stdbool.h>\n',
}

# The same tree with violations added: path -> (content, [bad lines]).
BAD_FILES = {
    # base including machine (relative, and <> into the tree)
    'vmm/base/time.c': ('#include "log.h"\n#include "../machine/kvm.h"\n'
                        '#include <machine/kvm.h>\n', [2, 3]),
    # machine including idle, and common
    'vmm/machine/bus.c': ('#include "kvm.h"\n\n#include "idle/pvtick.h"\n'
                          '#include "proto.h"\n', [3, 4]),
    # idle including export
    'vmm/idle/wire.c': ('#include "pvtick.h"\n#include "../export/metrics.h"\n',
                        [2]),
    # files at the top of vmm/ beside main.c: in no layer
    'vmm/x.h': ('#pragma once\n', [1]),
    'vmm/x.c': ('#include "x.h"\n', [1]),
    # tools including vmm by climbing out
    'tools/bridge/hooks.h': ('#pragma once\n/* the VMM\'s hooks */\n'
                             '#include "../../vmm/x.h"\n', [3]),
    # common including tools
    'common/more.c': ('#include "proto.h"\n#include "../tools/bridge/publish.h"\n',
                      [2]),
    # the library including vmm
    'include/sysidle/extra.h': ('#pragma once\n#include "../../vmm/base/log.h"\n',
                                [2]),
}
BAD_MESON = {
    # a tools target listing a vmm file (directly, and through a variable
    # defined in another meson.build), and a common library listing one
    'tools/meson.build': ("""bridge_srcs = files('bridge/bridge.c')
executable('bridge', bridge_srcs)
shared = files('../vmm/x.c')
executable('bridge2', 'bridge/bridge.c',
  '../vmm/x.c')
""", [('tools/meson.build', 5), ('tools/meson.build', 3)]),
    'common/meson.build': ("""common_lib = static_library('common',
  'proto.c')  # a comment with 'vmm/main.c' in it is no source
common2 = static_library('common2', 'proto.c',
  'more.c', '../vmm/x.c')
""", [('common/meson.build', 4)]),
    'meson.build': (GOOD_TREE['meson.build'] +
                    "executable('hookctl', 'tools/ctl.c', shared)\n", []),
}

VIOLATION = re.compile(r'^# (\S+):(\d+): ')


def write_tree(root, files):
    for rel, text in files.items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, 'w') as f:
            f.write(text)


def run_checker(root):
    p = subprocess.run([sys.executable, os.path.abspath(__file__), root],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True)
    found = set()
    for line in p.stdout.splitlines():
        m = VIOLATION.match(line)
        if m:
            found.add((m.group(1), int(m.group(2))))
    # stderr repeats the violations, nothing else
    if sorted(p.stderr.splitlines()) != sorted(
            line[2:] for line in p.stdout.splitlines()
            if VIOLATION.match(line)):
        found.add(('<stderr differs from the TAP violations>', 0))
    return p.returncode, p.stdout, found


def self_test():
    checks = []

    def check(ok, name, detail=''):
        checks.append((ok, name, detail))

    with tempfile.TemporaryDirectory() as root:
        write_tree(root, GOOD_TREE)
        rc, out, found = run_checker(root)
        check(rc == 0 and not found and 'not ok' not in out,
              'a tree that keeps the layers passes', out)

        expected = set()
        for rel, (text, lines) in BAD_FILES.items():
            write_tree(root, {rel: text})
            expected |= {(rel, n) for n in lines}
        for rel, (text, where) in BAD_MESON.items():
            write_tree(root, {rel: text})
            expected |= set(where)
        rc, out, found = run_checker(root)
        check(rc == 1, 'a tree with violations fails (exit status 1)',
              'exit status %d' % rc)
        missing = sorted(expected - found)
        extra = sorted(found - expected)
        check(not missing, 'every planted violation is reported',
              'missing: %s' % missing)
        check(not extra, 'nothing else is reported', 'extra: %s' % extra)
        for family in ('base/', 'machine/', 'idle/', 'common/', 'tools/',
                       'include/', MESON_TOOLS, MESON_COMMON, PLACED):
            check(re.search(r'^not ok \d+ - %s' % re.escape(family), out,
                            re.M) is not None,
                  'rule family "%s" fails' % family)
        for family in ('export/', 'vmm/main.c'):
            check(re.search(r'^ok \d+ - %s' % re.escape(family), out,
                            re.M) is not None,
                  'rule family "%s" passes' % family)
        check(re.search(r'^# 2 passed, 9 failed$', out, re.M) is not None,
              'the summary counts the families')
        check("tools/bridge/hooks.h:3: layer tools includes vmm/x.h "
              "(layer vmm/ (no layer))" in out,
              'a violation names file, line, both layers')

        print('TAP version 13')
        print('1..%d' % len(checks))
        for n, (ok, name, detail) in enumerate(checks, 1):
            print('%s %d - %s' % ('ok' if ok else 'not ok', n, name))
            if not ok:
                sys.stderr.write('self-test failed: %s\n' % name)
                for line in (detail or '').splitlines():
                    print('#   ' + line)
                    sys.stderr.write('  %s\n' % line)
        if not all(ok for ok, _, _ in checks):
            print('# checker output on the planted tree:')
            for line in out.splitlines():
                print('#   ' + line)
        failed = sum(1 for ok, _, _ in checks if not ok)
        print('# %d passed, %d failed' % (len(checks) - failed, failed))
        return 1 if failed else 0


def main(argv):
    if argv[1:] == ['--self-test']:
        return self_test()
    if len(argv) != 2 or argv[1].startswith('-'):
        sys.stderr.write(__doc__)
        return 2
    return run(argv[1])


if __name__ == '__main__':
    sys.exit(main(sys.argv))
