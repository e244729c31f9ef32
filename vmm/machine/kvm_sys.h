/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The only way the VMM reaches KVM: opening it, its ioctls and the vCPU's
 * shared kvm_run page. kvm_sys.c is the host's (/dev/kvm, ioctl(2),
 * mmap(2)); a test links its own stand-in in its place (tests/vmm/
 * scripted/: scripted exits, no /dev/kvm), so that the vCPU loop, the
 * devices and the idle tracking above run unchanged on either.
 *
 * Each call has the system call's contract: -1 with errno on failure.
 */
#ifndef VMM_MACHINE_KVM_SYS_H
#define VMM_MACHINE_KVM_SYS_H

#include <linux/kvm.h>
#include <stddef.h>

/* A file descriptor for the KVM system (KVM_GET_API_VERSION, ...). */
int kvm_sys_open(void);
/* An ioctl whose argument is a pointer (@arg may be NULL). */
int kvm_sys_ioctl(int fd, unsigned long req, void *arg);
/* An ioctl whose argument is a number (KVM_CHECK_EXTENSION, ...). */
int kvm_sys_ioctl_n(int fd, unsigned long req, unsigned long n);
/* The kvm_run page of vCPU @vcpu_fd, @size bytes (KVM_GET_VCPU_MMAP_SIZE);
 * NULL with errno on failure. Lives as long as the process. */
struct kvm_run *kvm_sys_map_run(int vcpu_fd, size_t size);

#endif
