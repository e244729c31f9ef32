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
 *
 * This file is the command line and the order of the runs;
 * sysidle-bench-run.c is one run, sysidle-bench-report.c the output.
 */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sysidle/sysidle.h"

#include "sysidle-bench.h"

#define MAX_THREADS 4096
#define MAX_RUNS_CPUS 64         /* entries in --cpus */
#define NSTRAT 3

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
