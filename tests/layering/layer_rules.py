# SPDX-License-Identifier: GPL-2.0-only
"""The layers of check_layers.py: which part of the tree a path belongs
to (layer_of) and what each layer may include (ALLOWED), the include rule
families and the meson and placement rules in output order, and a path
relative to the top of the tree (inside)."""

import os

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
