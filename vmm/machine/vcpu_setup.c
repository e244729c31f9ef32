/* SPDX-License-Identifier: GPL-2.0-only */
/* Creating vCPUs and setting their registers: multiboot entry, SIPI. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sysidle/guest_abi.h>

#include "base/error.h"
#include "base/time.h"
#include "machine/cpuid.h"
#include "machine/kvm_sys.h"
#include "machine/vcpu.h"
#include "machine/vcpu_loop.h"
#include "machine/vm.h"

static void seg_flat(struct kvm_segment *s, uint16_t sel, uint8_t type)
{
	*s = (struct kvm_segment){ .base = 0, .limit = 0xffffffff,
		.selector = sel, .type = type, .present = 1, .dpl = 0,
		.db = 1, .s = 1, .l = 0, .g = 1 };
}

static void seg_real(struct kvm_segment *s, uint16_t sel, uint8_t type)
{
	*s = (struct kvm_segment){ .base = (uint64_t)sel << 4,
		.limit = 0xffff, .selector = sel, .type = type, .present = 1,
		.s = 1 };
}

/* Flat 32-bit protected mode, paging off, at @regs->rip: the multiboot
 * entry state, and the S3 resume at a 32-bit waking vector. @what names
 * it in an error. Caller: @v's thread. */
static int vcpu_set_flat_state(struct vcpu *v, struct kvm_regs *regs,
			       const char *what)
{
	struct kvm_sregs sr;

	if (kvm_sys_ioctl(v->fd, KVM_GET_SREGS, &sr) < 0)
		return vmm_fail(VMM_EXIT_KVM, "KVM_GET_SREGS: %s",
				strerror(errno));
	seg_flat(&sr.cs, 0x10, 0xb);
	seg_flat(&sr.ds, 0x18, 0x3);
	sr.es = sr.fs = sr.gs = sr.ss = sr.ds;
	sr.cr0 = 0x11; /* PE | ET */
	sr.cr2 = sr.cr3 = sr.cr4 = 0;
	sr.efer = 0;
	regs->rflags = 2;
	v->events_fresh = false; /* KVM's events change with the state */
	if (kvm_sys_ioctl(v->fd, KVM_SET_SREGS, &sr) < 0 ||
	    kvm_sys_ioctl(v->fd, KVM_SET_REGS, regs) < 0)
		return vmm_fail(VMM_EXIT_KVM, "vCPU %u: setting the %s state: "
				"%s", v->id, what, strerror(errno));
	return 0;
}

/* Multiboot entry state: flat 32-bit protected mode, paging off. */
static int vcpu_set_multiboot_state(struct vcpu *v)
{
	struct kvm_regs regs = {
		.rip = v->vm->entry,
		.rax = MULTIBOOT_BOOTLOADER_MAGIC,
		.rbx = v->vm->mbi,
	};

	return vcpu_set_flat_state(v, &regs, "boot");
}

/* Real mode at @cs:@ip, as after INIT + SIPI. Caller: @v's thread. */
static int vcpu_set_real_state(struct vcpu *v, uint16_t cs, uint16_t ip)
{
	struct kvm_sregs sr;
	struct kvm_regs regs = { .rflags = 2, .rip = ip };

	if (kvm_sys_ioctl(v->fd, KVM_GET_SREGS, &sr) < 0)
		return vmm_fail(VMM_EXIT_KVM, "KVM_GET_SREGS: %s",
				strerror(errno));
	seg_real(&sr.cs, cs, 0xb);
	seg_real(&sr.ds, 0, 0x3);
	sr.es = sr.fs = sr.gs = sr.ss = sr.ds;
	sr.gdt = (struct kvm_dtable){ .base = 0, .limit = 0xffff };
	sr.idt = sr.gdt;
	sr.cr0 = 0x60000010;
	sr.cr2 = sr.cr3 = sr.cr4 = 0;
	sr.efer = 0;
	v->events_fresh = false; /* as in vcpu_set_flat_state */
	if (kvm_sys_ioctl(v->fd, KVM_SET_SREGS, &sr) < 0 ||
	    kvm_sys_ioctl(v->fd, KVM_SET_REGS, &regs) < 0)
		return vmm_fail(VMM_EXIT_KVM, "vCPU %u: setting the real-mode "
				"start state: %s", v->id, strerror(errno));
	return 0;
}

/* Real mode at @vector << 12, as after INIT + SIPI. Caller: @v's thread. */
int vcpu_set_sipi_state(struct vcpu *v, uint8_t vector)
{
	return vcpu_set_real_state(v, (uint16_t)(vector << 8), 0);
}

/* See vcpu.h; the FACS waking vectors' entry states (ACPI 6.x, 5.2.10).
 * Caller: @v's thread. */
int vcpu_set_resume_state(struct vcpu *v, uint32_t addr, bool protected)
{
	struct kvm_regs regs = { .rip = addr };

	if (!protected)
		return vcpu_set_real_state(v, (uint16_t)(addr >> 4),
					   (uint16_t)(addr & 0xf));
	return vcpu_set_flat_state(v, &regs, "resume");
}

