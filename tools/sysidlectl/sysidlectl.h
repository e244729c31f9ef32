/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * sysidlectl: the client of the VMM's control socket (see vmm/export/README.md
 * for the protocol and tools/sysidlectl.md for the manual), on common's
 * control-socket client (ctl_client.h).
 *
 *   sysidlectl [--dir DIR] [--json] [--timeout SECONDS] COMMAND
 *   list | status NAME | watch NAME | kick NAME | pause NAME | resume NAME
 *   | top | why NAME | report | timeline NAME --svg FILE
 *
 * main.c: the options and the command line; commands.c: the commands;
 * output.c: the human and JSON output; top.c, watch_all.c, why.c (with
 * why_rules.c, the table of what each wake source means), report.c (with
 * bridge_file.c, the libvirt bridge's metrics file) and timeline.c (the
 * SVG) one command each. Single-threaded. Every socket is
 * non-blocking and every wait is a poll bounded by the --timeout deadline,
 * except the wait for watch's events, which lasts until the VM stops or
 * SIGINT.
 */
#ifndef SYSIDLECTL_H
#define SYSIDLECTL_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#include "ctl_client.h"

#define DEFAULT_DIR CTL_DEFAULT_DIR /* the VMM's default socket directory */

enum {
	EXIT_OK = 0,
	EXIT_ERR = 1,    /* an error from the VM or the connection */
	EXIT_USAGE = 2,  /* bad usage */
	EXIT_NO_SYSIDLE = 3, /* why: the VM runs without --sysidle */
	EXIT_SIGINT = 130, /* watch: 128 + the signal (SIGINT, SIGTERM) */
};

struct options {
	const char *dir;
	bool json;
	int64_t timeout_ms;
};

/* main.c */
/* The options of the command line, set before any command runs. */
const struct options *options(void);
void errmsg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Flush stdout; an error (a closed pipe, a full disk) is reported. */
int flush_out(void);

/* commands.c */
/* Connect to VM @name (a name, or a socket path with a '/') and ask @cmd
 * ({"cmd":@cmd}); the caller closes @c (ctl_close) in any case and puts
 * the reply. Returns the reply, or NULL after one error line on stderr
 * (*@rc: the exit status). */
json_object *ask(struct ctl_conn *c, const char *name, const char *cmd,
		 int *rc);
/* The status object of status reply @reply (borrowed from it), or NULL
 * with @c->err set. */
json_object *status_vm(struct ctl_conn *c, json_object *reply);
/* The *.sock entries of DIR, sorted (caller frees each and the array);
 * NULL after an error line (*@rc the exit status). */
char **list_sockets(size_t *n, int *rc);
/* The status reply of DIR/@ent and its status object in *@vm; NULL with
 * @why set when there is none. */
json_object *fetch_status(const char *ent, json_object **vm, char *why,
			  size_t size);
/* watch and top: the SIGINT/SIGTERM signal caught (0: none yet), and the
 * signals blocked but in the returned ppoll() mask. */
int watch_interrupted(void);
const sigset_t *watch_signals(void);
/* A connection not open yet, interrupted by those signals. */
void conn_init(struct ctl_conn *c);
/* The vCPUs of status object @vm halted ("idle"), and in *@total all. */
size_t vcpus_halted(json_object *vm, size_t *total);
/* Each returns the exit status. */
int cmd_watch_all(void);
int cmd_top(double interval_s, long iterations);
int cmd_list(void);
int cmd_status(const char *name);
/* kick, pause, resume */
int cmd_simple(const char *name, const char *cmd);
int cmd_watch(const char *name);

/* why_rules.c: what a wake source means and what to do about it. */
struct why_rule {
	const char *source;  /* the status's source name */
	const char *detail;  /* the start of its "last", NULL: any */
	const char *label;   /* "LAPIC periodic timer" */
	const char *what;    /* what it is, in plain words */
	const char *advice;  /* what to do ("": nothing to say) */
	bool tick;           /* a periodic tick: report's "a tick policy" */
	int timekeeper;      /* 1: the timekeeper's only, 0: the others', -1 */
};
/* The rule for a wake_sources row (@source, @last: its "last", may be
 * NULL; @timekeeper: its vCPU is the VM's timekeeper); never NULL (a
 * rule for an unknown source). */
const struct why_rule *why_rule_for(const char *source, const char *last,
				    bool timekeeper);
/* The plain words for a housekeeping wake-up reason ("" if none). */
const char *why_housekeeping_note(const char *reason);
/* "250/s", "2.5/s", "3.0/min" (@per_s below 1/s), "?" */
void fmt_per_s(double per_s, char *buf, size_t size);
/* The row's label: "LAPIC periodic timer", "IPIs from vCPU 2", "device
 * interrupt vector 0x40" into @buf. */
void why_label(const char *source, const char *last, char *buf, size_t size);

/* bridge_file.c: the libvirt domains of the bridge's metrics file. */
#define BRIDGE_DOMAINS_MAX 4096
struct bridge_domain {
	char name[256], uuid[64];
	int state;            /* 0 NOT .. 4 FULL_NOTED, -1: not in the file */
	double since_s;       /* Unix time it entered @state */
	double full_since_s;  /* Unix time its full idle began, 0: not idle */
	double idle_done_s;   /* full idle in ended periods (0: not given) */
};
struct bridge_domains {
	struct bridge_domain *v;
	size_t n;
	bool up;              /* sysidle_libvirt_up 1: the bridge runs */
};
/* Read @path into @d (bridge_free it after a 0); 0, or -1 after an error
 * line (the file cannot be opened). */
int bridge_read(const char *path, struct bridge_domains *d);
void bridge_free(struct bridge_domains *d);

/* why.c: number member @key of @o (NULL: none) as a double, @def when
 * it is missing or not a number. */
double num_or(json_object *o, const char *key, double def);
/* why.c, report.c, timeline.c: each returns the exit status; the options
 * are parsed, DIR checked (need_dir), @name non-empty. */
int cmd_why(const char *name);
int cmd_why_libvirt(const char *name, const char *wakes_file);
/* why_libvirt.c: the bridge's --wakes-file parsed (NULL after an error
 * line); the domain named @name (or of that uuid) in it, or NULL. */
json_object *wakes_file_read(const char *path);
json_object *wakes_file_domain(json_object *file, const char *name);
/* @wakes_file: the bridge's, for its domains' duty cycles; NULL: none. */
int cmd_report(const char *bridge_metrics, const char *wakes_file);
int cmd_timeline(const char *name, const char *svg);

/* output.c */
/* "1.5s", "3m04s", "2h05m", "3d04h" */
void fmt_duration(double s, char *buf, size_t size);
/* Local time "HH:MM:SS.mmm" of @unix_ms. */
void fmt_clock(int64_t unix_ms, char *buf, size_t size);
void print_json(json_object *o);
/* status, human form */
void print_status(json_object *vm);
/* watch, human form: one event line. */
void print_event(json_object *e);

#endif
