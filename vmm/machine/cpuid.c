/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * CPUID: what the host's KVM supports, plus x2APIC and TSC-deadline (unless
 * --cpu takes them away), the vCPU's APIC ID, and this VMM's hypervisor
 * leaves in place of KVM's (and, at the next range, a KVM signature with
 * the PV EOI feature only: guest_abi.h). CPUID.1:EDX.APIC is KVM's to keep: it follows
 * IA32_APIC_BASE.EN, which the local APIC mirrors into KVM.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sysidle/guest_abi.h>

#include "base/error.h"
#include "machine/cpuid.h"
#include "machine/kvm_sys.h"
#include "machine/vcpu.h"
#include "machine/vm.h"

#define CPUID_MAX_ENTRIES 256

static struct kvm_cpuid2 *host_cpuid;

static int cpuid_host(struct vm *vm)
{
	host_cpuid = calloc(1, sizeof(*host_cpuid) +
			       CPUID_MAX_ENTRIES * sizeof(host_cpuid->entries[0]));
	if (!host_cpuid)
		return vmm_fail(VMM_EXIT_KVM, "out of memory");
	host_cpuid->nent = CPUID_MAX_ENTRIES;
	if (kvm_sys_ioctl(vm->kvm_fd, KVM_GET_SUPPORTED_CPUID,
			  host_cpuid) < 0)
		return vmm_fail(VMM_EXIT_KVM, "KVM_GET_SUPPORTED_CPUID: %s",
				strerror(errno));
	vm->phys_bits = 36; /* without leaf 0x80000008 */
	for (uint32_t i = 0; i < host_cpuid->nent; i++)
		if (host_cpuid->entries[i].function == 0x80000008u &&
		    (host_cpuid->entries[i].eax & 0xff))
			vm->phys_bits = (uint8_t)host_cpuid->entries[i].eax;
	return 0;
}

static const struct {
	const char *name;
	unsigned int bit;
} cpu_flags[] = {
	{ "x2apic", CPU_F_X2APIC },
	{ "tsc-deadline", CPU_F_TSC_DEADLINE },
	{ "pv-eoi", CPU_F_PV_EOI },
};

/* The cpu_flags bit named by @name (@len bytes), or 0. */
static unsigned int cpu_flag_bit(const char *name, size_t len)
{
	for (size_t i = 0; i < sizeof(cpu_flags) / sizeof(cpu_flags[0]); i++)
		if (strlen(cpu_flags[i].name) == len &&
		    !strncmp(name, cpu_flags[i].name, len))
			return cpu_flags[i].bit;
	return 0;
}

int cpu_features_parse(const char *flags, unsigned int *off, char *bad,
		       size_t bad_len)
{
	const char *p = flags;

	for (;;) {
		size_t len = strcspn(p, ",");
		unsigned int bit = len > 1 ? cpu_flag_bit(p + 1, len - 1) : 0;

		if (!bit || (*p != '+' && *p != '-')) {
			snprintf(bad, bad_len, "%.*s", (int)len, p);
			return -1;
		}
		if (*p == '-')
			*off |= bit;
		else
			*off &= ~bit;
		if (!p[len])
			return 0;
		p += len + 1;
	}
}

static void cpuid_patch(struct vcpu *v, struct kvm_cpuid_entry2 *e)
{
	switch (e->function) {
	case 1:
		e->ebx = (e->ebx & 0x00ffffffu) | (v->id << 24);
		e->ecx |= 1u << 31; /* hypervisor */
		e->ecx &= ~((1u << 21) | (1u << 24));
		if (vm_cpu_has(v->vm, CPU_F_X2APIC))
			e->ecx |= 1u << 21;
		if (vm_cpu_has(v->vm, CPU_F_TSC_DEADLINE))
			e->ecx |= 1u << 24;
		e->edx |= 1u << 9; /* APIC: KVM clears it while EN is 0 */
		break;
	case 0xb:
	case 0x1f:
		e->edx = v->id;
		break;
	default:
		break;
	}
}

static void cpuid_hv_leaves(struct vcpu *v, struct kvm_cpuid2 *c)
{
	struct kvm_cpuid_entry2 *e = &c->entries[c->nent];

	e[0] = (struct kvm_cpuid_entry2){ .function = CPUID_HV_BASE,
		.eax = CPUID_HV_TIMING, .ebx = SYSIDLE_HV_SIGNATURE_EBX,
		.ecx = SYSIDLE_HV_SIGNATURE_ECX, .edx = SYSIDLE_HV_SIGNATURE_EDX };
	e[1] = (struct kvm_cpuid_entry2){ .function = CPUID_HV_FEATURES,
		.eax = SYSIDLE_HV_F_PVTICK };
	e[2] = (struct kvm_cpuid_entry2){ .function = CPUID_HV_TIMING,
		.eax = v->lapic.timer.tsc_khz,
		.ebx = (uint32_t)(GUEST_APIC_TIMER_HZ / 1000) };
	c->nent += 3;
	if (!vm_cpu_has(v->vm, CPU_F_PV_EOI))
		return;
	e[3] = (struct kvm_cpuid_entry2){ .function = CPUID_KVM_PV_BASE,
		.eax = CPUID_KVM_PV_FEATURES, .ebx = KVM_PV_SIGNATURE_EBX,
		.ecx = KVM_PV_SIGNATURE_ECX, .edx = KVM_PV_SIGNATURE_EDX };
	e[4] = (struct kvm_cpuid_entry2){ .function = CPUID_KVM_PV_FEATURES,
		.eax = KVM_PV_F_EOI };
	c->nent += 2;
}

/* Caller: @v's fd exists and v->lapic.timer.tsc_khz is known. */
int cpuid_setup(struct vcpu *v)
{
	struct kvm_cpuid2 *c;

	if (!host_cpuid && cpuid_host(v->vm))
		return -1;
	c = calloc(1, sizeof(*c) + (host_cpuid->nent + 5) * sizeof(c->entries[0]));
	if (!c)
		return vmm_fail(VMM_EXIT_KVM, "out of memory");
	for (uint32_t i = 0; i < host_cpuid->nent; i++) {
		struct kvm_cpuid_entry2 e = host_cpuid->entries[i];

		if (e.function >= CPUID_HV_BASE && e.function < 0x50000000u)
			continue; /* KVM's own leaves: replaced by ours */
		cpuid_patch(v, &e);
		c->entries[c->nent++] = e;
	}
	cpuid_hv_leaves(v, c);
	if (kvm_sys_ioctl(v->fd, KVM_SET_CPUID2, c) < 0) {
		free(c);
		return vmm_fail(VMM_EXIT_KVM, "KVM_SET_CPUID2: %s",
				strerror(errno));
	}
	free(c);
	return 0;
}
