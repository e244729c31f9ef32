/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * --sysidle: the sysidle library wired into the VMM.
 *
 * Who calls what (the library's threading contract):
 *  - each vCPU thread calls sysidle_enter(id) when it blocks on HLT with
 *    nothing pending (or waits for SIPI) and sysidle_exit(id) when it is
 *    woken (idle_halt / idle_wake, under its own lock); an exit that ends
 *    FULL_NOTED kicks the housekeeping thread (eventfd) *after* the vCPU
 *    is already running: the wake path never waits for housekeeping;
 *  - the housekeeping thread is the timekeeper side, and the only caller of
 *    sysidle_poll / sysidle_scan / sysidle_is_idle / sysidle_force_exit. It
 *    runs them from its own periodic tick (the "housekeeping tick": the
 *    timekeeper vCPU's pv tick rate when that is on, else 250 Hz), and from
 *    its kick handler.
 *
 * Scan pacing: a small VM (ncpus <= 8, delay 0) runs sysidle_poll at every
 * housekeeping tick (up to three passes while each advances, then the O(1)
 * query). A larger one runs one sysidle_scan at most once per
 * max(delay, tick period) and the O(1) sysidle_is_idle at every tick.
 *
 * The timekeeper vCPU (vCPU 0, --timekeeper N) and its tick. Its state for
 * the rule "a wake-up that only took its tick keeps it idle" is one atomic,
 * tk_state, written by the timekeeper's own thread: TK_HALTED, TK_BUSY, or
 * the start time of a tick-only window. A wake-up with only the pv tick
 * vector pending opens a window; the window closes at the next HLT if that
 * comes within one tick period and nothing but the tick's own exits (EOI,
 * the MISSED read, interrupt-window and signal exits) happened and no other
 * vector was injected. Anything else makes it TK_BUSY. The library is never
 * called from the vCPU thread for this: the timekeeper side alone calls
 * sysidle_force_exit, on the housekeeping thread, when (a) the timekeeper
 * thread asked for it (force_req + kick: it turned TK_BUSY while the state
 * was above SHORT), or (b) the housekeeping tick finds the timekeeper busy
 * or its window older than a period. While the timekeeper is busy the
 * housekeeping tick does not scan, as the kernel's timekeeping CPU asks
 * rcu_sys_is_idle() only from its idle loop. After sysidle_is_idle()
 * returned true the housekeeping thread reads tk_state again before it
 * stops anything: with the timekeeper's store of TK_BUSY and its load of
 * the state, both seq_cst, one of the two sides sees the other, so a busy
 * timekeeper never has its tick stopped under it.
 *
 * Full idle (sysidle_is_idle true, timekeeper halted): every vCPU's pv tick
 * is suspended (its timer disarmed), the housekeeping tick is not re-armed,
 * and the housekeeping thread's CPU pin is released. Guest LAPIC timers stay
 * armed. Whatever wakes a vCPU wakes it directly; its own pv tick resumes at
 * once with the periods that passed counted as missed; the vCPU whose exit
 * cleared FULL_NOTED (or the force-exit) kicks the housekeeping thread,
 * which re-pins, resumes the timekeeper's pv tick (phase kept, the periods
 * that passed added to its missed count) and re-arms its own tick on its
 * old phase.
 *
 * SIGUSR2 (SIGUSR1 kicks vCPUs) asks the VM out of full idle from outside:
 * a force-exit request to the housekeeping thread, which restarts the tick.
 */
#include <errno.h>
#include <inttypes.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sysidle/sysidle.h>

#include "export.h"
#include "housekeeping.h"
#include "vmm.h"

#define HK_TICK_DEFAULT_NS 4000000ull /* 250 Hz */
#define TK_HALTED 0ull
#define TK_BUSY 1ull /* any larger value: a tick-only window's start */
/* State, pause and resume events waiting for the housekeeping thread to
 * pass them on: room for a burst of control-socket pauses and resumes
 * while a loaded host keeps that thread off a CPU (64 were seen to
 * overflow). */
#define IDLE_EVENT_QUEUE 1024
/* A vCPU that ends full idle kicks the housekeeping thread later, not on
 * its wake path (idle_kick_deferred). */
#define IDLE_KICK_DEFER_NS 500000ull
#define IDLE_KICK_BACKSTOP_NS 2000000ull

/* Counters that status snapshots read from other threads: relaxed, a
 * statistic orders nothing. */
static inline void stat_inc(uint64_t *c)
{
	__atomic_fetch_add(c, 1, __ATOMIC_RELAXED);
}

