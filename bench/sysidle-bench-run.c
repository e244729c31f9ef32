/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * sysidle-bench: one run (sysidle-bench.c says what a run is). The worker
 * threads drive their CPUs through exit+enter blips, the timekeeper
 * thread times batches of sysidle_scan() and sysidle_is_idle() each tick;
 * bench_one() starts them, opens and closes the window and gathers the
 * measures.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sysidle/sysidle.h"

#include "sysidle-bench.h"

#define TICK_NS 1000000LL        /* timekeeper period: 1 kHz */
#define STOP_EVERY 64            /* blips between two looks at the stop flag */
/*
 * Timing one call alone would mostly measure the clock: a clock_gettime()
 * costs tens of ns and CLOCK_MONOTONIC may advance in steps of several ns
 * (10 ns on some virtual machines), while sysidle_is_idle() is one load.
 * So each tick times a batch of calls and divides, and each batch size
 * adapts (doubling or halving once per tick) until a batch lasts about
 * BATCH_TARGET_NS: the clock's cost and granularity are then a few percent
 * of it at most.
 * Samples are kept once the batches have stopped growing. A query batch
 * ends early at the first true answer, where a real timekeeper would stop
 * (otherwise a naive strategy could note, be woken and note again many
 * times per tick); such a short batch weighs the clock's cost more, which
 * only matters on ticks that see the machine idle. Repeated scans may
 * advance the sysidle state machine several steps in one tick, as
 * sysidle_poll() does itself on small machines (on larger ones the delay
 * holds the state at SHORT while the workers run).
 */
#define BATCH_TARGET_NS 2000
#define BATCH_MAX 1024

struct worker {
	pthread_t tid;
	struct run *run;
	unsigned int id;
	uint64_t calls;   /* enter + exit calls in the window */
	uint64_t wakeups; /* sysidle_exit() returned true */
} __attribute__((aligned(64))); /* results of different threads apart */

struct run {
	struct sysidle *s;
	unsigned int threads, cpus;
	bool pin;
	long ncpu_online;
	pthread_barrier_t start;
	_Atomic bool stop __attribute__((aligned(64))); /* alone: read-mostly */
	/* Timekeeper's own data, written only by it. */
	pthread_t tk_tid __attribute__((aligned(64)));
	double *query_ns, *scan_ns;
	size_t nsamples, maxsamples;
	uint64_t notes; /* ticks where sysidle_is_idle() said true */
};

void die(int err, const char *what)
{
	fprintf(stderr, "sysidle-bench: %s: %s\n", what, strerror(err));
	exit(1);
}

static int64_t now_ns(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_MONOTONIC, &ts))
		die(errno, "clock_gettime");
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void sleep_until(int64_t t)
{
	struct timespec ts = { .tv_sec = t / 1000000000LL,
			       .tv_nsec = t % 1000000000LL };
	int err;

	while ((err = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts,
				      NULL)) == EINTR)
		;
	if (err)
		die(err, "clock_nanosleep");
}

static void barrier_wait(pthread_barrier_t *b)
{
	int err = pthread_barrier_wait(b);

	if (err && err != PTHREAD_BARRIER_SERIAL_THREAD)
		die(err, "pthread_barrier_wait");
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct run *r = w->run;
	struct sysidle *s = r->s;
	const unsigned int step = r->threads, first = w->id, m = r->cpus;
	unsigned int c = first;
	uint64_t calls = 0, wakeups = 0;

	if (r->pin) {
		cpu_set_t set;
		int err;

		CPU_ZERO(&set);
		CPU_SET(w->id % (unsigned long)r->ncpu_online, &set);
		err = pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
		if (err)
			die(err, "pthread_setaffinity_np");
	}
	/* Every CPU starts busy; ours go idle before the window opens. */
	for (unsigned int i = first; i < m; i += step)
		sysidle_enter(s, i);
	barrier_wait(&r->start);
	while (!atomic_load_explicit(&r->stop, memory_order_relaxed)) {
		for (int i = 0; i < STOP_EVERY; i++) {
			if (sysidle_exit(s, c))
				wakeups++; /* would wake the timekeeper */
			sysidle_enter(s, c);
			c += step;
			if (c >= m)
				c = first;
		}
		calls += 2 * STOP_EVERY;
	}
	w->calls = calls;
	w->wakeups = wakeups;
	return NULL;
}

/* Move @batch toward BATCH_TARGET_NS after a batch took @ns; true if grown. */
static bool adapt(unsigned int *batch, int64_t ns)
{
	if (ns < BATCH_TARGET_NS / 2 && *batch < BATCH_MAX) {
		*batch *= 2;
		return true;
	}
	if (ns > BATCH_TARGET_NS * 2 && *batch > 1)
		*batch /= 2;
	return false;
}

