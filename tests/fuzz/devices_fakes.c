/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The fakes fuzz-devices links in place of bus.c, msr.c, housekeeping.c,
 * the clock, kvm.c's guest_ptr and the vCPU loop (devices_fakes.h).
 */
#include <assert.h>
#include <string.h>

#include "base/error.h"
#include "base/housekeeping.h"
#include "base/time.h"
#include "machine/acpi.h"
#include "machine/bus.h"
#include "machine/devices/devices.h"
#include "machine/msr.h"
#include "machine/pause.h"
#include "machine/vcpu.h"
#include "machine/vm.h"

#include "devices_fakes.h"

#define FAKE_BUS_MAX 32
#define FAKE_MSR_MAX 4
#define FAKE_FIRES_MAX 64 /* per fake_timers_run: a re-arm loop ends */

struct fake_region {
	uint64_t base, len;
	bus_handler fn;
	void *opaque;
};

struct fake_msr_range {
	uint32_t first, last;
	msr_read_fn rd;
	msr_write_fn wr;
};

uint64_t fake_now;
unsigned int fake_kicks, fake_sleeps, fake_resumes;

static struct fake_region regions[2][FAKE_BUS_MAX];
static unsigned int nregions[2];
static unsigned int kept[2]; /* regions fake_reset keeps (fake_keep) */
static struct fake_msr_range msrs[FAKE_MSR_MAX];
static unsigned int nmsrs;
static struct hk_timer *timers[FAKE_MAX_TIMERS];
static unsigned int ntimers;
static void (*reset_hook)(struct vcpu *v);

/* Caller: between two inputs, no device handler running. */
void fake_reset(void)
{
	nregions[BUS_PIO] = kept[BUS_PIO];
	nregions[BUS_MMIO] = kept[BUS_MMIO];
	nmsrs = 0;
	ntimers = 0;
	reset_hook = NULL;
	fake_kicks = fake_sleeps = fake_resumes = 0;
}

/* Caller: once, after the devices whose *_init runs only once. */
void fake_keep(void)
{
	kept[BUS_PIO] = nregions[BUS_PIO];
	kept[BUS_MMIO] = nregions[BUS_MMIO];
}

/* Caller: a device's *_init; the table holds FAKE_BUS_MAX regions. */
int bus_register(enum bus_space space, uint64_t base, uint64_t len,
		 bus_handler fn, void *opaque)
{
	if (nregions[space] == FAKE_BUS_MAX)
		return vmm_fail(VMM_EXIT_INTERNAL, "bus table full");
	regions[space][nregions[space]++] =
		(struct fake_region){ base, len, fn, opaque };
	return 0;
}

/* Caller: @data holds @len bytes (1..8). */
bool fake_bus_access(struct vcpu *v, enum bus_space space, uint64_t addr,
		     uint8_t *data, unsigned int len, bool is_write)
{
	for (unsigned int i = 0; i < nregions[space]; i++) {
		struct fake_region *r = &regions[space][i];

		if (addr >= r->base && addr - r->base < r->len) {
			r->fn(v, addr - r->base, data, len, is_write, r->opaque);
			return true;
		}
	}
	if (!is_write)
		memset(data, 0xff, len);
	return false;
}

/* Caller: a device's *_init. */
int msr_register(uint32_t first, uint32_t last, msr_read_fn rd,
		 msr_write_fn wr)
{
	if (nmsrs == FAKE_MSR_MAX)
		return vmm_fail(VMM_EXIT_INTERNAL, "MSR table full");
	msrs[nmsrs++] = (struct fake_msr_range){ first, last, rd, wr };
	return 0;
}

/* Caller: @val is the value to write, or receives the value read. */
int fake_msr_access(struct vcpu *v, uint32_t index, uint64_t *val,
		    bool is_write)
{
	for (unsigned int i = 0; i < nmsrs; i++) {
		if (index < msrs[i].first || index > msrs[i].last)
			continue;
		if (is_write)
			return msrs[i].wr(v, index, *val) ? -1 : 0;
		return msrs[i].rd(v, index, val) ? -1 : 0;
	}
	return 1;
}

/* Caller: @t lives as long as the input (a device's static or a vCPU's). */
void hk_timer_init(struct hk_timer *t, hk_fire_fn fire)
{
	t->fire = fire;
	t->deadline_ns = 0;
	t->heap_idx = HK_NOT_QUEUED;
	for (unsigned int i = 0; i < ntimers; i++)
		if (timers[i] == t)
			return;
	if (ntimers < FAKE_MAX_TIMERS)
		timers[ntimers++] = t;
}
/* Names only count the housekeeping thread's wake-ups: none here. */
void hk_timer_set_name(struct hk_timer *t, const char *name)
{
	(void)t;
	(void)name;
}

