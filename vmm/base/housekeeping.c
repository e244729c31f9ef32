/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The housekeeping thread: ONE host timer (a timerfd) armed to the
 * earliest deadline of a min-heap of guest timers. Any thread may arm a
 * timer; it moves the host timer itself when the new deadline is earlier.
 * The thread sleeps in poll() with nothing armed: no periodic wake-ups.
 * A third fd, an eventfd, lets other threads kick it (--sysidle: the vCPU
 * that ends a full-idle period, the timekeeper's force-exit request).
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "base/error.h"
#include "base/housekeeping.h"
#include "base/rate_window.h"
#include "base/sched.h"
#include "base/time.h"

static struct {
	pthread_mutex_t lock; /* heap, armed_ns; taken after vCPU locks */
	struct hk_timer **heap;
	struct hk_timer **expired;
	uint64_t *expired_ns;
	unsigned int n, max;
	uint64_t armed_ns; /* host timer deadline, UINT64_MAX: disarmed */
	int timer_fd, stop_fd, kick_fd;
	pthread_t thread;
	bool started;
	void (*on_start)(void), (*on_kick)(void);
	/* the names of hk_timer_set_name, by slot: 0 "kick", 1 "other";
	 * filled before the thread starts */
	const char *kind_name[HK_WAKE_KINDS];
	unsigned int nkinds;
	/* housekeeping thread only: */
	_Atomic uint64_t wakeups, timer_wakeups; /* read by status snapshots */
	_Atomic uint64_t by_kind[HK_WAKE_KINDS];
	_Atomic uint32_t epoch[RATE_BUCKETS];
	_Atomic uint32_t count[RATE_BUCKETS][HK_WAKE_KINDS];
	uint64_t kicks, fired;
	atomic_int tid;
} hk = { .lock = PTHREAD_MUTEX_INITIALIZER, .armed_ns = UINT64_MAX,
	 .timer_fd = -1, .stop_fd = -1, .kick_fd = -1,
	 .kind_name = { "kick", "other" }, .nkinds = 2 };

#define HK_KIND_KICK 0
#define HK_KIND_OTHER 1

void hk_timer_set_name(struct hk_timer *t, const char *name)
{
	unsigned int k;

	for (k = 0; k < hk.nkinds; k++)
		if (!strcmp(hk.kind_name[k], name))
			break;
	if (k == hk.nkinds && !hk.started && k < HK_WAKE_KINDS)
		hk.kind_name[hk.nkinds++] = name;
	t->kind = k < hk.nkinds ? k : HK_KIND_OTHER;
}

/* Housekeeping thread: one wake-up, put down to slot @k. */
static void hk_count_wakeup(unsigned int k, uint64_t now)
{
	relaxed_inc64(&hk.by_kind[k]);
	rate_window_add(hk.epoch, &hk.count[0][0], HK_WAKE_KINDS, k, now);
}

unsigned int housekeeping_wakeups_by(struct hk_wake_count *out,
				     unsigned int max, uint64_t now)
{
	unsigned int n = 0;

	for (unsigned int k = 0; k < hk.nkinds && n < max; k++) {
		/* relaxed: the housekeeping thread's counters, a snapshot */
		uint64_t total = atomic_load_explicit(&hk.by_kind[k],
						      memory_order_relaxed);

		if (!total)
			continue;
		out[n].name = hk.kind_name[k];
		out[n].total = total;
		out[n].recent = rate_window_recent(hk.epoch, &hk.count[0][0],
						   HK_WAKE_KINDS, k, now,
						   &out[n].span_ns);
		n++;
	}
	return n;
}

static void heap_swap(unsigned int a, unsigned int b)
{
	struct hk_timer *t = hk.heap[a];

	hk.heap[a] = hk.heap[b];
	hk.heap[b] = t;
	hk.heap[a]->heap_idx = a;
	hk.heap[b]->heap_idx = b;
}

static void heap_up(unsigned int i)
{
	while (i && hk.heap[(i - 1) / 2]->deadline_ns > hk.heap[i]->deadline_ns) {
		heap_swap(i, (i - 1) / 2);
		i = (i - 1) / 2;
	}
}

static void heap_down(unsigned int i)
{
	for (;;) {
		unsigned int l = 2 * i + 1, r = l + 1, m = i;

		if (l < hk.n && hk.heap[l]->deadline_ns < hk.heap[m]->deadline_ns)
			m = l;
		if (r < hk.n && hk.heap[r]->deadline_ns < hk.heap[m]->deadline_ns)
			m = r;
		if (m == i)
			return;
		heap_swap(i, m);
		i = m;
	}
}

static void heap_remove(struct hk_timer *t)
{
	unsigned int i = t->heap_idx;

	t->heap_idx = HK_NOT_QUEUED;
	if (i != --hk.n) {
		hk.heap[i] = hk.heap[hk.n];
		hk.heap[i]->heap_idx = i;
		heap_down(i);
		heap_up(i);
	}
}

/* Caller holds hk.lock. Sets the host timer to @ns (UINT64_MAX: off). */
static void host_timer_set(uint64_t ns)
{
	struct itimerspec its = { 0 };

	if (ns != UINT64_MAX) {
		its.it_value.tv_sec = (time_t)(ns / 1000000000ull);
		its.it_value.tv_nsec = (long)(ns % 1000000000ull);
	}
	hk.armed_ns = ns;
	timerfd_settime(hk.timer_fd, TFD_TIMER_ABSTIME, &its, NULL);
}

void hk_timer_init(struct hk_timer *t, hk_fire_fn fire)
{
	t->deadline_ns = 0;
	t->heap_idx = HK_NOT_QUEUED;
	t->fire = fire;
	t->kind = HK_KIND_OTHER;
}

/* hk.lock held: @t (re)queued at @deadline_ns; the host timer moves when
 * that is earlier. */
static void timer_arm_locked(struct hk_timer *t, uint64_t deadline_ns)
{
	if (t->heap_idx == HK_NOT_QUEUED && hk.n < hk.max) {
		t->heap_idx = hk.n;
		hk.heap[hk.n++] = t;
	}
	if (t->heap_idx != HK_NOT_QUEUED) {
		t->deadline_ns = deadline_ns;
		heap_down(t->heap_idx);
		heap_up(t->heap_idx);
		if (deadline_ns < hk.armed_ns && hk.timer_fd >= 0)
			host_timer_set(deadline_ns);
	}
}

/* Caller holds hk.lock: the host timer follows the earliest deadline
 * even when that moved later, so no wake-up comes for a deadline that is
 * gone (one timerfd_settime). */
static void host_timer_follow(void)
{
	uint64_t first = hk.n ? hk.heap[0]->deadline_ns : UINT64_MAX;

	if (first != hk.armed_ns && hk.timer_fd >= 0)
		host_timer_set(first);
}

/* Any thread; @t's owner serialises arm/cancel of @t (its vCPU lock).
 * _quiet: the host timer also follows (host_timer_follow). */
void hk_timer_arm(struct hk_timer *t, uint64_t deadline_ns)
{
	pthread_mutex_lock(&hk.lock);
	timer_arm_locked(t, deadline_ns);
	pthread_mutex_unlock(&hk.lock);
}

void hk_timer_arm_quiet(struct hk_timer *t, uint64_t deadline_ns)
{
	pthread_mutex_lock(&hk.lock);
	timer_arm_locked(t, deadline_ns);
	host_timer_follow();
	pthread_mutex_unlock(&hk.lock);
}

/* A cancelled timer that was the earliest leaves the host timer armed:
 * that one wake-up finds nothing due and re-arms to the next (cheaper
 * than a timerfd_settime when a new deadline follows at once, as on a
 * guest's re-arm). _quiet: the host timer follows, for a timer that
 * stays off. */
void hk_timer_cancel(struct hk_timer *t)
{
	pthread_mutex_lock(&hk.lock);
	if (t->heap_idx != HK_NOT_QUEUED)
		heap_remove(t);
	pthread_mutex_unlock(&hk.lock);
}

void hk_timer_cancel_quiet(struct hk_timer *t)
{
	pthread_mutex_lock(&hk.lock);
	if (t->heap_idx != HK_NOT_QUEUED)
		heap_remove(t);
	host_timer_follow();
	pthread_mutex_unlock(&hk.lock);
}

static void *housekeeping_thread(void *arg)
{
	struct pollfd fds[3] = {
		{ .fd = hk.timer_fd, .events = POLLIN },
		{ .fd = hk.stop_fd, .events = POLLIN },
		{ .fd = hk.kick_fd, .events = POLLIN },
	};
	uint64_t buf, now;
	unsigned int nexp;

	(void)arg;
	pthread_setname_np(pthread_self(), "vmm-housekeep");
	/* Guest timers are due at exact times: no timer slack (50 us by
	 * default) on the one host timer that serves them all. */
	prctl(PR_SET_TIMERSLACK, 1ul, 0ul, 0ul, 0ul);
	sched_slice_apply(); /* a kick or a timer it serves preempts sooner */
	/* relaxed: read by status snapshots only. */
	atomic_store_explicit(&hk.tid, (int)gettid(), memory_order_relaxed);
	if (hk.on_start)
		hk.on_start();
	for (;;) {
		if (poll(fds, 3, -1) < 0 && errno != EINTR)
			break;
		if (fds[1].revents)
			break;
		/* relaxed: one writer; status snapshots read it. */
		atomic_store_explicit(&hk.wakeups,
			atomic_load_explicit(&hk.wakeups,
					     memory_order_relaxed) + 1,
			memory_order_relaxed);
		if (fds[2].revents) {
			hk.kicks++;
			if (!fds[0].revents)
				hk_count_wakeup(HK_KIND_KICK, now_ns());
			if (read(hk.kick_fd, &buf, sizeof(buf)) < 0 &&
			    errno != EAGAIN)
				break;
			if (hk.on_kick)
				hk.on_kick();
		}
		if (!fds[0].revents)
			continue;
		/* relaxed: as hk.wakeups above. */
		atomic_store_explicit(&hk.timer_wakeups,
			atomic_load_explicit(&hk.timer_wakeups,
					     memory_order_relaxed) + 1,
			memory_order_relaxed);
		if (read(hk.timer_fd, &buf, sizeof(buf)) < 0 && errno != EAGAIN)
			break;
		now = now_ns();
		pthread_mutex_lock(&hk.lock);
		hk.armed_ns = UINT64_MAX; /* the host timer fired: disarmed */
		nexp = 0;
		while (hk.n && hk.heap[0]->deadline_ns <= now) {
			hk.expired_ns[nexp] = hk.heap[0]->deadline_ns;
			hk.expired[nexp++] = hk.heap[0];
			heap_remove(hk.heap[0]);
		}
		pthread_mutex_unlock(&hk.lock);
		/* the wake-up is the earliest due timer's (none: a timer
		 * cancelled quietly after the host timer was set) */
		hk_count_wakeup(nexp ? hk.expired[0]->kind : HK_KIND_OTHER, now);
		/* Without hk.lock: a callback takes its vCPU lock (the lock
		 * order is vCPU, then hk) and may re-arm its timer. */
		for (unsigned int i = 0; i < nexp; i++)
			hk.expired[i]->fire(hk.expired[i], hk.expired_ns[i]);
		hk.fired += nexp;
		pthread_mutex_lock(&hk.lock);
		if (hk.n && hk.heap[0]->deadline_ns < hk.armed_ns)
			host_timer_set(hk.heap[0]->deadline_ns);
		pthread_mutex_unlock(&hk.lock);
	}
	return NULL;
}

int housekeeping_start(unsigned int max_timers)
{
	hk.heap = calloc(max_timers, sizeof(*hk.heap));
	hk.expired = calloc(max_timers, sizeof(*hk.expired));
	hk.expired_ns = calloc(max_timers, sizeof(*hk.expired_ns));
	hk.timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	hk.stop_fd = eventfd(0, EFD_CLOEXEC);
	hk.kick_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (!hk.heap || !hk.expired || !hk.expired_ns || hk.timer_fd < 0 ||
	    hk.stop_fd < 0 || hk.kick_fd < 0)
		return vmm_fail(VMM_EXIT_KVM, "housekeeping setup: %s",
				strerror(errno));
	pthread_mutex_lock(&hk.lock);
	hk.max = max_timers;
	pthread_mutex_unlock(&hk.lock);
	if (pthread_create(&hk.thread, NULL, housekeeping_thread, NULL))
		return vmm_fail(VMM_EXIT_KVM, "cannot start the housekeeping "
				"thread");
	hk.started = true;
	return 0;
}

void housekeeping_set_hooks(void (*on_start)(void), void (*on_kick)(void))
{
	hk.on_start = on_start;
	hk.on_kick = on_kick;
}

void housekeeping_kick(void)
{
	uint64_t one = 1;

	/* The counter saturating (EAGAIN) still leaves it readable. */
	if (hk.kick_fd >= 0 && write(hk.kick_fd, &one, sizeof(one)) < 0 &&
	    errno != EAGAIN)
		vmm_warn("cannot kick the housekeeping thread");
}

void housekeeping_stop(void)
{
	uint64_t one = 1;

	if (!hk.started)
		return;
	if (write(hk.stop_fd, &one, sizeof(one)) < 0)
		vmm_warn("cannot stop the housekeeping thread");
	pthread_join(hk.thread, NULL);
	hk.started = false;
}

/* Any thread. */
int housekeeping_tid(void)
{
	return atomic_load_explicit(&hk.tid, memory_order_relaxed);
}

/* Any thread (the two counters below), or after housekeeping_stop(). */
uint64_t housekeeping_wakeups(void)
{
	return atomic_load_explicit(&hk.wakeups, memory_order_relaxed);
}

uint64_t housekeeping_timer_wakeups(void)
{
	return atomic_load_explicit(&hk.timer_wakeups, memory_order_relaxed);
}

uint64_t housekeeping_kicks(void)
{
	return hk.kicks;
}

uint64_t housekeeping_timers_fired(void)
{
	return hk.fired;
}
