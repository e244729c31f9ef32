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

struct vcpu;
struct vm;

struct pvtick {
	struct vcpu *vcpu;
	uint32_t hz;          /* 0: off */
	uint8_t vector;       /* 0: not set yet */
	uint64_t period_ns;
	uint64_t epoch_ns;
	uint64_t next;
	uint64_t missed;      /* read-and-clear through MSR_SYSIDLE_PVTICK_MISSED */
	uint64_t deadline_ns; /* the hk timer's deadline, 0: not armed (also
			       * resumed, until pvtick_arm_resumed) */
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
/*
 * The same on @v's own wake path, lock held, without arming the host timer:
 * arming one on a host CPU that has just left idle reprograms its clock
 * event device, a cost the guest would wait for before it runs (seen as
 * most of what a wake from full idle cost over a plain VMM's, on a host
 * that is itself a guest). Returns true when the tick was resumed: the
 * vCPU's thread then calls pvtick_arm_resumed, lock held, right after its
 * next KVM_RUN returns, at the latest at the EOI of the interrupt that
 * woke it (include/sysidle/guest_abi.h).
 */
bool pvtick_resume_unarmed(struct vcpu *v);
void pvtick_arm_resumed(struct vcpu *v);
bool pvtick_deliver_now(struct vcpu *v);

#endif
