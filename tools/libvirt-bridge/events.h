/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * libvirt's domain lifecycle events, so that the list of active domains
 * is asked for only when it changed (and every EVENTS_RELIST_MS, in case
 * an event was lost), not at every scan: the scans of the kvm and proc
 * sources then make no libvirt call at all. libvirt's default event loop
 * runs on a thread of its own (events_start, before the first connection;
 * events_stop at the end); its callbacks only mark the list stale.
 */
#ifndef SYSIDLE_LIBVIRT_EVENTS_H
#define SYSIDLE_LIBVIRT_EVENTS_H

#include <stdbool.h>
#include <stdint.h>

#include <libvirt/libvirt.h>

#define EVENTS_RELIST_MS 10000

/* Register libvirt's default event loop and start its thread. 0, or -1
 * (said; the list is then asked for at every scan). */
int events_start(void);
/* End the loop thread (after events_unwatch, before the last connection
 * is closed). */
void events_stop(void);
/* Follow @conn's domain lifecycle events (a new connection: the list is
 * stale). false when it cannot (the list is then asked for at every
 * scan; said once). */
bool events_watch(virConnectPtr conn);
/* Before closing @conn. */
void events_unwatch(virConnectPtr conn);
/* Must the list be asked for again at @now_ns (monotonic)? Takes the
 * stale mark. */
bool events_relist_due(uint64_t now_ns);

#endif
