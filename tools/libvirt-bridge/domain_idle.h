/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * One libvirt domain's full-idle state machine, fed by samples of its
 * vCPUs' KVM statistics. Pure: no libvirt, no clock of its own (the
 * sample's time is the library's clock), so tests drive it directly.
 *
 * A vCPU was idle for the whole interval since the previous sample when
 * its halt-exit count (vcpu.N.halt_exits.sum) has not moved (a count that
 * moved means it woke and halted again) and it was halted throughout:
 *  - vcpu.N.blocking.cur at both samples, or
 *  - vcpu.N.halt_wait_ns.sum grew by at least DOMAIN_IDLE_WAIT_PCT % of
 *    the time between the samples. QEMU reads a vCPU's statistics on the
 *    vCPU's own thread (it kicks it out of KVM_RUN), so through libvirt
 *    blocking.cur reads 0 even for a vCPU halted all along; the kick ends
 *    the wait, which adds it to halt_wait_ns. A vCPU that woke and kept
 *    running without a new HLT stopped adding to it.
 * Each sample is one scan of the library's machine (one struct sysidle
 * per domain, ncpus = the vCPU count, no timekeeper):
 * sysidle_exit for each vCPU that stopped being idle, sysidle_enter for
 * each one that became idle, then the library's own poll (sysidle_poll on
 * a machine of at most 8 vCPUs, which scans inline; sysidle_scan and then
 * sysidle_poll above that).
 */
#ifndef SYSIDLE_LIBVIRT_DOMAIN_IDLE_H
#define SYSIDLE_LIBVIRT_DOMAIN_IDLE_H

#include <stdbool.h>
#include <stdint.h>

#include <sysidle/sysidle.h>

#define DOMAIN_IDLE_WAIT_PCT 90

/* One vCPU's statistics at one instant. */
struct vcpu_sample {
	bool has_halt_exits;     /* vcpu.N.halt_exits.sum present */
	bool has_blocking;       /* vcpu.N.blocking.cur present */
	bool has_halt_wait;      /* vcpu.N.halt_wait_ns.sum present */
	uint64_t halt_exits;
	bool blocking;
	uint64_t halt_wait_ns;
};

/* One domain at one instant. */
struct domain_sample {
	uint64_t t_ns;           /* monotonic time of the sample */
	bool running;            /* false (shut down, crashed, ...): every
				  * vCPU busy */
	bool paused;             /* suspended (virDomainSuspend): the state is
				  * kept as it was, so a domain suspended in
				  * full idle stays FULL_NOTED; the first
				  * sample after it runs again is a new
				  * baseline */
	unsigned int ncpus;      /* vCPU count; 0: no vCPU statistics */
	const struct vcpu_sample *vcpus; /* @ncpus entries */
};

/* What one scan did. */
struct domain_idle_report {
	enum sysidle_state from, to; /* before and after the scan */
	bool left_full;          /* FULL_NOTED was left during the scan */
	uint64_t full_idle_ms;   /* then: how long it lasted (sample times) */
	bool recreated;          /* the vCPU count changed: new machine */
	unsigned int old_ncpus;  /* then: the previous count */
	bool counter_reset;      /* a halt-exit count went back (restart) */
	unsigned int ncpus, idle_cpus; /* idle: for the whole interval */
	unsigned int idle_scans; /* consecutive scans with all vCPUs idle */
	char reason[160];        /* one line, why the state is what it is */
};

enum domain_idle_result {
	DOMAIN_IDLE_OK = 0,
	DOMAIN_IDLE_NO_STATS = 1, /* no halt_exits, or neither blocking nor
				   * halt_wait_ns: not idle, skipped */
	DOMAIN_IDLE_ERROR = -1,   /* out of memory (errno set) */
};

struct domain_idle;

struct domain_idle *domain_idle_new(void);
void domain_idle_free(struct domain_idle *d);

/* Feed one sample (times must not go back). Fills @r (the reason says
 * what happened). A running domain's sample without halt_exits and
 * blocking or halt_wait_ns for every vCPU returns DOMAIN_IDLE_NO_STATS:
 * the machine is dropped (state NOT). */
int domain_idle_scan(struct domain_idle *d, const struct domain_sample *s,
		     struct domain_idle_report *r);

enum sysidle_state domain_idle_state(const struct domain_idle *d);
unsigned int domain_idle_ncpus(const struct domain_idle *d);
uint64_t domain_idle_full_periods(const struct domain_idle *d);
/* The sample time of the last state change (0: none yet). */
uint64_t domain_idle_since_ns(const struct domain_idle *d);

#endif
