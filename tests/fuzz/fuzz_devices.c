/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Fuzz target: the guest-facing device models, driven as a guest would
 * drive them. Each input is one short life of a VM with one or two vCPUs:
 * the devices' own *_init register their ports, MMIO ranges and MSRs (on
 * the fake bus of devices_fakes.c), then the input is a sequence of steps:
 * a port, MMIO or MSR access (a device, an offset in it, size 1/2/4/8,
 * read or write, a value), time passing, the due timers firing, a vCPU
 * taking its next interrupt, an EOI, a write to guest RAM (where the edu
 * device's DMA and the IOMMU's tables are), an INIT, a platform reset, the
 * idle layer suspending or resuming a vCPU's ticks. Interrupt delivery is
 * the real irq.c: ISA lines to the PIC and the IOAPIC, messages to the
 * local APICs.
 *
 * Set up once (their *_init is not safe to repeat; their state is put back
 * per input: edu and the host bridge from a copy, the rest through their
 * registers): the PCI bus, the host bridge, edu, fw_cfg. pc-testdev's
 * 64 KiB iomem keeps what earlier inputs wrote (it is only read back).
 *
 * Invariants, besides the sanitizers':
 *  - a read fills its size and no byte past it;
 *  - an ISA line is 0..23, an IOAPIC pin 0..23;
 *  - local APIC: no vector below 16 in the IRR or ISR; the vector offered
 *    for injection is above the PPR's class, and the PPR read back is the
 *    SDM's (TPR, or the highest ISR class when it is above TPR's); the
 *    timer's current count is at most its initial count;
 *  - IOAPIC: a redirection entry reads back what was written, apart from
 *    delivery status and remote IRR (read only);
 *  - fw_cfg: a read past the selected item's end is 0;
 *  - RTC: while the clock runs, the time registers read in range for the
 *    format (BCD or binary, 12 or 24 hours) register B asks for;
 *  - pv tick: delivered + read missed + pending missed == the ticks due
 *    since the rate was set and accounted so far;
 *  - PIC: an acknowledged vector is one its ICW2 base allows.
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "idle/pvtick.h"
#include "machine/devices/devices.h"
#include "machine/devices/edu.h"
#include "machine/devices/rtc.h"
#include "machine/pci.h"
#include "machine/vm.h"

#include "devices_fakes.h"

#define NCPUS_MAX 2
#define STEPS_MAX 2048
#define IOAPIC_PINS 24
#define RTE_RO_LOW (APIC_SEND_PENDING | APIC_REMOTE_IRR)

struct in {
	const uint8_t *p;
	size_t n;
};

static struct machine_config cfg = { .append = "console=ttyS0 fuzz" };
static struct vm vm;
static struct vcpu vcpus[NCPUS_MAX] __attribute__((aligned(64)));
static struct edu edu, edu_saved;
static bool set_up;
static bool suppress_ticks;

/* What the harness remembers of what the guest wrote. */
static struct {
	uint32_t ioapic_regsel;
	uint32_t rte[IOAPIC_PINS][2];
	uint16_t fw_key;
	uint32_t fw_offset;
	uint8_t rtc_index, rtc_nmi;
	uint64_t pvt_delivered0[NCPUS_MAX], pvt_missed_read[NCPUS_MAX];
	uint8_t pic_base[2]; /* ICW2 as written, per chip */
	uint8_t pic_icw_next[2];
} sh;

/* --- the input --- */

/* Up to 8 bytes, little-endian; past the end of the input, zeros. */
static uint64_t take(struct in *in, unsigned int n)
{
	uint64_t v = 0;

	for (unsigned int i = 0; i < n && in->n; i++, in->p++, in->n--)
		v |= (uint64_t)in->p[0] << (8 * i);
	return v;
}

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

