/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Idle tracking: what each vCPU thread does at the vCPU loop's idle points
 * (the machine's struct vcpu_idle_ops), and the library's transition
 * callback, which posts every state change to the event queue.
 *
 * Each vCPU thread calls sysidle_enter(id) when it blocks on HLT with
 * nothing pending (or waits for SIPI, or parks for a pause) and
 * sysidle_exit(id) when it is woken (idle_halt / idle_wake, under its own
 * lock); an exit that ends FULL_NOTED kicks the housekeeping thread
 * *after* the vCPU is already running (idle_kick_deferred, tick.c): the
 * wake path never waits for housekeeping. The timekeeper vCPU's halts and
 * wake-ups go through its own rule (timekeeper.c).
 */
#include <inttypes.h>
#include <pthread.h>
#include <string.h>

#include "base/error.h"
#include "base/event.h"
#include "base/time.h"
#include "idle/internal.h"
#include "idle/pvtick.h"
#include "machine/vcpu.h"
#include "machine/vm.h"

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
	struct idle_layer *idle = idle_layer();

	for (unsigned int i = 0; i < idle->vm->ncpus; i++) {
		struct idle_vcpu *iv = &idle->vcpus[i];
		uint64_t woke;

		if ((int)i == idle->tk)
			continue;
		/* seq_cst load: pairs with the vCPU's idle_seq increments in
		 * idle_halt / idle_wake; an odd value makes woke_ns (stored
		 * before it) visible. */
		if (!(atomic_load(&iv->idle_seq) & 1))
			continue;
		/* seq_cst load: pairs with the store in idle_wake, before
		 * the increment read above. */
		woke = atomic_load(&iv->woke_ns);
		if (woke < idle->check_start) {
			stat_inc(&idle->violations);
			idle_log_locked(now, "VIOLATION state %s while vcpu %u "
					"running", sysidle_state_name(to), i);
		}
	}
}

/* idle.lock held: the event of a change, and its log line; @src and
 * @detail: what ended FULL_NOTED (enum wake_source, -1: not that). */
static void idle_emit_locked(enum sysidle_state from, enum sysidle_state to,
			     int cpu, uint64_t now, uint64_t full_idle_ns,
			     int src, uint32_t detail)
{
	struct idle_layer *idle = idle_layer();
	char by[48] = "";

	event_post(&(struct vm_event){
		.kind = VM_EV_STATE, .from = from, .to = to, .cpu = cpu,
		.mono_ns = now,
		.unix_ms = mono_to_unix_ms(now),
		.full_idle_ns = full_idle_ns,
		.src = src, .detail = detail,
	});
	if (src >= 0) {
		memcpy(by, " by ", 4);
		wake_source_describe(src, detail, by + 4, sizeof(by) - 4);
	}
	if (to != SYSIDLE_NOT)
		idle_log_locked(now, "state %s -> %s", sysidle_state_name(from),
				sysidle_state_name(to));
	else if (cpu >= 0)
		idle_log_locked(now, "state %s -> NOT vcpu %d%s",
				sysidle_state_name(from), cpu, by);
	else if (idle->in_force)
		idle_log_locked(now, "state %s -> NOT vcpu %d force-exit%s",
				sysidle_state_name(from), idle->tk, by);
	else
		idle_log_locked(now, "state %s -> NOT scan",
				sysidle_state_name(from));
}

void idle_emit_pending_locked(void)
{
	struct idle_layer *idle = idle_layer();

	if (!idle->pend.valid)
		return;
	idle->pend.valid = false;
	idle_emit_locked(idle->pend.from, SYSIDLE_NOT, idle->pend.cpu,
			 idle->pend.now, idle->pend.full_idle_ns,
			 idle->pend.src, idle->pend.detail);
}

/* on_transition: any thread; see sysidle_transition_fn. Lock order:
 * idle.lock, then the event queue's. A vCPU's own exit (@cpu >= 0, on its
 * wake path) is only recorded: its event and log line are made by the
 * next change, or by idle_flush on the housekeeping thread (which the
 * exit's deferred kick, or the scan's tick, brings), so the wake path
 * formats and queues nothing. */
void idle_transition(void *arg, enum sysidle_state from,
		     enum sysidle_state to, int cpu, uint64_t now)
{
	struct idle_layer *idle = idle_layer();
	uint64_t full_idle_ns;
	uint32_t detail = 0;
	int src = -1;

