/* SPDX-License-Identifier: GPL-2.0-only */
/* The HLT wait's adaptive rules (vmm/machine/halt_rules.h): the halt-poll
 * window against KVM's rule (kvm_vcpu_halt with grow 2 from 10 us, shrink
 * 2), written out here from its description, step by step and over long
 * random runs; the timer advance's moves and bounds. */
#include <check.h>
#include <stdlib.h>

#include "machine/halt_rules.h"

/* KVM's rule, as kvm_main.c states it: an invalid wake-up shrinks; with a
 * maximum, a halt within the window keeps it, a long halt after an open
 * window shrinks it, a short halt the window missed grows it (clamped to
 * the maximum); without one, the window is 0. */
static uint64_t kvm_next(uint64_t cur, uint64_t halt_ns, uint64_t max,
			 bool valid)
{
	if (!valid) {
		cur /= 2;
		return cur < 10000 ? 0 : cur;
	}
	if (!max)
		return 0;
	if (halt_ns <= cur)
		return cur;
	if (cur && halt_ns > max) {
		cur /= 2;
		return cur < 10000 ? 0 : cur;
	}
	if (cur < max && halt_ns < max) {
		cur *= 2;
		if (cur < 10000)
			cur = 10000;
		return cur > max ? max : cur;
	}
	return cur;
}

START_TEST(test_poll_grows_and_shrinks)
{
	const uint64_t max = 200000;
	uint64_t w = 0;

	/* short halts the window misses: 10, 20, 40, 80 us */
	w = halt_poll_next(w, 50000, max, true);
	ck_assert_uint_eq(w, 10000);
	w = halt_poll_next(w, 50000, max, true);
	ck_assert_uint_eq(w, 20000);
	w = halt_poll_next(w, 50000, max, true);
	ck_assert_uint_eq(w, 40000);
	w = halt_poll_next(w, 50000, max, true);
	ck_assert_uint_eq(w, 80000);
	/* a wake-up within the window, or at its very end: as it is */
	ck_assert_uint_eq(halt_poll_next(w, 50000, max, true), 80000);
	ck_assert_uint_eq(halt_poll_next(w, 80000, max, true), 80000);
	/* a halt of exactly the maximum: neither long nor short */
	ck_assert_uint_eq(halt_poll_next(w, max, max, true), 80000);
	ck_assert_uint_eq(halt_poll_next(0, max, max, true), 0);
	/* growing stops at the maximum */
	ck_assert_uint_eq(halt_poll_next(160000, 190000, max, true), max);
	/* long halts: halved, to 0 below 10 us */
	w = halt_poll_next(w, 1000000000, max, true);
	ck_assert_uint_eq(w, 40000);
	w = halt_poll_next(w, 1000000000, max, true);
	w = halt_poll_next(w, 1000000000, max, true);
	ck_assert_uint_eq(w, 10000);
	ck_assert_uint_eq(halt_poll_next(w, 1000000000, max, true), 0);
	/* a long halt with no window: nothing to shrink, no growth */
	ck_assert_uint_eq(halt_poll_next(0, 1000000000, max, true), 0);
	/* a wake-up that was not an interrupt: halved */
	ck_assert_uint_eq(halt_poll_next(80000, 5000, max, false), 40000);
	/* polling off: never opens */
	ck_assert_uint_eq(halt_poll_next(0, 5000, 0, true), 0);
}
END_TEST

/* Halts spread over 1 us to 16 ms (a random point of a random power of
 * two), one wake-up in ten invalid: the
 * window follows KVM's at every step, from 0 and within 0..max. */
START_TEST(test_poll_matches_kvm)
{
	static const uint64_t maxes[] = { 10000, 50000, 200000, 1000000,
					  10000000 };
	unsigned int seed = 12345;

	for (unsigned int m = 0; m < sizeof(maxes) / sizeof(maxes[0]); m++) {
		uint64_t ours = 0, kvm = 0, max = maxes[m];

		for (int i = 0; i < 50000; i++) {
			uint64_t halt = 1000ull << (rand_r(&seed) % 14);
			bool valid = rand_r(&seed) % 10 != 0;

			halt += (uint64_t)rand_r(&seed) % halt;
			if (rand_r(&seed) % 8 == 0) /* the edges, exactly */
				halt = rand_r(&seed) % 2 ? max : ours;
			ours = halt_poll_next(ours, halt, max, valid);
			kvm = kvm_next(kvm, halt, max, valid);
			ck_assert_msg(ours == kvm, "max %llu step %d: halt %llu "
				      "valid %d: ours %llu, KVM's %llu",
				      (unsigned long long)max, i,
				      (unsigned long long)halt, valid,
				      (unsigned long long)ours,
				      (unsigned long long)kvm);
			ck_assert_uint_le(ours, max);
		}
	}
}
END_TEST

