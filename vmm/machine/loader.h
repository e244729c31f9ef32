/* SPDX-License-Identifier: GPL-2.0-only */
/* The Multiboot v1 loader (loader.c; the kernel's ELF: image.h). */
#ifndef VMM_MACHINE_LOADER_H
#define VMM_MACHINE_LOADER_H

struct machine_config;
struct vm;

/* The kernel and modules of @cfg into RAM, the multiboot info, then the
 * ACPI tables; sets vm->entry and vm->mbi. Caller: the VM's RAM exists,
 * no vCPU runs yet, the stop signals are blocked. */
int loader_load(struct vm *vm, const struct machine_config *cfg);

#endif
