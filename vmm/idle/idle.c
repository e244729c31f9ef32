/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The idle layer's set-up and what it shows (idle.h): --sysidle wired in
 * (track.c, timekeeper.c, tick.c, log.c) and the pv tick (pvtick.c).
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/error.h"
#include "base/file.h"
#include "base/time.h"
#include "idle/internal.h"
#include "idle/pvtick.h"
#include "machine/vcpu.h"
#include "machine/vm.h"

static struct idle_layer idle = { .lock = PTHREAD_MUTEX_INITIALIZER,
				  .hk_cpu = -1, .log_fd = -1 };

struct idle_layer *idle_layer(void)
{
	return &idle;
}

bool idle_enabled(void)
{
	return idle.enabled;
}

int idle_init(struct vm *vm, const struct idle_config *o)
{
	struct sysidle_config cfg;
	char why[160];

	idle.vm = vm;
	idle.tk = o->timekeeper;
	idle.hk_cpu = o->housekeeping_cpu;
	idle.max_hold_ns = o->max_hold_ns ? o->max_hold_ns :
			   IDLE_MAX_HOLD_DEFAULT_NS;
	if (idle.tk < 0 || (unsigned int)idle.tk >= vm->ncpus)
		return vmm_fail(VMM_EXIT_USAGE, "--timekeeper %d: expected a "
				"vCPU from 0 to %u", idle.tk, vm->ncpus - 1);
	if (sched_getaffinity(0, sizeof(idle.orig_cpus), &idle.orig_cpus) < 0)
		return vmm_fail(VMM_EXIT_KVM, "sched_getaffinity: %s",
				strerror(errno));
	if (idle.hk_cpu >= CPU_SETSIZE ||
	    (idle.hk_cpu >= 0 && !CPU_ISSET(idle.hk_cpu, &idle.orig_cpus)))
		return vmm_fail(VMM_EXIT_USAGE, "--housekeeping-cpu %d: not a "
				"CPU this process may run on", idle.hk_cpu);
	if (pvtick_init(vm, idle_suppress_tick) || idle_memory_init(vm, o))
		return -1;
	if (!o->sysidle) {
		idle_tick_setup();
		return 0;
	}
	if (o->log && strcmp(o->log, "-") == 0) {
		idle.log_fd = vmm_stderr_fd(); /* never blocks either */
	} else if (o->log) {
		/* Never blocks: a FIFO must have its reader already. */
		idle.log_fd = output_open(o->log, NULL, why, sizeof(why));
		if (idle.log_fd < 0)
			return vmm_fail(VMM_EXIT_USAGE, "cannot write "
					"--sysidle-log '%s': %s%s", o->log, why,
					errno == ENXIO ? " (start the reader "
					"first)" : "");
		idle.log_close = true;
	}
	sysidle_config_init(&cfg, vm->ncpus);
	cfg.timekeeper = idle.tk;
	cfg.on_transition = idle_transition;
	idle.s = sysidle_create(&cfg);
	idle.lat = calloc(IDLE_LATENCY_SAMPLES, sizeof(*idle.lat));
	idle.vcpus = aligned_alloc(64, vm->ncpus * sizeof(*idle.vcpus));
	if (!idle.s || !idle.lat || !idle.vcpus)
		return vmm_fail(VMM_EXIT_KVM, "sysidle_create: %s",
				strerror(errno));
	/* Before any vCPU thread starts: plain initialisation. */
	atomic_init(&idle.tk_state, TK_BUSY);
	atomic_init(&idle.tk_period, HK_TICK_DEFAULT_NS);
	atomic_init(&idle.force_req, false);
	atomic_init(&idle.force_src, -1);
	for (unsigned int i = 0; i < vm->ncpus; i++) {
		atomic_init(&idle.vcpus[i].idle_seq, 1); /* running */
		atomic_init(&idle.vcpus[i].woke_ns, 0);
		atomic_init(&idle.vcpus[i].halted_at_ns, 0);
		idle.vcpus[i].kick_due_ns = 0;
		idle.vcpus[i].tick_unarmed = false;
	}
	idle.t0 = now_ns();
	idle.since = idle.t0;
	idle.cur = SYSIDLE_NOT;
	idle.enabled = true;
	idle_tick_setup();
	vm->idle = idle_vcpu_ops();
	return 0;
}