START_TEST(test_advance)
{
	const uint64_t max = 50000;

	/* late by 8 us: the lead grows by 1 us; early by 8 us: shrinks */
	ck_assert_uint_eq(timer_advance_next(0, 8000, max), 1000);
	ck_assert_uint_eq(timer_advance_next(5000, -8000, max), 4000);
	/* an error below 8 ns moves nothing */
	ck_assert_uint_eq(timer_advance_next(5000, 7, max), 5000);
	ck_assert_uint_eq(timer_advance_next(5000, -7, max), 5000);
	/* within 0..max */
	ck_assert_uint_eq(timer_advance_next(49000, 80000, max), max);
	ck_assert_uint_eq(timer_advance_next(1000, -80000, max), 0);
	ck_assert_uint_eq(timer_advance_next(0, 8000, 0), 0);
	/* wake-ups that keep coming 40 us late: the lead climbs to the
	 * error in steps of an eighth of what is left */
	uint64_t lead = 0;
	for (int i = 0; i < 100; i++)
		lead = timer_advance_next(lead, 40000 - (int64_t)lead, max);
	ck_assert_uint_ge(lead, 39990);
	ck_assert_uint_le(lead, 40000);
}
END_TEST

/* One lead per decade of the sleep, each learning from its own wakes. */
START_TEST(test_advance_classes)
{
	const uint64_t max = 100000;
	/* a host that wakes a thread 25 us late after 0.2 ms, 75 us late
	 * after 20 ms: a VM that alternates the two */
	const uint64_t sleep_ns[2] = { 200000, 20000000 };
	const int64_t late_ns[2] = { 25000, 75000 };
	uint64_t lead[TIMER_ADVANCE_CLASSES] = { 0 }, one = 0;

	ck_assert_uint_eq(timer_advance_class(0), 0);
	ck_assert_uint_eq(timer_advance_class(99999), 0);
	ck_assert_uint_eq(timer_advance_class(100000), 1);
	ck_assert_uint_eq(timer_advance_class(999999), 1);
	ck_assert_uint_eq(timer_advance_class(1000000), 2);
	ck_assert_uint_eq(timer_advance_class(9999999), 2);
	ck_assert_uint_eq(timer_advance_class(10000000), 3);
	ck_assert_uint_eq(timer_advance_class(UINT64_MAX), 3);
	for (int i = 0; i < 200; i++) {
		int k = i & 1;
		unsigned int c = timer_advance_class(sleep_ns[k]);

		/* woken late_ns after (deadline - lead): the error is
		 * late_ns - lead */
		lead[c] = timer_advance_next(lead[c], late_ns[k] -
					     (int64_t)lead[c], max);
		one = timer_advance_next(one, late_ns[k] - (int64_t)one, max);
	}
	/* each class reaches its own host's lateness ... */
	ck_assert_uint_ge(lead[1], 24990);
	ck_assert_uint_le(lead[1], 25000);
	ck_assert_uint_ge(lead[3], 74990);
	ck_assert_uint_le(lead[3], 75000);
	/* ... the classes with no wake keep none */
	ck_assert_uint_eq(lead[0], 0);
	ck_assert_uint_eq(lead[2], 0);
	/* where one lead for both swings between them: ~22 us too long for
	 * the short sleeps (spun), ~22 us too short for the long ones */
	ck_assert_uint_gt(one, 40000);
	ck_assert_uint_lt(one, 60000);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("halt_rules");
	TCase *tc = tcase_create("rules");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, test_poll_grows_and_shrinks);
	tcase_add_test(tc, test_poll_matches_kvm);
	tcase_add_test(tc, test_advance);
	tcase_add_test(tc, test_advance_classes);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_ENV);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
