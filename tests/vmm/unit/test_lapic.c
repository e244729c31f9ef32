// SPDX-License-Identifier: GPL-2.0-only
/*
 * The local APIC's registers, driven through its two front ends
 * (lapic_mmio, lapic_msr_read/write) on one vCPU without KVM: IA32_APIC_BASE
 * transitions, the x2APIC MSR access rules, the ID and LDR, the TPR, the
 * timer's mode switches and host timers (vcpu_timer.c: the housekeeping
 * thread's or the vCPU's own). What they call outside (the interrupt bus,
 * the IOAPIC, KVM's APIC base, the housekeeping timers, the clock) is
 * faked in lapic_fakes.c.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include <sysidle/guest_abi.h>

#include "machine/vcpu.h"
#include "machine/vm.h"

#include "lapic_fakes.h"

/* --- one vCPU --- */

#define ID 0x23u /* x2APIC cluster 2, logical bit 3 */
#define XAPIC_BASE (GUEST_LAPIC_BASE | APIC_BASE_ENABLE)
#define X2APIC_BASE (XAPIC_BASE | APIC_BASE_X2APIC)

static struct machine_config cfg;
static struct vm vm;
static struct vcpu *v;

static void setup(void)
{
	v = fake_vcpu_new(&vm, &cfg, ID);
}

static void teardown(void)
{
	free(v);
}

static uint32_t mmio_read(uint32_t reg)
{
	uint32_t val;

	lapic_mmio(v, reg, (uint8_t *)&val, 4, false, NULL);
	return val;
}

static void mmio_write(uint32_t reg, uint32_t val)
{
	lapic_mmio(v, reg, (uint8_t *)&val, 4, true, NULL);
}

/* The vector to inject next, the timer's pending expiry taken first (as
 * the vCPU's entry path does). */
static int pending(void)
{
	lapic_take_timer(&v->lapic);
	return lapic_pending_vector(&v->lapic);
}

static int base_write(uint64_t val)
{
	return lapic_msr_write(v, MSR_IA32_APIC_BASE, val);
}

static uint64_t base_read(void)
{
	uint64_t val = 0;

	ck_assert_int_eq(lapic_msr_read(v, MSR_IA32_APIC_BASE, &val), 0);
	return val;
}

static int x2_read(uint32_t reg, uint64_t *val)
{
	return lapic_msr_read(v, APIC_X2APIC_MSR(reg), val);
}

static int x2_write(uint32_t reg, uint64_t val)
{
	return lapic_msr_write(v, APIC_X2APIC_MSR(reg), val);
}

/* --- IA32_APIC_BASE --- */

START_TEST(base_legal_transitions)
{
	ck_assert_uint_eq(base_read(), XAPIC_BASE); /* not the BSP */
	ck_assert_int_eq(base_write(X2APIC_BASE), 0);
	ck_assert_uint_eq(kvm_apic_base, X2APIC_BASE);
	ck_assert_int_eq(base_write(GUEST_LAPIC_BASE), 0);
	ck_assert_uint_eq(kvm_apic_base, GUEST_LAPIC_BASE);
	ck_assert_int_eq(base_write(XAPIC_BASE), 0);
	ck_assert_uint_eq(base_read(), XAPIC_BASE);
}
END_TEST

START_TEST(base_illegal_transitions)
{
	ck_assert_int_eq(base_write(GUEST_LAPIC_BASE | APIC_BASE_X2APIC), -1);
	ck_assert_int_eq(base_write(X2APIC_BASE), 0);
	ck_assert_int_eq(base_write(XAPIC_BASE), -1); /* x2APIC -> xAPIC */
	ck_assert_int_eq(base_write(GUEST_LAPIC_BASE), 0);
	ck_assert_int_eq(base_write(X2APIC_BASE), -1); /* disabled -> x2 */
	ck_assert_uint_eq(base_read(), GUEST_LAPIC_BASE);
	ck_assert_uint_eq(kvm_apic_base, GUEST_LAPIC_BASE);
}
END_TEST

