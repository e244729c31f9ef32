/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Threaded stress test of the sysidle library, in the style of the kernel's
 * torture tests: worker threads own simulated CPUs and switch them between
 * busy and idle at random; a timekeeper thread (CPU 0) ticks, scans, queries
 * and sleeps when the machine is fully idle, to be woken by the CPU whose
 * exit ends the full-idle period. Every so often the controller (the test's
 * main thread) calls a long all-idle stretch: every worker parks all of its
 * CPUs idle and the stretch ends only when FULL_NOTED is reached, or fails
 * after a timeout.
 *
 * Asserted:
 *  - a worker with a CPU that has completed sysidle_exit never sees the
 *    state at FULL or FULL_NOTED;
 *  - every long all-idle stretch reaches FULL_NOTED;
 *  - every sleep of the timekeeper ends with exactly one wake-up, sent by
 *    the one exit that returned true (no lost and no extra wake-ups).
 *
 * SYSIDLE_STRESS_SECONDS sets the duration of each case (default 10);
 * SYSIDLE_STRESS_SEED fixes the random seed (printed on failure).
 */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "sysidle/sysidle.h"

#define STRETCH_TIMEOUT_S 5
#define MAX_WORKERS 8
#define MAX_CPUS_PER_WORKER 8

enum phase { PHASE_RANDOM, PHASE_LONG_IDLE, PHASE_STOP };

struct stress {
	struct sysidle *s;
	unsigned int nworkers, cpus_per_worker;
	uint64_t seed;

	/* The controller's phase; workers poll it between steps. */
	_Atomic int phase;
	pthread_mutex_t lock;
	pthread_cond_t cv;       /* arrivals, notes, phase changes */
	unsigned int parked;     /* workers with all CPUs idle, waiting */
	unsigned long notes;     /* times the timekeeper saw is_idle true */
	int tk_asleep;

	/* The timekeeper's wake-up (an eventfd in the VMM). */
	sem_t wake;

	/* Results, written by threads, read after join. */
	_Atomic unsigned long busy_checks, violations, wakes_sent,
		sleeps, force_exits, scans, long_stretches, random_rounds;
	_Atomic int violation_state;
};

static uint64_t rnd_next(uint64_t *x)
{
	/* xorshift64* */
	*x ^= *x >> 12;
	*x ^= *x << 25;
	*x ^= *x >> 27;
	return *x * 2685821657736338717ull;
}

static void sleep_us(unsigned int us)
{
	struct timespec ts = { .tv_sec = 0, .tv_nsec = (long)us * 1000 };

	while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
		;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Check from a thread that has a busy CPU: the state must be below FULL. */
static void check_busy(struct stress *st)
{
	enum sysidle_state now = sysidle_state(st->s);

	if (now >= SYSIDLE_FULL) {
		atomic_fetch_add(&st->violations, 1);
		atomic_store(&st->violation_state, (int)now);
	}
}

static void cpu_exit(struct stress *st, unsigned int cpu)
{
	if (sysidle_exit(st->s, cpu)) {
		atomic_fetch_add(&st->wakes_sent, 1);
		sem_post(&st->wake);
	}
}

struct worker {
	struct stress *st;
	unsigned int id;
	pthread_t thread;
};

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct stress *st = w->st;
	unsigned int n = st->cpus_per_worker;
	unsigned int first = 1 + w->id * n; /* CPU 0 is the timekeeper */
	bool busy[MAX_CPUS_PER_WORKER];
	unsigned int nbusy = n;
	uint64_t x = st->seed * 0x9e3779b97f4a7c15ull + w->id + 1;
	unsigned long checks = 0;

	for (unsigned int i = 0; i < n; i++)
		busy[i] = true; /* every CPU starts busy */

	for (;;) {
		int phase = atomic_load(&st->phase);

		if (phase == PHASE_STOP)
			break;
		if (phase == PHASE_LONG_IDLE) {
			for (unsigned int i = 0; i < n; i++)
				if (busy[i]) {
					sysidle_enter(st->s, first + i);
					busy[i] = false;
				}
			nbusy = 0;
			pthread_mutex_lock(&st->lock);
			st->parked++;
			pthread_cond_broadcast(&st->cv);
			while (atomic_load(&st->phase) == PHASE_LONG_IDLE)
				pthread_cond_wait(&st->cv, &st->lock);
			st->parked--;
			pthread_mutex_unlock(&st->lock);
			continue;
		}

		/* Random phase: flip one CPU, then spend a random stretch. */
		unsigned int i = (unsigned int)(rnd_next(&x) % n);

		if (busy[i]) {
			sysidle_enter(st->s, first + i);
			busy[i] = false;
			nbusy--;
		} else {
			cpu_exit(st, first + i);
			busy[i] = true;
			nbusy++;
		}
		if (nbusy) {
			/* Busy: spin, checking the state all along. */
			unsigned int spins = (unsigned int)(rnd_next(&x) % 2000);

			for (unsigned int k = 0; k < spins; k++)
				check_busy(st);
			checks += spins;
		} else {
			/* All idle: a short or, sometimes, a longer nap, long
			 * enough for the timekeeper to reach FULL_NOTED. */
			unsigned int r = (unsigned int)(rnd_next(&x) % 100);

			sleep_us(r < 90 ? r * 10 : 2000 + r * 50);
		}
	}
	for (unsigned int i = 0; i < n; i++)
		if (busy[i])
			sysidle_enter(st->s, first + i);
	atomic_fetch_add(&st->busy_checks, checks);
	return NULL;
}