static struct {
	bool enabled;
	struct vm *vm;
	struct sysidle *s;
	int tk;
	uint64_t t0;
	FILE *log;
	bool log_close;
	int hk_cpu;
	cpu_set_t orig_cpus;

	pthread_mutex_t lock; /* the queues and the time-in-state accounting */
	int cur;
	uint64_t since, changed_ns, state_ns[SYSIDLE_NR_STATES];
	uint64_t full_periods_seen; /* FULL_NOTED entries (status) */
	char logq[16384];
	size_t logq_len;
	uint64_t log_dropped;
	struct idle_event evq[IDLE_EVENT_QUEUE];
	unsigned int nevq;
	uint64_t events_lost;

	/* Written by the timekeeper vCPU thread, read by housekeeping. */
	_Atomic uint64_t tk_state;
	_Atomic uint64_t tk_period; /* its pv tick period, for the window */
	atomic_bool force_req;

	/* Housekeeping thread only (the transition callbacks that touch them
	 * run there: to FULL / FULL_NOTED and every cpu == -1 change). */
	struct hk_timer tick, kick_backstop;
	uint64_t tick_deadline, tick_period;
	bool stopped;
	uint64_t stop_ns, noted_ns, last_scan, check_start;
	bool in_force;
	uint64_t full_periods, force_exits, violations, scans, restarts;
	uint64_t *lat;
	uint64_t lat_count, lat_min, lat_max, lat_sum;
} idle = { .lock = PTHREAD_MUTEX_INITIALIZER, .hk_cpu = -1 };

bool idle_enabled(void)
{
	return idle.enabled;
}

int idle_timekeeper(void)
{
	return idle.tk;
}

/*
 * The log and the export events are queued under idle.lock by whichever
 * thread makes the change (a vCPU thread's exit may end full idle) and
 * written out by the housekeeping thread (idle_flush), so that no vCPU
 * thread ever does I/O or wakes another thread for them on its wake path.
 * Log lines: "MS.mmm what", MS since the VM started.
 */
static void idle_log_locked(uint64_t now, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void idle_log_locked(uint64_t now, const char *fmt, ...)
{
	uint64_t us = now > idle.t0 ? (now - idle.t0) / 1000 : 0;
	size_t room = sizeof(idle.logq) - idle.logq_len;
	va_list ap;
	int n, m;

	if (!idle.log)
		return;
	n = snprintf(idle.logq + idle.logq_len, room, "%" PRIu64 ".%03"
		     PRIu64 " ", us / 1000, us % 1000);
	va_start(ap, fmt);
	m = n >= 0 && (size_t)n < room ?
	    vsnprintf(idle.logq + idle.logq_len + n, room - (size_t)n, fmt,
		      ap) : -1;
	va_end(ap);
	if (m < 0 || (size_t)n + (size_t)m + 1 >= room) {
		idle.logq[idle.logq_len] = '\0';
		idle.log_dropped++;
		return;
	}
	idle.logq_len += (size_t)n + (size_t)m;
	idle.logq[idle.logq_len++] = '\n';
}

#define idle_log(now, ...) do {                         \
		pthread_mutex_lock(&idle.lock);         \
		idle_log_locked(now, __VA_ARGS__);      \
		pthread_mutex_unlock(&idle.lock);       \
	} while (0)

/* Lock held: queue an export event (dropped and counted when full). */
static void idle_event_locked(const struct idle_event *ev)
{
	if (idle.nevq < IDLE_EVENT_QUEUE)
		idle.evq[idle.nevq++] = *ev;
	else
		idle.events_lost++;
}

/* Any thread (pause.c, under its lock): an event for the watchers, queued
 * behind the state changes already queued so that they keep their order;
 * the housekeeping thread is kicked to flush it. Without --sysidle there
 * is no such queue: straight to the export thread. */
void idle_post_event(const struct idle_event *ev)
{
	if (!idle.enabled) {
		export_post_event(ev);
		return;
	}
	pthread_mutex_lock(&idle.lock);
	idle_event_locked(ev);
	pthread_mutex_unlock(&idle.lock);
	housekeeping_kick();
}

/* Housekeeping thread, or any thread once it has stopped: write the queued
 * log lines, post the queued events. */
