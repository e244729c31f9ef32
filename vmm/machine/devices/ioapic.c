/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * IOAPIC at 0xfec00000: IOREGSEL/IOWIN, 24 redirection entries, edge and
 * level pins (remote IRR, cleared by the local APIC's EOI broadcast).
 */
#include <pthread.h>
#include <string.h>

#include <sysidle/guest_abi.h>

#include "machine/bus.h"
#include "machine/devices/devices.h"
#include "machine/irq.h"
#include "machine/vcpu.h"
#include "machine/vm.h"

#define IOAPIC_PINS 24
#define IOAPIC_VERSION 0x20 /* with the EOI register, IOAPIC_MMIO_EOI */
#define RTE_MASKED ((uint64_t)IOAPIC_RTE_MASKED)
#define RTE_LEVEL ((uint64_t)APIC_TRIGGER_LEVEL)
#define RTE_REMOTE_IRR ((uint64_t)APIC_REMOTE_IRR)
#define RTE_REMAPPABLE (1ull << 48) /* VT-d's remappable format */
#define RTE_RO_BITS ((uint64_t)APIC_SEND_PENDING | RTE_REMOTE_IRR)

static struct {
	pthread_mutex_t lock; /* taken before any vCPU lock */
	struct vm *vm;
	uint32_t regsel, id;
	uint64_t rte[IOAPIC_PINS];
	bool level[IOAPIC_PINS];
} io = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* Caller holds io.lock. */
static void ioapic_deliver(unsigned int pin)
{
	uint64_t e = io.rte[pin];
	struct irq_msg m = {
		.dest = (uint32_t)(e >> IOAPIC_RTE_DEST_SHIFT),
		.vector = (uint8_t)e,
		.mode = (uint8_t)APIC_DM_OF(e),
		.logical = e & APIC_DEST_LOGICAL,
		.trigger_level = e & RTE_LEVEL,
	};

	if (e & RTE_MASKED)
		return;
	if (e & RTE_LEVEL) {
		if (e & RTE_REMOTE_IRR)
			return;
		io.rte[pin] |= RTE_REMOTE_IRR;
	}
	if (e & RTE_REMAPPABLE) {
		/* An interrupt remapper's format: the entry goes out as the
		 * MSI it stands for (bits 63:48 to address bits 19:4, bit 11
		 * to bit 2), without a requester id. */
		irq_msi(io.vm, APIC_MSI_ADDR_BASE | (e >> 48) << 4 |
				       ((e >> 11) & 1) << 2,
			(uint32_t)(e & APIC_VECTOR_MASK) |
				APIC_DM_FIELD(APIC_DM_OF(e)) |
				(e & RTE_LEVEL ? APIC_TRIGGER_LEVEL : 0),
			IRQ_SID_NONE);
		return;
	}
	irq_send(io.vm, NULL, &m);
}

/* Any thread holding no vCPU lock: a device drives @pin to @level. */
void ioapic_set_irq(unsigned int pin, bool level)
{
	bool rising;

	pthread_mutex_lock(&io.lock);
	rising = level && !io.level[pin];
	io.level[pin] = level;
	if (rising || (level && (io.rte[pin] & RTE_LEVEL)))
		ioapic_deliver(pin);
	pthread_mutex_unlock(&io.lock);
}

/* A local APIC EOI'd a level-triggered @vector. No vCPU lock held. */
void ioapic_eoi(uint8_t vector)
{
	pthread_mutex_lock(&io.lock);
	for (unsigned int pin = 0; pin < IOAPIC_PINS; pin++) {
		if ((uint8_t)io.rte[pin] != vector ||
		    !(io.rte[pin] & RTE_REMOTE_IRR))
			continue;
		io.rte[pin] &= ~RTE_REMOTE_IRR;
		if (io.level[pin])
			ioapic_deliver(pin);
	}
	pthread_mutex_unlock(&io.lock);
}

static uint32_t ioapic_read(uint32_t reg)
{
	unsigned int pin = (reg - IOAPIC_REG_REDTBL) / 2;

	switch (reg) {
	case IOAPIC_REG_ID: return io.id;
	case IOAPIC_REG_VERSION:
		return ((IOAPIC_PINS - 1) << IOAPIC_VERSION_MAX_RTE_SHIFT) |
		       IOAPIC_VERSION;
	case IOAPIC_REG_ARB: return io.id;
	default:
		if (reg >= IOAPIC_REG_REDTBL && pin < IOAPIC_PINS)
			return (uint32_t)(io.rte[pin] >> (reg & 1 ? 32 : 0));
		return 0xffffffffu;
	}
}

static void ioapic_write(uint32_t reg, uint32_t val)
{
	unsigned int pin = (reg - IOAPIC_REG_REDTBL) / 2;
	uint64_t e;

	if (reg == IOAPIC_REG_ID) {
		io.id = val & IOAPIC_ID_MASK;
		return;
	}
	if (reg < IOAPIC_REG_REDTBL || pin >= IOAPIC_PINS)
		return;
	e = io.rte[pin];
	if (reg & 1)
		e = (e & 0xffffffffull) | ((uint64_t)val << 32);
	else
		e = (e & 0xffffffff00000000ull) | (e & RTE_RO_BITS) |
		    (val & ~(uint32_t)RTE_RO_BITS);
	io.rte[pin] = e;
	if (!(e & RTE_LEVEL))
		io.rte[pin] &= ~RTE_REMOTE_IRR;
	/* Unmasking a level pin that is still high delivers it. */
	if (!(e & RTE_MASKED) && (e & RTE_LEVEL) && io.level[pin])
		ioapic_deliver(pin);
}

static void ioapic_mmio(struct vcpu *v, uint64_t off, uint8_t *data,
			unsigned int len, bool is_write, void *opaque)
{
	uint32_t val = 0;

	(void)v; (void)opaque;
	if (is_write)
		memcpy(&val, data, len < 4 ? len : 4);
	if (off == IOAPIC_MMIO_EOI && is_write) { /* directed EOI */
		ioapic_eoi((uint8_t)val);
		return;
	}
	pthread_mutex_lock(&io.lock);
	if (off == IOAPIC_MMIO_REGSEL && is_write)
		io.regsel = val & 0xff;
	else if (off == IOAPIC_MMIO_REGSEL)
		val = io.regsel;
	else if (off == IOAPIC_MMIO_WIN && is_write)
		ioapic_write(io.regsel, val);
	else if (off == IOAPIC_MMIO_WIN)
		val = ioapic_read(io.regsel);
	pthread_mutex_unlock(&io.lock);
	if (!is_write) {
		memset(data, 0, len);
		memcpy(data, &val, len < 4 ? len : 4);
	}
}

/* Every pin masked, as at power-on; the ID and the line levels are kept
 * (the lines are the devices'). Any thread holding no vCPU lock. */
void ioapic_reset(void)
{
	pthread_mutex_lock(&io.lock);
	io.regsel = 0;
	for (unsigned int pin = 0; pin < IOAPIC_PINS; pin++)
		io.rte[pin] = RTE_MASKED;
	pthread_mutex_unlock(&io.lock);
}

int ioapic_init(struct vm *vm)
{
	io.vm = vm;
	for (unsigned int pin = 0; pin < IOAPIC_PINS; pin++)
		io.rte[pin] = RTE_MASKED;
	return bus_register(BUS_MMIO, GUEST_IOAPIC_BASE, 0x1000, ioapic_mmio,
			    NULL);
}
