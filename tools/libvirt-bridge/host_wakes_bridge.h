/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The bridge's hooks for the host's view of what wakes each domain
 * (host_wakes.h): sampled after each scan (at most every
 * HOST_WAKES_PERIOD_MS per domain), in the --metrics-file (its own
 * families, the per-domain labels vm and uuid) and in --wakes-file (a JSON
 * document, each domain's "host_wakeups" object, "source":"host").
 */
#ifndef SYSIDLE_LIBVIRT_HOST_WAKES_BRIDGE_H
#define SYSIDLE_LIBVIRT_HOST_WAKES_BRIDGE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

struct bridge;

/* After a scan, at @now_ns (monotonic, never going back): each watched
 * domain of @b sampled when due; its QEMU process is the host source's,
 * else found by its uuid (tried again every ATTACH_RETRY_MS). Nothing
 * is read without --metrics-file or --wakes-file. The main thread only. */
void host_wakes_scan(struct bridge *b, uint64_t now_ns);
/* The families of each watched domain's figures into @f (the metrics
 * file being written). The caller guarantees @f is open for writing. */
void host_wakes_metrics(const struct bridge *b, FILE *f);
/* --wakes-file: written whole (a dot file renamed over it) after a scan
 * that took a sample; @final: removed (the bridge stops: nothing left
 * claiming figures no longer read). A failure is warned once until it
 * works. The main thread only. */
void host_wakes_write(const struct bridge *b, bool final);

#endif
