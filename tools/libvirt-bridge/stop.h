/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The bridge's stop, bounded whatever libvirt does. SIGTERM and SIGINT are
 * read by a thread of their own, so that a stop ends even while the main
 * thread waits on a libvirt call that never returns (a libvirtd that
 * hangs). The first signal asks for a clean stop: stop_requested() turns
 * true and stop_fd() readable. If the clean stop has not ended
 * (stop_finish()) within the grace given to stop_start(), or at a second
 * signal, the process exits at once with STOP_FORCED_STATUS, saying on
 * stderr what the main thread was doing (stop_phase()), the metrics file
 * then saying sysidle_libvirt_up 0 alone; the metadata left behind stops
 * counting when its lease runs out. Model:
 * tests/model/bridge_stop.pml (with events.c's flags).
 */
#ifndef SYSIDLE_LIBVIRT_STOP_H
#define SYSIDLE_LIBVIRT_STOP_H

#include <stdbool.h>
#include <stdint.h>

#define STOP_FORCED_STATUS 3

/* Blocks SIGTERM and SIGINT in the calling thread (and so in every thread
 * it starts after) and starts the thread that reads them. The caller
 * guarantees it runs before any other thread exists. A forced exit leaves
 * @metrics_file (NULL: none; it must outlive the process) saying the
 * bridge is down, and removes @wakes_file (NULL: none), no longer kept
 * current. 0, or -1 with errno set. */
int stop_start(uint64_t grace_ns, const char *metrics_file,
	       const char *wakes_file);

/* The stop signal's number once one came, else 0. Any thread. */
int stop_requested(void);

/* A descriptor that becomes readable, and stays so, once a stop was
 * asked for: to be polled, never read. -1 before stop_start(). */
int stop_fd(void);

/* What the main thread is doing now, for the forced exit's message:
 * @what is a string that lives as long as the process (a literal). */
void stop_phase(const char *what);

/* The main thread's clean stop is done: the signal thread ends (joined
 * here) and a forced exit can no longer happen. */
void stop_finish(void);

#endif
