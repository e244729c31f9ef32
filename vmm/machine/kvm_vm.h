/* SPDX-License-Identifier: GPL-2.0-only */
/* The VM on KVM: /dev/kvm, its capabilities, the guest RAM (kvm.c). Named
 * apart from <linux/kvm.h>; every KVM call goes through kvm_sys.h. */
#ifndef VMM_MACHINE_KVM_VM_H
#define VMM_MACHINE_KVM_VM_H

struct machine_config;
struct vm;

/* The main thread, first: opens /dev/kvm, creates the VM (no in-kernel
 * irqchip) and its RAM from @cfg, which must outlive @vm. */
int kvm_vm_create(struct vm *vm, const struct machine_config *cfg);
/* The main thread, last, every vCPU thread joined; also after a creation
 * that failed half-way. */
void kvm_vm_destroy(struct vm *vm);

#endif
