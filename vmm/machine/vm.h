/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The machine: the VM object (struct vm, built by kvm.c: kvm_vm.h), what
 * it is made of (struct machine_config, main.c's options) and its guest
 * RAM (guest_ptr, in kvm.c). This layer knows nothing of sysidle or of the
 * outside world: the idle layer plugs into the vCPU loop through struct
 * vcpu_idle_ops (vcpu.h), the export layer reads what it needs through
 * the getters of each part's header (vcpu.h, pause.h, ...).
 */
#ifndef VMM_MACHINE_VM_H
#define VMM_MACHINE_VM_H

#include <stdbool.h>
#include <stdint.h>

#include "machine/devices/lapic_timer.h" /* enum lapic_tick_policy */

#define VMM_MAX_CPUS 1024

struct vcpu;
struct vcpu_idle_ops;

/* CPU features --cpu can take away from the guest (on by default). */
enum cpu_feature {
	CPU_F_X2APIC = 1u << 0,       /* CPUID.1:ECX[21], IA32_APIC_BASE.EXTD */
	CPU_F_TSC_DEADLINE = 1u << 1, /* CPUID.1:ECX[24], the LVT timer mode */
	CPU_F_PV_EOI = 1u << 2,       /* KVM's PV EOI (guest_abi.h) */
};

/* What the machine is made of (main.c's options). */
struct machine_config {
	uint64_t mem_size;
	unsigned int ncpus;
	const char *kernel;
	const char *append;
	const char **modules;
	unsigned int nmodules;
	enum lapic_tick_policy lapic_tick_policy; /* --lapic-tick-policy */
	unsigned int cpu_features_off; /* --cpu: enum cpu_feature bits */
	bool intel_iommu; /* --device intel-iommu: the ACPI tables get a DMAR */
	uint64_t halt_poll_max_ns;     /* --halt-poll-ns, 0: never poll */
	uint64_t timer_advance_max_ns; /* --timer-advance-ns, 0: none */
	bool timers_on_housekeeping;   /* --vcpu-timers housekeeping */
	bool inject_by_ioctl;          /* --interrupt-injection ioctl */
};

struct vm {
	int kvm_fd;
	int vm_fd;
	int run_size;
	uint8_t *ram;
	uint64_t ram_size; /* total guest RAM */
	uint64_t ram_low;  /* RAM mapped at 0 (below GUEST_MMIO_HOLE) */
	unsigned int ncpus;
	unsigned int max_cpus;
	uint32_t tsc_khz;
	uint8_t phys_bits; /* the guest's MAXPHYADDR (CPUID 0x80000008) */
	struct vcpu *vcpus;
	uint64_t entry; /* multiboot entry point */
	uint64_t mbi;   /* multiboot info address */
	const struct machine_config *cfg;
	const struct vcpu_idle_ops *idle; /* set before the vCPUs start */
	/* KVM syncs the vCPU events through kvm_run (KVM_CAP_SYNC_REGS):
	 * interrupts are injected at KVM_RUN, not by a KVM_INTERRUPT ioctl
	 * of their own (unless --interrupt-injection ioctl). */
	bool sync_events;
};

/* Translate a guest physical range to host memory, or NULL. */
void *guest_ptr(struct vm *vm, uint64_t gpa, uint64_t len);

/* Any thread: the VM's guest CPU has feature @f (enum cpu_feature). */
static inline bool vm_cpu_has(const struct vm *vm, unsigned int f)
{
	return !(vm->cfg && (vm->cfg->cpu_features_off & f));
}

#endif
