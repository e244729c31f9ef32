/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The devices fuzz target (fuzz_devices.c): the accesses a guest makes,
 * port, MMIO and MSR, as vcpu.c's exit handler and msr.c make them, with
 * what the harness checks about each (a read fills its size and no byte
 * past it; fw_cfg, RTC, IOAPIC, LAPIC and pv tick reads back), the
 * invariants on the devices' state checked after every step, and the
 * ranges the devices must keep to (the ISA lines and IOAPIC pins, linked
 * with --wrap).
 */
#include <assert.h>
#include <pthread.h>
#include <string.h>

#include <sysidle/guest_abi.h>

#include "idle/pvtick.h"
#include "machine/bus.h"
#include "machine/devices/devices.h"
#include "machine/devices/rtc.h"
#include "machine/vcpu.h"

#include "devices_fakes.h"
#include "fuzz_devices.h"

/* --- ranges the devices must keep to (linked with --wrap) --- */

void __real_irq_isa_set(unsigned int line, bool level);
void __real_ioapic_set_irq(unsigned int pin, bool level);

/* Caller: a device driving its ISA line (any thread, no vCPU lock). */
void __wrap_irq_isa_set(unsigned int line, bool level)
{
	assert(line < 24);
	__real_irq_isa_set(line, level);
}

/* Caller: irq.c or the PCI bus driving an IOAPIC pin. */
void __wrap_ioapic_set_irq(unsigned int pin, bool level)
{
	assert(pin < IOAPIC_PINS);
	__real_ioapic_set_irq(pin, level);
}

/* --- invariants on state --- */

/* The highest vector set in a 256-bit IRR/ISR/TMR, or -1. */
static int vec_highest(const uint32_t *bits)
{
	for (int i = APIC_VECTOR_BANKS - 1; i >= 0; i--)
		if (bits[i])
			return i * 32 + 31 - __builtin_clz(bits[i]);
	return -1;
}

/* SDM 10.8.3.1: PPR is TPR when TPR[7:4] >= ISRV[7:4], else ISRV[7:4]. */
static uint32_t expected_ppr(const struct lapic *l)
{
	int isrv = vec_highest(l->isr);
	uint32_t cls = isrv < 0 ? 0 : (uint32_t)isrv & APIC_PRIORITY_CLASS;

	return (l->tpr & APIC_PRIORITY_CLASS) >= cls ?
	       l->tpr & APIC_PRIORITY_MASK : cls;
}

/* Caller holds no vCPU lock. */
static void check_lapic(struct vcpu *v)
{
	struct lapic *l = &v->lapic;
	int pend;

	pthread_mutex_lock(&v->lock);
	assert(!(l->irr[0] & 0xffff) && !(l->isr[0] & 0xffff));
	assert(l->tpr <= APIC_PRIORITY_MASK);
	pend = lapic_pending_vector(l);
	if (pend >= 0) {
		assert(pend >= APIC_VECTOR_FIRST_VALID &&
		       pend < APIC_VECTOR_COUNT);
		assert(((uint32_t)pend & APIC_PRIORITY_CLASS) >
		       (expected_ppr(l) & APIC_PRIORITY_CLASS));
	}
	if (l->timer.icr || l->timer.deadline_ns)
		assert(lapic_timer_read_ccr(&l->timer) <= l->timer.icr);
	pthread_mutex_unlock(&v->lock);
}

/* The pv tick's accounting (pvtick.c's header). Caller holds no vCPU
 * lock. */
static void check_pvtick(struct vcpu *v)
{
	struct pvtick *t = pvtick_of(v);

	pthread_mutex_lock(&v->lock);
	if (t->hz)
		assert(t->delivered - sh.pvt_delivered0[v->id] +
		       sh.pvt_missed_read[v->id] + t->missed == t->next - 1);
	pthread_mutex_unlock(&v->lock);
}

/* After every step: the state invariants of every vCPU. */
void check_all(void)
{
	for (unsigned int i = 0; i < vm.ncpus; i++) {
		check_lapic(&vm.vcpus[i]);
		check_pvtick(&vm.vcpus[i]);
	}
}

/* --- accesses, and what the harness checks about each --- */

/* @b is two BCD digits. */
static bool bcd_ok(uint8_t b)
{
	return (b & 0xf) <= 9 && (b >> 4) <= 9;
}

