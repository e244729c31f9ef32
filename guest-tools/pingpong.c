// SPDX-License-Identifier: GPL-2.0-only
/*
 * pingpong.elf: round-trip latencies, from the TSC, printed as min / median
 * / max in ns; exits 0.
 *   mode=ipi (default): CPU 0 sends a fixed IPI to CPU 1 and halts; CPU 1,
 *     woken from HLT, answers with an IPI from its handler; CPU 0 measures
 *     send -> answer handler. Needs 2 CPUs.
 *   mode=timer: CPU 0 arms the one-shot LAPIC timer for the shortest delay
 *     (initial count 1) and halts; measures arm -> handler.
 *   rounds=N (default 1000, at most 4096).
 */
#include "rt.h"
#include "stats.h"

const char *guest_name = "pingpong";

#define MAX_ROUNDS 4096
static u64 samples[MAX_ROUNDS];
static volatile u32 pongs, timer_hits;
static volatile u64 t_handler;

static void h_ping(struct irq_frame *f)
{
	(void)f;
	apic_send_ipi(percpus[0].apic_id, APIC_ICR_DM_FIXED | VEC_PONG);
}

static void h_pong(struct irq_frame *f)
{
	(void)f;
	t_handler = rdtsc();
	pongs++;
}

static void h_timer(struct irq_frame *f)
{
	(void)f;
	t_handler = rdtsc();
	timer_hits++;
}

/* Halt (interrupts on) until *p reaches v; the watchdog bounds it. */
static bool halt_until(volatile u32 *p, u32 v)
{
	u64 end = rdtsc() + ns_to_tsc(1000000000ull);

	irq_disable();
	while (*p < v) {
		if (rdtsc() > end) {
			irq_enable();
			return false;
		}
		safe_halt();
		irq_disable();
	}
	irq_enable();
	return true;
}

void guest_main(void)
{
	u32 rounds = (u32)cmdline_u64("rounds", 1000);
	bool timer = cmdline_is("mode", "timer");
	u32 n = 0;

	watchdog_start(cmdline_u64("timeout", 0)); /* a benchmark: off unless asked */
	if (rounds > MAX_ROUNDS)
		rounds = MAX_ROUNDS;
	if (!rounds)
		rounds = 1;
	irq_set_handler(VEC_PING, h_ping);
	irq_set_handler(VEC_PONG, h_pong);
	irq_set_handler(VEC_TIMER, h_timer);
	if (!timer) {
		if (smp_boot() < 2 || !percpus[1].online) {
			printf("FAIL - pingpong: mode=ipi needs 2 cpus online\n");
			guest_exit(EXIT_FAIL);
		}
	}
	printf("# pingpong: mode=%s rounds=%u cpus=%u %s\n", timer ? "timer" : "ipi", rounds,
	       cpus_online, apic_x2 ? "x2apic" : "xapic");
	for (u32 i = 0; i < rounds; i++) {
		u64 t0;

		watchdog_check();
		if (timer) {
			u32 h = timer_hits;

			t0 = rdtsc();
			timer_oneshot(VEC_TIMER, 1);
			if (!halt_until(&timer_hits, h + 1))
				break;
		} else {
			u32 h = pongs;

			t0 = rdtsc();
			apic_send_ipi(percpus[1].apic_id, APIC_ICR_DM_FIXED | VEC_PING);
			if (!halt_until(&pongs, h + 1))
				break;
		}
		samples[n++] = t_handler - t0;
	}
	if (n < rounds) {
		printf("FAIL - pingpong: round %u got no answer within 1 s\n", n);
		guest_exit(EXIT_FAIL);
	}
	stats_print(timer ? "pingpong: timer" : "pingpong: ipi", samples, n);
	guest_exit(EXIT_OK);
}
