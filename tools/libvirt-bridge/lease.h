/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The lease on what the bridge publishes: every urn:sysidle:1 element it
 * writes names its writer (host name, pid, the pid's start time in clock
 * ticks after boot, /proc/PID/stat field 22) and holds until
 * valid_until_unix_ms, --lease seconds after it was written. A reader
 * ignores a state whose lease has run out or, on the same host, whose
 * writer process is gone; the bridge renews each lease when a third of it
 * is left, so a bridge that died stops counting within one lease. With
 * --once the writer is gone as soon as it wrote: its pid is written as 0
 * (and its start as 0), and only the lease counts.
 */
#ifndef SYSIDLE_LIBVIRT_LEASE_H
#define SYSIDLE_LIBVIRT_LEASE_H

#include <stdbool.h>
#include <stdint.h>

#include "sysidle_doc.h"

struct options;

/* Once, at start, before any other lease_*: who this writer is (@o:
 * --once). */
void lease_init(const struct options *o);
/* @doc's writer and valid_until (@now_ms + @o's --lease). */
void lease_fill(const struct options *o, struct sysidle_doc *doc,
		uint64_t now_ms);
/* Is a lease valid until @until_ms due for renewal at @now_ms (a third of
 * @o's --lease left)? */
bool lease_due(const struct options *o, uint64_t until_ms, uint64_t now_ms);

#endif
