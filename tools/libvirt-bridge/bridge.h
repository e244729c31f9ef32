/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * sysidle-libvirt's parts: the options (options.c), the domains and what
 * is published for them (domains.c), the main loop and the connection
 * (sysidle-libvirt.c).
 */
#ifndef SYSIDLE_LIBVIRT_BRIDGE_H
#define SYSIDLE_LIBVIRT_BRIDGE_H

#include <stdbool.h>
#include <stdint.h>

#include <libvirt/libvirt.h>
#include <sysidle/sysidle.h>

#include "domain_idle.h"
#include "duty_cycle.h"
#include "host_wakes.h"
#include "hookrun.h"
#include "stats_host.h"
#include "stats_source.h"

#define PROG "sysidle-libvirt"
#define DEFAULT_URI "qemu:///system"
#define INTERVAL_MAX_MS 3600000u
#define BACKOFF_MIN_MS 1000u
#define BACKOFF_MAX_MS 60000u
#define EXIT_USAGE 2
#define STOP_TIMEOUT_MAX_S 3600u
#define ATTACH_RETRY_MS 10000u

struct options {
	const char *uri;
	uint64_t interval_ms;
	uint64_t idle_interval_ms; /* --idle-interval: the stretched bound */
	uint64_t lease_s;
	const char *metrics_file;
	const char *wakes_file;  /* --wakes-file: host_wakes_bridge.h */
	const char *hooks_dir;
	uint64_t hook_timeout_ns;
	uint64_t stop_timeout_ns; /* --stop-timeout: see stop.h */
	bool once;
	const char *stats_file;
	bool verbose;
	enum stats_kind source;  /* --source; STATS_FILE with --stats-file */
	bool remote;             /* --libvirt names another host: libvirt's
				  * statistics only */
};

/* One libvirt domain the bridge has seen. */
struct tracked {
	char *name;
	char uuid[VIR_UUID_STRING_BUFLEN];
	virDomainPtr dom;        /* from the latest scan */
	struct domain_idle *di;
	struct host_vm *host;    /* kvm or proc source; NULL: libvirt's */
	bool host_failed;        /* cannot be attached: libvirt's (auto) or
				  * not watched (kvm, proc) until it can */
	uint64_t attach_retry_ns; /* then: when to try again (monotonic) */
	bool seen;               /* in the current scan */
	bool watched;            /* has statistics: started hook, metadata */
	bool skipped;            /* no statistics in the latest scan */
	bool warned;             /* the no-statistics warning was given */
	bool meta_failed;        /* the last metadata change failed */
	bool skipped_once;       /* was ever skipped (no statistics) */
	enum sysidle_state published;
	uint64_t since_unix_ms;  /* when @published began */
	uint64_t noted_unix_ms;  /* when FULL_NOTED was reached */
	uint64_t lease_until_ms; /* the published metadata's valid_until */
	struct duty_cycle *duty; /* fed at each state published, from the
				  * first one on (monotonic clock) */
	struct duty_report duty_doc; /* as of @since_unix_ms: the element's */
	uint64_t duty_unix_ms;   /* when @duty began (wall clock) */
	char *xml;               /* libvirt's domain XML, as last read for
				  * the hooks (their stdin at "stopped") */
	unsigned int first_scan; /* scans_done when first seen */
	unsigned int ncpus;
	struct host_wakes *wakes; /* the host's view of its wake-ups */
	uint64_t wakes_retry_ns; /* no process found: when to look again */
	char reason[160];        /* the latest scan's */
};

/* The bridge: its options and the domains it tracks. main() holds the
 * one there is and passes it to whoever needs it. */
struct bridge {
	struct options opt;
	struct tracked **doms;   /* the domains seen, in no order */
	size_t ndoms;
	unsigned int scans_done; /* scans processed: 0 during the first */
	char **unknown;          /* replay records naming no domain (warned) */
	size_t nunknown;
};

/* sysidle-libvirt.c */
void warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void warn_nowait(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
uint64_t unix_ms(void);
const char *lv_error(void);

/* options.c: fills @o from the configuration file and @argv (the
 * command line wins); -1 after the message (exit 2). --help and --version
 * print and exit 0. The strings @o points to live as long as the process. */
int parse_options(int argc, char **argv, struct options *o);

/* domains.c */
/* One scan: each active domain's machine fed, its changes published, the
 * domains gone unwatched and freed. */
void process_scan(struct bridge *b, struct stats_scan *scan);
/* A replay record naming no libvirt domain: one warning per name. */
void warn_unknown(struct bridge *b, const char *name);
/* --once: each domain's state. */
void print_once(const struct bridge *b);
/* @t is no longer watched: a fully idle domain's "idle end", then
 * "stopped end" (@gone: the domain stopped) or "unwatched end" (it runs
 * on: the bridge stops). */
void unwatch(const struct bridge *b, struct tracked *t, const char *why,
	     bool gone);
void tracked_free(struct tracked *t);
/* After hook_queue_stop(): the dropped hook events, if any. */
void report_dropped_hooks(void);
/* At exit: what domains.c still holds. */
void domains_free(struct bridge *b);

#endif
