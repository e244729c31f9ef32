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

#include "housekeeping.h"
#include "vmm.h"

#define HK_TICK_DEFAULT_NS 4000000ull /* 250 Hz */
#define TK_HALTED 0ull
#define TK_BUSY 1ull /* any larger value: a tick-only window's start */

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

	pthread_mutex_t lock; /* the log and the time-in-state accounting */
	int cur;
	uint64_t since, state_ns[SYSIDLE_NR_STATES];

	/* Written by the timekeeper vCPU thread, read by housekeeping. */
	_Atomic uint64_t tk_state;
	_Atomic uint64_t tk_period; /* its pv tick period, for the window */
	atomic_bool force_req;

	/* Housekeeping thread only (the transition callbacks that touch them
	 * run there: to FULL / FULL_NOTED and every cpu == -1 change). */
	struct hk_timer tick;
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

/* The log: one line per event, "MS.mmm what", MS since the VM started. */
static void idle_log_locked(uint64_t now, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void idle_log_locked(uint64_t now, const char *fmt, ...)
{
	uint64_t us = now > idle.t0 ? (now - idle.t0) / 1000 : 0;
	va_list ap;

	if (!idle.log)
		return;
	fprintf(idle.log, "%" PRIu64 ".%03" PRIu64 " ", us / 1000, us % 1000);
	va_start(ap, fmt);
	vfprintf(idle.log, fmt, ap);
	va_end(ap);
	fputc('\n', idle.log);
	fflush(idle.log);
}

#define idle_log(now, ...) do {                         \
		pthread_mutex_lock(&idle.lock);         \
		idle_log_locked(now, __VA_ARGS__);      \
		pthread_mutex_unlock(&idle.lock);       \
	} while (0)

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
			idle.violations++;
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
	if (to == SYSIDLE_FULL_NOTED)
		idle.noted_ns = now;
	/* Changes made by different threads can reach here out of order:
	 * time is charged to the state this code last saw. */
	if (now > idle.since) {
		idle.state_ns[idle.cur] += now - idle.since;
		idle.since = now;
	}
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
		idle.force_exits++;
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

/* Housekeeping thread: the tick period now (the timekeeper's pv tick). */
static uint64_t idle_tick_period(void)
{
	struct vcpu *t = &idle.vm->vcpus[idle.tk];
	uint64_t p;

	pthread_mutex_lock(&t->lock);
	p = t->pvt.hz ? t->pvt.period_ns : HK_TICK_DEFAULT_NS;
	pthread_mutex_unlock(&t->lock);
	return p;
}

/* Housekeeping thread: arm the tick one period after @prev, on its phase. */
static void idle_tick_arm(uint64_t prev, uint64_t now)
{
	uint64_t p = idle_tick_period(), next = prev + p;

	idle.tick_period = p;
	if (next <= now)
		next = prev + ((now - prev) / p + 1) * p;
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

/* Housekeeping thread: the only caller of sysidle_force_exit. */
static void idle_force_exit(void)
{
	idle.in_force = true;
	sysidle_force_exit(idle.s);
	idle.in_force = false;
	if (idle.stopped && sysidle_state(idle.s) != SYSIDLE_FULL_NOTED)
		idle_restart();
}

static void idle_stop(void)
{
	struct vm *vm = idle.vm;
	uint64_t now = now_ns(), last = 0, h;

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
		pvtick_suspend(v);
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
}

static void idle_restart(void)
{
	struct vm *vm = idle.vm;
	uint64_t now, missed = 0;

	idle.stopped = false;
	idle.restarts++;
	hk_pin();
	for (unsigned int i = 0; i < vm->ncpus; i++) {
		struct vcpu *v = &vm->vcpus[i];

		pthread_mutex_lock(&v->lock);
		/* Halted non-timekeepers stay suppressed until they run. */
		if ((int)i == idle.tk || v->state != VCPU_HALTED)
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
		idle.scans++;
	} else {
		pace = sysidle_delay_ns(idle.s);
		if (pace < idle.tick_period)
			pace = idle.tick_period;
		if (now - idle.last_scan >= pace) {
			sysidle_scan(idle.s);
			idle.last_scan = now;
			idle.scans++;
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
		bool tick_only = !sipi && v->pvt.hz && !v->nmi_pending &&
				 !v->init_pending &&
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

bool idle_suppress_tick(const struct vcpu *v)
{
	return idle.enabled && (int)v->id != idle.tk &&
	       v->state == VCPU_HALTED;
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
	}
}

void idle_fini(void)
{
	if (idle.log_close)
		fclose(idle.log);
	idle.log = NULL;
	sysidle_destroy(idle.s);
	idle.s = NULL;
	free(idle.lat);
	idle.lat = NULL;
	idle.enabled = false;
}
