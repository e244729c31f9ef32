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
 *
 * This file holds the input, its steps, the VM set up for each input and
 * the entry point; fuzz_devices_access.c the accesses and the checks on
 * them and on the devices' state.
 */
#include <assert.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <sysidle/guest_abi.h>

#include "idle/pvtick.h"
#include "machine/devices/devices.h"
#include "machine/devices/edu.h"
#include "machine/devices/rtc.h"
#include "machine/irq.h"
#include "machine/pci.h"
#include "machine/vcpu.h"
#include "machine/vcpu_loop.h"
#include "machine/vm.h"

#include "devices_fakes.h"
#include "fuzz_devices.h"

#define STEPS_MAX 2048

struct in {
	const uint8_t *p;
	size_t n;
};

struct machine_config cfg = { .append = "console=ttyS0 fuzz" };
struct vm vm;
static struct vcpu vcpus[NCPUS_MAX] __attribute__((aligned(64)));
static struct edu edu, edu_saved;
static bool set_up;
static bool suppress_ticks;

/* What the harness remembers of what the guest wrote (fuzz_devices.h). */
struct fuzz_shadow sh;

/* --- the input --- */

/* Up to 8 bytes, little-endian; past the end of the input, zeros. */
static uint64_t take(struct in *in, unsigned int n)
{
	uint64_t v = 0;

	for (unsigned int i = 0; i < n && in->n; i++, in->p++, in->n--)
		v |= (uint64_t)in->p[0] << (8 * i);
	return v;
}

/* pvtick's suppress callback: the idle layer's "halted non-timekeeper". */
static bool fuzz_suppress(const struct vcpu *v)
{
	(void)v;
	return suppress_ticks;
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
	} else if (lapic_take_timer(&v->lapic),
		   (vec = lapic_pending_vector(&v->lapic)) >= 0) {
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
		lapic_timer_hold(&v->lapic.timer);
		pthread_mutex_unlock(&v->lock);
		break;
	case 6:
		pthread_mutex_lock(&v->lock);
		lapic_timer_release(&v->lapic.timer);
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
		vcpu_timer_init(v);
		lapic_reset(v);
		lapic_timer_set_tsc(&v->lapic.timer, 12345678, fake_now,
				    vm.tsc_khz);
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
