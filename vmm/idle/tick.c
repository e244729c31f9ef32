/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The housekeeping thread's side of --sysidle: the timekeeper side of the
 * library, and the only caller of sysidle_poll / sysidle_scan /
 * sysidle_is_idle / sysidle_force_exit. It runs them from its own periodic
 * tick (the "housekeeping tick": the timekeeper vCPU's pv tick rate when
 * that is on, else 250 Hz), and from its kick handler.
 *
 * Scan pacing: a small VM (ncpus <= 8, delay 0) runs sysidle_poll at every
 * housekeeping tick (up to three passes while each advances, then the O(1)
 * query). A larger one runs one sysidle_scan at most once per
 * max(delay, tick period) and the O(1) sysidle_is_idle at every tick.
 * While the timekeeper is busy the housekeeping tick does not scan, as the
 * kernel's timekeeping CPU asks rcu_sys_is_idle() only from its idle loop.
 * After sysidle_is_idle() returned true the housekeeping thread reads
 * tk_state again before it stops anything: with the timekeeper's store of
 * TK_BUSY and its load of the state, both seq_cst, one of the two sides
 * sees the other, so a busy timekeeper never has its tick stopped under it.
 *
 * Full idle (sysidle_is_idle true, timekeeper halted): every vCPU's pv tick
 * is suspended (its timer disarmed), the housekeeping tick is not re-armed,
 * and the housekeeping thread's CPU pin is released. Guest LAPIC timers stay
 * armed. Whatever wakes a vCPU wakes it directly; its own pv tick resumes on
 * its wake with the periods that passed counted as missed (its timer armed
 * after its first exit: pvtick_resume_unarmed); the vCPU whose exit
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
#include <pthread.h>
#include <string.h>

#include "base/error.h"
#include "base/housekeeping.h"
#include "base/time.h"
#include "idle/internal.h"
#include "idle/pvtick.h"
#include "machine/vcpu.h"
#include "machine/vm.h"

static void hk_pin(void)
{
	struct idle_layer *idle = idle_layer();
	cpu_set_t set;

	if (idle->hk_cpu < 0)
		return;
	CPU_ZERO(&set);
	CPU_SET(idle->hk_cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set) < 0)
		vmm_warn("--housekeeping-cpu %d: %s", idle->hk_cpu,
			 strerror(errno));
}

static void hk_unpin(void)
{
	struct idle_layer *idle = idle_layer();

	if (idle->hk_cpu >= 0 &&
	    sched_setaffinity(0, sizeof(idle->orig_cpus), &idle->orig_cpus) < 0)
		vmm_warn("releasing the housekeeping pin: %s", strerror(errno));
}

/*
 * Housekeeping thread: arm the housekeeping tick one period after @prev.
 * With the timekeeper's pv tick on, the period is that tick's and the
 * deadlines fall half-way between its ticks: the timekeeper has taken its
 * tick and is back in HLT by then, so the check does not race with its
 * tick-only wake-ups (a tick fired in the same round would wake it just as
 * the tick is stopped). With the guest's periodic LAPIC tick instead: the
 * same, on the smallest multiple of its period of at least 4 ms. Without
 * either: 250 Hz, on @prev's phase.
 */
static void idle_tick_arm(uint64_t prev, uint64_t now)
{
	struct idle_layer *idle = idle_layer();
	struct vcpu *t = &idle->vm->vcpus[idle->tk];
	uint64_t p = HK_TICK_DEFAULT_NS, phase = prev, next, lp;
	uint8_t vector;

	pthread_mutex_lock(&t->lock);
	if (pvtick_of(t)->hz) {
		p = pvtick_of(t)->period_ns;
		phase = pvtick_of(t)->epoch_ns + p / 2;
	} else if (tk_tick(t, &vector, &lp)) {
		/* the guest's LAPIC tick: the same grid, at most 250 Hz */
		p = lp * ((HK_TICK_DEFAULT_NS + lp - 1) / lp);
		phase = lapic_timer_tick_phase(&t->lapic.timer) + lp / 2;
	}
	pthread_mutex_unlock(&t->lock);
	idle->tick_period = p;
	/* the first deadline on @phase's grid after @prev (and after now) */
	next = prev > now ? prev : now;
	if (next >= phase)
		next = phase + ((next - phase) / p + 1) * p;
	else
		next = phase;
	idle->tick_deadline = next;
	hk_timer_arm(&idle->tick, next);
}

static void idle_restart(void);
static void idle_hk_kick(void);

