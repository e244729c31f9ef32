/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The paravirtual tick of one vCPU (pvtick.c; ABI in guest_abi.h). Tick k
 * (k >= 1) is due at epoch_ns + k * period_ns; @next is the first tick not
 * yet accounted (delivered or counted missed). Guarded by the vCPU lock.
 */
#ifndef VMM_IDLE_PVTICK_H
#define VMM_IDLE_PVTICK_H

#include <stdbool.h>
#include <stdint.h>

#include "base/housekeeping.h"
#include "machine/vm.h"

struct pvtick {
	struct vcpu *vcpu;
	uint32_t hz;          /* 0: off */
	uint8_t vector;       /* 0: not set yet */
	uint64_t period_ns;
	uint64_t epoch_ns;
	uint64_t next;
	uint64_t missed;      /* read-and-clear through MSR_SYSIDLE_PVTICK_MISSED */
	uint64_t deadline_ns; /* the hk timer's deadline, 0: not armed */
	bool suppressed;      /* disarmed by --sysidle: catch up when resumed */
	uint64_t stop_missed; /* counted missed since the VM's tick stopped */
	struct hk_timer timer;
	uint64_t delivered;   /* stats: ticks posted to the IRR */
	uint64_t nsuppressed; /* stats: ticks counted missed instead */
} __attribute__((aligned(64)));

/* Main thread, after the vCPUs are created and before they start: one
 * pv tick per vCPU, its MSRs and its INIT reset registered. @suppress
 * (NULL: never) says, @v's lock held, whether a due tick of @v is counted
 * missed instead of delivered. */
int pvtick_init(struct vm *vm, bool (*suppress)(const struct vcpu *v));
void pvtick_fini(void);
struct pvtick *pvtick_of(const struct vcpu *v);

/* Callers hold the vCPU lock. The VM's tick stops (suspend) or @v runs
 * again (resume, catching up the periods that passed as missed). */
void pvtick_suspend(struct vcpu *v);
void pvtick_resume(struct vcpu *v);
bool pvtick_deliver_now(struct vcpu *v);

#endif