/* pvtick's suppress callback: the idle layer's "halted non-timekeeper". */
static bool fuzz_suppress(const struct vcpu *v)
{
	(void)v;
	return suppress_ticks;
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
	if (l->timer_icr || l->timer_deadline_ns)
		assert(lapic_timer_read_ccr(v) <= l->timer_icr);
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
static void check_all(void)
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
static void pio(struct vcpu *v, uint16_t port, unsigned int len,
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
static void mmio(struct vcpu *v, uint64_t addr, unsigned int len,
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
			assert(r <= v->lapic.timer_icr);
		pthread_mutex_unlock(&v->lock);
	} else if (!lapic && addr - GUEST_IOAPIC_BASE < 0x1000) {
		ioapic_note(addr - GUEST_IOAPIC_BASE, d, len, false);
	}
}

/* An RDMSR/WRMSR, as msr.c dispatches it: registered ranges, then the
 * local APIC's MSRs, else #GP. */
static void msr(struct vcpu *v, uint32_t index, bool is_write, uint64_t val)
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
			assert(x <= v->lapic.timer_icr);
		pthread_mutex_unlock(&v->lock);
	}
}

/* --- the steps --- */

static const struct {
	uint16_t base, span;
} ports[] = {
	{ 0x3f8, 8 }, { 0xf4, 4 }, { 0x510, 2 }, { 0x40, 4 }, { 0x20, 2 },
	{ 0xa0, 2 }, { 0x4d0, 2 }, { 0x70, 2 }, { 0x600, 0x40 },
	{ 0xe0, 12 }, { 0x2000, 24 }, { 0xcf8, 8 }, { 0xc000, 0x100 },
	{ 0x61, 0x20 }, { 0x70, 2 }, { 0x3f8, 8 },
};

/* The step decoders: each takes what it needs from @in (zeros past its
 * end) and acts on @v, one of the VM's vCPUs. */
static void step_pio(struct vcpu *v, struct in *in)
{
	unsigned int sel = (unsigned int)take(in, 1);
	unsigned int mode = (unsigned int)take(in, 1);
	unsigned int len = 1u << ((mode & 3) % 3);
	bool w = mode & 4;
	uint16_t port = (uint16_t)(ports[sel & 15].base +
				   (sel >> 4) % ports[sel & 15].span);

	if ((sel & 15) == 12) /* anywhere */
		port = (uint16_t)take(in, 2);
	pio(v, port, len, w, w ? take(in, len) : 0);
}

static void step_mmio(struct vcpu *v, struct in *in)
{
	unsigned int sel = (unsigned int)take(in, 1);
	unsigned int mode = (unsigned int)take(in, 1);
	unsigned int len = 1u << (mode & 3);
	bool w = mode & 4;
	uint64_t off = take(in, 2), addr;

	switch (sel & 7) {
	case 0: addr = GUEST_IOAPIC_BASE + (off & 0x7f); break;
	case 1: addr = (v->lapic.base_msr & ~0xfffull) + (off & 0xfff); break;
	case 2: addr = 0xfed90000u + ((off & 0x3ff) << 2); break; /* VT-d */
	case 3: addr = 0xff000000u + off; break;
	case 4: addr = PCI_MMIO_WINDOW_BASE + ((off & 0x7f) << 2); break; /* edu */
	case 5: addr = GUEST_IOAPIC_BASE + (off & 0xfff); break;
	case 6: addr = GUEST_LAPIC_BASE + (off & (APIC_PAGE_SIZE - 1)); break;
	default: addr = (uint32_t)(off | take(in, 2) << 16); break;
	}
	mmio(v, addr, len, w, w ? take(in, len) : 0);
}

static void step_msr(struct vcpu *v, struct in *in)
{
	unsigned int sel = (unsigned int)take(in, 1);
	bool w = sel & 0x80;
	uint32_t index;

	switch (sel & 7) {
	case 0: index = MSR_IA32_APIC_BASE; break;
	case 1: index = MSR_IA32_TSC_DEADLINE; break;
	case 2: case 3: index = MSR_X2APIC_BASE + (uint32_t)take(in, 1); break;
	case 4: case 5:
		index = MSR_SYSIDLE_PVTICK_HZ + (uint32_t)((sel >> 3) & 0xf) % 3;
		break;
	case 6: index = MSR_X2APIC_BASE + 0x0b; break; /* EOI */
	default: index = (uint32_t)take(in, 4); break;
	}
	msr(v, index, w, w ? take(in, 8) : 0);
}

/* The vCPU takes the interrupt vcpu.c would inject: ExtINT, else the
 * LAPIC's highest deliverable vector (IRR -> ISR). */
