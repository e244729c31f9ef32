/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The local APIC registers, shared by the xAPIC (MMIO) and x2APIC (MSR)
 * front ends: priorities, IRR/ISR/TMR, EOI, ICR. The timer is an object
 * of its own (lapic_timer.c): its registers' accesses are passed to it,
 * and its expiries are taken from it into the IRR (lapic_take_timer).
 */
#include <pthread.h>
#include <string.h>

#include <sysidle/guest_abi.h>

#include "machine/devices/devices.h"
#include "machine/irq.h"
#include "machine/vcpu.h"
#include "machine/vm.h"

#define APIC_BASE_ADDR_MASK (~(uint64_t)(APIC_PAGE_SIZE - 1))

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

static bool lapic_hw_enabled(const struct lapic *l)
{
	return l->base_msr & APIC_BASE_ENABLE;
}

/* The xAPIC page: only while the APIC is enabled in xAPIC mode, at its
 * IA32_APIC_BASE; otherwise the address is no APIC's. */
bool lapic_mmio_claims(const struct lapic *l, uint64_t gpa)
{
	return (l->base_msr & (APIC_BASE_ENABLE | APIC_BASE_X2APIC)) ==
		       APIC_BASE_ENABLE &&
	       (gpa & APIC_BASE_ADDR_MASK) ==
		       (l->base_msr & APIC_BASE_ADDR_MASK);
}

