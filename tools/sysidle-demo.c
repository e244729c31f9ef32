/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * sysidle-demo: the sysidle library at work on simulated CPUs.
 *
 * N CPU threads (vCPUs to be) do some work and go idle one after another;
 * a timekeeper thread (the VMM's housekeeping thread to be) ticks at HZ,
 * polls the state machine, and stops its tick once the whole machine is
 * FULL_NOTED. Then an "interrupt" wakes one CPU: its exit ends full idle and
 * wakes the timekeeper, which restarts its tick; the CPU goes idle again and
 * the state climbs back. Each state change is printed with its time.
 */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sysidle/sysidle.h"

#define MAX_DEMO_CPUS 64

static struct sysidle *machine;
static pthread_mutex_t print_lock = PTHREAD_MUTEX_INITIALIZER;
static struct timespec t0;
static unsigned int ncpus = 4;
static unsigned int hz = 250;
static sem_t tk_wake;                 /* the timekeeper's wake-up */
static sem_t cpu_irq[MAX_DEMO_CPUS]; /* an "interrupt" for each CPU */
static atomic_bool stopping;
static atomic_uint ticks;

static double elapsed_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (ts.tv_sec - t0.tv_sec) * 1e3 + (ts.tv_nsec - t0.tv_nsec) / 1e6;
}

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&print_lock);
	printf("%9.3f ms  ", elapsed_ms());
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
	pthread_mutex_unlock(&print_lock);
}

static void on_transition(void *arg, enum sysidle_state from,
			  enum sysidle_state to, int cpu, uint64_t now)
{
	(void)arg;
	(void)now;
	if (cpu >= 0)
		say("state %-10s -> %-10s (cpu %d left idle)",
		    sysidle_state_name(from), sysidle_state_name(to), cpu);
	else
		say("state %-10s -> %-10s (timekeeper)",
		    sysidle_state_name(from), sysidle_state_name(to));
}

static void sleep_ms(unsigned int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
		;
}

/* A CPU: work a little, go idle, and wait for an interrupt. */
static void *cpu_main(void *arg)
{
	unsigned int cpu = (unsigned int)(uintptr_t)arg;

	sleep_ms(20 + 15 * cpu); /* boot work, staggered */
	for (;;) {
		say("cpu %u idle (HLT)", cpu);
		sysidle_enter(machine, cpu);
		while (sem_wait(&cpu_irq[cpu]) == -1 && errno == EINTR)
			;
		if (atomic_load(&stopping))
			return NULL; /* shut down while idle */
		if (sysidle_exit(machine, cpu)) {
			say("cpu %u woke and ended full idle: waking the "
			    "timekeeper", cpu);
			sem_post(&tk_wake);
		} else {
			say("cpu %u woke", cpu);
		}
		sleep_ms(5); /* handle the interrupt */
	}
}

/* The timekeeper: tick at hz, poll, stop the tick when fully idle. */
static void *timekeeper_main(void *arg)
{
	struct timespec next;
	long period = 1000000000L / hz;

	(void)arg;
	clock_gettime(CLOCK_MONOTONIC, &next);
	while (!atomic_load(&stopping)) {
		next.tv_nsec += period;
		while (next.tv_nsec >= 1000000000L) {
			next.tv_nsec -= 1000000000L;
			next.tv_sec++;
		}
		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next,
				       NULL) == EINTR)
			;
		atomic_fetch_add(&ticks, 1);
		if (!sysidle_poll(machine))
			continue;
		say("timekeeper: whole machine idle, tick stopped after %u "
		    "ticks", atomic_load(&ticks));
		while (sem_wait(&tk_wake) == -1 && errno == EINTR)
			;
		if (atomic_load(&stopping))
			break;
		say("timekeeper: woken, tick restarted");
		atomic_store(&ticks, 0);
		clock_gettime(CLOCK_MONOTONIC, &next);
	}
	return NULL;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: sysidle-demo [--cpus N] [--hz HZ] [--idle-ms MS]\n"
		"Simulated CPUs go idle; the sysidle state machine climbs to\n"
		"FULL_NOTED and the timekeeper stops its tick; an interrupt to\n"
		"one CPU ends full idle and restarts the tick.\n"
		"  --cpus N      simulated CPUs, 1..%d (default 4; CPU 0 is the\n"
		"                timekeeper's own, excluded from the scan)\n"
		"  --hz HZ       timekeeper tick rate, 1..10000 (default 250)\n"
		"  --idle-ms MS  how long the machine stays fully idle before\n"
		"                each interrupt, 1..60000 (default 500)\n"
		"  --help        this text\n",
		MAX_DEMO_CPUS);
}

