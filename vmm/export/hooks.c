/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The hooks thread: its own reader of the event queue (so that a slow hook
 * delays nothing but the hooks), running each hook through the shared
 * runner (common/hookrun.h), one at a time. What it read while a hook ran
 * is coalesced (hooks.h): only the latest full-idle edge of a batch can
 * run, and not when it repeats the last idle hook run. hooks_dropped
 * counts the edges not run, and the events this reader lost (it fell more
 * than EVENT_QUEUE behind). It keeps the VM's duty cycle from every state
 * change it reads (coalesced or not), for the document of each hook: the
 * figures as of the edge the hook is for.
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <sysidle/sysidle.h>

#include "base/error.h"
#include "base/event.h"
#include "base/time.h"
#include "export/hooks.h"
#include "hookrun.h"
#include "machine/vm.h"

#define HOOKS_BATCH 256 /* events read at a time */

static struct {
	struct hookrun_config cfg;
	struct hook_domain dom;
	struct event_reader events;
	pthread_t thread;
	bool started;
	int stop_fd;
	struct hookrun_stop stop; /* cfg.stop: the hook running at the stop */

	pthread_mutex_t lock; /* the counters, for hooks_counts */
	uint64_t run, failed, dropped;

	/* hooks thread only */
	bool begun;         /* the last idle hook run was "idle begin" */
	uint64_t noted_ns;  /* when the VM became FULL_NOTED */
	uint64_t periods;   /* FULL_NOTED reached */
	struct duty_cycle duty; /* from every state change read */
} hk = { .lock = PTHREAD_MUTEX_INITIALIZER, .stop_fd = -1,
	 .events = { .fd = -1, .slot = -1 } };

/* @doc gets the duty cycle @d (NULL: none, as at the start). */
static void doc_duty(struct sysidle_doc *doc, const struct duty_report *d)
{
	if (!d)
		return;
	doc->has_duty = true;
	for (int w = 0; w < DUTY_WINDOWS; w++)
		doc->full_idle_permille[w] = d->w[w].permille;
	doc->left_full_idle_unix_ms = d->left_unix_ms;
}

/* Hooks thread: the hooks of one event, with the document of @state and
 * the duty cycle @d as of then (NULL: none). */
static void hooks_run(const char *op, const char *subop, const char *extra,
		      int state, uint64_t since_unix_ms,
		      const struct duty_report *d)
{
	struct sysidle_doc doc = {
		.state = (enum sysidle_state)state,
		.since_unix_ms = since_unix_ms,
		.full_idle_periods = hk.periods,
		.vcpus = hk.dom.ncpus,
	};
	uint64_t run = 0, failed = 0;

	doc_duty(&doc, d);

	hookrun_event(&hk.cfg, &hk.dom, op, subop, extra, &doc, &run, &failed);
	pthread_mutex_lock(&hk.lock);
	hk.run += run;
	hk.failed += failed;
	pthread_mutex_unlock(&hk.lock);
	if (run || failed)
		export_hooks_ended();
}

static void count_dropped(uint64_t n)
{
	pthread_mutex_lock(&hk.lock);
	hk.dropped += n;
	pthread_mutex_unlock(&hk.lock);
	if (n)
		export_hooks_ended();
}

/* Hooks thread: "idle end" for a full idle period of @idle_ns that ended
 * into @state at Unix time @unix_ms (duty cycle @d then). */
static void hooks_idle_end(int state, uint64_t idle_ns, uint64_t unix_ms,
			   const struct duty_report *d)
{
	char ms[32];

	snprintf(ms, sizeof(ms), "%" PRIu64, idle_ns / 1000000u);
	hk.begun = false;
	hooks_run("idle", "end", ms, state, unix_ms, d);
}

/* Hooks thread: read what the queue holds; run the latest full-idle edge
 * of it, unless it repeats the last idle hook. */
static void hooks_drain(void)
{
	static struct vm_event evs[HOOKS_BATCH];
	static struct duty_report duty; /* as of @edge */
	const struct vm_event *last = NULL;
	struct vm_event edge;
	uint64_t edges = 0, lost = hk.events.lost;
	unsigned int n;

	do {
		n = event_read(&hk.events, evs, HOOKS_BATCH);
		for (unsigned int i = 0; i < n; i++) {
			const struct vm_event *ev = &evs[i];

			if (ev->kind != VM_EV_STATE)
				continue;
			duty_cycle_set(&hk.duty, ev->mono_ns, ev->unix_ms,
				       ev->to == SYSIDLE_FULL_NOTED);
			if (ev->to == SYSIDLE_FULL_NOTED) {
				hk.noted_ns = ev->mono_ns;
				hk.periods++;
			} else if (ev->from != SYSIDLE_FULL_NOTED) {
				continue; /* not an edge of full idle */
			}
			edges++;
			edge = *ev;
			last = &edge;
			duty_cycle_read(&hk.duty, ev->mono_ns, &duty);
		}
	} while (n == HOOKS_BATCH);
	lost = hk.events.lost - lost; /* only this thread changes it */
	if (!last) {
		if (lost)
			count_dropped(lost);
		return;
	}
	if ((last->to == SYSIDLE_FULL_NOTED) == hk.begun) {
		count_dropped(lost + edges); /* the hooks already say so */
		return;
	}
	count_dropped(lost + edges - 1);
	if (last->to == SYSIDLE_FULL_NOTED) {
		hk.begun = true;
		hooks_run("idle", "begin", NULL, last->to, last->unix_ms,
			  &duty);
	} else {
		hooks_idle_end(last->to, last->full_idle_ns, last->unix_ms,
			       &duty);
	}
}