void idle_flush(void)
{
	static char buf[sizeof(idle.logq)];
	static struct idle_event evs[IDLE_EVENT_QUEUE];
	size_t len;
	unsigned int nev, i;
	uint64_t dropped;

	if (!idle.enabled)
		return;
	pthread_mutex_lock(&idle.lock);
	len = idle.logq_len;
	memcpy(buf, idle.logq, len);
	idle.logq_len = 0;
	dropped = idle.log_dropped;
	idle.log_dropped = 0;
	nev = idle.nevq;
	memcpy(evs, idle.evq, nev * sizeof(evs[0]));
	idle.nevq = 0;
	pthread_mutex_unlock(&idle.lock);
	if (idle.log && len) {
		fwrite(buf, 1, len, idle.log);
		if (dropped)
			fprintf(idle.log, "(%" PRIu64 " log lines dropped)\n",
				dropped);
		fflush(idle.log);
	}
	for (i = 0; i < nev; i++)
		export_post_event(&evs[i]);
}

/*
 * Housekeeping thread, inside a scan (to FULL) or sysidle_is_idle (to
 * FULL_NOTED): a non-timekeeper vCPU that is running now and was already
 * running when this pass started (woke_ns < check_start) was busy for the
 * whole pass, so the pass cannot have seen it idle: a protocol violation.
 * One that woke after the pass started is a legal race (its exit resets
 * the state). idle_seq turns even before sysidle_enter and odd after
 * woke_ns is stored, so a running vCPU is never mistaken for a halted one.
 */
static void idle_check_violation(enum sysidle_state to, uint64_t now)
{
	for (unsigned int i = 0; i < idle.vm->ncpus; i++) {
		struct vcpu *v = &idle.vm->vcpus[i];
		uint64_t woke;

		if ((int)i == idle.tk)
			continue;
		/* seq_cst load: pairs with the vCPU's idle_seq increments in
		 * idle_halt / idle_wake; an odd value makes woke_ns (stored
		 * before it) visible. */
		if (!(atomic_load(&v->idle_seq) & 1))
			continue;
		/* seq_cst load: pairs with the store in idle_wake, before
		 * the increment read above. */
		woke = atomic_load(&v->woke_ns);
		if (woke < idle.check_start) {
			stat_inc(&idle.violations);
			idle_log_locked(now, "VIOLATION state %s while vcpu %u "
					"running", sysidle_state_name(to), i);
		}
	}
}

/* on_transition: any thread; see sysidle_transition_fn. */
static void idle_transition(void *arg, enum sysidle_state from,
			    enum sysidle_state to, int cpu, uint64_t now)
{
	(void)arg;
	pthread_mutex_lock(&idle.lock);
	if (to == SYSIDLE_FULL || to == SYSIDLE_FULL_NOTED)
		idle_check_violation(to, now);
	if (to == SYSIDLE_FULL_NOTED) {
		idle.noted_ns = now;
		idle.full_periods_seen++;
	}
	/* Changes made by different threads can reach here out of order:
	 * time is charged to the state this code last saw. */
	if (now > idle.since) {
		idle.state_ns[idle.cur] += now - idle.since;
		idle.since = now;
	}
	idle_event_locked(&(struct idle_event){
		.from = from, .to = to, .cpu = cpu, .mono_ns = now,
		.unix_ms = mono_to_unix_ms(now),
		.full_idle_ns = from == SYSIDLE_FULL_NOTED &&
				now > idle.noted_ns ? now - idle.noted_ns : 0,
	});
	idle.changed_ns = now;
	idle.cur = to;
	if (to != SYSIDLE_NOT)
		idle_log_locked(now, "state %s -> %s", sysidle_state_name(from),
				sysidle_state_name(to));
	else if (cpu >= 0)
		idle_log_locked(now, "state %s -> NOT vcpu %d",
				sysidle_state_name(from), cpu);
	else if (idle.in_force)
		idle_log_locked(now, "state %s -> NOT vcpu %d force-exit",
				sysidle_state_name(from), idle.tk);
	else
		idle_log_locked(now, "state %s -> NOT scan",
				sysidle_state_name(from));
	if (cpu < 0 && idle.in_force)
		stat_inc(&idle.force_exits);
	pthread_mutex_unlock(&idle.lock);
}

static void hk_pin(void)
{
	cpu_set_t set;

	if (idle.hk_cpu < 0)
		return;
	CPU_ZERO(&set);
	CPU_SET(idle.hk_cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set) < 0)
		vmm_warn("--housekeeping-cpu %d: %s", idle.hk_cpu,
			 strerror(errno));
}

static void hk_unpin(void)
{
	if (idle.hk_cpu >= 0 &&
	    sched_setaffinity(0, sizeof(idle.orig_cpus), &idle.orig_cpus) < 0)
		vmm_warn("releasing the housekeeping pin: %s", strerror(errno));
}

