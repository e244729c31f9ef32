// SPDX-License-Identifier: GPL-2.0-only
/*
 * burst.elf: busy bursts on random CPUs with idle gaps. Each of rounds=
 * (default 20) rounds lasts period= ms (default 50); one CPU picked at
 * random does work= (default 64) iterations of a fixed computation and then
 * spins out duty= percent (default 20) of the period, all others halt. CPU 0
 * keeps the tick (tick.c) at hz= (default 250; 0: none) and sleeps until
 * the round ends (wake_at_tsc: its one-shot LAPIC timer, or where its
 * LAPIC tick owns that timer another CPU's, or on one CPU the tick). seed=
 * fixes the sequence.
 *
 * report=N (default 0: none): every N rounds (at most 1000) one line
 *   # late: n=N p50_us=A p99_us=B max_us=C
 * the job's start delay over those rounds: how late CPU 0 woke from its
 * idle gap after the round's deadline (TSC at the wake minus the deadline),
 * as the guest sees it.
 *
 * The result line depends only on the options, seed= and the CPU count, so
 * runs can be compared (with and without the VMM's --sysidle):
 *   burst: rounds=R period=P ms duty=D% work=W cpus=N seed=S picks=a,b,.. checksum=0xX
 * picks = rounds per CPU; checksum folds, round by round, the result of the
 * work and the CPU that did it. Timings go to a "# burst: ..." line.
 */
#include "rt.h"

const char *guest_name = "burst";

static u64 rng;
static volatile u64 busy_ns_total;
static volatile u32 bursts_done, wakeups;
static u32 work_iters;
static volatile u64 work_result;
static volatile u32 work_cpu;

