/* SPDX-License-Identifier: GPL-2.0-only */
/* The KVM VM: /dev/kvm, capabilities, guest RAM. */
#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include <sysidle/guest_abi.h>

#include "base/error.h"
#include "machine/kvm_sys.h"
#include "machine/kvm_vm.h"
#include "machine/vm.h"

#define GIB (1ull << 30)
#define HIGH_RAM_BASE (4 * GIB)

static int kvm_check(struct vm *vm, int cap)
{
	int r = kvm_sys_ioctl_n(vm->vm_fd, KVM_CHECK_EXTENSION, cap);

	return r < 0 ? 0 : r;
}

static int kvm_map_ram(struct vm *vm, uint32_t slot, uint64_t gpa,
		       uint64_t size, uint8_t *host)
{
	struct kvm_userspace_memory_region region = {
		.slot = slot,
		.guest_phys_addr = gpa,
		.memory_size = size,
		.userspace_addr = (uintptr_t)host,
	};

	if (kvm_sys_ioctl(vm->vm_fd, KVM_SET_USER_MEMORY_REGION,
			  &region) < 0)
		return vmm_fail(VMM_EXIT_KVM, "KVM_SET_USER_MEMORY_REGION: %s",
				strerror(errno));
	return 0;
}

/*
 * What this host can give: guest RAM beyond its RAM and swap together is
 * refused (the mmap is MAP_NORESERVE, so it would succeed, and the OOM
 * killer would end the VM later, whatever it was doing); vCPUs beyond 8
 * per host CPU are allowed with a warning (each is a host thread that
 * spins or waits its turn). Main thread, before the RAM is mapped.
 */
static int kvm_check_host_fit(struct vm *vm)
{
	struct sysinfo si;
	uint64_t host;
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);

	if (sysinfo(&si) == 0) {
		host = ((uint64_t)si.totalram + si.totalswap) * si.mem_unit;
		if (vm->ram_size > host)
			return vmm_fail(VMM_EXIT_USAGE, "--mem %" PRIu64 "M: "
					"more than this host has (%" PRIu64
					"M of RAM and swap together)",
					vm->ram_size >> 20, host >> 20);
	}
	if (cpus > 0 && vm->ncpus > 8 * (unsigned long)cpus)
		vmm_warn("--cpus %u on %ld host CPUs: more than 8 vCPUs per "
			 "host CPU, the guest will run slowly", vm->ncpus,
			 cpus);
	return 0;
}

/* What an operator can do about a failed open of /dev/kvm. */
static const char *kvm_open_hint(int err)
{
	switch (err) {
	case ENOENT:
	case ENXIO:
	case ENODEV:
		return " (this host has no KVM: no KVM module (kvm_intel, "
		       "kvm_amd) is loaded, virtualisation is off in the "
		       "firmware, or the hypervisor below offers no nested "
		       "virtualisation)";
	case EACCES:
	case EPERM:
		return " (this user may not open it: run as a member of its "
		       "group, usually kvm)";
	default:
		return "";
	}
}

/*
 * Opens /dev/kvm, creates the VM (no in-kernel irqchip, so HLT exits to
 * userspace) and its RAM: [0, min(size, 3 GiB)) plus the rest at 4 GiB.
 */
