/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The VM's name and uuid (--uuid, or version 5 of the name), and status
 * snapshots (export.h) read from any thread, from the getters of the layers below: per-vCPU fields under each
 * vCPU's lock, the idle state from the idle layer, counters with relaxed
 * atomic loads.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sysidle/sysidle.h>

#include "base/error.h"
#include "base/housekeeping.h"
#include "base/time.h"
#include "base/uuid.h"
#include "export/export.h"
#include "export/hooks.h"
#include "idle/idle.h"
#include "machine/pause.h"
#include "machine/vcpu.h"
#include "machine/vm.h"

static struct {
	const char *name;
	char uuid[37];
} vm_id;

/* Any thread: 0 when @s is a VM name: 1..80 bytes, no '/', no control
 * characters; else -1. */
int vm_name_check(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > 80)
		return -1;
	for (; *s; s++)
		if (*s == '/' || (unsigned char)*s < 0x20 || *s == 0x7f)
			return -1;
	return 0;
}

const char *vm_name(void)
{
	return vm_id.name;
}

const char *vm_uuid(void)
{
	return vm_id.uuid;
}

/*
 * Main thread, before any other thread starts. @name: the VM's name,
 * living as long as the process; @uuid: a canonical uuid (main.c parsed
 * it) or NULL, for the version-5 uuid of @name: the same name, the same
 * uuid, in every run.
 */
int status_init(const char *name, const char *uuid)
{
	vm_id.name = name;
	if (uuid && uuid_parse(uuid, vm_id.uuid))
		return vmm_fail(VMM_EXIT_USAGE, "--uuid '%s': expected a uuid",
				uuid);
	if (!uuid && uuid_v5(VMM_UUID_NAMESPACE, name, strlen(name),
			     vm_id.uuid))
		return vmm_fail(VMM_EXIT_USAGE, "bad uuid namespace '%s'",
				VMM_UUID_NAMESPACE);
	return 0;
}

struct vm_status *vm_status_new(const struct vm *vm)
{
	struct vm_status *st = calloc(1, sizeof(*st));

	if (!st)
		return NULL;
	st->vcpus = calloc(vm->ncpus, sizeof(*st->vcpus));
	if (!st->vcpus) {
		free(st);
		return NULL;
	}
	st->ncpus = vm->ncpus;
	return st;
}

void vm_status_free(struct vm_status *st)
{
	if (st)
		free(st->vcpus);
	free(st);
}

void vm_status_read(struct vm *vm, struct vm_status *st)
{
	uint64_t now = now_ns();
	struct pvtick_status pv;
	uint64_t since;
	struct pause_status pz;
	struct idle_status is;

	st->name = vm_id.name;
	st->uuid = vm_id.uuid;
	st->pid = (int)getpid();
	st->hk_tid = housekeeping_tid();
	st->uptime_ns = now - time_start_ns();
	st->halt_exits = 0;
	st->ticks_suppressed = 0;
	for (unsigned int i = 0; i < st->ncpus && i < vm->ncpus; i++) {
		struct vcpu *v = &vm->vcpus[i];
		struct vcpu_status *s = &st->vcpus[i];

		s->id = i;
		/* relaxed: see the stores in vcpu_thread / vcpu_handle_exit */
		s->tid = atomic_load_explicit(&v->tid, memory_order_relaxed);
		s->halt_exits = atomic_load_explicit(&v->stats.hlt_exits,
						      memory_order_relaxed);
		s->halted = vcpu_is_halted(v);
		/* relaxed: the vCPU thread's, a snapshot (vcpu_halt.c) */
		s->halted_ns = atomic_load_explicit(&v->stats.halted_ns,
						    memory_order_relaxed);
		since = atomic_load_explicit(&v->stats.halted_since_ns,
					     memory_order_relaxed);
		if (since && now > since)
			s->halted_ns += now - since;
		idle_vcpu_pvtick(v, &pv);
		s->ticks_suppressed = pv.suppressed;
		for (int w = 0; w < WAKE_SOURCES; w++) {
			/* relaxed: the vCPU thread's counters, a snapshot */
			s->wakeups[w] = atomic_load_explicit(
				&v->stats.wakes.total[w], memory_order_relaxed);
			s->detail[w] = atomic_load_explicit(
				&v->stats.wakes.detail[w], memory_order_relaxed);
			s->recent[w] = wake_tally_recent(&v->stats.wakes, w, now,
							 &s->recent_span_ns);
		}
		if (s->recent_span_ns > st->uptime_ns) /* a young VM */
			s->recent_span_ns = st->uptime_ns;
		st->halt_exits += s->halt_exits;
		st->ticks_suppressed += s->ticks_suppressed;
	}
	st->host_timer_wakeups = housekeeping_timer_wakeups();
	st->hk_wakeups = housekeeping_wakeups();
	st->n_hk_by = housekeeping_wakeups_by(st->hk_by, HK_WAKE_KINDS, now);
	for (unsigned int i = 0; i < st->n_hk_by; i++)
		if (st->hk_by[i].span_ns > st->uptime_ns)
			st->hk_by[i].span_ns = st->uptime_ns;
	idle_read_status(&is, st->uptime_ns, now);
	st->sysidle = is.sysidle;
	st->timekeeper = is.timekeeper;
	st->state = is.state;
	st->since_ns = is.since_ns;
	memcpy(st->state_ns, is.state_ns, sizeof(st->state_ns));
	st->full_idle_ns = is.state_ns[SYSIDLE_FULL_NOTED];
	st->full_idle_done_ns = is.full_idle_done_ns;
	st->full_idle_periods = is.full_idle_periods;
	st->force_exits = is.force_exits;
	st->violations = is.violations;
	st->scans = is.scans;
	st->tick_restarts = is.tick_restarts;
	memcpy(st->full_exits_by, is.full_exits_by, sizeof(st->full_exits_by));
	idle_memory_read_status(&st->idle_memory);
	pause_read_status(&pz);
	st->paused = pz.paused;
	st->pauses = pz.pauses;
	st->resumes_requested = pz.resumes_requested;
	st->resumes_self = pz.resumes_self;
	st->since_unix_ms = mono_to_unix_ms(st->since_ns);
	st->events_dropped = export_events_dropped();
	st->watch_dropped = control_watch_dropped();
	hooks_counts(&st->hooks_run, &st->hooks_failed, &st->hooks_dropped);
}