/*
 * Housekeeping thread: arm the housekeeping tick one period after @prev.
 * With the timekeeper's pv tick on, the period is that tick's and the
 * deadlines fall half-way between its ticks: the timekeeper has taken its
 * tick and is back in HLT by then, so the check does not race with its
 * tick-only wake-ups (a tick fired in the same round would wake it just as
 * the tick is stopped). Without a pv tick: 250 Hz, on @prev's phase.
 */
static void idle_tick_arm(uint64_t prev, uint64_t now)
{
	struct vcpu *t = &idle.vm->vcpus[idle.tk];
	uint64_t p = HK_TICK_DEFAULT_NS, phase = prev, next;

	pthread_mutex_lock(&t->lock);
	if (t->pvt.hz) {
		p = t->pvt.period_ns;
		phase = t->pvt.epoch_ns + p / 2;
	}
	pthread_mutex_unlock(&t->lock);
	idle.tick_period = p;
	/* the first deadline on @phase's grid after @prev (and after now) */
	next = prev > now ? prev : now;
	if (next >= phase)
		next = phase + ((next - phase) / p + 1) * p;
	else
		next = phase;
	idle.tick_deadline = next;
	hk_timer_arm(&idle.tick, next);
}

static bool tk_busy(uint64_t tk, uint64_t now)
{
	/* relaxed: the period is a setting; tk_state carries the order. */
	uint64_t p = atomic_load_explicit(&idle.tk_period,
					  memory_order_relaxed);

	return tk == TK_BUSY || (tk > TK_BUSY && now > tk && now - tk > p);
}

static void idle_restart(void);
static void idle_hk_kick(void);

/* Housekeeping thread: the only caller of sysidle_force_exit. */
static void idle_force_exit(void)
{
	idle.in_force = true;
	sysidle_force_exit(idle.s);
	idle.in_force = false;
	if (idle.stopped && sysidle_state(idle.s) != SYSIDLE_FULL_NOTED)
		idle_restart();
}

/*
 * Housekeeping thread, after sysidle_is_idle() and the timekeeper's
 * tk_state read back TK_HALTED. A vCPU may wake meanwhile: its idle_wake
 * resets the state (or, the timekeeper, asks for the force-exit) and
 * resumes its own pv tick in the same locked section that makes it
 * RUNNING, and its kick is deferred (idle_kick_deferred). So the pv tick
 * of a vCPU found RUNNING here is left alone, and one suspended here is
 * resumed by its wake: a woken vCPU always has its tick, whose exits carry
 * its deferred kick. The check at the end restarts at once when a wake-up
 * already raced with this stop.
 */
static void idle_stop(void)
{
	struct vm *vm = idle.vm;
	uint64_t now = now_ns(), last = 0, h;
	bool tk_running = false;

	idle.stopped = true;
	idle.stop_ns = now;
	for (unsigned int i = 0; i < vm->ncpus; i++) {
		struct vcpu *v = &vm->vcpus[i];

		/* relaxed: a statistic; the detection latency. */
		h = atomic_load_explicit(&v->halted_at_ns,
					 memory_order_relaxed);
		if (h > last)
			last = h;
		pthread_mutex_lock(&v->lock);
		if (v->state == VCPU_RUNNING) {
			v->pvt.stop_missed = 0; /* woke already: keep its tick */
			tk_running |= (int)i == idle.tk;
		} else {
			pvtick_suspend(v);
		}
		pthread_mutex_unlock(&v->lock);
	}
	hk_timer_cancel(&idle.tick);
	hk_unpin();
	idle.full_periods++;
	if (last && idle.noted_ns > last && idle.lat) {
		h = idle.noted_ns - last;
		if (idle.lat_count < IDLE_LATENCY_SAMPLES)
			idle.lat[idle.lat_count] = h;
		if (!idle.lat_count || h < idle.lat_min)
			idle.lat_min = h;
		if (h > idle.lat_max)
			idle.lat_max = h;
		idle.lat_sum += h;
		idle.lat_count++;
	}
	idle_log(now, "tick stopped");
	/* The timekeeper woke (a tick-only window) after tk_state was read
	 * back: its window is aged by the housekeeping tick, which must run
	 * again, and its own tick is running: not fully idle after all. */
	if (tk_running) {
		idle_restart();
		return;
	}
	/* seq_cst loads: pair with tk_set_busy()'s store of force_req and
	 * with the reset RMW in a waking vCPU's sysidle_exit(); a wake-up
	 * that came after them carries its own (deferred) kick. */
	if (atomic_load(&idle.force_req) ||
	    sysidle_state(idle.s) != SYSIDLE_FULL_NOTED)
		idle_hk_kick();
}

