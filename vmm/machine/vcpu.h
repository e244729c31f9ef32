/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * A vCPU (struct vcpu) and its thread: creation and the registers' states
 * (vcpu_setup.c), the run loop, kicks and the idle hooks' call sites
 * (vcpu.c), HLT (vcpu_halt.c), the host timer behind its LAPIC timer
 * (vcpu_timer.c). Between the loop's own files: vcpu_loop.h.
 */
#ifndef VMM_MACHINE_VCPU_H
#define VMM_MACHINE_VCPU_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/housekeeping.h"
#include "machine/devices/lapic.h"
#include "machine/halt_rules.h"
#include "machine/wake_source.h"

#define VCPU_EXIT_REASONS 64 /* counters kept for exit_reason < 64 */
/* The struct of type @type whose @member is at @p (a struct vcpu from its
 * struct lapic, a pv tick from its timer). */
#define container_of(p, type, member) \
	((type *)((char *)(p) - offsetof(type, member)))

struct kvm_run;
struct vm;

enum vcpu_state {
	VCPU_WAIT_SIPI, /* AP before its SIPI, or any vCPU after INIT */
	VCPU_RUNNING,   /* in or around KVM_RUN */
	VCPU_HALTED,    /* HLT with nothing pending: thread blocked */
	VCPU_PAUSED,    /* parked by a pause (from RUNNING or HALTED) */
	VCPU_FINISHED,  /* the VM is stopping: thread returns */
};

struct vcpu_stats {
	uint64_t exits[VCPU_EXIT_REASONS];
	_Atomic uint64_t hlt_exits; /* read by status snapshots */
	uint64_t irqs_injected;
	uint64_t nmis_injected;
	/* time blocked in HLT: the waits ended, and since when the current
	 * one lasts (0: none); read by status snapshots (relaxed) */
	_Atomic uint64_t halted_ns, halted_since_ns;
	uint64_t wakeups;          /* HALTED -> RUNNING */
	uint64_t wake_latency_ns;  /* sum over wakeups: event posted -> the
				    * KVM_RUN that delivers it */
	uint64_t wake_latency_max_ns;
	uint64_t halt_polls;        /* HLTs that polled before blocking */
	uint64_t halt_poll_hits;    /* ... and were woken while polling */
	uint64_t halt_poll_ns;      /* time spent polling (host CPU) */
	uint64_t halt_poll_preempted; /* ... polls ended by a preemption */
	uint64_t timer_self_fired;  /* LAPIC timer expiries served by this
				     * vCPU's own thread (in HLT or before
				     * KVM_RUN), not the housekeeping thread */
	uint64_t timer_spin_ns;     /* spun to a timer's deadline (advance) */
	uint64_t pv_eois;           /* EOIs the guest made by its PV EOI flag */
	/* waits ended by their timer advance (the lead learned from them),
	 * by class of the sleep (halt_rules.h timer_advance_class) */
	uint64_t timer_advance_wakes[TIMER_ADVANCE_CLASSES];
	struct wake_tally wakes; /* wake-ups from HLT, by source */
};

struct vcpu {
	struct vm *vm;
	unsigned int id;
	int fd;
	struct kvm_run *run;
	pthread_t thread;
	bool started;

	/* lock guards everything below it; the vCPU's own thread is the only
	 * writer of state, other threads post events and kick. */
	pthread_mutex_t lock;
	pthread_cond_t wake;
	enum vcpu_state state;
	atomic_bool in_run; /* between the injection check and KVM_RUN's end */
	uint8_t nmi_pending; /* NMIs posted, not yet given to KVM: 0..2 */
	bool init_pending;
	bool sipi_pending;
	uint8_t sipi_vector;
	bool resume_pending;   /* S3 resume: start at resume_addr, as SIPI */
	bool resume_protected; /* ... in flat 32-bit protected mode */
	uint32_t resume_addr;
	uint8_t wake_reason; /* enum pause_reason of the last event posted */
	/* Bumped at every event posted (vcpu_kick_for, vcpus_nudge), under
	 * the lock: a polling HLT (vcpu_halt.c) watches it without the lock. */
	atomic_uint wake_seq;
	uint64_t wake_posted_ns; /* first event posted while HALTED, or 0 */
	/* What woke it last (enum wake_source, and its detail): set by the
	 * first event posted while HALTED, OTHER for a wake-up with none;
	 * kept until the next wake-up (the idle layer reads it then) */
	uint8_t wake_src;
	uint32_t wake_detail;
	struct lapic lapic;
	/* The LAPIC timer's host timer (vcpu_timer.c): on the housekeeping
	 * thread (timer_hk), or served by this vCPU's own thread
	 * (timer_self, written by that thread only, lock held). */
	struct hk_timer timer_hk;
	bool timer_self;

	/* Written by the vCPU thread only; other threads read the counters
	 * export shows (hlt_exits) with relaxed atomic loads. */
	struct vcpu_stats stats;
	atomic_int tid; /* the vCPU thread's host TID, set when it starts */
	uint64_t wake_posted_run_ns; /* a wake-up not yet timed (stats) */
	/* vcpu_halt.c, this vCPU's thread only: the adaptive halt-polling
	 * window and timer advance, one per class of sleep (0..their
	 * --halt-poll-ns and --timer-advance-ns maxima). */
	uint64_t poll_ns, advance_ns[TIMER_ADVANCE_CLASSES];
	/* run->s.regs.events is what KVM stored at the last KVM_RUN's return
	 * (vm->sync_events), not outdated by a state set since: an interrupt
	 * goes in through it, no KVM_INTERRUPT. This thread only. */
	bool events_fresh;
} __attribute__((aligned(64)));