/* A time register's value @b is in range for register B's format @regb. */
static bool rtc_in_range(uint8_t reg, uint8_t b, uint8_t regb)
{
	bool bin = regb & RTC_B_DM_BINARY;
	unsigned int v, lo = 0, hi;

	if (reg == RTC_HOURS && !(regb & RTC_B_24H)) {
		b &= 0x7f;
		lo = 1;
		hi = 12;
	} else {
		switch (reg) {
		case RTC_SECONDS: case RTC_MINUTES: hi = 59; break;
		case RTC_HOURS: hi = 23; break;
		case RTC_DAY_OF_WEEK: lo = 1; hi = 7; break;
		case RTC_DAY_OF_MONTH: lo = 1; hi = 31; break;
		case RTC_MONTH: lo = 1; hi = 12; break;
		case RTC_YEAR: hi = 99; break;
		default: return true; /* century: any year the clock holds */
		}
	}
	if (!bin && !bcd_ok(b))
		return false;
	v = bin ? b : (b >> 4) * 10u + (b & 0xf);
	return v >= lo && v <= hi;
}

/* After a read of the RTC's data port: index @idx gave @b. The harness
 * reads registers A and B (no side effects) and puts the index back. */
static void rtc_check_read(struct vcpu *v, uint8_t idx, uint8_t b)
{
	uint8_t a, regb;
	uint8_t d[8];

	if (!(idx <= RTC_YEAR && idx != RTC_SECONDS_ALARM &&
	      idx != RTC_MINUTES_ALARM && idx != RTC_HOURS_ALARM))
		return;
	d[0] = RTC_REG_A | sh.rtc_nmi;
	fake_bus_access(v, BUS_PIO, 0x70, d, 1, true);
	fake_bus_access(v, BUS_PIO, 0x71, d, 1, false);
	a = d[0];
	d[0] = RTC_REG_B | sh.rtc_nmi;
	fake_bus_access(v, BUS_PIO, 0x70, d, 1, true);
	fake_bus_access(v, BUS_PIO, 0x71, d, 1, false);
	regb = d[0];
	d[0] = idx | sh.rtc_nmi;
	fake_bus_access(v, BUS_PIO, 0x70, d, 1, true);
	if ((regb & RTC_B_SET) || (a & RTC_A_DV_MASK) != 0x20)
		return; /* the clock stands: the registers hold what was set */
	assert(rtc_in_range(idx, b, regb));
}

/* fw_cfg's items' lengths, as fw_cfg.c builds them for this VM. */
static uint32_t fw_cfg_len(uint16_t key)
{
	switch (key) {
	case 0x00: return 4; /* signature */
	case 0x01: return 4; /* id */
	case 0x03: return 8; /* RAM size */
	case 0x05: return 2; /* CPUs */
	case 0x19: return 4 + 64 * 2; /* the file directory */
	case 0x20: return (uint32_t)strlen("sysidle-vmm 0.1.0");
	case 0x21: return (uint32_t)strlen(cfg.append);
	default: return 0;
	}
}

/* The harness's view of a PIO write, before it reaches the device. */
static void pio_note_write(uint16_t port, const uint8_t *d, unsigned int len)
{
	if (port == 0x510) {
		sh.fw_key = (uint16_t)(d[0] | (len > 1 ? d[1] << 8 : 0));
		sh.fw_offset = 0;
	} else if (port == 0x70) {
		sh.rtc_index = d[0] & 0x7f;
		sh.rtc_nmi = d[0] & 0x80;
	}
	/* ICW1 on a chip's even port starts the ICW sequence; ICW2 follows
	 * on the odd one (the PIC splits wider accesses into bytes). */
	for (unsigned int i = 0; i < len; i++) {
		unsigned int p = port + i, c;

		if (p != 0x20 && p != 0x21 && p != 0xa0 && p != 0xa1)
			continue;
		c = p >= 0xa0;
		if (!(p & 1) && (d[i] & 0x10))
			sh.pic_icw_next[c] = 2;
		else if ((p & 1) && sh.pic_icw_next[c] == 2) {
			sh.pic_base[c] = d[i] & 0xf8;
			sh.pic_icw_next[c] = 0;
		} else if (p & 1) {
			sh.pic_icw_next[c] = 0;
		}
	}
}

/* An I/O port access through the bus, as vcpu.c's exit handler makes it:
 * any port, @len 1, 2 or 4; @val's low @len bytes are written. */
void pio(struct vcpu *v, uint16_t port, unsigned int len,
	 bool is_write, uint64_t val)
{
	uint8_t d[16];

	memset(d, 0xa5, sizeof(d));
	if (is_write) {
		memcpy(d, &val, len);
		pio_note_write(port, d, len);
		fake_bus_access(v, BUS_PIO, port, d, len, true);
		return;
	}
	fake_bus_access(v, BUS_PIO, port, d, len, false);
	for (unsigned int i = len; i < sizeof(d); i++)
		assert(d[i] == 0xa5);
	if (port == 0x511) {
		if (sh.fw_offset >= fw_cfg_len(sh.fw_key))
			assert(d[0] == 0);
		sh.fw_offset++;
	} else if (port == 0x71) {
		rtc_check_read(v, sh.rtc_index, d[0]);
	}
}