	(void)arg;
	/* What ended full idle: the vCPU's wake-up (its own thread, its lock
	 * held: the wake path), or the force-exit's request. */
	if (from == SYSIDLE_FULL_NOTED && to == SYSIDLE_NOT && cpu >= 0) {
		src = idle->vm->vcpus[cpu].wake_src;
		detail = idle->vm->vcpus[cpu].wake_detail;
	} else if (from == SYSIDLE_FULL_NOTED && to == SYSIDLE_NOT &&
		   idle->in_force) {
		src = idle->force_src_now;
		detail = idle->force_detail_now;
	}
	if (src >= 0 && src < WAKE_SOURCES)
		stat_inc(&idle->full_exits_by[src]);
	else
		src = -1;
	pthread_mutex_lock(&idle->lock);
	idle_emit_pending_locked(); /* events keep the order of the changes */
	if (to == SYSIDLE_FULL || to == SYSIDLE_FULL_NOTED)
		idle_check_violation(to, now);
	if (to == SYSIDLE_FULL_NOTED) {
		idle->noted_ns = now;
		idle->full_periods_seen++;
	}
	/* Changes made by different threads can reach here out of order:
	 * time is charged to the state this code last saw. */
	if (now > idle->since) {
		idle->state_ns[idle->cur] += now - idle->since;
		idle->since = now;
	}
	full_idle_ns = from == SYSIDLE_FULL_NOTED && now > idle->noted_ns ?
		       now - idle->noted_ns : 0;
	/* Posted under idle->lock, so events keep the order of the changes;
	 * the readers are woken later, off the wake path (idle_flush). */
	if (cpu >= 0 && to == SYSIDLE_NOT) {
		idle->pend.valid = true;
		idle->pend.from = from;
		idle->pend.cpu = cpu;
		idle->pend.now = now;
		idle->pend.full_idle_ns = full_idle_ns;
		idle->pend.src = src;
		idle->pend.detail = detail;
	} else {
		idle_emit_locked(from, to, cpu, now, full_idle_ns, src, detail);
	}
	idle->changed_ns = now;
	idle->cur = to;
	if (cpu < 0 && idle->in_force)
		stat_inc(&idle->force_exits);
	pthread_mutex_unlock(&idle->lock);
}

/* vCPU thread, lock held: HLT with nothing pending (or WAIT_SIPI or a
 * pause, @plain) begins. */
static void idle_halt(struct vcpu *v, bool plain)
{
	struct idle_layer *idle = idle_layer();
	struct idle_vcpu *iv = idle_vcpu(v);
	uint64_t now = now_ns();

	if ((int)v->id == idle->tk)
		tk_halt(v, plain, now);
	else
		/* relaxed: a statistic (detection latency). */
		atomic_store_explicit(&iv->halted_at_ns, now,
				      memory_order_relaxed);
	/* seq_cst RMW, even: halted for idle_check_violation() before the
	 * library may see it idle (pairs with its load of idle_seq). */
	atomic_fetch_add(&iv->idle_seq, 1);
	sysidle_enter(idle->s, v->id);
}

/* vCPU thread, lock held: ... and ends. Returns true when the housekeeping
 * thread must be kicked (deferred: idle_kick_deferred). */
static bool idle_wake(struct vcpu *v, bool plain)
{
	struct idle_layer *idle = idle_layer();
	struct idle_vcpu *iv = idle_vcpu(v);
	bool kick;

	if ((int)v->id == idle->tk) {
		kick = tk_wake(v, plain, now_ns());
	} else {
		kick = sysidle_exit(idle->s, v->id);
		iv->tick_unarmed |= pvtick_resume_unarmed(v);
	}
	/* seq_cst store, then the seq_cst RMW to odd: pairs with the loads
	 * in idle_check_violation() (idle_seq, then woke_ns). */
	atomic_store(&iv->woke_ns, now_ns());
	atomic_fetch_add(&iv->idle_seq, 1);
	return kick && !vm_stopping();
}

/* pvtick.c asks, @v's lock held: may this tick be suppressed? A paused
 * vCPU is idle for --sysidle, as a halted one. */
bool idle_suppress_tick(const struct vcpu *v)
{
	struct idle_layer *idle = idle_layer();

	return idle->enabled && (int)v->id != idle->tk &&
	       (v->state == VCPU_HALTED || v->state == VCPU_PAUSED);
}

/* vCPU thread, no lock: a HLT may poll only while the VM is not heading
 * into full idle (any state above NOT): there the poll would only burn
 * the CPU an idle VM must not cost, waiting for a tick the VM is about to
 * stop. */
static bool idle_may_poll(struct vcpu *v)
{
	struct idle_layer *idle = idle_layer();

	(void)v;
	return sysidle_state(idle->s) == SYSIDLE_NOT;
}

/* Lock held: a woken vCPU whose pv tick is still to be armed, or whose
 * housekeeping kick is held back, both done at its next exit (tick.c
 * idle_kick_due): that exit must come, at the latest at the EOI of the
 * interrupt that woke it (guest_abi.h), so no paravirtual EOI before. */
static bool idle_exit_wanted(struct vcpu *v)
{
	const struct idle_vcpu *iv = idle_vcpu(v);

	return iv->tick_unarmed || iv->kick_due_ns;
}

static const struct vcpu_idle_ops ops = {
	.halt = idle_halt,
	.wake = idle_wake,
	.kick_deferred = idle_kick_deferred,
	.exit = tk_exit,
	.inject = tk_inject,
	.run_done = idle_kick_due,
	.may_poll = idle_may_poll,
	.exit_wanted = idle_exit_wanted,
};

const struct vcpu_idle_ops *idle_vcpu_ops(void)
{
	return &ops;
}
