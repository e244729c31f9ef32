/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * libvirt-style hooks, run synchronously: for one event, DIR/vm, then every
 * executable regular file of DIR/vm.d/ in strcmp order (dot files skipped),
 * as libvirt runs /etc/libvirt/hooks/qemu and qemu.d/:
 *
 *	HOOK NAME started begin -          at start
 *	HOOK NAME idle begin -             FULL_NOTED reached
 *	HOOK NAME idle end DURATION_MS     FULL_NOTED left
 *	HOOK NAME stopped end -            at exit
 *
 * one at a time, with the domain XML (sysidle_doc_domain_xml) on stdin,
 * stdout to /dev/null, stderr kept (its last 4096 bytes) for the warning
 * when the hook fails or is killed at its timeout, an environment of
 * LC_ALL, PATH and HOME only, in /, in a process group of its own (a
 * timeout kills the whole group), with no signal mask or ignored signal of
 * the caller's. Who calls it when (a worker thread, a queue) is the
 * caller's business: the VMM and the libvirt bridge each have their own.
 */
#ifndef SYSIDLE_COMMON_HOOKRUN_H
#define SYSIDLE_COMMON_HOOKRUN_H

#include <stdatomic.h>
#include <stdint.h>

#include "sysidle_doc.h" /* struct hook_domain, struct sysidle_doc */

/* --hooks: the default directory, of the VMM and the libvirt bridge:
 * SYSCONFDIR/sysidle/hooks (meson.build), which `meson install` creates. */
#ifndef SYSIDLE_CONFDIR
#define SYSIDLE_CONFDIR "/etc/sysidle"
#endif
#define DEFAULT_HOOKS_DIR SYSIDLE_CONFDIR "/hooks"

/* --hook-timeout: seconds, at least 1 ms and at most HOOKS_TIMEOUT_MAX_S
 * (a smaller value would round to no time at all);
 * sets @ns and returns 0, or returns -1 (the message is the caller's:
 * HOOKS_TIMEOUT_USAGE). */
#define HOOKS_TIMEOUT_MAX_S 86400
#define HOOKS_TIMEOUT_USAGE "expected seconds, at least 0.001 and at most 86400"
int hooks_parse_timeout(const char *text, uint64_t *ns);

/*
 * A bound on the hook running when a process stops (any thread sets it):
 * store by_ns (hookrun_stop_set), then make fd readable; the runner wakes
 * on fd and kills that hook at by_ns at the latest.
 */
struct hookrun_stop {
	int fd;         /* readable once by_ns is set (never read here) */
	_Atomic uint64_t by_ns; /* CLOCK_MONOTONIC, 0: not stopping */
};
void hookrun_stop_set(struct hookrun_stop *stop, uint64_t by_ns);

struct hookrun_config {
	const char *dir;     /* absolute: from hookrun_resolve_dir() */
	uint64_t timeout_ns; /* a hook still running then is killed */
	struct hookrun_stop *stop; /* NULL: only each hook's own timeout */
	/* Warnings (a failed or killed hook): one line each, without the
	 * trailing newline. Called from the thread that runs the hooks. */
	void (*warn)(const char *fmt, ...)
		__attribute__((format(printf, 1, 2)));
};

/* The hooks directory @dir as hookrun_config.dir wants it (hooks run in /:
 * its real path, malloc'd), or NULL for no hooks: @dir NULL or missing
 * (silently), or not a readable directory (one warning through @warn,
 * "--hooks 'DIR': REASON: no hooks"). Once, at start. */
char *hookrun_resolve_dir(const char *dir,
			  void (*warn)(const char *fmt, ...)
			  __attribute__((format(printf, 1, 2))));

/* Run the hooks of one event now: DIR/vm, then DIR/vm.d/ * (the directory
 * is read anew each time: hooks can be added while it runs), with argv
 * HOOK @dom->name @op @subop @extra (NULL or "": "-") and the domain XML of
 * @dom and @doc on stdin. Returns when all have exited or been killed
 * (each bounded by cfg->timeout_ns, plus at most 5 s to reap a killed
 * one). Adds each hook run to *@run and each one that failed (not exit
 * status 0, killed, or not started) to *@failed, and warns about each
 * failure. Any thread; the caller's to serialise calls (and to guard
 * *@run and *@failed). */
void hookrun_event(const struct hookrun_config *cfg,
		   const struct hook_domain *dom, const char *op,
		   const char *subop, const char *extra,
		   const struct sysidle_doc *doc, uint64_t *run,
		   uint64_t *failed);

/* The same with @xml (NUL-terminated) on the hooks' stdin instead: the
 * libvirt bridge's hooks get the domain's own XML from libvirt. */
void hookrun_event_xml(const struct hookrun_config *cfg, const char *name,
		       const char *op, const char *subop, const char *extra,
		       const char *xml, uint64_t *run, uint64_t *failed);
/* One event of hookrun_events_bounded. */
struct hookrun_call {
	const char *op, *subop, *extra;
	const struct sysidle_doc *doc;
};

/* The last events of a stopping process (e.g. "idle end", then "stopped
 * end"), each as hookrun_event in order, all within one cfg->timeout_ns
 * from now: a hook still running then is killed, and the hooks not started
 * by then are not run (each said through cfg->warn, counted failed). */
void hookrun_events_bounded(const struct hookrun_config *cfg,
			    const struct hook_domain *dom,
			    const struct hookrun_call *calls,
			    unsigned int ncalls, uint64_t *run,
			    uint64_t *failed);

#endif
