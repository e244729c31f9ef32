/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The two cascaded 8259A PICs of a PC and the ELCR. The register logic
 * works on a struct pic_pair and knows nothing of locks or vCPUs; pic.c
 * also wraps one pair for the VM (its lock, the bus, the ExtINT kick).
 */
#ifndef VMM_MACHINE_PIC_H
#define VMM_MACHINE_PIC_H

#include <stdbool.h>
#include <stdint.h>

#define PIC_PORT_MASTER 0x20
#define PIC_PORT_SLAVE 0xa0
#define PIC_PORT_ELCR 0x4d0 /* 0x4d0: IRQ 0-7, 0x4d1: IRQ 8-15 */
#define PIC_CASCADE_IR 2    /* the master input the slave drives */

struct pic_chip {
	uint8_t irr, isr, imr;
	uint8_t elcr, elcr_writable;
	uint8_t input;      /* the IR lines' levels */
	uint8_t base;       /* ICW2: vector of IR0 */
	uint8_t icw3;       /* master: inputs with a slave; slave: its id */
	uint8_t lowest;     /* the IR with the lowest priority (rotation) */
	uint8_t icw_next;   /* 0: initialised, else the ICW expected next */
	bool icw4_wanted, single, level_mode; /* ICW1: IC4, SNGL, LTIM */
	bool auto_eoi, fully_nested;          /* ICW4: AEOI, SFNM */
	bool rotate_on_aeoi;                  /* OCW2 */
	bool read_isr, poll, special_mask;    /* OCW3 */
};

struct pic_pair {
	struct pic_chip chip[2]; /* master, slave */
	bool line2;              /* ISA line 2, beside the slave's INT */
};

/* Power-on state, then the state a PC's firmware leaves (see pic.c). */
void pic_pair_reset(struct pic_pair *p);
void pic_pair_firmware_state(struct pic_pair *p);
/* @port: 0x20/0x21, 0xa0/0xa1, 0x4d0/0x4d1. */
void pic_pair_write(struct pic_pair *p, uint16_t port, uint8_t val);
uint8_t pic_pair_read(struct pic_pair *p, uint16_t port);
/* ISA IRQ @irq (0..15) driven to @level. */
void pic_pair_set_irq(struct pic_pair *p, unsigned int irq, bool level);
/* The master's INT output: an interrupt request for the CPU. */
bool pic_pair_intr(const struct pic_pair *p);
/* INTA: the vector of the request acknowledged (IRR -> ISR), or the
 * spurious IR7 of the chip that has none left. */
uint8_t pic_pair_intack(struct pic_pair *p);

#endif
