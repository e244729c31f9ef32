// SPDX-License-Identifier: GPL-2.0-only
/*
 * idle.elf: bring every CPU up, then idle in HLT forever; CPU 0 keeps the
 * tick at hz= (default 250; hz=0: no tick at all), the pv tick when the VMM
 * offers it, else a periodic LAPIC timer (tick.c), and counts jiffies.
 *
 * Serial input (IRQ 4 through the IOAPIC, to CPU 0) wakes CPU 0: it reads and
 * discards the bytes and reports its jiffies against the TSC, then idles on.
 * sleep=S: CPU 0 sleeps S seconds (wake_at_tsc: a one-shot LAPIC timer, or
 * with the LAPIC tick on CPU 0's timer another CPU's, or on one CPU the
 * first tick at or after the deadline), reports the same way and exits 0
 * when jiffies are right, 1 when not. Before it reports, jiffies behind the
 * TSC are given time to catch up (a VMM that held the tick back in full
 * idle may deliver the missed ticks after the wake-up): it waits while they
 * gain on the TSC, and stops waiting once they are right or have not gained
 * for settle= ms (default 300). A report:
 *   idle: woken by serial|timer: jiffies=J expected=E
 *   idle: jiffies ok            (|J - E| <= 1)
 *   idle: jiffies off by D      (D = J - E, signed)
 *   # idle: ... N ms waited for late ticks ...
 * where E = floor(TSC time since tick start * hz), the TSC time being that
 * of the last tick taken (LAPIC ticks: one due since may be on its way) or
 * now (pv tick: MISSED counts to now).
 *
 * fill=MiB (seed=S, default 1): before the tick starts, MiB of RAM from
 * 64 MiB on are filled with a pattern of each page's address and S
 * (memfill.c), and its checksum printed; after each serial report the
 * region is checked again (interrupts on):
 *   idle: memory filled: M MiB at 64 MiB, seed S, checksum 0x...
 *   idle: memory checksum ok | idle: memory checksum FAIL: ...
 * Exit 1 at once when the region does not fit in RAM. Without fill= none
 * of it runs.
 */
#include "rt.h"

const char *guest_name = "idle";

#define UART_RBR 0
#define UART_IER 1
#define UART_IIR 2
#define UART_LSR 5

static volatile u32 serial_wakes, serial_bytes, timer_fires;
static u64 deadline; /* sleep=: TSC, 0: none */
static u64 settle_ms;
static struct memfill fill; /* fill=: the region, bytes 0: none */

static void h_serial(struct irq_frame *f)
{
	u32 n = 0;

	(void)f;
	(void)inb(GUEST_PORT_COM1 + UART_IIR);
	/* bounded: a UART that always says "data ready" must not wedge us */
	while (n < 4096 && (inb(GUEST_PORT_COM1 + UART_LSR) & 1)) {
		(void)inb(GUEST_PORT_COM1 + UART_RBR);
		n++;
	}
	if (n) {
		serial_bytes += n;
		serial_wakes++;
	}
}

static void h_timer(struct irq_frame *f)
{
	(void)f;
	timer_fires++;
}

/*
 * printf with interrupts ON while the line goes out: printf() keeps them off
 * for a whole line, and a LAPIC tick that comes twice meanwhile is lost (one
 * IRR bit), which would put jiffies behind. Safe here because only CPU 0
 * prints and none of this image's handlers print.
 */
static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
	char buf[200];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	irq_enable();
	console_lock();
	console_write_unlocked(buf, (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1);
	console_unlock();
	irq_disable();
}

static bool jiffies_behind(u64 *behind)
{
	u64 j = tick_sync(), e = tick_expected(rdtsc());

	*behind = e > j ? e - j : 0;
	return *behind > 1;
}

/*
 * Interrupts off: wait, halting, while jiffies behind the TSC gain on it
 * (late ticks being delivered), in windows of settle_ms; the tick or the
 * window's end wakes us. Returns the time waited in ms.
 */
static u64 await_late_ticks(void)
{
	u64 t0 = rdtsc(), window = ns_to_tsc(settle_ms * 1000000u), behind, before;

	if (tick_kind == TICK_NONE || !jiffies_behind(&before))
		return 0;
	for (;;) {
		u64 end = rdtsc() + window;

		wake_at_tsc(VEC_TIMER, end);
		while (rdtsc() < end && jiffies_behind(&behind)) {
			safe_halt();
			irq_disable();
		}
		wake_cancel();
		if (!jiffies_behind(&behind) || behind >= before)
			break; /* right, or no gain over a whole window */
		before = behind;
	}
	/* The sleep's wake-up, replaced above, when it is still to come (not
	 * after it passed: a relayed one is an IPI, slow on a slow host, and
	 * the ticks due meanwhile would wait behind interrupts off). */
	if (deadline && rdtsc() < deadline)
		wake_at_tsc(VEC_TIMER, deadline);
	return tsc_to_ns(rdtsc() - t0) / 1000000u;
}

/* Jiffies against the TSC; on CPU 0, called with interrupts off (and
 * returns so). True when within 1 tick. */