/* Housekeeping thread: the only caller of sysidle_force_exit. What the
 * change it makes is put down to: the request's source (a kick,
 * SIGUSR2), else the timekeeper's last wake-up (it did more than its
 * tick: what woke it). */
static void idle_force_exit(void)
{
	struct idle_layer *idle = idle_layer();
	struct vcpu *t = &idle->vm->vcpus[idle->tk];
	/* seq_cst RMW: pairs with the store in idle_force_request, made
	 * before its store of force_req (which our caller took). */
	int64_t req = atomic_exchange(&idle->force_src, -1);
	int src = req < 0 ? -1 : (int)(req & 0xff);

	idle->force_detail_now = req < 0 ? 0 : (uint32_t)(req >> 8);
	if (src < 0 && sysidle_state(idle->s) == SYSIDLE_FULL_NOTED) {
		pthread_mutex_lock(&t->lock);
		src = t->wake_src;
		idle->force_detail_now = t->wake_detail;
		pthread_mutex_unlock(&t->lock);
	}
	idle->force_src_now = src;
	idle->in_force = true;
	sysidle_force_exit(idle->s);
	idle->in_force = false;
	if (idle->stopped && sysidle_state(idle->s) != SYSIDLE_FULL_NOTED)
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
	struct idle_layer *idle = idle_layer();
	struct vm *vm = idle->vm;
	uint64_t now = now_ns(), last = 0, h;
	bool tk_running = false, held = false;

	idle->stopped = true;
	idle->stop_ns = now;
	for (unsigned int i = 0; i < vm->ncpus; i++) {
		struct vcpu *v = &vm->vcpus[i];

		/* relaxed: a statistic; the detection latency. */
		h = atomic_load_explicit(&idle_vcpu(v)->halted_at_ns,
					 memory_order_relaxed);
		if (h > last)
			last = h;
		pthread_mutex_lock(&v->lock);
		if (v->state == VCPU_RUNNING) {
			pvtick_of(v)->stop_missed = 0; /* woke already: keep its tick */
			tk_running |= (int)i == idle->tk;
		} else {
			pvtick_suspend(v);
			if ((int)i == idle->tk) {
				idle->tk_hold = tk_tick_holdable(v);
				held = idle->tk_hold && lapic_timer_hold(&v->lapic.timer);
			}
		}
		pthread_mutex_unlock(&v->lock);
	}
	hk_timer_cancel(&idle->tick);
	if (idle->tk_hold) {
		idle->hold_deadline = now + idle->max_hold_ns;
		hk_timer_arm(&idle->hold_backstop, idle->hold_deadline);
	}
	hk_unpin();
	idle->full_periods++;
	if (last && idle->noted_ns > last && idle->lat) {
		h = idle->noted_ns - last;
		if (idle->lat_count < IDLE_LATENCY_SAMPLES)
			idle->lat[idle->lat_count] = h;
		if (!idle->lat_count || h < idle->lat_min)
			idle->lat_min = h;
		if (h > idle->lat_max)
			idle->lat_max = h;
		idle->lat_sum += h;
		idle->lat_count++;
	}
	idle_log(now, held ? "tick stopped, lapic tick held" : "tick stopped");
	/* The timekeeper woke (a tick-only window) after tk_state was read
	 * back: its window is aged by the housekeeping tick, which must run
	 * again, and its own tick is running: not fully idle after all. */
	if (tk_running) {
		idle_restart();
		return;
	}
	idle_memory_full_idle(now); /* its advice, the delay later */
	/* seq_cst loads: pair with tk_set_busy()'s store of force_req and
	 * with the reset RMW in a waking vCPU's sysidle_exit(); a wake-up
	 * that came after them carries its own (deferred) kick. */
	if (atomic_load(&idle->force_req) ||
	    sysidle_state(idle->s) != SYSIDLE_FULL_NOTED)
		idle_hk_kick();
}

static void idle_restart(void)
{
	struct idle_layer *idle = idle_layer();
	struct vm *vm = idle->vm;
	uint64_t now, missed = 0;

	idle->stopped = false;
	idle_memory_leave(); /* its advice, if still to come, dropped */
	stat_inc(&idle->restarts);
	idle->hold_deadline = 0;
	hk_timer_cancel(&idle->hold_backstop);
	hk_pin();
	for (unsigned int i = 0; i < vm->ncpus; i++) {
		struct vcpu *v = &vm->vcpus[i];

		pthread_mutex_lock(&v->lock);
		/* Halted (or paused) non-timekeepers stay suppressed until
		 * they run. */
		if ((int)i == idle->tk ||
		    (v->state != VCPU_HALTED && v->state != VCPU_PAUSED))
			pvtick_resume(v);
		if ((int)i == idle->tk) {
			missed = pvtick_of(v)->hz ? pvtick_of(v)->stop_missed :
				 (now_ns() - idle->stop_ns) / idle->tick_period;
			idle->tk_hold = false;
			lapic_timer_release(&v->lapic.timer);
		}
		pthread_mutex_unlock(&v->lock);
	}
	now = now_ns();
	idle_log(now, "tick restarted missed=%" PRIu64, missed);
	idle_tick_arm(idle->tick_deadline ? idle->tick_deadline : now, now);
}