START_TEST(base_reserved_bits)
{
	ck_assert_int_eq(base_write(XAPIC_BASE | 1), -1);
	ck_assert_int_eq(base_write(XAPIC_BASE | (1u << 9)), -1);
	ck_assert_int_eq(base_write(XAPIC_BASE | (1ull << 39)), -1);
	ck_assert_int_eq(base_write(XAPIC_BASE | (1ull << 38)), 0);
	ck_assert_uint_eq(base_read(), XAPIC_BASE | (1ull << 38));
}
END_TEST

START_TEST(base_bsp_read_only)
{
	ck_assert_int_eq(base_write(XAPIC_BASE | APIC_BASE_BSP), 0);
	ck_assert_uint_eq(base_read() & APIC_BASE_BSP, 0);
}
END_TEST

START_TEST(base_no_x2apic_feature)
{
	cfg.cpu_features_off = CPU_F_X2APIC;
	ck_assert_int_eq(base_write(X2APIC_BASE), -1);
	ck_assert_uint_eq(base_read(), XAPIC_BASE);
}
END_TEST

START_TEST(mmio_follows_base_and_mode)
{
	ck_assert(lapic_mmio_claims(&v->lapic, GUEST_LAPIC_BASE + 0x30));
	ck_assert_int_eq(base_write(GUEST_LAPIC_BASE), 0);
	ck_assert(!lapic_mmio_claims(&v->lapic, GUEST_LAPIC_BASE + 0x30));
	ck_assert_int_eq(base_write(0xfed40000u | APIC_BASE_ENABLE), 0);
	ck_assert(!lapic_mmio_claims(&v->lapic, GUEST_LAPIC_BASE + 0x30));
	ck_assert(lapic_mmio_claims(&v->lapic, 0xfed40030u));
	ck_assert_int_eq(base_write(0xfed40000u | APIC_BASE_ENABLE |
				    APIC_BASE_X2APIC), 0);
	ck_assert(!lapic_mmio_claims(&v->lapic, 0xfed40030u));
}
END_TEST

/* --- ID, LDR, TPR --- */

START_TEST(id_resets_on_enable)
{
	uint64_t val = 0;

	ck_assert_uint_eq(mmio_read(APIC_REG_ID), ID << 24);
	mmio_write(APIC_REG_ID, 0x11u << 24);
	ck_assert_uint_eq(mmio_read(APIC_REG_ID), 0x11u << 24);
	ck_assert_int_eq(base_write(GUEST_LAPIC_BASE), 0);
	ck_assert_int_eq(base_write(XAPIC_BASE), 0);
	ck_assert_uint_eq(mmio_read(APIC_REG_ID), ID << 24);
	mmio_write(APIC_REG_ID, 0x11u << 24);
	ck_assert_int_eq(base_write(X2APIC_BASE), 0); /* x2APIC: initial */
	ck_assert_int_eq(x2_read(APIC_REG_ID, &val), 0);
	ck_assert_uint_eq(val, ID);
}
END_TEST

START_TEST(x2apic_id_and_ldr_read_only)
{
	uint64_t val = 0;

	ck_assert_int_eq(base_write(X2APIC_BASE), 0);
	ck_assert_int_eq(x2_write(APIC_REG_ID, 5), -1);
	ck_assert_int_eq(x2_read(APIC_REG_ID, &val), 0);
	ck_assert_uint_eq(val, ID);
	ck_assert_int_eq(x2_read(APIC_REG_LDR, &val), 0);
	ck_assert_uint_eq(val, (2u << 16) | (1u << 3));
	ck_assert_int_eq(x2_write(APIC_REG_LDR, 0), -1);
}
END_TEST

START_TEST(disable_drops_state_keeps_tpr)
{
	mmio_write(APIC_REG_SVR, APIC_SVR_ENABLE | 0xff);
	mmio_write(APIC_REG_TPR, 0x20);
	lapic_set_irr(&v->lapic, 0x80, false);
	ck_assert_int_eq(pending(), 0x80);
	ck_assert_int_eq(base_write(GUEST_LAPIC_BASE), 0);
	ck_assert_int_eq(pending(), -1);
	lapic_set_irr(&v->lapic, 0x90, false); /* disabled: not taken */
	ck_assert_int_eq(base_write(XAPIC_BASE), 0);
	ck_assert_int_eq(pending(), -1);
	ck_assert_uint_eq(mmio_read(APIC_REG_SVR), 0xff);
	ck_assert_uint_eq(mmio_read(APIC_REG_TPR), 0x20);
}
END_TEST

