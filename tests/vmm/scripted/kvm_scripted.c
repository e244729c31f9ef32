/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * KVM as a test sees it: kvm_sys.h's calls with no /dev/kvm behind them.
 * The VM and vCPUs are bookkeeping; each vCPU's KVM_RUN plays its part of
 * a scripted guest (script.h, README.md) from where the last one stopped,
 * up to its next exit, and takes the interrupt or NMI the VMM injected as
 * a guest would: it runs the script's handler for the vector, with IF
 * clear, then goes on where it was. Steps that make no exit (spin, busy,
 * wait-irq) block until the VMM kicks the thread, as a guest running in
 * KVM_RUN does. What the VMM answered (an IN, an MMIO read, an RDMSR, a
 * #GP) and every interrupt taken is written to the trace, one line each.
 *
 * The script is the file SYSIDLE_VMM_SCRIPT names; the trace goes to the
 * file SYSIDLE_VMM_SCRIPT_TRACE names (none without it). A VMM that breaks
 * KVM's contract (an interrupt injected while IF is clear, say) gets
 * EINVAL from KVM_RUN and a line on stderr saying what it did.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "machine/kvm_sys.h"
#include "scripted.h"

#define SCRIPT_ENV "SYSIDLE_VMM_SCRIPT"
#define TRACE_ENV "SYSIDLE_VMM_SCRIPT_TRACE"
#define MAX_FDS 8192
#define MAX_VCPUS 1024

enum obj_kind { OBJ_NONE, OBJ_SYSTEM, OBJ_VM, OBJ_VCPU };

static struct {
	enum obj_kind kind;
	struct scripted_vcpu *vcpu;
} objs[MAX_FDS];
static pthread_mutex_t objs_lock = PTHREAD_MUTEX_INITIALIZER;
static struct script script;
static bool script_loaded;
static int trace_fd = -1;

const struct script *scripted_script(void)
{
	return &script;
}

uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void trace(const struct scripted_vcpu *c, const char *fmt, ...)
{
	char line[256];
	va_list ap;
	int n;

	if (trace_fd < 0)
		return;
	n = snprintf(line, sizeof(line), "%" PRIu64 " vcpu %u ", mono_ns(),
		     c->id);
	va_start(ap, fmt);
	n += vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	if (write(trace_fd, line, (size_t)n) < 0)
		return;
}

int contract(struct scripted_vcpu *c, const char *what, int arg)
{
	fprintf(stderr, "vmm-scripted: vCPU %u: ", c->id);
	fprintf(stderr, what, arg);
	fputc('\n', stderr);
	trace(c, "error");
	errno = EINVAL;
	return -1;
}

static struct scripted_vcpu *vcpu_of(int fd)
{
	if (fd < 0 || fd >= MAX_FDS || objs[fd].kind != OBJ_VCPU) {
		errno = EBADF;
		return NULL;
	}
	return objs[fd].vcpu;
}

static int new_fd(enum obj_kind kind, struct scripted_vcpu *vcpu)
{
	int fd = eventfd(0, EFD_CLOEXEC);

	if (fd < 0)
		return -1;
	if (fd >= MAX_FDS) {
		close(fd);
		errno = EMFILE;
		return -1;
	}
	pthread_mutex_lock(&objs_lock);
	objs[fd].kind = kind;
	objs[fd].vcpu = vcpu;
	pthread_mutex_unlock(&objs_lock);
	return fd;
}

int kvm_sys_open(void)
{
	const char *path = getenv(SCRIPT_ENV), *tpath = getenv(TRACE_ENV);
	char err[256];

	if (!script_loaded) {
		if (!path || !*path) {
			fprintf(stderr, "vmm-scripted: %s names no script\n",
				SCRIPT_ENV);
			errno = ENOENT;
			return -1;
		}
		if (script_load(path, &script, err, sizeof(err))) {
			fprintf(stderr, "vmm-scripted: %s: %s\n", path, err);
			errno = EINVAL;
			return -1;
		}
		script_loaded = true;
		if (tpath && *tpath)
			trace_fd = open(tpath, O_WRONLY | O_CREAT | O_APPEND |
					O_TRUNC | O_CLOEXEC, 0644);
	}
	return new_fd(OBJ_SYSTEM, NULL);
}

struct kvm_run *kvm_sys_map_run(int vcpu_fd, size_t size)
{
	struct scripted_vcpu *c = vcpu_of(vcpu_fd);
	void *p = NULL;

	if (!c)
		return NULL;
	if (size < RUN_SIZE || posix_memalign(&p, PAGE, size)) {
		errno = EINVAL;
		return NULL;
	}
	memset(p, 0, size);
	c->run = p;
	return p;
}

static int create_vcpu(unsigned long id)
{
	struct scripted_vcpu *c;
	int fd;

	if (id >= MAX_VCPUS) {
		errno = EINVAL;
		return -1;
	}
	c = calloc(1, sizeof(*c));
	if (!c)
		return -1;
	c->id = (uint32_t)id;
	c->pending_irq = -1;
	c->nframes = 1;
	c->frames[0].prog = script_vcpu(&script, c->id);
	fd = new_fd(OBJ_VCPU, c);
	if (fd < 0)
		free(c);
	return fd;
}

/* A plain Intel CPU with a local APIC, x2APIC, TSC-deadline, 39 bits. */
static int supported_cpuid(struct kvm_cpuid2 *c)
{
	static const struct kvm_cpuid_entry2 e[] = {
		{ .function = 0, .eax = 0xd, .ebx = 0x756e6547,
		  .ecx = 0x6c65746e, .edx = 0x49656e69 },
		{ .function = 1, .eax = 0x000306a9,
		  .ecx = (1u << 21) | (1u << 24), .edx = (1u << 4) | (1u << 9) },
		{ .function = 0x80000000u, .eax = 0x80000008u },
		{ .function = 0x80000008u, .eax = 0x3027 },
	};
	uint32_t n = sizeof(e) / sizeof(e[0]);

	if (c->nent < n) {
		errno = E2BIG;
		return -1;
	}
	memcpy(c->entries, e, sizeof(e));
	c->nent = n;
	return 0;
}

static int get_msrs(struct kvm_msrs *m)
{
	for (uint32_t i = 0; i < m->nmsrs; i++)
		m->entries[i].data = m->entries[i].index == 0x10 ? mono_ns()
								 : 0;
	return (int)m->nmsrs;
}

int kvm_sys_ioctl_n(int fd, unsigned long req, unsigned long n)
{
	struct scripted_vcpu *c;

	switch (req) {
	case KVM_GET_API_VERSION:
		return KVM_API_VERSION;
	case KVM_CREATE_VM:
		return new_fd(OBJ_VM, NULL);
	case KVM_CHECK_EXTENSION:
		switch (n) {
		case KVM_CAP_IMMEDIATE_EXIT:
		case KVM_CAP_X86_USER_SPACE_MSR:
		case KVM_CAP_X86_MSR_FILTER:
			return 1;
		case KVM_CAP_SYNC_REGS:
			return KVM_SYNC_X86_EVENTS;
		case KVM_CAP_MAX_VCPUS:
		case KVM_CAP_NR_VCPUS:
			return MAX_VCPUS;
		default:
			return 0;
		}
	case KVM_GET_VCPU_MMAP_SIZE:
		return RUN_SIZE;
	case KVM_SET_TSS_ADDR:
		return 0;
	case KVM_CREATE_VCPU:
		return create_vcpu(n);
	case KVM_GET_TSC_KHZ:
		return vcpu_of(fd) ? GUEST_TSC_KHZ : -1;
	case KVM_NMI:
		c = vcpu_of(fd);
		if (!c)
			return -1;
		c->nmis++;
		return 0;
	case KVM_RUN:
		c = vcpu_of(fd);
		return c ? run_vcpu(c) : -1;
	default:
		fprintf(stderr, "vmm-scripted: ioctl %#lx is not scripted\n",
			req);
		errno = ENOTTY;
		return -1;
	}
}

int kvm_sys_ioctl(int fd, unsigned long req, void *arg)
{
	struct scripted_vcpu *c = NULL;

	switch (req) {
	case KVM_SET_USER_MEMORY_REGION:
	case KVM_ENABLE_CAP:
	case KVM_X86_SET_MSR_FILTER:
		return 0;
	case KVM_GET_SUPPORTED_CPUID:
		return supported_cpuid(arg);
	default:
		break;
	}
	c = vcpu_of(fd);
	if (!c)
		return -1;
	switch (req) {
	case KVM_SET_CPUID2:
		return ((struct kvm_cpuid2 *)arg)->nent <= 256 ? 0 : -1;
	case KVM_GET_REGS:
		memcpy(arg, &c->regs, sizeof(c->regs));
		return 0;
	case KVM_SET_REGS:
		memcpy(&c->regs, arg, sizeof(c->regs));
		return 0;
	case KVM_GET_SREGS:
		memcpy(arg, &c->sregs, sizeof(c->sregs));
		return 0;
	case KVM_SET_SREGS:
		memcpy(&c->sregs, arg, sizeof(c->sregs));
		return 0;
	case KVM_SET_MSRS:
		return (int)((struct kvm_msrs *)arg)->nmsrs;
	case KVM_GET_MSRS:
		return get_msrs(arg);
	case KVM_INTERRUPT:
		c->pending_irq = (int)((struct kvm_interrupt *)arg)->irq;
		return 0;
	default:
		fprintf(stderr, "vmm-scripted: ioctl %#lx is not scripted\n",
			req);
		errno = ENOTTY;
		return -1;
	}
}
