/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The local APIC registers, shared by the xAPIC (MMIO) and x2APIC (MSR)
 * front ends: priorities, IRR/ISR/TMR, EOI, ICR. The timer registers are
 * in lapic_timer.c.
 */
#include <string.h>

#include "machine/devices/devices.h"
#include "machine/vm.h"

/* Work to do after the lock is dropped: it takes other vCPUs' locks. */
struct lapic_after {
	bool send;
	struct irq_msg msg;
	int eoi_level_vector; /* -1: none */
};

bool lapic_x2apic(const struct lapic *l)
{
	return l->base_msr & APIC_BASE_X2APIC;
}

static int vec_highest(const uint32_t *bits)
{
	for (int i = 7; i >= 0; i--)
		if (bits[i])
			return i * 32 + 31 - __builtin_clz(bits[i]);
	return -1;
}

static void vec_set(uint32_t *bits, int vec, bool on)
{
	if (on)
		bits[vec / 32] |= 1u << (vec % 32);
	else
		bits[vec / 32] &= ~(1u << (vec % 32));
}

static bool vec_test(const uint32_t *bits, int vec)
{
	return bits[vec / 32] & (1u << (vec % 32));
}

static uint32_t lapic_ppr(const struct lapic *l)
{
	int isrv = vec_highest(l->isr);
	uint32_t isr_class = isrv < 0 ? 0 : (uint32_t)isrv & 0xf0;

	return (l->tpr & 0xf0) >= isr_class ? l->tpr & 0xff : isr_class;
}

static uint32_t lapic_ldr(const struct lapic *l)
{
	if (lapic_x2apic(l))
		return ((l->id >> 4) << 16) | (1u << (l->id & 0xf));
	return l->ldr;
}

/* The vector to inject next, or -1. */
int lapic_pending_vector(const struct lapic *l)
{
	int irrv = vec_highest(l->irr);

	if (irrv < 0 || !(l->svr & APIC_SVR_ENABLE) ||
	    ((uint32_t)irrv & 0xf0) <= (lapic_ppr(l) & 0xf0))
		return -1;
	return irrv;
}

/* The vector was injected: it moves from IRR to ISR. */
void lapic_accept(struct lapic *l, int vector)
{
	vec_set(l->irr, vector, false);
	vec_set(l->isr, vector, true);
}

void lapic_set_irr(struct lapic *l, uint8_t vector, bool level)
{
	if (vector < 16) {
		l->esr |= 1u << 6; /* received illegal vector */
		return;
	}
	vec_set(l->irr, vector, true);
	vec_set(l->tmr, vector, level);
}

bool lapic_irr_only(const struct lapic *l, int vector)
{
	for (int i = 0; i < 8; i++)
		if (l->irr[i] != (i == vector / 32 ? 1u << (vector % 32) : 0))
			return false;
	return true;
}

bool lapic_match(const struct lapic *l, uint32_t dest, bool logical,
		 bool x2apic)
{
	uint32_t ldr = lapic_ldr(l);

	if (x2apic) {
		if (dest == 0xffffffffu)
			return true;
		if (!logical)
			return dest == l->id;
		return (dest >> 16) == (ldr >> 16) && (dest & ldr & 0xffff);
	}
	dest &= 0xff;
	if (dest == 0xff)
		return true;
	if (!logical)
		return dest == (l->id & 0xff);
	return dest & (ldr >> 24);
}

/* Resets to the power-on/INIT state; the APIC base MSR and mode are kept
 * across INIT. Caller holds the lock (or the vCPU is not running yet). */
