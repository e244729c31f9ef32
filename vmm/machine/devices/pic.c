/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The 8259A pair at 0x20/0x21 (master) and 0xa0/0xa1 (slave, on the
 * master's IR2), and the ELCR at 0x4d0/0x4d1 (as on the PIIX4): ICW1-ICW4,
 * OCW1-OCW3, priority resolution with rotation, auto-EOI, special mask and
 * special fully nested mode, poll mode, edge and level inputs, spurious
 * IR7. The register logic (pic_pair_*) works on a struct pic_pair alone;
 * the VM's one pair below adds the lock, the bus and the INTR output to
 * the boot CPU's LINT0 (ExtINT, irq.c).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "machine/bus.h"
#include "machine/devices/devices.h"
#include "machine/devices/pic.h"
#include "machine/irq.h"
#include "machine/vcpu.h"
#include "machine/vm.h"

enum { MASTER, SLAVE };

/* SeaBIOS's vector bases: IRQ 0-7 at 0x08, IRQ 8-15 at 0x70. */
#define FW_BASE_MASTER 0x08
#define FW_BASE_SLAVE 0x70

/*
 * The masks the VMM starts with. SeaBIOS masks every line but the
 * cascade, then opens those it installed real-mode handlers for (IRQ 0,
 * 1, 6, 8, 12, 14: IMR 0xb8/0xae), and sets IRQ 10 and 11 level-triggered
 * because it routes the PCI INTx pins there (ELCR 0x00/0x0c). This
 * machine has no firmware handler behind any vector and no PCI interrupt
 * router, so neither applies as such. What does apply: a line of one of
 * the machine's own devices (COM1 on 4, RTC on 8, ACPI SCI on 9) stays
 * masked, so that a guest that routes it through the IOAPIC and never
 * touches the PIC does not get it a second time through LINT0. The other
 * lines are left as the ICW sequence leaves them: open (ICW1 clears the
 * IMR), for a guest that takes PIC interrupts in real mode. The ELCR keeps
 * its reset value, every line edge: none is a shared PCI INTx line here.
 */
#define FW_IMR_MASTER 0x10 /* IRQ 4 */
#define FW_IMR_SLAVE 0x03  /* IRQ 8, 9 */

/* PIIX4: IRQ 0, 1, 2, 8 and 13 are always edge-triggered. */
#define ELCR_WRITABLE_MASTER 0xf8
#define ELCR_WRITABLE_SLAVE 0xde

static bool chip_level(const struct pic_chip *c, unsigned int ir)
{
	return c->level_mode || (c->elcr & (1u << ir));
}

static uint8_t chip_level_lines(const struct pic_chip *c)
{
	return c->level_mode ? 0xff : c->elcr;
}

/* A level line's request is its input; an edge line's stays latched. */
static void chip_sync_level(struct pic_chip *c)
{
	uint8_t lv = chip_level_lines(c);

	c->irr = (uint8_t)((c->irr & ~lv) | (c->input & lv));
}

static void chip_set_input(struct pic_chip *c, unsigned int ir, bool level)
{
	uint8_t bit = (uint8_t)(1u << ir);

	if (chip_level(c, ir))
		c->irr = level ? c->irr | bit : c->irr & ~bit;
	else if (level && !(c->input & bit))
		c->irr |= bit; /* rising edge */
	c->input = level ? c->input | bit : c->input & ~bit;
}

/* 0 is the highest priority: the IR after the lowest one. */
static unsigned int chip_priority(const struct pic_chip *c, unsigned int ir)
{
	return (ir - c->lowest - 1) & 7;
}

/* The IR of highest priority among @bits, or -1. */
static int chip_highest(const struct pic_chip *c, uint8_t bits)
{
	for (unsigned int p = 0; p < 8; p++) {
		unsigned int ir = (c->lowest + 1 + p) & 7;

		if (bits & (1u << ir))
			return (int)ir;
	}
	return -1;
}

/* The request the chip would signal now: unmasked, and of higher priority
 * than every level in service that counts (a masked one does not in
 * special mask mode; a slave's input does not on a fully nested master). */
static int chip_pending(const struct pic_chip *c, bool master)
{
	uint8_t in_service = c->isr;
	int req = chip_highest(c, c->irr & ~c->imr), cur;

	if (req < 0)
		return -1;
	if (c->special_mask)
		in_service &= ~c->imr;
	if (master && c->fully_nested)
		in_service &= ~c->icw3;
	cur = chip_highest(c, in_service);
	if (cur >= 0 &&
	    chip_priority(c, (unsigned int)req) >= chip_priority(c, (unsigned int)cur))
		return -1;
	return req;
}

/*
 * The slave's INT drives the master's IR2, with the ISA line 2. On a
 * master with its slave there the request follows that line as a level:
 * the slave's INT stays high until the INTA that takes its request, and
 * a request the slave withdraws (a level line lowered) is gone from the
 * master too.
 */
static void pair_update(struct pic_pair *p)
{
	struct pic_chip *m = &p->chip[MASTER];
	bool in = chip_pending(&p->chip[SLAVE], false) >= 0 || p->line2;
	uint8_t bit = 1u << PIC_CASCADE_IR;

	if (m->single || !(m->icw3 & bit)) {
		chip_set_input(m, PIC_CASCADE_IR, in);
		return;
	}
	m->irr = in ? m->irr | bit : m->irr & ~bit;
	m->input = in ? m->input | bit : m->input & ~bit;
}

/* The INTA (or poll read) of request @ir: IRR -> ISR, or no ISR bit with
 * auto-EOI. */
static void chip_ack(struct pic_chip *c, unsigned int ir)
{
	uint8_t bit = (uint8_t)(1u << ir);

	if (!chip_level(c, ir))
		c->irr &= ~bit;
	if (!c->auto_eoi)
		c->isr |= bit;
	else if (c->rotate_on_aeoi)
		c->lowest = (uint8_t)ir;
}

static void chip_icw1(struct pic_chip *c, uint8_t val)
{
	c->icw_next = 2;
	c->icw4_wanted = val & 0x01;
	c->single = val & 0x02;
	c->level_mode = val & 0x08;
	c->imr = 0;
	c->isr = 0;
	c->irr &= chip_level_lines(c); /* the edge latches are reset */
	chip_sync_level(c);
	c->lowest = 7;
	c->special_mask = c->read_isr = c->poll = c->rotate_on_aeoi = false;
	if (!c->icw4_wanted)
		c->auto_eoi = c->fully_nested = false;
}

static void chip_ocw2(struct pic_chip *c, uint8_t val)
{
	unsigned int ir = val & 7;
	int top;

	switch (val >> 5) {
	case 0: /* rotate in auto-EOI mode: clear */
		c->rotate_on_aeoi = false;
		break;
	case 4: /* rotate in auto-EOI mode: set */
		c->rotate_on_aeoi = true;
		break;
	case 1: /* non-specific EOI */
	case 5: /* rotate on non-specific EOI */
		top = chip_highest(c, c->isr);
		if (top < 0)
			break;
		c->isr &= (uint8_t)~(1u << top);
		if (val >> 5 == 5)
			c->lowest = (uint8_t)top;
		break;
	case 3: /* specific EOI */
	case 7: /* rotate on specific EOI */
		c->isr &= (uint8_t)~(1u << ir);
		if (val >> 5 == 7)
			c->lowest = (uint8_t)ir;
		break;
	case 6: /* set priority */
		c->lowest = (uint8_t)ir;
		break;
	default: /* 2: no operation */
		break;
	}
}

static void chip_ocw3(struct pic_chip *c, uint8_t val)
{
	if (val & 0x40) /* ESMM */
		c->special_mask = val & 0x20;
	if (val & 0x04)
		c->poll = true;
	if (val & 0x02) /* RR */
		c->read_isr = val & 0x01;
}

static void chip_write_data(struct pic_chip *c, uint8_t val)
{
	switch (c->icw_next) {
	case 2:
		c->base = val & 0xf8;
		c->icw_next = c->single ? (c->icw4_wanted ? 4 : 0) : 3;
		break;
	case 3:
		c->icw3 = val;
		c->icw_next = c->icw4_wanted ? 4 : 0;
		break;
	case 4:
		c->auto_eoi = val & 0x02;
		c->fully_nested = val & 0x10;
		c->icw_next = 0;
		break;
	default: /* OCW1 */
		c->imr = val;
	}
}

void pic_pair_write(struct pic_pair *p, uint16_t port, uint8_t val)
{
	struct pic_chip *c;

	if (port == PIC_PORT_ELCR || port == PIC_PORT_ELCR + 1) {
		c = &p->chip[port - PIC_PORT_ELCR];
		c->elcr = val & c->elcr_writable;
		chip_sync_level(c);
		pair_update(p);
		return;
	}
	c = &p->chip[(port & ~1u) == PIC_PORT_SLAVE ? SLAVE : MASTER];
	if (port & 1)
		chip_write_data(c, val);
	else if (val & 0x10)
		chip_icw1(c, val);
	else if (val & 0x08)
		chip_ocw3(c, val);
	else
		chip_ocw2(c, val);
	pair_update(p);
}

/* Poll mode: the read acknowledges the highest request; bit 7 says there
 * was one, bits 0-2 its level. */
static uint8_t pair_poll(struct pic_pair *p, unsigned int chip)
{
	struct pic_chip *c = &p->chip[chip];
	int ir = chip_pending(c, chip == MASTER);

	c->poll = false;
	if (ir < 0)
		return 0;
	chip_ack(c, (unsigned int)ir);
	pair_update(p);
	return (uint8_t)(0x80 | ir);
}

uint8_t pic_pair_read(struct pic_pair *p, uint16_t port)
{
	unsigned int chip;
	struct pic_chip *c;

	if (port == PIC_PORT_ELCR || port == PIC_PORT_ELCR + 1)
		return p->chip[port - PIC_PORT_ELCR].elcr;
	chip = (port & ~1u) == PIC_PORT_SLAVE ? SLAVE : MASTER;
	c = &p->chip[chip];
	if (c->poll)
		return pair_poll(p, chip);
	if (port & 1)
		return c->imr;
	return c->read_isr ? c->isr : c->irr;
}

void pic_pair_set_irq(struct pic_pair *p, unsigned int irq, bool level)
{
	if (irq >= 16)
		return;
	if (irq == PIC_CASCADE_IR)
		p->line2 = level;
	else
		chip_set_input(&p->chip[irq / 8], irq % 8, level);
	pair_update(p);
}

bool pic_pair_intr(const struct pic_pair *p)
{
	return chip_pending(&p->chip[MASTER], true) >= 0;
}

uint8_t pic_pair_intack(struct pic_pair *p)
{
	struct pic_chip *m = &p->chip[MASTER], *s = &p->chip[SLAVE];
	int ir = chip_pending(m, true), sir;
	uint8_t vector;

	if (ir < 0)
		return m->base | 7; /* the request went away: spurious IR7 */
	chip_ack(m, (unsigned int)ir);
	if (!m->single && (m->icw3 & (1u << ir))) {
		sir = chip_pending(s, false);
		if (sir < 0) {
			vector = s->base | 7; /* spurious IRQ 15 */
		} else {
			chip_ack(s, (unsigned int)sir);
			vector = (uint8_t)(s->base + sir);
		}
	} else {
		vector = (uint8_t)(m->base + ir);
	}
	pair_update(p);
	return vector;
}

void pic_pair_reset(struct pic_pair *p)
{
	memset(p, 0, sizeof(*p));
	p->chip[MASTER].elcr_writable = ELCR_WRITABLE_MASTER;
	p->chip[SLAVE].elcr_writable = ELCR_WRITABLE_SLAVE;
	p->chip[MASTER].lowest = p->chip[SLAVE].lowest = 7;
}

/* The initialisation SeaBIOS does: edge, cascade, ICW4; the bases; the
 * slave on IR2 (its id 2); 8086 mode, normal EOI. Then the masks above. */
void pic_pair_firmware_state(struct pic_pair *p)
{
	static const uint8_t seq[][2] = {
		{ 0x20, 0x11 }, { 0xa0, 0x11 },
		{ 0x21, FW_BASE_MASTER }, { 0xa1, FW_BASE_SLAVE },
		{ 0x21, 1u << PIC_CASCADE_IR }, { 0xa1, PIC_CASCADE_IR },
		{ 0x21, 0x01 }, { 0xa1, 0x01 },
		{ 0x21, FW_IMR_MASTER }, { 0xa1, FW_IMR_SLAVE },
	};

	pic_pair_reset(p);
	for (size_t i = 0; i < sizeof(seq) / sizeof(seq[0]); i++)
		pic_pair_write(p, seq[i][0], seq[i][1]);
}

/* The VM's pair. lock is taken with a vCPU's lock held (INTA), so no vCPU
 * lock is ever taken under it: the ExtINT kick comes after it is dropped. */
static struct {
	pthread_mutex_t lock;
	struct pic_pair pair;
	atomic_bool intr; /* pic_pair_intr(), for lock-free looks */
	struct vm *vm;
} pic = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* Caller holds pic.lock. True when INTR has just gone high. */
static bool pic_refresh_intr(void)
{
	bool intr = pic_pair_intr(&pic.pair);
	bool was = atomic_exchange(&pic.intr, intr);

	return intr && !was;
}

static void pic_signal(bool rose)
{
	if (rose && pic.vm)
		irq_extint_kick(pic.vm);
}

/* Ports base..base+1 (opaque: base); a wider access goes byte by byte to
 * consecutive ports, as on the ISA bus. Caller holds no vCPU lock. */
static void pic_io(struct vcpu *v, uint64_t off, uint8_t *data,
		   unsigned int len, bool is_write, void *opaque)
{
	uint16_t base = (uint16_t)(uintptr_t)opaque;
	bool rose;

	(void)v;
	pthread_mutex_lock(&pic.lock);
	for (unsigned int i = 0; i < len; i++) {
		if (off + i > 1)
			data[i] = is_write ? data[i] : 0xff;
		else if (is_write)
			pic_pair_write(&pic.pair, (uint16_t)(base + off + i),
				       data[i]);
		else
			data[i] = pic_pair_read(&pic.pair,
						(uint16_t)(base + off + i));
	}
	rose = pic_refresh_intr();
	pthread_mutex_unlock(&pic.lock);
	pic_signal(rose);
}

/* Any thread holding no vCPU lock: ISA IRQ @irq (0..15) to @level. */
void pic_set_irq(unsigned int irq, bool level)
{
	bool rose;

	pthread_mutex_lock(&pic.lock);
	pic_pair_set_irq(&pic.pair, irq, level);
	rose = pic_refresh_intr();
	pthread_mutex_unlock(&pic.lock);
	pic_signal(rose);
}

/* Any thread, no lock needed: the master's INT output. */
bool pic_intr(void)
{
	return atomic_load(&pic.intr);
}

/* The CPU's INTA; the caller may hold its vCPU's lock. */
uint8_t pic_intack(void)
{
	uint8_t vector;

	pthread_mutex_lock(&pic.lock);
	vector = pic_pair_intack(&pic.pair);
	pic_refresh_intr();
	pthread_mutex_unlock(&pic.lock);
	return vector;
}

int pic_init(struct vm *vm)
{
	pthread_mutex_lock(&pic.lock);
	pic.vm = vm;
	pic_pair_firmware_state(&pic.pair);
	pic_refresh_intr();
	pthread_mutex_unlock(&pic.lock);
	if (bus_register(BUS_PIO, PIC_PORT_MASTER, 2, pic_io,
			 (void *)(uintptr_t)PIC_PORT_MASTER) ||
	    bus_register(BUS_PIO, PIC_PORT_SLAVE, 2, pic_io,
			 (void *)(uintptr_t)PIC_PORT_SLAVE))
		return -1;
	return bus_register(BUS_PIO, PIC_PORT_ELCR, 2, pic_io,
			    (void *)(uintptr_t)PIC_PORT_ELCR);
}