static void *timekeeper_main(void *arg)
{
	struct stress *st = arg;
	uint64_t x = st->seed + 12345;
	bool small = sysidle_ncpus(st->s) <= SYSIDLE_DEFAULT_SMALL;

	while (atomic_load(&st->phase) != PHASE_STOP) {
		bool idle;

		/* Take the tick: idle in between, as a vCPU in HLT. */
		sysidle_enter(st->s, 0);
		sleep_us(100 + (unsigned int)(rnd_next(&x) % 200));
		sysidle_exit(st->s, 0); /* never resets: excluded */
		/* Now and then the tick was more than a tick. */
		if (rnd_next(&x) % 200 == 0) {
			sysidle_force_exit(st->s);
			atomic_fetch_add(&st->force_exits, 1);
		}

		/* Small machines scan inline; large ones scan here too, as
		 * this tick is longer than the delay allows for. */
		if (!small) {
			sysidle_scan(st->s);
			atomic_fetch_add(&st->scans, 1);
		}
		idle = sysidle_poll(st->s);
		if (!idle)
			continue;

		pthread_mutex_lock(&st->lock);
		st->notes++;
		pthread_cond_broadcast(&st->cv);
		if (atomic_load(&st->phase) == PHASE_STOP) {
			/* The controller counts sleeps after this point. */
			pthread_mutex_unlock(&st->lock);
			break;
		}
		st->tk_asleep = 1;
		atomic_fetch_add(&st->sleeps, 1);
		pthread_mutex_unlock(&st->lock);

		/* Asleep in FULL_NOTED until the CPU that ends it wakes us. */
		sysidle_enter(st->s, 0);
		while (sem_wait(&st->wake) == -1 && errno == EINTR)
			;
		sysidle_exit(st->s, 0);

		pthread_mutex_lock(&st->lock);
		st->tk_asleep = 0;
		pthread_mutex_unlock(&st->lock);
	}
	return NULL;
}

