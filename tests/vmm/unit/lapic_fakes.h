// SPDX-License-Identifier: GPL-2.0-only
/* The fakes of lapic_fakes.c, which the LAPIC unit tests set and read. */
#ifndef TESTS_VMM_UNIT_LAPIC_FAKES_H
#define TESTS_VMM_UNIT_LAPIC_FAKES_H

#include "machine/irq.h"
#include "machine/vcpu.h"
#include "machine/vcpu_loop.h"
#include "machine/vm.h"

#define FAKE_RAM_SIZE 4096u

extern uint64_t fake_now;          /* now_ns() */
extern int sends;                  /* irq_send() calls ... */
extern struct irq_msg last_msg;    /* ... and the last one's message */
extern uint64_t kvm_apic_base;     /* vcpu_set_kvm_apic_base() */
extern hk_fire_fn timer_fire;      /* hk_timer_init()'s callback */
extern uint64_t timer_armed;       /* the deadline armed, 0: none */
extern int kick_src;               /* vcpu_kick_from()'s last source ... */
extern uint32_t kick_detail;       /* ... and detail */
extern struct vcpu *fake_vcpu_self; /* vcpu_current() */
extern uint8_t fake_ram[FAKE_RAM_SIZE]; /* guest_ptr() */

/* Every fake back to its start, @vm and @cfg zeroed and joined (one vCPU,
 * MAXPHYADDR 39), and a vCPU of @vm with ID @id, its LAPIC reset as at
 * power-on; free() it after the test. */
struct vcpu *fake_vcpu_new(struct vm *vm, struct machine_config *cfg,
			   uint32_t id);

#endif
