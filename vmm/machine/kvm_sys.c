/* SPDX-License-Identifier: GPL-2.0-only */
/* KVM as the host offers it: /dev/kvm, ioctl(2), the vCPU's mmap(2). */
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/mman.h>

#include "machine/kvm_sys.h"

int kvm_sys_open(void)
{
	return open("/dev/kvm", O_RDWR | O_CLOEXEC);
}

int kvm_sys_ioctl(int fd, unsigned long req, void *arg)
{
	return ioctl(fd, req, arg);
}

int kvm_sys_ioctl_n(int fd, unsigned long req, unsigned long n)
{
	return ioctl(fd, req, n);
}

struct kvm_run *kvm_sys_map_run(int vcpu_fd, size_t size)
{
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED,
		       vcpu_fd, 0);

	return p == MAP_FAILED ? NULL : p;
}
