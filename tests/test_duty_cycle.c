/* SPDX-License-Identifier: GPL-2.0-only */
/* Unit tests of common/duty_cycle.c: the full-idle ratios over 1 min, 1 h
 * and 24 h, the longest busy stretch and the last leave, on synthetic
 * schedules with exact expected values. */
#include <check.h>
#include <stdlib.h>

#include "duty_cycle.h"

#define S DUTY_SEC_NS
#define M DUTY_MIN_NS
#define H (60 * M)
/* an arbitrary start: bucket edges are counted from it, not from 0 */
#define T0 (123456789ull * 1000)

static struct duty_cycle *dc;

static void setup(void)
{
	dc = malloc(sizeof(*dc));
	ck_assert_ptr_nonnull(dc);
	duty_cycle_init(dc, T0);
}

static void teardown(void)
{
	free(dc);
}

static void at(uint64_t t, bool idle)
{
	duty_cycle_set(dc, T0 + t, 1000000 + t / 1000000, idle);
}

static struct duty_report rd(uint64_t t)
{
	struct duty_report r;

	duty_cycle_read(dc, T0 + t, &r);
	return r;
}

static void win(const struct duty_report *r, int w, uint64_t span,
		uint64_t idle, unsigned int permille)
{
	ck_assert_uint_eq(r->w[w].span_ns, span);
	ck_assert_uint_eq(r->w[w].idle_ns, idle);
	ck_assert_uint_eq(r->w[w].permille, permille);
}

/* Younger than every window: each covers the time tracked. */
START_TEST(test_young)
{
	struct duty_report r;

	r = rd(0);
	for (int w = 0; w < DUTY_WINDOWS; w++)
		win(&r, w, 0, 0, 0);
	at(10 * S, true);
	r = rd(30 * S);
	for (int w = 0; w < DUTY_WINDOWS; w++)
		win(&r, w, 30 * S, 20 * S, 667);
	ck_assert_uint_eq(r.tracked_ns, 30 * S);
	ck_assert(r.idle);
	ck_assert_uint_eq(r.stretch_ns, 20 * S);
	ck_assert_uint_eq(r.idle_total_ns, 20 * S);
	ck_assert_uint_eq(r.idle_done_ns, 0);
	ck_assert_uint_eq(r.longest_busy_ns, 10 * S);
	ck_assert_uint_eq(r.longest_busy_24h_ns, 10 * S);
	ck_assert_uint_eq(r.left_unix_ms, 0);
	ck_assert_uint_eq(r.periods, 1);
	ck_assert_str_eq(duty_window_name(DUTY_24H), "24h");
	ck_assert_ptr_null(duty_window_name(DUTY_WINDOWS));
}
END_TEST

/* 3 s busy, 7 s idle, for 2 h: 70 % in every window, exactly at a bucket
 * edge; half a second into the next busy stretch, the spans grow by it. */
START_TEST(test_schedule)
{
	struct duty_report r;

	for (uint64_t t = 0; t < 2 * H; t += 10 * S) {
		at(t, false);
		at(t + 3 * S, true);
	}
	at(2 * H, false);
	r = rd(2 * H);
	win(&r, DUTY_1M, 60 * S, 42 * S, 700);
	win(&r, DUTY_1H, H, 2520 * S, 700);
	win(&r, DUTY_24H, 2 * H, 5040 * S, 700);
	ck_assert_uint_eq(r.longest_busy_ns, 3 * S);
	ck_assert_uint_eq(r.idle_done_ns, 5040 * S);
	ck_assert_uint_eq(r.left_unix_ms, 1000000 + 2 * H / 1000000);
	ck_assert_uint_eq(r.periods, 720);
	r = rd(2 * H + S / 2);
	win(&r, DUTY_1M, 60 * S + S / 2, 42 * S, 694);
	win(&r, DUTY_1H, H + S / 2, 2520 * S, 700);
	/* idle at the read: the open interval counts, up to the instant */
	at(2 * H + S, true);
	r = rd(2 * H + 2 * S + S / 4);
	win(&r, DUTY_1M, 60 * S + S / 4, 43 * S + S / 4, 718);
	ck_assert_uint_eq(r.idle_total_ns, 5040 * S + S + S / 4);
}
END_TEST

/* The last minutes one by one: the schedule's 42 s of each whole minute,
 * the current minute partly elapsed with the open period in, none before
 * the start; a long idle period fills every minute it spans. */
START_TEST(test_minutes)
{
	struct duty_minute m[61];
	unsigned int n;

	for (uint64_t t = 0; t < 10 * M; t += 10 * S) {
		at(t, false);
		at(t + 3 * S, true);
	}
	n = duty_cycle_minutes(dc, T0 + 10 * M + 30 * S, m, 61);
	ck_assert_uint_eq(n, 11); /* minutes 0..9 and the current one */
	ck_assert_uint_eq(m[0].start_ns, T0);
	for (unsigned int i = 0; i < 10; i++) {
		ck_assert_uint_eq(m[i].span_ns, M);
		ck_assert_uint_eq(m[i].idle_ns, 42 * S);
	}
	/* idle from 9:53 on: the current minute's 30 s all idle */
	ck_assert_uint_eq(m[10].start_ns, T0 + 10 * M);
	ck_assert_uint_eq(m[10].span_ns, 30 * S);
	ck_assert_uint_eq(m[10].idle_ns, 30 * S);
	n = duty_cycle_minutes(dc, T0 + 3 * H, m, 61);
	ck_assert_uint_eq(n, 61);
	ck_assert_uint_eq(m[60].start_ns, T0 + 3 * H);
	ck_assert_uint_eq(m[60].span_ns, 0);
	ck_assert_uint_eq(m[0].idle_ns, M); /* the whole minute, open period */
}
END_TEST