/* --- x2APIC MSR access rules --- */

START_TEST(x2apic_gp_rules)
{
	/* 0x040 and 0x3a0: reserved offsets */
	static const uint32_t no_read[] = { APIC_REG_APR, APIC_REG_EOI,
		APIC_REG_RRD, APIC_REG_DFR, APIC_REG_LVT_CMCI,
		APIC_REG_ICR_HIGH, APIC_REG_SELF_IPI, 0x040, 0x3a0 };
	static const uint32_t no_write[] = { APIC_REG_ID, APIC_REG_VERSION,
		APIC_REG_APR, APIC_REG_PPR, APIC_REG_LDR, APIC_REG_DFR,
		APIC_REG_ISR, APIC_REG_BANK(APIC_REG_ISR, 7), APIC_REG_TMR,
		APIC_REG_IRR, APIC_REG_BANK(APIC_REG_IRR, 7),
		APIC_REG_LVT_CMCI, APIC_REG_ICR_HIGH, APIC_REG_TIMER_CCR,
		0x3a0 };
	static const uint32_t high_gp[] = { APIC_REG_TPR, APIC_REG_EOI,
		APIC_REG_SVR, APIC_REG_ESR, APIC_REG_LVT_TIMER,
		APIC_REG_LVT_THERMAL, APIC_REG_LVT_PERF, APIC_REG_LVT_LINT0,
		APIC_REG_LVT_LINT1, APIC_REG_LVT_ERROR, APIC_REG_TIMER_ICR,
		APIC_REG_TIMER_DCR, APIC_REG_SELF_IPI };
	uint64_t val = 0;

	ck_assert_int_eq(x2_read(APIC_REG_VERSION, &val), -1); /* xAPIC mode */
	ck_assert_int_eq(base_write(X2APIC_BASE), 0);
	for (size_t i = 0; i < sizeof(no_read) / sizeof(no_read[0]); i++)
		ck_assert_msg(x2_read(no_read[i], &val) == -1, "read %#x",
			      no_read[i]);
	for (size_t i = 0; i < sizeof(no_write) / sizeof(no_write[0]); i++)
		ck_assert_msg(x2_write(no_write[i], 0) == -1, "write %#x",
			      no_write[i]);
	for (size_t i = 0; i < sizeof(high_gp) / sizeof(high_gp[0]); i++)
		ck_assert_msg(x2_write(high_gp[i], 1ull << 32) == -1,
			      "write %#x, bit 32", high_gp[i]);
	ck_assert_int_eq(x2_write(APIC_REG_EOI, 1), -1);
	ck_assert_int_eq(x2_write(APIC_REG_ESR, 1), -1);
	ck_assert_int_eq(x2_write(APIC_REG_EOI, 0), 0);
	ck_assert_int_eq(x2_write(APIC_REG_ESR, 0), 0);
	ck_assert_int_eq(x2_write(APIC_REG_TPR, 0x30), 0);
	ck_assert_int_eq(x2_read(APIC_REG_TPR, &val), 0);
	ck_assert_uint_eq(val, 0x30);
	ck_assert_int_eq(x2_read(APIC_REG_TIMER_CCR, &val), 0);
}
END_TEST

START_TEST(x2apic_self_ipi_and_icr)
{
	uint64_t val = 0;

	ck_assert_int_eq(base_write(X2APIC_BASE), 0);
	ck_assert_int_eq(x2_write(APIC_REG_SELF_IPI, 0x100), -1);
	ck_assert_int_eq(x2_write(APIC_REG_SELF_IPI, 0xff00), -1);
	ck_assert_int_eq(sends, 0);
	ck_assert_int_eq(x2_write(APIC_REG_SELF_IPI, 0x41), 0);
	ck_assert_int_eq(sends, 1);
	ck_assert_uint_eq(last_msg.vector, 0x41);
	ck_assert_uint_eq(last_msg.shorthand, APIC_SHORTHAND_SELF);
	ck_assert_int_eq(x2_write(APIC_REG_ICR_LOW, (7ull << 32) | 0x42), 0);
	ck_assert_int_eq(sends, 2);
	ck_assert_uint_eq(last_msg.dest, 7);
	ck_assert(last_msg.x2apic);
	ck_assert_int_eq(x2_read(APIC_REG_ICR_LOW, &val), 0);
	ck_assert_uint_eq(val, (7ull << 32) | 0x42);
}
END_TEST

