/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Pausing the VM (the control socket's "pause" / "resume"): every vCPU
 * thread parks out of KVM_RUN until the VM resumes, by request or by
 * itself when a wake source posts an event to any vCPU.
 *
 * The VM is RUNNING, PAUSING (a pause asked: @pending set, the vCPUs are
 * parking) or PAUSED (every vCPU parked). A pause always completes once
 * asked: a wake source (or a resume request) that comes while it is
 * PAUSING is remembered and resumes the VM as soon as the last vCPU has
 * parked, so the events are always "paused" then "resumed", and an event
 * posted around the pause never stays undelivered. A vCPU that parks with
 * a deliverable event already pending (posted just before the pause was
 * asked) counts as such a wake source too.
 *
 * Threads: pause_request on the export thread; pause_wake on any thread,
 * usually from vcpu_kick() with the target's vCPU lock held; pause_park on
 * each vCPU thread with no lock held; pause_stop on the main thread. Lock
 * order: vCPU lock, then pause.lock, then the event queue's lock (the
 * events are posted under pause.lock, so "paused" and "resumed" reach the
 * readers in the order they happened). No vCPU lock is ever taken under
 * pause.lock.
 */
#include <pthread.h>
#include <stdio.h>

#include "base/error.h"
#include "base/event.h"
#include "base/time.h"
#include "machine/pause.h"
#include "machine/vcpu.h"
#include "machine/vm.h"

#define REASON_NONE (-1)

static struct {
	struct vm *vm;
	pthread_mutex_t lock;   /* guards everything below (@pending and
				 * @completed are also read without it) */
	pthread_cond_t resumed; /* parked vCPUs wait on it */
	atomic_bool pending;    /* PAUSING or PAUSED: vCPUs park */
	bool paused;            /* PAUSED: every vCPU parked */
	unsigned int parked;    /* vCPU threads in pause_park() */
	int resume_reason;      /* a wake-up that came while PAUSING */
	uint64_t paused_ns;     /* when the VM became PAUSED */
	_Atomic uint64_t completed; /* pauses completed ("pauses") */
	uint64_t resumes_requested, resumes_self;
} pz = { .lock = PTHREAD_MUTEX_INITIALIZER,
	 .resumed = PTHREAD_COND_INITIALIZER,
	 .resume_reason = REASON_NONE };

/* The reason a vcpu_kick() made on this thread gives a resume. */
static __thread int thread_reason = PAUSE_REASON_OTHER;

static const char *const reason_names[] = {
	[PAUSE_REASON_OTHER] = "other",
	[PAUSE_REASON_REQUEST] = "request",
	[PAUSE_REASON_TIMER] = "timer",
	[PAUSE_REASON_INPUT] = "input",
	[PAUSE_REASON_KICK] = "kick",
};

const char *pause_reason_name(int reason)
{
	if (reason < 0 || reason >= (int)(sizeof(reason_names) /
					  sizeof(reason_names[0])))
		return "other";
	return reason_names[reason];
}

void pause_set_thread_reason(enum pause_reason reason)
{
	thread_reason = reason;
}

enum pause_reason pause_thread_reason(void)
{
	return (enum pause_reason)thread_reason;
}

/* Main thread, before any other thread starts. */
int pause_init(struct vm *vm)
{
	pz.vm = vm;
	atomic_init(&pz.pending, false); /* before any other thread starts: nothing to pair with */
	return 0;
}

/*
 * Any thread: a pause is asked and not yet ended. vCPU threads read it
 * under their own lock, and pause_request() stores it before it takes each
 * vCPU lock to nudge the vCPU: the vCPU lock orders the two, relaxed is
 * enough.
 */
bool pause_pending(void)
{
	return atomic_load_explicit(&pz.pending, memory_order_relaxed); /* pairs with the stores in pause_request / resume_locked, ordered by the vCPU lock or pause.lock */
}

/* pause.lock held: post a pause event, and wake its readers (never on a
 * vCPU's wake path: a pause or a resume is not one). */
static void post_locked(int kind, int reason, uint64_t now, uint64_t paused)
{
	event_post(&(struct vm_event){
		.kind = kind, .from = -1, .to = -1, .cpu = -1, .mono_ns = now,
		.unix_ms = mono_to_unix_ms(now), .reason = reason,
		.paused_ns = paused, .src = -1,
	});
	event_notify();
}

/* pause.lock held, PAUSED: resume, and wake the parked vCPUs. */
static void resume_locked(int reason)
{
	uint64_t now = now_ns();

	atomic_store_explicit(&pz.pending, false, memory_order_relaxed); /* pairs with pause_pending(); pause.lock and the vCPU locks order it */
	pz.paused = false;
	if (reason == PAUSE_REASON_REQUEST)
		pz.resumes_requested++;
	else
		pz.resumes_self++;
	post_locked(VM_EV_RESUMED, reason, now, now - pz.paused_ns);
	pthread_cond_broadcast(&pz.resumed);
}

