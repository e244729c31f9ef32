/* SPDX-License-Identifier: GPL-2.0-only */
/* The VM on KVM: /dev/kvm, its capabilities, the guest RAM (kvm.c). Named
 * apart from <linux/kvm.h>; every KVM call goes through kvm_sys.h. */
#ifndef VMM_MACHINE_KVM_VM_H
#define VMM_MACHINE_KVM_VM_H

struct machine_config;
struct vm;

int kvm_vm_create(struct vm *vm, const struct machine_config *cfg);
void kvm_vm_destroy(struct vm *vm);

#endif