/* --- TSC-deadline hidden --- */

START_TEST(tsc_deadline_hidden)
{
	uint64_t val = 0;

	cfg.cpu_features_off = CPU_F_TSC_DEADLINE;
	vcpu_timer_init(v); /* the timer takes the CPU's features at init */
	ck_assert_int_eq(lapic_msr_read(v, MSR_IA32_TSC_DEADLINE, &val), -1);
	ck_assert_int_eq(lapic_msr_write(v, MSR_IA32_TSC_DEADLINE, 1), -1);
	mmio_write(APIC_REG_SVR, APIC_SVR_ENABLE | 0xff);
	mmio_write(APIC_REG_LVT_TIMER, APIC_LVT_TIMER_TSCDEADLINE | 0xef);
	ck_assert_uint_eq(mmio_read(APIC_REG_LVT_TIMER), 0xef);
}
END_TEST

/* --- the timer's mode switches --- */

static void timer_setup(uint32_t mode, uint32_t count)
{
	mmio_write(APIC_REG_SVR, APIC_SVR_ENABLE | 0xff);
	mmio_write(APIC_REG_TIMER_DCR, APIC_TDCR_DIV_1); /* 1 ns a count */
	mmio_write(APIC_REG_LVT_TIMER, mode | 0xee);
	mmio_write(APIC_REG_TIMER_ICR, count);
}

START_TEST(oneshot_to_periodic_keeps_count)
{
	timer_setup(APIC_LVT_TIMER_ONESHOT, 1000000);
	fake_now += 600000;
	mmio_write(APIC_REG_LVT_TIMER, APIC_LVT_TIMER_PERIODIC | 0xee);
	ck_assert_uint_eq(mmio_read(APIC_REG_TIMER_ICR), 1000000);
	ck_assert_uint_eq(mmio_read(APIC_REG_TIMER_CCR), 400000);
	/* it reloads at 0 */
	fake_now += 400000;
	ck_assert_uint_eq(timer_armed, fake_now);
	timer_fire(&v->timer_hk, timer_armed);
	/* the kick names its source: the LAPIC timer, in periodic mode */
	ck_assert_int_eq(kick_src, WAKE_SRC_LAPIC_TIMER);
	ck_assert_uint_eq(kick_detail, 1);
	ck_assert_int_eq(pending(), 0xee);
	fake_now += 1000;
	ck_assert_uint_eq(mmio_read(APIC_REG_TIMER_CCR), 999000);
}
END_TEST

START_TEST(periodic_to_oneshot_keeps_count)
{
	timer_setup(APIC_LVT_TIMER_PERIODIC, 1000000);
	fake_now += 2300000; /* two periods late, 300 us into the third */
	mmio_write(APIC_REG_LVT_TIMER, APIC_LVT_TIMER_ONESHOT | 0xee);
	ck_assert_uint_eq(mmio_read(APIC_REG_TIMER_CCR), 700000);
	fake_now += 700000;
	timer_fire(&v->timer_hk, timer_armed);
	ck_assert_int_eq(pending(), 0xee);
	fake_now += 1000;
	ck_assert_uint_eq(mmio_read(APIC_REG_TIMER_CCR), 0); /* stopped */
}
END_TEST

START_TEST(expired_oneshot_stays_zero)
{
	timer_setup(APIC_LVT_TIMER_ONESHOT, 1000);
	fake_now += 2000;
	timer_fire(&v->timer_hk, timer_armed);
	mmio_write(APIC_REG_LVT_TIMER, APIC_LVT_TIMER_PERIODIC | 0xee);
	ck_assert_uint_eq(mmio_read(APIC_REG_TIMER_CCR), 0);
	ck_assert_uint_eq(mmio_read(APIC_REG_TIMER_ICR), 1000);
}
END_TEST

