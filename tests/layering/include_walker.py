# SPDX-License-Identifier: GPL-2.0-only
"""check_layers.py's walk of the C sources: every .c/.h file under the
scanned parts, its #include lines (comments and strings stripped) resolved
as the compiler would (the including file's directory first, then the
include roots), and each include a layer may not make (check_includes)."""

import os
import re

from layer_rules import (ALLOWED, INCLUDE_ROOTS, SCAN_DIRS, SOURCE_EXT,
                         describe, inside, layer_of)


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