/* Housekeeping thread: one housekeeping tick. */
static void idle_step(uint64_t now)
{
	struct idle_layer *idle = idle_layer();
	bool is_idle;
	uint64_t tk, pace;

	/* seq_cst RMW: pairs with the store in tk_set_busy(). */
	if (atomic_exchange(&idle->force_req, false))
		idle_force_exit();
	/* seq_cst load: pairs with the timekeeper's stores in idle_halt,
	 * idle_wake and tk_set_busy. */
	tk = atomic_load(&idle->tk_state);
	if (tk_busy(tk, now)) {
		idle_force_exit();
		return;
	}
	idle->check_start = now;
	if (idle->vm->ncpus <= SYSIDLE_DEFAULT_SMALL &&
	    !sysidle_delay_ns(idle->s)) {
		is_idle = sysidle_poll(idle->s);
		stat_inc(&idle->scans);
	} else {
		pace = sysidle_delay_ns(idle->s);
		if (pace < idle->tick_period)
			pace = idle->tick_period;
		if (now - idle->last_scan >= pace) {
			sysidle_scan(idle->s);
			idle->last_scan = now;
			stat_inc(&idle->scans);
		}
		idle->check_start = now_ns();
		is_idle = sysidle_is_idle(idle->s);
	}
	if (!is_idle)
		return;
	/* seq_cst load after sysidle_is_idle's seq_cst cmpxchg: pairs with
	 * tk_set_busy()'s store of TK_BUSY then load of the state (one of
	 * the two sides sees the other). */
	tk = atomic_load(&idle->tk_state);
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
	struct idle_layer *idle = idle_layer();

	(void)t;
	if (deadline_ns != idle->tick_deadline || idle->stopped)
		return; /* stale */
	idle_step(now_ns());
	if (!idle->stopped)
		idle_tick_arm(deadline_ns, now_ns());
	idle_flush();
}

/* Housekeeping thread hooks. */
static void idle_hk_start(void)
{
	struct idle_layer *idle = idle_layer();
	uint64_t now = now_ns();

	hk_pin();
	if (!idle->enabled)
		return;
	idle->tick_deadline = now;
	idle_tick_arm(now, now);
}

static void idle_hk_kick(void)
{
	struct idle_layer *idle = idle_layer();

	if (!idle->enabled)
		return;
	/* seq_cst RMW: pairs with the store in tk_set_busy() /
	 * idle_external_kick(), made before their kick. */
	if (atomic_exchange(&idle->force_req, false))
		idle_force_exit();
	if (idle->stopped && sysidle_state(idle->s) != SYSIDLE_FULL_NOTED)
		idle_restart();
	idle_flush();
}

/*
 * Housekeeping thread, fully idle with the timekeeper's LAPIC tick held:
 * no tick is held longer than --lapic-tick-max-hold. The ticks due are
 * delivered by the policy (one: DISCARD; all, back to back: CATCHUP) as
 * tick-only wake-ups, so the VM stays fully idle, and the timekeeper holds
 * its tick again when it halts (tk_halt). A guest that waits on its tick
 * alone so still gets it, late by at most that much.
 */
static void idle_hold_fire(struct hk_timer *t, uint64_t deadline_ns)
{
	struct idle_layer *idle = idle_layer();
	struct vcpu *v = &idle->vm->vcpus[idle->tk];

	(void)t;
	if (!idle->stopped || deadline_ns != idle->hold_deadline)
		return; /* stale */
	pthread_mutex_lock(&v->lock);
	if (idle->tk_hold) {
		lapic_timer_release(&v->lapic.timer);
		stat_inc(&idle->hold_releases);
	}
	pthread_mutex_unlock(&v->lock);
	idle->hold_deadline = deadline_ns + idle->max_hold_ns;
	hk_timer_arm(&idle->hold_backstop, idle->hold_deadline);
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
 * the kick goes out from idle_kick_due() at the first exit
 * IDLE_KICK_DEFER_NS after the wake, or from the backstop timer when @v
 * halts before that, so the burst of work that follows a wake-up (the
 * handler, an IPI it sends, the vCPU it wakes) does not compete with the
 * housekeeping thread for a host CPU. Not when @v halts: that is when the
 * vCPU it woke needs the host CPU @v leaves (a kick sent there made a wake
 * from full idle by IPI about 14 % slower, on a host of 2 CPUs).
 * Exits come at the latest with @v's next pv tick (resumed by idle_wake,
 * armed after its first exit, and never suspended again by idle_stop
 * while @v runs); without a pv tick the backstop is armed here (arming it
 * costs a host timer update on the wake path, hence only then). @v's pv
 * tick settings are written by @v's own thread: read unlocked.
 */
