/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * --metrics-file: the bridge's own metrics and each watched domain's idle
 * state, in the Prometheus text format (the same sysidle_vm_* families as
 * the VMM's --metrics-file, labelled vm and uuid: the libvirt domain's
 * name and uuid). Written whole to a dot file beside FILE and renamed over
 * it: after a scan that changed a domain's state, else at most every
 * METRICS_PERIOD_MS; never by a timer of its own.
 */
#ifndef SYSIDLE_LIBVIRT_METRICS_H
#define SYSIDLE_LIBVIRT_METRICS_H

#include <stdbool.h>
#include <stdint.h>

struct bridge;

#define METRICS_PERIOD_MS 10000

/* A domain's state changed, or it came or went. */
void metrics_changed(void);
/* A failure: a scan, a metadata change, libvirt's vCPU statistics. */
void metrics_error(void);
/* One scan done, in @ns; the interval now @interval_ms. */
void metrics_scan(uint64_t ns, uint64_t interval_ms);
/* After a scan: write @b's --metrics-file, its domains' states, if due
 * (or @final: the last one, with sysidle_libvirt_up 0). A failure (ENOSPC,
 * EIO, EROFS...) is warned once with its cause, counted
 * (sysidle_libvirt_file_write_failures_total), tried again after each
 * scan until it works, and that is said once; no temporary file is left.
 * A @final that cannot be written removes the file. The main thread
 * only. */
void metrics_write(const struct bridge *b, bool final);
/* The forced exit's @metrics_file (NULL: none; stop.c: the signal
 * thread, the main thread anywhere): sysidle_libvirt_up 0 alone, so
 * that nothing in it is left claiming a state no longer followed; when
 * that cannot be written, the file is removed. write(2), rename(2) and
 * unlink(2) only: no stdio, no lock the main thread may hold, no fsync
 * that may block. */
void metrics_write_down(const char *metrics_file);

#endif
