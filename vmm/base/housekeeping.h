/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The housekeeping thread: serves every guest timer with one host timer
 * (a timerfd) armed to the earliest deadline of a min-heap.
 */
#ifndef VMM_HOUSEKEEPING_H
#define VMM_HOUSEKEEPING_H

#include <stdint.h>

#define HK_NOT_QUEUED (~0u)

struct hk_timer;
/* Called on the housekeeping thread, without any housekeeping lock held,
 * for a timer whose @deadline_ns has passed. The timer may have been
 * re-armed or cancelled meanwhile: the owner checks @deadline_ns against
 * its own record. */
typedef void (*hk_fire_fn)(struct hk_timer *t, uint64_t deadline_ns);

struct hk_timer {
	uint64_t deadline_ns; /* guarded by the housekeeping lock */
	unsigned int heap_idx;
	hk_fire_fn fire;
	unsigned int kind; /* its name's slot (hk_timer_set_name), 0: none */
};

void hk_timer_init(struct hk_timer *t, hk_fire_fn fire);
/* Main thread, after hk_timer_init and before housekeeping_start: what
 * the timer is for, a string as long-lived as the process; the wake-ups
 * of the housekeeping thread are counted by it (housekeeping_wakeups_by).
 * At most HK_WAKE_KINDS - 2 names; more are counted as "other". */
void hk_timer_set_name(struct hk_timer *t, const char *name);
void hk_timer_arm(struct hk_timer *t, uint64_t deadline_ns);
void hk_timer_cancel(struct hk_timer *t);
/* The same, and the host timer is moved off a deadline that is gone or
 * later now (a syscall instead of an idle wake-up): for timers that stay
 * off or move later for long. */
void hk_timer_arm_quiet(struct hk_timer *t, uint64_t deadline_ns);
void hk_timer_cancel_quiet(struct hk_timer *t);

/* Hooks run on the housekeeping thread: @on_start once before its loop,
 * @on_kick after each housekeeping_kick() (several kicks may be seen as
 * one). Set before housekeeping_start(). */
void housekeeping_set_hooks(void (*on_start)(void), void (*on_kick)(void));
int housekeeping_start(unsigned int max_timers);
void housekeeping_stop(void);
/* Any thread, any lock held: wake the housekeeping thread (an eventfd
 * write) to run its on_kick hook. */
void housekeeping_kick(void);
int housekeeping_tid(void);                /* 0: not started */
uint64_t housekeeping_wakeups(void);       /* all poll() returns */
uint64_t housekeeping_timer_wakeups(void); /* ... with the timerfd due */
uint64_t housekeeping_kicks(void);         /* ... with a kick */
uint64_t housekeeping_timers_fired(void);

/* The housekeeping thread's wake-ups by what woke it: "kick"
 * (housekeeping_kick), the name of the earliest timer due at a timer
 * wake-up, "other" (an unnamed timer). In all and in the last minute
 * (base/rate_window.h, over @span_ns). */
#define HK_WAKE_KINDS 12
struct hk_wake_count {
	const char *name;
	uint64_t total, recent, span_ns;
};
/* Any thread: the kinds seen at least once, up to @max; how many. */
unsigned int housekeeping_wakeups_by(struct hk_wake_count *out,
				     unsigned int max, uint64_t now);

#endif
