/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Samples read on this host without asking QEMU anything, so that watching
 * a domain wakes none of its vCPUs (libvirt's vCPU statistics make QEMU
 * run a job on every vCPU thread):
 *
 *  - kvm:  KVM's own statistics of the domain's VM in debugfs
 *          (/sys/kernel/debug/kvm/PID-FD/: blocking, halt_exits, and
 *          vcpuN/pid for the vCPU threads), with each vCPU thread's
 *          scheduler counts for which vCPU it was;
 *  - proc: the vCPU threads' scheduler state alone (/proc/PID/task/TID/
 *          stat and schedstat; the threads QEMU names "CPU N/KVM").
 *
 * A vCPU sample (domain_idle.h) from the host: halt_exits is the thread's
 * count of times it was put on a CPU (schedstat's third field: it moves
 * whenever the thread woke, whatever for), blocking is "the thread sleeps"
 * (state S). With kvm, the thread is only counted as halted when KVM says
 * that many of the VM's vCPUs are blocked in it (blocking), so a vCPU
 * thread asleep on something else than HLT is not taken for idle.
 *
 * A domain's QEMU process is found once, at attach, by its "-uuid UUID"
 * argument; the files are opened then and read with pread (debugfs files,
 * which cannot be, are opened at each read). Nothing is allocated per
 * sample.
 */
#ifndef SYSIDLE_LIBVIRT_STATS_HOST_H
#define SYSIDLE_LIBVIRT_STATS_HOST_H

#include <stdbool.h>
#include <stddef.h>

#include "stats_source.h"

enum stats_kind {
	STATS_AUTO,     /* kvm, else proc, else libvirt (per domain) */
	STATS_KVM,
	STATS_PROC,
	STATS_LIBVIRT,
	STATS_FILE,     /* --stats-file */
};

#define STATS_KVM_DEBUGFS "/sys/kernel/debug/kvm"

const char *stats_kind_name(enum stats_kind k);
/* "auto", "kvm", "proc", "libvirt"; -1 for anything else. */
int stats_kind_parse(const char *s);

struct host_vm;

/* Find the QEMU process of the domain @uuid on this host and its vCPU
 * threads, for @want (STATS_AUTO: kvm if it can, else proc; STATS_KVM or
 * STATS_PROC: that one only). NULL when it cannot, with the reason in
 * @why. @proc_root and @debugfs are "/proc" and STATS_KVM_DEBUGFS but for
 * tests. */
struct host_vm *host_vm_attach(const char *uuid, enum stats_kind want,
			       const char *proc_root, const char *debugfs,
			       char *why, size_t whysize);
void host_vm_free(struct host_vm *h);
/* STATS_KVM or STATS_PROC. */
enum stats_kind host_vm_kind(const struct host_vm *h);
/* Its QEMU process id, and its vCPU threads. */
int host_vm_pid(const struct host_vm *h);
unsigned int host_vm_ncpus(const struct host_vm *h);
/* Fill @sd's vCPU samples (sd->vcpus, sd->seen, sd->nvcpus: allocated at
 * attach, reused). The caller guarantees @sd came from this scan and has
 * no vCPU samples yet. 0, or -1 when the process or one of its threads
 * is gone (the caller attaches again; @why says what). */
int host_vm_sample(struct host_vm *h, struct stats_domain *sd, char *why,
		   size_t whysize);

/* The pid of the QEMU process with "-uuid @uuid" among its arguments
 * under @proc_root, or -1 (for the host's wake-up figures, host_wakes.h,
 * of a domain no host source is attached to). */
int host_find_pid(const char *proc_root, const char *uuid);
/* The debugfs directory (PID-FD under @debugfs) of @pid's VM that has
 * vCPUs, open (the caller closes it), or -1. */
int host_kvm_dir(const char *debugfs, int pid);

#endif
