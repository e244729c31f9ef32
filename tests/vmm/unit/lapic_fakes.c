// SPDX-License-Identifier: GPL-2.0-only
/*
 * What the local APIC's files (lapic.c, lapic_timer.c, lapic_pv_eoi.c) and
 * its timer's host-timer backends (vcpu_timer.c) call
 * outside, faked for their unit tests: the interrupt bus, the IOAPIC,
 * KVM's APIC base, the housekeeping timers, the clock, guest memory (a
 * buffer of FAKE_RAM_SIZE bytes at guest physical 0).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/time.h"
#include "lapic_fakes.h"
#include "machine/irq.h"
#include "machine/vcpu.h"
#include "machine/vm.h"

uint8_t fake_ram[FAKE_RAM_SIZE];


uint64_t fake_now;
int sends;
struct irq_msg last_msg;
uint64_t kvm_apic_base;
hk_fire_fn timer_fire;
uint64_t timer_armed; /* 0: not armed */

uint64_t now_ns(void) { return fake_now; }

void irq_send(struct vm *vm, struct vcpu *src, const struct irq_msg *m)
{
	(void)vm;
	(void)src;
	sends++;
	last_msg = *m;
}

void ioapic_eoi(uint8_t vector) { (void)vector; }

int vcpu_set_kvm_apic_base(struct vcpu *v, uint64_t val)
{
	(void)v;
	kvm_apic_base = val;
	return 0;
}

void vcpu_kick_for(struct vcpu *v, int reason) { (void)v; (void)reason; }
int kick_src = -1;
uint32_t kick_detail;
void vcpu_kick_from(struct vcpu *v, int reason, int src, uint32_t detail)
{
	(void)v;
	(void)reason;
	kick_src = src;
	kick_detail = detail;
}

void hk_timer_init(struct hk_timer *t, hk_fire_fn fire)
{
	t->fire = fire;
	t->heap_idx = HK_NOT_QUEUED;
	timer_fire = fire;
}
/* Names only count the housekeeping thread's wake-ups: none here. */
void hk_timer_set_name(struct hk_timer *t, const char *name)
{
	(void)t;
	(void)name;
}
void hk_timer_arm(struct hk_timer *t, uint64_t d)
{
	t->heap_idx = 0;
	timer_armed = d;
}
void hk_timer_arm_quiet(struct hk_timer *t, uint64_t d)
{
	hk_timer_arm(t, d);
}
void hk_timer_cancel(struct hk_timer *t)
{
	t->heap_idx = HK_NOT_QUEUED;
	timer_armed = 0;
}
void hk_timer_cancel_quiet(struct hk_timer *t) { hk_timer_cancel(t); }

struct vcpu *fake_vcpu_self; /* vcpu_current(): the vCPU "this thread" runs */
struct vcpu *vcpu_current(void)
{
	return fake_vcpu_self;
}

struct vcpu *fake_vcpu_new(struct vm *vm, struct machine_config *cfg,
			   uint32_t id)
{
	struct vcpu *v = aligned_alloc(64, sizeof(*v));

	memset(cfg, 0, sizeof(*cfg));
	memset(vm, 0, sizeof(*vm));
	memset(fake_ram, 0, sizeof(fake_ram));
	vm->cfg = cfg;
	vm->phys_bits = 39;
	vm->ncpus = 1;
	memset(v, 0, sizeof(*v));
	pthread_mutex_init(&v->lock, NULL);
	pthread_cond_init(&v->wake, NULL);
	v->vm = vm;
	v->id = id;
	fake_vcpu_self = NULL;
	fake_now = 1000000;
	sends = 0;
	kick_src = -1;
	kvm_apic_base = 0;
	timer_armed = 0;
	vcpu_timer_init(v);
	lapic_reset(v);
	return v;
}

void *guest_ptr(struct vm *vm, uint64_t gpa, uint64_t len)
{
	(void)vm;
	if (gpa + len < gpa || gpa + len > FAKE_RAM_SIZE)
		return NULL;
	return fake_ram + gpa;
}
