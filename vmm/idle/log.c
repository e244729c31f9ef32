/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * --sysidle-log: the log lines are queued under idle.lock by whichever
 * thread makes the change (a vCPU thread's exit may end full idle) and
 * written out by the housekeeping thread (idle_flush), so that no vCPU
 * thread ever does I/O or wakes another thread for them on its wake path.
 * Log lines: "MS.mmm what", MS since the VM started.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <string.h>

#include "base/event.h"
#include "idle/internal.h"

void idle_log_locked(uint64_t now, const char *fmt, ...)
{
	uint64_t us = now > idle.t0 ? (now - idle.t0) / 1000 : 0;
	size_t room = sizeof(idle.logq) - idle.logq_len;
	va_list ap;
	int n, m;

	if (!idle.log)
		return;
	n = snprintf(idle.logq + idle.logq_len, room, "%" PRIu64 ".%03"
		     PRIu64 " ", us / 1000, us % 1000);
	va_start(ap, fmt);
	m = n >= 0 && (size_t)n < room ?
	    vsnprintf(idle.logq + idle.logq_len + n, room - (size_t)n, fmt,
		      ap) : -1;
	va_end(ap);
	if (m < 0 || (size_t)n + (size_t)m + 1 >= room) {
		idle.logq[idle.logq_len] = '\0';
		idle.log_dropped++;
		return;
	}
	idle.logq_len += (size_t)n + (size_t)m;
	idle.logq[idle.logq_len++] = '\n';
}

/* Housekeeping thread, or any thread once it has stopped: write the queued
 * log lines, then wake the event queue's readers for the changes posted
 * meanwhile (posting does not wake them: see event.h). */
void idle_flush(void)
{
	static char buf[sizeof(idle.logq)];
	size_t len;
	uint64_t dropped;

	if (!idle.enabled)
		return;
	pthread_mutex_lock(&idle.lock);
	len = idle.logq_len;
	memcpy(buf, idle.logq, len);
	idle.logq_len = 0;
	dropped = idle.log_dropped;
	idle.log_dropped = 0;
	pthread_mutex_unlock(&idle.lock);
	if (idle.log && len) {
		fwrite(buf, 1, len, idle.log);
		if (dropped)
			fprintf(idle.log, "(%" PRIu64 " log lines dropped)\n",
				dropped);
		fflush(idle.log);
	}
	event_notify();
}