static void idle_restart(void)
{
	struct vm *vm = idle.vm;
	uint64_t now, missed = 0;

	idle.stopped = false;
	stat_inc(&idle.restarts);
	hk_pin();
	for (unsigned int i = 0; i < vm->ncpus; i++) {
		struct vcpu *v = &vm->vcpus[i];

		pthread_mutex_lock(&v->lock);
		/* Halted (or paused) non-timekeepers stay suppressed until
		 * they run. */
		if ((int)i == idle.tk ||
		    (v->state != VCPU_HALTED && v->state != VCPU_PAUSED))
			pvtick_resume(v);
		if ((int)i == idle.tk)
			missed = v->pvt.hz ? v->pvt.stop_missed :
				 (now_ns() - idle.stop_ns) / idle.tick_period;
		pthread_mutex_unlock(&v->lock);
	}
	now = now_ns();
	idle_log(now, "tick restarted missed=%" PRIu64, missed);
	idle_tick_arm(idle.tick_deadline ? idle.tick_deadline : now, now);
}

/* Housekeeping thread: one housekeeping tick. */
static void idle_step(uint64_t now)
{
	bool is_idle;
	uint64_t tk, pace;

	/* seq_cst RMW: pairs with the store in tk_set_busy(). */
	if (atomic_exchange(&idle.force_req, false))
		idle_force_exit();
	/* seq_cst load: pairs with the timekeeper's stores in idle_halt,
	 * idle_wake and tk_set_busy. */
	tk = atomic_load(&idle.tk_state);
	if (tk_busy(tk, now)) {
		idle_force_exit();
		return;
	}
	idle.check_start = now;
	if (idle.vm->ncpus <= SYSIDLE_DEFAULT_SMALL &&
	    !sysidle_delay_ns(idle.s)) {
		is_idle = sysidle_poll(idle.s);
		stat_inc(&idle.scans);
	} else {
		pace = sysidle_delay_ns(idle.s);
		if (pace < idle.tick_period)
			pace = idle.tick_period;
		if (now - idle.last_scan >= pace) {
			sysidle_scan(idle.s);
			idle.last_scan = now;
			stat_inc(&idle.scans);
		}
		idle.check_start = now_ns();
		is_idle = sysidle_is_idle(idle.s);
	}
	if (!is_idle)
		return;
	/* seq_cst load after sysidle_is_idle's seq_cst cmpxchg: pairs with
	 * tk_set_busy()'s store of TK_BUSY then load of the state (one of
	 * the two sides sees the other). */
	tk = atomic_load(&idle.tk_state);
	if (tk_busy(tk, now_ns())) {
		idle_force_exit();
		return;
	}
	if (tk != TK_HALTED)
		return; /* in a tick-only window: look again next tick */
	idle_stop();
}

static void idle_tick_fire(struct hk_timer *t, uint64_t deadline_ns)
{
	(void)t;
	if (deadline_ns != idle.tick_deadline || idle.stopped)
		return; /* stale */
	idle_step(now_ns());
	if (!idle.stopped)
		idle_tick_arm(deadline_ns, now_ns());
	idle_flush();
}

/* Housekeeping thread hooks. */
static void idle_hk_start(void)
{
	uint64_t now = now_ns();

	hk_pin();
	if (!idle.enabled)
		return;
	idle.tick_deadline = now;
	idle_tick_arm(now, now);
}

static void idle_hk_kick(void)
{
	if (!idle.enabled)
		return;
	/* seq_cst RMW: pairs with the store in tk_set_busy() /
	 * idle_external_kick(), made before their kick. */
	if (atomic_exchange(&idle.force_req, false))
		idle_force_exit();
	if (idle.stopped && sysidle_state(idle.s) != SYSIDLE_FULL_NOTED)
		idle_restart();
	idle_flush();
}

/* The backstop of a deferred kick (idle_kick_deferred): the same work. */
static void idle_kick_backstop_fire(struct hk_timer *t, uint64_t deadline_ns)
{
	(void)t;
	(void)deadline_ns;
	idle_hk_kick();
}

/*
 * @v's thread, not holding its lock, right after a wake-up whose
 * idle_wake() asked for a kick. The housekeeping thread's part (restart
 * the tick, re-pin, force the timekeeper's exit) is not on the wake path:
 * the kick goes out from idle_kick_due() when @v halts again or at the
 * first exit IDLE_KICK_DEFER_NS after the wake, whichever comes first, so
 * the burst of work that follows a wake-up (the handler, an IPI it sends,
 * the vCPU it wakes) does not compete with the housekeeping thread for a
 * host CPU. Exits come at the latest with @v's next pv tick (resumed by
 * idle_wake, and never suspended again by idle_stop while @v runs);
 * without a pv tick a backstop timer bounds the delay (arming it costs a
 * host timer update on the wake path, hence only then). @v's pv tick
 * settings are written by @v's own thread: read unlocked.
 */
