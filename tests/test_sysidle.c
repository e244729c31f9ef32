/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Unit tests of the sysidle library, single-threaded, with a fake clock.
 * Races are staged at the exact point between a scan's counter loads and
 * its cmpxchg (a hook the library has when built with SYSIDLE_TEST_HOOKS),
 * or by doing half of an exit through the private layout.
 */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "../sysidle/sysidle_internal.h"

#define MS 1000000ull

/* The fake clock: tests set now; @hook runs once, inside the next scan,
 * right before its cmpxchg. */
struct fake {
	uint64_t now;
	unsigned long clock_reads;
	void (*hook)(struct fake *f);
	struct sysidle *s;
	unsigned int hook_cpu;
	int hook_calls;
	/* Transitions seen by the callback. */
	int ntr;
	struct {
		enum sysidle_state from, to;
		int cpu;
		uint64_t at;
	} tr[64];
};

static struct fake fk;

static uint64_t fake_clock(void *arg)
{
	struct fake *f = arg;

	f->clock_reads++;
	return f->now;
}

static void fake_before_advance(struct sysidle *s)
{
	(void)s;
	if (fk.hook) {
		void (*hook)(struct fake *) = fk.hook;

		fk.hook = NULL; /* one shot */
		fk.hook_calls++;
		hook(&fk);
	}
}

static void fake_transition(void *arg, enum sysidle_state from,
			    enum sysidle_state to, int cpu, uint64_t now)
{
	struct fake *f = arg;

	ck_assert_int_lt(f->ntr, 64);
	f->tr[f->ntr].from = from;
	f->tr[f->ntr].to = to;
	f->tr[f->ntr].cpu = cpu;
	f->tr[f->ntr].at = now;
	f->ntr++;
}

static struct sysidle *make(unsigned int ncpus, int tk, uint64_t delay,
			    enum sysidle_strategy strategy)
{
	struct sysidle_config cfg;
	struct sysidle *s;

	memset(&fk, 0, sizeof(fk));
	sysidle_config_init(&cfg, ncpus);
	cfg.timekeeper = tk;
	cfg.delay_ns = delay;
	cfg.strategy = strategy;
	cfg.clock = fake_clock;
	cfg.clock_arg = &fk;
	cfg.on_transition = fake_transition;
	cfg.transition_arg = &fk;
	s = sysidle_create(&cfg);
	ck_assert_ptr_nonnull(s);
	fk.s = s;
	sysidle_test_before_advance = fake_before_advance;
	return s;
}

static void all_enter(struct sysidle *s)
{
	for (unsigned int i = 0; i < sysidle_ncpus(s); i++)
		sysidle_enter(s, i);
}

/* Drive an all-idle machine with no delay up to FULL_NOTED. */
static void climb_to_noted(struct sysidle *s)
{
	ck_assert_int_eq(sysidle_scan(s), SYSIDLE_SHORT);
	ck_assert_int_eq(sysidle_scan(s), SYSIDLE_LONG);
	ck_assert_int_eq(sysidle_scan(s), SYSIDLE_FULL);
	ck_assert(sysidle_is_idle(s));
	ck_assert_int_eq(sysidle_state(s), SYSIDLE_FULL_NOTED);
}

/* ---- configuration ---------------------------------------------------- */

START_TEST(test_create_rejects_bad_config)
{
	struct sysidle_config cfg;

	sysidle_config_init(&cfg, 0);
	errno = 0;
	ck_assert_ptr_null(sysidle_create(&cfg));
	ck_assert_int_eq(errno, EINVAL);

	sysidle_config_init(&cfg, SYSIDLE_MAX_CPUS + 1);
	errno = 0;
	ck_assert_ptr_null(sysidle_create(&cfg));
	ck_assert_int_eq(errno, EINVAL);

	sysidle_config_init(&cfg, 4);
	cfg.timekeeper = 4;
	ck_assert_ptr_null(sysidle_create(&cfg));
	cfg.timekeeper = -2;
	ck_assert_ptr_null(sysidle_create(&cfg));
	cfg.timekeeper = 3;
	cfg.strategy = (enum sysidle_strategy)7;
	ck_assert_ptr_null(sysidle_create(&cfg));
	ck_assert_ptr_null(sysidle_create(NULL));
}
END_TEST

