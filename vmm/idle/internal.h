/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The idle layer's shared state (the idle/ files only). Who writes what:
 *  - struct idle_vcpu: its vCPU's thread only (the idle record the
 *    kernel keeps per CPU), read by the housekeeping thread;
 *  - tk_state, tk_period: the timekeeper vCPU's thread (timekeeper.c);
 *  - under idle.lock: the time-in-state accounting and the log queue;
 *  - the rest of the housekeeping part: the housekeeping thread (tick.c).
 */
#ifndef VMM_IDLE_INTERNAL_H
#define VMM_IDLE_INTERNAL_H

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <sysidle/sysidle.h>

#include "base/housekeeping.h"
#include "idle/idle.h"
#include "machine/vcpu.h"

struct vm;

#define HK_TICK_DEFAULT_NS 4000000ull /* 250 Hz */
#define TK_HALTED 0ull
#define TK_BUSY 1ull /* any larger value: a tick-only window's start */
/* A vCPU that ends full idle kicks the housekeeping thread later, not on
 * its wake path (idle_kick_deferred). */
#define IDLE_KICK_DEFER_NS 500000ull
#define IDLE_KICK_BACKSTOP_NS 2000000ull

/* The idle record of one vCPU: one cache line, written by its own thread.
 * idle_seq is even while the thread is halted (or waits for SIPI, or is
 * parked), woke_ns is when it last left that state (set before idle_seq
 * turns odd), halted_at_ns when it last entered it. */
struct idle_vcpu {
	atomic_uint idle_seq;
	_Atomic uint64_t woke_ns;
	_Atomic uint64_t halted_at_ns;
	uint64_t kick_due_ns; /* idle_kick_deferred(), 0: none */
	bool tick_unarmed; /* its pv tick resumed on its wake path, the timer
			    * not armed yet (idle_kick_due arms it) */
} __attribute__((aligned(64)));

/* Counters that status snapshots read from other threads: relaxed, a
 * statistic orders nothing. */
static inline void stat_inc(_Atomic uint64_t *c)
{
	atomic_fetch_add_explicit(c, 1, memory_order_relaxed);
}

/* Any thread: a counter stat_inc counts. */
static inline uint64_t stat_read(_Atomic uint64_t *c)
{
	return atomic_load_explicit(c, memory_order_relaxed);
}

#define FORCE_SRC(src, detail) ((int64_t)(detail) << 8 | (int64_t)(src))

struct idle_layer {
	bool enabled;
	struct vm *vm;
	struct sysidle *s;
	int tk;
	uint64_t t0;
	int log_fd;               /* --sysidle-log, non-blocking; -1: none */
	bool log_close;
	int hk_cpu;
	cpu_set_t orig_cpus;
	struct idle_vcpu *vcpus; /* one per vCPU, by id */

	pthread_mutex_t lock; /* the log queue and the time-in-state */
	int cur;
	uint64_t since, changed_ns, state_ns[SYSIDLE_NR_STATES];
	uint64_t full_periods_seen; /* FULL_NOTED entries (status) */
	/* A vCPU's exit to NOT, recorded on its wake path: its event and
	 * log line are made later, before any other change's
	 * (idle_emit_pending_locked). */
	struct {
		bool valid;
		int from, cpu, src;
		uint32_t detail;
		uint64_t now, full_idle_ns;
	} pend;
	/* Exits from FULL_NOTED by what ended them (enum wake_source) */
	_Atomic uint64_t full_exits_by[WAKE_SOURCES]; /* stat_inc */
	char logq[16384];
	size_t logq_len;
	uint64_t log_dropped;     /* lines the queue had no room for */
	/* idle_flush() only (one caller at a time): lines dropped and not
	 * yet noted in the log; all lines dropped, for stats and the exit. */
	uint64_t log_unnoted, log_dropped_total;
	/* idle_flush() only: the file's writes failing (an error, not a
	 * reader that does not keep up) since the last one that worked. */
	uint64_t log_failed_run;
	_Atomic uint64_t log_write_failures; /* all of them (stat_inc) */

