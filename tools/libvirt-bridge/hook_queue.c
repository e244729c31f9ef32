/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The bridge's hook queue: one worker thread runs the queued events through
 * common's hook runner (hookrun.c), with the per-domain coalescing
 * described in hook_queue.h.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hook_queue.h"

#define HOOKS_QUEUE_MAX 65536 /* coalescing keeps it at <= 3 per domain */

struct hook_event {
	char *name, *uuid;      /* owned copies of the hook_domain's */
	char *xml;              /* owned: stdin; NULL: from name, uuid, doc */
	unsigned int ncpus;
	char op[16], subop[16], extra[24];
	struct sysidle_doc doc;
};

/* A domain whose last idle hook taken from the queue was "idle begin". */
struct hook_begun {
	char *uuid;
};

static struct {
	struct hookrun_config run_cfg; /* set before the worker starts */
	char *dir;              /* run_cfg.dir, owned */
	char thread_name[16];
	pthread_t thread;
	bool started;           /* posting side only */

	pthread_mutex_t lock;   /* guards everything below */
	pthread_cond_t cond;    /* queue not empty, or stop */
	struct hook_event *q;   /* q[0 .. n-1], oldest first */
	size_t n, cap;
	bool stop;
	struct hook_begun *begun; /* domains whose idle hooks last began */
	size_t nbegun, capbegun;
	uint64_t run, failed, dropped;
} hookq = { .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER };

static void event_free(struct hook_event *ev)
{
	free(ev->name);
	free(ev->uuid);
	free(ev->xml);
	ev->name = ev->uuid = ev->xml = NULL;
}

/* Under the lock: the begun entry of @uuid, or -1. */
static long begun_find(const char *uuid)
{
	for (size_t i = 0; i < hookq.nbegun; i++)
		if (!strcmp(hookq.begun[i].uuid, uuid))
			return (long)i;
	return -1;
}

/* Under the lock (worker): record whether @uuid's idle hooks last began.
 * An allocation failure forgets it (the next idle event is not dropped). */
static void begun_set(const char *uuid, bool begun)
{
	long i = begun_find(uuid);

	if (!begun && i >= 0) {
		free(hookq.begun[i].uuid);
		hookq.begun[i] = hookq.begun[--hookq.nbegun];
	} else if (begun && i < 0) {
		if (hookq.nbegun == hookq.capbegun) {
			size_t cap = hookq.capbegun ? 2 * hookq.capbegun : 8;
			struct hook_begun *b = realloc(hookq.begun,
						       cap * sizeof(*b));

			if (!b)
				return;
			hookq.begun = b;
			hookq.capbegun = cap;
		}
		hookq.begun[hookq.nbegun].uuid = strdup(uuid);
		if (hookq.begun[hookq.nbegun].uuid)
			hookq.nbegun++;
	}
}

/* Worker: run @ev's hooks now; count them. */
static void run_event(const struct hook_event *ev)
{
	struct hook_domain dom = { ev->name, ev->uuid, ev->ncpus };
	uint64_t run = 0, failed = 0;

	if (ev->xml)
		hookrun_event_xml(&hookq.run_cfg, ev->name, ev->op, ev->subop,
				  ev->extra, ev->xml, &run, &failed);
	else
		hookrun_event(&hookq.run_cfg, &dom, ev->op, ev->subop,
			      ev->extra, &ev->doc, &run, &failed);
	pthread_mutex_lock(&hookq.lock);
	hookq.run += run;
	hookq.failed += failed;
	pthread_mutex_unlock(&hookq.lock);
}

/* The worker, started by hook_queue_start: one event at a time, in queue
 * order, until hook_queue_stop asks it to stop and the queue is empty. */
static void *hook_queue_thread(void *arg)
{
	struct hook_event ev;

	(void)arg;
	pthread_setname_np(pthread_self(), hookq.thread_name);
	pthread_mutex_lock(&hookq.lock);
	for (;;) {
		while (!hookq.n && !hookq.stop)
			pthread_cond_wait(&hookq.cond, &hookq.lock);
		if (!hookq.n)
			break; /* stopping, and the queue is drained */
		ev = hookq.q[0];
		memmove(hookq.q, hookq.q + 1, --hookq.n * sizeof(ev));
		/* "started" and "stopped" begin a domain's idle afresh. */
		begun_set(ev.uuid, !strcmp(ev.op, "idle") &&
			  !strcmp(ev.subop, "begin"));
		pthread_mutex_unlock(&hookq.lock);
		run_event(&ev);
		event_free(&ev);
		pthread_mutex_lock(&hookq.lock);
	}
	pthread_mutex_unlock(&hookq.lock);
	return NULL;
}

/* Before any hook_queue_post. A missing dir means no hooks; one that is
 * not a readable directory, a warning and no hooks. */
