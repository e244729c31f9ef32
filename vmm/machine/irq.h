/* SPDX-License-Identifier: GPL-2.0-only */
/* Interrupt delivery (irq.c): APIC messages, from the IOAPIC or a local
 * APIC's ICR, to the vCPUs; ISA IRQ lines; ExtINT; MSIs. */
#ifndef VMM_MACHINE_IRQ_H
#define VMM_MACHINE_IRQ_H

#include <stdbool.h>
#include <stdint.h>

struct vcpu;
struct vm;

struct irq_msg {
	uint32_t dest;
	uint8_t vector;
	uint8_t mode;      /* enum apic_delivery_mode */
	uint8_t shorthand; /* APIC_SHORTHAND_NONE, _SELF, _ALL, _ALL_BUT_SELF */
	bool logical;
	bool level;        /* ICR level: assert (INIT de-assert is dropped) */
	bool trigger_level; /* level-triggered: EOI goes back to the IOAPIC */
	bool x2apic;       /* 32-bit destination format */
};
/* Any thread, holding no vCPU lock. @src is NULL for the IOAPIC. */
void irq_send(struct vm *vm, struct vcpu *src, const struct irq_msg *m);
/* An ISA IRQ line (0..23) driven to @level, as a PC wires it: lines 0-15
 * to the PICs' inputs, and to the IOAPIC pin of the same number except
 * line 0 (pin 2) and line 2 (the cascade: PIC only); 16-23 to the IOAPIC
 * only. Any thread holding no vCPU lock. */
void irq_isa_set(unsigned int line, bool level);
/* ExtINT: the PIC's INTR through the BSP's LINT0. The PIC's INTR went
 * high: wake the BSP if it takes it (no vCPU lock held). */
void irq_extint_kick(struct vm *vm);
/* @v's lock held: @v takes the PIC's INTR now and it is high; ack: INTA,
 * the vector to inject (it bypasses the LAPIC's IRR, ISR and TPR). */
bool irq_extint_pending(const struct vcpu *v);
int irq_extint_ack(struct vcpu *v);
/* An MSI: a memory write of @data to @addr (0xfeexxxxx) by requester @sid
 * (PCI bus/dev/fn, or IRQ_SID_NONE). Any thread holding no vCPU lock. An interrupt
 * remapper, when set (setup time), sees every one first: it returns 0 and
 * fills @m, 1 to let a compatibility-format message through, or -1 to
 * block it. */
typedef int (*irq_remap_fn)(uint64_t addr, uint32_t data, uint16_t sid,
			    struct irq_msg *m);
void irq_set_remap(irq_remap_fn fn);
#define IRQ_SID_NONE 0xffff /* no requester id (the IOAPIC's messages) */
void irq_msi(struct vm *vm, uint64_t addr, uint32_t data, uint16_t sid);
bool irq_msi_decode(uint64_t addr, uint32_t data, struct irq_msg *m);

#endif
