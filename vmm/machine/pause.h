/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Pausing the VM (pause.c): every vCPU thread parks out of KVM_RUN until
 * the VM resumes, by request or by itself when a wake source posts an
 * event to any vCPU. Pauses and resumes are posted to the event queue.
 */
#ifndef VMM_MACHINE_PAUSE_H
#define VMM_MACHINE_PAUSE_H

#include <stdbool.h>
#include <stdint.h>

struct vm;

/* A resume's reason, as the watch events and the counters name it. */
enum pause_reason {
	PAUSE_REASON_OTHER,   /* INIT, SIPI, NMI, an IPI, anything else */
	PAUSE_REASON_REQUEST, /* the "resume" request */
	PAUSE_REASON_TIMER,   /* a LAPIC timer or a pv tick */
	PAUSE_REASON_INPUT,   /* serial input raised its IRQ */
	PAUSE_REASON_KICK,    /* the "kick" request */
};

int pause_init(struct vm *vm);
bool pause_pending(void);
uint64_t pause_request(void);
bool pause_wake(enum pause_reason reason);
void pause_park(void);
void pause_stop(void);
uint64_t pause_completed(void);
const char *pause_reason_name(int reason);
/* The reason vcpu_kick() gives the events this thread posts (the serial
 * input thread: input; default other). */
void pause_set_thread_reason(enum pause_reason reason);
enum pause_reason pause_thread_reason(void);

/* Any thread: one consistent set of the pause counters. */
struct pause_status {
	bool paused;               /* every vCPU parked by "pause" */
	uint64_t pauses;           /* pauses completed */
	uint64_t resumes_requested, resumes_self; /* by "resume" / a wake */
};
void pause_read_status(struct pause_status *st);

#endif
