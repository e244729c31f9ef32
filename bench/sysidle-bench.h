/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * sysidle-bench: what its parts share. sysidle-bench.c is the command
 * line (the options, the order of the runs), sysidle-bench-run.c one
 * run (the worker threads, the timekeeper thread, the measures),
 * sysidle-bench-report.c the output (the table, the JSON lines, the
 * medians over repeats).
 */
#ifndef SYSIDLE_BENCH_H
#define SYSIDLE_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The measures of one run: one strategy, one T, one M. */
struct result {
	int strategy;
	unsigned int threads, cpus;
	double transitions_per_s, query_ns, scan_ns;
	uint64_t wakeups, notes;
};

/* sysidle-bench-run.c */
/* Print "sysidle-bench: @what: <error @err>" and exit with status 1. */
void die(int err, const char *what);
/* calloc, or die() saying what could not be allocated. */
void *xcalloc(size_t n, size_t size, const char *what);
/* One run of @seconds: @threads workers on @cpus simulated CPUs. */
struct result bench_one(int strategy, unsigned int threads,
			 unsigned int cpus, double seconds, bool pin);

/* sysidle-bench-report.c */
/* The median of @v[0..@n) (sorted in place); 0 if @n is 0. */
double median(double *v, size_t n);
void print_json(const struct result *r);
void print_header(void);
void print_group(const struct result *g, int n);
struct result median_of_runs(const struct result *first, long n,
			     size_t stride, double *tmp);

#endif
