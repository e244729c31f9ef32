// SPDX-License-Identifier: GPL-2.0-only
/*
 * The local APIC, xAPIC (MMIO at GUEST_LAPIC_BASE) or x2APIC (MSRs from
 * MSR_X2APIC_BASE), behind one interface. The mode is chosen once by the BSP
 * (apic= on the command line, else x2APIC when CPUID has it) and every CPU
 * switches its own APIC into it.
 */
#include "rt.h"

bool apic_x2;

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
}

u32 apic_read(u32 reg)
{
	if (apic_x2)
		return (u32)rdmsr(MSR_X2APIC_BASE + (reg >> 4));
	return *(volatile u32 *)(uintptr_t)(GUEST_LAPIC_BASE + reg);
}

void apic_write(u32 reg, u32 v)
{
	if (apic_x2)
		wrmsr(MSR_X2APIC_BASE + (reg >> 4), v);
	else
		*(volatile u32 *)(uintptr_t)(GUEST_LAPIC_BASE + reg) = v;
}

u32 apic_id(void)
{
	u32 id = apic_read(APIC_REG_ID);

	return apic_x2 ? id : id >> 24;
}

void apic_eoi(void)
{
	apic_write(APIC_REG_EOI, 0);
}

void apic_send_ipi(u32 dest, u32 icr_low)
{
	if (apic_x2) {
		wrmsr(MSR_X2APIC_BASE + (APIC_REG_ICR_LOW >> 4), ((u64)dest << 32) | icr_low);
		return;
	}
	for (int i = 0; i < 100000 && (apic_read(APIC_REG_ICR_LOW) & (1u << 12)); i++)
		cpu_relax();
	apic_write(APIC_REG_ICR_HIGH, dest << 24);
	apic_write(APIC_REG_ICR_LOW, icr_low);
}

static bool bit_in(u32 base, u8 vector)
{
	return apic_read(base + 0x10 * (vector / 32u)) & (1u << (vector % 32u));
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
	apic_write(APIC_REG_TIMER_DCR, 0xb); /* divide by 1 */
	apic_write(APIC_REG_TIMER_ICR, 0);
}