/* vcpu.c: the vCPU whose thread this is (NULL on any other thread). */
struct vcpu *vcpu_current(void);

/*
 * What the idle layer does at the vCPU loop's idle points (filled in by
 * it; NULL without --sysidle: the loop then does none of it, and an HLT
 * with an interrupt already pending does not halt). @v's own thread calls
 * each one.
 *  - halt / wake, @v->lock held: the vCPU starts / stops waiting (HLT with
 *    nothing pending; @plain: a wait that is never a timekeeper's tick-only
 *    window: WAIT_SIPI, a pause). wake returns true when the idle layer's
 *    housekeeping work must follow (the loop calls kick_deferred, after
 *    the lock is dropped).
 *  - exit: before an exit is handled. inject, lock held: about to inject
 *    @vector. run_done: after KVM_RUN (@halting false, no lock), before
 *    the vCPU blocks in HLT (@halting true, no lock) or as it parks
 *    (@halting true, lock held).
 *  - may_poll, no lock: may this HLT poll before it blocks? (not while
 *    the VM is heading into full idle: the poll would only burn the CPU
 *    an idle VM must not cost)
 *  - exit_wanted, lock held, before KVM_RUN: must the guest's next EOI
 *    still exit? (the idle layer has work due at @v's first exit after a
 *    wake-up, which the pv tick's ABI promises at the latest at that EOI:
 *    no paravirtual EOI until then)
 */
struct vcpu_idle_ops {
	void (*halt)(struct vcpu *v, bool plain);
	bool (*wake)(struct vcpu *v, bool plain);
	void (*kick_deferred)(struct vcpu *v);
	void (*exit)(struct vcpu *v);
	void (*inject)(struct vcpu *v, int vector);
	void (*run_done)(struct vcpu *v, bool halting);
	bool (*may_poll)(struct vcpu *v);
	bool (*exit_wanted)(struct vcpu *v);
};

/* vcpu_setup.c, the main thread: every vCPU of @vm, none running yet
 * (after a failure half-way, vcpus_stop and vcpus_join still work). */
int vcpus_create(struct vm *vm);
/* vcpu.c, the main thread, with the kick signal blocked (the threads
 * inherit it and unblock it themselves once they run). */
int vcpus_start(struct vm *vm);
/* vcpu.c, after vm_stop(): wakes every vCPU wherever it waits, a parked
 * one included. */
void vcpus_stop(struct vm *vm);
/* vcpu.c, the main thread, after vcpus_stop: every started vCPU thread
 * joined. */
void vcpus_join(struct vm *vm);
/* Any thread holding no vCPU lock: every vCPU looks at the stop and pause
 * flags again (woken from its wait, or out of KVM_RUN). */
void vcpus_nudge(struct vm *vm);
/* Caller holds v->lock and has just posted an event for @v: wake @v. While
 * the VM is paused (or pausing) the event resumes it, for @reason;
 * vcpu_kick() gives this thread's reason (pause_set_thread_reason). */
void vcpu_kick(struct vcpu *v);
void vcpu_kick_for(struct vcpu *v, int reason);
/* The same, naming the event's source (enum wake_source) and its detail:
 * the first one posted while @v is halted is what woke it. */
void vcpu_kick_from(struct vcpu *v, int reason, int src, uint32_t detail);
/* vcpu_timer.c, @v's thread: how near a LAPIC timer deadline it serves
 * itself before its next KVM_RUN rather than handing it to the
 * housekeeping thread (0: timers stay there, --vcpu-timers housekeeping). */
uint64_t vcpu_timer_keep_ns(const struct vcpu *v);
/* Any thread: @v is halted, waiting for SIPI or paused (a snapshot). */
bool vcpu_is_halted(struct vcpu *v);
/* vcpu_setup.c, @v's thread: real mode at @vector << 12, as after INIT +
 * SIPI. */
int vcpu_set_sipi_state(struct vcpu *v, uint8_t vector);
/* vcpu_setup.c: the S3 resume state: real mode at CS = @addr >> 4,
 * IP = @addr & 0xf, or flat protected mode at @addr (@protected). */
int vcpu_set_resume_state(struct vcpu *v, uint32_t addr, bool protected);
/* vcpu_setup.c, @v's thread: KVM's copy of IA32_APIC_BASE, which its
 * CPUID.1:EDX.APIC follows; -1 when KVM refuses @val. */
int vcpu_set_kvm_apic_base(struct vcpu *v, uint64_t val);
/* vcpu_setup.c: per-vCPU state that INIT resets along with the local
 * APIC (the pv tick); set before the vCPUs are created. Lock held. */
void vcpu_set_reset_hook(void (*reset)(struct vcpu *v));
/* vcpu_setup.c, INIT: the local APIC and what resets with it. Lock held. */
void vcpu_reset(struct vcpu *v);

#endif
