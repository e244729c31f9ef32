/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The control socket's connections (control.c) and their requests
 * (control_request.c): what the two files share. Export thread only.
 */
#ifndef VMM_EXPORT_CONTROL_CLIENT_H
#define VMM_EXPORT_CONTROL_CLIENT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <json-c/json.h>

#include "export/export.h"

#define CONTROL_MAX_CLIENTS 32
#define CONTROL_LINE_MAX 4096       /* a request, without its newline */
#define CONTROL_OUT_MAX (64 * 1024) /* queued output per client */
#define CONTROL_BACKLOG 16
#define CONTROL_ACCEPT_BATCH 16     /* accepts per wake-up */
/* A connection that has sent no request yet ("silent") is closed after
 * this long, and sooner when the table is full and another client
 * connects: the oldest silent one makes room for it. Clients dropped in
 * one wake-up wait in the table until the next control_pollfds. */
#define CONTROL_SILENT_MAX_NS (10 * 1000000000ull)
#define CONTROL_SLOTS (CONTROL_MAX_CLIENTS + CONTROL_ACCEPT_BATCH)
#define JSON_FLAGS (JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE)

struct client {
	int fd;
	bool watch;     /* "watch" given: events only, input ignored */
	bool closing;   /* close once the queued output is written */
	bool dead;      /* closed: freed by the next control_pollfds */
	bool spoke;     /* has sent a request (a non-blank line) */
	uint64_t accepted_ns; /* now_ns() at its accept */
	uint64_t dropped; /* events not sent since its last line */
	uint64_t pause_want; /* a "pause" reply waits for this pause_completed()
			      * value, 0: none */
	struct json_object *pause_id; /* its request's "id" (a reference) */
	/* A filtered watch ("edges":"full_idle", control_edges.c): */
	bool edges;          /* settled full-idle edges only, no state events */
	bool edge_idle;      /* the status last reported */
	bool edge_in;        /* in FULL_NOTED, as the last event said */
	int edge_state;      /* the state the last event went to */
	uint64_t edge_since_ns; /* when edge_in last changed (monotonic) */
	uint64_t enter_ns, leave_ns; /* its enter_after_ms, leave_after_ms */
	size_t in_len;
	char in[CONTROL_LINE_MAX + 1];
	char *out;      /* queued output: out[out_off .. out_len) */
	size_t out_off, out_len, out_cap;
};

struct control_socket {
	int fd;                 /* the listening socket, -1: none */
	char path[CONTROL_PATH_MAX];
	dev_t dev;              /* the socket file we bound, to remove */
	ino_t ino;              /* only that one at exit */
	struct vm *vm;
	struct vm_status *st;   /* status snapshots, export thread */
	bool accept_paused;     /* out of fds: until a client goes away */
	struct client *clients[CONTROL_SLOTS];
	unsigned int nclients;
	/* What control_pollfds filled, for control_handle: */
	bool polled_listen;
	struct client *polled[CONTROL_SLOTS];
	int npolled;
	_Atomic uint64_t watch_dropped; /* relaxed, see control_watch_dropped */
};

/* control.c */
/* The control socket (control.c's own): the main thread's control_open
 * and control_close, the export thread in between. */
struct control_socket *control_socket(void);
/* Frees @c (its socket closed): the export thread for a dropped client,
 * the main thread at control_close. */
void client_free(struct client *c);
void client_drop(struct client *c);
/* Queue the reply @obj (consumed) as one line and write it. A reply that
 * does not fit drops the client. */
void client_reply(struct client *c, struct json_object *obj);
/* An error reply; @id (borrowed, may be NULL) copied. */
void client_error(struct client *c, struct json_object *id,
		  const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Queue the event line @s (@len bytes) for the watcher @c, behind a
 * "dropped" line if it missed some; an event that does not fit is counted
 * as dropped. */
void client_event(struct client *c, const char *s, size_t len);

/* control_edges.c */
/* Parse a filtered watch request @req into @c; NULL when it is one (or
 * not filtered), else the error text. */
const char *edges_parse(struct client *c, struct json_object *req);
/* Set up @c's filter from the status @st at the watch reply; adds
 * "full_idle" and the parameters to the reply @r. */
void edges_start(struct client *c, const struct vm_status *st,
		 struct json_object *r);
/* A state event for a filtered watcher. */
void edges_state(struct client *c, const struct vm_event *ev);
/* The filtered watchers of @s whose edges fall due at @now: sent. Returns
 * the earliest deadline still pending (UINT64_MAX: none). */
uint64_t edges_due(struct control_socket *s, uint64_t now);

/* control_request.c: one request line (@len bytes, no newline); serve the complete lines @c has buffered, up to a
 * "pause" whose reply must come first; send a "pause" reply once the
 * pause is complete (true: sent, or none to send). */
void client_request(struct client *c, const char *line, size_t len);
void client_serve(struct client *c);
bool client_pause_reply(struct client *c);

#endif
