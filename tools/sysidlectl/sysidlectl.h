/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * sysidlectl: the client of the VMM's control socket (see vmm/export/README.md
 * for the protocol and tools/sysidlectl.md for the manual), on common's
 * control-socket client (ctl_client.h).
 *
 *   sysidlectl [--dir DIR] [--json] [--timeout SECONDS] COMMAND
 *   list | status NAME | watch NAME | kick NAME | pause NAME | resume NAME
 *
 * main.c: the options and the command line; commands.c: the commands;
 * output.c: the human and JSON output. Single-threaded. Every socket is
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