_Static_assert(IDLE_WAKE_SOURCES == WAKE_SOURCES,
	       "idle.h counts the machine's wake sources");

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* After the housekeeping thread and every vCPU have been joined. */
void idle_get_stats(struct idle_stats *st)
{
	uint64_t now = now_ns(), n;

	memset(st, 0, sizeof(*st));
	st->enabled = idle.enabled;
	st->timekeeper = idle.tk;
	if (!idle.enabled)
		return;
	st->delay_ns = sysidle_delay_ns(idle.s);
	st->tick_period_ns = idle.tick_period;
	pthread_mutex_lock(&idle.lock);
	memcpy(st->state_ns, idle.state_ns, sizeof(st->state_ns));
	if (now > idle.since)
		st->state_ns[idle.cur] += now - idle.since;
	pthread_mutex_unlock(&idle.lock);
	st->full_idle_periods = idle.full_periods;
	st->force_exits = stat_read(&idle.force_exits);
	st->violations = stat_read(&idle.violations);
	st->scans = stat_read(&idle.scans);
	st->tick_restarts = stat_read(&idle.restarts);
	for (int s = 0; s < WAKE_SOURCES; s++)
		st->full_exits_by[s] = stat_read(&idle.full_exits_by[s]);
	st->hold_releases = stat_read(&idle.hold_releases);
	st->log_lines_dropped = idle.log_dropped_total;
	st->log_write_failures = stat_read(&idle.log_write_failures);
	st->lat_count = idle.lat_count;
	st->lat_min = idle.lat_min;
	st->lat_max = idle.lat_max;
	st->lat_sum = idle.lat_sum;
	n = idle.lat_count < IDLE_LATENCY_SAMPLES ? idle.lat_count :
						    IDLE_LATENCY_SAMPLES;
	if (n) {
		qsort(idle.lat, n, sizeof(*idle.lat), cmp_u64);
		st->lat_median = idle.lat[n / 2];
		st->lat_p99 = idle.lat[(99 * n + 99) / 100 - 1];
	}
}

/* Any thread: the idle part of a status snapshot. */
void idle_read_status(struct idle_status *st, uint64_t uptime_ns,
		      uint64_t now)
{
	memset(st, 0, sizeof(*st));
	st->sysidle = idle.enabled;
	st->timekeeper = idle.tk;
	st->state = SYSIDLE_NOT;
	if (!idle.enabled) {
		st->state_ns[SYSIDLE_NOT] = uptime_ns;
		st->since_ns = now - uptime_ns;
		return;
	}
	pthread_mutex_lock(&idle.lock);
	st->state = idle.cur;
	st->since_ns = idle.changed_ns ? idle.changed_ns : idle.t0;
	memcpy(st->state_ns, idle.state_ns, sizeof(st->state_ns));
	st->full_idle_done_ns = idle.state_ns[SYSIDLE_FULL_NOTED];
	if (now > idle.since)
		st->state_ns[idle.cur] += now - idle.since;
	st->full_idle_periods = idle.full_periods_seen;
	pthread_mutex_unlock(&idle.lock);
	/* Housekeeping-thread counters, read as they are: statistics. */
	st->force_exits = stat_read(&idle.force_exits);
	st->violations = stat_read(&idle.violations);
	st->scans = stat_read(&idle.scans);
	st->tick_restarts = stat_read(&idle.restarts);
	for (int s = 0; s < WAKE_SOURCES; s++)
		st->full_exits_by[s] = stat_read(&idle.full_exits_by[s]);
}

/* Any thread. */
void idle_vcpu_pvtick(struct vcpu *v, struct pvtick_status *st)
{
	const struct pvtick *t = pvtick_of(v);

	pthread_mutex_lock(&v->lock);
	st->hz = t->hz;
	st->delivered = t->delivered;
	st->suppressed = t->nsuppressed;
	pthread_mutex_unlock(&v->lock);
}

/* After every vCPU and the housekeeping thread have stopped. */
void idle_fini(void)
{
	idle_flush();
	if (idle.log_dropped_total)
		vmm_warn("--sysidle-log: %" PRIu64 " lines dropped (more "
			 "than its queue holds, or the file did not take them "
			 "at once: a reader that does not keep up, a write "
			 "error)", idle.log_dropped_total);
	if (idle.log_close)
		close(idle.log_fd);
	idle.log_fd = -1;
	idle.log_close = false;
	sysidle_destroy(idle.s);
	idle.s = NULL;
	free(idle.lat);
	idle.lat = NULL;
	free(idle.vcpus);
	idle.vcpus = NULL;
	idle.enabled = false;
	pvtick_fini();
}
