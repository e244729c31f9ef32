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
 * tick=lapic forces the LAPIC tick, tick=tscdeadline a TSC-deadline timer
 * re-armed from its handler at a constant period (exit 1 without the
 * TSC-deadline timer), tick=pv insists on the pv tick (exit 1 when it is
 * absent).
 *
 * The TSC at tick start is kept so that the ticks that should have elapsed
 * can be computed from the TSC (tick_expected()).
 */
#include "rt.h"

volatile u64 jiffies;
volatile u64 tick_taken;  /* tick interrupts handled */
volatile u64 tick_missed; /* sum of MSR_SYSIDLE_PVTICK_MISSED reads */
volatile u64 tick_last_tsc; /* TSC when the last tick was taken */
enum tick_kind tick_kind = TICK_NONE;
u32 tick_hz;
u32 tick_cpu;
u64 tick_start_tsc;

static void tick_lapic_handler(struct irq_frame *f)
{
	(void)f;
	jiffies++;
	tick_taken++;
	tick_last_tsc = rdtsc();
}

/* tick=tscdeadline: the tick as Linux keeps it on a one-shot-only clock
 * event device, a TSC deadline re-armed from its handler one period after
 * the last; every period that passed counts, so jiffies follow the TSC
 * whatever became of the interrupts in between. */
static u64 tscdl_next, tscdl_period;

static void tick_tscdl_handler(struct irq_frame *f)
{
	u64 now = rdtsc();

	(void)f;
	tick_taken++;
	tick_last_tsc = now;
	do {
		jiffies++;
		tscdl_next += tscdl_period;
	} while (tscdl_next <= now);
	wrmsr(MSR_IA32_TSC_DEADLINE, tscdl_next);
}

static bool tsc_deadline_available(void)
{
	u32 a, b, c, d;

	cpuid(1, 0, &a, &b, &c, &d);
	return c & (1u << 24);
}

static void tick_pv_handler(struct irq_frame *f)
{
	u64 missed = rdmsr(MSR_SYSIDLE_PVTICK_MISSED);

	(void)f;
	jiffies += 1 + missed;
	tick_missed += missed;
	tick_taken++;
	tick_last_tsc = rdtsc();
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
	case TICK_TSCDL:
		return "tscdeadline";
	default:
		return "none";
	}
}

static void relay_setup(void);

void tick_start(u32 hz)
{
	bool tscdl = cmdline_is("tick", "tscdeadline");
	bool pv = !cmdline_is("tick", "lapic") && !tscdl && tick_pv_available();

	if (cmdline_is("tick", "pv") && !pv) {
		printf("FAIL - tick: tick=pv but the hypervisor has no pv tick\n");
		guest_exit(EXIT_FAIL);
	}
	if (pv && hz > SYSIDLE_PVTICK_MAX_HZ) {
		printf("# tick: hz=%u is above the pv tick's %u: LAPIC tick\n", hz,
		       SYSIDLE_PVTICK_MAX_HZ);
		pv = false;
	}
	if (tscdl && !tsc_deadline_available()) {
		printf("FAIL - tick: tick=tscdeadline but CPUID has no TSC-deadline timer\n");
		guest_exit(EXIT_FAIL);
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
	} else if (tscdl) {
		irq_set_handler(VEC_TICK, tick_tscdl_handler);
		tick_kind = TICK_TSCDL;
		relay_setup();
		tscdl_period = ns_to_tsc(1000000000u / hz);
		tick_start_tsc = rdtsc();
		tscdl_next = tick_start_tsc + tscdl_period;
		timer_tsc_deadline(VEC_TICK, tscdl_next);
	} else {
		irq_set_handler(VEC_TICK, tick_lapic_handler);
		tick_kind = TICK_LAPIC;
		relay_setup();
		tick_start_tsc = rdtsc();
		timer_periodic(VEC_TICK, (u32)(GUEST_APIC_TIMER_HZ / hz));
	}
}

void tick_stop(void)
{
	if (tick_kind == TICK_PV)
		wrmsr(MSR_SYSIDLE_PVTICK_HZ, 0);
	else if (tick_kind == TICK_LAPIC || tick_kind == TICK_TSCDL)
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
	return (tick_kind == TICK_LAPIC || tick_kind == TICK_TSCDL) &&
	       this_cpu()->index == tick_cpu;
}

/*
 * The one-shot wake-ups of the CPU whose LAPIC timer the tick owns go
 * through another CPU's timer, the relay (the highest online CPU but the
 * tick's): it fires at the deadline and sends the vector back as an IPI,
 * as an OS with a tick-driven CPU would use a one-shot clockevent on
 * another. So the wake-up is on time, and does not depend on the tick
 * being delivered (a VMM may hold a periodic tick back while the guest is
 * fully idle). Without another CPU the next tick is the wake-up.
 */
static volatile u64 relay_deadline; /* TSC, 0: none */
static volatile u8 relay_vector;
static u32 relay_cpu;
static bool relay_on;

static void relay_program(void)
{
	u64 d = __atomic_load_n(&relay_deadline, __ATOMIC_SEQ_CST), now = rdtsc();

	if (d)
		timer_oneshot_ns(VEC_RELAY_FIRE, d > now ? tsc_to_ns(d - now) : 0);
	else
		timer_stop();
}

/* On the relay: a new deadline was posted. */
static void relay_arm_handler(struct irq_frame *f)
{
	(void)f;
	relay_program();
}

/* On the relay: its timer fired (early, when the one-shot was clamped). */
static void relay_fire_handler(struct irq_frame *f)
{
	u64 d = __atomic_load_n(&relay_deadline, __ATOMIC_SEQ_CST);

	(void)f;
	if (!d)
		return;
	if (rdtsc() < d) {
		relay_program();
		return;
	}
	if (__atomic_compare_exchange_n(&relay_deadline, &d, 0, false, __ATOMIC_SEQ_CST,
					__ATOMIC_SEQ_CST))
		apic_send_ipi(percpus[tick_cpu].apic_id, APIC_ICR_DM_FIXED | relay_vector);
}

static void relay_setup(void)
{
	relay_on = false;
	for (u32 i = nr_cpus; i-- > 0;)
		if (i != tick_cpu && percpus[i].online) {
			relay_cpu = i;
			relay_on = true;
			break;
		}
	irq_set_handler(VEC_RELAY_ARM, relay_arm_handler);
	irq_set_handler(VEC_RELAY_FIRE, relay_fire_handler);
}

bool tick_wake_relayed(void)
{
	return tick_owns_lapic_timer() && relay_on;
}

void wake_at_tsc(u8 vector, u64 deadline)
{
	u64 now = rdtsc();

	if (tick_wake_relayed()) {
		relay_vector = vector;
		__atomic_store_n(&relay_deadline, deadline ? deadline : 1, __ATOMIC_SEQ_CST);
		apic_send_ipi(percpus[relay_cpu].apic_id, APIC_ICR_DM_FIXED | VEC_RELAY_ARM);
		return;
	}
	if (tick_owns_lapic_timer())
		return; /* the next tick wakes us: at most one period late */
	timer_oneshot_ns(vector, deadline > now ? tsc_to_ns(deadline - now) : 0);
}

/* A relayed wake-up already posted may still come: callers re-check. */
void wake_cancel(void)
{
	if (tick_wake_relayed())
		__atomic_store_n(&relay_deadline, 0, __ATOMIC_SEQ_CST);
	else if (!tick_owns_lapic_timer())
		timer_stop();
}
