/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The one event queue: what happens to the VM that the outside world
 * hears of (an idle state change, a pause, a resume), in the order it
 * happened. One producer API for every layer; any number of readers
 * (at most EVENT_READERS), each with its own cursor.
 *
 * A bounded ring: posting never blocks and never fails. A reader that
 * falls more than EVENT_QUEUE events behind loses the oldest ones and
 * counts them (event_read); nobody else is slowed down by it.
 *
 * Posting does not wake the readers (so that a vCPU thread can post on its
 * wake path at the cost of a mutex): event_notify() does, from whoever
 * owes it (the housekeeping thread after its work, or a poster that is
 * off the wake path).
 */
#ifndef VMM_BASE_EVENT_H
#define VMM_BASE_EVENT_H

#include <stdint.h>

#define EVENT_QUEUE 1024
#define EVENT_READERS 4

enum vm_event_kind {
	VM_EV_STATE,   /* an idle state change (--sysidle) */
	VM_EV_PAUSED,  /* every vCPU parked by a pause */
	VM_EV_RESUMED, /* the pause ended */
};

struct vm_event {
	int kind;             /* enum vm_event_kind */
	int from, to;         /* VM_EV_STATE: enum sysidle_state */
	int cpu;              /* the vCPU whose exit made it, -1: none */
	uint64_t mono_ns;     /* when (CLOCK_MONOTONIC) */
	uint64_t unix_ms;     /* when (wall clock) */
	uint64_t full_idle_ns; /* leaving FULL_NOTED: how long it lasted */
	int src;              /* ... what ended it (the machine's enum
			       * wake_source), -1: not known */
	uint32_t detail;      /* ... and its detail */
	int reason;           /* VM_EV_RESUMED: enum pause_reason */
	uint64_t paused_ns;   /* VM_EV_RESUMED: how long it was paused */
};

/* Any thread, any lock but the queue's own held: append @ev. */
void event_post(const struct vm_event *ev);
/* Any thread: wake every reader that has events it has not read. */
void event_notify(void);

struct event_reader {
	uint64_t next; /* the sequence number of the next event to read */
	uint64_t lost; /* events it fell too far behind to read (lock) */
	int fd;        /* eventfd, readable after event_notify(): poll it */
	int slot;
};

/* Before the events it must see are posted: a reader from the current
 * count on. 0, or -1 with errno set. */
int event_reader_open(struct event_reader *r);
void event_reader_close(struct event_reader *r);
/* The reader's thread: up to @max events in order (fewer than @max: no
 * more for now); clears the fd. */
unsigned int event_read(struct event_reader *r, struct vm_event *out,
			unsigned int max);
/* Any thread: how many events @r lost (guarded by the queue's lock). */
uint64_t event_reader_lost(const struct event_reader *r);

#endif