START_TEST(test_create_defaults)
{
	struct sysidle_config cfg;
	struct sysidle *s;

	sysidle_config_init(&cfg, 1024);
	ck_assert_int_eq(cfg.timekeeper, SYSIDLE_NO_TIMEKEEPER);
	ck_assert_uint_eq(cfg.small_cpus, 8);
	ck_assert_int_eq(cfg.strategy, SYSIDLE_STRATEGY_SYSIDLE);
	s = sysidle_create(&cfg);
	ck_assert_ptr_nonnull(s);
	ck_assert_uint_eq(sysidle_ncpus(s), 1024);
	ck_assert_uint_eq(sysidle_delay_ns(s), 64 * MS);
	ck_assert_int_eq(sysidle_state(s), SYSIDLE_NOT);
	for (unsigned int i = 0; i < 1024; i++)
		ck_assert(!sysidle_cpu_is_idle(s, i)); /* all start busy */
	sysidle_destroy(s);
}
END_TEST

/* The kernel's rcu_sysidle_delay() in jiffies, with HZ = 1000 and
 * rcu_fanout_leaf = 16, turned into nanoseconds. */
static uint64_t kernel_delay_ns(unsigned long nr_cpu_ids, unsigned long small)
{
	const unsigned long hz = 1000, fanout_leaf = 16;

	if (nr_cpu_ids <= small)
		return 0;
	return ((nr_cpu_ids * hz + fanout_leaf * 1000 - 1) /
		(fanout_leaf * 1000)) * (1000000000ull / hz);
}

START_TEST(test_delay_formula)
{
	for (unsigned int n = 1; n <= 4096; n++) {
		ck_assert_uint_eq(sysidle_default_delay_ns(n, 8),
				  kernel_delay_ns(n, 8));
		ck_assert_uint_eq(sysidle_default_delay_ns(n, 64),
				  kernel_delay_ns(n, 64));
	}
	/* Landmarks, written out. */
	ck_assert_uint_eq(sysidle_default_delay_ns(8, 8), 0);
	ck_assert_uint_eq(sysidle_default_delay_ns(9, 8), 1 * MS);
	ck_assert_uint_eq(sysidle_default_delay_ns(16, 8), 1 * MS);
	ck_assert_uint_eq(sysidle_default_delay_ns(17, 8), 2 * MS);
	ck_assert_uint_eq(sysidle_default_delay_ns(1024, 8), 64 * MS);
	ck_assert_uint_eq(sysidle_default_delay_ns(4096, 8), 256 * MS);
	ck_assert_uint_eq(sysidle_default_delay_ns(4096, 4096), 0);
}
END_TEST

START_TEST(test_records_own_cache_lines)
{
	struct sysidle *s = make(64, -1, 0, SYSIDLE_STRATEGY_SYSIDLE);

	ck_assert_uint_eq((uintptr_t)&s->state % SYSIDLE_CACHELINE, 0);
	for (unsigned int i = 0; i < 64; i++) {
		uintptr_t a = (uintptr_t)&s->cpu[i];

		ck_assert_uint_eq(a % SYSIDLE_CACHELINE, 0);
		/* The global state never shares a CPU's line. */
		ck_assert_uint_ne(a / SYSIDLE_CACHELINE,
				  (uintptr_t)&s->state / SYSIDLE_CACHELINE);
	}
	sysidle_destroy(s);
}
END_TEST

/* ---- transitions and non-transitions ---------------------------------- */