static unsigned int parse_uint(const char *opt, const char *arg,
			       unsigned int min, unsigned int max)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(arg, &end, 10);
	if (errno || *end || end == arg || v < min || v > max) {
		fprintf(stderr, "sysidle-demo: %s: '%s' is not a number in "
				"%u..%u\n", opt, arg, min, max);
		exit(2);
	}
	return (unsigned int)v;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "cpus", required_argument, NULL, 'c' },
		{ "hz", required_argument, NULL, 'z' },
		{ "idle-ms", required_argument, NULL, 'i' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	struct sysidle_config cfg;
	pthread_t cpu_thread[MAX_DEMO_CPUS], tk;
	unsigned int idle_ms = 500;
	int c;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'c': ncpus = parse_uint("--cpus", optarg, 1, MAX_DEMO_CPUS); break;
		case 'z': hz = parse_uint("--hz", optarg, 1, 10000); break;
		case 'i': idle_ms = parse_uint("--idle-ms", optarg, 1, 60000); break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "sysidle-demo: unexpected argument '%s'\n",
			argv[optind]);
		return 2;
	}

	sysidle_config_init(&cfg, ncpus);
	cfg.timekeeper = 0;
	cfg.on_transition = on_transition;
	machine = sysidle_create(&cfg);
	if (!machine) {
		perror("sysidle-demo: sysidle_create");
		return 1;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	printf("sysidle-demo: %u CPUs (CPU 0 is the timekeeper's), tick %u Hz, "
	       "delay %.3f ms\n", ncpus, hz, sysidle_delay_ns(machine) / 1e6);
	sem_init(&tk_wake, 0, 0);
	for (unsigned int i = 0; i < ncpus; i++)
		sem_init(&cpu_irq[i], 0, 0);
	if (pthread_create(&tk, NULL, timekeeper_main, NULL)) {
		fprintf(stderr, "sysidle-demo: cannot start the timekeeper\n");
		return 1;
	}
	/* CPU 0 belongs to the timekeeper; the others are worker CPUs. */
	for (unsigned int i = 1; i < ncpus; i++)
		if (pthread_create(&cpu_thread[i], NULL, cpu_main,
				   (void *)(uintptr_t)i)) {
			fprintf(stderr, "sysidle-demo: cannot start cpu %u\n", i);
			return 1;
		}

	/* Two rounds: idle, then an interrupt to the last CPU. */
	for (int round = 0; round < 2; round++) {
		sleep_ms(idle_ms + 20 * ncpus);
		say("interrupt for cpu %u", ncpus - 1);
		sem_post(&cpu_irq[ncpus - 1 > 0 ? ncpus - 1 : 0]);
	}
	sleep_ms(idle_ms);

	atomic_store(&stopping, true);
	sem_post(&tk_wake);
	pthread_join(tk, NULL);
	for (unsigned int i = 1; i < ncpus; i++) {
		sem_post(&cpu_irq[i]);
		pthread_join(cpu_thread[i], NULL);
	}
	printf("sysidle-demo: final state %s\n",
	       sysidle_state_name(sysidle_state(machine)));
	sysidle_destroy(machine);
	return 0;
}
