/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * A client of the VMM's control socket (vmm/export/README.md, "Control socket
 * protocol"):
 * a unix stream socket, DIR/NAME.sock, JSON lines both ways: a request
 * {"cmd":CMD}, one reply {"ok":true,...} or {"ok":false,"error":..}, and
 * for "watch" one event object per line after the reply.
 *
 * The socket is non-blocking and every wait is a ppoll() bounded by a
 * deadline (monotonic ms from monotonic_ms(), monotonic.h; -1: none). A
 * line received is at most CTL_MAX_LINE bytes without its newline; past
 * that the read ends with "malformed reply: line N from PATH: longer than
 * CTL_MAX_LINE bytes", so the buffer never holds more than CTL_MAX_LINE
 * plus one read (2 * CTL_MAX_LINE + 1 bytes allocated at most). Errors
 * are one line of text in conn->err.
 * Single-threaded per connection.
 */
#ifndef SYSIDLE_COMMON_CTL_CLIENT_H
#define SYSIDLE_COMMON_CTL_CLIENT_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/un.h>

#include <json-c/json.h>

#define CTL_DEFAULT_DIR "/run/sysidle" /* the VMM's default socket dir */
#define CTL_MAX_LINE (1u << 20)        /* longest line accepted (1 MiB) */

/* ctl_line() results besides CTL_OK (a line) */
enum { CTL_OK = 1, CTL_EOF = 0, CTL_ERR = -1, CTL_TIMEOUT = -2,
       CTL_INTR = -3 };

struct ctl_conn {
	int fd;                     /* -1: not connected */
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	int64_t timeout_ms;         /* the timeout the deadlines came from
				     * (for the messages) */
	/* A wait ends with CTL_INTR once *@intr is non-zero; the waits use
	 * @sigmask (NULL: the thread's) as ppoll()'s mask, so that signals
	 * blocked elsewhere are taken only there. */
	volatile sig_atomic_t *intr;
	const sigset_t *sigmask;
	char *buf;                  /* received bytes not consumed yet */
	size_t len, cap, skip;      /* skip: the last line returned */
	unsigned long lines;        /* lines returned (for the messages) */
	char err[512];              /* why the last call failed */
};

/* The socket path for @name: @name itself when it has a '/', else
 * @dir/@name.sock. Returns 0, or -1 when it does not fit in @size. */
int ctl_socket_path(const char *dir, const char *name, char *path,
		    size_t size);

/* A connection to @c->path (set by the caller, e.g. ctl_socket_path) by
 * @deadline; the other members are reset, but @intr, @sigmask and
 * @timeout_ms are kept. Returns 0, or -1 with errno and @c->err set ("no
 * such socket P", "the VM is not running (stale socket P: connection
 * refused)", "permission denied (P)", ...). */
int ctl_open(struct ctl_conn *c, int64_t deadline);
void ctl_close(struct ctl_conn *c);

/* Send the request {"cmd":@cmd} by @deadline. Returns 0, or -1 with @c->err
 * set; a peer that already closed is not an error here (it may have sent
 * its reason: read it). */
int ctl_send(struct ctl_conn *c, const char *cmd, int64_t deadline);

/* The next line (NUL-terminated, without its newline, valid until the next
 * call) into *@line, waiting until @deadline (-1: forever). Returns CTL_OK,
 * CTL_EOF (closed, no partial line left), CTL_TIMEOUT, CTL_INTR or CTL_ERR
 * (@c->err set). */
int ctl_line(struct ctl_conn *c, char **line, int64_t deadline);

/* @line as one JSON object, or NULL (@c->err: "malformed reply: ..."). */
json_object *ctl_parse_object(struct ctl_conn *c, const char *line);

/* Send @cmd and read its reply by @deadline. Returns the reply (ok true;
 * the caller's to put), or NULL with @c->err set and *@res CTL_INTR,
 * CTL_TIMEOUT or CTL_ERR (an error reply: @c->err is its "error"). */
json_object *ctl_request(struct ctl_conn *c, const char *cmd,
			 int64_t deadline, int *res);

/* Members of a reply: @key of @type in @o, or NULL. */
json_object *ctl_member(json_object *o, const char *key, json_type type);
/* A member that may be an int or a double (both are numbers in JSON). */
json_object *ctl_number(json_object *o, const char *key);
/* A string member, or @def. */
const char *ctl_str_or(json_object *o, const char *key, const char *def);

#endif
