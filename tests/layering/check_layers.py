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
A file under vmm/machine/devices/ includes of the VMM only the devices'
headers, base/, and machine/bus.h, irq.h, vcpu.h, vm.h, pause.h, pci.h,
acpi.h (layer_rules.py says why each).
A file directly under vmm/ other than main.c and options.c/.h, or under a
vmm/ directory that is not one of the four layers, is not in a layer yet (the tree is being
reorganised): it is held to main.c's rule, and a comment counts such files.

Extern data: no .h file under vmm/, tools/, common/, sysidle/ and include/
declares extern data (a variable, a table, a function pointer; const ones
too): a layer's state is passed or kept static behind functions. A
function prototype, even over several lines, and extern "C" are fine. A
file on the temporary allow-list in layer_rules.py is reported on an
"# allowed for now: ..." line and does not fail.

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
# Its parts, beside it: layer_rules.py (the layers and the rule families),
# include_walker.py (the C sources' includes), meson_walker.py (the meson
# targets' sources), layers_self_test.py (--self-test).

import os
import sys

from include_walker import check_extern_data, check_includes, source_files
from layer_rules import (EXTERN_DATA, INCLUDE_FAMILIES,
                         MESON_COMMON, MESON_TOOLS, PLACED, inside, layer_of)
from layers_self_test import self_test
from meson_walker import check_meson


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
    results.append((EXTERN_DATA, check_extern_data(root)))
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


def main(argv):
    if argv[1:] == ['--self-test']:
        return self_test()
    if len(argv) != 2 or argv[1].startswith('-'):
        sys.stderr.write(__doc__)
        return 2
    return run(argv[1])


if __name__ == '__main__':
    sys.exit(main(sys.argv))