static u64 xorshift(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* splitmix64's finaliser: the unit of deterministic work */
static u64 mix(u64 x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 31;
	return x;
}

struct burst_arg {
	u64 busy_ns;
	u64 input;
};
static struct burst_arg barg;

static void burst(void *arg)
{
	const struct burst_arg *a = arg;
	u64 t0 = rdtsc();
	u64 x = a->input;

	for (u32 i = 0; i < work_iters; i++)
		x = mix(x + i);
	work_result = x;
	work_cpu = this_cpu()->index;
	while (tsc_to_ns(rdtsc() - t0) < a->busy_ns)
		cpu_relax();
	__atomic_fetch_add(&busy_ns_total, tsc_to_ns(rdtsc() - t0), __ATOMIC_SEQ_CST);
	__atomic_fetch_add(&bursts_done, 1, __ATOMIC_SEQ_CST);
}

#define LATE_MAX 1000
static u32 late_us[LATE_MAX];

/* The report= line over the @n start delays in late_us (sorted here). */
static void late_report(u32 n)
{
	for (u32 i = 1; i < n; i++) {
		u32 v = late_us[i], j = i;

		for (; j && late_us[j - 1] > v; j--)
			late_us[j] = late_us[j - 1];
		late_us[j] = v;
	}
	printf("# late: n=%u p50_us=%u p99_us=%u max_us=%u\n", n, late_us[n / 2],
	       late_us[(n * 99) / 100 < n ? (n * 99) / 100 : n - 1], late_us[n - 1]);
}

static void h_timer(struct irq_frame *f)
{
	(void)f;
	wakeups++;
}

void guest_main(void)
{
	u64 period_ms = cmdline_u64("period", 50);
	u64 duty = cmdline_u64("duty", 20);
	u32 rounds = (u32)cmdline_u64("rounds", 20);
	u32 report = (u32)cmdline_u64("report", 0), nlate = 0;
	u32 hz = (u32)cmdline_u64("hz", 250);
	u64 seed = cmdline_u64("seed", rdtsc());
	u32 per_cpu[MAX_CPUS] = { 0 };
	u64 checksum = mix(seed);
	u32 up;

	watchdog_start(cmdline_u64("timeout", 0)); /* a benchmark: off unless asked */
	work_iters = (u32)cmdline_u64("work", 64);
	if (duty > 100)
		duty = 100;
	if (!period_ms)
		period_ms = 1;
	rng = seed | 1;
	if (report > LATE_MAX)
		report = LATE_MAX;
	irq_set_handler(VEC_TIMER, h_timer);
	up = smp_boot();
	tick_start(hz);
	printf("# burst: %u cpus, rounds=%u period=%llu ms duty=%llu%% work=%u seed=%llu tick=%s hz=%u\n",
	       up, rounds, (unsigned long long)period_ms, (unsigned long long)duty, work_iters,
	       (unsigned long long)seed, tick_kind_name(), hz);

	u64 period = ns_to_tsc(period_ms * 1000000u);
	u64 busy_ns = period_ms * 1000000u * duty / 100;
	u64 start = rdtsc();
	u32 overruns = 0;
	for (u32 r = 0; r < rounds; r++) {
		u64 end = start + (r + 1) * period;
		u32 cpu = (u32)(xorshift() % nr_cpus);
		u32 want = bursts_done + 1;

		if (!percpus[cpu].online)
			cpu = 0;
		per_cpu[cpu]++;
		barg.busy_ns = busy_ns;
		barg.input = mix(seed ^ ((u64)r << 32) ^ cpu);
		if (cpu == 0)
			burst(&barg);
		else
			run_on_cpu_async(cpu, burst, &barg);
		/* idle gap: sleep until the round ends */
		irq_disable();
		for (u64 now = rdtsc(); now < end; now = rdtsc()) {
			watchdog_check();
			wake_at_tsc(VEC_TIMER, end);
			safe_halt();
			irq_disable();
		}
		if (report) {
			u64 now = rdtsc();

			late_us[nlate++] = (u32)(tsc_to_ns(now - end) / 1000u);
			if (nlate == report) {
				late_report(nlate);
				nlate = 0;
			}
		}
		wake_cancel();
		irq_enable();
		if (!wait_u32(&bursts_done, want, 10000000000ull)) {
			printf("FAIL - burst: cpu%u did not finish its burst\n", cpu);
			guest_exit(EXIT_FAIL);
		}
		/* late by more than a tenth of the period (plus a tick period
		 * where the tick, not a one-shot, ends the gap: one CPU) */
		if (rdtsc() > end + period / 10 +
				       (tick_owns_lapic_timer() && !tick_wake_relayed() ?
						ns_to_tsc(1000000000u / hz) : 0))
			overruns++;
		if (work_cpu != cpu) {
			printf("FAIL - burst: round %u ran on cpu%u, not cpu%u\n", r, work_cpu, cpu);
			guest_exit(EXIT_FAIL);
		}
		checksum = mix(checksum ^ work_result ^ ((u64)cpu << 48) ^ r);
	}
	u64 elapsed = tsc_to_ns(rdtsc() - start);
	u64 j = tick_sync();
	printf("# burst: busy=%llu ms elapsed=%llu ms load=%llu%% wakeups=%u overruns=%u "
	       "tick=%s jiffies=%llu expected=%llu\n",
	       (unsigned long long)(busy_ns_total / 1000000u), (unsigned long long)(elapsed / 1000000u),
	       (unsigned long long)(elapsed ? busy_ns_total * 100 / elapsed : 0), wakeups, overruns,
	       tick_kind_name(), (unsigned long long)j, (unsigned long long)tick_expected(rdtsc()));
	printf("burst: rounds=%u period=%llu ms duty=%llu%% work=%u cpus=%u seed=%llu picks=", rounds,
	       (unsigned long long)period_ms, (unsigned long long)duty, work_iters, nr_cpus,
	       (unsigned long long)seed);
	for (u32 i = 0; i < nr_cpus; i++)
		printf("%s%u", i ? "," : "", per_cpu[i]);
	printf(" checksum=0x%016llx\n", (unsigned long long)checksum);
	guest_exit(EXIT_OK);
}
