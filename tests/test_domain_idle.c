/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The libvirt bridge's per-domain state machine (tools/libvirt-bridge/domain_idle.c)
 * driven by a fake statistics source: vCPUs whose halt-exit counts and
 * blocking flags the test sets, sampled on a fake clock.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "../tools/libvirt-bridge/domain_idle.h"

#define MAXV 32

/* The fake source: what KVM's statistics would say, and when. */
struct fake {
	struct domain_idle *d;
	uint64_t t_ms;
	bool running;
	bool paused;
	unsigned int ncpus;
	struct vcpu_sample v[MAXV];
	struct domain_idle_report r;
	int rc;
};

static void fake_init(struct fake *f, unsigned int ncpus)
{
	memset(f, 0, sizeof(*f));
	f->d = domain_idle_new();
	ck_assert_ptr_nonnull(f->d);
	f->t_ms = 1000;
	f->running = true;
	f->ncpus = ncpus;
	for (unsigned int i = 0; i < MAXV; i++)
		f->v[i] = (struct vcpu_sample){ .has_halt_exits = true,
			.has_blocking = true, .halt_exits = 100 + i,
			.blocking = true };
}

/* Advance the clock by @dt_ms and scan; returns the state after. */
static enum sysidle_state step(struct fake *f, uint64_t dt_ms)
{
	struct domain_sample s = { .t_ns = (f->t_ms += dt_ms) * 1000000ull,
				   .running = f->running, .paused = f->paused,
				   .ncpus = f->ncpus,
				   .vcpus = f->v };

	f->rc = domain_idle_scan(f->d, &s, &f->r);
	ck_assert_int_eq(f->r.to, domain_idle_state(f->d));
	return f->r.to;
}

/* A small domain (<= 8 vCPUs), all idle: the library's poll scans inline,
 * so the first all-idle scan (the second sample: the first only sets the
 * baseline) goes NOT -> FULL_NOTED. */
START_TEST(small_all_idle)
{
	struct fake f;

	fake_init(&f, 2);
	ck_assert_int_eq(step(&f, 0), SYSIDLE_NOT);
	ck_assert_int_eq(f.rc, DOMAIN_IDLE_OK);
	ck_assert_uint_eq(f.r.idle_cpus, 0);
	ck_assert_ptr_nonnull(strstr(f.r.reason, "first sample"));
	ck_assert_int_eq(step(&f, 100), SYSIDLE_FULL_NOTED);
	ck_assert_int_eq(f.r.from, SYSIDLE_NOT);
	ck_assert_uint_eq(f.r.idle_cpus, 2);
	ck_assert_uint_eq(f.r.idle_scans, 1);
	ck_assert_str_eq(f.r.reason, "2 vCPUs idle for 1 scan");
	ck_assert_uint_eq(domain_idle_full_periods(f.d), 1);
	ck_assert_uint_eq(domain_idle_since_ns(f.d), 1100 * 1000000ull);
	/* stays there, no new period */
	ck_assert_int_eq(step(&f, 100), SYSIDLE_FULL_NOTED);
	ck_assert_int_eq(f.r.from, SYSIDLE_FULL_NOTED);
	ck_assert_uint_eq(f.r.idle_scans, 2);
	ck_assert(!f.r.left_full);
	ck_assert_uint_eq(domain_idle_full_periods(f.d), 1);
	domain_idle_free(f.d);
}
END_TEST

/* A large domain (16 vCPUs, delay 1 ms): one library scan per sample,
 * NOT -> SHORT -> LONG -> FULL_NOTED on three all-idle samples. */
START_TEST(large_all_idle)
{
	struct fake f;

	fake_init(&f, 16);
	ck_assert_int_eq(step(&f, 0), SYSIDLE_NOT);
	ck_assert_int_eq(step(&f, 100), SYSIDLE_SHORT);
	ck_assert_int_eq(step(&f, 100), SYSIDLE_LONG);
	ck_assert_int_eq(step(&f, 100), SYSIDLE_FULL_NOTED);
	ck_assert_int_eq(f.r.from, SYSIDLE_LONG);
	ck_assert_str_eq(f.r.reason, "16 vCPUs idle for 3 scans");
	domain_idle_free(f.d);
}
END_TEST

/* Samples closer together than the delay (32 vCPUs: 2 ms; 1 ms apart):
 * LONG waits until the idle entries are certainly the delay old. */
START_TEST(large_delay)
{
	struct fake f;
	int scans = 0;

	fake_init(&f, 32);
	step(&f, 0);
	ck_assert_int_eq(step(&f, 1), SYSIDLE_SHORT);
	while (step(&f, 1) == SYSIDLE_SHORT)
		scans++;
	ck_assert_int_eq(f.r.to, SYSIDLE_LONG);
	/* not on the first sample after SHORT */
	ck_assert_int_ge(scans, 1);
	ck_assert_int_le(scans, 3);
	domain_idle_free(f.d);
}
END_TEST

