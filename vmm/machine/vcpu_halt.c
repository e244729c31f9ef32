/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * HLT: how a vCPU thread waits for its next interrupt, and how it gets
 * there fast.
 *  - Its own LAPIC timer is the timeout of its wait (--vcpu-timers self):
 *    no hop through the housekeeping thread; the housekeeping thread
 *    serves it again once the vCPU runs (vcpu_timer.c wait_end).
 *  - Timer advance (--timer-advance-ns): the wait ends a little before
 *    the deadline and the thread spins to it, the lead tuned to how late
 *    its wake-ups come (as KVM's lapic_timer_advance_ns), apart for each
 *    decade of the sleep (a wake from full idle is later than one from a
 *    short sleep: halt_rules.h timer_advance_class). A deadline the
 *    thread arms itself a few microseconds on is served before its next
 *    KVM_RUN (vcpu_timer_entry).
 *  - Halt polling (--halt-poll-ns): before blocking, the thread watches
 *    for an event for a window that grows and shrinks as KVM's
 *    halt_poll_ns does; never while the idle layer says the VM is heading
 *    into full idle (may_poll), so an idle VM still costs nothing.
 * That neither loses a wake-up (a poll that misses the event, a deadline
 * moved by another thread) is checked by tests/model/halt_wait.pml.
 */
#include <errno.h>
#include <pthread.h>
#include <time.h>

#include "base/error.h"
#include "base/time.h"
#include "machine/halt_rules.h"
#include "machine/pause.h"
#include "machine/vcpu_loop.h"
#include "machine/vcpu.h"
#include "machine/vm.h"

#define HALT_POLL_PREEMPTED_NS 20000ull /* a gap that is not the loop's */

static const struct machine_config *cfg_of(const struct vcpu *v)
{
	static const struct machine_config none;

	return v->vm->cfg ? v->vm->cfg : &none;
}

static inline void cpu_relax(void)
{
	__builtin_ia32_pause();
}

/*
 * Lock not held: spin until @until_ns, an event posted since @seq was
 * read (if @events), a stop or a pause; a poll (@preempted not NULL) also
 * ends when the thread was preempted (a gap of HALT_POLL_PREEMPTED_NS
 * between two looks at the clock): the host CPU is wanted by another
 * task, which the poll only delays (KVM stops polling likewise when its
 * CPU has another task to run). Returns the time it ended.
 */
static uint64_t spin_until(struct vcpu *v, uint64_t until_ns, unsigned int seq,
			   bool events, bool *preempted)
{
	uint64_t now = now_ns(), prev;

	while (now < until_ns && !vm_stopping() && !pause_pending() &&
	       (!events ||
		/* acquire: pairs with the release increments in
		 * vcpu_kick_for / vcpus_nudge / vcpu_timer.c
		 * timer_self_moved, made after the event was posted under
		 * the lock */
		atomic_load_explicit(&v->wake_seq, memory_order_acquire) == seq)) {
		cpu_relax();
		prev = now;
		now = now_ns();
		if (preempted && now - prev > HALT_POLL_PREEMPTED_NS) {
			*preempted = true;
			break;
		}
	}
	return now;
}

/* A wait of class @cls ended by its advance, @err_ns after the deadline
 * (< 0: before): that class's lead moves by an eighth of the error,
 * within 0..--timer-advance-ns. */
static void advance_adjust(struct vcpu *v, unsigned int cls, int64_t err_ns)
{
	v->stats.timer_advance_wakes[cls]++;
	v->advance_ns[cls] = timer_advance_next(v->advance_ns[cls], err_ns,
						cfg_of(v)->timer_advance_max_ns);
}

/* The lock again after a spin: its holder is most likely the thread that
 * posted the event just seen, about to drop it. Spun for, not slept on
 * (a futex sleep would put a thread wake-up back on the wake path), for
 * a bounded number of tries: a holder that was preempted is waited for
 * asleep. */
#define LOCK_SPIN_TRIES 2000
static void lock_spinning(struct vcpu *v)
{
	for (int i = 0; i < LOCK_SPIN_TRIES; i++) {
		if (!pthread_mutex_trylock(&v->lock))
			return;
		cpu_relax();
	}
	pthread_mutex_lock(&v->lock);
}

static struct timespec ns_to_timespec(uint64_t ns)
{
	return (struct timespec){ .tv_sec = (time_t)(ns / 1000000000ull),
				  .tv_nsec = (long)(ns % 1000000000ull) };
}

/*
 * Lock held, nothing pending: block until an event is posted, or until
 * the LAPIC timer this thread serves is due, then serve it. May return
 * early (a spurious wake, a moved deadline): the caller looks again.
 */
static void halt_block(struct vcpu *v)
{
	uint64_t dl = vcpu_timer_wait_deadline(v), now, start, wake_at, lead;
	unsigned int seq, cls;
	struct timespec ts;

	if (!dl) {
		pthread_cond_wait(&v->wake, &v->lock);
		return;
	}
	now = now_ns();
	cls = timer_advance_class(dl > now ? dl - now : 0);
	lead = v->advance_ns[cls];
	wake_at = dl > lead ? dl - lead : 0;
	if (now < wake_at) {
		ts = ns_to_timespec(wake_at);
		if (pthread_cond_timedwait(&v->wake, &v->lock, &ts) != ETIMEDOUT)
			return;
		now = now_ns();
		if (vcpu_timer_wait_deadline(v) != dl)
			return;
		advance_adjust(v, cls, (int64_t)(now - dl));
	}
	if (now < dl) {
		/* relaxed: the lock is held, nothing can be posted before
		 * it is dropped; spin_until's acquire loads pair with the
		 * increments made after that */
		seq = atomic_load_explicit(&v->wake_seq, memory_order_relaxed);
		start = now;
		pthread_mutex_unlock(&v->lock);
		now = spin_until(v, dl, seq, true, NULL);
		lock_spinning(v);
		v->stats.timer_spin_ns += now - start;
		if (now < dl || vcpu_timer_wait_deadline(v) != dl)
			return;
	}
	vcpu_timer_expire(v);
}

/*
 * Lock held, HALTED, nothing pending: watch for an event for the current
 * window (and serve a timer due within it). Returns true when one came.
 */
static bool halt_poll(struct vcpu *v)
{
	const struct vcpu_idle_ops *idle = v->vm->idle;
	uint64_t start, end, dl, now;
	unsigned int seq;
	bool hit, preempted = false;

	if (!v->poll_ns || (idle && !idle->may_poll(v)))
		return false;
	start = now_ns();
	end = start + v->poll_ns;
	dl = vcpu_timer_wait_deadline(v);
	if (dl && dl < end)
		end = dl;
	/* relaxed: under the lock, as in halt_block */
	seq = atomic_load_explicit(&v->wake_seq, memory_order_relaxed);
	v->stats.halt_polls++;
	pthread_mutex_unlock(&v->lock);
	now = spin_until(v, end, seq, true, &preempted);
	lock_spinning(v);
	v->stats.halt_poll_ns += now - start;
	if (preempted) { /* the window shrinks: the CPU is contended */
		v->stats.halt_poll_preempted++;
		v->poll_ns = 0;
	}
	if (dl && now >= dl && vcpu_timer_wait_deadline(v) == dl)
		vcpu_timer_expire(v);
	hit = vcpu_has_wake_event(v);
	v->stats.halt_poll_hits += hit;
	return hit;
}

/* After a halt of @halt_ns: KVM's rule (halt_rules.h). */
static void halt_poll_adjust(struct vcpu *v, uint64_t halt_ns, bool valid)
{
	v->poll_ns = halt_poll_next(v->poll_ns, halt_ns,
				    cfg_of(v)->halt_poll_max_ns, valid);
}

static void timer_wait_begin(struct vcpu *v)
{
	if (!cfg_of(v)->timers_on_housekeeping)
		vcpu_timer_wait_begin(v);
}

/*
 * Blocks until an interrupt can be delivered (or NMI, INIT, stop).
 * Caller: @v's thread, after HLT found nothing (or, with idle hooks,
 * after any HLT).
 */
enum vcpu_state vcpu_wait_interrupt(struct vcpu *v)
{
	const struct vcpu_idle_ops *idle = v->vm->idle;
	uint64_t t0 = now_ns(), t1, posted;
	bool kick = false, valid;

	if (idle)
		idle->run_done(v, true);
	pthread_mutex_lock(&v->lock);
	v->state = VCPU_HALTED;
	v->wake_posted_ns = 0;
	/* relaxed: one writer; status snapshots read it (halted time) */
	atomic_store_explicit(&v->stats.halted_since_ns, t0,
			      memory_order_relaxed);
	if (idle)
		idle->halt(v, false);
	timer_wait_begin(v);
	if (!vcpu_has_wake_event(v))
		halt_poll(v);
	for (;;) {
		while (!vcpu_has_wake_event(v) && !vm_stopping() &&
		       !pause_pending())
			halt_block(v);
		if (vcpu_has_wake_event(v) || vm_stopping())
			break;
		/* parked, the housekeeping thread serves the timer: its
		 * expiry resumes the VM */
		vcpu_timer_wait_end(v, now_ns(), 0);
		vcpu_park(v); /* HALTED -> PAUSED -> HALTED, idle throughout */
		timer_wait_begin(v);
	}
	valid = vcpu_has_wake_event(v);
	t1 = now_ns();
	if (valid && v->wake_posted_ns) { /* woken by an event: its source */
		wake_tally_add(&v->stats.wakes, v->wake_src, v->wake_detail, t1);
	} else { /* pending already, or no event: not known */
		v->wake_src = WAKE_SRC_OTHER;
		v->wake_detail = 0;
	}
	vcpu_timer_wait_end(v, t1, vcpu_timer_keep_ns(v));
	if (idle)
		kick = idle->wake(v, false);
	v->state = VCPU_RUNNING;
	posted = v->wake_posted_ns;
	pthread_mutex_unlock(&v->lock);
	/* Already running: the housekeeping thread restarts the tick (or
	 * forces the timekeeper's exit) behind us, kicked later. */
	if (kick)
		idle->kick_deferred(v);
	/* relaxed: one writer; status snapshots read them. The wait ends
	 * before it is counted: a snapshot in between sees neither. */
	atomic_store_explicit(&v->stats.halted_since_ns, 0,
			      memory_order_relaxed);
	atomic_store_explicit(&v->stats.halted_ns, atomic_load_explicit(
		&v->stats.halted_ns, memory_order_relaxed) + (t1 - t0),
		memory_order_relaxed);
	halt_poll_adjust(v, t1 - t0, valid);
	if (posted && !vm_stopping())
		v->wake_posted_run_ns = posted; /* timed at the next KVM_RUN */
	return VCPU_RUNNING;
}

/* Lock not held, before KVM_RUN. */
void vcpu_timer_entry(struct vcpu *v)
{
	uint64_t dl, now, start, keep = vcpu_timer_keep_ns(v);

	if (!v->timer_self) /* this thread is its only writer */
		return;
	pthread_mutex_lock(&v->lock);
	now = now_ns();
	while ((dl = vcpu_timer_entry_due(v, now, keep))) {
		if (now < dl) {
			start = now;
			pthread_mutex_unlock(&v->lock);
			now = spin_until(v, dl, 0, false, NULL);
			pthread_mutex_lock(&v->lock);
			v->stats.timer_spin_ns += now - start;
			if (now < dl) { /* a stop or a pause: the housekeeping
					 * thread serves it (its expiry resumes) */
				vcpu_timer_wait_end(v, now, 0);
				break;
			}
		}
		vcpu_timer_expire(v);
		now = now_ns();
	}
	pthread_mutex_unlock(&v->lock);
}