START_TEST(test_climb_without_delay)
{
	struct sysidle *s = make(4, -1, SYSIDLE_DELAY_DEFAULT,
				 SYSIDLE_STRATEGY_SYSIDLE);

	ck_assert_uint_eq(sysidle_delay_ns(s), 0);
	all_enter(s);
	ck_assert(!sysidle_is_idle(s)); /* NOT: no */
	ck_assert_int_eq(sysidle_scan(s), SYSIDLE_SHORT);
	ck_assert(!sysidle_is_idle(s)); /* SHORT: no, unchanged */
	ck_assert_int_eq(sysidle_state(s), SYSIDLE_SHORT);
	ck_assert_int_eq(sysidle_scan(s), SYSIDLE_LONG);
	ck_assert(!sysidle_is_idle(s)); /* LONG: no, unchanged */
	ck_assert_int_eq(sysidle_state(s), SYSIDLE_LONG);
	ck_assert_int_eq(sysidle_scan(s), SYSIDLE_FULL);
	ck_assert_int_eq(sysidle_scan(s), SYSIDLE_FULL); /* scan stops at FULL */
	ck_assert(sysidle_is_idle(s));
	ck_assert_int_eq(sysidle_state(s), SYSIDLE_FULL_NOTED);
	ck_assert(sysidle_is_idle(s)); /* already noted: still yes */
	ck_assert_int_eq(sysidle_scan(s), SYSIDLE_FULL_NOTED);
	ck_assert_int_eq(fk.ntr, 4);
	ck_assert_int_eq(fk.tr[0].to, SYSIDLE_SHORT);
	ck_assert_int_eq(fk.tr[3].from, SYSIDLE_FULL);
	ck_assert_int_eq(fk.tr[3].to, SYSIDLE_FULL_NOTED);
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(fk.tr[i].cpu, -1);
	sysidle_destroy(s);
}
END_TEST

START_TEST(test_busy_cpu_blocks_every_step)
{
	struct sysidle *s = make(4, -1, 0, SYSIDLE_STRATEGY_SYSIDLE);

	for (unsigned int i = 0; i < 3; i++)
		sysidle_enter(s, i); /* CPU 3 stays busy */
	for (int i = 0; i < 5; i++) {
		ck_assert_int_eq(sysidle_scan(s), SYSIDLE_NOT);
		ck_assert(!sysidle_is_idle(s));
	}
	ck_assert_int_eq(fk.ntr, 0);
	sysidle_destroy(s);
}
END_TEST

START_TEST(test_exit_below_long_writes_nothing)
{
	struct sysidle *s = make(4, -1, 0, SYSIDLE_STRATEGY_SYSIDLE);

	all_enter(s);
	ck_assert(!sysidle_exit(s, 1)); /* NOT */
	ck_assert_int_eq(sysidle_state(s), SYSIDLE_NOT);
	sysidle_enter(s, 1);
	ck_assert_int_eq(sysidle_scan(s), SYSIDLE_SHORT);
	ck_assert(!sysidle_exit(s, 2)); /* SHORT: read only */
	ck_assert_int_eq(sysidle_state(s), SYSIDLE_SHORT);
	ck_assert_int_eq(fk.ntr, 1);
	/* The busy CPU is seen by the next scan; SHORT is left as it is. */
	ck_assert_int_eq(sysidle_scan(s), SYSIDLE_SHORT);
	ck_assert_int_eq(fk.ntr, 1);
	sysidle_enter(s, 2);
	ck_assert_int_eq(sysidle_scan(s), SYSIDLE_LONG);
	sysidle_destroy(s);
}
END_TEST

START_TEST(test_exit_resets_long_and_full)
{
	struct sysidle *s = make(4, -1, 0, SYSIDLE_STRATEGY_SYSIDLE);

	all_enter(s);
	sysidle_scan(s);
	ck_assert_int_eq(sysidle_scan(s), SYSIDLE_LONG);
	ck_assert(!sysidle_exit(s, 0)); /* LONG -> NOT, nobody to wake */
	ck_assert_int_eq(sysidle_state(s), SYSIDLE_NOT);
	ck_assert_int_eq(fk.tr[fk.ntr - 1].cpu, 0);

	sysidle_enter(s, 0);
	sysidle_scan(s);
	sysidle_scan(s);
	ck_assert_int_eq(sysidle_scan(s), SYSIDLE_FULL);
	ck_assert(!sysidle_exit(s, 3)); /* FULL -> NOT: not yet noted */
	ck_assert_int_eq(sysidle_state(s), SYSIDLE_NOT);
	ck_assert(!sysidle_is_idle(s));
	ck_assert_int_eq(fk.tr[fk.ntr - 1].from, SYSIDLE_FULL);
	ck_assert_int_eq(fk.tr[fk.ntr - 1].cpu, 3);
	sysidle_destroy(s);
}
END_TEST