void lapic_reset(struct vcpu *v)
{
	struct lapic *l = &v->lapic;

	lapic_timer_stop(v);
	l->id = v->id;
	if (!l->base_msr)
		l->base_msr = GUEST_LAPIC_BASE | APIC_BASE_ENABLE |
			      (v->id == 0 ? APIC_BASE_BSP : 0);
	l->tpr = 0;
	l->svr = 0xff;
	l->ldr = 0;
	l->dfr = 0xffffffffu;
	l->esr = 0;
	l->icr_low = l->icr_high = 0;
	for (int i = 0; i < LAPIC_NR_LVT; i++)
		l->lvt[i] = APIC_LVT_MASKED;
	memset(l->irr, 0, sizeof(l->irr));
	memset(l->isr, 0, sizeof(l->isr));
	memset(l->tmr, 0, sizeof(l->tmr));
	l->timer_icr = 0;
	l->timer_dcr = 0;
	l->rearm_last_ns = l->rearm_interval_ns = l->timer_tick_ns = 0;
	l->rearm_streak = 0;
	l->rearm_fired = false;
}

static void lapic_eoi(struct vcpu *v, struct lapic_after *after)
{
	struct lapic *l = &v->lapic;
	int vec = vec_highest(l->isr);

	if (vec < 0)
		return;
	vec_set(l->isr, vec, false);
	if (vec_test(l->tmr, vec))
		after->eoi_level_vector = vec;
	if (vec == (uint8_t)l->lvt[0])
		lapic_timer_eoi(v);
}

static void lapic_icr_send(struct lapic *l, uint32_t low, uint32_t dest,
			   struct lapic_after *after)
{
	after->send = true;
	after->msg = (struct irq_msg){
		.dest = dest,
		.vector = (uint8_t)low,
		.mode = (uint8_t)((low >> 8) & 7),
		.logical = low & (1u << 11),
		.level = low & APIC_ICR_LEVEL_ASSERT,
		.shorthand = (uint8_t)((low >> 18) & 3),
		.x2apic = lapic_x2apic(l),
	};
	/* INIT level de-assert (trigger level, assert clear) is a no-op. */
	if (after->msg.mode == 5 && (low & (1u << 15)) && !after->msg.level)
		after->send = false;
	if (after->msg.mode == 5 || after->msg.mode == 6)
		after->msg.level = true;
}

/* One register at xAPIC offset @reg. Caller holds v->lock. Returns -1
 * where an x2APIC access must #GP (write-only or reserved register). */
static int lapic_reg_read(struct vcpu *v, uint32_t reg, uint64_t *val)
{
	struct lapic *l = &v->lapic;
	bool x2 = lapic_x2apic(l);

	switch (reg) {
	case APIC_REG_ID: *val = x2 ? l->id : l->id << 24; break;
	case APIC_REG_VERSION:
		*val = APIC_VERSION | ((LAPIC_NR_LVT - 1) << 16);
		break;
	case APIC_REG_TPR: *val = l->tpr; break;
	case 0x090: *val = 0; break; /* APR */
	case 0x0a0: *val = lapic_ppr(l); break;
	case APIC_REG_LDR: *val = lapic_ldr(l); break;
	case 0x0e0: if (x2) return -1; *val = l->dfr; break;
	case APIC_REG_SVR: *val = l->svr; break;
	case APIC_REG_ESR: *val = l->esr; break;
	case APIC_REG_ICR_LOW:
		*val = x2 ? ((uint64_t)l->icr_high << 32) | l->icr_low
			  : l->icr_low;
		break;
	case APIC_REG_ICR_HIGH: if (x2) return -1; *val = l->icr_high; break;
	case APIC_REG_TIMER_ICR: *val = l->timer_icr; break;
	case APIC_REG_TIMER_CCR: *val = lapic_timer_read_ccr(v); break;
	case APIC_REG_TIMER_DCR: *val = l->timer_dcr; break;
	case APIC_REG_EOI:
	case APIC_REG_SELF_IPI:
		if (x2) return -1;
		*val = 0;
		break;
	default:
		if (reg >= APIC_REG_ISR && reg < APIC_REG_ISR + 0x80)
			*val = l->isr[(reg - APIC_REG_ISR) >> 4];
		else if (reg >= APIC_REG_TMR && reg < APIC_REG_TMR + 0x80)
			*val = l->tmr[(reg - APIC_REG_TMR) >> 4];
		else if (reg >= APIC_REG_IRR && reg < APIC_REG_IRR + 0x80)
			*val = l->irr[(reg - APIC_REG_IRR) >> 4];
		else if (reg >= APIC_REG_LVT_TIMER && reg <= APIC_REG_LVT_ERROR)
			*val = l->lvt[(reg - APIC_REG_LVT_TIMER) >> 4];
		else if (x2)
			return -1;
		else
			*val = 0;
	}
	return 0;
}