static void *timekeeper_main(void *arg)
{
	struct run *r = arg;
	struct sysidle *s = r->s;
	unsigned int sb = 1, qb = 1; /* scan and query batch sizes */
	double scan_ns = 0, query_ns = 0;
	bool settled = false, grew;
	int64_t next;

	barrier_wait(&r->start);
	next = now_ns();
	for (;;) {
		int64_t t0, t1, t2;
		unsigned int nq = 0;
		bool idle = false;

		t0 = now_ns();
		for (unsigned int i = 0; i < sb; i++)
			sysidle_scan(s);
		t1 = now_ns();
		while (nq < qb && !idle) {
			idle = sysidle_is_idle(s);
			nq++;
		}
		t2 = now_ns();
		/* Simulated: a real timekeeper would stop its tick here and
		 * wait to be woken; we only count it and keep going. */
		if (idle)
			r->notes++;
		scan_ns = (double)(t1 - t0) / sb;
		query_ns = (double)(t2 - t1) / nq;
		grew = adapt(&sb, t1 - t0);
		if (idle) /* a cut-short batch says nothing about its size */
			grew = true;
		else
			grew |= adapt(&qb, t2 - t1);
		settled |= !grew;
		if (settled && r->nsamples < r->maxsamples) {
			r->scan_ns[r->nsamples] = scan_ns;
			r->query_ns[r->nsamples] = query_ns;
			r->nsamples++;
		}
		if (atomic_load_explicit(&r->stop, memory_order_relaxed))
			break;
		next += TICK_NS;
		if (next < t2) /* fell behind (preempted): don't burst */
			next = t2 + TICK_NS;
		sleep_until(next);
		if (atomic_load_explicit(&r->stop, memory_order_relaxed))
			break;
	}
	if (r->nsamples == 0) { /* a very short run: keep the last tick */
		r->scan_ns[0] = scan_ns;
		r->query_ns[0] = query_ns;
		r->nsamples = 1;
	}
	return NULL;
}

void *xcalloc(size_t n, size_t size, const char *what)
{
	void *p = calloc(n, size);

	if (!p)
		die(ENOMEM, what);
	return p;
}

struct result bench_one(int strategy, unsigned int threads,
			unsigned int cpus, double seconds, bool pin)
{
	struct sysidle_config cfg;
	struct run r = { .threads = threads, .cpus = cpus, .pin = pin };
	struct worker *w;
	struct result res = { .strategy = strategy, .threads = threads,
			      .cpus = cpus };
	uint64_t calls = 0;
	int64_t t0, t1;
	int err;

	sysidle_config_init(&cfg, cpus);
	cfg.strategy = (enum sysidle_strategy)strategy;
	r.s = sysidle_create(&cfg);
	if (!r.s)
		die(errno, "sysidle_create");
	r.ncpu_online = sysconf(_SC_NPROCESSORS_ONLN);
	if (r.ncpu_online < 1)
		r.ncpu_online = 1;
	atomic_init(&r.stop, false);
	r.maxsamples = (size_t)(seconds * 1000.0) + 2; /* ticks + slack */
	r.query_ns = xcalloc(r.maxsamples, sizeof(double), "query samples");
	r.scan_ns = xcalloc(r.maxsamples, sizeof(double), "scan samples");
	w = aligned_alloc(64, sizeof(*w) * threads);
	if (!w)
		die(ENOMEM, "worker array");
	memset(w, 0, sizeof(*w) * threads);

	/* Workers + timekeeper + this thread. */
	err = pthread_barrier_init(&r.start, NULL, threads + 2);
	if (err)
		die(err, "pthread_barrier_init");
	for (unsigned int t = 0; t < threads; t++) {
		w[t].run = &r;
		w[t].id = t;
		err = pthread_create(&w[t].tid, NULL, worker_main, &w[t]);
		if (err)
			die(err, "pthread_create (worker)");
	}
	err = pthread_create(&r.tk_tid, NULL, timekeeper_main, &r);
	if (err)
		die(err, "pthread_create (timekeeper)");

	barrier_wait(&r.start);
	t0 = now_ns();
	sleep_until(t0 + (int64_t)(seconds * 1e9));
	/* The window closes here; workers finish at most STOP_EVERY blips
	 * more, a few microseconds, which we accept as noise. */
	t1 = now_ns();
	atomic_store_explicit(&r.stop, true, memory_order_relaxed);
	for (unsigned int t = 0; t < threads; t++) {
		err = pthread_join(w[t].tid, NULL);
		if (err)
			die(err, "pthread_join (worker)");
		calls += w[t].calls;
		res.wakeups += w[t].wakeups;
	}
	err = pthread_join(r.tk_tid, NULL);
	if (err)
		die(err, "pthread_join (timekeeper)");
	err = pthread_barrier_destroy(&r.start);
	if (err)
		die(err, "pthread_barrier_destroy");

	res.transitions_per_s = (double)calls / ((double)(t1 - t0) / 1e9);
	res.query_ns = median(r.query_ns, r.nsamples);
	res.scan_ns = median(r.scan_ns, r.nsamples);
	res.notes = r.notes;
	free(r.query_ns);
	free(r.scan_ns);
	free(w);
	sysidle_destroy(r.s);
	return res;
}
