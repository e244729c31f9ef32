/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Unit tests of the sysidle library: the delay before LONG and FULL on a
 * machine larger than small_cpus, dated by the fake clock (the "delay"
 * test case).
 */
#include <check.h>
#include <stdint.h>

#include "test_sysidle.h"

/* ---- the delay -------------------------------------------------------- */

START_TEST(test_delay_holds_back_long_and_full)
{
	/* 32 CPUs > 8: delay is ceil(32/16) = 2 ms. Entries are dated by the
	 * jiffies: the time of the latest scan. */
	struct sysidle *s = make(32, -1, SYSIDLE_DELAY_DEFAULT,
				 SYSIDLE_STRATEGY_SYSIDLE);

	ck_assert_uint_eq(sysidle_delay_ns(s), 2 * MS);
	fk.now = 10 * MS;
	ck_assert_int_eq(sysidle_scan(s), SYSIDLE_NOT); /* all busy */
	all_enter(s);                 /* dated 10 ms: after the 10 ms scan */
	fk.now = 11 * MS;
	ck_assert_int_eq(sysidle_scan(s), SYSIDLE_SHORT); /* at once */
	/* The entries happened before the 11 ms scan: the delay runs from
	 * there, the latest they can have happened. */
	fk.now = 13 * MS - 1;
	ck_assert_int_eq(sysidle_scan(s), SYSIDLE_SHORT);
	/* CPU 5 wakes and sleeps again, dated 13 ms - 1: SHORT is not
	 * written, but the newest entry moves, and the delay with it. */
	ck_assert(!sysidle_exit(s, 5));
	sysidle_enter(s, 5);
	fk.now = 13 * MS;
	ck_assert_int_eq(sysidle_scan(s), SYSIDLE_SHORT); /* 13 - 1 closed now */
	fk.now = 15 * MS - 1;
	ck_assert_int_eq(sysidle_scan(s), SYSIDLE_SHORT);
	fk.now = 15 * MS;
	ck_assert_int_eq(sysidle_scan(s), SYSIDLE_LONG);
	ck_assert(!sysidle_poll(s)); /* large machine: poll does not scan */
	ck_assert_int_eq(sysidle_state(s), SYSIDLE_LONG);
	/* LONG -> FULL: the same newest entry, already old enough. */
	ck_assert_int_eq(sysidle_scan(s), SYSIDLE_FULL);
	ck_assert(sysidle_poll(s));
	ck_assert_int_eq(fk.tr[fk.ntr - 1].at, 15 * MS);
	sysidle_destroy(s);
}
END_TEST

START_TEST(test_delay_whatever_the_scan_rate)
{
	/* Scans every 0.1 ms, a 2 ms delay: a CPU leaving and re-entering
	 * idle between two scans restarts the delay from the end of its own
	 * epoch, never from an older one. */
	struct sysidle *s = make(32, -1, SYSIDLE_DELAY_DEFAULT,
				 SYSIDLE_STRATEGY_SYSIDLE);
	uint64_t t, long_at = 0;

	all_enter(s);
	for (t = 1 * MS; t <= 30 * MS; t += MS / 10) {
		fk.now = t;
		if (t == 7 * MS) { /* a blip after the 6.9 ms scan */
			ck_assert(!sysidle_exit(s, 9));
			sysidle_enter(s, 9);
		}
		if (sysidle_scan(s) == SYSIDLE_LONG && t > 7 * MS && !long_at)
			long_at = t;
	}
	/* The blip (its exit took FULL back to NOT) is dated 6.9 ms and
	 * bounded by the 7 ms scan: LONG comes again exactly 2 ms after
	 * that, not 2 ms after 6.9 ms. */
	ck_assert_uint_eq(long_at, 9 * MS);
	sysidle_destroy(s);
}
END_TEST

START_TEST(test_hot_path_never_reads_the_clock)
{
	struct sysidle *s = make(32, -1, SYSIDLE_DELAY_DEFAULT,
				 SYSIDLE_STRATEGY_SYSIDLE);
	unsigned long reads = fk.clock_reads;

	for (int round = 0; round < 100; round++) {
		all_enter(s);
		for (unsigned int i = 0; i < 32; i++)
			ck_assert(!sysidle_exit(s, i));
	}
	ck_assert_uint_eq(fk.clock_reads, reads);
	sysidle_destroy(s);
}
END_TEST

START_TEST(test_stale_jiffies_never_cut_the_delay)
{
	/* The timekeeper sleeps in FULL_NOTED and does not scan: the jiffies
	 * go stale. An entry after the wake is dated by the old value, but
	 * its epoch ends only at the next scan, so the delay counts from
	 * there, not from the stale date. */
	struct sysidle *s = make(32, -1, SYSIDLE_DELAY_DEFAULT,
				 SYSIDLE_STRATEGY_SYSIDLE);

	all_enter(s);
	for (fk.now = 1 * MS; fk.now <= 10 * MS; fk.now += MS)
		sysidle_scan(s);
	ck_assert(sysidle_is_idle(s));
	fk.now = 100 * MS; /* long asleep */
	ck_assert(sysidle_exit(s, 3));
	sysidle_enter(s, 3); /* dated 10 ms */
	fk.now = 101 * MS;
	ck_assert_int_eq(sysidle_scan(s), SYSIDLE_SHORT);
	fk.now = 103 * MS - 1;
	ck_assert_int_eq(sysidle_scan(s), SYSIDLE_SHORT);
	fk.now = 103 * MS;
	ck_assert_int_eq(sysidle_scan(s), SYSIDLE_LONG);
	sysidle_destroy(s);
}
END_TEST

START_TEST(test_delay_on_a_1024_cpu_machine)
{
	struct sysidle *s = make(1024, 0, SYSIDLE_DELAY_DEFAULT,
				 SYSIDLE_STRATEGY_SYSIDLE);

	all_enter(s); /* before any scan */
	fk.now = 1 * MS;
	ck_assert_int_eq(sysidle_scan(s), SYSIDLE_SHORT);
	fk.now = 65 * MS - 1;
	ck_assert_int_eq(sysidle_scan(s), SYSIDLE_SHORT);
	fk.now = 65 * MS; /* 64 ms after the first scan closed the epoch */
	ck_assert_int_eq(sysidle_scan(s), SYSIDLE_LONG);
	ck_assert_int_eq(sysidle_scan(s), SYSIDLE_FULL);
	ck_assert(sysidle_is_idle(s));
	ck_assert(sysidle_exit(s, 1023));
	sysidle_destroy(s);
}
END_TEST

TCase *sysidle_tcase_delay(void)
{
	TCase *tc = tcase_create("delay");

	tcase_add_test(tc, test_delay_holds_back_long_and_full);
	tcase_add_test(tc, test_delay_on_a_1024_cpu_machine);
	tcase_add_test(tc, test_hot_path_never_reads_the_clock);
	tcase_add_test(tc, test_stale_jiffies_never_cut_the_delay);
	tcase_add_test(tc, test_delay_whatever_the_scan_rate);
	return tc;
}