/* A vCPU blocking at every sample but whose halt count moves woke and
 * slept between the samples: not idle. */
START_TEST(woke_between_samples)
{
	struct fake f;

	fake_init(&f, 2);
	step(&f, 0);
	for (int i = 0; i < 10; i++) {
		f.v[1].halt_exits++;
		ck_assert_int_eq(step(&f, 100), SYSIDLE_NOT);
		ck_assert_uint_eq(f.r.idle_cpus, 1);
		ck_assert_ptr_nonnull(strstr(f.r.reason,
					     "vCPU 1 woke and halted again"));
	}
	/* then it stays asleep: one interval later, fully idle */
	ck_assert_int_eq(step(&f, 100), SYSIDLE_FULL_NOTED);
	domain_idle_free(f.d);
}
END_TEST

/* blocking = 0: running (or runnable), busy, whatever the count. */
START_TEST(not_blocking_is_busy)
{
	struct fake f;

	fake_init(&f, 4);
	f.v[3].blocking = false;
	step(&f, 0);
	for (int i = 0; i < 5; i++) {
		ck_assert_int_eq(step(&f, 100), SYSIDLE_NOT);
		ck_assert_uint_eq(f.r.idle_cpus, 3);
		ck_assert_ptr_nonnull(strstr(f.r.reason, "vCPU 3 not blocking"));
	}
	domain_idle_free(f.d);
}
END_TEST

/* A busy vCPU ends FULL_NOTED, with how long it lasted (sample times). */
START_TEST(busy_ends_full_idle)
{
	struct fake f;

	fake_init(&f, 2);
	step(&f, 0);
	ck_assert_int_eq(step(&f, 100), SYSIDLE_FULL_NOTED);
	step(&f, 100);
	f.v[0].blocking = false;
	ck_assert_int_eq(step(&f, 150), SYSIDLE_NOT);
	ck_assert_int_eq(f.r.from, SYSIDLE_FULL_NOTED);
	ck_assert(f.r.left_full);
	ck_assert_uint_eq(f.r.full_idle_ms, 250);
	ck_assert_ptr_nonnull(strstr(f.r.reason, "full idle ended after 250 ms"));
	/* a second period */
	f.v[0].blocking = true;
	ck_assert_int_eq(step(&f, 100), SYSIDLE_NOT); /* count baseline ok,
						       * but it was busy */
	ck_assert_int_eq(step(&f, 100), SYSIDLE_FULL_NOTED);
	ck_assert_uint_eq(domain_idle_full_periods(f.d), 2);
	domain_idle_free(f.d);
}
END_TEST

/* Counters going back (the domain restarted under the same machine): not
 * idle for that sample, then the new counts are the baseline. */
START_TEST(counter_reset)
{
	struct fake f;

	fake_init(&f, 2);
	step(&f, 0);
	ck_assert_int_eq(step(&f, 100), SYSIDLE_FULL_NOTED);
	f.v[0].halt_exits = 3;
	f.v[1].halt_exits = 0;
	ck_assert_int_eq(step(&f, 100), SYSIDLE_NOT);
	ck_assert(f.r.counter_reset);
	ck_assert(f.r.left_full);
	ck_assert_ptr_nonnull(strstr(f.r.reason, "went back"));
	ck_assert_int_eq(step(&f, 100), SYSIDLE_FULL_NOTED);
	ck_assert(!f.r.counter_reset);
	domain_idle_free(f.d);
}
END_TEST

/* The vCPU count changes: a new machine of the new size. */
START_TEST(vcpu_count_change)
{
	struct fake f;

	fake_init(&f, 2);
	step(&f, 0);
	ck_assert_int_eq(step(&f, 100), SYSIDLE_FULL_NOTED);
	f.ncpus = 12;
	ck_assert_int_eq(step(&f, 100), SYSIDLE_NOT);
	ck_assert(f.r.recreated);
	ck_assert_uint_eq(f.r.old_ncpus, 2);
	ck_assert_uint_eq(f.r.ncpus, 12);
	ck_assert_uint_eq(domain_idle_ncpus(f.d), 12);
	ck_assert(f.r.left_full);
	ck_assert_ptr_nonnull(strstr(f.r.reason, "vCPU count 2 -> 12"));
	/* 12 > 8: the large machine's pace */
	ck_assert_int_eq(step(&f, 100), SYSIDLE_SHORT);
	ck_assert(!f.r.recreated);
	ck_assert_int_eq(step(&f, 100), SYSIDLE_LONG);
	ck_assert_int_eq(step(&f, 100), SYSIDLE_FULL_NOTED);
	f.ncpus = 1;
	ck_assert_int_eq(step(&f, 100), SYSIDLE_NOT);
	ck_assert(f.r.recreated);
	ck_assert_int_eq(step(&f, 100), SYSIDLE_FULL_NOTED);
	ck_assert_uint_eq(domain_idle_full_periods(f.d), 3);
	domain_idle_free(f.d);
}
END_TEST

