/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * sysidle-bench: throughput of the idle entry/exit hot path and cost of the
 * timekeeper's query, for each strategy of the sysidle library.
 *
 * T worker threads drive M simulated CPUs; thread t owns the CPUs c with
 * c % T == t. Like a VMM's vCPUs, the CPUs are mostly idle: each thread
 * first puts all its CPUs idle, then loops round-robin over them doing
 * sysidle_exit(c) + sysidle_enter(c), a brief busy blip, as fast as it can.
 * Meanwhile a timekeeper thread wakes every millisecond and times
 * sysidle_scan() and sysidle_is_idle(). One run = one strategy, one T, one
 * M, for --seconds; runs are interleaved (repeat, M, strategy) so that the
 * compared strategies run side by side under the same machine noise.
 */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sysidle/sysidle.h"

#define MAX_THREADS 4096
#define MAX_RUNS_CPUS 64         /* entries in --cpus */
#define NSTRAT 3
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

struct result {
	int strategy;
	unsigned int threads, cpus;
	double transitions_per_s, query_ns, scan_ns;
	uint64_t wakeups, notes;
};

static void die(int err, const char *what)
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

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double median(double *v, size_t n)
{
	if (n == 0)
		return 0.0;
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void *xcalloc(size_t n, size_t size, const char *what)
{
	void *p = calloc(n, size);

	if (!p)
		die(ENOMEM, what);
	return p;
}

static struct result bench_one(int strategy, unsigned int threads,
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

static void print_json(const struct result *r)
{
	printf("{\"strategy\":\"%s\",\"threads\":%u,\"cpus\":%u,"
	       "\"transitions_per_s\":%.0f,\"query_ns_median\":%.1f,"
	       "\"scan_ns_median\":%.1f}\n",
	       sysidle_strategy_name((enum sysidle_strategy)r->strategy),
	       r->threads, r->cpus, r->transitions_per_s, r->query_ns,
	       r->scan_ns);
	fflush(stdout);
}

/* One group = the runs of every strategy for one (repeat, M). */
static void print_group(const struct result *g, int n)
{
	double sys = 0, cnt = 0;

	for (int i = 0; i < n; i++) {
		if (g[i].strategy == SYSIDLE_STRATEGY_SYSIDLE)
			sys = g[i].transitions_per_s;
		if (g[i].strategy == SYSIDLE_STRATEGY_COUNTER)
			cnt = g[i].transitions_per_s;
	}
	for (int i = 0; i < n; i++) {
		printf("%-8s %7u %6u %14.0f %9.1f %10.1f %8llu %6llu",
		       sysidle_strategy_name((enum sysidle_strategy)g[i].strategy),
		       g[i].threads, g[i].cpus, g[i].transitions_per_s,
		       g[i].query_ns, g[i].scan_ns,
		       (unsigned long long)g[i].wakeups,
		       (unsigned long long)g[i].notes);
		if (g[i].strategy == SYSIDLE_STRATEGY_SYSIDLE && cnt > 0)
			printf(" %10.2fx", sys / cnt);
		putchar('\n');
	}
	fflush(stdout);
}

/* The median over @n repeats of every column of one (M, strategy) run;
 * @first is the first repeat's run, the next one @stride runs further. */
static struct result median_of_runs(const struct result *first, long n,
				    size_t stride, double *tmp)
{
	struct result m = *first;

#define MEDIAN_OF(f)                                                        \
	do {                                                                \
		for (long j = 0; j < n; j++)                                \
			tmp[j] = (double)first[(size_t)j * stride].f;       \
		m.f = (__typeof__(m.f))median(tmp, (size_t)n);              \
	} while (0)
	MEDIAN_OF(transitions_per_s);
	MEDIAN_OF(query_ns);
	MEDIAN_OF(scan_ns);
	MEDIAN_OF(wakeups);
	MEDIAN_OF(notes);
#undef MEDIAN_OF
	return m;
}

static void print_header(void)
{
	printf("%-8s %7s %6s %14s %9s %10s %8s %6s %11s\n", "strategy",
	       "threads", "cpus", "transitions/s", "query ns", "scan ns",
	       "wakeups", "notes", "vs counter");
}

static void usage(FILE *f)
{
	fprintf(f,
"Usage: sysidle-bench [OPTION]...\n"
"Benchmark the sysidle library's strategies: T threads drive M simulated\n"
"CPUs through idle exit+enter blips as fast as they can while a timekeeper\n"
"thread runs sysidle_scan() and sysidle_is_idle() at 1 kHz.\n"
"\n"
"  --threads T      worker threads, 1..4096 (default: online CPUs here)\n"
"  --cpus LIST      comma-separated CPU counts, each 1..65536 and >= T\n"
"                   (default 8,16,32,64,128,256,512,1024; with the default\n"
"                   list, counts below T are skipped)\n"
"  --strategy LIST  comma-separated strategies among sysidle,counter,scan\n"
"                   (default: all three)\n"
"  --seconds S      length of each run, 0.001..3600, fractional allowed\n"
"                   (default 1)\n"
"  --repeat R       repeat the whole set R times (1..1000, default 1),\n"
"                   interleaved: for each repeat, for each M, every\n"
"                   strategy; the table then ends with medians per run\n"
"  --pin            pin worker t to host CPU t %% (online CPUs)\n"
"  --json           instead of a table, one JSON object per run and line:\n"
"                   strategy, threads, cpus, transitions_per_s,\n"
"                   query_ns_median, scan_ns_median\n"
"  --help           show this help and exit\n"
"\n"
"transitions_per_s counts sysidle_enter + sysidle_exit calls of all threads\n"
"per second of the run's window. Each timekeeper tick times a batch of\n"
"calls and divides; the medians over the ticks are per call, in ns. The\n"
"table also shows wake-ups (sysidle_exit returned true), notes (ticks where\n"
"sysidle_is_idle said the machine was fully idle) and, on sysidle rows,\n"
"sysidle's transitions/s over counter's. The naive strategies can wake more\n"
"often than they note: a query that notes and then takes the note back may\n"
"be seen by an exiting CPU in between.\n");
}

/* A usage error: say what is wrong and exit with status 2. */
static void __attribute__((format(printf, 1, 2), noreturn))
bad(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "sysidle-bench: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nTry 'sysidle-bench --help'.\n");
	exit(2);
}

static long parse_long(const char *s, long lo, long hi, const char *what)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi)
		bad("bad %s '%s' (want %ld..%ld)", what, s, lo, hi);
	return v;
}

