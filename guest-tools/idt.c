// SPDX-License-Identifier: GPL-2.0-only
/*
 * The IDT (one table, shared by all CPUs) and the C side of interrupt
 * dispatch. Exceptions on any CPU print vector, error code and RIP and exit
 * with EXIT_EXCEPTION; an interrupt nobody registered exits with EXIT_BADIRQ.
 */
#include "rt.h"

struct idt_entry {
	u16 off_lo, sel;
	u8 ist, type;
	u16 off_mid;
	u32 off_hi, zero;
} __attribute__((packed));

extern char isr_stubs[];
static struct idt_entry idt[256] __attribute__((aligned(16)));
static irq_handler_t handlers[256];
static irq_handler_t nmi_handler;

void idt_init(void)
{
	for (int v = 0; v < 256; v++) {
		u64 a = (u64)(uintptr_t)isr_stubs + 16 * (u64)v;

		idt[v].off_lo = (u16)a;
		idt[v].sel = 0x08;
		idt[v].ist = 0;
		idt[v].type = 0x8e; /* present, DPL 0, interrupt gate */
		idt[v].off_mid = (u16)(a >> 16);
		idt[v].off_hi = (u32)(a >> 32);
		idt[v].zero = 0;
	}
	idt_load();
}

void idt_load(void)
{
	struct {
		u16 limit;
		u64 base;
	} __attribute__((packed)) p = { sizeof(idt) - 1, (u64)(uintptr_t)idt };

	__asm__ volatile("lidt %0" : : "m"(p));
}

void irq_set_handler(u8 vector, irq_handler_t h)
{
	WRITE_ONCE(handlers[vector], h);
}

void nmi_set_handler(irq_handler_t h)
{
	WRITE_ONCE(nmi_handler, h);
}

static u32 cpu_index_or_unknown(void)
{
	u64 gs = rdmsr(0xc0000101);

	return gs ? ((struct percpu *)(uintptr_t)gs)->index : 0xffffffffu;
}

static __attribute__((noreturn)) void die(const char *what, struct irq_frame *f, u32 code)
{
	char buf[160];
	int n = snprintf(buf, sizeof(buf),
			 "\nFAIL - %s: vector %u error 0x%lx rip 0x%lx cpu %d\n", what,
			 (unsigned)f->vector, (unsigned long)f->error, (unsigned long)f->rip,
			 (int)cpu_index_or_unknown());

	/* print even if another CPU holds the console lock */
	bool locked = console_trylock(1000000);
	console_write_unlocked(buf, (size_t)n);
	if (locked)
		console_unlock();
	guest_exit(code);
}

void isr_dispatch(struct irq_frame *f);
void isr_dispatch(struct irq_frame *f)
{
	u32 v = (u32)f->vector;

	if (v == 2) {
		if (nmi_handler)
			nmi_handler(f);
		return;
	}
	if (v < 32)
		die("exception", f, EXIT_EXCEPTION);
	if (v == VEC_SPURIOUS || v == VEC_PIC_BASE + 7 || v == VEC_PIC_BASE + 15)
		return; /* spurious: no EOI */
	if (!handlers[v])
		die("unexpected interrupt", f, EXIT_BADIRQ);
	handlers[v](f);
	apic_eoi();
}
