/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Unit tests of the sysidle library: races staged between a scan's
 * counter loads and its cmpxchg, by the fake clock's one-shot hook (the
 * "races" test case).
 */
#include <check.h>
#include <stdint.h>

#include "test_sysidle.h"

/* ---- races, staged between a scan's loads and its cmpxchg ------------- */

static void hook_exit(struct fake *f)
{
	ck_assert(!sysidle_exit(f->s, f->hook_cpu));
}

START_TEST(test_race_exit_beats_long_to_full)
{
	/* CPU 2 leaves idle after the scan's loads, before its cmpxchg. */
	struct sysidle *s = make(4, -1, 0, SYSIDLE_STRATEGY_SYSIDLE);

	all_enter(s);
	sysidle_scan(s);
	ck_assert_int_eq(sysidle_scan(s), SYSIDLE_LONG);
	fk.hook = hook_exit;
	fk.hook_cpu = 2;
	/* CPU 2 sees LONG and resets it; the scan's LONG->FULL cmpxchg fails
	 * and is not retried: the busy side wins. */
	ck_assert_int_eq(sysidle_scan(s), SYSIDLE_NOT);
	ck_assert_int_eq(fk.hook_calls, 1);
	ck_assert_int_eq(fk.tr[fk.ntr - 1].cpu, 2);
	ck_assert_int_eq(fk.tr[fk.ntr - 1].from, SYSIDLE_LONG);
	ck_assert(!sysidle_is_idle(s));
	sysidle_destroy(s);
}
END_TEST

START_TEST(test_race_exit_during_short_to_long)
{
	struct sysidle *s = make(4, -1, 0, SYSIDLE_STRATEGY_SYSIDLE);

	all_enter(s);
	ck_assert_int_eq(sysidle_scan(s), SYSIDLE_SHORT);
	fk.hook = hook_exit;
	fk.hook_cpu = 3;
	/* CPU 3 sees SHORT and writes nothing; the stale scan still moves to
	 * LONG. That is why LONG exists: FULL needs one more all-idle scan,
	 * and that one sees CPU 3 busy. */
	ck_assert_int_eq(sysidle_scan(s), SYSIDLE_LONG);
	ck_assert_int_eq(sysidle_scan(s), SYSIDLE_NOT);
	ck_assert(!sysidle_is_idle(s));
	sysidle_destroy(s);
}
END_TEST

START_TEST(test_race_stale_long_then_idle_again)
{
	struct sysidle *s = make(4, -1, 0, SYSIDLE_STRATEGY_SYSIDLE);

	all_enter(s);
	ck_assert_int_eq(sysidle_scan(s), SYSIDLE_SHORT);
	fk.hook = hook_exit;
	fk.hook_cpu = 0;
	ck_assert_int_eq(sysidle_scan(s), SYSIDLE_LONG); /* stale */
	/* CPU 0 goes idle again before the next scan: FULL is right now,
	 * because the scan that grants it sees every CPU idle. */
	sysidle_enter(s, 0);
	ck_assert_int_eq(sysidle_scan(s), SYSIDLE_FULL);
	ck_assert(sysidle_is_idle(s));
	sysidle_destroy(s);
}
END_TEST

TCase *sysidle_tcase_races(void)
{
	TCase *tc = tcase_create("races");

	tcase_add_test(tc, test_race_exit_beats_long_to_full);
	tcase_add_test(tc, test_race_exit_during_short_to_long);
	tcase_add_test(tc, test_race_stale_long_then_idle_again);
	return tc;
}