/* Long options only; their values stay clear of short option letters. */
enum { OPT_THREADS = 256, OPT_CPUS, OPT_STRATEGY, OPT_SECONDS, OPT_REPEAT,
       OPT_PIN, OPT_JSON, OPT_HELP };

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "threads", required_argument, NULL, OPT_THREADS },
		{ "cpus", required_argument, NULL, OPT_CPUS },
		{ "strategy", required_argument, NULL, OPT_STRATEGY },
		{ "seconds", required_argument, NULL, OPT_SECONDS },
		{ "repeat", required_argument, NULL, OPT_REPEAT },
		{ "pin", no_argument, NULL, OPT_PIN },
		{ "json", no_argument, NULL, OPT_JSON },
		{ "help", no_argument, NULL, OPT_HELP },
		{ NULL, 0, NULL, 0 },
	};
	unsigned int cpus[MAX_RUNS_CPUS] = { 8, 16, 32, 64, 128, 256, 512, 1024 };
	int ncpus = 8, strat[NSTRAT] = { 0, 1, 2 }, nstrat = NSTRAT;
	bool cpus_given = false, json = false, pin = false;
	long threads = sysconf(_SC_NPROCESSORS_ONLN), repeat = 1;
	double seconds = 1.0;
	struct result group[NSTRAT], *all;
	double *tmp;
	char *end, *tok;
	int opt, n;

	if (threads < 1)
		threads = 1;
	if (threads > MAX_THREADS)
		threads = MAX_THREADS;
	opterr = 0;
	while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (opt) {
		case OPT_THREADS:
			threads = parse_long(optarg, 1, MAX_THREADS, "--threads");
			break;
		case OPT_CPUS:
			cpus_given = true;
			ncpus = 0;
			while ((tok = strsep(&optarg, ","))) {
				if (ncpus == MAX_RUNS_CPUS)
					bad("more than %d entries in --cpus",
					    MAX_RUNS_CPUS);
				cpus[ncpus++] = (unsigned int)parse_long(
					tok, 1, SYSIDLE_MAX_CPUS, "--cpus entry");
			}
			break;
		case OPT_STRATEGY:
			nstrat = 0;
			while ((tok = strsep(&optarg, ","))) {
				int st = sysidle_strategy_parse(tok);

				if (st < 0)
					bad("unknown strategy '%s' (want sysidle, "
					    "counter or scan)", tok);
				for (int i = 0; i < nstrat; i++)
					if (strat[i] == st)
						bad("strategy '%s' listed twice", tok);
				if (nstrat == NSTRAT) /* unreachable */
					bad("too many strategies");
				strat[nstrat++] = st;
			}
			break;
		case OPT_SECONDS:
			errno = 0;
			seconds = strtod(optarg, &end);
			/* The range test also rejects NaN and infinities. */
			if (errno || end == optarg || *end ||
			    !(seconds >= 0.001 && seconds <= 3600))
				bad("bad --seconds '%s' (want 0.001..3600)", optarg);
			break;
		case OPT_REPEAT:
			repeat = parse_long(optarg, 1, 1000, "--repeat");
			break;
		case OPT_PIN:
			pin = true;
			break;
		case OPT_JSON:
			json = true;
			break;
		case OPT_HELP:
			usage(stdout);
			return 0;
		default:
			for (const struct option *o = opts; o->name; o++)
				if (optopt && o->val == optopt)
					bad(o->has_arg ? "option '--%s' needs a value"
						       : "option '--%s' takes no value",
					    o->name);
			if (optopt > 0 && optopt < 256)
				bad("unknown option '-%c'", optopt);
			bad("unknown option '%s'", argv[optind - 1]);
		}
	}
	if (optind < argc)
		bad("unexpected argument '%s'", argv[optind]);

	/* Every thread must own at least one CPU. */
	n = 0;
	for (int i = 0; i < ncpus; i++) {
		if (cpus[i] >= (unsigned long)threads) {
			cpus[n++] = cpus[i];
		} else if (cpus_given) {
			bad("--cpus entry %u is below --threads %ld", cpus[i],
			    threads);
		} else {
			fprintf(stderr, "sysidle-bench: skipping %u CPUs "
				"(fewer than %ld threads)\n", cpus[i], threads);
		}
	}
	if (n == 0)
		bad("no default CPU count is >= %ld threads; use --cpus", threads);
	ncpus = n;

	/* Every run, in order: [repeat][M][strategy]. */
	all = xcalloc((size_t)repeat * (size_t)ncpus * (size_t)nstrat,
		      sizeof(*all), "results");
	tmp = xcalloc((size_t)repeat, sizeof(*tmp), "medians");
	if (!json) {
		printf("# %ld threads, %g s per run, %ld repeat(s), "
		       "timekeeper at 1 kHz%s\n", threads, seconds, repeat,
		       pin ? ", workers pinned" : "");
		print_header();
	}
	for (long rep = 0; rep < repeat; rep++) {
		for (int i = 0; i < ncpus; i++) {
			struct result *g = &all[((size_t)rep * ncpus + i) * nstrat];

			for (int k = 0; k < nstrat; k++) {
				g[k] = bench_one(strat[k], (unsigned int)threads,
						 cpus[i], seconds, pin);
				if (json)
					print_json(&g[k]);
			}
			if (!json)
				print_group(g, nstrat);
		}
	}
	if (!json && repeat > 1) {
		printf("\n# median of %ld repeats\n", repeat);
		print_header();
		for (int i = 0; i < ncpus; i++) {
			for (int k = 0; k < nstrat; k++)
				group[k] = median_of_runs(&all[(size_t)i * nstrat + k],
							  repeat,
							  (size_t)ncpus * nstrat, tmp);
			print_group(group, nstrat);
		}
	}
	free(tmp);
	free(all);
	return 0;
}
