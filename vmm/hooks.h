/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * libvirt-style hooks (hooks.c), shared by the VMM (one domain: the VM) and
 * the libvirt bridge (one domain per libvirt domain it watches). For each
 * event DIR/vm, then DIR/vm.d/ *, run with argv HOOK NAME OP SUBOP EXTRA
 * and a small domain XML on stdin, one at a time, from one worker thread,
 * each bounded by a timeout. Nothing here knows about the VMM or libvirt.
 */
#ifndef SYSIDLE_VMM_HOOKS_H
#define SYSIDLE_VMM_HOOKS_H

#include <stdint.h>

/* The domain an event is about; hooks_post copies what it needs. */
struct hook_domain {
	const char *name;   /* argv[1] and <name> */
	const char *uuid;   /* <uuid>; also what tells domains apart */
	unsigned int ncpus; /* <vcpu> */
};

/* --hook-timeout: seconds, more than 0 and at most HOOKS_TIMEOUT_MAX_S;
 * sets @ns and returns 0, or returns -1 (the message is the caller's:
 * HOOKS_TIMEOUT_USAGE). */
#define HOOKS_TIMEOUT_MAX_S 86400
#define HOOKS_TIMEOUT_USAGE "expected seconds, more than 0 and at most 86400"
int hooks_parse_timeout(const char *text, uint64_t *ns);

struct hooks_config {
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
int hooks_start(const struct hooks_config *cfg);
/* Never blocks (beyond a mutex). @op/@subop/@extra as libvirt's argv[2..4]
 * (NULL: "-"); @state (enum sysidle_state) and @since_unix_ms go into the
 * domain XML on stdin. Pending "idle" hooks of the same domain (same uuid)
 * are coalesced: the latest state wins, and one that would repeat the last
 * idle hook of that domain is dropped, so each domain's hooks see
 * "idle begin" and "idle end" alternate. "started" and "stopped" are never
 * coalesced, and idle events never move across them. One thread at a time
 * (or callers that serialise themselves). */
void hooks_post(const struct hook_domain *dom, const char *op,
		const char *subop, const char *extra, int state,
		uint64_t since_unix_ms);
/* Waits for the queue to drain (each hook still bounded by the timeout),
 * then stops the worker. */
void hooks_stop(void);
/* Any thread. */
void hooks_counts(uint64_t *run, uint64_t *failed, uint64_t *dropped);

#endif