/* HLT: the timer leaves the housekeeping thread for the vCPU's own wait,
 * whose expiry raises it; the housekeeping thread's stale callback does
 * nothing meanwhile; a later deadline goes back at the wake. */
START_TEST(self_timer_served_in_hlt)
{
	uint64_t dl;

	timer_setup(APIC_LVT_TIMER_ONESHOT, 500000);
	dl = timer_armed;
	ck_assert_uint_eq(dl, fake_now + 500000);
	vcpu_timer_wait_begin(v);
	ck_assert_uint_eq(timer_armed, 0);
	ck_assert_uint_eq(vcpu_timer_wait_deadline(v), dl);
	fake_now = dl;
	timer_fire(&v->timer_hk, dl); /* popped before the hand-over */
	ck_assert_int_eq(pending(), -1);
	vcpu_timer_expire(v);
	ck_assert_int_eq(pending(), 0xee);
	ck_assert_uint_eq(v->stats.timer_self_fired, 1);
	ck_assert_uint_eq(vcpu_timer_wait_deadline(v), 0);
	vcpu_timer_wait_end(v, fake_now, 0);
	ck_assert(!v->timer_self);
	ck_assert_uint_eq(timer_armed, 0);
}
END_TEST

START_TEST(self_timer_back_to_housekeeping)
{
	uint64_t dl;

	timer_setup(APIC_LVT_TIMER_ONESHOT, 500000);
	dl = timer_armed;
	vcpu_timer_wait_begin(v);
	fake_now += 1000; /* woken by something else */
	vcpu_timer_wait_end(v, fake_now, 2000);
	ck_assert(!v->timer_self);
	ck_assert_uint_eq(timer_armed, dl);
	timer_fire(&v->timer_hk, dl);
	ck_assert_int_eq(pending(), 0xee);
}
END_TEST

/* A periodic tick re-armed by its own expiry in HLT stays with the wait;
 * another thread that moves the deadline (a hold released) wakes it. */
START_TEST(self_timer_periodic_and_moved)
{
	unsigned int seq;

	timer_setup(APIC_LVT_TIMER_PERIODIC, 100000);
	vcpu_timer_wait_begin(v);
	fake_now += 100000;
	vcpu_timer_expire(v);
	ck_assert_int_eq(pending(), 0xee);
	ck_assert_uint_eq(vcpu_timer_wait_deadline(v), fake_now + 100000);
	ck_assert_uint_eq(timer_armed, 0);
	ck_assert(lapic_timer_hold(&v->lapic.timer));
	ck_assert_uint_eq(vcpu_timer_wait_deadline(v), 0);
	seq = atomic_load(&v->wake_seq);
	fake_now += 50000;
	lapic_timer_release(&v->lapic.timer); /* not the vCPU's thread */
	ck_assert_uint_eq(atomic_load(&v->wake_seq), seq + 1);
	ck_assert_uint_eq(vcpu_timer_wait_deadline(v), fake_now + 50000);
}
END_TEST

/* Armed by the vCPU's own thread within its keep window: served before
 * its next KVM_RUN, never queued; outside it: queued. */
START_TEST(self_timer_near_deadline_kept)
{
	cfg.timers_on_housekeeping = false; /* --vcpu-timers self */
	fake_vcpu_self = v;
	timer_setup(APIC_LVT_TIMER_ONESHOT, 1);
	ck_assert(v->timer_self);
	ck_assert_uint_eq(timer_armed, 0);
	ck_assert_uint_eq(vcpu_timer_entry_due(v, fake_now, vcpu_timer_keep_ns(v)),
			  fake_now + 1);
	fake_now += 1;
	vcpu_timer_expire(v);
	ck_assert_int_eq(pending(), 0xee);
	ck_assert_uint_eq(vcpu_timer_entry_due(v, fake_now, vcpu_timer_keep_ns(v)), 0);
	ck_assert(!v->timer_self);
	mmio_write(APIC_REG_TIMER_ICR, 1000000);
	ck_assert(!v->timer_self);
	ck_assert_uint_eq(timer_armed, fake_now + 1000000);
	cfg.timers_on_housekeeping = true; /* --vcpu-timers housekeeping */
	mmio_write(APIC_REG_TIMER_ICR, 1);
	ck_assert(!v->timer_self);
	ck_assert_uint_eq(timer_armed, fake_now + 1);
}
END_TEST