void idle_kick_deferred(struct vcpu *v)
{
	uint64_t now = now_ns();

	v->hk_kick_due_ns = now + IDLE_KICK_DEFER_NS;
	if (!v->pvt.hz)
		hk_timer_arm(&idle.kick_backstop, now + IDLE_KICK_BACKSTOP_NS);
}

/* @v's thread, after a KVM_RUN (@halting false) or before it blocks in
 * HLT (@halting true): send the kick idle_kick_deferred() held back. */
void idle_kick_due(struct vcpu *v, bool halting)
{
	if (!v->hk_kick_due_ns || (!halting && now_ns() < v->hk_kick_due_ns))
		return;
	v->hk_kick_due_ns = 0;
	housekeeping_kick();
}

/* Timekeeper thread: it did more than take its tick. Returns true when
 * the housekeeping thread must be kicked to force the exit. */
static bool tk_set_busy(void)
{
	/* seq_cst store then seq_cst load of the state (sysidle_state):
	 * pairs with idle_step()'s cmpxchg (in sysidle_is_idle) then load
	 * of tk_state. */
	atomic_store(&idle.tk_state, TK_BUSY);
	if (sysidle_state(idle.s) <= SYSIDLE_SHORT)
		return false; /* nothing to reset; the next tick sees BUSY */
	/* seq_cst store: pairs with the exchange in idle_hk_kick/idle_step. */
	atomic_store(&idle.force_req, true);
	return true;
}

void idle_external_kick(void)
{
	if (!idle.enabled)
		return;
	/* seq_cst store: pairs with the exchange in idle_hk_kick. */
	atomic_store(&idle.force_req, true);
	housekeeping_kick();
}

/* Any thread (the control socket's "kick"): wake the timekeeper vCPU with
 * its pv tick now (one of the ticks due: its jiffies stay exact), then end
 * full idle as SIGUSR2 does. Without a pv tick only the second part. The
 * tick goes first so that the kick, not the tick the housekeeping thread
 * restarts, is what wakes (and resumes, when paused) the VM. */
void idle_kick_timekeeper(void)
{
	struct vcpu *t;

	if (!idle.enabled)
		return;
	t = &idle.vm->vcpus[idle.tk];
	pthread_mutex_lock(&t->lock);
	pvtick_deliver_now(t);
	pthread_mutex_unlock(&t->lock);
	idle_external_kick();
}

void idle_halt(struct vcpu *v, bool sipi)
{
	uint64_t now, tk;

	if (!idle.enabled)
		return;
	now = now_ns();
	if ((int)v->id == idle.tk) {
		/* relaxed: only this thread writes tk_state. */
		tk = atomic_load_explicit(&idle.tk_state,
					  memory_order_relaxed);
		if (tk > TK_BUSY && !sipi && now - tk > v->pvt.period_ns &&
		    tk_set_busy())
			housekeeping_kick(); /* back in HLT too late */
		/* Took only its tick: still idle since before. Else: */
		if (!(tk > TK_BUSY && now - tk <= v->pvt.period_ns))
			/* relaxed: a statistic (detection latency). */
			atomic_store_explicit(&v->halted_at_ns, now,
					      memory_order_relaxed);
		/* seq_cst store: pairs with idle_step()'s loads. */
		atomic_store(&idle.tk_state, TK_HALTED);
	} else {
		/* relaxed: a statistic (detection latency). */
		atomic_store_explicit(&v->halted_at_ns, now,
				      memory_order_relaxed);
	}
	/* seq_cst RMW, even: halted for idle_check_violation() before the
	 * library may see it idle (pairs with its load of idle_seq). */
	atomic_fetch_add(&v->idle_seq, 1);
	sysidle_enter(idle.s, v->id);
}

bool idle_wake(struct vcpu *v, bool sipi)
{
	uint64_t now;
	bool kick = false;

	if (!idle.enabled)
		return false;
	now = now_ns();
	if ((int)v->id == idle.tk) {
		/* A tick pending while the tick is suspended fired just
		 * before idle_stop: no window then (nothing would age it). */
		bool tick_only = !sipi && v->pvt.hz && !v->pvt.suppressed &&
				 !v->nmi_pending && !v->init_pending &&
				 lapic_irr_only(&v->lapic, v->pvt.vector);

		sysidle_exit(idle.s, v->id); /* never changes the state */
		if (tick_only) {
			/* relaxed: a setting read by tk_busy(). */
			atomic_store_explicit(&idle.tk_period,
					      v->pvt.period_ns,
					      memory_order_relaxed);
			/* seq_cst store: pairs with idle_step()'s loads. */
			atomic_store(&idle.tk_state, now > TK_BUSY ? now : 2);
		} else {
			kick = tk_set_busy();
			pvtick_resume(v);
		}
	} else {
		kick = sysidle_exit(idle.s, v->id);
		pvtick_resume(v);
	}
	/* seq_cst store, then the seq_cst RMW to odd: pairs with the loads
	 * in idle_check_violation() (idle_seq, then woke_ns). */
	atomic_store(&v->woke_ns, now_ns());
	atomic_fetch_add(&v->idle_seq, 1);
	return kick && !vm_stopping();
}