static void step_inject(struct vcpu *v)
{
	int vec;

	pthread_mutex_lock(&v->lock);
	if (irq_extint_pending(v)) {
		vec = irq_extint_ack(v);
		/* The vector of an ICW2 base, or IR7's spurious one. */
		assert((vec & 0xf8) == sh.pic_base[0] ||
		       (vec & 0xf8) == sh.pic_base[1]);
	} else if ((vec = lapic_pending_vector(&v->lapic)) >= 0) {
		lapic_accept(&v->lapic, vec);
	}
	pthread_mutex_unlock(&v->lock);
}

/* The guest's EOI, through the interface its mode has. */
static void step_eoi(struct vcpu *v)
{
	if (lapic_x2apic(&v->lapic))
		msr(v, MSR_X2APIC_BASE + 0x0b, true, 0);
	else
		mmio(v, (v->lapic.base_msr & ~0xfffull) + 0xb0, 4, true, 0);
}

/* Time passes: up to 2^16 << 33 ns. */
static void step_time(struct in *in)
{
	unsigned int shift = (unsigned int)take(in, 1) % 34;

	fake_now += take(in, 2) << shift;
}

/* The clock moves to the earliest armed timer (if not too far) and the
 * due timers fire. */
static void step_timer_next(void)
{
	uint64_t next = fake_timers_next();

	if (next == UINT64_MAX)
		return;
	if (next > fake_now && next - fake_now < (1ull << 42))
		fake_now = next;
	fake_timers_run();
}

/* What other parts of the VMM do to the devices: INIT, the platform
 * reset, the idle layer's tick suspend/resume/hold, the control socket's
 * kick. */
static void step_event(struct vcpu *v, struct in *in)
{
	void (*hook)(struct vcpu *v);

	switch (take(in, 1) % 8) {
	case 0: /* INIT, as vcpu_setup.c's vcpu_reset */
		pthread_mutex_lock(&v->lock);
		lapic_reset(v);
		hook = fake_reset_hook();
		if (hook)
			hook(v);
		pthread_mutex_unlock(&v->lock);
		break;
	case 1: /* platform reset (S3 resume) */
		ioapic_reset();
		sh.ioapic_regsel = 0;
		for (unsigned int p = 0; p < IOAPIC_PINS; p++) {
			sh.rte[p][0] = 1u << 16;
			sh.rte[p][1] = 0;
		}
		break;
	case 2:
		pthread_mutex_lock(&v->lock);
		pvtick_suspend(v);
		pthread_mutex_unlock(&v->lock);
		break;
	case 3:
		pthread_mutex_lock(&v->lock);
		pvtick_resume(v);
		pthread_mutex_unlock(&v->lock);
		break;
	case 4:
		pthread_mutex_lock(&v->lock);
		pvtick_deliver_now(v);
		pthread_mutex_unlock(&v->lock);
		break;
	case 5:
		pthread_mutex_lock(&v->lock);
		lapic_timer_hold(v);
		pthread_mutex_unlock(&v->lock);
		break;
	case 6:
		pthread_mutex_lock(&v->lock);
		lapic_timer_release(v);
		pthread_mutex_unlock(&v->lock);
		break;
	default:
		suppress_ticks = !suppress_ticks;
		break;
	}
}

/* Guest RAM: 8 bytes anywhere in it (tables for the IOMMU, DMA data). */
static void step_ram(struct in *in)
{
	uint64_t off = take(in, 3) % (FAKE_RAM_SIZE - 7), val = take(in, 8);

	memcpy(vm.ram + off, &val, 8);
}

/* --- one VM per input --- */

/* Once: the devices whose *_init cannot run twice. */
static void setup_once(void)
{
	vm.ram = aligned_alloc(4096, FAKE_RAM_SIZE);
	assert(vm.ram);
	vm.ram_size = vm.ram_low = FAKE_RAM_SIZE;
	vm.cfg = &cfg;
	vm.phys_bits = 39;
	vm.vcpus = vcpus;
	vm.ncpus = vm.max_cpus = NCPUS_MAX;
	assert(pci_init(&vm) == 0);
	assert(q35_host_init(&vm) == 0);
	edu_setup(&edu, pci_free_devfn());
	assert(pci_register(&edu.pci) == 0);
	edu_saved = edu;
	assert(fw_cfg_init(&vm) == 0);
	fake_keep();
	set_up = true;
}

