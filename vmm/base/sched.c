/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * A short scheduler slice for the threads that serve guest wake-ups
 * (sched.h). glibc has no wrapper for sched_{set,get}attr: the structure
 * is the kernel's (include/uapi/linux/sched/types.h), its size given.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/sched.h"

struct vmm_sched_attr {
	uint32_t size;
	uint32_t sched_policy;
	uint64_t sched_flags;
	int32_t sched_nice;
	uint32_t sched_priority;
	uint64_t sched_runtime, sched_deadline, sched_period;
	uint32_t sched_util_min, sched_util_max;
};

#define VMM_SCHED_OTHER 0
#define VMM_SCHED_BATCH 3

static uint64_t slice_ns; /* written before the threads start */

/* Any thread (the options' parse): see sched.h. */
int sched_slice_parse(const char *arg, uint64_t *ns)
{
	unsigned long n;
	char *end;

	if (!strcmp(arg, "off")) {
		*ns = 0;
		return 0;
	}
	errno = 0;
	n = strtoul(arg, &end, 10);
	if (errno || *end || end == arg || *arg == '-' ||
	    n < SCHED_SLICE_MIN_NS / 1000 || n > SCHED_SLICE_MAX_NS / 1000)
		return -1;
	*ns = (uint64_t)n * 1000u;
	return 0;
}

void sched_slice_configure(uint64_t ns)
{
	slice_ns = ns;
}

uint64_t sched_slice_configured(void)
{
	return slice_ns;
}

static int attr_get(int tid, struct vmm_sched_attr *a)
{
	memset(a, 0, sizeof(*a));
	return (int)syscall(SYS_sched_getattr, tid, a, sizeof(*a), 0);
}

uint64_t sched_slice_of(int tid)
{
	struct vmm_sched_attr a;

	if (attr_get(tid, &a) < 0 || (a.sched_policy != VMM_SCHED_OTHER &&
				      a.sched_policy != VMM_SCHED_BATCH))
		return 0;
	return a.sched_runtime;
}

/* Only a fair-class thread is changed, its policy and nice kept: a VMM an
 * operator runs under SCHED_FIFO stays so. */
uint64_t sched_slice_apply(void)
{
	struct vmm_sched_attr a;

	if (!slice_ns || attr_get(0, &a) < 0 ||
	    (a.sched_policy != VMM_SCHED_OTHER &&
	     a.sched_policy != VMM_SCHED_BATCH))
		return 0;
	a.size = sizeof(a);
	a.sched_flags = 0;
	a.sched_runtime = slice_ns;
	a.sched_deadline = a.sched_period = 0;
	if (syscall(SYS_sched_setattr, 0, &a, 0) < 0)
		return 0;
	return sched_slice_of(0);
}