/* Caller holds v->lock; IPIs and EOI broadcasts are left in @after for
 * lapic_do_after() once it is dropped. Returns -1 for an x2APIC #GP. */
static int lapic_reg_write(struct vcpu *v, uint32_t reg, uint64_t val,
			   struct lapic_after *after)
{
	struct lapic *l = &v->lapic;
	bool x2 = lapic_x2apic(l);
	uint32_t v32 = (uint32_t)val;

	switch (reg) {
	case APIC_REG_ID: if (x2) return -1; l->id = v32 >> 24; break;
	case APIC_REG_TPR: l->tpr = v32 & 0xff; break;
	case APIC_REG_EOI: lapic_eoi(v, after); break;
	case APIC_REG_LDR: if (x2) return -1; l->ldr = v32 & 0xff000000u; break;
	case 0x0e0: if (x2) return -1; l->dfr = v32 | 0x0fffffffu; break;
	case APIC_REG_SVR:
		l->svr = v32 & 0x3ff;
		if (!(l->svr & APIC_SVR_ENABLE)) {
			for (int i = 0; i < LAPIC_NR_LVT; i++)
				l->lvt[i] |= APIC_LVT_MASKED;
			lapic_timer_write_lvt(v, l->lvt[0]);
		}
		break;
	case APIC_REG_ESR: l->esr = 0; break;
	case APIC_REG_ICR_LOW:
		l->icr_low = v32 & ~(1u << 12);
		if (x2)
			l->icr_high = (uint32_t)(val >> 32);
		lapic_icr_send(l, l->icr_low, x2 ? l->icr_high
						 : l->icr_high >> 24, after);
		break;
	case APIC_REG_ICR_HIGH:
		if (x2) return -1;
		l->icr_high = v32 & 0xff000000u;
		break;
	case APIC_REG_LVT_TIMER:
		if (!(l->svr & APIC_SVR_ENABLE))
			v32 |= APIC_LVT_MASKED;
		lapic_timer_write_lvt(v, v32);
		break;
	case APIC_REG_TIMER_ICR: lapic_timer_write_icr(v, v32); break;
	case APIC_REG_TIMER_DCR: lapic_timer_write_dcr(v, v32); break;
	case APIC_REG_SELF_IPI:
		if (!x2) return 0;
		lapic_icr_send(l, (v32 & 0xff) | APIC_ICR_DEST_SELF, 0, after);
		break;
	default:
		if (reg > APIC_REG_LVT_TIMER && reg <= APIC_REG_LVT_ERROR) {
			if (!(l->svr & APIC_SVR_ENABLE))
				v32 |= APIC_LVT_MASKED;
			l->lvt[(reg - APIC_REG_LVT_TIMER) >> 4] = v32 & 0x1a7ff;
		} else if (x2) {
			return -1; /* read-only or reserved */
		}
	}
	return 0;
}

/* Caller holds no vCPU lock: this takes the targets' and the IOAPIC's. */
static void lapic_do_after(struct vcpu *v, const struct lapic_after *after)
{
	if (after->send)
		irq_send(v->vm, v, &after->msg);
	if (after->eoi_level_vector >= 0)
		ioapic_eoi((uint8_t)after->eoi_level_vector);
}

