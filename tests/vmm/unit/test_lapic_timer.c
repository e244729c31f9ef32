// SPDX-License-Identifier: GPL-2.0-only
/*
 * The LAPIC timer alone (lapic_timer.c), on ops of the test's own: a clock
 * that moves when the test says, a host timer that only records what was
 * armed, a kick that counts. What it shows: the timer reaches nothing but
 * its ops; an expiry only marks itself pending and kicks; the LAPIC's take
 * delivers, coalesces or keeps owed by the tick policy; a CATCHUP's host
 * timer is a quiet fallback while ticks are owed; holds, stale expiries,
 * masks, resets and TSC deadlines.
 */
#include <check.h>
#include <stdlib.h>

#include <sysidle/apic_regs.h>

#include "machine/devices/lapic_timer.h"

#define VEC 0xec
#define P 1000000ull /* the period of the periodic tests: 1 ms */

static uint64_t clock_ns;
static uint64_t armed;      /* the host timer's deadline, 0: none */
static bool armed_quiet;    /* ... armed (or cancelled) quietly */
static unsigned int arms, kicks;
static struct lapic_timer t;

static uint64_t fake_now(void) { return clock_ns; }

static void fake_arm(struct lapic_timer *tm, uint64_t deadline_ns, bool quiet)
{
	ck_assert_ptr_eq(tm, &t);
	armed = deadline_ns;
	armed_quiet = quiet;
	arms++;
}

static void fake_cancel(struct lapic_timer *tm, bool quiet)
{
	ck_assert_ptr_eq(tm, &t);
	armed = 0;
	armed_quiet = quiet;
}

static void fake_kick(struct lapic_timer *tm)
{
	ck_assert_ptr_eq(tm, &t);
	kicks++;
}

static const struct lapic_timer_ops ops = {
	.now = fake_now, .arm = fake_arm, .cancel = fake_cancel,
	.kick = fake_kick,
};

static void start(enum lapic_tick_policy policy, uint32_t mode)
{
	clock_ns = 5000000;
	armed = 0;
	arms = kicks = 0;
	lapic_timer_init(&t, &ops, policy, true);
	lapic_timer_reset(&t);
	lapic_timer_write_dcr(&t, APIC_TDCR_DIV_1); /* 1 ns a count */
	lapic_timer_write_lvt(&t, mode | VEC);
	if (mode != APIC_LVT_TIMER_TSCDEADLINE)
		lapic_timer_write_icr(&t, (uint32_t)P);
}

/* The host timer fires at its deadline, @late ns after it. */
static void fire(uint64_t late)
{
	uint64_t dl = armed;

	ck_assert_uint_ne(dl, 0);
	clock_ns = dl + late;
	lapic_timer_expired(&t, dl);
}

START_TEST(expiry_marks_pending_and_kicks)
{
	start(LAPIC_TICK_HONOUR, APIC_LVT_TIMER_PERIODIC);
	ck_assert_uint_eq(armed, clock_ns + P);
	ck_assert_int_eq(lapic_timer_pending_vector(&t), -1);
	fire(0);
	ck_assert_uint_eq(kicks, 1);
	ck_assert_int_eq(lapic_timer_pending_vector(&t), VEC);
	ck_assert_uint_eq(armed, clock_ns + P); /* the next tick */
	ck_assert(!armed_quiet);
	ck_assert(lapic_timer_take(&t, false)); /* into the IRR */
	ck_assert_int_eq(lapic_timer_pending_vector(&t), -1);
	ck_assert_uint_eq(t.ticks_coalesced, 0);
}
END_TEST

/* HONOUR and DISCARD: every expiry not yet taken, and one that finds its
 * vector requested, is one interrupt: the rest are counted coalesced. */
