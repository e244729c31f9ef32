# SPDX-License-Identifier: GPL-2.0-only
"""check_layers.py's walk of the build: every meson.build reached through
subdir() from the top, its variables (files() and lists of paths,
followed across files as meson does) and each target call's sources
resolved (check_meson): a target with tools/ sources that lists a vmm/
one, a common/ library that lists vmm/ or tools/ sources."""

import os
import re

from layer_rules import (ANY_VMM, MESON_COMMON, MESON_TOOLS, describe,
                         inside, layer_of)


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
