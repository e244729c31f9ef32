// SPDX-License-Identifier: GPL-2.0-only
/*
 * KVM's PV EOI on the userspace local APIC (lapic_pv_eoi.c), on one vCPU
 * without KVM: the MSR's rules (the feature, alignment, RAM, read back),
 * when the flag is set as the vCPU enters the guest (one edge vector in
 * service and nothing requested; not for a level vector, a timer with
 * ticks owed, or when the idle layer wants the exit), what the exit after
 * does (the guest cleared it: the EOI; it did not: taken back), and INIT.
 * Guest memory, the clock and the rest: lapic_fakes.c.
 */
#include <check.h>
#include <stdlib.h>

#include <sysidle/guest_abi.h>

#include "lapic_fakes.h"
#include "machine/vcpu.h"
#include "machine/vm.h"

#define FLAG_GPA 0x100u
#define VEC 0x41
#define VEC_LOW 0x31

static struct machine_config cfg;
static struct vm vm;
static struct vcpu *v;

static void setup(void)
{
	v = fake_vcpu_new(&vm, &cfg, 0);
}

static void teardown(void)
{
	free(v);
}

static uint8_t flag(void)
{
	return fake_ram[FLAG_GPA];
}

/* The vCPU took @vec (edge unless @level): requested, then in service. */
static void take(uint8_t vec, bool level)
{
	lapic_set_irr(&v->lapic, vec, level);
	lapic_accept(&v->lapic, vec);
}

static void enable(void)
{
	ck_assert_int_eq(lapic_msr_write(v, MSR_KVM_PV_EOI,
					 FLAG_GPA | KVM_PV_EOI_ENABLE), 0);
}

START_TEST(msr_rules)
{
	uint64_t val = 1;

	ck_assert_int_eq(lapic_msr_read(v, MSR_KVM_PV_EOI, &val), 0);
	ck_assert_uint_eq(val, 0);
	/* 4-byte aligned, in RAM */
	ck_assert_int_eq(lapic_msr_write(v, MSR_KVM_PV_EOI, 0x102 | 1), -1);
	ck_assert_int_eq(lapic_msr_write(v, MSR_KVM_PV_EOI,
					 FAKE_RAM_SIZE | 1), -1);
	/* off: any aligned address, not looked at */
	ck_assert_int_eq(lapic_msr_write(v, MSR_KVM_PV_EOI, 1ull << 40), 0);
	enable();
	ck_assert_int_eq(lapic_msr_read(v, MSR_KVM_PV_EOI, &val), 0);
	ck_assert_uint_eq(val, FLAG_GPA | KVM_PV_EOI_ENABLE);
	/* --cpu -pv-eoi: #GP both ways */
	cfg.cpu_features_off = CPU_F_PV_EOI;
	ck_assert_int_eq(lapic_msr_read(v, MSR_KVM_PV_EOI, &val), -1);
	ck_assert_int_eq(lapic_msr_write(v, MSR_KVM_PV_EOI, 0), -1);
}
END_TEST

START_TEST(guest_eoi_done_at_exit)
{
	enable();
	take(VEC, false);
	lapic_pv_eoi_enter(v, false);
	ck_assert_uint_eq(flag(), KVM_PV_EOI_PENDING);
	/* the guest's EOI: the bit cleared, no write */
	fake_ram[FLAG_GPA] &= (uint8_t)~KVM_PV_EOI_PENDING;
	lapic_pv_eoi_exit(v);
	ck_assert_int_eq(lapic_isr_highest(&v->lapic), -1);
	ck_assert_uint_eq(v->stats.pv_eois, 1);
	/* nothing in service: the next entry sets nothing */
	lapic_pv_eoi_enter(v, false);
	ck_assert_uint_eq(flag(), 0);
}
END_TEST