START_TEST(honour_coalesces)
{
	start(LAPIC_TICK_HONOUR, APIC_LVT_TIMER_PERIODIC);
	fire(0);
	fire(0);
	fire(2 * P + 10); /* 2 more periods passed unseen: 3 due here */
	ck_assert_uint_eq(lapic_timer_owed(&t), 5);
	ck_assert(lapic_timer_take(&t, false));
	ck_assert_uint_eq(t.ticks_coalesced, 4);
	fire(0);
	ck_assert(!lapic_timer_take(&t, true)); /* still in the IRR */
	ck_assert_uint_eq(t.ticks_coalesced, 5);
	ck_assert_uint_eq(lapic_timer_owed(&t), 0);
}
END_TEST

/* CATCHUP: late ticks are owed, one taken each time the IRR is free; the
 * host timer is a quiet fallback meanwhile, and the take that pays the
 * last one re-arms it for the next tick. */
START_TEST(catchup_delivers_every_tick)
{
	uint64_t next;

	start(LAPIC_TICK_CATCHUP, APIC_LVT_TIMER_PERIODIC);
	fire(3 * P + 10); /* 4 ticks due */
	next = clock_ns - 10 + P;
	ck_assert_uint_eq(lapic_timer_owed(&t), 4);
	ck_assert_uint_eq(armed, next + (LAPIC_CATCHUP_FACTOR - 1) * P);
	ck_assert(armed_quiet);
	ck_assert(lapic_timer_take(&t, false));
	ck_assert(!lapic_timer_take(&t, true)); /* the IRR is busy: kept */
	ck_assert_uint_eq(lapic_timer_owed(&t), 3);
	ck_assert(lapic_timer_take(&t, false));
	ck_assert(armed_quiet);
	ck_assert(lapic_timer_take(&t, false)); /* the last one owed ... */
	ck_assert_uint_eq(armed, next); /* ... its successor's timer back */
	ck_assert(!armed_quiet);
	ck_assert(lapic_timer_take(&t, false));
	ck_assert_uint_eq(t.ticks_caught_up, 3);
	ck_assert_uint_eq(t.ticks_coalesced, 0);
	ck_assert(!lapic_timer_take(&t, false)); /* nothing left */
	/* a tick that fell due while the fallback was armed is owed too */
	start(LAPIC_TICK_CATCHUP, APIC_LVT_TIMER_PERIODIC);
	fire(2 * P);
	clock_ns += P;
	ck_assert(lapic_timer_take(&t, false));
	ck_assert_uint_eq(lapic_timer_owed(&t), 3);
}
END_TEST

/* A hold turns the host timer off quietly; a release gives the ticks due
 * meanwhile by the policy, with one kick. */
START_TEST(hold_and_release)
{
	start(LAPIC_TICK_DISCARD, APIC_LVT_TIMER_PERIODIC);
	ck_assert(lapic_timer_hold(&t));
	ck_assert_uint_eq(armed, 0);
	ck_assert(armed_quiet);
	ck_assert_uint_eq(lapic_timer_deadline(&t), 0);
	ck_assert(!lapic_timer_hold(&t)); /* held already */
	clock_ns += 10 * P + 5;
	lapic_timer_release(&t);
	ck_assert_uint_eq(t.ticks_held, 10);
	ck_assert_uint_eq(kicks, 1);
	ck_assert(lapic_timer_take(&t, false));
	ck_assert_uint_eq(t.ticks_coalesced, 9);
	ck_assert_uint_eq(armed, clock_ns - 5 + P);

	start(LAPIC_TICK_CATCHUP, APIC_LVT_TIMER_PERIODIC);
	ck_assert(lapic_timer_hold(&t));
	clock_ns += 10 * P + 5;
	lapic_timer_release(&t);
	ck_assert_uint_eq(lapic_timer_owed(&t), 10);
	ck_assert(armed_quiet); /* the fallback */
	ck_assert(!lapic_timer_hold(&t)); /* late ticks are never held */
}
END_TEST

/* An expiry of a deadline the timer no longer has does nothing; nor one
 * while held. */
