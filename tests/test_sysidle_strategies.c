/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Unit tests of the sysidle library: the naive strategies (counter, scan)
 * and the names of states and strategies (the "naive" test case).
 */
#include <check.h>
#include <stdint.h>

#include "test_sysidle.h"

/* ---- the naive strategies --------------------------------------------- */

static void naive_round_trip(enum sysidle_strategy st)
{
	struct sysidle *s = make(6, 0, 0, st);

	for (unsigned int i = 1; i < 6; i++)
		sysidle_enter(s, i); /* timekeeper 0 stays busy */
	ck_assert(sysidle_is_idle(s));
	ck_assert_int_eq(sysidle_state(s), SYSIDLE_FULL_NOTED);
	ck_assert(sysidle_is_idle(s));
	ck_assert(!sysidle_exit(s, 0)); /* timekeeper: no effect */
	ck_assert_int_eq(sysidle_state(s), SYSIDLE_FULL_NOTED);
	ck_assert(sysidle_exit(s, 4)); /* first busy CPU wakes */
	ck_assert_int_eq(sysidle_state(s), SYSIDLE_NOT);
	ck_assert(!sysidle_is_idle(s));
	ck_assert_int_eq(sysidle_scan(s), SYSIDLE_NOT);
	sysidle_enter(s, 4);
	ck_assert(sysidle_poll(s));
	ck_assert(sysidle_force_exit(s));
	ck_assert_int_eq(sysidle_state(s), SYSIDLE_NOT);
	sysidle_destroy(s);
}

START_TEST(test_naive_counter)
{
	naive_round_trip(SYSIDLE_STRATEGY_COUNTER);
}
END_TEST

START_TEST(test_naive_scan)
{
	naive_round_trip(SYSIDLE_STRATEGY_SCAN);
}
END_TEST

START_TEST(test_names)
{
	ck_assert_str_eq(sysidle_state_name(SYSIDLE_NOT), "NOT");
	ck_assert_str_eq(sysidle_state_name(SYSIDLE_FULL_NOTED), "FULL_NOTED");
	ck_assert_str_eq(sysidle_state_name((enum sysidle_state)9), "?");
	ck_assert_int_eq(sysidle_strategy_parse("sysidle"),
			 SYSIDLE_STRATEGY_SYSIDLE);
	ck_assert_int_eq(sysidle_strategy_parse("counter"),
			 SYSIDLE_STRATEGY_COUNTER);
	ck_assert_int_eq(sysidle_strategy_parse("scan"), SYSIDLE_STRATEGY_SCAN);
	ck_assert_int_eq(sysidle_strategy_parse("Scan"), -1);
	ck_assert_str_eq(sysidle_strategy_name(SYSIDLE_STRATEGY_COUNTER),
			 "counter");
}
END_TEST

START_TEST(test_state_from_name)
{
	for (int i = 0; i < SYSIDLE_NR_STATES; i++)
		ck_assert_int_eq(sysidle_state_from_name(
				 sysidle_state_name((enum sysidle_state)i)), i);
	ck_assert_int_eq(sysidle_state_from_name("FULL_NOTED"),
			 SYSIDLE_FULL_NOTED);
	ck_assert_int_eq(sysidle_state_from_name("full_noted"), -1);
	ck_assert_int_eq(sysidle_state_from_name("FULL_NOTED "), -1);
	ck_assert_int_eq(sysidle_state_from_name(""), -1);
	ck_assert_int_eq(sysidle_state_from_name("?"), -1);
	ck_assert_int_eq(sysidle_state_from_name(NULL), -1);
}
END_TEST

TCase *sysidle_tcase_naive(void)
{
	TCase *tc = tcase_create("naive");

	tcase_add_test(tc, test_naive_counter);
	tcase_add_test(tc, test_naive_scan);
	tcase_add_test(tc, test_names);
	tcase_add_test(tc, test_state_from_name);
	return tc;
}
