// SPDX-License-Identifier: GPL-2.0-only
/* The legacy 8259 pair and the PIT: remapped/stopped and masked, never used. */
#include "rt.h"

void pic_init_masked(void)
{
	outb(GUEST_PORT_PIC1, 0x11); /* ICW1: edge, cascade, ICW4 */
	outb(GUEST_PORT_PIC2, 0x11);
	outb(GUEST_PORT_PIC1 + 1, VEC_PIC_BASE); /* ICW2: vector base */
	outb(GUEST_PORT_PIC2 + 1, VEC_PIC_BASE + 8);
	outb(GUEST_PORT_PIC1 + 1, 0x04); /* ICW3 */
	outb(GUEST_PORT_PIC2 + 1, 0x02);
	outb(GUEST_PORT_PIC1 + 1, 0x01); /* ICW4: 8086 mode */
	outb(GUEST_PORT_PIC2 + 1, 0x01);
	outb(GUEST_PORT_PIC1 + 1, 0xff); /* OCW1: mask all */
	outb(GUEST_PORT_PIC2 + 1, 0xff);
}

void pit_stop(void)
{
	/* channel 0, lo/hi, mode 0 (one-shot), count 0: no periodic IRQ 0 */
	outb(GUEST_PORT_PIT + 3, 0x30);
	outb(GUEST_PORT_PIT, 0);
	outb(GUEST_PORT_PIT, 0);
}
