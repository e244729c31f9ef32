/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The control socket's JSON objects (control_json.c), built with json-c;
 * the protocol is in vmm/export/README.md. Export thread only.
 */
#ifndef VMM_EXPORT_CONTROL_H
#define VMM_EXPORT_CONTROL_H

#include <json-c/json.h>

#include "export/export.h"

/* The "vm" object of a status reply; @now: CLOCK_MONOTONIC. */
struct json_object *control_status_json(const struct vm_status *st,
					uint64_t now);
/* {"event":"state",...} for a watcher; "paused" / "resumed" for a pause
 * event. */
struct json_object *control_event_json(const struct vm_event *ev);
/* control_wake.c: the "wake_sources" member of the status object: what
 * ended full idle, by source; each vCPU's wake-ups from HLT by source,
 * in all and in the last minute, busiest first. NULL: out of memory. */
struct json_object *control_wake_json(const struct vm_status *st);
/* {"event":"dropped","count":N}. */
struct json_object *control_dropped_json(uint64_t count);

#endif