static int lapic_write(struct vcpu *v, uint32_t reg, uint64_t val)
{
	struct lapic_after after = { .eoi_level_vector = -1 };
	int err;

	pthread_mutex_lock(&v->lock);
	err = lapic_reg_write(v, reg, val, &after);
	pthread_mutex_unlock(&v->lock);
	lapic_do_after(v, &after);
	return err;
}

static int lapic_read(struct vcpu *v, uint32_t reg, uint64_t *val)
{
	int err;

	pthread_mutex_lock(&v->lock);
	err = lapic_reg_read(v, reg, val);
	pthread_mutex_unlock(&v->lock);
	return err;
}

/* xAPIC MMIO page at GUEST_LAPIC_BASE; ignored in x2APIC mode. */
void lapic_mmio(struct vcpu *v, uint64_t off, uint8_t *data,
		unsigned int len, bool is_write, void *opaque)
{
	uint64_t val = 0;
	uint32_t v32;

	(void)opaque;
	if (is_write) {
		memcpy(&v32, data, len < 4 ? len : 4);
		if (!lapic_x2apic(&v->lapic))
			lapic_write(v, (uint32_t)off & 0xff0, v32);
		return;
	}
	if (!lapic_x2apic(&v->lapic))
		lapic_read(v, (uint32_t)off & 0xff0, &val);
	v32 = (uint32_t)val;
	memset(data, 0, len);
	memcpy(data, &v32, len < 4 ? len : 4);
}

/* IA32_APIC_BASE: enable and x2APIC bits; x2APIC -> xAPIC only through
 * disabled, as on hardware. Caller: @v's thread. */
static int lapic_base_write(struct vcpu *v, uint64_t val)
{
	struct lapic *l = &v->lapic;
	uint64_t keep = l->base_msr & APIC_BASE_BSP;

	if ((val & APIC_BASE_X2APIC) && !(val & APIC_BASE_ENABLE))
		return -1;
	if (lapic_x2apic(l) && (val & APIC_BASE_ENABLE) &&
	    !(val & APIC_BASE_X2APIC))
		return -1; /* x2APIC -> xAPIC only through disabled */
	pthread_mutex_lock(&v->lock);
	l->base_msr = (val & (0xfffff000ull | APIC_BASE_ENABLE |
			      APIC_BASE_X2APIC)) | keep;
	pthread_mutex_unlock(&v->lock);
	return 0;
}

/* APIC_BASE, TSC_DEADLINE and the x2APIC range; -1 means #GP. */
int lapic_msr_read(struct vcpu *v, uint32_t msr, uint64_t *val)
{
	struct lapic *l = &v->lapic;

	if (msr == MSR_IA32_APIC_BASE) {
		*val = l->base_msr;
		return 0;
	}
	if (msr == MSR_IA32_TSC_DEADLINE) {
		pthread_mutex_lock(&v->lock);
		*val = l->tsc_deadline;
		pthread_mutex_unlock(&v->lock);
		return 0;
	}
	if (!lapic_x2apic(l))
		return -1;
	return lapic_read(v, (msr - MSR_X2APIC_BASE) << 4, val);
}

int lapic_msr_write(struct vcpu *v, uint32_t msr, uint64_t val)
{
	if (msr == MSR_IA32_APIC_BASE)
		return lapic_base_write(v, val);
	if (msr == MSR_IA32_TSC_DEADLINE) {
		pthread_mutex_lock(&v->lock);
		lapic_timer_write_tsc_deadline(v, val);
		pthread_mutex_unlock(&v->lock);
		return 0;
	}
	if (!lapic_x2apic(&v->lapic))
		return -1;
	if (msr - MSR_X2APIC_BASE == (APIC_REG_ICR_HIGH >> 4))
		return -1;
	return lapic_write(v, (msr - MSR_X2APIC_BASE) << 4, val);
}

int lapic_init(struct vm *vm)
{
	(void)vm;
	return bus_register(BUS_MMIO, GUEST_LAPIC_BASE, 0x1000, lapic_mmio,
			    NULL);
}