static int vec_highest(const uint32_t *bits)
{
	for (int i = APIC_VECTOR_BANKS - 1; i >= 0; i--)
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

/* @reg is one of the 8 registers of the vector array (ISR, TMR, IRR)
 * starting at @reg0. */
static bool reg_in_bank(uint32_t reg, uint32_t reg0)
{
	return reg >= reg0 && reg < APIC_REG_BANK(reg0, APIC_VECTOR_BANKS);
}

static uint32_t lapic_ppr(const struct lapic *l)
{
	int isrv = vec_highest(l->isr);
	uint32_t isr_class = isrv < 0 ? 0 : (uint32_t)isrv & APIC_PRIORITY_CLASS;

	return (l->tpr & APIC_PRIORITY_CLASS) >= isr_class ?
	       l->tpr & APIC_PRIORITY_MASK : isr_class;
}

static uint32_t lapic_ldr(const struct lapic *l)
{
	if (lapic_x2apic(l))
		return ((l->id >> 4) << APIC_LDR_X2APIC_CLUSTER_SHIFT) |
		       (1u << (l->id & 0xf));
	return l->ldr;
}

/* The vector to inject next, or -1. */
int lapic_pending_vector(const struct lapic *l)
{
	int irrv = vec_highest(l->irr);

	if (irrv < 0 || !(l->svr & APIC_SVR_ENABLE) || !lapic_hw_enabled(l) ||
	    ((uint32_t)irrv & APIC_PRIORITY_CLASS) <=
	    (lapic_ppr(l) & APIC_PRIORITY_CLASS))
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
	if (!lapic_hw_enabled(l))
		return; /* a disabled APIC takes no interrupts */
	if (vector < APIC_VECTOR_FIRST_VALID) {
		l->esr |= APIC_ESR_RECV_ILLEGAL_VECTOR;
		return;
	}
	vec_set(l->irr, vector, true);
	vec_set(l->tmr, vector, level);
}

void lapic_take_timer(struct lapic *l)
{
	int vec = lapic_timer_pending_vector(&l->timer);

	if (vec >= 0 && lapic_timer_take(&l->timer, vec_test(l->irr, vec)))
		lapic_set_irr(l, (uint8_t)vec, false);
}

bool lapic_irr_only(const struct lapic *l, int vector)
{
	for (int i = 0; i < APIC_VECTOR_BANKS; i++)
		if (l->irr[i] != (i == vector / 32 ? 1u << (vector % 32) : 0))
			return false;
	return true;
}

bool lapic_irr_empty(const struct lapic *l)
{
	return vec_highest(l->irr) < 0;
}

int lapic_isr_highest(const struct lapic *l)
{
	return vec_highest(l->isr);
}

bool lapic_eoi_has_work(const struct lapic *l, int vector)
{
	return vec_test(l->tmr, vector) ||
	       vector == lapic_timer_pending_vector(&l->timer);
}

bool lapic_match(const struct lapic *l, uint32_t dest, bool logical,
		 bool x2apic)
{
	uint32_t ldr = lapic_ldr(l);

	if (x2apic) {
		if (dest == APIC_BROADCAST_X2APIC)
			return true;
		if (!logical)
			return dest == l->id;
		return (dest >> APIC_LDR_X2APIC_CLUSTER_SHIFT) ==
			       (ldr >> APIC_LDR_X2APIC_CLUSTER_SHIFT) &&
		       (dest & ldr & APIC_LDR_X2APIC_MEMBERS);
	}
	dest &= APIC_XAPIC_ID_MASK;
	if (dest == APIC_BROADCAST_XAPIC)
		return true;
	if (!logical)
		return dest == (l->id & APIC_XAPIC_ID_MASK);
	return dest & (ldr >> APIC_ID_SHIFT);
}

/* Every register but the ID (and the TPR when @keep_tpr) to its
 * power-on value. Caller holds the lock. */
static void lapic_regs_reset(struct vcpu *v, bool keep_tpr)
{
	struct lapic *l = &v->lapic;

	lapic_timer_reset(&l->timer);
	if (!keep_tpr)
		l->tpr = 0;
	l->svr = APIC_SVR_VECTOR;
	l->ldr = 0;
	l->dfr = APIC_DFR_FLAT;
	l->esr = 0;
	l->icr_low = l->icr_high = 0;
	for (int i = 0; i < LAPIC_NR_LVT; i++)
		l->lvt[i] = APIC_LVT_MASKED;
	memset(l->irr, 0, sizeof(l->irr));
	memset(l->isr, 0, sizeof(l->isr));
	memset(l->tmr, 0, sizeof(l->tmr));
}

/* Power-on (the first call: the APIC base MSR is still 0) or INIT, which
 * keeps the APIC base MSR, the mode and the ID register. Caller holds the
 * lock (or the vCPU is not running yet). */
void lapic_reset(struct vcpu *v)
{
	struct lapic *l = &v->lapic;

	if (!l->base_msr) {
		l->base_msr = GUEST_LAPIC_BASE | APIC_BASE_ENABLE |
			      (v->id == 0 ? APIC_BASE_BSP : 0);
		l->id = v->id;
	}
	lapic_regs_reset(v, false);
	lapic_pv_eoi_reset(l);
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
}

static void lapic_icr_send(struct lapic *l, uint32_t low, uint32_t dest,
			   struct lapic_after *after)
{
	after->send = true;
	after->msg = (struct irq_msg){
		.dest = dest,
		.vector = (uint8_t)low,
		.mode = (uint8_t)APIC_DM_OF(low),
		.logical = low & APIC_DEST_LOGICAL,
		.level = low & APIC_ICR_LEVEL_ASSERT,
		.shorthand = (uint8_t)APIC_ICR_SHORTHAND_OF(low),
		.x2apic = lapic_x2apic(l),
	};
	/* INIT level de-assert (trigger level, assert clear) is a no-op. */
	if (after->msg.mode == APIC_DM_INIT && (low & APIC_TRIGGER_LEVEL) &&
	    !after->msg.level)
		after->send = false;
	if (after->msg.mode == APIC_DM_INIT ||
	    after->msg.mode == APIC_DM_STARTUP)
		after->msg.level = true;
}

/* One register at xAPIC offset @reg, through either front end (the x2APIC
 * one has checked the access against x2apic_access first); a register
 * that is not one reads as 0. Caller holds v->lock. */
static uint64_t lapic_reg_read(struct vcpu *v, uint32_t reg)
{
	struct lapic *l = &v->lapic;
	bool x2 = lapic_x2apic(l);

	lapic_take_timer(l); /* an expiry shows in the IRR, as on hardware */
	switch (reg) {
	case APIC_REG_ID: return x2 ? l->id : l->id << APIC_ID_SHIFT;
	case APIC_REG_VERSION:
		return APIC_VERSION |
		       ((LAPIC_NR_LVT - 1) << APIC_VERSION_MAX_LVT_SHIFT);
	case APIC_REG_TPR: return l->tpr;
	case APIC_REG_PPR: return lapic_ppr(l);
	case APIC_REG_LDR: return lapic_ldr(l);
	case APIC_REG_DFR: return l->dfr;
	case APIC_REG_SVR: return l->svr;
	case APIC_REG_ESR: return l->esr;
	case APIC_REG_ICR_LOW:
		return x2 ? ((uint64_t)l->icr_high << 32) | l->icr_low
			  : l->icr_low;
	case APIC_REG_ICR_HIGH: return l->icr_high;
	case APIC_REG_LVT_TIMER: return lapic_timer_read_lvt(&l->timer);
	case APIC_REG_TIMER_ICR: return lapic_timer_read_icr(&l->timer);
	case APIC_REG_TIMER_CCR: return lapic_timer_read_ccr(&l->timer);
	case APIC_REG_TIMER_DCR: return lapic_timer_read_dcr(&l->timer);
	default:
		if (reg_in_bank(reg, APIC_REG_ISR))
			return l->isr[(reg - APIC_REG_ISR) / APIC_REG_STRIDE];
		if (reg_in_bank(reg, APIC_REG_TMR))
			return l->tmr[(reg - APIC_REG_TMR) / APIC_REG_STRIDE];
		if (reg_in_bank(reg, APIC_REG_IRR))
			return l->irr[(reg - APIC_REG_IRR) / APIC_REG_STRIDE];
		if (reg >= APIC_REG_LVT_TIMER && reg <= APIC_REG_LVT_ERROR)
			return l->lvt[LAPIC_LVT_OF_REG(reg)];
		return 0; /* APR, RRD, EOI, SELF IPI, reserved */
	}
}

/* As lapic_reg_read; writes to read-only or reserved registers are
 * dropped. Caller holds v->lock; IPIs and EOI broadcasts are left in
 * @after for lapic_do_after() once it is dropped. */
static void lapic_reg_write(struct vcpu *v, uint32_t reg, uint64_t val,
			    struct lapic_after *after)
{
	struct lapic *l = &v->lapic;
	bool x2 = lapic_x2apic(l);
	uint32_t v32 = (uint32_t)val;

	/* An expiry before this write is in the IRR, as on hardware: a
	 * mask, a new mode or count does not take it back (nor bring a
	 * stale one back later). */
	lapic_take_timer(l);
	switch (reg) {
	case APIC_REG_ID: if (!x2) l->id = v32 >> APIC_ID_SHIFT; break;
	case APIC_REG_TPR: l->tpr = v32 & APIC_PRIORITY_MASK; break;
	case APIC_REG_EOI: lapic_eoi(v, after); break;
	case APIC_REG_LDR: if (!x2) l->ldr = v32 & APIC_LDR_XAPIC_MASK; break;
	case APIC_REG_DFR:
		if (!x2)
			l->dfr = v32 | APIC_DFR_RESERVED_ONES;
		break;
	case APIC_REG_SVR:
		l->svr = v32 & APIC_SVR_WRITABLE;
		if (!(l->svr & APIC_SVR_ENABLE)) {
			for (int i = 0; i < LAPIC_NR_LVT; i++)
				l->lvt[i] |= APIC_LVT_MASKED;
			lapic_timer_write_lvt(&l->timer, APIC_LVT_MASKED |
					      lapic_timer_read_lvt(&l->timer));
		}
		break;
	case APIC_REG_ESR: l->esr = 0; break;
	case APIC_REG_ICR_LOW:
		l->icr_low = v32 & ~APIC_SEND_PENDING;
		if (x2)
			l->icr_high = (uint32_t)(val >> 32);
		lapic_icr_send(l, l->icr_low,
			       x2 ? l->icr_high
				  : l->icr_high >> APIC_ICR_HIGH_DEST_SHIFT,
			       after);
		break;
	case APIC_REG_ICR_HIGH:
		if (!x2)
			l->icr_high = v32 & APIC_ICR_HIGH_DEST_MASK;
		break;
	case APIC_REG_LVT_TIMER:
		if (!(l->svr & APIC_SVR_ENABLE))
			v32 |= APIC_LVT_MASKED;
		lapic_timer_write_lvt(&l->timer, v32);
		break;
	case APIC_REG_TIMER_ICR: lapic_timer_write_icr(&l->timer, v32); break;
	case APIC_REG_TIMER_DCR: lapic_timer_write_dcr(&l->timer, v32); break;
	case APIC_REG_SELF_IPI:
		if (x2)
			lapic_icr_send(l, (v32 & APIC_VECTOR_MASK) |
					       APIC_ICR_DEST_SELF, 0, after);
		break;
	default:
		if (reg > APIC_REG_LVT_TIMER && reg <= APIC_REG_LVT_ERROR) {
			if (!(l->svr & APIC_SVR_ENABLE))
				v32 |= APIC_LVT_MASKED;
			l->lvt[LAPIC_LVT_OF_REG(reg)] = v32 & APIC_LVT_WRITABLE;
		}
	}
}

/* Caller holds no vCPU lock: this takes the targets' and the IOAPIC's. */
static void lapic_do_after(struct vcpu *v, const struct lapic_after *after)
{
	if (after->send)
		irq_send(v->vm, v, &after->msg);
	if (after->eoi_level_vector >= 0)
		ioapic_eoi((uint8_t)after->eoi_level_vector);
}

static void lapic_write(struct vcpu *v, uint32_t reg, uint64_t val)
{
	struct lapic_after after = { .eoi_level_vector = -1 };

	pthread_mutex_lock(&v->lock);
	lapic_reg_write(v, reg, val, &after);
	pthread_mutex_unlock(&v->lock);
	lapic_do_after(v, &after);
}

void lapic_eoi_write(struct vcpu *v)
{
	lapic_write(v, APIC_REG_EOI, 0);
}

static uint64_t lapic_read(struct vcpu *v, uint32_t reg)
{
	uint64_t val;

	pthread_mutex_lock(&v->lock);
	val = lapic_reg_read(v, reg);
	pthread_mutex_unlock(&v->lock);
	return val;
}

/* The xAPIC page of @v, offset @off, while lapic_mmio_claims() says it is
 * there. Caller: @v's thread, lock not held. */
void lapic_mmio(struct vcpu *v, uint64_t off, uint8_t *data,
		unsigned int len, bool is_write, void *opaque)
{
	uint32_t v32 = 0;

	(void)opaque;
	if (is_write) {
		memcpy(&v32, data, len < 4 ? len : 4);
		lapic_write(v, (uint32_t)off & APIC_REG_OFFSET_MASK, v32);
		return;
	}
	v32 = (uint32_t)lapic_read(v, (uint32_t)off & APIC_REG_OFFSET_MASK);
	memset(data, 0, len);
	memcpy(data, &v32, len < 4 ? len : 4);
}

/*
 * The x2APIC MSR of register @reg (its xAPIC offset, any multiple of
 * APIC_REG_STRIDE below APIC_PAGE_SIZE): may it be read, written, per the
 * SDM's x2APIC register table. Anything else (APR, RRD, DFR, the ICR's
 * high half, the CMCI LVT this APIC does not have, reserved MSRs) raises
 * #GP both ways.
 */
enum { X2APIC_RD = 1, X2APIC_WR = 2 };
static unsigned int x2apic_access(uint32_t reg)
{
	switch (reg) {
	case APIC_REG_ID:
	case APIC_REG_VERSION:
	case APIC_REG_PPR:
	case APIC_REG_LDR:
	case APIC_REG_TIMER_CCR:
		return X2APIC_RD;
	case APIC_REG_TPR:
	case APIC_REG_SVR:
	case APIC_REG_ESR:
	case APIC_REG_ICR_LOW: /* the whole ICR, 64 bits */
	case APIC_REG_TIMER_ICR:
	case APIC_REG_TIMER_DCR:
		return X2APIC_RD | X2APIC_WR;
	case APIC_REG_EOI:
	case APIC_REG_SELF_IPI:
		return X2APIC_WR;
	default:
		if (reg_in_bank(reg, APIC_REG_ISR) ||
		    reg_in_bank(reg, APIC_REG_TMR) ||
		    reg_in_bank(reg, APIC_REG_IRR))
			return X2APIC_RD;
		if (reg >= APIC_REG_LVT_TIMER && reg <= APIC_REG_LVT_ERROR)
			return X2APIC_RD | X2APIC_WR; /* the LVT but CMCI */
		return 0;
	}
}

/* Whether WRMSR @val to x2APIC register @reg (writable) must #GP: bits
 * 63:32 are reserved but in the ICR; EOI and ESR take 0 only; SELF IPI
 * takes a vector only. */
static bool x2apic_write_faults(uint32_t reg, uint64_t val)
{
	if (reg != APIC_REG_ICR_LOW && (val >> 32))
		return true;
	if (reg == APIC_REG_EOI || reg == APIC_REG_ESR)
		return val != 0;
	if (reg == APIC_REG_SELF_IPI)
		return val & ~(uint64_t)APIC_VECTOR_MASK;
	return false;
}

/* IA32_APIC_BASE bits a write must leave clear: bits 7:0 and 9, the base
 * above MAXPHYADDR, EXTD without x2APIC. */
static uint64_t lapic_base_reserved(const struct vcpu *v)
{
	uint64_t r = APIC_BASE_RESERVED | ~((1ull << v->vm->phys_bits) - 1);

	if (!vm_cpu_has(v->vm, CPU_F_X2APIC))
		r |= APIC_BASE_X2APIC;
	return r;
}

/*
 * IA32_APIC_BASE, as the SDM's x2APIC state diagram has it: disabled <->
 * xAPIC, xAPIC -> x2APIC, x2APIC -> disabled; #GP on EXTD without EN,
 * disabled -> x2APIC, x2APIC -> xAPIC and reserved bits. The BSP bit is
 * read-only. Disabling resets every register but the ID and the TPR (CR8
 * lives on); enabling, or entering x2APIC mode, sets the ID back to the
 * initial one. KVM gets the new value, for CPUID.1:EDX.APIC. Caller: @v's
 * thread, lock not held.
 */
static int lapic_base_write(struct vcpu *v, uint64_t val)
{
	struct lapic *l = &v->lapic;
	uint64_t old = l->base_msr;
	bool en = val & APIC_BASE_ENABLE, x2 = val & APIC_BASE_X2APIC;
	bool old_en = old & APIC_BASE_ENABLE, old_x2 = old & APIC_BASE_X2APIC;

	val = (val & ~(uint64_t)APIC_BASE_BSP) | (old & APIC_BASE_BSP);
	if ((val & lapic_base_reserved(v)) || (x2 && !en))
		return -1;
	if ((old_x2 && en && !x2) || (!old_en && x2))
		return -1;
	if (val == old)
		return 0;
	if (vcpu_set_kvm_apic_base(v, val))
		return -1;
	pthread_mutex_lock(&v->lock);
	if (old_en && !en)
		lapic_regs_reset(v, true);
	if ((!old_en && en) || (!old_x2 && x2))
		l->id = v->id;
	l->base_msr = val;
	pthread_mutex_unlock(&v->lock);
	return 0;
}

/* TSC_DEADLINE reads 0 outside TSC-deadline mode (lapic_timer.c). */
static int lapic_tsc_deadline_read(struct vcpu *v, uint64_t *val)
{
	if (!vm_cpu_has(v->vm, CPU_F_TSC_DEADLINE))
		return -1;
	pthread_mutex_lock(&v->lock);
	*val = lapic_timer_read_tsc_deadline(&v->lapic.timer);
	pthread_mutex_unlock(&v->lock);
	return 0;
}

/* APIC_BASE, TSC_DEADLINE and the x2APIC range; -1 means #GP. Caller:
 * @v's thread, lock not held. */
int lapic_msr_read(struct vcpu *v, uint32_t msr, uint64_t *val)
{
	uint32_t reg = APIC_X2APIC_REG(msr);

	if (msr == MSR_IA32_APIC_BASE) {
		*val = v->lapic.base_msr;
		return 0;
	}
	if (msr == MSR_IA32_TSC_DEADLINE)
		return lapic_tsc_deadline_read(v, val);
	if (msr == MSR_KVM_PV_EOI)
		return lapic_pv_eoi_msr_read(v, val);
	if (!lapic_x2apic(&v->lapic) || msr < MSR_X2APIC_BASE ||
	    msr > MSR_X2APIC_LAST || !(x2apic_access(reg) & X2APIC_RD))
		return -1;
	*val = lapic_read(v, reg);
	return 0;
}

int lapic_msr_write(struct vcpu *v, uint32_t msr, uint64_t val)
{
	uint32_t reg = APIC_X2APIC_REG(msr);

	if (msr == MSR_IA32_APIC_BASE)
		return lapic_base_write(v, val);
	if (msr == MSR_KVM_PV_EOI)
		return lapic_pv_eoi_msr_write(v, val);
	if (msr == MSR_IA32_TSC_DEADLINE) {
		if (!vm_cpu_has(v->vm, CPU_F_TSC_DEADLINE))
			return -1;
		pthread_mutex_lock(&v->lock);
		lapic_take_timer(&v->lapic); /* as lapic_reg_write */
		lapic_timer_write_tsc_deadline(&v->lapic.timer, val);
		pthread_mutex_unlock(&v->lock);
		return 0;
	}
	if (!lapic_x2apic(&v->lapic) || msr < MSR_X2APIC_BASE ||
	    msr > MSR_X2APIC_LAST || !(x2apic_access(reg) & X2APIC_WR) ||
	    x2apic_write_faults(reg, val))
		return -1;
	lapic_write(v, reg, val);
	return 0;
}

/* The xAPIC page is decoded per vCPU, where its IA32_APIC_BASE puts it
 * (lapic_mmio_claims, before the bus): nothing to register. */
int lapic_init(struct vm *vm)
{
	(void)vm;
	return 0;
}
