// SPDX-License-Identifier: GPL-2.0-only
/*
 * TSC frequency and the local APIC timer (one-shot, periodic, TSC-deadline).
 * The APIC timer counts at GUEST_APIC_TIMER_HZ with divide 1, so an initial
 * count is a number of nanoseconds. The TSC rate comes from CPUID_HV_TIMING
 * when the hypervisor has that leaf, else it is calibrated against the
 * APIC timer (median of three 10 ms measurements).
 */
#include "rt.h"

u64 tsc_khz;
bool tsc_from_cpuid;

#define CAL_NS 10000000u /* one measurement: 10 ms of APIC timer */
#define CAL_RUNS 3

/*
 * One (TSC, CCR) pair, bracketed by two TSC reads; the tightest of a few
 * tries wins, so a vCPU descheduled in the middle of a sample (a loaded host)
 * does not skew the rate.
 */
static void cal_sample(u64 *tsc, u32 *ccr)
{
	u64 best = ~0ull;

	for (int i = 0; i < 5; i++) {
		u64 t1 = rdtsc();
		u32 c = apic_read(APIC_REG_TIMER_CCR);
		u64 t2 = rdtsc();

		/* i == 0: the first try always counts, so *tsc and *ccr are set */
		if (i == 0 || t2 - t1 < best) {
			best = t2 - t1;
			*tsc = t1 + (t2 - t1) / 2;
			*ccr = c;
		}
	}
}

/* TSC kHz over CAL_NS of a free-running APIC timer (1 count = 1 ns). */
static u64 cal_once(void)
{
	u64 t0, t1;
	u32 c0, c1;

	apic_write(APIC_REG_TIMER_ICR, 0xffffffffu);
	cal_sample(&t0, &c0);
	/* bounded: a timer that does not count gives up after ~10 s of a 4 GHz TSC */
	for (u64 t = rdtsc(); rdtsc() - t < 40000000000ull;)
		if (c0 - apic_read(APIC_REG_TIMER_CCR) >= CAL_NS)
			break;
	cal_sample(&t1, &c1);
	apic_write(APIC_REG_TIMER_ICR, 0);
	if (c0 <= c1)
		return 0;
	return (t1 - t0) * 1000000u / (c0 - c1);
}

void tsc_init(void)
{
	u32 a, b, c, d;
	u64 r[CAL_RUNS];

	cpuid(1, 0, &a, &b, &c, &d);
	if (c & (1u << 31)) {
		cpuid(CPUID_HV_BASE, 0, &a, &b, &c, &d);
		if (a >= CPUID_HV_TIMING && a < CPUID_HV_BASE + 0x100) {
			cpuid(CPUID_HV_TIMING, 0, &a, &b, &c, &d);
			if (a) {
				tsc_khz = a;
				tsc_from_cpuid = true;
				return;
			}
		}
	}
	apic_write(APIC_REG_LVT_TIMER, APIC_LVT_MASKED | VEC_TIMER);
	apic_write(APIC_REG_TIMER_DCR, APIC_TDCR_DIV_1);
	/* the median of a few measurements */
	for (int i = 0; i < CAL_RUNS; i++) {
		u64 v = cal_once();
		int j = i;

		for (; j > 0 && r[j - 1] > v; j--)
			r[j] = r[j - 1];
		r[j] = v;
	}
	tsc_khz = r[CAL_RUNS / 2];
	if (!tsc_khz)
		tsc_khz = 1000000; /* nonsense calibration: assume 1 GHz */
}

u64 ns_to_tsc(u64 ns)
{
	return ns / 1000000u * tsc_khz + ns % 1000000u * tsc_khz / 1000000u;
}

u64 tsc_to_ns(u64 t)
{
	return t / tsc_khz * 1000000u + t % tsc_khz * 1000000u / tsc_khz;
}

void udelay_tsc(u64 ns)
{
	u64 end = rdtsc() + ns_to_tsc(ns);

	while (rdtsc() < end)
		cpu_relax();
}

void timer_oneshot(u8 vector, u32 ns)
{
	apic_write(APIC_REG_TIMER_DCR, APIC_TDCR_DIV_1);
	apic_write(APIC_REG_LVT_TIMER, APIC_LVT_TIMER_ONESHOT | vector);
	apic_write(APIC_REG_TIMER_ICR, ns ? ns : 1);
}

void timer_periodic(u8 vector, u32 ns)
{
	apic_write(APIC_REG_TIMER_DCR, APIC_TDCR_DIV_1);
	apic_write(APIC_REG_LVT_TIMER, APIC_LVT_TIMER_PERIODIC | vector);
	apic_write(APIC_REG_TIMER_ICR, ns ? ns : 1);
}

void timer_tsc_deadline(u8 vector, u64 deadline)
{
	apic_write(APIC_REG_LVT_TIMER, APIC_LVT_TIMER_TSCDEADLINE | vector);
	mfence(); /* SDM: the LVT write must be ordered before the MSR write */
	wrmsr(MSR_IA32_TSC_DEADLINE, deadline);
}

void timer_stop(void)
{
	u32 lvt = apic_read(APIC_REG_LVT_TIMER);

	apic_write(APIC_REG_LVT_TIMER, lvt | APIC_LVT_MASKED);
	if ((lvt & APIC_LVT_TIMER_MODE) == APIC_LVT_TIMER_TSCDEADLINE)
		wrmsr(MSR_IA32_TSC_DEADLINE, 0);
	else
		apic_write(APIC_REG_TIMER_ICR, 0);
}

/* A one-shot of up to ~549 s: the smallest divide (1..128) that fits the
 * count; longer delays are clamped (callers recheck the TSC and re-arm). */
void timer_oneshot_ns(u8 vector, u64 ns)
{
	static const u8 dcr[8] = { APIC_TDCR_DIV_1, 0x0, 0x1, 0x2, 0x3, 0x8, 0x9, 0xa };
	u32 shift = 0;

	while (shift < 7 && (ns >> shift) > 0xffffffffu)
		shift++;
	ns >>= shift;
	if (ns > 0xffffffffu)
		ns = 0xffffffffu;
	apic_write(APIC_REG_TIMER_DCR, dcr[shift]);
	apic_write(APIC_REG_LVT_TIMER, APIC_LVT_TIMER_ONESHOT | vector);
	apic_write(APIC_REG_TIMER_ICR, ns ? (u32)ns : 1);
}