/* No halt_exits (or neither blocking nor halt_wait_ns) statistic: skipped,
 * never idle. */
START_TEST(no_stats_skipped)
{
	struct fake f;

	fake_init(&f, 2);
	f.v[1].has_halt_exits = false;
	for (int i = 0; i < 5; i++) {
		ck_assert_int_eq(step(&f, 100), SYSIDLE_NOT);
		ck_assert_int_eq(f.rc, DOMAIN_IDLE_NO_STATS);
	}
	ck_assert_uint_eq(domain_idle_ncpus(f.d), 0);
	/* no vCPU statistics at all */
	f.v[1].has_halt_exits = true;
	f.v[0].has_blocking = false;
	ck_assert_int_eq(step(&f, 100), SYSIDLE_NOT);
	ck_assert_int_eq(f.rc, DOMAIN_IDLE_NO_STATS);
	/* statistics appear: watched from then on */
	f.v[0].has_blocking = true;
	ck_assert_int_eq(step(&f, 100), SYSIDLE_NOT);
	ck_assert_int_eq(f.rc, DOMAIN_IDLE_OK);
	ck_assert_int_eq(step(&f, 100), SYSIDLE_FULL_NOTED);
	/* and vanish: the full idle period ends, skipped again */
	f.v[0].has_halt_exits = false;
	ck_assert_int_eq(step(&f, 100), SYSIDLE_NOT);
	ck_assert_int_eq(f.rc, DOMAIN_IDLE_NO_STATS);
	ck_assert(f.r.left_full);
	ck_assert_uint_eq(f.r.full_idle_ms, 100);
	domain_idle_free(f.d);
}
END_TEST

START_TEST(no_vcpus_skipped)
{
	struct fake f;
	struct domain_sample s = { .t_ns = 1, .running = true, .ncpus = 2,
				   .vcpus = NULL };

	fake_init(&f, 2);
	ck_assert_int_eq(domain_idle_scan(f.d, &s, &f.r), DOMAIN_IDLE_NO_STATS);
	ck_assert_int_eq(f.r.to, SYSIDLE_NOT);
	domain_idle_free(f.d);
}
END_TEST

/* A domain that is not running (shut down, crashed): every vCPU busy. */
START_TEST(not_running_is_busy)
{
	struct fake f;

	fake_init(&f, 2);
	step(&f, 0);
	ck_assert_int_eq(step(&f, 100), SYSIDLE_FULL_NOTED);
	f.running = false;
	ck_assert_int_eq(step(&f, 100), SYSIDLE_NOT);
	ck_assert(f.r.left_full);
	ck_assert_str_eq(f.r.reason, "domain not running");
	ck_assert_int_eq(step(&f, 100), SYSIDLE_NOT);
	f.running = true;
	/* running again: one full interval of evidence first */
	ck_assert_int_eq(step(&f, 100), SYSIDLE_NOT);
	ck_assert_int_eq(step(&f, 100), SYSIDLE_FULL_NOTED);
	domain_idle_free(f.d);
}
END_TEST

/* A suspended domain keeps its state (a consolidator suspends fully idle
 * domains and resumes them when they leave FULL_NOTED); once it runs again
 * its first sample is a new baseline, whatever the counters did. */
START_TEST(paused_keeps_state)
{
	struct fake f;

	fake_init(&f, 2);
	step(&f, 0);
	ck_assert_int_eq(step(&f, 100), SYSIDLE_FULL_NOTED);
	f.running = false;
	f.paused = true;
	for (int k = 0; k < 5; k++) {
		ck_assert_int_eq(step(&f, 1000), SYSIDLE_FULL_NOTED);
		ck_assert(!f.r.left_full);
		ck_assert_str_eq(f.r.reason, "domain paused: state kept");
	}
	ck_assert_uint_eq(domain_idle_full_periods(f.d), 1);
	f.running = true;
	f.paused = false;
	f.v[0].halt_exits += 7; /* ran its due timers once resumed */
	ck_assert_int_eq(step(&f, 100), SYSIDLE_NOT);
	ck_assert(f.r.left_full);
	ck_assert_ptr_nonnull(strstr(f.r.reason, "first sample"));
	ck_assert_int_eq(step(&f, 100), SYSIDLE_FULL_NOTED);
	ck_assert_uint_eq(domain_idle_full_periods(f.d), 2);
	domain_idle_free(f.d);
}
END_TEST