/* pause.lock held, every vCPU parked: PAUSED. */
static void complete_locked(void)
{
	int reason = pz.resume_reason;

	pz.paused = true;
	pz.paused_ns = now_ns();
	atomic_store_explicit(&pz.completed, atomic_load_explicit(&pz.completed, memory_order_relaxed) + 1, memory_order_release); /* pairs with the acquire load in pause_completed: the reply follows the pause */
	post_locked(VM_EV_PAUSED, 0, pz.paused_ns, 0);
	pz.resume_reason = REASON_NONE;
	if (reason != REASON_NONE)
		resume_locked(reason); /* a wake-up came while parking */
}

/*
 * Export thread: ask for a pause. Returns the number pause_completed()
 * reaches once this pause is complete (already reached when the VM was
 * paused). The vCPUs are nudged out of KVM_RUN or their wait, outside
 * pause.lock (lock order).
 */
uint64_t pause_request(void)
{
	bool nudge = false;
	uint64_t done, want;

	pthread_mutex_lock(&pz.lock);
	if (!atomic_load_explicit(&pz.pending, memory_order_relaxed)) { /* written under pause.lock, held here */
		atomic_store_explicit(&pz.pending, true, memory_order_relaxed); /* pairs with pause_pending(): the vCPU lock taken by vcpus_nudge orders it */
		pz.resume_reason = REASON_NONE;
		if (pz.parked == pz.vm->ncpus)
			complete_locked(); /* still parked from the last one */
		else
			nudge = true;
	} else if (!pz.paused && pz.resume_reason == PAUSE_REASON_REQUEST) {
		/* pause, resume, pause while parking: the last request wins
		 * (a wake source's resume is never cancelled) */
		pz.resume_reason = REASON_NONE;
	}
	done = atomic_load_explicit(&pz.completed, memory_order_relaxed);
	want = pz.paused ? done : done + 1;
	pthread_mutex_unlock(&pz.lock);
	if (nudge)
		vcpus_nudge(pz.vm);
	return want;
}

/*
 * Any thread, the caller may hold vCPU locks (not pause.lock): a wake
 * source (or a resume request, @reason PAUSE_REASON_REQUEST) ends the
 * pause: now when PAUSED, as soon as the last vCPU parks when PAUSING.
 * Returns whether a pause was pending.
 */
bool pause_wake(enum pause_reason reason)
{
	bool was;

	pthread_mutex_lock(&pz.lock);
	was = atomic_load_explicit(&pz.pending, memory_order_relaxed); /* written under pause.lock, held here */
	if (was && pz.paused)
		resume_locked(reason);
	else if (was && pz.resume_reason == REASON_NONE)
		pz.resume_reason = reason;
	pthread_mutex_unlock(&pz.lock);
	return was;
}

/*
 * vCPU thread, holding no lock, its state already PAUSED (or WAIT_SIPI):
 * wait while the VM is paused. The last vCPU to park completes the pause.
 * Returns at once when the pause already ended, and when the VM stops.
 */
void pause_park(void)
{
	pthread_mutex_lock(&pz.lock);
	if (atomic_load_explicit(&pz.pending, memory_order_relaxed)) { /* written under pause.lock, held here */
		pz.parked++;
		if (pz.parked == pz.vm->ncpus && !pz.paused)
			complete_locked();
		while (atomic_load_explicit(&pz.pending, memory_order_relaxed) && /* written under pause.lock, held here */
		       !vm_stopping())
			pthread_cond_wait(&pz.resumed, &pz.lock);
		pz.parked--;
	}
	pthread_mutex_unlock(&pz.lock);
}

/* Main thread, after vm_stop(): parked vCPUs return. */
void pause_stop(void)
{
	pthread_mutex_lock(&pz.lock);
	pthread_cond_broadcast(&pz.resumed);
	pthread_mutex_unlock(&pz.lock);
}

/* Any thread: pauses completed so far. */
uint64_t pause_completed(void)
{
	return atomic_load_explicit(&pz.completed, memory_order_acquire); /* pairs with the release store in complete_locked */
}

/* Any thread: the pause part of a status snapshot, one consistent set
 * (taken under pause.lock). */
void pause_read_status(struct pause_status *st)
{
	pthread_mutex_lock(&pz.lock);
	st->paused = pz.paused;
	st->pauses = atomic_load_explicit(&pz.completed, memory_order_relaxed);
	st->resumes_requested = pz.resumes_requested;
	st->resumes_self = pz.resumes_self;
	pthread_mutex_unlock(&pz.lock);
}