START_TEST(stale_expiry_ignored)
{
	uint64_t old;

	start(LAPIC_TICK_HONOUR, APIC_LVT_TIMER_ONESHOT);
	old = armed;
	lapic_timer_write_icr(&t, 2 * (uint32_t)P);
	clock_ns = old;
	lapic_timer_expired(&t, old);
	ck_assert_uint_eq(kicks, 0);
	ck_assert_int_eq(lapic_timer_pending_vector(&t), -1);
	start(LAPIC_TICK_DISCARD, APIC_LVT_TIMER_PERIODIC);
	old = armed;
	ck_assert(lapic_timer_hold(&t));
	clock_ns = old;
	lapic_timer_expired(&t, old);
	ck_assert_uint_eq(kicks, 0);
}
END_TEST

/* Masked: an expiry raises nothing; a pending one is dropped at the
 * take. A reprogrammed count keeps the expiry pending (on hardware, in
 * the IRR) but not the late ones owed; a reset keeps nothing. */
START_TEST(mask_reprogram_reset)
{
	start(LAPIC_TICK_HONOUR, APIC_LVT_TIMER_ONESHOT);
	lapic_timer_write_lvt(&t, APIC_LVT_MASKED | APIC_LVT_TIMER_ONESHOT |
			      VEC);
	fire(0);
	ck_assert_uint_eq(kicks, 0);
	ck_assert_int_eq(lapic_timer_pending_vector(&t), -1);

	start(LAPIC_TICK_CATCHUP, APIC_LVT_TIMER_PERIODIC);
	fire(3 * P);
	ck_assert_uint_eq(lapic_timer_owed(&t), 4);
	lapic_timer_write_icr(&t, (uint32_t)P);
	ck_assert_uint_eq(lapic_timer_owed(&t), 1);
	lapic_timer_write_lvt(&t, APIC_LVT_MASKED | APIC_LVT_TIMER_PERIODIC |
			      VEC);
	ck_assert(!lapic_timer_take(&t, false));
	ck_assert_uint_eq(lapic_timer_owed(&t), 0);

	start(LAPIC_TICK_HONOUR, APIC_LVT_TIMER_PERIODIC);
	fire(0);
	lapic_timer_reset(&t);
	ck_assert_uint_eq(lapic_timer_owed(&t), 0);
	ck_assert_uint_eq(armed, 0);
	ck_assert_uint_eq(lapic_timer_read_lvt(&t), APIC_LVT_MASKED);
	ck_assert_uint_eq(lapic_timer_read_icr(&t), 0);
}
END_TEST

/* TSC-deadline: the guest TSC to the host clock, at the TSC's rate; the
 * MSR reads 0 once it fired. */
START_TEST(tsc_deadline_converts)
{
	start(LAPIC_TICK_HONOUR, APIC_LVT_TIMER_TSCDEADLINE);
	lapic_timer_set_tsc(&t, 1000, clock_ns, 2000000); /* 2 GHz */
	lapic_timer_write_tsc_deadline(&t, 1000 + 2 * 500000);
	ck_assert_uint_eq(armed, clock_ns + 500000);
	ck_assert_uint_eq(lapic_timer_read_tsc_deadline(&t), 1000 + 1000000);
	fire(0);
	ck_assert_int_eq(lapic_timer_pending_vector(&t), VEC);
	ck_assert_uint_eq(lapic_timer_read_tsc_deadline(&t), 0);
	lapic_timer_write_tsc_deadline(&t, 1); /* in the past: at once */
	ck_assert_uint_eq(armed, clock_ns - 500000);
}
END_TEST

static Suite *lapic_timer_suite(void)
{
	Suite *s = suite_create("lapic_timer");
	TCase *tc = tcase_create("timer");

	tcase_add_test(tc, expiry_marks_pending_and_kicks);
	tcase_add_test(tc, honour_coalesces);
	tcase_add_test(tc, catchup_delivers_every_tick);
	tcase_add_test(tc, hold_and_release);
	tcase_add_test(tc, stale_expiry_ignored);
	tcase_add_test(tc, mask_reprogram_reset);
	tcase_add_test(tc, tsc_deadline_converts);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(lapic_timer_suite());
	int failed;

	srunner_run_all(sr, CK_ENV);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
