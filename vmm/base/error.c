/* SPDX-License-Identifier: GPL-2.0-only */
/* The one error pattern and the VM's stop (error.h). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/error.h"

static atomic_int stop_status = -1;
static atomic_bool fail_reported;
static int stop_fd = -1; /* eventfd: the VM has stopped */

/*
 * The VMM's own lines on stderr (vmm_fail, vmm_warn) never block: a
 * stderr nobody reads (2>&1 into a paused pager, a stuck log pipe) costs
 * lines, counted, never a vCPU or the stop. A pipe, FIFO or terminal is
 * written through a file description of our own opened O_NONBLOCK (the
 * shell's keeps its flags); a socket with MSG_DONTWAIT; a regular file as
 * it is. A line is one write() of at most VMM_LINE_MAX bytes (< PIPE_BUF:
 * a pipe takes it whole or not at all).
 */
#define VMM_LINE_MAX 1024
static struct {
	pthread_mutex_t lock; /* one line at a time, whole */
	int fd;               /* where lines go: 2, or our own description */
	bool socket;          /* send(MSG_DONTWAIT) */
	uint64_t dropped;     /* under lock */
} err_out = { PTHREAD_MUTEX_INITIALIZER, STDERR_FILENO, false, 0 };

void vmm_stderr_init(void)
{
	struct stat st;
	char path[32];
	int fd, fl;

	if (fstat(STDERR_FILENO, &st) < 0)
		return;
	if (S_ISSOCK(st.st_mode)) {
		err_out.socket = true;
		return;
	}
	if (!S_ISFIFO(st.st_mode) && !S_ISCHR(st.st_mode))
		return; /* a regular file takes a line without blocking */
	fl = fcntl(STDERR_FILENO, F_GETFL);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", STDERR_FILENO);
	fd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY |
		  (fl >= 0 ? fl & O_APPEND : 0));
	if (fd >= 0)
		err_out.fd = fd;
}

/* One line, "PROGRAM: " @kind @fmt, to stderr without blocking, dropped
 * and counted when stderr does not take it at once (PROGRAM: the name it
 * was run by, vmm in the build tree, sysidle-vmm installed). Any thread. */
static void stderr_line(const char *kind, const char *fmt, va_list ap)
{
	char line[VMM_LINE_MAX];
	size_t len;
	ssize_t n;
	int r;

	r = snprintf(line, sizeof(line), "%s: %s",
		     program_invocation_short_name, kind);
	len = r < 0 ? 0 : (size_t)r;
	r = vsnprintf(line + len, sizeof(line) - len, fmt, ap);
	len = r < 0 ? len : len + (size_t)r;
	if (len > sizeof(line) - 2) {
		len = sizeof(line) - 2;
		memcpy(line + len - 3, "...", 3);
	}
	line[len++] = '\n';
	pthread_mutex_lock(&err_out.lock);
	do
		n = err_out.socket ? send(err_out.fd, line, len,
					  MSG_DONTWAIT | MSG_NOSIGNAL)
				   : write(err_out.fd, line, len);
	while (n < 0 && errno == EINTR);
	if (n != (ssize_t)len)
		err_out.dropped++;
	pthread_mutex_unlock(&err_out.lock);
}

uint64_t vmm_stderr_dropped(void)
{
	uint64_t n;

	pthread_mutex_lock(&err_out.lock);
	n = err_out.dropped;
	pthread_mutex_unlock(&err_out.lock);
	return n;
}

int vm_stop_init(void)
{
	stop_fd = eventfd(0, EFD_CLOEXEC);
	return stop_fd < 0 ? -1 : 0;
}

int vm_stop_fd(void)
{
	return stop_fd;
}

/* Any thread, any time: the first status wins, the main thread wakes. */
void vm_stop(int status)
{
	int expected = -1;
	uint64_t one = 1;

	if (atomic_compare_exchange_strong(&stop_status, &expected, status) &&
	    stop_fd >= 0 && write(stop_fd, &one, sizeof(one)) < 0)
		abort();
}

bool vm_stopping(void)
{
	return atomic_load(&stop_status) >= 0;
}

int vm_status(void)
{
	return atomic_load(&stop_status);
}

int vmm_fail(int status, const char *fmt, ...)
{
	va_list ap;

	if (!atomic_exchange(&fail_reported, true) && !vm_stopping()) {
		va_start(ap, fmt);
		stderr_line("", fmt, ap);
		va_end(ap);
	}
	vm_stop(status);
	return -1;
}

void vmm_error(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	stderr_line("", fmt, ap);
	va_end(ap);
}

int vmm_stderr_fd(void)
{
	return err_out.fd;
}

void vmm_warn(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	stderr_line("warning: ", fmt, ap);
	va_end(ap);
}

void vmm_warn_limited(struct vmm_warn_limit *l, const char *fmt, ...)
{
	unsigned int n;
	va_list ap;

	/* relaxed: a count that orders nothing else; the load first keeps
	 * it from growing (and wrapping) once the budget is spent */
	if (atomic_load_explicit(&l->count, memory_order_relaxed) >=
	    VMM_WARN_BURST)
		return;
	n = atomic_fetch_add_explicit(&l->count, 1, memory_order_relaxed);
	if (n >= VMM_WARN_BURST)
		return;
	va_start(ap, fmt);
	stderr_line("warning: ", fmt, ap);
	va_end(ap);
	if (n == VMM_WARN_BURST - 1)
		vmm_warn("further %s not logged (%u logged)", l->what,
			 VMM_WARN_BURST);
}
