/* SPDX-License-Identifier: GPL-2.0-only */
/* Between the vCPU loop's files (vcpu.c, vcpu_halt.c, vcpu_timer.c): @v's
 * thread only. */
#ifndef VMM_MACHINE_VCPU_LOOP_H
#define VMM_MACHINE_VCPU_LOOP_H

#include "machine/vcpu.h"

/* vcpu.c, lock held: an event that ends HLT is pending (the LAPIC timer's
 * pending expiry taken into the IRR first). */
bool vcpu_has_wake_event(struct vcpu *v);
/* vcpu.c, lock held, a pause pending: park until the VM resumes. */
void vcpu_park(struct vcpu *v);

/* vcpu_halt.c: HLT with nothing pending, until an interrupt can be
 * delivered (or NMI, INIT, stop); returns the next state. */
enum vcpu_state vcpu_wait_interrupt(struct vcpu *v);
/* vcpu_halt.c, lock not held, right before KVM_RUN: a LAPIC timer this
 * thread kept (due within its advance window) is served now. */
void vcpu_timer_entry(struct vcpu *v);

/* vcpu_timer.c: the LAPIC timer's host-timer backends. init: before the
 * vCPU's LAPIC is reset (its config set). The rest, lock held: the timer
 * served by this thread as it blocks in HLT (wait_begin); the deadline
 * its wait must end at (0: none); serve that deadline at or after it
 * (expire); back to the housekeeping thread as it leaves HLT (wait_end),
 * unless due within @keep_ns: then served before the next KVM_RUN, at
 * the deadline entry_due returns (0: none any more). */
void vcpu_timer_init(struct vcpu *v);
void vcpu_timer_wait_begin(struct vcpu *v);
uint64_t vcpu_timer_wait_deadline(const struct vcpu *v);
void vcpu_timer_expire(struct vcpu *v);
void vcpu_timer_wait_end(struct vcpu *v, uint64_t now, uint64_t keep_ns);
uint64_t vcpu_timer_entry_due(struct vcpu *v, uint64_t now, uint64_t keep_ns);

#endif