/* The IOAPIC's IOREGSEL/IOWIN as the harness sees them (ioapic.c's
 * rules for access sizes). */
static void ioapic_note(uint64_t off, const uint8_t *d, unsigned int len,
			bool is_write)
{
	uint32_t val = 0, mask = len < 4 ? (1u << (8 * len)) - 1 : ~0u;
	unsigned int pin = (sh.ioapic_regsel - IOAPIC_REG_REDTBL) / 2;

	memcpy(&val, d, len < 4 ? len : 4);
	if (off == IOAPIC_MMIO_REGSEL && is_write) {
		sh.ioapic_regsel = val & 0xff;
		return;
	}
	if (off != IOAPIC_MMIO_WIN || sh.ioapic_regsel < IOAPIC_REG_REDTBL ||
	    pin >= IOAPIC_PINS)
		return;
	if (is_write) {
		sh.rte[pin][sh.ioapic_regsel & 1] = val;
		return;
	}
	if (sh.ioapic_regsel & 1)
		assert(val == (sh.rte[pin][1] & mask));
	else
		assert((val & ~RTE_RO_LOW) ==
		       (sh.rte[pin][0] & mask & ~RTE_RO_LOW));
}

/* An MMIO access, as vcpu.c's exit handler makes it: @v's local APIC
 * first, then the bus. @len 1..8; @val's low @len bytes are written. */
void mmio(struct vcpu *v, uint64_t addr, unsigned int len,
	  bool is_write, uint64_t val)
{
	uint8_t d[16];
	bool lapic;
	uint32_t reg = (uint32_t)addr & APIC_REG_OFFSET_MASK;

	memset(d, 0xa5, sizeof(d));
	if (is_write)
		memcpy(d, &val, len);
	lapic = lapic_mmio_claims(&v->lapic, addr);
	if (lapic)
		lapic_mmio(v, addr & 0xfff, d, len, is_write, NULL);
	else
		fake_bus_access(v, BUS_MMIO, addr, d, len, is_write);
	if (is_write && addr - GUEST_IOAPIC_BASE < 0x1000 && !lapic)
		ioapic_note(addr - GUEST_IOAPIC_BASE, d, len, true);
	if (is_write)
		return;
	for (unsigned int i = len; i < sizeof(d); i++)
		assert(d[i] == 0xa5);
	if (lapic && len == 4 && !(addr & 0xf)) {
		uint32_t r;

		memcpy(&r, d, 4);
		pthread_mutex_lock(&v->lock);
		if (reg == APIC_REG_PPR)
			assert(r == expected_ppr(&v->lapic));
		if (reg == APIC_REG_TPR)
			assert(r == (v->lapic.tpr & APIC_PRIORITY_MASK));
		if (reg == APIC_REG_TIMER_CCR)
			assert(r <= v->lapic.timer.icr);
		pthread_mutex_unlock(&v->lock);
	} else if (!lapic && addr - GUEST_IOAPIC_BASE < 0x1000) {
		ioapic_note(addr - GUEST_IOAPIC_BASE, d, len, false);
	}
}

/* An RDMSR/WRMSR, as msr.c dispatches it: registered ranges, then the
 * local APIC's MSRs, else #GP. */
void msr(struct vcpu *v, uint32_t index, bool is_write, uint64_t val)
{
	uint64_t x = val;
	int r = fake_msr_access(v, index, &x, is_write);

	if (r == 1 && (index == MSR_IA32_APIC_BASE ||
		       index == MSR_IA32_TSC_DEADLINE ||
		       (index >= MSR_X2APIC_BASE && index <= MSR_X2APIC_LAST)))
		r = is_write ? lapic_msr_write(v, index, x)
			     : lapic_msr_read(v, index, &x);
	if (r)
		return;
	if (index == MSR_SYSIDLE_PVTICK_HZ && is_write && val) {
		sh.pvt_delivered0[v->id] = pvtick_of(v)->delivered;
		sh.pvt_missed_read[v->id] = 0;
	} else if (index == MSR_SYSIDLE_PVTICK_MISSED && !is_write) {
		sh.pvt_missed_read[v->id] += x;
	} else if (!is_write && index >= MSR_X2APIC_BASE &&
		   index <= MSR_X2APIC_LAST &&
		   index != APIC_X2APIC_MSR(APIC_REG_ICR_LOW)) {
		assert(x <= 0xffffffffu); /* 32-bit registers but the ICR */
		pthread_mutex_lock(&v->lock);
		if (index == APIC_X2APIC_MSR(APIC_REG_PPR))
			assert(x == expected_ppr(&v->lapic));
		if (index == APIC_X2APIC_MSR(APIC_REG_TIMER_CCR))
			assert(x <= v->lapic.timer.icr);
		pthread_mutex_unlock(&v->lock);
	}
}