void idle_kick_deferred(struct vcpu *v)
{
	struct idle_layer *idle = idle_layer();
	uint64_t now = now_ns();

	idle_vcpu(v)->kick_due_ns = now + IDLE_KICK_DEFER_NS;
	if (!pvtick_of(v)->hz)
		hk_timer_arm(&idle->kick_backstop, now + IDLE_KICK_BACKSTOP_NS);
}

/*
 * @v's thread, after a KVM_RUN (@halting false, lock not held) or as it
 * halts or parks (@halting true, lock held when parking). After a KVM_RUN:
 * arm the pv tick its wake resumed (idle_wake), then send the kick
 * idle_kick_deferred() held back once IDLE_KICK_DEFER_NS have passed.
 * Halting before that: the kick goes to the backstop timer, due then
 * (already armed for a vCPU without a pv tick).
 */
void idle_kick_due(struct vcpu *v, bool halting)
{
	struct idle_layer *idle = idle_layer();
	struct idle_vcpu *iv = idle_vcpu(v);
	uint64_t now;

	if (!halting && iv->tick_unarmed) {
		iv->tick_unarmed = false;
		pthread_mutex_lock(&v->lock);
		pvtick_arm_resumed(v);
		pthread_mutex_unlock(&v->lock);
	}
	if (!iv->kick_due_ns)
		return;
	now = now_ns();
	if (now < iv->kick_due_ns) {
		if (!halting)
			return;
		if (pvtick_of(v)->hz)
			hk_timer_arm(&idle->kick_backstop, iv->kick_due_ns);
	} else {
		housekeeping_kick();
	}
	iv->kick_due_ns = 0;
}

/* Any thread: a force-exit from outside, put down to @src. */
static void idle_force_request(int src)
{
	struct idle_layer *idle = idle_layer();

	if (!idle->enabled)
		return;
	/* seq_cst store: pairs with the exchange in idle_force_exit, which
	 * follows the exchange of force_req stored below. */
	atomic_store(&idle->force_src, FORCE_SRC(src, 0));
	/* seq_cst store: pairs with the exchange in idle_hk_kick. */
	atomic_store(&idle->force_req, true);
	housekeeping_kick();
}

void idle_external_kick(void)
{
	idle_force_request(WAKE_SRC_SIGNAL);
}

/* Any thread (the control socket's "kick"): wake the timekeeper vCPU with
 * its pv tick now (one of the ticks due: its jiffies stay exact), then end
 * full idle as SIGUSR2 does. Without a pv tick only the second part. The
 * tick goes first so that the kick, not the tick the housekeeping thread
 * restarts, is what wakes (and resumes, when paused) the VM. */
void idle_kick_timekeeper(void)
{
	struct idle_layer *idle = idle_layer();
	struct vcpu *t;

	if (!idle->enabled)
		return;
	t = &idle->vm->vcpus[idle->tk];
	pthread_mutex_lock(&t->lock);
	pvtick_deliver_now(t);
	pthread_mutex_unlock(&t->lock);
	idle_force_request(WAKE_SRC_KICK);
}

/* Main thread, from idle_init: the housekeeping thread's hooks (always:
 * they pin it, --housekeeping-cpu) and, with --sysidle, its timers. */
void idle_tick_setup(void)
{
	struct idle_layer *idle = idle_layer();

	housekeeping_set_hooks(idle_hk_start, idle_hk_kick);
	if (!idle->enabled)
		return;
	hk_timer_init(&idle->tick, idle_tick_fire);
	hk_timer_init(&idle->kick_backstop, idle_kick_backstop_fire);
	hk_timer_init(&idle->hold_backstop, idle_hold_fire);
	hk_timer_set_name(&idle->tick, "housekeeping-tick");
	hk_timer_set_name(&idle->kick_backstop, "kick-backstop");
	hk_timer_set_name(&idle->hold_backstop, "hold-backstop");
	idle->tick_period = HK_TICK_DEFAULT_NS;
}
