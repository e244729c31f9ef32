/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * What wakes a libvirt domain, as far as the host can tell without asking
 * the guest or QEMU anything (issue 32's wake sources, the host's half):
 *
 *  - KVM's counters of the domain's VM in debugfs (PID-FD/halt_exits,
 *    halt_wakeup, irq_injections, signal_exits, ...): sums over the VM's
 *    vCPUs since the VM began (the kernel keeps no per-vCPU file of them
 *    in debugfs); absent for a domain KVM does not run (TCG) or without
 *    debugfs, with the reason;
 *  - the QEMU process's threads (/proc/PID/task/TID/comm and status):
 *    each thread's wake-ups are its voluntary context switches (each a
 *    sleep it woke from), summed per thread name ("CPU 0/KVM", the main
 *    loop, "IO iothread1", "worker", ...) since the bridge began reading
 *    them, so that a thread that exits takes nothing back.
 *
 * These are the host's view: a wake-up of a vCPU thread says that it
 * woke, not what in the guest asked for it.
 *
 * Sampled at most every HOST_WAKES_PERIOD_MS; the samples of the last
 * HOST_WAKES_WINDOW_MS are kept (a ring of HOST_WAKES_RING) and a rate is
 * the difference between the newest and the oldest sample in that window
 * over the time between them. Bounds: at most HOST_WAKES_THREADS threads
 * read per sample (the rest counted as capped), at most HOST_WAKES_NAMES
 * thread names (later names go to "other"), every file read into a fixed
 * buffer. Nothing is allocated per sample.
 */
#ifndef SYSIDLE_LIBVIRT_HOST_WAKES_H
#define SYSIDLE_LIBVIRT_HOST_WAKES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define HOST_WAKES_PERIOD_MS 1000u
#define HOST_WAKES_WINDOW_MS 60000u
#define HOST_WAKES_RING 64
#define HOST_WAKES_THREADS 256
#define HOST_WAKES_NAMES 32
#define HOST_WAKES_NAME_MAX 32   /* a thread name's bytes, NUL included */

/* KVM's counters read, in this order: their debugfs names. */
enum host_wakes_kvm {
	HW_KVM_HALT_EXITS,
	HW_KVM_HALT_WAKEUP,
	HW_KVM_HALT_SUCCESSFUL_POLL,
	HW_KVM_HALT_ATTEMPTED_POLL,
	HW_KVM_IRQ_INJECTIONS,
	HW_KVM_IRQ_EXITS,
	HW_KVM_SIGNAL_EXITS,
	HW_KVM_EXITS,
	HW_KVM_N
};

struct host_wakes;

/* The debugfs file name of counter @k (k < HW_KVM_N). */
const char *host_wakes_kvm_file(enum host_wakes_kvm k);

/* A domain's figures, nothing read yet. NULL: out of memory. */
struct host_wakes *host_wakes_new(void);
/* @hw may be NULL. */
void host_wakes_free(struct host_wakes *hw);

/* Nothing can be read for the domain (@why: a remote host, a replay, no
 * process): the figures are dropped and reported absent with @why. True
 * when that changed anything. */
bool host_wakes_absent(struct host_wakes *hw, const char *why);

/* Is a sample due at @now_ns (monotonic)? False until
 * HOST_WAKES_PERIOD_MS after the last one. */
bool host_wakes_due(const struct host_wakes *hw, uint64_t now_ns);

/* Sample the process @pid at @now_ns, its files under @proc_root and
 * @debugfs ("/proc" and STATS_KVM_DEBUGFS but for tests). The caller
 * guarantees @now_ns never goes back and @pid > 0. Another pid than the
 * last one's starts the figures again (a new process). 0, or -1 when the
 * process is gone (its figures absent; the caller finds it again). */
int host_wakes_sample(struct host_wakes *hw, int pid, const char *proc_root,
		      const char *debugfs, uint64_t now_ns);

/* The process sampled, 0: none. */
int host_wakes_pid(const struct host_wakes *hw);
/* Why nothing is there ("": something is), why KVM's counters are not. */
const char *host_wakes_why(const struct host_wakes *hw);
const char *host_wakes_kvm_why(const struct host_wakes *hw);

/* The newest sample's value of KVM counter @k; false when it was not read
 * (no KVM VM, no such file, nothing sampled). */
bool host_wakes_kvm_total(const struct host_wakes *hw, enum host_wakes_kvm k,
			  uint64_t *total);
/* The span of the window (the newest sample less the oldest in the last
 * HOST_WAKES_WINDOW_MS), in ns; 0: fewer than two samples. */
uint64_t host_wakes_span_ns(const struct host_wakes *hw);
/* Samples in the window. */
unsigned int host_wakes_samples(const struct host_wakes *hw);
/* KVM counter @k's rate per second over the window; false: none (not
 * read, or fewer than two samples). Never negative. */
bool host_wakes_kvm_rate(const struct host_wakes *hw, enum host_wakes_kvm k,
			 double *per_s);

/* The thread names seen (0 before a sample). Name @i (i < that): its
 * text, its threads in the newest sample, its wake-ups since first read,
 * and their rate per second over the window (false: fewer than two
 * samples). */
unsigned int host_wakes_nthreads(const struct host_wakes *hw);
const char *host_wakes_thread(const struct host_wakes *hw, unsigned int i,
			      unsigned int *threads, uint64_t *total);
bool host_wakes_thread_rate(const struct host_wakes *hw, unsigned int i,
			    double *per_s);
/* Did the newest sample leave threads unread (over HOST_WAKES_THREADS)? */
bool host_wakes_capped(const struct host_wakes *hw);

/* @hw as the JSON object "host_wakeups" (without its key): "source":
 * "host", and either the figures or "absent" with the reason. The caller
 * guarantees @f is open for writing. */
void host_wakes_json(FILE *f, const struct host_wakes *hw);
/* @s as a JSON string, quotes included: '"', '\\' and control bytes
 * escaped, bytes of 0x80 and above as '?' (thread names are not known to
 * be UTF-8). @s may be NULL (""). */
void host_wakes_json_string(FILE *f, const char *s);

#endif
