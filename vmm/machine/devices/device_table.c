// SPDX-License-Identifier: GPL-2.0-only
/* The VM's devices in init order (device_table.h). */
#include <string.h>

#include "machine/devices/device_table.h"
#include "machine/devices/devices.h"
#include "machine/pci.h"

/* The order matters: the interrupt controllers before what raises
 * interrupts through them, PCI before the PCI devices, the remapper
 * before the device whose DMA it remaps. */
static const struct device_desc devices[] = {
	{ "serial", serial_init, false, "16550 UART at 0x3f8, IRQ 4" },
	{ "debug-exit", debug_exit_init, false, "isa-debug-exit at 0xf4" },
	{ "fw_cfg", fw_cfg_init, false, "fw_cfg at 0x510/0x511" },
	{ "legacy", legacy_init, false, "PIT ports, ignored" },
	{ "pic", pic_init, false, "8259A PIC pair at 0x20/0xa0, ELCR" },
	{ "ioapic", ioapic_init, false, "IOAPIC at 0xfec00000" },
	{ "lapic", lapic_init, false, "local APIC at 0xfee00000" },
	{ "acpi_pm", acpi_pm_init, false, "ACPI PM registers at 0x600" },
	{ "rtc", rtc_init, false, "CMOS RTC at 0x70/0x71, IRQ 8" },
	{ "pci", pci_init, false, "PCI configuration mechanism #1 at 0xcf8" },
	{ "q35_host", q35_host_init, false, "PCI host bridge at 00:00.0" },
	{ "pc-testdev", pc_testdev_init, true,
	  "QEMU's test device for kvm-unit-tests:\n"
	  "scratch ports 0xe0 and 0xe8, page flush 0xe4, ISA\n"
	  "IRQ lines 0..23 at ports 0x2000-0x2017, 64 KiB of\n"
	  "memory behind MMIO at 0xff000000" },
	{ "intel-iommu", intel_iommu_init, true,
	  "VT-d at 0xfed90000: DMA remapping and\n"
	  "interrupt remapping in xAPIC mode" },
	{ "edu", edu_init, true, "QEMU's edu PCI device (DMA, MSI)" },
};

#define NR_DEVICES (sizeof(devices) / sizeof(devices[0]))
_Static_assert(NR_DEVICES <= 32, "devices_init's mask has 32 bits");

const struct device_desc *device_table(size_t *n)
{
	*n = NR_DEVICES;
	return devices;
}

int device_optional_index(const char *name)
{
	for (size_t i = 0; i < NR_DEVICES; i++)
		if (devices[i].optional && !strcmp(devices[i].name, name))
			return (int)i;
	return -1;
}

int devices_init(struct vm *vm, uint32_t optional_on)
{
	for (size_t i = 0; i < NR_DEVICES; i++) {
		if (devices[i].optional && !(optional_on & (1u << i)))
			continue;
		if (devices[i].init(vm))
			return -1;
	}
	return 0;
}