/* Caller: @t went through hk_timer_init. */
void hk_timer_arm(struct hk_timer *t, uint64_t deadline_ns)
{
	t->deadline_ns = deadline_ns;
	t->heap_idx = 0;
}

/* The quiet variants and cancel: as housekeeping.h says (no host timer
 * here to move). Caller: @t went through hk_timer_init. */
void hk_timer_arm_quiet(struct hk_timer *t, uint64_t deadline_ns)
{
	hk_timer_arm(t, deadline_ns);
}

void hk_timer_cancel(struct hk_timer *t)
{
	t->heap_idx = HK_NOT_QUEUED;
}

void hk_timer_cancel_quiet(struct hk_timer *t)
{
	hk_timer_cancel(t);
}

/* No vCPU thread here: every timer goes to the (fake) housekeeping heap. */
struct vcpu *vcpu_current(void)
{
	return NULL;
}

/* No lock held, as on the housekeeping thread. */
static struct hk_timer *fake_timers_earliest(void)
{
	struct hk_timer *best = NULL;

	for (unsigned int i = 0; i < ntimers; i++) {
		struct hk_timer *t = timers[i];

		if (t->heap_idx != HK_NOT_QUEUED &&
		    (!best || t->deadline_ns < best->deadline_ns))
			best = t;
	}
	return best;
}

/* Caller: no timer is firing. */
uint64_t fake_timers_next(void)
{
	struct hk_timer *t = fake_timers_earliest();

	return t ? t->deadline_ns : UINT64_MAX;
}

/* Caller holds no device or vCPU lock (the fire callbacks take them). */
unsigned int fake_timers_run(void)
{
	unsigned int fired = 0;
	struct hk_timer *t;

	while (fired < FAKE_FIRES_MAX && (t = fake_timers_earliest()) &&
	       t->deadline_ns <= fake_now) {
		t->heap_idx = HK_NOT_QUEUED;
		t->fire(t, t->deadline_ns);
		fired++;
	}
	return fired;
}

/* The clock: only the input moves it (fake_now). Any caller. */
uint64_t now_ns(void)
{
	return fake_now;
}

/* A fixed date (2026-01-01) plus the fake clock. */
uint64_t mono_to_unix_ms(uint64_t mono_ns)
{
	return 1767225600000ull + mono_ns / 1000000u;
}

/* The same rule as kvm.c's: RAM at 0 only (ram_low == ram_size here). */
void *guest_ptr(struct vm *vm, uint64_t gpa, uint64_t len)
{
	if (gpa + len < gpa || gpa + len > vm->ram_low)
		return NULL;
	return vm->ram + gpa;
}

/* The vCPU side: a kick is counted, KVM's APIC base always taken, the
 * reset hook kept for the harness's INIT, S3 counted, output dropped.
 * Callers as vcpu.h, acpi.h and devices.h say. */
void vcpu_kick_for(struct vcpu *v, int reason)
{
	(void)v; (void)reason;
	fake_kicks++;
}

/* Every poster names a source there is, an IPI's sender in range. */
void vcpu_kick_from(struct vcpu *v, int reason, int src, uint32_t detail)
{
	assert(wake_source_name(src));
	assert(src != WAKE_SRC_IPI || detail < v->vm->ncpus);
	vcpu_kick_for(v, reason);
}

void vcpu_kick(struct vcpu *v)
{
	vcpu_kick_for(v, 0);
}

int vcpu_set_kvm_apic_base(struct vcpu *v, uint64_t val)
{
	(void)v; (void)val;
	return 0;
}

void vcpu_set_reset_hook(void (*reset)(struct vcpu *v))
{
	reset_hook = reset;
}

void (*fake_reset_hook(void))(struct vcpu *v)
{
	return reset_hook;
}

/* The reason this thread's kicks give: kept, as pause.c does. */
static __thread enum pause_reason thread_reason;

void pause_set_thread_reason(enum pause_reason reason)
{
	thread_reason = reason;
}

enum pause_reason pause_thread_reason(void)
{
	return thread_reason;
}

void sleep_enter(struct vm *vm)
{
	(void)vm;
	fake_sleeps++;
}

void sleep_resume(struct vm *vm)
{
	(void)vm;
	fake_resumes++;
}

void serial_output_put(uint8_t c)
{
	(void)c;
}
