// SPDX-License-Identifier: GPL-2.0-only
/* The IOAPIC at GUEST_IOAPIC_BASE: IOREGSEL selects, IOWIN reads and writes. */
#include "rt.h"

#define IOREGSEL ((volatile u32 *)(uintptr_t)(GUEST_IOAPIC_BASE + IOAPIC_MMIO_REGSEL))
#define IOWIN ((volatile u32 *)(uintptr_t)(GUEST_IOAPIC_BASE + IOAPIC_MMIO_WIN))

u32 ioapic_read(u32 reg)
{
	*IOREGSEL = reg;
	return *IOWIN;
}

void ioapic_write(u32 reg, u32 v)
{
	*IOREGSEL = reg;
	*IOWIN = v;
}

/* Edge, active high, fixed, physical destination. */
void ioapic_route(u32 pin, u8 vector, u32 dest_apic_id, bool masked)
{
	ioapic_write(IOAPIC_REG_RTE_LO(pin), IOAPIC_RTE_MASKED); /* mask while changing */
	ioapic_write(IOAPIC_REG_RTE_HI(pin), dest_apic_id << (IOAPIC_RTE_DEST_SHIFT - 32));
	ioapic_write(IOAPIC_REG_RTE_LO(pin), vector | (masked ? IOAPIC_RTE_MASKED : 0));
}

u64 ioapic_read_redir(u32 pin)
{
	return ((u64)ioapic_read(IOAPIC_REG_RTE_HI(pin)) << 32) | ioapic_read(IOAPIC_REG_RTE_LO(pin));
}
