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
 *   mode=lapicwait: not a latency test. CPU 0 programs a periodic LAPIC
 *     timer at hz= (default 1000; never the pv tick) and halts until it has
 *     taken ticks= (default 1000) of them while every other CPU halts; a
 *     hypervisor that stops honouring guest timers hangs it. Prints
 *     "pingpong: lapicwait: ticks=N hz=H cpus=C elapsed=T us expected=X us",
 *     fails when the ticks came faster than the programmed rate.
 *
 *   mode=ipi and mode=timer print the min/median/max line, then
 *     "pingpong: MODE: p50=.. p99=.. ns" and "pingpong: MODE: samples=a,b,..
 *     ns" (every sample, in round order) for bench/vmm-rtt.py.
 *
 * Wake-up latencies for bench/latency.py (a long delay_us= so that the VM
 * can reach full idle in between under vmm --sysidle); rounds= as above,
 * hz=H (default 0) starts the pv tick on CPU 0 first (ignored where there
 * is none: the LAPIC tick would own CPU 0's timer). Each prints the
 * min/median/max line, then "pingpong: MODE: p50=.. p99=.. ns" and
 * "pingpong: MODE: samples=a,b,.. ns" (every sample, in round order):
 *   mode=sleep delay_us=D (50000): CPU 0 arms its LAPIC timer for D us
 *     (TSC-deadline mode when CPUID has it, else one-shot with the deadline
 *     taken just after the arming write) and halts, every other CPU halted;
 *     latency = handler TSC - deadline TSC. short_us=S (0: none): every
 *     odd round sleeps S us instead (a VM that alternates long idle
 *     stretches with short sleeps; the samples alternate likewise).
 *   mode=ipiwake delay_us=D (50000), 2 CPUs: CPU 1 arms its own timer for
 *     D us and halts, CPU 0 halts; CPU 1's timer handler stamps the TSC and
 *     sends a fixed IPI to CPU 0, whose handler stamps it again; latency =
 *     CPU 0 stamp - CPU 1 stamp (the IPI from a vCPU just woken by its
 *     timer).
 *   mode=echo: serial receive interrupt (IRQ 4 through the IOAPIC) on
 *     CPU 0, which halts; the handler writes every received byte straight
 *     back to the UART. Prints "pingpong: echo: ready" once the interrupt is
 *     on, and "pingpong: echo: rounds=N" after N bytes, exits 0. The host
 *     times the round trip (send '\n': the VMM flushes its stdout per
 *     line).
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

static volatile u32 lapic_ticks;
static void h_lapic_tick(struct irq_frame *f)
{
	(void)f;
	lapic_ticks++;
}

static __attribute__((noreturn)) void lapicwait(void)
{
	u32 hz = (u32)cmdline_u64("hz", 1000);
	u32 ticks = (u32)cmdline_u64("ticks", 1000);
	u32 up = smp_boot();
	u64 period_ns, t0, t1, elapsed_us, expected_us;

	if (!hz || hz > 100000)
		hz = 1000;
	if (!ticks)
		ticks = 1;
	period_ns = GUEST_APIC_TIMER_HZ / hz;
	printf("# pingpong: mode=lapicwait ticks=%u hz=%u cpus=%u %s\n", ticks, hz, up,
	       apic_x2 ? "x2apic" : "xapic");
	irq_set_handler(VEC_TIMER, h_lapic_tick);
	irq_disable();
	t0 = rdtsc();
	timer_periodic(VEC_TIMER, (u32)period_ns);
	/* halt until the ticks are in: nothing else can wake CPU 0 */
	while (lapic_ticks < ticks) {
		watchdog_check();
		safe_halt();
		irq_disable();
	}
	t1 = rdtsc();
	timer_stop();
	irq_enable();
	elapsed_us = tsc_to_ns(t1 - t0) / 1000u;
	expected_us = (u64)ticks * period_ns / 1000u;
	printf("pingpong: lapicwait: ticks=%u hz=%u cpus=%u elapsed=%llu us expected=%llu us\n",
	       ticks, hz, up, (unsigned long long)elapsed_us, (unsigned long long)expected_us);
	/* the TSC rate may be calibrated: allow 2% and one period of slack */
	if (elapsed_us * 100 + period_ns / 1000u * 100 < expected_us * 98) {
		printf("FAIL - pingpong: lapicwait: %u ticks in %llu us, faster than %u Hz\n", ticks,
		       (unsigned long long)elapsed_us, hz);
		guest_exit(EXIT_FAIL);
	}
	guest_exit(EXIT_OK);
}

/* ---- wake-up latencies: sleep, ipiwake, echo ---- */

#define VEC_WAKE1 0x72 /* CPU 1's timer in mode=ipiwake */
#define UART_RBR 0
#define UART_IER 1
#define UART_IIR 2
#define UART_LSR 5

static u64 order[MAX_ROUNDS]; /* the samples in round order */
static volatile u64 t_wake1;
static volatile u64 ipiwake_deadline;
static volatile u32 echo_bytes;
static bool have_tsc_deadline;

/* Halt (interrupts on) until *p reaches v or ns pass. */
static bool halt_until_ns(volatile u32 *p, u32 v, u64 ns)
{
	u64 end = rdtsc() + ns_to_tsc(ns);

	irq_disable();
	while (*p < v) {
		if (rdtsc() > end) {
			irq_enable();
			return false;
		}
		watchdog_check();
		safe_halt();
		irq_disable();
	}
	irq_enable();
	return true;
}

/* Arm the calling CPU's LAPIC timer; returns the deadline TSC. */
static u64 arm_timer(u8 vector, u64 deadline)
{
	if (have_tsc_deadline) {
		timer_tsc_deadline(vector, deadline);
		return deadline;
	}
	u64 now = rdtsc();

	timer_oneshot_ns(vector, deadline > now ? tsc_to_ns(deadline - now) : 1);
	return rdtsc() + (deadline > now ? deadline - now : 0);
}

static void h_wake1(struct irq_frame *f)
{
	(void)f;
	t_wake1 = rdtsc();
	apic_send_ipi(percpus[0].apic_id, APIC_ICR_DM_FIXED | VEC_PONG);
}

static void arm_on_cpu1(void *arg)
{
	(void)arg;
	arm_timer(VEC_WAKE1, ipiwake_deadline);
}

static void h_echo(struct irq_frame *f)
{
	u32 n = 0;

	(void)f;
	(void)inb(GUEST_PORT_COM1 + UART_IIR);
	while (n < 64 && (inb(GUEST_PORT_COM1 + UART_LSR) & 1)) {
		outb(GUEST_PORT_COM1, inb(GUEST_PORT_COM1 + UART_RBR));
		n++;
	}
	echo_bytes += n;
}

/* "pingpong: MODE: samples=a,b,.. ns": every sample, in round order. */
static void print_samples(const char *mode, u32 n)
{
	printf("pingpong: %s: samples=", mode);
	for (u32 i = 0; i < n; i++)
		printf("%s%llu", i ? "," : "", (unsigned long long)tsc_to_ns(order[i]));
	printf(" ns\n");
}

/* "pingpong: MODE: p50=.. p99=.. ns" from samples, sorted already. */
static void print_percentiles(const char *mode, u32 n)
{
	u32 p99 = (99 * n + 99) / 100; /* nearest rank: ceil(0.99 n) */

	printf("pingpong: %s: p50=%llu p99=%llu ns\n", mode,
	       (unsigned long long)tsc_to_ns(samples[n / 2]),
	       (unsigned long long)tsc_to_ns(samples[p99 ? p99 - 1 : 0]));
}

static void print_wake_stats(const char *mode, u32 n)
{
	char label[32];

	print_samples(mode, n);
	snprintf(label, sizeof(label), "pingpong: %s", mode);
	stats_print(label, samples, n); /* sorts samples */
	print_percentiles(mode, n);
}

static __attribute__((noreturn)) void wake_modes(const char *mode, u32 rounds)
{
	u64 delay_ns = cmdline_u64("delay_us", 50000) * 1000u;
	u64 short_ns = cmdline_u64("short_us", 0) * 1000u;
	u32 hz = (u32)cmdline_u64("hz", 0);
	bool ipiwake = !strncmp(mode, "ipiwake", 8), echo = !strncmp(mode, "echo", 5);
	u32 a, b, c, d, n = 0, up = 1;

	cpuid(1, 0, &a, &b, &c, &d);
	have_tsc_deadline = c & (1u << 24);
	if (nr_cpus > 1)
		up = smp_boot(); /* the other CPUs halt in their idle loop */
	if (ipiwake && (up < 2 || !percpus[1].online)) {
		printf("FAIL - pingpong: mode=ipiwake needs 2 cpus online\n");
		guest_exit(EXIT_FAIL);
	}
	if (hz && tick_pv_available())
		tick_start(hz);
	else if (hz)
		hz = 0; /* a LAPIC tick would own CPU 0's timer */
	printf("# pingpong: mode=%s rounds=%u delay_us=%llu short_us=%llu hz=%u tick=%s cpus=%u %s %s\n",
	       mode, rounds, (unsigned long long)(delay_ns / 1000u),
	       (unsigned long long)(short_ns / 1000u), hz, tick_kind_name(), up,
	       apic_x2 ? "x2apic" : "xapic", have_tsc_deadline ? "tsc-deadline" : "one-shot");
	irq_set_handler(VEC_WAKE1, h_wake1);
	irq_set_handler(VEC_SERIAL, h_echo);
	if (echo) {
		irq_disable();
		while (inb(GUEST_PORT_COM1 + UART_LSR) & 1) /* stale input */
			(void)inb(GUEST_PORT_COM1 + UART_RBR);
		outb(GUEST_PORT_COM1 + UART_IER, 0x01);
		ioapic_route(GUEST_IRQ_COM1, VEC_SERIAL, percpus[0].apic_id, false);
		printf("pingpong: echo: ready\n");
		while (echo_bytes < rounds) {
			watchdog_check();
			safe_halt();
			irq_disable();
		}
		outb(GUEST_PORT_COM1 + UART_IER, 0x00);
		irq_enable();
		printf("pingpong: echo: rounds=%u\n", rounds);
		guest_exit(EXIT_OK);
	}
	for (u32 i = 0; i < rounds; i++) {
		u64 dl;

		watchdog_check();
		if (ipiwake) {
			u32 h = pongs;

			ipiwake_deadline = rdtsc() + ns_to_tsc(delay_ns);
			run_on_cpu_async(1, arm_on_cpu1, NULL);
			if (!halt_until_ns(&pongs, h + 1, delay_ns + 1000000000ull))
				break;
			samples[n] = t_handler - t_wake1;
		} else {
			u32 h = timer_hits;
			u64 d = short_ns && (i & 1) ? short_ns : delay_ns;

			irq_disable();
			dl = arm_timer(VEC_TIMER, rdtsc() + ns_to_tsc(d));
			if (!halt_until_ns(&timer_hits, h + 1, d + 1000000000ull))
				break;
			samples[n] = t_handler > dl ? t_handler - dl : 0;
		}
		order[n] = samples[n];
		n++;
	}
	if (n < rounds) {
		printf("FAIL - pingpong: %s: round %u got no wake-up within 1 s of its deadline\n", mode,
		       n);
		guest_exit(EXIT_FAIL);
	}
	print_wake_stats(mode, n);
	guest_exit(EXIT_OK);
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
	if (cmdline_is("mode", "lapicwait"))
		lapicwait();
	if (cmdline_is("mode", "sleep"))
		wake_modes("sleep", rounds);
	if (cmdline_is("mode", "ipiwake"))
		wake_modes("ipiwake", rounds);
	if (cmdline_is("mode", "echo"))
		wake_modes("echo", rounds);
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
		samples[n] = t_handler - t0;
		order[n] = samples[n];
		n++;
	}
	if (n < rounds) {
		printf("FAIL - pingpong: round %u got no answer within 1 s\n", n);
		guest_exit(EXIT_FAIL);
	}
	stats_print(timer ? "pingpong: timer" : "pingpong: ipi", samples, n); /* sorts */
	print_percentiles(timer ? "timer" : "ipi", n);
	print_samples(timer ? "timer" : "ipi", n);
	guest_exit(EXIT_OK);
}