START_TEST(test_exit_from_noted_wakes_once)
{
	struct sysidle *s = make(4, -1, 0, SYSIDLE_STRATEGY_SYSIDLE);

	all_enter(s);
	climb_to_noted(s);
	ck_assert(sysidle_exit(s, 2)); /* this one wakes the timekeeper */
	ck_assert_int_eq(sysidle_state(s), SYSIDLE_NOT);
	ck_assert(!sysidle_exit(s, 1)); /* the next one does not */
	ck_assert(!sysidle_is_idle(s));
	sysidle_destroy(s);
}
END_TEST

START_TEST(test_scan_cancels_long_and_full)
{
	struct sysidle *s = make(4, -1, 0, SYSIDLE_STRATEGY_SYSIDLE);

	all_enter(s);
	sysidle_scan(s);
	sysidle_scan(s);
	ck_assert_int_eq(sysidle_state(s), SYSIDLE_LONG);
	/* Half an exit: the counter is odd, the state not yet read. */
	atomic_fetch_add(&s->cpu[1].idle_ctr, 1);
	ck_assert_int_eq(sysidle_scan(s), SYSIDLE_NOT);
	ck_assert_int_eq(fk.tr[fk.ntr - 1].cpu, -1);
	atomic_fetch_add(&s->cpu[1].idle_ctr, 1); /* idle again */

	sysidle_scan(s);
	sysidle_scan(s);
	ck_assert_int_eq(sysidle_scan(s), SYSIDLE_FULL);
	atomic_fetch_add(&s->cpu[1].idle_ctr, 1);
	ck_assert_int_eq(sysidle_scan(s), SYSIDLE_NOT);
	sysidle_destroy(s);
}
END_TEST

START_TEST(test_scan_leaves_noted_to_the_exiting_cpu)
{
	struct sysidle *s = make(4, -1, 0, SYSIDLE_STRATEGY_SYSIDLE);

	all_enter(s);
	climb_to_noted(s);
	/* CPU 1 is half-way through its exit: counter odd, state unread. A
	 * scan must not take FULL_NOTED, or CPU 1 would find NOT and never
	 * wake the sleeping timekeeper. */
	atomic_fetch_add(&s->cpu[1].idle_ctr, 1);
	ck_assert_int_eq(sysidle_scan(s), SYSIDLE_FULL_NOTED);
	ck_assert(sysidle_is_idle(s));
	sysidle_destroy(s);
}
END_TEST

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

/* ---- the timekeeper --------------------------------------------------- */

START_TEST(test_timekeeper_excluded)
{
	struct sysidle *s = make(4, 0, 0, SYSIDLE_STRATEGY_SYSIDLE);

	for (unsigned int i = 1; i < 4; i++)
		sysidle_enter(s, i); /* CPU 0, the timekeeper, stays busy */
	climb_to_noted(s);
	/* The timekeeper taking its tick does not end full idle ... */
	sysidle_enter(s, 0);
	ck_assert(!sysidle_exit(s, 0));
	ck_assert_int_eq(sysidle_state(s), SYSIDLE_FULL_NOTED);
	/* ... unless it says it did more. */
	ck_assert(sysidle_force_exit(s));
	ck_assert_int_eq(sysidle_state(s), SYSIDLE_NOT);
	ck_assert(!sysidle_force_exit(s)); /* NOT: nothing to do */
	ck_assert_int_eq(fk.tr[fk.ntr - 1].cpu, -1);
	sysidle_destroy(s);
}
END_TEST

START_TEST(test_force_exit_per_state)
{
	struct sysidle *s = make(2, 0, 0, SYSIDLE_STRATEGY_SYSIDLE);

	sysidle_enter(s, 1);
	ck_assert_int_eq(sysidle_scan(s), SYSIDLE_SHORT);
	ck_assert(!sysidle_force_exit(s));
	ck_assert_int_eq(sysidle_state(s), SYSIDLE_SHORT); /* SHORT stays */
	ck_assert_int_eq(sysidle_scan(s), SYSIDLE_LONG);
	ck_assert(!sysidle_force_exit(s));
	ck_assert_int_eq(sysidle_state(s), SYSIDLE_NOT);
	sysidle_scan(s);
	sysidle_scan(s);
	ck_assert_int_eq(sysidle_scan(s), SYSIDLE_FULL);
	ck_assert(!sysidle_force_exit(s));
	ck_assert_int_eq(sysidle_state(s), SYSIDLE_NOT);
	sysidle_destroy(s);
}
END_TEST

