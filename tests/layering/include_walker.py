# SPDX-License-Identifier: GPL-2.0-only
"""check_layers.py's walk of the C sources: every .c/.h file under the
scanned parts, its #include lines (comments and strings stripped) resolved
as the compiler would (the including file's directory first, then the
include roots), each include a layer (or a device) may not make
(check_includes), and each extern data declaration in a header
(check_extern_data)."""

import os
import re

from layer_rules import (ALLOWED, DEVICE_MAY_INCLUDE,
                         DEVICE_MAY_INCLUDE_DIRS, DEVICES_DIR, INCLUDE_ROOTS,
                         SCAN_DIRS, SOURCE_EXT, describe, inside, layer_of)


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
            line = text.count('\n', 0, m.start()) + 1
            if dst not in ALLOWED[src]:
                found.append((src, rel, line,
                              'layer %s includes %s (layer %s)'
                              % (describe(src), target, describe(dst))))
            if (rel.startswith(DEVICES_DIR) and target.startswith('vmm/')
                    and target not in DEVICE_MAY_INCLUDE
                    and not target.startswith(DEVICE_MAY_INCLUDE_DIRS)):
                found.append(('devices', rel, line,
                              'device includes %s (not one a device may '
                              'use)' % target))
    return found


PREPROCESSOR = re.compile(r'^[ \t]*#(?:[^\n]*\\\n)*[^\n]*', re.M)
ATTRIBUTE = re.compile(r'__attribute__\s*\(\((?:[^()]|\([^()]*\))*\)\)')
EXTERN = re.compile(r'\bextern\b(?!\s*"C")')


def extern_is_data(decl):
    """Is the text after extern, up to its ';', a data declaration? A
    function's declarator is its name then '(' (a '(' followed by '*' is a
    pointer: data); no '(' at all is data too (a variable, a table)."""
    decl = ATTRIBUTE.sub(' ', decl)
    m = re.search(r'\(', decl)
    if m is None:
        return True
    if re.match(r'\s*\*', decl[m.end():]):
        return True
    return re.search(r'\w\s*$', decl[:m.start()]) is None


def check_extern_data(root):
    """[(file, line, text)] for every extern data declaration in a header
    (comments, strings and preprocessor lines blanked; a declaration may
    span lines)."""
    found = []
    for path in source_files(root):
        if not path.endswith('.h'):
            continue
        rel = inside(root, path)
        try:
            with open(path, encoding='utf-8', errors='replace') as f:
                text = strip_c_comments(f.read())
        except OSError:
            continue
        text = PREPROCESSOR.sub(lambda m: re.sub(r'[^\n]', ' ', m.group(0)),
                                text)
        for m in EXTERN.finditer(text):
            end = text.find(';', m.end())
            decl = text[m.end():end if end >= 0 else len(text)]
            if not extern_is_data(decl):
                continue
            line = text.count('\n', 0, m.start()) + 1
            words = re.findall(r'\w+', ATTRIBUTE.sub(' ', decl.split('[')[0]
                                                       .split('=')[0]))
            name = words[-1] if words else '?'
            found.append((rel, line, 'extern data %s in a header (pass a '
                          'context, or keep it static behind functions)'
                          % name))
    return found
