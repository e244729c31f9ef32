/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The VM's recent idle state changes (history.c), kept by the export
 * thread from the event queue, answered by the control socket's "history"
 * request. Export thread only.
 */
#ifndef VMM_EXPORT_HISTORY_H
#define VMM_EXPORT_HISTORY_H

#include <stdint.h>

#include <json-c/json.h>

#include "base/event.h"
#include "base/time.h"
#include "export/export.h"

#define HISTORY_MAX 4096     /* changes kept (about 100 KiB) */
#define HISTORY_SPAN_S 3600  /* the longest "since_s" answered */

/* Export thread, before the first history_add: an empty ring. */
void history_reset(void);
/* Export thread: keep @ev if it is a state change (the oldest kept one
 * goes when the ring is full). */
void history_add(const struct vm_event *ev);
/* Export thread: the "history" reply's members for the last @since_s
 * seconds (1..HISTORY_SPAN_S, not checked here beyond the arithmetic)
 * as of @now (CLOCK_MONOTONIC), with @st's state, sysidle and uptime
 * (a fresh vm_status_read): since_s, from_unix_ms, now_unix_ms,
 * start_unix_ms, sysidle, state, capacity, changes[], and
 * truncated_before_unix_ms when changes within the span were lost.
 * NULL: out of memory. */
struct json_object *history_json(const struct vm_status *st,
				 unsigned int since_s, uint64_t now);

#endif
