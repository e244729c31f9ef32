// SPDX-License-Identifier: GPL-2.0-only
/*
 * The local APIC, xAPIC (MMIO at GUEST_LAPIC_BASE) or x2APIC (MSRs from
 * MSR_X2APIC_BASE), behind one interface. The mode is chosen once by the BSP
 * (apic= on the command line, else x2APIC when CPUID has it) and every CPU
 * switches its own APIC into it. KVM's PV EOI, where the hypervisor offers
 * it (a KVM signature at any hypervisor leaf base, its PV_EOI feature bit)
 * and pveoi=0 is not given: each CPU registers its flag word and ends an
 * interrupt by clearing the flag when the hypervisor set it.
 */
#include "rt.h"

bool apic_x2;
bool apic_pv_eoi;

/* KVM's PV EOI feature at the hypervisor leaf base that has KVM's
 * signature (0x40000000 apart under KVM itself, 0x40000100 beside this
 * VMM's own leaves), as Linux looks for it. */
static bool cpu_has_kvm_pv_eoi(void)
{
	u32 a, b, c, d;

	cpuid(1, 0, &a, &b, &c, &d);
	if (!(c & (1u << 31)))
		return false;
	for (u32 base = 0x40000000u; base < 0x40010000u; base += 0x100) {
		cpuid(base, 0, &a, &b, &c, &d);
		if (b != KVM_PV_SIGNATURE_EBX || c != KVM_PV_SIGNATURE_ECX ||
		    d != KVM_PV_SIGNATURE_EDX)
			continue;
		if (a < base + 1)
			return false;
		cpuid(base + 1, 0, &a, &b, &c, &d);
		return a & KVM_PV_F_EOI;
	}
	return false;
}

static bool cpu_has_x2apic(void)
{
	u32 a, b, c, d;

	cpuid(1, 0, &a, &b, &c, &d);
	return c & (1u << 21);
}

void apic_choose_mode(void)
{
	if (cmdline_is("apic", "xapic"))
		apic_x2 = false;
	else if (cmdline_is("apic", "x2apic"))
		apic_x2 = true;
	else
		apic_x2 = cpu_has_x2apic();
	if (apic_x2 && !cpu_has_x2apic()) {
		printf("FAIL - apic=x2apic but CPUID.1:ECX[21] is clear\n");
		guest_exit(EXIT_FAIL);
	}
	apic_pv_eoi = !cmdline_is("pveoi", "0") && cpu_has_kvm_pv_eoi();
}

u32 apic_read(u32 reg)
{
	if (apic_x2)
		return (u32)rdmsr(APIC_X2APIC_MSR(reg));
	return *(volatile u32 *)(uintptr_t)(GUEST_LAPIC_BASE + reg);
}

void apic_write(u32 reg, u32 v)
{
	if (apic_x2)
		wrmsr(APIC_X2APIC_MSR(reg), v);
	else
		*(volatile u32 *)(uintptr_t)(GUEST_LAPIC_BASE + reg) = v;
}

u32 apic_id(void)
{
	u32 id = apic_read(APIC_REG_ID);

	return apic_x2 ? id : id >> 24;
}

/* Interrupts off (a handler). With PV EOI: the flag's bit cleared in one
 * instruction (btr), where the hypervisor set it, ends the interrupt; it
 * looks at the flag only while this CPU is out of the guest. */
void apic_eoi(void)
{
	if (apic_pv_eoi) {
		struct percpu *p = this_cpu();
		u8 was;

		__asm__ volatile("btrq $0, %1; setc %0"
				 : "=q"(was), "+m"(p->pv_eoi) : : "cc", "memory");
		if (was) {
			p->pv_eois++;
			return;
		}
	}
	apic_write(APIC_REG_EOI, 0);
}

void apic_send_ipi(u32 dest, u32 icr_low)
{
	if (apic_x2) {
		wrmsr(APIC_X2APIC_MSR(APIC_REG_ICR_LOW), ((u64)dest << 32) | icr_low);
		return;
	}
	for (int i = 0; i < 100000 && (apic_read(APIC_REG_ICR_LOW) & APIC_SEND_PENDING); i++)
		cpu_relax();
	apic_write(APIC_REG_ICR_HIGH, dest << APIC_ICR_HIGH_DEST_SHIFT);
	apic_write(APIC_REG_ICR_LOW, icr_low);
}

static bool bit_in(u32 base, u8 vector)
{
	return apic_read(APIC_REG_BANK(base, vector / 32u)) & (1u << (vector % 32u));
}

bool apic_isr_bit(u8 vector)
{
	return bit_in(APIC_REG_ISR, vector);
}

bool apic_irr_bit(u8 vector)
{
	return bit_in(APIC_REG_IRR, vector);
}

void apic_cpu_init(void)
{
	u64 base = rdmsr(MSR_IA32_APIC_BASE);
	bool is_x2 = (base & (APIC_BASE_ENABLE | APIC_BASE_X2APIC)) ==
		     (APIC_BASE_ENABLE | APIC_BASE_X2APIC);

	if (is_x2 && !apic_x2) {
		/* x2APIC -> xAPIC only through disabled */
		base &= ~(u64)(APIC_BASE_ENABLE | APIC_BASE_X2APIC);
		wrmsr(MSR_IA32_APIC_BASE, base);
	}
	base |= APIC_BASE_ENABLE;
	wrmsr(MSR_IA32_APIC_BASE, base);
	if (apic_x2)
		wrmsr(MSR_IA32_APIC_BASE, base | APIC_BASE_X2APIC);

	apic_write(APIC_REG_SVR, APIC_SVR_ENABLE | VEC_SPURIOUS);
	apic_write(APIC_REG_TPR, 0);
	apic_write(APIC_REG_LVT_TIMER, APIC_LVT_MASKED | VEC_TIMER);
	apic_write(APIC_REG_LVT_LINT0, APIC_LVT_MASKED);
	apic_write(APIC_REG_LVT_LINT1, APIC_LVT_MASKED);
	apic_write(APIC_REG_LVT_ERROR, APIC_LVT_MASKED);
	apic_write(APIC_REG_TIMER_DCR, APIC_TDCR_DIV_1);
	apic_write(APIC_REG_TIMER_ICR, 0);
	if (apic_pv_eoi) {
		this_cpu()->pv_eoi = 0;
		wrmsr(MSR_KVM_PV_EOI, (u64)(uintptr_t)&this_cpu()->pv_eoi | KVM_PV_EOI_ENABLE);
	}
}
