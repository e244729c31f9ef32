// SPDX-License-Identifier: GPL-2.0-only
/*
 * The periodic tick and jiffies (the one place for tick code).
 *
 * tick_start(hz) on the calling CPU uses the paravirtual tick of
 * include/sysidle/guest_abi.h when this VMM's signature is in CPUID_HV_BASE
 * and CPUID_HV_FEATURES has SYSIDLE_HV_F_PVTICK: the vector goes to
 * MSR_SYSIDLE_PVTICK_VECTOR, then the rate to MSR_SYSIDLE_PVTICK_HZ; each tick
 * taken adds 1 + MSR_SYSIDLE_PVTICK_MISSED (read-and-clear) to jiffies, so
 * ticks the VMM suppressed are counted, not lost. Anywhere else (QEMU, whose
 * signature is KVMKVMKVM, or this VMM without the feature) the tick is a
 * periodic LAPIC timer on the calling CPU and each tick adds 1; the pv MSRs
 * are never touched then. tick= on the command line overrides the choice:
 * tick=lapic forces the LAPIC tick, tick=pv insists on the pv tick (exit 1
 * when it is absent).
 *
 * The TSC at tick start is kept so that the ticks that should have elapsed
 * can be computed from the TSC (tick_expected()).
 */
#include "rt.h"

volatile u64 jiffies;
volatile u64 tick_taken;  /* tick interrupts handled */
volatile u64 tick_missed; /* sum of MSR_SYSIDLE_PVTICK_MISSED reads */
enum tick_kind tick_kind = TICK_NONE;
u32 tick_hz;
u32 tick_cpu;
u64 tick_start_tsc;

static void tick_lapic_handler(struct irq_frame *f)
{
	(void)f;
	jiffies++;
	tick_taken++;
}

static void tick_pv_handler(struct irq_frame *f)
{
	u64 missed = rdmsr(MSR_SYSIDLE_PVTICK_MISSED);

	(void)f;
	jiffies += 1 + missed;
	tick_missed += missed;
	tick_taken++;
}

bool tick_pv_available(void)
{
	u32 a, b, c, d;

	cpuid(1, 0, &a, &b, &c, &d);
	if (!(c & (1u << 31)))
		return false; /* no hypervisor leaves */
	cpuid(CPUID_HV_BASE, 0, &a, &b, &c, &d);
	if (b != SYSIDLE_HV_SIGNATURE_EBX || c != SYSIDLE_HV_SIGNATURE_ECX ||
	    d != SYSIDLE_HV_SIGNATURE_EDX || a < CPUID_HV_FEATURES)
		return false; /* not this VMM (QEMU: KVMKVMKVM) */
	cpuid(CPUID_HV_FEATURES, 0, &a, &b, &c, &d);
	return a & SYSIDLE_HV_F_PVTICK;
}

const char *tick_kind_name(void)
{
	switch (tick_kind) {
	case TICK_PV:
		return "pv";
	case TICK_LAPIC:
		return "lapic";
	default:
		return "none";
	}
}

void tick_start(u32 hz)
{
	bool pv = !cmdline_is("tick", "lapic") && tick_pv_available();

	if (cmdline_is("tick", "pv") && !pv) {
		printf("FAIL - tick: tick=pv but the hypervisor has no pv tick\n");
		guest_exit(EXIT_FAIL);
	}
	if (pv && hz > SYSIDLE_PVTICK_MAX_HZ) {
		printf("# tick: hz=%u is above the pv tick's %u: LAPIC tick\n", hz,
		       SYSIDLE_PVTICK_MAX_HZ);
		pv = false;
	}
	if (!hz)
		return; /* no tick at all */
	tick_hz = hz;
	tick_cpu = this_cpu()->index;
	if (pv) {
		irq_set_handler(VEC_TICK, tick_pv_handler);
		tick_kind = TICK_PV;
		wrmsr(MSR_SYSIDLE_PVTICK_VECTOR, VEC_TICK);
		tick_start_tsc = rdtsc();
		wrmsr(MSR_SYSIDLE_PVTICK_HZ, hz);
	} else {
		irq_set_handler(VEC_TICK, tick_lapic_handler);
		tick_kind = TICK_LAPIC;
		tick_start_tsc = rdtsc();
		timer_periodic(VEC_TICK, (u32)(GUEST_APIC_TIMER_HZ / hz));
	}
}

void tick_stop(void)
{
	if (tick_kind == TICK_PV)
		wrmsr(MSR_SYSIDLE_PVTICK_HZ, 0);
	else if (tick_kind == TICK_LAPIC)
		timer_stop();
	tick_kind = TICK_NONE;
}

u64 tick_sync(void)
{
	u64 flags, j;

	__asm__ volatile("pushfq; popq %0; cli" : "=r"(flags) : : "memory");
	if (tick_kind == TICK_PV && this_cpu()->index == tick_cpu) {
		u64 missed = rdmsr(MSR_SYSIDLE_PVTICK_MISSED);

		jiffies += missed;
		tick_missed += missed;
	}
	j = jiffies;
	if (flags & 0x200)
		irq_enable();
	return j;
}

u64 tick_expected(u64 tsc)
{
	if (tick_kind == TICK_NONE || tsc <= tick_start_tsc)
		return 0;
	/* ns * hz < 2^64 for about 21 days at 10 kHz */
	return tsc_to_ns(tsc - tick_start_tsc) * tick_hz / 1000000000u;
}

bool tick_owns_lapic_timer(void)
{
	return tick_kind == TICK_LAPIC && this_cpu()->index == tick_cpu;
}

void wake_at_tsc(u8 vector, u64 deadline)
{
	u64 now = rdtsc();

	if (tick_owns_lapic_timer())
		return; /* the next tick wakes us: at most one period late */
	timer_oneshot_ns(vector, deadline > now ? tsc_to_ns(deadline - now) : 0);
}

void wake_cancel(void)
{
	if (!tick_owns_lapic_timer())
		timer_stop();
}