START_TEST(flag_not_cleared_taken_back)
{
	enable();
	take(VEC, false);
	lapic_pv_eoi_enter(v, false);
	lapic_pv_eoi_exit(v); /* an exit before the guest's EOI */
	ck_assert_uint_eq(flag(), 0);
	ck_assert_int_eq(lapic_isr_highest(&v->lapic), VEC);
	ck_assert_uint_eq(v->stats.pv_eois, 0);
	/* the next entry sets it again: still the one in service */
	lapic_pv_eoi_enter(v, false);
	ck_assert_uint_eq(flag(), KVM_PV_EOI_PENDING);
}
END_TEST

START_TEST(nested_ends_innermost_first)
{
	enable();
	take(VEC_LOW, false);
	take(VEC, false); /* the higher one, taken inside the first */
	lapic_pv_eoi_enter(v, false);
	fake_ram[FLAG_GPA] = 0;
	lapic_pv_eoi_exit(v);
	ck_assert_int_eq(lapic_isr_highest(&v->lapic), VEC_LOW);
	lapic_pv_eoi_enter(v, false);
	ck_assert_uint_eq(flag(), KVM_PV_EOI_PENDING);
}
END_TEST

START_TEST(not_set_when_eoi_must_exit)
{
	enable();
	/* a vector requested behind the one in service */
	take(VEC, false);
	lapic_set_irr(&v->lapic, VEC_LOW, false);
	lapic_pv_eoi_enter(v, false);
	ck_assert_uint_eq(flag(), 0);
	lapic_pv_eoi_exit(v);
	ck_assert_int_eq(lapic_isr_highest(&v->lapic), VEC);
	lapic_accept(&v->lapic, VEC_LOW);
	lapic_eoi_write(v);
	lapic_eoi_write(v);
	ck_assert_int_eq(lapic_isr_highest(&v->lapic), -1);
	/* level-triggered: its EOI goes to the IOAPIC */
	take(VEC, true);
	lapic_pv_eoi_enter(v, false);
	ck_assert_uint_eq(flag(), 0);
	lapic_eoi_write(v);
	/* the idle layer wants the exit */
	take(VEC, false);
	lapic_pv_eoi_enter(v, true);
	ck_assert_uint_eq(flag(), 0);
	lapic_eoi_write(v);
	/* the LAPIC timer's vector with expiries still to take (CATCHUP: the
	 * next one goes in once this one is ended) */
	v->lapic.timer.lvtt = VEC;
	v->lapic.timer.pending = 2;
	take(VEC, false);
	lapic_pv_eoi_enter(v, false);
	ck_assert_uint_eq(flag(), 0);
	v->lapic.timer.pending = 0;
	lapic_pv_eoi_enter(v, false);
	ck_assert_uint_eq(flag(), KVM_PV_EOI_PENDING);
}
END_TEST

START_TEST(off_and_init)
{
	uint64_t val = 1;

	take(VEC, false);
	lapic_pv_eoi_enter(v, false); /* never enabled */
	ck_assert_uint_eq(flag(), 0);
	enable();
	ck_assert_int_eq(lapic_msr_write(v, MSR_KVM_PV_EOI, 0), 0);
	lapic_pv_eoi_enter(v, false);
	ck_assert_uint_eq(flag(), 0);
	enable();
	lapic_reset(v); /* INIT */
	ck_assert_int_eq(lapic_msr_read(v, MSR_KVM_PV_EOI, &val), 0);
	ck_assert_uint_eq(val, 0);
	take(VEC, false);
	lapic_pv_eoi_enter(v, false);
	ck_assert_uint_eq(flag(), 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("lapic_pv_eoi");
	TCase *tc = tcase_create("pv_eoi");
	SRunner *sr;
	int failed;

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, msr_rules);
	tcase_add_test(tc, guest_eoi_done_at_exit);
	tcase_add_test(tc, flag_not_cleared_taken_back);
	tcase_add_test(tc, nested_ends_innermost_first);
	tcase_add_test(tc, not_set_when_eoi_must_exit);
	tcase_add_test(tc, off_and_init);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_ENV);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
