/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * sysidle-bench: the output. A table with one row per run, grouped by
 * (repeat, M) with sysidle's transitions/s over counter's, and the
 * medians over repeats; or one JSON object per run and line.
 */
#include <stdio.h>
#include <stdlib.h>

#include "sysidle/sysidle.h"

#include "sysidle-bench.h"

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

double median(double *v, size_t n)
{
	if (n == 0)
		return 0.0;
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

void print_json(const struct result *r)
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
void print_group(const struct result *g, int n)
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
struct result median_of_runs(const struct result *first, long n,
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

void print_header(void)
{
	printf("%-8s %7s %6s %14s %9s %10s %8s %6s %11s\n", "strategy",
	       "threads", "cpus", "transitions/s", "query ns", "scan ns",
	       "wakeups", "notes", "vs counter");
}
