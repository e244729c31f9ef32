/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * --sysidle-log: the log lines are queued under idle.lock by whichever
 * thread makes the change (a vCPU thread's exit may end full idle) and
 * written out by the housekeeping thread (idle_flush), so that no vCPU
 * thread ever does I/O or wakes another thread for them on its wake path.
 * Log lines: "MS.mmm what", MS since the VM started.
 *
 * The file is non-blocking (stderr, "-", through the VMM's own
 * non-blocking description of it, vmm_stderr_fd()): a line it does not take at once, like one the queue
 * has no room for, is dropped and counted, so that a FIFO whose reader
 * stalls costs log lines, never the housekeeping thread or the stop. The
 * next line written after a loss says how many were lost; the total goes
 * to --stats-json and to stderr at exit. A write that fails with an error
 * (ENOSPC, EIO, EROFS...) is warned once with its cause, each next flush
 * tries again, and the first write that works is warned too ("written
 * again after N failed writes"); the failures are counted
 * (idle_log_write_failures: the metrics file and --stats-json).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <string.h>

#include "base/error.h"
#include "base/event.h"
#include "base/file.h"
#include "idle/internal.h"

void idle_log_locked(uint64_t now, const char *fmt, ...)
{
	struct idle_layer *idle = idle_layer();
	uint64_t us = now > idle->t0 ? (now - idle->t0) / 1000 : 0;
	size_t room = sizeof(idle->logq) - idle->logq_len;
	va_list ap;
	int n, m;

	if (idle->log_fd < 0)
		return;
	n = snprintf(idle->logq + idle->logq_len, room, "%" PRIu64 ".%03"
		     PRIu64 " ", us / 1000, us % 1000);
	va_start(ap, fmt);
	m = n >= 0 && (size_t)n < room ?
	    vsnprintf(idle->logq + idle->logq_len + n, room - (size_t)n, fmt,
		      ap) : -1;
	va_end(ap);
	if (m < 0 || (size_t)n + (size_t)m + 1 >= room) {
		idle->logq[idle->logq_len] = '\0';
		idle->log_dropped++;
		return;
	}
	idle->logq_len += (size_t)n + (size_t)m;
	idle->logq[idle->logq_len++] = '\n';
}

/* idle_flush(): write the whole line @line of @len bytes (newline
 * included) or nothing of it, without waiting. A line is far below
 * PIPE_BUF: a pipe takes it whole or not at all. */
static bool log_write_line(const char *line, size_t len)
{
	struct idle_layer *idle = idle_layer();
	size_t n = output_write(idle->log_fd, line, len, 0);

	/* Partly written (a regular file's write error): the rest is
	 * dropped, and the file has a cut line, as after a crash. */
	if (n == len) {
		if (idle->log_failed_run)
			vmm_warn("--sysidle-log: written again after %" PRIu64
				 " failed writes", idle->log_failed_run);
		idle->log_failed_run = 0;
		return true;
	}
	/* A reader that does not keep up (ETIMEDOUT: it took nothing at
	 * once) costs the line, counted; an error is also reported, once
	 * until a write works again. */
	if (errno != ETIMEDOUT) {
		if (!idle->log_failed_run)
			vmm_warn("--sysidle-log: cannot write: %s (its lines "
				 "are dropped and counted until a write works "
				 "again)", strerror(errno));
		idle->log_failed_run++;
		stat_inc(&idle->log_write_failures);
	}
	return false;
}

/* idle_flush(): write the lines of @buf (@len bytes), the note of earlier
 * losses first; count what is not taken. */
static void log_write(const char *buf, size_t len)
{
	struct idle_layer *idle = idle_layer();
	char note[64];
	const char *nl;
	size_t l;
	int n;

	if (idle->log_unnoted) {
		n = snprintf(note, sizeof(note), "(%" PRIu64 " log lines "
			     "dropped)\n", idle->log_unnoted);
		if (log_write_line(note, (size_t)n))
			idle->log_unnoted = 0;
	}
	while (len) {
		nl = memchr(buf, '\n', len);
		l = nl ? (size_t)(nl - buf) + 1 : len;
		/* Once a loss is not yet noted, the lines after it wait for
		 * the note: dropped too, so that it comes before them. */
		if (idle->log_unnoted || !log_write_line(buf, l)) {
			idle->log_unnoted++;
			idle->log_dropped_total++;
		}
		buf += l;
		len -= l;
	}
}

/* Housekeeping thread, or any thread once it has stopped (one at a time):
 * write the queued log lines, then wake the event queue's readers for the
 * changes posted meanwhile (posting does not wake them: see event.h). */
void idle_flush(void)
{
	struct idle_layer *idle = idle_layer();
	static char buf[sizeof(idle->logq)];
	size_t len;
	uint64_t dropped;

	if (!idle->enabled)
		return;
	pthread_mutex_lock(&idle->lock);
	idle_emit_pending_locked();
	len = idle->logq_len;
	memcpy(buf, idle->logq, len);
	idle->logq_len = 0;
	dropped = idle->log_dropped;
	idle->log_dropped = 0;
	pthread_mutex_unlock(&idle->lock);
	idle->log_unnoted += dropped;
	idle->log_dropped_total += dropped;
	if (idle->log_fd >= 0 && (len || idle->log_unnoted))
		log_write(buf, len);
	event_notify();
}

/* Any thread: see idle.h. */
uint64_t idle_log_write_failures(void)
{
	return stat_read(&idle_layer()->log_write_failures);
}
