// SPDX-License-Identifier: GPL-2.0-only
/*
 * SMP: INIT-SIPI-SIPI bring-up of every CPU cpus_enumerate() found (at the
 * APIC ID the MADT gives it; x2APIC IDs above 255 in x2APIC mode), one at a
 * time, each with its own stack, through the trampoline at
 * GUEST_AP_TRAMPOLINE; then a tiny remote-call service in each AP's HLT
 * idle loop.
 */
#include "rt.h"

extern char ap_tramp_start[], ap_tramp_end[];
extern u32 ap_tramp_flag_off;
extern u64 ap_stack_top;
extern u32 ap_boot_cpu;

static void call_handler(struct irq_frame *f)
{
	(void)f;
	this_cpu()->cnt_call++;
}

void ap_main(u32 index);
void ap_main(u32 index)
{
	percpu_setup(index);
	idt_load();
	apic_cpu_init(); /* its APIC ID is checked against percpus[].apic_id by selftest */
	__atomic_fetch_add(&cpus_online, 1, __ATOMIC_SEQ_CST);
	WRITE_ONCE(this_cpu()->online, 1);
	idle_loop();
}

/* Each CPU: run queued calls, else halt with interrupts on. */
void idle_loop(void)
{
	struct percpu *p = this_cpu();

	for (;;) {
		irq_disable();
		void (*fn)(void *) = p->call_fn;

		if (fn) {
			p->call_fn = NULL;
			fn(p->call_arg);
			irq_disable();
			__atomic_fetch_add(&p->call_done, 1, __ATOMIC_SEQ_CST);
			continue;
		}
		safe_halt();
	}
}

void run_on_cpu_async(u32 cpu, void (*fn)(void *), void *arg)
{
	struct percpu *p = &percpus[cpu];

	p->call_arg = arg;
	__atomic_store_n(&p->call_fn, fn, __ATOMIC_SEQ_CST);
	apic_send_ipi(p->apic_id, APIC_ICR_DM_FIXED | VEC_CALL);
}

bool run_on_cpu(u32 cpu, void (*fn)(void *), void *arg, u64 ns)
{
	struct percpu *p = &percpus[cpu];
	u32 done = p->call_done;

	if (p == this_cpu()) {
		fn(arg);
		return true;
	}
	run_on_cpu_async(cpu, fn, arg);
	irq_enable();
	return wait_u32(&p->call_done, done + 1, ns);
}

static bool boot_one(u32 i)
{
	volatile u8 *flag = (volatile u8 *)(uintptr_t)(GUEST_AP_TRAMPOLINE + ap_tramp_flag_off);
	u32 sipi = APIC_ICR_DM_STARTUP | (GUEST_AP_TRAMPOLINE >> 12);
	u32 id = percpus[i].apic_id;

	*flag = 0;
	WRITE_ONCE(ap_boot_cpu, i);
	WRITE_ONCE(ap_stack_top, STACK_REGION + (u64)(i + 1) * STACK_SIZE);
	apic_send_ipi(id, APIC_ICR_DM_INIT | APIC_ICR_LEVEL_ASSERT);
	udelay_tsc(1000000); /* 1 ms (10 ms on real hardware) */
	apic_send_ipi(id, sipi);
	udelay_tsc(200000);
	if (!*flag)
		apic_send_ipi(id, sipi);
	return wait_u32(&percpus[i].online, 1, 3000000000ull);
}

u32 smp_boot(void)
{
	u64 ram = 0, need = STACK_REGION + (u64)nr_cpus * STACK_SIZE;

	fwcfg_read(FW_CFG_RAM_SIZE, &ram, 8);
	if (mb_mem_upper_kb)
		ram = ((u64)mb_mem_upper_kb + 1024) << 10;
	if (nr_cpus > 1 && ram < need) {
		printf("FAIL - smp: %llu KiB of RAM, the AP stacks need %llu KiB\n",
		       (unsigned long long)(ram >> 10), (unsigned long long)(need >> 10));
		guest_exit(EXIT_FAIL);
	}
	irq_set_handler(VEC_CALL, call_handler);
	memcpy((void *)(uintptr_t)GUEST_AP_TRAMPOLINE, ap_tramp_start,
	       (size_t)(ap_tramp_end - ap_tramp_start));
	for (u32 i = 1; i < nr_cpus; i++)
		if (!boot_one(i))
			printf("# cpu%u: no response to INIT/SIPI (APIC ID %u)\n", i,
			       percpus[i].apic_id);
	return cpus_online;
}
