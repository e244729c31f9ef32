// SPDX-License-Identifier: GPL-2.0-only
/* The IOAPIC at GUEST_IOAPIC_BASE: index register at +0, data at +0x10. */
#include "rt.h"

#define IOREGSEL ((volatile u32 *)(uintptr_t)GUEST_IOAPIC_BASE)
#define IOWIN ((volatile u32 *)(uintptr_t)(GUEST_IOAPIC_BASE + 0x10))

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
	ioapic_write(0x10 + 2 * pin, APIC_LVT_MASKED); /* mask while changing */
	ioapic_write(0x11 + 2 * pin, dest_apic_id << 24);
	ioapic_write(0x10 + 2 * pin, vector | (masked ? APIC_LVT_MASKED : 0));
}

u64 ioapic_read_redir(u32 pin)
{
	return ((u64)ioapic_read(0x11 + 2 * pin) << 32) | ioapic_read(0x10 + 2 * pin);
}