START_TEST(test_single_cpu_timekeeper_only)
{
	/* Nothing to scan: the machine is idle as far as others go. */
	struct sysidle *s = make(1, 0, 0, SYSIDLE_STRATEGY_SYSIDLE);

	ck_assert(sysidle_poll(s));
	sysidle_enter(s, 0);
	ck_assert(!sysidle_exit(s, 0));
	ck_assert_int_eq(sysidle_state(s), SYSIDLE_FULL_NOTED);
	sysidle_destroy(s);
}
END_TEST

START_TEST(test_poll_small_machine_three_passes)
{
	struct sysidle *s = make(8, -1, SYSIDLE_DELAY_DEFAULT,
				 SYSIDLE_STRATEGY_SYSIDLE);

	ck_assert(!sysidle_poll(s)); /* all busy */
	ck_assert_int_eq(sysidle_state(s), SYSIDLE_NOT);
	all_enter(s);
	ck_assert(sysidle_poll(s)); /* NOT -> SHORT -> LONG -> FULL -> noted */
	ck_assert_int_eq(fk.ntr, 4);
	ck_assert(sysidle_exit(s, 7));
	sysidle_destroy(s);
}
END_TEST

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

static Suite *sysidle_suite(void)
{
	Suite *s = suite_create("sysidle");
	TCase *tc;

	tc = tcase_create("config");
	tcase_add_test(tc, test_create_rejects_bad_config);
	tcase_add_test(tc, test_create_defaults);
	tcase_add_test(tc, test_delay_formula);
	tcase_add_test(tc, test_records_own_cache_lines);
	suite_add_tcase(s, tc);

	tc = tcase_create("transitions");
	tcase_add_test(tc, test_climb_without_delay);
	tcase_add_test(tc, test_busy_cpu_blocks_every_step);
	tcase_add_test(tc, test_exit_below_long_writes_nothing);
	tcase_add_test(tc, test_exit_resets_long_and_full);
	tcase_add_test(tc, test_exit_from_noted_wakes_once);
	tcase_add_test(tc, test_scan_cancels_long_and_full);
	tcase_add_test(tc, test_scan_leaves_noted_to_the_exiting_cpu);
	tcase_add_test(tc, test_poll_small_machine_three_passes);
	suite_add_tcase(s, tc);

	tc = tcase_create("delay");
	tcase_add_test(tc, test_delay_holds_back_long_and_full);
	tcase_add_test(tc, test_delay_on_a_1024_cpu_machine);
	tcase_add_test(tc, test_hot_path_never_reads_the_clock);
	tcase_add_test(tc, test_stale_jiffies_never_cut_the_delay);
	tcase_add_test(tc, test_delay_whatever_the_scan_rate);
	suite_add_tcase(s, tc);

	tc = tcase_create("timekeeper");
	tcase_add_test(tc, test_timekeeper_excluded);
	tcase_add_test(tc, test_force_exit_per_state);
	tcase_add_test(tc, test_single_cpu_timekeeper_only);
	suite_add_tcase(s, tc);

	tc = tcase_create("races");
	tcase_add_test(tc, test_race_exit_beats_long_to_full);
	tcase_add_test(tc, test_race_exit_during_short_to_long);
	tcase_add_test(tc, test_race_stale_long_then_idle_again);
	suite_add_tcase(s, tc);

	tc = tcase_create("naive");
	tcase_add_test(tc, test_naive_counter);
	tcase_add_test(tc, test_naive_scan);
	tcase_add_test(tc, test_names);
	tcase_add_test(tc, test_state_from_name);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(sysidle_suite());
	int failed;

	/* CK_ENV: verbosity from CK_VERBOSITY; TAP from CK_TAP_LOG_FILE_NAME. */
	srunner_run_all(sr, CK_ENV);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