static bool report(const char *why)
{
	u64 waited = await_late_ticks();
	u64 j = tick_sync();
	u64 now = rdtsc();
	u64 taken = tick_taken, missed = tick_missed;
	/* The LAPIC ticks count as of the last one taken: a tick due since
	 * then may still be on its way (a slow host, interrupts off here),
	 * which is lateness, not loss. The pv tick's MISSED counts to now. */
	u64 at = tick_kind == TICK_PV || !tick_last_tsc ? now : tick_last_tsc;
	u64 e = tick_expected(at);
	long long d = (long long)(j - e);
	bool ok = d >= -1 && d <= 1;

	say("idle: woken by %s: jiffies=%llu expected=%llu\n", why, (unsigned long long)j,
	    (unsigned long long)e);
	if (ok)
		say("idle: jiffies ok\n");
	else
		say("idle: jiffies off by %lld\n", d);
	say("# idle: tick=%s hz=%u: %llu ticks taken, %llu missed, %llu ms since tick start, "
	    "expected as of %llu ms, %llu ms waited for late ticks, %u serial bytes\n",
	    tick_kind_name(), tick_hz, (unsigned long long)taken, (unsigned long long)missed,
	    (unsigned long long)(tick_kind == TICK_NONE ? 0 :
				 tsc_to_ns(now - tick_start_tsc) / 1000000u),
	    (unsigned long long)(tick_kind == TICK_NONE || at < tick_start_tsc ? 0 :
				 tsc_to_ns(at - tick_start_tsc) / 1000000u),
	    (unsigned long long)waited, serial_bytes);
	return ok;
}

/* fill=: the region filled, interrupts off and before the tick starts
 * (no tick is lost to the time it takes); exit 1 when it does not fit. */
static void fill_memory(u64 mib, u64 seed)
{
	u64 t0 = rdtsc();

	if (!memfill_fill(&fill, mib, seed)) {
		say("idle: fill=%llu MiB does not fit: the region starts at %lu MiB, "
		    "RAM ends at %llu MiB\n", (unsigned long long)mib, MEMFILL_BASE >> 20,
		    (unsigned long long)(memfill_ram_end() >> 20));
		guest_exit(EXIT_FAIL);
	}
	say("idle: memory filled: %llu MiB at %lu MiB, seed %llu, checksum 0x%016llx\n",
	    (unsigned long long)mib, MEMFILL_BASE >> 20, (unsigned long long)seed,
	    (unsigned long long)fill.checksum);
	say("# idle: fill took %llu ms\n",
	    (unsigned long long)(tsc_to_ns(rdtsc() - t0) / 1000000u));
}

/* After a serial report: the region read back and checked, interrupts on
 * meanwhile (the ticks are taken); called and returns with them off. */
static void check_memory(void)
{
	u64 t0 = rdtsc(), bad, first, sum;

	irq_enable();
	sum = memfill_check(&fill, &bad, &first);
	irq_disable();
	if (sum == fill.checksum && !bad)
		say("idle: memory checksum ok\n");
	else
		say("idle: memory checksum FAIL: 0x%016llx, expected 0x%016llx, %llu pages "
		    "differ, the first word at 0x%llx\n", (unsigned long long)sum,
		    (unsigned long long)fill.checksum, (unsigned long long)bad,
		    (unsigned long long)first);
	say("# idle: memory checksum 0x%016llx of %llu MiB in %llu ms\n", (unsigned long long)sum,
	    (unsigned long long)(fill.bytes >> 20),
	    (unsigned long long)(tsc_to_ns(rdtsc() - t0) / 1000000u));
}

void guest_main(void)
{
	u32 hz = (u32)cmdline_u64("hz", 250);

	settle_ms = cmdline_u64("settle", 300);
	u64 sleep_s = cmdline_u64("sleep", 0);
	u64 fill_mib = cmdline_u64("fill", 0);
	u32 up, seen_serial = 0, armed_fires = 0;

	watchdog_start(0); /* idles forever: no deadline */
	up = smp_boot();
	irq_set_handler(VEC_SERIAL, h_serial);
	irq_set_handler(VEC_TIMER, h_timer);
	irq_disable(); /* from here on CPU 0 prints with say() */
	if (fill_mib)
		fill_memory(fill_mib, cmdline_u64("seed", 1));
	tick_start(hz);
	say("# idle: tick=%s\n", tick_kind_name());

	/* serial receive interrupts to CPU 0 (the tick CPU) */
	outb(GUEST_PORT_COM1 + UART_IER, 0x01);
	ioapic_route(GUEST_IRQ_COM1, VEC_SERIAL, percpus[0].apic_id, false);
	h_serial(NULL); /* input that came before the interrupt was on counts too */

	if (sleep_s) {
		say("# idle: sleep=%llu s on %s\n", (unsigned long long)sleep_s,
		    tick_wake_relayed()	    ? "another CPU's one-shot LAPIC timer (relayed)" :
		    tick_owns_lapic_timer() ? "the LAPIC tick (it owns CPU 0's timer)" :
					      "a one-shot LAPIC timer");
		deadline = rdtsc() + ns_to_tsc(sleep_s * 1000000000ull);
		armed_fires = timer_fires;
		wake_at_tsc(VEC_TIMER, deadline);
	}
	say("idle: %u cpus up, hz=%u\n", up, hz);

	/*
	 * CPU 0's idle loop. A wake-up that only took a tick does nothing but
	 * look at memory and the TSC before halting again (no exits), so the
	 * VMM can treat it as "only took its tick".
	 */
	for (;;) {
		if (serial_wakes != seen_serial) {
			seen_serial = serial_wakes;
			report("serial");
			if (fill.bytes)
				check_memory();
		}
		if (deadline && rdtsc() >= deadline) {
			bool ok = report("timer");

			guest_exit(ok ? EXIT_OK : EXIT_FAIL);
		}
		if (deadline && timer_fires != armed_fires) {
			armed_fires = timer_fires; /* fired early (or clamped): re-arm */
			wake_at_tsc(VEC_TIMER, deadline);
		}
		safe_halt();
		irq_disable();
	}
}