/* Timekeeper thread, before handling an exit: in a tick-only window only
 * the tick's own exits are allowed. */
void idle_tk_exit(struct vcpu *v)
{
	struct kvm_run *r = v->run;
	bool ok;

	/* relaxed: only this thread writes tk_state. */
	if (atomic_load_explicit(&idle.tk_state, memory_order_relaxed) <=
	    TK_BUSY)
		return;
	switch (r->exit_reason) {
	case KVM_EXIT_HLT:
	case KVM_EXIT_IRQ_WINDOW_OPEN:
	case KVM_EXIT_INTR:
		ok = true;
		break;
	case KVM_EXIT_X86_RDMSR:
		ok = r->msr.index == MSR_SYSIDLE_PVTICK_MISSED;
		break;
	case KVM_EXIT_X86_WRMSR:
		ok = r->msr.index == MSR_X2APIC_BASE + (APIC_REG_EOI >> 4);
		break;
	case KVM_EXIT_MMIO:
		ok = r->mmio.is_write &&
		     r->mmio.phys_addr == GUEST_LAPIC_BASE + APIC_REG_EOI;
		break;
	default:
		ok = false;
	}
	if (!ok && tk_set_busy())
		housekeeping_kick();
}

/* Timekeeper thread, lock held, about to inject @vector. */
void idle_tk_inject(struct vcpu *v, int vector)
{
	/* relaxed: only this thread writes tk_state. */
	if (atomic_load_explicit(&idle.tk_state, memory_order_relaxed) >
	    TK_BUSY && vector != v->pvt.vector && tk_set_busy())
		housekeeping_kick();
}

/* A paused vCPU is idle for --sysidle, as a halted one. */
bool idle_suppress_tick(const struct vcpu *v)
{
	return idle.enabled && (int)v->id != idle.tk &&
	       (v->state == VCPU_HALTED || v->state == VCPU_PAUSED);
}

/* A RUNNING vCPU parks for a pause: idle, as at a HLT that is not a
 * tick-only window's end (no "back in HLT too late" check). */
void idle_park(struct vcpu *v)
{
	idle_halt(v, true);
}

/* ... and comes back: a real wake-up (never a tick-only window). */
bool idle_unpark(struct vcpu *v)
{
	return idle_wake(v, true);
}

