/* SPDX-License-Identifier: GPL-2.0-only */
/* The local APIC of one vCPU, in userspace; guarded by its vCPU's lock. */
#ifndef VMM_MACHINE_LAPIC_H
#define VMM_MACHINE_LAPIC_H

#include <stdbool.h>
#include <stdint.h>

#include "base/housekeeping.h"

#define LAPIC_NR_LVT 6 /* timer, thermal, perf, LINT0, LINT1, error */

struct vcpu;

struct lapic {
	uint32_t id;
	uint64_t base_msr;
	uint32_t tpr, svr, ldr, dfr, esr;
	uint32_t icr_low, icr_high;
	uint32_t lvt[LAPIC_NR_LVT];
	uint32_t irr[8], isr[8], tmr[8];

	/* timer (lapic_timer.c) */
	uint32_t timer_icr, timer_dcr;
	uint64_t timer_start_ns;
	uint64_t timer_deadline_ns; /* 0: not armed */
	uint64_t timer_period_ns;   /* periodic mode, else 0 */
	uint64_t tsc_deadline;      /* MSR value, 0: not armed */
	uint64_t tsc0, tsc0_ns;     /* guest TSC tsc0 was read at tsc0_ns */
	uint32_t tsc_khz;
	struct hk_timer timer;
};

/* lapic.c: callers hold the vCPU's lock unless said otherwise. */
void lapic_reset(struct vcpu *v);
bool lapic_x2apic(const struct lapic *l);
int lapic_pending_vector(const struct lapic *l);
void lapic_accept(struct lapic *l, int vector);
void lapic_set_irr(struct lapic *l, uint8_t vector, bool level);
bool lapic_irr_only(const struct lapic *l, int vector); /* IRR == {vector} */
bool lapic_match(const struct lapic *l, uint32_t dest, bool logical,
		 bool x2apic);
/* Without the lock held (they take it): */
void lapic_mmio(struct vcpu *v, uint64_t off, uint8_t *data,
		unsigned int len, bool is_write, void *opaque);
int lapic_msr_read(struct vcpu *v, uint32_t msr, uint64_t *val);
int lapic_msr_write(struct vcpu *v, uint32_t msr, uint64_t val);

/* lapic_timer.c: callers hold the vCPU's lock. */
void lapic_timer_init(struct vcpu *v);
void lapic_timer_write_lvt(struct vcpu *v, uint32_t val);
void lapic_timer_write_icr(struct vcpu *v, uint32_t count);
void lapic_timer_write_dcr(struct vcpu *v, uint32_t val);
uint32_t lapic_timer_read_ccr(struct vcpu *v);
void lapic_timer_write_tsc_deadline(struct vcpu *v, uint64_t tsc);
void lapic_timer_stop(struct vcpu *v);

#endif
