// SPDX-License-Identifier: GPL-2.0-only
/*
 * burst.elf: busy bursts on random CPUs with idle gaps. Each of rounds=
 * (default 20) rounds lasts period= ms (default 50); one CPU picked at
 * random spins for duty= percent (default 20) of it, all others halt. CPU 0
 * sleeps on the one-shot LAPIC timer until the round ends. seed= fixes the
 * sequence. Prints a result line and exits 0.
 */
#include "rt.h"

const char *guest_name = "burst";

static u64 rng;
static volatile u64 busy_ns_total;
static volatile u32 bursts_done, wakeups;

static u64 xorshift(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static void burst(void *arg)
{
	u64 ns = (u64)(uintptr_t)arg;
	u64 t0 = rdtsc();

	udelay_tsc(ns);
	__atomic_fetch_add(&busy_ns_total, tsc_to_ns(rdtsc() - t0), __ATOMIC_SEQ_CST);
	__atomic_fetch_add(&bursts_done, 1, __ATOMIC_SEQ_CST);
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
	u32 per_cpu[MAX_CPUS] = { 0 };
	u32 up;

	watchdog_start(cmdline_u64("timeout", 0)); /* a benchmark: off unless asked */
	if (duty > 100)
		duty = 100;
	if (!period_ms)
		period_ms = 1;
	rng = cmdline_u64("seed", rdtsc()) | 1;
	irq_set_handler(VEC_TIMER, h_timer);
	up = smp_boot();
	printf("# burst: %u cpus, rounds=%u period=%llu ms duty=%llu%%\n", up, rounds,
	       (unsigned long long)period_ms, (unsigned long long)duty);

	u64 period = ns_to_tsc(period_ms * 1000000u);
	u64 busy_ns = period_ms * 1000000u * duty / 100;
	u64 start = rdtsc();
	for (u32 r = 0; r < rounds; r++) {
		u64 end = start + (r + 1) * period;
		u32 cpu = (u32)(xorshift() % nr_cpus);
		u32 want = bursts_done + 1;

		if (!percpus[cpu].online)
			cpu = 0;
		per_cpu[cpu]++;
		if (busy_ns) {
			if (cpu == 0)
				burst((void *)(uintptr_t)busy_ns);
			else
				run_on_cpu_async(cpu, burst, (void *)(uintptr_t)busy_ns);
		}
		/* idle gap: sleep on the one-shot timer until the round ends */
		irq_disable();
		for (u64 now = rdtsc(); now < end; now = rdtsc()) {
			u64 ns = tsc_to_ns(end - now);

			watchdog_check();
			timer_oneshot(VEC_TIMER, ns > 0xffffffffu ? 0xffffffffu : (u32)ns);
			safe_halt();
			irq_disable();
		}
		timer_stop();
		irq_enable();
		if (busy_ns && !wait_u32(&bursts_done, want, 10000000000ull)) {
			printf("FAIL - burst: cpu%u did not finish its burst\n", cpu);
			guest_exit(EXIT_FAIL);
		}
	}
	u64 elapsed = tsc_to_ns(rdtsc() - start);
	printf("burst: rounds=%u period=%llu ms duty=%llu%% busy=%llu ms elapsed=%llu ms "
	       "load=%llu%% cpus=%u wakeups=%u picks=",
	       rounds, (unsigned long long)period_ms, (unsigned long long)duty,
	       (unsigned long long)(busy_ns_total / 1000000u), (unsigned long long)(elapsed / 1000000u),
	       (unsigned long long)(elapsed ? busy_ns_total * 100 / elapsed : 0), up, wakeups);
	for (u32 i = 0; i < nr_cpus; i++)
		printf("%s%u", i ? "," : "", per_cpu[i]);
	printf("\n");
	guest_exit(EXIT_OK);
}