int vcpu_set_kvm_apic_base(struct vcpu *v, uint64_t val)
{
	struct {
		struct kvm_msrs hdr;
		struct kvm_msr_entry e;
	} m = { .hdr.nmsrs = 1, .e.index = MSR_IA32_APIC_BASE, .e.data = val };

	return kvm_sys_ioctl(v->fd, KVM_SET_MSRS, &m) == 1 ? 0 : -1;
}

/* The guest TSC at a known host time, for TSC-deadline conversion. */
static int vcpu_read_tsc(struct vcpu *v)
{
	struct {
		struct kvm_msrs hdr;
		struct kvm_msr_entry e;
	} m = { .hdr.nmsrs = 1, .e.index = 0x10 };
	int khz = kvm_sys_ioctl_n(v->fd, KVM_GET_TSC_KHZ, 0);

	if (khz <= 0 || kvm_sys_ioctl(v->fd, KVM_GET_MSRS, &m) != 1)
		return vmm_fail(VMM_EXIT_KVM, "vCPU %u: reading the TSC: %s",
				v->id, strerror(errno));
	lapic_timer_set_tsc(&v->lapic.timer, m.e.data, now_ns(), (uint32_t)khz);
	v->vm->tsc_khz = (uint32_t)khz;
	return 0;
}

/*
 * What PC firmware leaves in the boot CPU's local APIC (MP spec virtual
 * wire mode, as SeaBIOS sets it): software-enabled, LINT0 ExtINT (the
 * PIC's INTR) and LINT1 NMI, both unmasked and level-triggered. INIT does
 * not come back here: it leaves LINT0 masked. The vCPU is not running.
 */
static void vcpu_firmware_apic(struct lapic *l)
{
	l->svr |= APIC_SVR_ENABLE;
	l->lvt[LAPIC_LVT_LINT0] = APIC_TRIGGER_LEVEL |
				  APIC_DM_FIELD(APIC_DM_EXTINT);
	l->lvt[LAPIC_LVT_LINT1] = APIC_TRIGGER_LEVEL |
				  APIC_DM_FIELD(APIC_DM_NMI);
}

static int vcpu_create(struct vm *vm, struct vcpu *v, unsigned int id)
{
	v->vm = vm;
	v->id = id;
	v->state = id == 0 ? VCPU_RUNNING : VCPU_WAIT_SIPI;
	v->fd = kvm_sys_ioctl_n(vm->vm_fd, KVM_CREATE_VCPU, id);
	if (v->fd < 0)
		return vmm_fail(VMM_EXIT_KVM, "KVM_CREATE_VCPU %u of %u: %s",
				id, vm->ncpus, strerror(errno));
	v->run = kvm_sys_map_run(v->fd, (size_t)vm->run_size);
	if (!v->run)
		return vmm_fail(VMM_EXIT_KVM, "mmap of vCPU %u: %s", id,
				strerror(errno));
	vcpu_timer_init(v);
	if (vcpu_read_tsc(v) || cpuid_setup(v))
		return -1;
	if (vm->sync_events) /* KVM stores them at every KVM_RUN return */
		v->run->kvm_valid_regs = KVM_SYNC_X86_EVENTS;
	lapic_reset(v);
	if (id != 0)
		return 0;
	vcpu_firmware_apic(&v->lapic);
	return vcpu_set_multiboot_state(v);
}

static void (*reset_hook)(struct vcpu *v);

void vcpu_set_reset_hook(void (*reset)(struct vcpu *v))
{
	reset_hook = reset;
}

/* INIT: the local APIC and what resets with it. Lock held. */
void vcpu_reset(struct vcpu *v)
{
	lapic_reset(v);
	/* KVM's copy of IA32_APIC_BASE (its CPUID.1:EDX.APIC follows it):
	 * an S3 resume puts the base back to its power-on value. */
	if (vcpu_set_kvm_apic_base(v, v->lapic.base_msr))
		vmm_warn("vCPU %u: KVM refused IA32_APIC_BASE %#llx after a "
			 "reset", v->id, (unsigned long long)v->lapic.base_msr);
	if (reset_hook)
		reset_hook(v);
}

int vcpus_create(struct vm *vm)
{
	pthread_condattr_t mono;

	vm->vcpus = aligned_alloc(64, vm->ncpus * sizeof(*vm->vcpus));
	if (!vm->vcpus)
		return vmm_fail(VMM_EXIT_KVM, "out of memory");
	memset(vm->vcpus, 0, vm->ncpus * sizeof(*vm->vcpus));
	/* Every lock first: vcpus_stop / vcpus_nudge take them all, even
	 * after a creation failed half-way. The wake condition's timeouts
	 * are LAPIC timer deadlines: CLOCK_MONOTONIC, as now_ns(). */
	pthread_condattr_init(&mono);
	pthread_condattr_setclock(&mono, CLOCK_MONOTONIC);
	for (unsigned int i = 0; i < vm->ncpus; i++) {
		pthread_mutex_init(&vm->vcpus[i].lock, NULL);
		pthread_cond_init(&vm->vcpus[i].wake, &mono);
	}
	pthread_condattr_destroy(&mono);
	for (unsigned int i = 0; i < vm->ncpus; i++)
		if (vcpu_create(vm, &vm->vcpus[i], i))
			return -1;
	return 0;
}
