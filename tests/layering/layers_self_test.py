# SPDX-License-Identifier: GPL-2.0-only
"""check_layers.py --self-test: a small made-up tree that keeps the layers
(it must pass), then files and meson.build files with known violations
planted in it: exactly those must be reported, each rule family failing
or passing as planted, the summary and a violation's wording as
documented. check_layers.py is run on the tree as a program."""

import os
import re
import subprocess
import sys
import tempfile

from layer_rules import EXTERN_DATA, MESON_COMMON, MESON_TOOLS, PLACED

CHECKER = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                       'check_layers.py')


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
    # prototypes (one over three lines, one with an attribute) and
    # extern "C" are no extern data
    'include/sysidle/sysidle.h': ('#pragma once\n#ifdef __cplusplus\n'
                                  'extern "C" {\n#endif\n'
                                  'extern int sysidle_f(int a,\n'
                                  '                     int b);\n'
                                  'extern void sysidle_g(void)\n'
                                  '    __attribute__((noreturn));\n'
                                  '/* extern int not_code; */\n'),
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
    'vmm/machine/bus.h': '#pragma once\n',
    'vmm/machine/devices/serial.c': ('#include "../bus.h"\n'
                                     '#include "machine/bus.h"\n'
                                     '#include "base/log.h"\n'
                                     '#include "serial.h"\n'),
    'vmm/machine/devices/serial.h': '#pragma once\n#include <stdint.h>\n',
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
    # a device including more of the machine than a device may use (and
    # a climb out of the layer: both rules report that line)
    'vmm/machine/devices/rtc.c': ('#include "machine/bus.h"\n'
                                  '#include "../kvm.h"\n'
                                  '#include "serial.h"\n'
                                  '#include "../../idle/pvtick.h"\n',
                                  [2, 4]),
    # extern data in a header: a variable, a const table, a function
    # pointer over two lines; the prototype between them is fine
    'vmm/idle/state.h': ('#pragma once\nextern struct idle_layer idle;\n'
                         'extern const int ticks[4];\n'
                         'extern int idle_f(void);\n'
                         'extern void\n  (*idle_hook)(void);\n', [2, 3, 5]),
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
    p = subprocess.run([sys.executable, CHECKER, root],
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
                       'include/', 'machine/devices/', EXTERN_DATA,
                       MESON_TOOLS, MESON_COMMON, PLACED):
            check(re.search(r'^not ok \d+ - %s' % re.escape(family), out,
                            re.M) is not None,
                  'rule family "%s" fails' % family)
        for family in ('export/', 'vmm/main.c'):
            check(re.search(r'^ok \d+ - %s' % re.escape(family), out,
                            re.M) is not None,
                  'rule family "%s" passes' % family)
        check(re.search(r'^# 2 passed, 11 failed$', out, re.M) is not None,
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