int hook_queue_start(const struct hook_queue_config *cfg)
{
	int err;

	hookq.run_cfg.warn = cfg->warn;
	hookq.dir = hookrun_resolve_dir(cfg->dir, cfg->warn);
	if (!hookq.dir)
		return 0;
	hookq.run_cfg.dir = hookq.dir;
	hookq.run_cfg.timeout_ns = cfg->timeout_ns;
	snprintf(hookq.thread_name, sizeof(hookq.thread_name), "%s",
		 cfg->thread_name ? cfg->thread_name : "hooks");
	hookq.stop = false;
	err = pthread_create(&hookq.thread, NULL, hook_queue_thread, NULL);
	if (err) {
		free(hookq.dir);
		hookq.run_cfg.dir = NULL;
		hookq.dir = NULL;
		errno = err;
		return -1;
	}
	hookq.started = true;
	return 0;
}

/* Under the lock: append @ev (taking its strings), or drop it when the
 * queue is at its limit or cannot grow. */
static void queue_append(struct hook_event *ev)
{
	if (hookq.n == hookq.cap && hookq.cap < HOOKS_QUEUE_MAX) {
		size_t cap = hookq.cap ? 2 * hookq.cap : 16;
		struct hook_event *q = realloc(hookq.q, cap * sizeof(*q));

		if (q) {
			hookq.q = q;
			hookq.cap = cap;
		}
	}
	if (hookq.n < hookq.cap) {
		hookq.q[hookq.n++] = *ev;
	} else {
		hookq.dropped++;
		event_free(ev);
	}
}

/* The posting thread (one at a time): queue an event for the worker. Never
 * blocks beyond the queue's mutex. */
void hook_queue_post(const struct hook_domain *dom, const char *op,
		     const char *subop, const char *extra,
		     const struct sysidle_doc *doc, const char *xml)
{
	struct hook_event ev = { .ncpus = dom->ncpus, .doc = *doc };
	size_t i, j, last;
	bool begun;

	if (!hookq.started)
		return;
	snprintf(ev.op, sizeof(ev.op), "%s", op ? op : "-");
	snprintf(ev.subop, sizeof(ev.subop), "%s", subop ? subop : "-");
	snprintf(ev.extra, sizeof(ev.extra), "%s", extra ? extra : "");
	ev.name = strdup(dom->name ? dom->name : "");
	ev.uuid = strdup(dom->uuid ? dom->uuid : "");
	ev.xml = xml ? strdup(xml) : NULL;
	pthread_mutex_lock(&hookq.lock);
	if (!ev.name || !ev.uuid || (xml && !ev.xml)) {
		hookq.dropped++;
		pthread_mutex_unlock(&hookq.lock);
		event_free(&ev);
		hookq.run_cfg.warn("hooks %s %s: out of memory", ev.op, ev.subop);
		return;
	}
	if (!strcmp(ev.op, "idle")) {
		/* The domain's latest idle state wins over its pending ones
		 * (those after its last pending started/stopped); and if it
		 * is the state its hooks last saw (a wake-up and a new full
		 * idle both coalesced away), it is dropped too, so its hooks
		 * always see begin and end alternate. */
		begun = begun_find(ev.uuid) >= 0;
		for (i = 0, last = 0; i < hookq.n; i++)
			if (!strcmp(hookq.q[i].uuid, ev.uuid) &&
			    strcmp(hookq.q[i].op, "idle")) {
				last = i + 1;
				begun = false;
			}
		for (i = j = last; i < hookq.n; i++) {
			struct hook_event *e = &hookq.q[i];

			if (!strcmp(e->op, "idle") && !strcmp(e->uuid, ev.uuid)) {
				hookq.dropped++;
				event_free(e);
			} else {
				hookq.q[j++] = *e;
			}
		}
		hookq.n = j;
		if (begun == !strcmp(ev.subop, "begin")) {
			hookq.dropped++;
			pthread_mutex_unlock(&hookq.lock);
			event_free(&ev);
			return;
		}
	}
	queue_append(&ev);
	pthread_cond_signal(&hookq.cond);
	pthread_mutex_unlock(&hookq.lock);
}

/* After the last hook_queue_post: run what is queued, then stop. */
void hook_queue_stop(void)
{
	if (!hookq.started)
		return;
	pthread_mutex_lock(&hookq.lock);
	hookq.stop = true;
	pthread_cond_signal(&hookq.cond);
	pthread_mutex_unlock(&hookq.lock);
	pthread_join(hookq.thread, NULL);
	hookq.started = false;
	free(hookq.dir);
	hookq.run_cfg.dir = NULL;
	hookq.dir = NULL;
	free(hookq.q);
	hookq.q = NULL;
	hookq.n = hookq.cap = 0;
	for (size_t i = 0; i < hookq.nbegun; i++)
		free(hookq.begun[i].uuid);
	free(hookq.begun);
	hookq.begun = NULL;
	hookq.nbegun = hookq.capbegun = 0;
}

bool hook_queue_active(void)
{
	return hookq.started;
}

/* Any thread. */
void hook_queue_counts(uint64_t *run, uint64_t *failed, uint64_t *dropped)
{
	pthread_mutex_lock(&hookq.lock);
	*run = hookq.run;
	*failed = hookq.failed;
	*dropped = hookq.dropped;
	pthread_mutex_unlock(&hookq.lock);
}
