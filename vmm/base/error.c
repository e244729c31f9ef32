/* SPDX-License-Identifier: GPL-2.0-only */
/* The one error pattern and the VM's stop (error.h). */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "base/error.h"

static atomic_int stop_status = -1;
static atomic_bool fail_reported;
static int stop_fd = -1; /* eventfd: the VM has stopped */

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
		fputs("vmm: ", stderr);
		vfprintf(stderr, fmt, ap);
		fputc('\n', stderr);
		va_end(ap);
	}
	vm_stop(status);
	return -1;
}

static void vwarn(const char *fmt, va_list ap)
{
	fputs("vmm: warning: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
}

void vmm_warn(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vwarn(fmt, ap);
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
	vwarn(fmt, ap);
	va_end(ap);
	if (n == VMM_WARN_BURST - 1)
		fprintf(stderr, "vmm: warning: further %s not logged (%u "
			"logged)\n", l->what, VMM_WARN_BURST);
}
