/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * What pci.c calls outside its file, for the PCI and edu unit tests: the
 * bus table, guest RAM (64 KiB at 0), MSI delivery and the IOAPIC pins,
 * each recording what it was given.
 */
#ifndef TEST_PCI_FAKES_H
#define TEST_PCI_FAKES_H

#include <string.h>

#include "machine/bus.h"
#include "machine/devices/devices.h"
#include "machine/irq.h"
#include "machine/pci.h"
#include "machine/vm.h"

#define FAKE_RAM_SIZE 0x10000u

static uint8_t fake_ram[FAKE_RAM_SIZE];
static struct vm fake_vm;
static struct { uint64_t addr; uint32_t data; uint16_t sid; int count; } msi;
static struct { int pin, level, count; } intx = { -1, -1, 0 };

int bus_register(enum bus_space space, uint64_t base, uint64_t len,
		 bus_handler fn, void *opaque)
{
	(void)space; (void)base; (void)len; (void)fn; (void)opaque;
	return 0;
}

void *guest_ptr(struct vm *vm, uint64_t gpa, uint64_t len)
{
	(void)vm;
	if (gpa + len < gpa || gpa + len > FAKE_RAM_SIZE)
		return NULL;
	return fake_ram + gpa;
}

void irq_msi(struct vm *vm, uint64_t addr, uint32_t data, uint16_t sid)
{
	(void)vm;
	msi.addr = addr;
	msi.data = data;
	msi.sid = sid;
	msi.count++;
}

void ioapic_set_irq(unsigned int pin, bool level)
{
	intx.pin = (int)pin;
	intx.level = level;
	intx.count++;
}

/* Config cycles as the guest does them: CONFIG_ADDRESS, then data. */
static uint32_t cfg_read(uint8_t devfn, uint8_t reg, unsigned int len)
{
	uint32_t v = 0;

	pci_config_address_write(0x80000000u | (uint32_t)devfn << 8 | (reg & ~3u));
	pci_config_data(reg & 3u, (uint8_t *)&v, len, false);
	return v;
}

static void cfg_write(uint8_t devfn, uint8_t reg, uint32_t v, unsigned int len)
{
	pci_config_address_write(0x80000000u | (uint32_t)devfn << 8 | (reg & ~3u));
	pci_config_data(reg & 3u, (uint8_t *)&v, len, true);
}

#endif