/* Without blocking.cur, or with blocking.cur always 0 (QEMU reads a vCPU's
 * statistics on its own thread): halt_wait_ns.sum grown by >= 90% of the
 * interval, the halt-exit count unchanged, is idle. */
START_TEST(halt_wait_idle)
{
	struct fake f;

	fake_init(&f, 2);
	for (int i = 0; i < 2; i++) {
		f.v[i].has_blocking = i == 0; /* vCPU 0: blocking.cur reads 0 */
		f.v[i].blocking = false;
		f.v[i].has_halt_wait = true;
		f.v[i].halt_wait_ns = 5000000000ull;
	}
	ck_assert_int_eq(step(&f, 0), SYSIDLE_NOT);
	ck_assert_int_eq(f.rc, DOMAIN_IDLE_OK);
	/* halted the whole 100 ms */
	f.v[0].halt_wait_ns += 100000000;
	f.v[1].halt_wait_ns += 99000000;
	ck_assert_int_eq(step(&f, 100), SYSIDLE_FULL_NOTED);
	/* exactly 90 %: still idle */
	f.v[0].halt_wait_ns += 90000000;
	f.v[1].halt_wait_ns += 100000000;
	ck_assert_int_eq(step(&f, 100), SYSIDLE_FULL_NOTED);
	/* vCPU 1 woke 60 ms in and is still running (no new HLT) */
	f.v[0].halt_wait_ns += 100000000;
	f.v[1].halt_wait_ns += 60000000;
	ck_assert_int_eq(step(&f, 100), SYSIDLE_NOT);
	ck_assert(f.r.left_full);
	ck_assert_ptr_nonnull(strstr(f.r.reason, "vCPU 1 not halted for the "
				     "whole interval"));
	/* running the whole interval */
	f.v[0].halt_wait_ns += 100000000;
	ck_assert_int_eq(step(&f, 100), SYSIDLE_NOT);
	ck_assert_uint_eq(f.r.idle_cpus, 1);
	/* 89 %: not idle */
	f.v[0].halt_wait_ns += 100000000;
	f.v[1].halt_wait_ns += 89000000;
	ck_assert_int_eq(step(&f, 100), SYSIDLE_NOT);
	/* halted again (a HLT: the count moves): not idle for that one */
	f.v[0].halt_wait_ns += 100000000;
	f.v[1].halt_wait_ns += 100000000;
	f.v[1].halt_exits++;
	ck_assert_int_eq(step(&f, 100), SYSIDLE_NOT);
	ck_assert_ptr_nonnull(strstr(f.r.reason, "vCPU 1 woke and halted again"));
	f.v[0].halt_wait_ns += 100000000;
	f.v[1].halt_wait_ns += 100000000;
	ck_assert_int_eq(step(&f, 100), SYSIDLE_FULL_NOTED);
	/* halt_wait_ns going back: a reset */
	f.v[1].halt_wait_ns = 0;
	f.v[0].halt_wait_ns += 100000000;
	ck_assert_int_eq(step(&f, 100), SYSIDLE_NOT);
	ck_assert(f.r.counter_reset);
	domain_idle_free(f.d);
}
END_TEST

/* halt_exits without blocking.cur nor halt_wait_ns: skipped. */
START_TEST(halt_exits_only_skipped)
{
	struct fake f;

	fake_init(&f, 1);
	f.v[0].has_blocking = false;
	ck_assert_int_eq(step(&f, 100), SYSIDLE_NOT);
	ck_assert_int_eq(f.rc, DOMAIN_IDLE_NO_STATS);
	ck_assert_int_eq(step(&f, 100), SYSIDLE_NOT);
	ck_assert_int_eq(f.rc, DOMAIN_IDLE_NO_STATS);
	domain_idle_free(f.d);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("domain_idle");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, small_all_idle);
	tcase_add_test(tc, large_all_idle);
	tcase_add_test(tc, large_delay);
	tcase_add_test(tc, woke_between_samples);
	tcase_add_test(tc, not_blocking_is_busy);
	tcase_add_test(tc, busy_ends_full_idle);
	tcase_add_test(tc, counter_reset);
	tcase_add_test(tc, vcpu_count_change);
	tcase_add_test(tc, no_stats_skipped);
	tcase_add_test(tc, no_vcpus_skipped);
	tcase_add_test(tc, not_running_is_busy);
	tcase_add_test(tc, paused_keeps_state);
	tcase_add_test(tc, halt_wait_idle);
	tcase_add_test(tc, halt_exits_only_skipped);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(suite());
	int failed;

	srunner_run_all(sr, CK_ENV);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
