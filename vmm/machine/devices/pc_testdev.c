/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * QEMU's pc-testdev, the test device kvm-unit-tests runs with:
 *  - 0xe0-0xe3: a 32-bit scratch register, any access width, byte lanes
 *    by port (0xe1 is its second byte);
 *  - 0xe4: a 32-bit write of a guest physical address flushes the host's
 *    mapping of that page (its contents stay); reads 0;
 *  - 0xe8-0xeb: the same scratch register as 0xe0;
 *  - 0x2000-0x2017: one byte port per ISA IRQ line 0..23; a write drives
 *    the line to (value != 0) through irq_isa_set(); reads 0. QEMU takes
 *    only byte writes here; a wider write is split into byte writes to
 *    consecutive ports, as the ISA bus does for an 8-bit device. QEMU's
 *    ISA bus has lines 0-15 only (it aborts on a write to 0x2010 and up);
 *    lines 16-23 are IOAPIC pins 16-23 here, as in bhyve's pc-testdev;
 *  - 0xff000000: 64 KiB of memory behind MMIO exits.
 */
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "machine/bus.h"
#include "machine/devices/devices.h"
#include "machine/irq.h"
#include "machine/vcpu.h"
#include "machine/vm.h"

#define TESTDEV_PORT_REG 0xe0
#define TESTDEV_PORT_FLUSH 0xe4
#define TESTDEV_PORT_REG_BYTES 0xe8
#define TESTDEV_PORT_IRQ 0x2000
#define TESTDEV_IRQ_LINES 24
#define TESTDEV_IOMEM_BASE 0xff000000u
#define TESTDEV_IOMEM_LEN 0x10000u

static struct {
	pthread_mutex_t lock;
	struct vm *vm;
	uint32_t reg;
	uint8_t iomem[TESTDEV_IOMEM_LEN];
} testdev = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* 0xe0 and 0xe8: byte @off + i of the access is byte (off + i) of the
 * register; bytes past its end are dropped (read as 0xff). */
static void testdev_reg_io(struct vcpu *v, uint64_t off, uint8_t *data,
			   unsigned int len, bool is_write, void *opaque)
{
	(void)v; (void)opaque;
	pthread_mutex_lock(&testdev.lock);
	for (unsigned int i = 0; i < len; i++) {
		unsigned int shift = (unsigned int)(off + i) * 8;

		if (off + i >= 4) {
			if (!is_write)
				data[i] = 0xff;
		} else if (is_write) {
			testdev.reg = (testdev.reg & ~(0xffu << shift)) |
				      (uint32_t)data[i] << shift;
		} else {
			data[i] = (uint8_t)(testdev.reg >> shift);
		}
	}
	pthread_mutex_unlock(&testdev.lock);
}

/* Unmapping and remapping the page's host memory makes KVM drop its
 * mappings of it; the guest sees the same contents. */
static void testdev_flush_io(struct vcpu *v, uint64_t off, uint8_t *data,
			     unsigned int len, bool is_write, void *opaque)
{
	uint32_t gpa;
	void *page;

	(void)v; (void)opaque;
	if (!is_write) {
		memset(data, 0, len);
		return;
	}
	if (off != 0 || len != 4)
		return;
	memcpy(&gpa, data, 4);
	page = guest_ptr(testdev.vm, gpa & ~0xfffu, 0x1000);
	if (!page || ((uintptr_t)page & ((uintptr_t)sysconf(_SC_PAGESIZE) - 1)))
		return;
	mprotect(page, 0x1000, PROT_NONE);
	mprotect(page, 0x1000, PROT_READ | PROT_WRITE);
}

static void testdev_irq_io(struct vcpu *v, uint64_t off, uint8_t *data,
			   unsigned int len, bool is_write, void *opaque)
{
	(void)v; (void)opaque;
	if (!is_write) {
		memset(data, 0, len);
		return;
	}
	for (unsigned int i = 0; i < len; i++)
		if (off + i < TESTDEV_IRQ_LINES)
			irq_isa_set((unsigned int)(off + i), data[i] != 0);
}

static void testdev_iomem(struct vcpu *v, uint64_t off, uint8_t *data,
			  unsigned int len, bool is_write, void *opaque)
{
	(void)v; (void)opaque;
	if (off >= TESTDEV_IOMEM_LEN || len > TESTDEV_IOMEM_LEN - off) {
		if (!is_write)
			memset(data, 0xff, len);
		return;
	}
	pthread_mutex_lock(&testdev.lock);
	if (is_write)
		memcpy(&testdev.iomem[off], data, len);
	else
		memcpy(data, &testdev.iomem[off], len);
	pthread_mutex_unlock(&testdev.lock);
}

int pc_testdev_init(struct vm *vm)
{
	testdev.vm = vm;
	if (bus_register(BUS_PIO, TESTDEV_PORT_REG, 4, testdev_reg_io, NULL) ||
	    bus_register(BUS_PIO, TESTDEV_PORT_FLUSH, 4, testdev_flush_io,
			 NULL) ||
	    bus_register(BUS_PIO, TESTDEV_PORT_REG_BYTES, 4, testdev_reg_io,
			 NULL) ||
	    bus_register(BUS_PIO, TESTDEV_PORT_IRQ, TESTDEV_IRQ_LINES,
			 testdev_irq_io, NULL))
		return -1;
	return bus_register(BUS_MMIO, TESTDEV_IOMEM_BASE, TESTDEV_IOMEM_LEN,
			    testdev_iomem, NULL);
}
