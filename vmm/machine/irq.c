/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Interrupt delivery: an APIC message (from an ICR or the IOAPIC) to the
 * vCPUs it names. Delivery posts the event under the target's lock and
 * kicks it: a halted target wakes, a target in KVM_RUN exits.
 */
#include <pthread.h>
#include "machine/devices/devices.h"
#include "machine/irq.h"
#include "machine/pause.h"
#include "machine/vcpu.h"
#include "machine/vm.h"

/* What woke @t, for its wake-up's source: serial input (the UART's
 * thread), an IPI from @src, or a device's interrupt. */
static void irq_kick(struct vcpu *t, struct vcpu *src, int detail)
{
	enum pause_reason reason = pause_thread_reason();

	if (reason == PAUSE_REASON_INPUT)
		vcpu_kick_from(t, reason, WAKE_SRC_SERIAL, (uint32_t)detail);
	else if (src)
		vcpu_kick_from(t, reason, WAKE_SRC_IPI, src->id);
	else
		vcpu_kick_from(t, reason, WAKE_SRC_DEVICE, (uint32_t)detail);
}

/* Caller holds t->lock. */
static void irq_post(struct vcpu *t, struct vcpu *src, const struct irq_msg *m)
{
	switch (m->mode) {
	case APIC_DM_FIXED:
	case APIC_DM_LOWEST:
		lapic_set_irr(&t->lapic, m->vector, m->trigger_level);
		break;
	case APIC_DM_NMI:
		/* One in service (blocked by the CPU) and one latched: a
		 * second NMI before the first is taken is not merged. */
		if (t->nmi_pending < 2)
			t->nmi_pending++;
		break;
	case APIC_DM_INIT:
		t->init_pending = true;
		t->sipi_pending = false;
		break;
	case APIC_DM_STARTUP:
		/* Accepted while waiting, or when an INIT is not yet seen. */
		if (t->state != VCPU_WAIT_SIPI && !t->init_pending)
			return;
		t->sipi_pending = true;
		t->sipi_vector = m->vector;
		break;
	default:
		return; /* SMI, ExtINT: not supported */
	}
	if (m->mode == APIC_DM_INIT || m->mode == APIC_DM_STARTUP)
		vcpu_kick_from(t, pause_thread_reason(), WAKE_SRC_OTHER, 0);
	else
		irq_kick(t, src, m->vector);
}

/*
 * A destination is matched in the target's mode. An IOAPIC message has
 * 8 bits of destination: to a local APIC in x2APIC mode 0xff is the
 * broadcast, any other value an x2APIC ID or, in logical mode, cluster 0
 * and its member bits (the IOAPIC routes to x2APIC IDs below 256 only).
 * Caller holds t->lock.
 */
static bool irq_targets(const struct irq_msg *m, struct vcpu *src,
			struct vcpu *t)
{
	uint32_t dest = m->dest;
	bool x2 = m->x2apic;

	switch (m->shorthand) {
	case APIC_SHORTHAND_SELF: return t == src;
	case APIC_SHORTHAND_ALL: return true;
	case APIC_SHORTHAND_ALL_BUT_SELF: return t != src;
	default:
		if (!x2 && lapic_x2apic(&t->lapic)) {
			dest &= APIC_XAPIC_ID_MASK;
			if (!src && dest == APIC_BROADCAST_XAPIC)
				dest = APIC_BROADCAST_X2APIC;
			x2 = true;
		}
		return lapic_match(&t->lapic, dest, m->logical, x2);
	}
}

/* Any thread, holding no vCPU lock. @src is NULL for the IOAPIC. */
void irq_send(struct vm *vm, struct vcpu *src, const struct irq_msg *m)
{
	for (unsigned int i = 0; i < vm->ncpus; i++) {
		struct vcpu *t = &vm->vcpus[i];
		bool hit;

		pthread_mutex_lock(&t->lock);
		hit = irq_targets(m, src, t);
		if (hit)
			irq_post(t, src, m);
		pthread_mutex_unlock(&t->lock);
		if (hit && m->mode == APIC_DM_LOWEST)
			return;
	}
}

void irq_isa_set(unsigned int line, bool level)
{
	if (line < 16)
		pic_set_irq(line, level);
	if (line == 0)
		ioapic_set_irq(2, level);
	else if (line != 2 && line < 24)
		ioapic_set_irq(line, level);
}

/* LVT LINT0 with delivery mode ExtINT and not masked, or the local APIC
 * hardware-disabled (INTR then goes straight to the CPU); the boot CPU's
 * only. Caller holds v->lock. */
static bool irq_extint_accepted(const struct vcpu *v)
{
	const struct lapic *l = &v->lapic;
	uint32_t lint0 = l->lvt[LAPIC_LVT_LINT0];

	if (!(l->base_msr & APIC_BASE_BSP))
		return false;
	if (!(l->base_msr & APIC_BASE_ENABLE))
		return true;
	return !(lint0 & APIC_LVT_MASKED) && APIC_DM_OF(lint0) == APIC_DM_EXTINT;
}

bool irq_extint_pending(const struct vcpu *v)
{
	return pic_intr() && irq_extint_accepted(v);
}

int irq_extint_ack(struct vcpu *v)
{
	(void)v;
	return pic_intack();
}

void irq_extint_kick(struct vm *vm)
{
	struct vcpu *bsp;

	if (!vm->vcpus)
		return;
	bsp = &vm->vcpus[0];
	pthread_mutex_lock(&bsp->lock);
	if (irq_extint_accepted(bsp))
		irq_kick(bsp, NULL, WAKE_DETAIL_EXTINT);
	pthread_mutex_unlock(&bsp->lock);
}

static irq_remap_fn irq_remap;

/* Setup time, before the vCPUs start. */
void irq_set_remap(irq_remap_fn fn)
{
	irq_remap = fn;
}

/* A compatibility-format MSI to @m; false when @addr is not an interrupt
 * message. */
bool irq_msi_decode(uint64_t addr, uint32_t data, struct irq_msg *m)
{
	if ((addr >> APIC_MSI_ADDR_SHIFT) !=
	    APIC_MSI_ADDR_BASE >> APIC_MSI_ADDR_SHIFT)
		return false;
	*m = (struct irq_msg){
		.dest = (uint32_t)(addr >> APIC_MSI_ADDR_DEST_SHIFT) &
			APIC_XAPIC_ID_MASK,
		.logical = addr & APIC_MSI_ADDR_DEST_LOGICAL,
		.vector = (uint8_t)data,
		.mode = (uint8_t)APIC_DM_OF(data),
		.trigger_level = data & APIC_TRIGGER_LEVEL,
	};
	return true;
}

void irq_msi(struct vm *vm, uint64_t addr, uint32_t data, uint16_t sid)
{
	struct irq_msg m;
	int r = irq_remap ? irq_remap(addr, data, sid, &m) : 1;

	if (r < 0 || (r > 0 && !irq_msi_decode(addr, data, &m)))
		return;
	irq_send(vm, NULL, &m);
}
