/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Interrupt delivery: an APIC message (from an ICR or the IOAPIC) to the
 * vCPUs it names. Delivery posts the event under the target's lock and
 * kicks it: a halted target wakes, a target in KVM_RUN exits.
 */
#include "machine/vm.h"

enum { DM_FIXED = 0, DM_LOWEST = 1, DM_NMI = 4, DM_INIT = 5, DM_SIPI = 6 };

/* Caller holds t->lock. */
static void irq_post(struct vcpu *t, const struct irq_msg *m)
{
	switch (m->mode) {
	case DM_FIXED:
	case DM_LOWEST:
		lapic_set_irr(&t->lapic, m->vector, m->trigger_level);
		break;
	case DM_NMI:
		t->nmi_pending = true;
		break;
	case DM_INIT:
		t->init_pending = true;
		t->sipi_pending = false;
		break;
	case DM_SIPI:
		/* Accepted while waiting, or when an INIT is not yet seen. */
		if (t->state != VCPU_WAIT_SIPI && !t->init_pending)
			return;
		t->sipi_pending = true;
		t->sipi_vector = m->vector;
		break;
	default:
		return; /* SMI, ExtINT: not supported */
	}
	vcpu_kick(t);
}

static bool irq_targets(const struct irq_msg *m, struct vcpu *src,
			struct vcpu *t)
{
	switch (m->shorthand) {
	case 1: return t == src;
	case 2: return true;
	case 3: return t != src;
	default: return lapic_match(&t->lapic, m->dest, m->logical, m->x2apic);
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
			irq_post(t, m);
		pthread_mutex_unlock(&t->lock);
		if (hit && m->mode == DM_LOWEST)
			return;
	}
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
	if ((addr >> 20) != 0xfee)
		return false;
	*m = (struct irq_msg){
		.dest = (uint32_t)(addr >> 12) & 0xff,
		.logical = addr & (1u << 2),
		.vector = (uint8_t)data,
		.mode = (uint8_t)((data >> 8) & 7),
		.trigger_level = data & (1u << 15),
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
