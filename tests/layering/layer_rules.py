# SPDX-License-Identifier: GPL-2.0-only
"""The layers of check_layers.py: which part of the tree a path belongs
to (layer_of) and what each layer may include (ALLOWED), the include rule
families (a device's among them) and the extern data, meson and placement
rules in output order, and a path relative to the top of the tree
(inside)."""

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
    ('machine/devices/ includes only what a device may use',
     ('devices',)),
)

# What a file under vmm/machine/devices/ may include of the VMM: a device
# sits on the bus and raises interrupts, nothing more of the machine.
#  - machine/devices/: the devices' own headers;
#  - machine/bus.h: its ports and MMIO range are registered on the bus;
#  - machine/irq.h: it raises ISA lines and MSIs, sends APIC messages;
#  - machine/vcpu.h: a bus handler runs on a vCPU (the local APIC is a
#    vCPU's own: struct vcpu holds it);
#  - machine/vm.h: the VM it belongs to, its guest RAM (DMA, tables);
#  - machine/pause.h: a device's interrupt wakes a paused VM;
#  - machine/pci.h: PCI devices plug into bus 0;
#  - machine/acpi.h: the ACPI PM and the RTC's alarm are in the tables
#    and end S3;
#  - base/: every part of the VMM may use it.
# Not kvm_vm.h, kvm_sys.h (KVM is vcpu.c's and kvm.c's), loader.h,
# image.h (loading), vcpu_loop.h, halt_rules.h (the vCPU loop's
# insides), msr.h (MSRs are dispatched by msr.c, which calls the device),
# cpuid.h (the guest's CPU model).
DEVICE_MAY_INCLUDE_DIRS = ('vmm/machine/devices/', 'vmm/base/')
DEVICE_MAY_INCLUDE = {'vmm/machine/' + h for h in (
    'bus.h', 'irq.h', 'vcpu.h', 'vm.h', 'pause.h', 'pci.h', 'acpi.h')}
DEVICES_DIR = 'vmm/machine/devices/'

# No header under SCAN_DIRS declares extern data: a layer's state is
# passed (a pointer to its struct) or kept file-static behind functions.
# extern const tables are no exception (a function returns them, or the
# .c that uses them holds them). Prototypes and extern "C" are fine.
EXTERN_DATA = 'headers declare no extern data (contexts are passed)'
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