/* Hooks thread, stopping at @now: "idle end" if an "idle begin" has none
 * yet, then "stopped end", all within one --hook-timeout
 * (hookrun_events_bounded). */
static void hooks_last(uint64_t now)
{
	struct sysidle_doc doc = {
		.state = SYSIDLE_NOT,
		.since_unix_ms = mono_to_unix_ms(now),
		.full_idle_periods = hk.periods,
		.vcpus = hk.dom.ncpus,
	};
	char ms[32];
	struct hookrun_call calls[2];
	unsigned int n = 0;
	uint64_t run = 0, failed = 0;
	struct duty_report d;

	/* the stop ends a full-idle period as a leave would */
	duty_cycle_set(&hk.duty, now, doc.since_unix_ms, false);
	duty_cycle_read(&hk.duty, now, &d);
	doc_duty(&doc, &d);

	if (hk.begun) {
		snprintf(ms, sizeof(ms), "%" PRIu64,
			 (now > hk.noted_ns ? now - hk.noted_ns : 0) / 1000000u);
		calls[n++] = (struct hookrun_call){ "idle", "end", ms, &doc };
		hk.begun = false;
	}
	calls[n++] = (struct hookrun_call){ "stopped", "end", NULL, &doc };
	hookrun_events_bounded(&hk.cfg, &hk.dom, calls, n, &run, &failed);
	pthread_mutex_lock(&hk.lock);
	hk.run += run;
	hk.failed += failed;
	pthread_mutex_unlock(&hk.lock);
}

static void *hooks_thread(void *arg)
{
	struct pollfd fds[2] = {
		{ .fd = hk.stop_fd, .events = POLLIN },
		{ .fd = hk.events.fd, .events = POLLIN },
	};

	(void)arg;
	pthread_setname_np(pthread_self(), "vmm-hooks");
	hooks_run("started", "begin", NULL, SYSIDLE_NOT,
		  mono_to_unix_ms(now_ns()), NULL);
	for (;;) {
		if (poll(fds, 2, -1) < 0 && errno != EINTR) {
			vmm_warn("hooks thread: poll: %s", strerror(errno));
			break;
		}
		if (fds[1].revents)
			hooks_drain();
		if (fds[0].revents)
			break;
	}
	/* Stopping: the last changes, then every "idle begin" gets its
	 * "idle end" before "stopped end". */
	hooks_drain();
	hooks_last(now_ns());
	return NULL;
}

int hooks_start(struct vm *vm, const struct export_config *o)
{
	char *dir = hookrun_resolve_dir(o->hooks_dir, vmm_warn);
	int err;

	if (!dir)
		return 0;
	hk.cfg = (struct hookrun_config){ .dir = dir,
		.timeout_ns = o->hook_timeout_ns, .warn = vmm_warn,
		.stop = &hk.stop };
	hk.dom = (struct hook_domain){ vm_name(), vm_uuid(), vm->ncpus };
	duty_cycle_init(&hk.duty, time_start_ns());
	hk.stop_fd = eventfd(0, EFD_CLOEXEC);
	hk.stop = (struct hookrun_stop){ .fd = hk.stop_fd };
	if (hk.stop_fd < 0 || event_reader_open(&hk.events) < 0)
		return vmm_fail(VMM_EXIT_KVM, "cannot start the hooks thread: "
				"%s", strerror(errno));
	err = pthread_create(&hk.thread, NULL, hooks_thread, NULL);
	if (err)
		return vmm_fail(VMM_EXIT_KVM, "cannot start the hooks thread: "
				"%s", strerror(err));
	hk.started = true;
	return 0;
}

void hooks_stop(void)
{
	uint64_t one = 1;

	if (hk.started) {
		/* A hook running now ends within one --hook-timeout. */
		hookrun_stop_set(&hk.stop, now_ns() + hk.cfg.timeout_ns);
		if (write(hk.stop_fd, &one, sizeof(one)) < 0)
			vmm_warn("cannot stop the hooks thread");
		pthread_join(hk.thread, NULL);
		hk.started = false;
	}
	event_reader_close(&hk.events);
	if (hk.stop_fd >= 0)
		close(hk.stop_fd);
	hk.stop_fd = -1;
	free((char *)hk.cfg.dir);
	hk.cfg.dir = NULL;
}

void hooks_counts(uint64_t *run, uint64_t *failed, uint64_t *dropped)
{
	pthread_mutex_lock(&hk.lock);
	*run = hk.run;
	*failed = hk.failed;
	*dropped = hk.dropped;
	pthread_mutex_unlock(&hk.lock);
}
