/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The bridge's hook queue (hook_queue.c): the hooks of every watched domain
 * run one event at a time on one worker thread, through common's
 * synchronous runner (hookrun.h), so that the scans never wait for a hook.
 *
 * hook_queue_post() only queues, per domain (told apart by uuid): a
 * domain's pending "idle" events that have not started yet are replaced by
 * its latest one (latest state wins; each replaced one counted as
 * dropped), and one that would repeat the last idle hook of that domain is
 * dropped (and counted) as well, so each domain's hooks see "idle begin"
 * and "idle end" alternate. "started" and "stopped" are never coalesced,
 * and idle events never move across them.
 */
#ifndef SYSIDLE_LIBVIRT_HOOK_QUEUE_H
#define SYSIDLE_LIBVIRT_HOOK_QUEUE_H

#include <stdbool.h>
#include <stdint.h>

#include "hookrun.h"

struct hook_queue_config {
	const char *dir;         /* NULL or missing: no hooks, silently */
	uint64_t timeout_ns;     /* a hook still running then is killed */
	const char *thread_name; /* the worker's name (15 bytes at most) */
	/* Warnings (a failed or killed hook, an unusable DIR): one line
	 * each, without the trailing newline. */
	void (*warn)(const char *fmt, ...)
		__attribute__((format(printf, 1, 2)));
};

/* Start the worker. A DIR that is not a readable directory: a warning and
 * no hooks (returns 0). Returns -1 with errno set when the worker cannot
 * be started. */
int hook_queue_start(const struct hook_queue_config *cfg);
/* Never blocks (beyond a mutex). @op/@subop/@extra as libvirt's argv[2..4]
 * (NULL: "-"); @xml (copied) is the hooks' stdin, the domain's XML from
 * libvirt; NULL: the small domain XML of @dom and @doc
 * (sysidle_doc_domain_xml). One thread at a time (or callers that
 * serialise themselves). */
void hook_queue_post(const struct hook_domain *dom, const char *op,
		     const char *subop, const char *extra,
		     const struct sysidle_doc *doc, const char *xml);
/* Waits for the queue to drain (each hook still bounded by the timeout),
 * then stops the worker. */
void hook_queue_stop(void);
/* The posting thread: is there a worker (hooks to run)? */
bool hook_queue_active(void);
/* Any thread. */
void hook_queue_counts(uint64_t *run, uint64_t *failed, uint64_t *dropped);

#endif
