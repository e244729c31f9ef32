/* SPDX-License-Identifier: GPL-2.0-only */
/* Between the vCPU loop's files (vcpu.c, vcpu_halt.c): @v's thread only. */
#ifndef VMM_MACHINE_VCPU_LOOP_H
#define VMM_MACHINE_VCPU_LOOP_H

#include "machine/vcpu.h"

/* vcpu.c, lock held: an event that ends HLT is pending. */
bool vcpu_has_wake_event(const struct vcpu *v);
/* vcpu.c, lock held, a pause pending: park until the VM resumes. */
void vcpu_park(struct vcpu *v);

/* vcpu_halt.c: HLT with nothing pending, until an interrupt can be
 * delivered (or NMI, INIT, stop); returns the next state. */
enum vcpu_state vcpu_wait_interrupt(struct vcpu *v);
/* vcpu_halt.c, lock not held, right before KVM_RUN: a LAPIC timer this
 * thread kept (due within its advance window) is served now. */
void vcpu_timer_entry(struct vcpu *v);

#endif