/* An expiry not yet taken when the guest masks and stops the timer is in
 * the IRR already, as on hardware; it never comes back with a later mode
 * (a stale tick taken as a TSC deadline's, early). */
START_TEST(expiry_before_mask_stays_in_irr)
{
	timer_setup(APIC_LVT_TIMER_PERIODIC, 100000);
	fake_now += 100000;
	timer_fire(&v->timer_hk, timer_armed); /* marked pending, not taken */
	mmio_write(APIC_REG_LVT_TIMER, APIC_LVT_MASKED |
		   APIC_LVT_TIMER_PERIODIC | 0xee);
	mmio_write(APIC_REG_TIMER_ICR, 0);
	ck_assert_uint_eq(mmio_read(APIC_REG_IRR + 7 * APIC_REG_STRIDE),
			  1u << (0xee % 32));
	ck_assert_int_eq(pending(), 0xee);
	lapic_accept(&v->lapic, 0xee);
	lapic_eoi_write(v);
	mmio_write(APIC_REG_LVT_TIMER, APIC_LVT_TIMER_TSCDEADLINE | 0xee);
	ck_assert_int_eq(pending(), -1);
}
END_TEST

START_TEST(tsc_deadline_switch_clears)
{
	uint64_t val = 1;

	timer_setup(APIC_LVT_TIMER_ONESHOT, 1000000);
	mmio_write(APIC_REG_LVT_TIMER, APIC_LVT_TIMER_TSCDEADLINE | 0xee);
	ck_assert_uint_eq(mmio_read(APIC_REG_TIMER_ICR), 0);
	ck_assert_uint_eq(mmio_read(APIC_REG_TIMER_CCR), 0);
	ck_assert_uint_eq(timer_armed, 0);
	v->lapic.timer.tsc_khz = 1000000;
	ck_assert_int_eq(lapic_msr_write(v, MSR_IA32_TSC_DEADLINE, 5000), 0);
	ck_assert_int_eq(lapic_msr_read(v, MSR_IA32_TSC_DEADLINE, &val), 0);
	ck_assert_uint_eq(val, 5000);
	mmio_write(APIC_REG_LVT_TIMER, APIC_LVT_TIMER_ONESHOT | 0xee);
	ck_assert_int_eq(lapic_msr_read(v, MSR_IA32_TSC_DEADLINE, &val), 0);
	ck_assert_uint_eq(val, 0);
	ck_assert_uint_eq(timer_armed, 0);
}
END_TEST

static Suite *lapic_suite(void)
{
	Suite *s = suite_create("lapic");
	TCase *tc = tcase_create("registers");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, base_legal_transitions);
	tcase_add_test(tc, base_illegal_transitions);
	tcase_add_test(tc, base_reserved_bits);
	tcase_add_test(tc, base_bsp_read_only);
	tcase_add_test(tc, base_no_x2apic_feature);
	tcase_add_test(tc, mmio_follows_base_and_mode);
	tcase_add_test(tc, id_resets_on_enable);
	tcase_add_test(tc, x2apic_id_and_ldr_read_only);
	tcase_add_test(tc, disable_drops_state_keeps_tpr);
	tcase_add_test(tc, x2apic_gp_rules);
	tcase_add_test(tc, x2apic_self_ipi_and_icr);
	tcase_add_test(tc, tsc_deadline_hidden);
	tcase_add_test(tc, oneshot_to_periodic_keeps_count);
	tcase_add_test(tc, periodic_to_oneshot_keeps_count);
	tcase_add_test(tc, expired_oneshot_stays_zero);
	tcase_add_test(tc, tsc_deadline_switch_clears);
	tcase_add_test(tc, expiry_before_mask_stays_in_irr);
	tcase_add_test(tc, self_timer_served_in_hlt);
	tcase_add_test(tc, self_timer_back_to_housekeeping);
	tcase_add_test(tc, self_timer_periodic_and_moved);
	tcase_add_test(tc, self_timer_near_deadline_kept);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(lapic_suite());
	int failed;

	srunner_run_all(sr, CK_ENV);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