/* Run one case for SYSIDLE_STRESS_SECONDS; asserts as described on top. */
static void run_case(unsigned int nworkers, unsigned int cpus_per_worker)
{
	struct stress st = { 0 };
	struct sysidle_config cfg;
	struct worker w[MAX_WORKERS];
	pthread_t tk;
	double seconds = 10, end, t0;
	const char *env;
	unsigned long failed_stretches = 0;
	unsigned long pending;
	enum sysidle_state end_state;

	if ((env = getenv("SYSIDLE_STRESS_SECONDS")))
		seconds = atof(env);
	st.seed = (env = getenv("SYSIDLE_STRESS_SEED"))
			  ? strtoull(env, NULL, 0)
			  : (uint64_t)time(NULL);
	st.nworkers = nworkers;
	st.cpus_per_worker = cpus_per_worker;
	sysidle_config_init(&cfg, 1 + nworkers * cpus_per_worker);
	cfg.timekeeper = 0;
	st.s = sysidle_create(&cfg);
	ck_assert_ptr_nonnull(st.s);
	pthread_mutex_init(&st.lock, NULL);
	pthread_cond_init(&st.cv, NULL);
	ck_assert_int_eq(sem_init(&st.wake, 0, 0), 0);
	atomic_init(&st.phase, PHASE_RANDOM);

	ck_assert_int_eq(pthread_create(&tk, NULL, timekeeper_main, &st), 0);
	for (unsigned int i = 0; i < nworkers; i++) {
		w[i].st = &st;
		w[i].id = i;
		ck_assert_int_eq(pthread_create(&w[i].thread, NULL,
						worker_main, &w[i]), 0);
	}

	t0 = now_s();
	end = t0 + seconds;
	while (now_s() < end) {
		struct timespec deadline;
		unsigned long notes_before;
		bool reached = false;

		/* A random phase of about 200 ms: the workload, not a wait. */
		atomic_fetch_add(&st.random_rounds, 1);
		sleep_us(200000);

		/* A long all-idle stretch: park every worker, then wait for
		 * the timekeeper to note full idle (or find it asleep in
		 * FULL_NOTED already). */
		atomic_store(&st.phase, PHASE_LONG_IDLE);
		atomic_fetch_add(&st.long_stretches, 1);
		clock_gettime(CLOCK_REALTIME, &deadline);
		deadline.tv_sec += STRETCH_TIMEOUT_S;
		pthread_mutex_lock(&st.lock);
		while (st.parked < nworkers)
			if (pthread_cond_timedwait(&st.cv, &st.lock,
						   &deadline) == ETIMEDOUT)
				break;
		notes_before = st.notes;
		for (;;) {
			if (st.parked == nworkers &&
			    (st.notes > notes_before ||
			     (st.tk_asleep && sysidle_state(st.s) ==
						      SYSIDLE_FULL_NOTED))) {
				reached = true;
				break;
			}
			if (pthread_cond_timedwait(&st.cv, &st.lock,
						   &deadline) == ETIMEDOUT)
				break;
		}
		if (!reached)
			failed_stretches++;
		atomic_store(&st.phase, PHASE_RANDOM);
		pthread_cond_broadcast(&st.cv);
		pthread_mutex_unlock(&st.lock);
	}

	atomic_store(&st.phase, PHASE_STOP);
	pthread_mutex_lock(&st.lock);
	pthread_cond_broadcast(&st.cv);
	pthread_mutex_unlock(&st.lock);
	for (unsigned int i = 0; i < nworkers; i++)
		pthread_join(w[i].thread, NULL);
	/* Every worker has left with its CPUs idle. The timekeeper is either
	 * awake, or asleep in FULL_NOTED with nothing pending: that is the
	 * only sleep without a wake-up, and we end it ourselves. */
	pthread_mutex_lock(&st.lock);
	end_state = sysidle_state(st.s);
	pending = atomic_load(&st.sleeps) - atomic_load(&st.wakes_sent);
	pthread_mutex_unlock(&st.lock);
	if (pending)
		sem_post(&st.wake);
	pthread_join(tk, NULL);

	fprintf(stderr,
		"# %u workers x %u CPUs (+ timekeeper), %.1f s, seed %llu: "
		"%lu random rounds, %lu long stretches (%lu failed), "
		"%lu busy checks, %lu violations, %lu timekeeper sleeps, "
		"%lu wakes sent, %lu forced exits, %lu scans\n",
		nworkers, cpus_per_worker, now_s() - t0,
		(unsigned long long)st.seed,
		atomic_load(&st.random_rounds), atomic_load(&st.long_stretches),
		failed_stretches, atomic_load(&st.busy_checks),
		atomic_load(&st.violations), atomic_load(&st.sleeps),
		atomic_load(&st.wakes_sent), atomic_load(&st.force_exits),
		atomic_load(&st.scans));

	ck_assert_msg(atomic_load(&st.violations) == 0,
		      "a busy worker saw the state at %s (seed %llu)",
		      sysidle_state_name(
			      (enum sysidle_state)atomic_load(
				      &st.violation_state)),
		      (unsigned long long)st.seed);
	ck_assert_msg(failed_stretches == 0,
		      "%lu of %lu long all-idle stretches did not reach "
		      "FULL_NOTED within %d s (seed %llu)",
		      failed_stretches, atomic_load(&st.long_stretches),
		      STRETCH_TIMEOUT_S, (unsigned long long)st.seed);
	/* Every sleep but a final one in FULL_NOTED ended by exactly one
	 * wake-up from the exit that cleared FULL_NOTED. */
	ck_assert_msg(pending == 0 ||
			      (pending == 1 && end_state == SYSIDLE_FULL_NOTED),
		      "%lu timekeeper sleeps, %lu wake-ups, final state %s "
		      "(seed %llu)", atomic_load(&st.sleeps),
		      atomic_load(&st.wakes_sent), sysidle_state_name(end_state),
		      (unsigned long long)st.seed);
	ck_assert_uint_ge(atomic_load(&st.long_stretches), 5);
	ck_assert_uint_gt(atomic_load(&st.busy_checks), 1000);

	sem_destroy(&st.wake);
	pthread_cond_destroy(&st.cv);
	pthread_mutex_destroy(&st.lock);
	sysidle_destroy(st.s);
}

START_TEST(test_stress_small_machine)
{
	/* 4 workers of 1 CPU + timekeeper: 5 CPUs, no delay, inline scan. */
	run_case(4, 1);
}
END_TEST

START_TEST(test_stress_large_machine)
{
	/* 4 workers of 8 CPUs + timekeeper: 33 CPUs, a 3 ms delay. */
	run_case(4, 8);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("sysidle-stress");
	TCase *tc = tcase_create("stress");
	double seconds = 10;
	const char *env = getenv("SYSIDLE_STRESS_SECONDS");
	SRunner *sr;
	int failed;

	if (env)
		seconds = atof(env);
	tcase_set_timeout(tc, seconds + 2 * STRETCH_TIMEOUT_S + 30);
	tcase_add_test(tc, test_stress_small_machine);
	tcase_add_test(tc, test_stress_large_machine);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_ENV);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