/* A guest that has just booted: every device at its power-on state. */
static void setup_input(uint8_t conf)
{
	if (!set_up)
		setup_once();
	fake_reset();
	memset(&sh, 0, sizeof(sh));
	for (unsigned int p = 0; p < IOAPIC_PINS; p++)
		sh.rte[p][0] = 1u << 16;
	sh.pic_base[0] = 0x08; /* pic.c's firmware state */
	sh.pic_base[1] = 0x70;
	suppress_ticks = false;
	fake_now = 1000000000ull;
	memset(vm.ram, 0, FAKE_RAM_SIZE);
	vm.ncpus = 1 + (conf & 1);
	cfg.lapic_tick_policy = (enum lapic_tick_policy)((conf >> 1) % 3);
	cfg.cpu_features_off = (conf >> 3) & 3;
	vm.tsc_khz = 1000000u + (conf >> 5) * 500000u;
	for (unsigned int i = 0; i < NCPUS_MAX; i++) {
		struct vcpu *v = &vcpus[i];

		memset(v, 0, sizeof(*v));
		pthread_mutex_init(&v->lock, NULL);
		v->vm = &vm;
		v->id = i;
		v->started = true;
		v->state = VCPU_RUNNING;
		lapic_timer_init(v);
		lapic_reset(v);
		v->lapic.tsc_khz = vm.tsc_khz;
		v->lapic.tsc0_ns = fake_now;
		v->lapic.tsc0 = 12345678;
	}
	edu = edu_saved;
	pvtick_fini();
	assert(serial_init(&vm) == 0 && debug_exit_init(&vm) == 0 &&
	       legacy_init(&vm) == 0 && ioapic_init(&vm) == 0 &&
	       pic_init(&vm) == 0 && rtc_init(&vm) == 0 &&
	       acpi_pm_init(&vm) == 0 && pc_testdev_init(&vm) == 0 &&
	       intel_iommu_init(&vm) == 0 && lapic_init(&vm) == 0 &&
	       pvtick_init(&vm, fuzz_suppress) == 0);
	for (unsigned int line = 0; line < 24; line++)
		irq_isa_set(line, false);
	/* What the once-only devices keep, put back through registers. */
	pio(&vcpus[0], 0xcf8, 4, true, 0);
	pio(&vcpus[0], 0x510, 2, true, 0);
	pio(&vcpus[0], 0xe0, 4, true, 0);
	mmio(&vcpus[0], GUEST_IOAPIC_BASE, 4, true, 0);
	mmio(&vcpus[0], GUEST_IOAPIC_BASE + 0x10, 4, true, 0);
	/* The UART: divisor 1, everything else 0, THRE interrupt taken. */
	pio(&vcpus[0], 0x3fb, 1, true, 0x80);
	pio(&vcpus[0], 0x3f8, 1, true, 1);
	pio(&vcpus[0], 0x3f9, 1, true, 0);
	pio(&vcpus[0], 0x3fb, 1, true, 0);
	pio(&vcpus[0], 0x3f9, 1, true, 0);
	pio(&vcpus[0], 0x3fa, 1, true, 2);
	pio(&vcpus[0], 0x3fa, 1, true, 0);
	pio(&vcpus[0], 0x3fc, 1, true, 0);
	pio(&vcpus[0], 0x3ff, 1, true, 0);
	pio(&vcpus[0], 0x3fa, 1, false, 0);
}

/* libFuzzer's entry: byte 0 is the VM's configuration (vCPUs, tick
 * policy, CPU features, TSC rate), then steps up to STEPS_MAX. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct in in = { data, size };
	unsigned int steps = 0;

	setup_input((uint8_t)take(&in, 1));
	while (in.n && steps++ < STEPS_MAX) {
		unsigned int op = (unsigned int)take(&in, 1);
		struct vcpu *v = &vcpus[(op >> 7) % vm.ncpus];

		switch (op & 0x0f) {
		case 0: case 1: case 2: step_pio(v, &in); break;
		case 3: case 4: case 5: case 15: step_mmio(v, &in); break;
		case 6: case 7: step_msr(v, &in); break;
		case 8: step_time(&in); break;
		case 9: fake_timers_run(); break;
		case 10: step_timer_next(); break;
		case 11: step_inject(v); break;
		case 12: step_eoi(v); break;
		case 13: step_ram(&in); break;
		default: step_event(v, &in); break;
		}
		check_all();
	}
	return 0;
}