	/* Written by the timekeeper vCPU thread, read by housekeeping. */
	_Atomic uint64_t tk_state;
	_Atomic uint64_t tk_period; /* its tick's period, for the window */
	uint8_t tk_vector;          /* its tick's vector (timekeeper only) */
	bool tk_rearm;              /* ... a one-shot re-armed (timekeeper only) */
	atomic_bool force_req;
	/* What a force-exit request is put down to, stored before
	 * force_req: an outside one's source (a kick, SIGUSR2), or what
	 * woke the timekeeper that did more than its tick; as
	 * FORCE_SRC(source, detail), -1: none. The housekeeping thread
	 * takes it into force_src_now / force_detail_now for the change
	 * the force-exit makes. */
	_Atomic int64_t force_src;
	int force_src_now;
	uint32_t force_detail_now;
	/* Under the timekeeper vCPU's lock: its LAPIC tick may be held back
	 * (set by idle_stop, cleared by idle_restart; tk_halt holds it once
	 * the ticks a CATCHUP still owes are in). */
	bool tk_hold;

	/* Housekeeping thread only (the transition callbacks that touch them
	 * run there: to FULL / FULL_NOTED and every cpu == -1 change). */
	struct hk_timer tick, kick_backstop, hold_backstop;
	uint64_t tick_deadline, tick_period;
	uint64_t max_hold_ns, hold_deadline; /* --lapic-tick-max-hold */
	_Atomic uint64_t hold_releases; /* by the hold backstop (stat_inc) */
	bool stopped;
	uint64_t stop_ns, noted_ns, last_scan, check_start;
	bool in_force;
	uint64_t full_periods;
	_Atomic uint64_t force_exits, violations, scans, restarts; /* stat_inc */
	uint64_t *lat;
	uint64_t lat_count, lat_min, lat_max, lat_sum;
};

/* idle.c: the layer's state, one per process (its fields say who may
 * touch them). */
struct idle_layer *idle_layer(void) __attribute__((const));

static inline struct idle_vcpu *idle_vcpu(const struct vcpu *v)
{
	return &idle_layer()->vcpus[v->id];
}

/* log.c: a line for --sysidle-log, idle.lock held (idle_log: not held).
 * Lines are queued and written out by idle_flush. */
void idle_log_locked(uint64_t now, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
#define idle_log(now, ...) do {                            \
		pthread_mutex_lock(&idle_layer()->lock);   \
		idle_log_locked(now, __VA_ARGS__);         \
		pthread_mutex_unlock(&idle_layer()->lock); \
	} while (0)

/* track.c */
/* The idle hooks of the vCPU loop, for struct vm's idle. */
const struct vcpu_idle_ops *idle_vcpu_ops(void);
void idle_emit_pending_locked(void); /* idle.lock held */
void idle_transition(void *arg, enum sysidle_state from,
		     enum sysidle_state to, int cpu, uint64_t now);
bool idle_suppress_tick(const struct vcpu *v);

/* timekeeper.c: the rule "a wake-up that only took its tick keeps the
 * timekeeper idle". */
bool tk_tick(const struct vcpu *v, uint8_t *vector, uint64_t *period);
bool tk_tick_holdable(const struct vcpu *v);
bool tk_busy(uint64_t tk, uint64_t now);
bool tk_set_busy(const struct vcpu *v);
void tk_halt(struct vcpu *v, bool plain, uint64_t now);
bool tk_wake(struct vcpu *v, bool plain, uint64_t now);
void tk_exit(struct vcpu *v);
void tk_inject(struct vcpu *v, int vector);

/* memory.c: --idle-memory. idle_memory_init: main thread, from
 * idle_init (0, or -1 after vmm_fail); the other two: housekeeping
 * thread, as a full-idle period begins (idle_stop) and ends
 * (idle_restart). */
int idle_memory_init(struct vm *vm, const struct idle_config *cfg);
void idle_memory_full_idle(uint64_t now);
void idle_memory_leave(void);

/* tick.c: the housekeeping thread's side. */
void idle_tick_setup(void);
void idle_kick_deferred(struct vcpu *v);
void idle_kick_due(struct vcpu *v, bool halting);

#endif