int idle_init(struct vm *vm)
{
	const struct vm_options *o = vm->opts;
	struct sysidle_config cfg;

	idle.vm = vm;
	idle.tk = o->timekeeper;
	idle.hk_cpu = o->housekeeping_cpu;
	if (idle.tk < 0 || (unsigned int)idle.tk >= vm->ncpus)
		return vmm_fail(VMM_EXIT_USAGE, "--timekeeper %d: expected a "
				"vCPU from 0 to %u", idle.tk, vm->ncpus - 1);
	if (sched_getaffinity(0, sizeof(idle.orig_cpus), &idle.orig_cpus) < 0)
		return vmm_fail(VMM_EXIT_KVM, "sched_getaffinity: %s",
				strerror(errno));
	if (idle.hk_cpu >= CPU_SETSIZE ||
	    (idle.hk_cpu >= 0 && !CPU_ISSET(idle.hk_cpu, &idle.orig_cpus)))
		return vmm_fail(VMM_EXIT_USAGE, "--housekeeping-cpu %d: not a "
				"CPU this process may run on", idle.hk_cpu);
	housekeeping_set_hooks(idle_hk_start, idle_hk_kick);
	if (!o->sysidle)
		return 0;
	if (o->sysidle_log && strcmp(o->sysidle_log, "-") == 0) {
		idle.log = stderr;
	} else if (o->sysidle_log) {
		idle.log = fopen(o->sysidle_log, "w");
		if (!idle.log)
			return vmm_fail(VMM_EXIT_USAGE, "cannot write "
					"--sysidle-log '%s': %s",
					o->sysidle_log, strerror(errno));
		idle.log_close = true;
	}
	sysidle_config_init(&cfg, vm->ncpus);
	cfg.timekeeper = idle.tk;
	cfg.on_transition = idle_transition;
	idle.s = sysidle_create(&cfg);
	idle.lat = calloc(IDLE_LATENCY_SAMPLES, sizeof(*idle.lat));
	if (!idle.s || !idle.lat)
		return vmm_fail(VMM_EXIT_KVM, "sysidle_create: %s",
				strerror(errno));
	hk_timer_init(&idle.tick, idle_tick_fire);
	hk_timer_init(&idle.kick_backstop, idle_kick_backstop_fire);
	idle.tick_period = HK_TICK_DEFAULT_NS;
	/* Before any vCPU thread starts: plain initialisation. */
	atomic_init(&idle.tk_state, TK_BUSY);
	atomic_init(&idle.tk_period, HK_TICK_DEFAULT_NS);
	atomic_init(&idle.force_req, false);
	for (unsigned int i = 0; i < vm->ncpus; i++)
		atomic_init(&vm->vcpus[i].idle_seq, 1); /* running */
	idle.t0 = now_ns();
	idle.since = idle.t0;
	idle.cur = SYSIDLE_NOT;
	idle.enabled = true;
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* After the housekeeping thread and every vCPU have been joined. */
void idle_get_stats(struct idle_stats *st)
{
	uint64_t now = now_ns(), n;

	memset(st, 0, sizeof(*st));
	st->enabled = idle.enabled;
	st->timekeeper = idle.tk;
	if (!idle.enabled)
		return;
	st->delay_ns = sysidle_delay_ns(idle.s);
	st->tick_period_ns = idle.tick_period;
	pthread_mutex_lock(&idle.lock);
	memcpy(st->state_ns, idle.state_ns, sizeof(st->state_ns));
	if (now > idle.since)
		st->state_ns[idle.cur] += now - idle.since;
	pthread_mutex_unlock(&idle.lock);
	st->full_idle_periods = idle.full_periods;
	st->force_exits = idle.force_exits;
	st->violations = idle.violations;
	st->scans = idle.scans;
	st->tick_restarts = idle.restarts;
	st->lat_count = idle.lat_count;
	st->lat_min = idle.lat_min;
	st->lat_max = idle.lat_max;
	st->lat_sum = idle.lat_sum;
	n = idle.lat_count < IDLE_LATENCY_SAMPLES ? idle.lat_count :
						    IDLE_LATENCY_SAMPLES;
	if (n) {
		qsort(idle.lat, n, sizeof(*idle.lat), cmp_u64);
		st->lat_median = idle.lat[n / 2];
		st->lat_p99 = idle.lat[(99 * n + 99) / 100 - 1];
	}
}

/* Any thread: the idle part of a status snapshot (export.h). */
void idle_read_status(struct vm_status *st, uint64_t now)
{
	st->sysidle = idle.enabled;
	st->timekeeper = idle.tk;
	st->state = SYSIDLE_NOT;
	st->events_dropped = 0;
	if (!idle.enabled) {
		memset(st->state_ns, 0, sizeof(st->state_ns));
		st->state_ns[SYSIDLE_NOT] = st->uptime_ns;
		st->since_ns = now - st->uptime_ns;
		return;
	}
	pthread_mutex_lock(&idle.lock);
	st->state = idle.cur;
	st->since_ns = idle.changed_ns ? idle.changed_ns : idle.t0;
	memcpy(st->state_ns, idle.state_ns, sizeof(st->state_ns));
	if (now > idle.since)
		st->state_ns[idle.cur] += now - idle.since;
	st->full_idle_periods = idle.full_periods_seen;
	st->events_dropped = idle.events_lost;
	pthread_mutex_unlock(&idle.lock);
	st->full_idle_ns = st->state_ns[SYSIDLE_FULL_NOTED];
	/* Housekeeping-thread counters, read as they are: statistics. */
	st->force_exits = __atomic_load_n(&idle.force_exits, __ATOMIC_RELAXED);
	st->violations = __atomic_load_n(&idle.violations, __ATOMIC_RELAXED);
	st->scans = __atomic_load_n(&idle.scans, __ATOMIC_RELAXED);
	st->tick_restarts = __atomic_load_n(&idle.restarts, __ATOMIC_RELAXED);
}

void idle_fini(void)
{
	idle_flush();
	if (idle.log_close)
		fclose(idle.log);
	idle.log = NULL;
	sysidle_destroy(idle.s);
	idle.s = NULL;
	free(idle.lat);
	idle.lat = NULL;
	idle.enabled = false;
}