int kvm_vm_create(struct vm *vm, const struct machine_config *opts)
{
	int max;

	vm->cfg = opts;
	vm->ncpus = opts->ncpus;
	vm->kvm_fd = kvm_sys_open();
	if (vm->kvm_fd < 0)
		return vmm_fail(VMM_EXIT_KVM, "cannot open /dev/kvm: %s%s",
				strerror(errno), kvm_open_hint(errno));
	if (kvm_sys_ioctl_n(vm->kvm_fd, KVM_GET_API_VERSION, 0) !=
	    KVM_API_VERSION)
		return vmm_fail(VMM_EXIT_KVM, "unsupported KVM API version");
	do
		vm->vm_fd = kvm_sys_ioctl_n(vm->kvm_fd, KVM_CREATE_VM, 0);
	while (vm->vm_fd < 0 && errno == EINTR);
	if (vm->vm_fd < 0)
		return vmm_fail(VMM_EXIT_KVM, "KVM_CREATE_VM: %s",
				strerror(errno));
	if (!kvm_check(vm, KVM_CAP_IMMEDIATE_EXIT) ||
	    !kvm_check(vm, KVM_CAP_X86_USER_SPACE_MSR) ||
	    !kvm_check(vm, KVM_CAP_X86_MSR_FILTER))
		return vmm_fail(VMM_EXIT_KVM, "this KVM lacks IMMEDIATE_EXIT, "
				"X86_USER_SPACE_MSR or X86_MSR_FILTER");

	vm->sync_events = !opts->inject_by_ioctl &&
			  (kvm_check(vm, KVM_CAP_SYNC_REGS) & KVM_SYNC_X86_EVENTS);
	max = kvm_check(vm, KVM_CAP_MAX_VCPUS);
	if (max <= 0)
		max = kvm_check(vm, KVM_CAP_NR_VCPUS);
	vm->max_cpus = max > 0 ? (unsigned int)max : 4;
	if (vm->ncpus > vm->max_cpus)
		return vmm_fail(VMM_EXIT_KVM, "--cpus %u: this host's KVM "
				"allows at most %u vCPUs (KVM_CAP_MAX_VCPUS)",
				vm->ncpus, vm->max_cpus);
	vm->run_size = kvm_sys_ioctl_n(vm->kvm_fd, KVM_GET_VCPU_MMAP_SIZE,
				       0);
	if (vm->run_size < (int)sizeof(struct kvm_run))
		return vmm_fail(VMM_EXIT_KVM, "KVM_GET_VCPU_MMAP_SIZE: %s",
				strerror(errno));
	/* Needed for real mode on VMX only; other hosts may refuse it. */
	(void)kvm_sys_ioctl_n(vm->vm_fd, KVM_SET_TSS_ADDR, 0xfffbd000ul);

	vm->ram_size = (opts->mem_size + 0xfff) & ~0xfffull;
	if (kvm_check_host_fit(vm))
		return -1;
	vm->ram = mmap(NULL, vm->ram_size, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (vm->ram == MAP_FAILED) {
		vm->ram = NULL;
		return vmm_fail(VMM_EXIT_KVM, "cannot allocate %" PRIu64
				" MiB of guest RAM: %s", vm->ram_size >> 20,
				strerror(errno));
	}
	madvise(vm->ram, vm->ram_size, MADV_MERGEABLE);
	vm->ram_low = vm->ram_size < GUEST_MMIO_HOLE ? vm->ram_size
						     : GUEST_MMIO_HOLE;
	if (kvm_map_ram(vm, 0, 0, vm->ram_low, vm->ram))
		return -1;
	if (vm->ram_size > vm->ram_low &&
	    kvm_map_ram(vm, 1, HIGH_RAM_BASE, vm->ram_size - vm->ram_low,
			vm->ram + vm->ram_low))
		return -1;
	return 0;
}

void *guest_ptr(struct vm *vm, uint64_t gpa, uint64_t len)
{
	if (gpa + len < gpa)
		return NULL;
	if (gpa + len <= vm->ram_low)
		return vm->ram + gpa;
	if (gpa >= HIGH_RAM_BASE &&
	    gpa + len - HIGH_RAM_BASE <= vm->ram_size - vm->ram_low)
		return vm->ram + vm->ram_low + (gpa - HIGH_RAM_BASE);
	return NULL;
}

void kvm_vm_destroy(struct vm *vm)
{
	if (vm->ram)
		munmap(vm->ram, vm->ram_size);
	if (vm->vm_fd > 0)
		close(vm->vm_fd);
	if (vm->kvm_fd > 0)
		close(vm->kvm_fd);
}
