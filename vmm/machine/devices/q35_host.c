/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The host bridge at 00:00.0, as the q35 memory controller hub presents
 * itself (8086:29c0, class 0600); it has no BARs and no interrupt.
 */
#include <string.h>

#include "machine/devices/devices.h"
#include "machine/pci.h"
#include "machine/vm.h"

int q35_host_init(struct vm *vm)
{
	static struct pci_dev host;

	(void)vm;
	memset(&host, 0, sizeof(host));
	host.devfn = 0;
	host.cfg[PCI_VENDOR_ID] = 0x86;
	host.cfg[PCI_VENDOR_ID + 1] = 0x80;
	host.cfg[PCI_DEVICE_ID] = 0xc0;
	host.cfg[PCI_DEVICE_ID + 1] = 0x29;
	host.cfg[PCI_CLASS_DEVICE] = 0x00;     /* host bridge */
	host.cfg[PCI_CLASS_DEVICE + 1] = 0x06; /* bridge */
	host.cfg[PCI_SUBSYSTEM_VENDOR_ID] = 0xf4;
	host.cfg[PCI_SUBSYSTEM_VENDOR_ID + 1] = 0x1a;
	host.cfg[PCI_SUBSYSTEM_ID] = 0x00;
	host.cfg[PCI_SUBSYSTEM_ID + 1] = 0x11;
	return pci_register(&host);
}