/* A full-idle period longer than every window: 100 % while it lasts (no
 * event in between), then the buckets it spans after it ends. */
START_TEST(test_long_period)
{
	struct duty_report r;

	at(5 * S, true);
	r = rd(30 * H + 10 * S + S / 2);
	win(&r, DUTY_1M, 60 * S + S / 2, 60 * S + S / 2, 1000);
	win(&r, DUTY_1H, H + 10 * S + S / 2, H + 10 * S + S / 2, 1000);
	win(&r, DUTY_24H, 24 * H + 10 * S + S / 2, 24 * H + 10 * S + S / 2,
	    1000);
	ck_assert_uint_eq(r.longest_busy_24h_ns, 0); /* ended 30 h ago */
	ck_assert_uint_eq(r.longest_busy_ns, 5 * S);
	at(30 * H, false);
	at(30 * H + 30 * M, true);
	r = rd(31 * H);
	win(&r, DUTY_1M, 60 * S, 60 * S, 1000);
	win(&r, DUTY_1H, H, 30 * M, 500);
	win(&r, DUTY_24H, 24 * H, 24 * H - 30 * M, 979);
	ck_assert_uint_eq(r.longest_busy_ns, 30 * M);
	ck_assert_uint_eq(r.longest_busy_24h_ns, 30 * M);
	ck_assert_uint_eq(r.idle_done_ns, 30 * H - 5 * S);
	ck_assert_uint_eq(r.left_unix_ms, 1000000 + 30 * H / 1000000);
}
END_TEST

/* After 24 h the ring wraps: the first hour's idle time leaves the day's
 * window minute by minute; the busy stretches too. */
START_TEST(test_wrap)
{
	struct duty_report r;

	at(0, true);
	at(H, false);           /* idle 0 .. 1 h */
	at(23 * H, true);       /* busy 1 h .. 23 h: 22 h */
	at(24 * H, false);      /* idle 23 h .. 24 h */
	at(24 * H + 30 * M, true); /* busy 30 min */
	r = rd(24 * H + 30 * M);
	win(&r, DUTY_24H, 24 * H, 30 * M + H, 63);
	ck_assert_uint_eq(r.longest_busy_24h_ns, 22 * H);
	at(25 * H, false);      /* idle 24.5 h .. 25 h */
	r = rd(25 * H);
	win(&r, DUTY_24H, 24 * H, H + 30 * M, 63);
	win(&r, DUTY_1H, H, 30 * M, 500);
	/* the busy stretch of 22 h ended at 23 h: in the window until 47 h */
	r = rd(46 * H + 59 * M);
	ck_assert_uint_eq(r.longest_busy_24h_ns, 22 * H);
	r = rd(47 * H + M);
	ck_assert_uint_eq(r.longest_busy_24h_ns, 30 * M);
	/* minute 23 h + 0 left; busy since 25 h */
	win(&r, DUTY_24H, 24 * H, 89 * M, 62);
	ck_assert_uint_eq(r.longest_busy_ns, 22 * H);
	/* 3 days later, one change: every bucket of before is gone */
	at(72 * H + 30 * S, true);
	r = rd(72 * H + M);
	win(&r, DUTY_1M, 60 * S, 30 * S, 500);
	win(&r, DUTY_1H, H, 30 * S, 8);
	win(&r, DUTY_24H, 24 * H, 30 * S, 0);
	ck_assert_uint_eq(r.longest_busy_24h_ns, 47 * H + 30 * S);
	ck_assert_uint_eq(r.longest_busy_ns, 47 * H + 30 * S);
}
END_TEST

/* The same value again only moves the time on; a time that goes back is
 * the last one. */
START_TEST(test_repeats)
{
	struct duty_report r;

	at(10 * S, false);
	at(20 * S, true);
	at(30 * S, true);
	at(5 * S, false);      /* back in time: taken at 30 s */
	r = rd(40 * S);
	win(&r, DUTY_1M, 40 * S, 10 * S, 250);
	ck_assert_uint_eq(r.longest_busy_ns, 20 * S);
	ck_assert_uint_eq(r.periods, 1);
	ck_assert_uint_eq(r.stretch_ns, 10 * S);
	r = rd(0);             /* a read before the last change: at it */
	win(&r, DUTY_1M, 30 * S, 10 * S, 333);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("duty_cycle");
	TCase *tc = tcase_create("duty_cycle");
	SRunner *sr;
	int failed;

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_young);
	tcase_add_test(tc, test_schedule);
	tcase_add_test(tc, test_long_period);
	tcase_add_test(tc, test_wrap);
	tcase_add_test(tc, test_repeats);
	tcase_add_test(tc, test_minutes);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_ENV);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
