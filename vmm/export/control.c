/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The control socket (protocol in vmm/export/README.md): a Unix stream
 * socket, mode
 * 0600, serving peers with the VMM's euid or root. Requests are JSON lines:
 * "status" (a snapshot of the VM), "watch" (one line per idle state
 * change, pause and resume from then on), "kick" (end full idle), "pause"
 * and "resume" (pause.c). A "pause" reply waits, without blocking the
 * export thread, until every vCPU has parked: the client's later requests
 * wait behind it (replies stay in order), and control_pollfds, which runs
 * before each poll(), sends it once pause_completed() says so (the
 * "paused" event wakes the export thread).
 *
 * Threads: control_open and control_close (control_open.c) run on the main
 * thread, before the export thread starts and after it stopped; everything
 * else runs on the export thread, except control_watch_dropped (any
 * thread). Every
 * client socket is non-blocking and has its own bounded output buffer: a
 * client that does not read never blocks the VMM. A request reply that
 * does not fit drops the client; a watch event that does not fit is
 * dropped for that client and counted (the client is told how many at its
 * next line).
 */
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <json-c/json.h>

#include <sysidle/sysidle.h>

#include "base/error.h"
#include "base/time.h"
#include "export/control.h"
#include "export/control_client.h"
#include "export/export.h"

static struct control_socket ctl = { .fd = -1 };

struct control_socket *control_socket(void)
{
	return &ctl;
}

/* ---- clients ---------------------------------------------------------- */

/* Export thread (a dropped client), or the main thread at close. */
void client_free(struct client *c)
{
	json_object_put(c->pause_id);
	if (c->fd >= 0)
		close(c->fd);
	free(c->out);
	free(c);
}

/* ---- output ----------------------------------------------------------- */

/* Export thread: the client goes away now (its struct at the next
 * control_pollfds, as control_handle may still hold it). */
void client_drop(struct client *c)
{
	if (c->dead)
		return;
	close(c->fd);
	c->fd = -1;
	c->dead = true;
	ctl.accept_paused = false;
}

/* Export thread: write what @c has queued, as far as its socket takes it.
 * Drops @c on a write error; closes it when it is closing and done. */
static void client_flush(struct client *c)
{
	ssize_t n;

	while (!c->dead && c->out_off < c->out_len) {
		n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off,
			 MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				client_drop(c);
			return;
		}
		c->out_off += (size_t)n;
	}
	if (c->dead)
		return;
	c->out_off = c->out_len = 0;
	if (c->closing && !c->pause_want) /* a "pause" reply still to come */
		client_drop(c);
}

/* Export thread: room for @len more bytes in @c's buffer, if the limit
 * allows (an empty buffer takes one line of any size). */
static bool client_room(struct client *c, size_t len)
{
	size_t queued = c->out_len - c->out_off;
	size_t cap;
	char *p;

	if (queued && queued + len > CONTROL_OUT_MAX)
		return false;
	if (c->out_off && c->out_len + len > c->out_cap) {
		memmove(c->out, c->out + c->out_off, queued);
		c->out_off = 0;
		c->out_len = queued;
	}
	if (c->out_len + len <= c->out_cap)
		return true;
	for (cap = c->out_cap ? c->out_cap : 4096; cap < c->out_len + len;)
		cap *= 2;
	p = realloc(c->out, cap);
	if (!p)
		return false;
	c->out = p;
	c->out_cap = cap;
	return true;
}

/* Export thread: @s and a newline into @c's buffer; client_room(c, len + 1)
 * said yes. */
static void client_append(struct client *c, const char *s, size_t len)
{
	memcpy(c->out + c->out_len, s, len);
	c->out_len += len;
	c->out[c->out_len++] = '\n';
}

/* Export thread: queue the reply @obj (consumed) as one line and write it.
 * A reply that does not fit drops the client. */
void client_reply(struct client *c, struct json_object *obj)
{
	size_t len;
	const char *s = obj ? json_object_to_json_string_length(obj,
						JSON_FLAGS, &len) : NULL;

	if (!s || !client_room(c, len + 1))
		client_drop(c);
	else
		client_append(c, s, len);
	json_object_put(obj);
	client_flush(c);
}

/* Export thread: an error reply; @id (borrowed, may be NULL) copied. */
void client_error(struct client *c, struct json_object *id,
		  const char *fmt, ...)
{
	struct json_object *r = json_object_new_object();
	char msg[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (r) {
		json_object_object_add(r, "ok", json_object_new_boolean(0));
		json_object_object_add(r, "error", json_object_new_string(msg));
		if (id)
			json_object_object_add(r, "id", json_object_get(id));
	}
	client_reply(c, r);
}

/* Export thread: one error line to a connection that is not served, then
 * close it. A fresh socket's buffer is empty: the short line fits. */
static void refuse(int fd, const char *error)
{
	struct json_object *r = json_object_new_object();
	struct iovec iov[2] = { { 0 }, { .iov_base = "\n", .iov_len = 1 } };
	struct msghdr msg = { .msg_iov = iov, .msg_iovlen = 2 };
	const char *s;

	if (r) {
		json_object_object_add(r, "ok", json_object_new_boolean(0));
		json_object_object_add(r, "error",
				       json_object_new_string(error));
		s = json_object_to_json_string_length(r, JSON_FLAGS,
						      &iov[0].iov_len);
		iov[0].iov_base = (void *)s;
		/* Best effort: the connection is closed either way. */
		if (s)
			(void)!sendmsg(fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
		json_object_put(r);
	}
	close(fd);
}

/* Export thread: @c's socket is readable (or hung up). Reads once, then
 * serves the complete lines it has. Not called while a "pause" reply is
 * pending (control_pollfds leaves POLLIN out then). */
static void client_input(struct client *c)
{
	ssize_t n;

	do
		n = recv(c->fd, c->in + c->in_len, sizeof(c->in) - c->in_len,
			 MSG_DONTWAIT);
	while (n < 0 && errno == EINTR);
	if (n < 0) {
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			client_drop(c);
		return;
	}
	if (n == 0) {
		/* End of input: a last line without its newline counts, the
		 * replies go out, then the connection closes (a watcher that
		 * only shut down its side of the connection stays). */
		c->in[c->in_len] = '\0';
		if (c->in_len)
			client_request(c, c->in, c->in_len);
		c->in_len = 0;
		if (c->dead || c->watch)
			return;
		c->closing = true;
		client_flush(c);
		return;
	}
	c->in_len += (size_t)n;
	client_serve(c);
}

/* Export thread: the clients not dropped. */
static unsigned int control_live(void)
{
	unsigned int n = 0;

	for (unsigned int i = 0; i < ctl.nclients; i++)
		n += !ctl.clients[i]->dead;
	return n;
}

/* Export thread: @c has sent no request yet (and waits for nothing). */
static bool client_silent(const struct client *c)
{
	return !c->dead && !c->spoke && !c->watch && !c->closing;
}

/* Export thread, the table full: drop the oldest silent client to make
 * room for a new one. False when every client has spoken. */
static bool control_evict_silent(void)
{
	struct client *old = NULL;

	for (unsigned int i = 0; i < ctl.nclients; i++) {
		struct client *c = ctl.clients[i];

		if (client_silent(c) &&
		    (!old || c->accepted_ns < old->accepted_ns))
			old = c;
	}
	if (!old)
		return false;
	client_error(old, NULL, "closed: no request, and another client "
		     "needed the place");
	client_drop(old);
	return true;
}

/* Export thread: close the silent clients older than
 * CONTROL_SILENT_MAX_NS. */
static void control_expire_silent(uint64_t now)
{
	for (unsigned int i = 0; i < ctl.nclients; i++) {
		struct client *c = ctl.clients[i];

		if (client_silent(c) &&
		    now - c->accepted_ns >= CONTROL_SILENT_MAX_NS) {
			client_error(c, NULL, "closed: no request in %llu s",
				     CONTROL_SILENT_MAX_NS / 1000000000ull);
			client_drop(c);
		}
	}
}

/* Export thread: how long poll() may wait before a silent client's time
 * is up or a filtered watcher's edge falls due, in ms (the edges already
 * due are sent here); -1 (for ever) when there is neither, so an idle
 * VM's export thread still sleeps. */
int control_poll_timeout(void)
{
	uint64_t now = now_ns(), first = UINT64_MAX, end;

	for (unsigned int i = 0; i < ctl.nclients; i++) {
		struct client *c = ctl.clients[i];
		uint64_t end = c->accepted_ns + CONTROL_SILENT_MAX_NS;

		if (client_silent(c) && end < first)
			first = end;
	}
	end = edges_due(&ctl, now);
	if (end < first)
		first = end;
	if (first == UINT64_MAX)
		return -1;
	return first <= now ? 0 : (int)((first - now + 999999) / 1000000);
}

/* Export thread: a new connection on the listening socket. */
static void control_accept(void)
{
	struct ucred cred;
	socklen_t clen;
	struct client *c;
	int fd;

	for (int i = 0; i < CONTROL_ACCEPT_BATCH; i++) {
		fd = accept4(ctl.fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return;
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			/* Out of descriptors or memory: the listening socket
			 * would stay readable, so it is not polled until a
			 * client goes away or the next state change. */
			vmm_warn("control socket: accept: %s", strerror(errno));
			ctl.accept_paused = true;
			return;
		}
		clen = sizeof(cred);
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) < 0 ||
		    (cred.uid != geteuid() && cred.uid != 0)) {
			refuse(fd, "permission denied");
			continue;
		}
		if ((control_live() >= CONTROL_MAX_CLIENTS &&
		     !control_evict_silent()) || ctl.nclients >= CONTROL_SLOTS) {
			refuse(fd, "too many clients");
			continue;
		}
		c = calloc(1, sizeof(*c));
		if (!c) {
			refuse(fd, "out of memory");
			continue;
		}
		c->fd = fd;
		c->accepted_ns = now_ns();
		ctl.clients[ctl.nclients++] = c;
	}
}

/* ---- the export thread's interface -------------------------------------- */

/* Export thread: free the clients dropped since the last call, then fill
 * @fds. Only this call frees clients, so the pointers recorded for
 * control_handle stay valid until the next one. First, the "pause"
 * replies whose pause is now complete go out, and the requests that
 * waited behind them are served. */
int control_pollfds(struct pollfd *fds, int max)
{
	unsigned int i, j;
	int n = 0;

	for (i = 0; i < ctl.nclients; i++) {
		struct client *c = ctl.clients[i];

		if (!c->dead && c->pause_want && client_pause_reply(c))
			client_serve(c);
	}
	for (i = j = 0; i < ctl.nclients; i++) {
		if (ctl.clients[i]->dead)
			client_free(ctl.clients[i]);
		else
			ctl.clients[j++] = ctl.clients[i];
	}
	ctl.nclients = j;
	ctl.npolled = 0;
	ctl.polled_listen = false;
	if (ctl.fd >= 0 && !ctl.accept_paused && n < max) {
		fds[n++] = (struct pollfd){ .fd = ctl.fd, .events = POLLIN };
		ctl.polled_listen = true;
	}
	for (i = 0; i < ctl.nclients && n < max; i++) {
		struct client *c = ctl.clients[i];
		short ev = 0;

		/* A watcher's input is ignored: only its hang-up (always
		 * reported) matters. A closing client only writes; one
		 * waiting for its "pause" reply reads nothing meanwhile. */
		if (!c->watch && !c->closing && !c->pause_want)
			ev |= POLLIN;
		if (c->out_off < c->out_len)
			ev |= POLLOUT;
		fds[n++] = (struct pollfd){ .fd = c->fd, .events = ev };
		ctl.polled[ctl.npolled++] = c;
	}
	return n;
}

/* Export thread, after poll(): @fds and @n as control_pollfds filled
 * them. */
void control_handle(struct pollfd *fds, int n)
{
	int i = 0, k;

	control_expire_silent(now_ns());
	if (ctl.polled_listen && n > 0) {
		if (fds[0].revents & POLLIN)
			control_accept();
		i = 1;
	}
	for (k = 0; i < n && k < ctl.npolled; i++, k++) {
		struct client *c = ctl.polled[k];
		short re = fds[i].revents;

		if (c->dead || !re)
			continue;
		if (re & (POLLERR | POLLNVAL)) {
			client_drop(c);
			continue;
		}
		if (re & POLLOUT)
			client_flush(c);
		if (c->dead)
			continue;
		if (re & POLLIN)
			client_input(c);
		else if (re & POLLHUP)
			client_drop(c); /* gone: nothing more to read or send */
	}
}

/* Export thread (see control_client.h). */
void client_event(struct client *c, const char *s, size_t len)
{
	struct json_object *d = NULL;
	const char *ds = NULL;
	size_t dlen = 0;

	if (c->out_off < c->out_len)
		client_flush(c);
	if (c->dead)
		return;
	if (c->dropped) {
		d = control_dropped_json(c->dropped);
		ds = json_object_to_json_string_length(d, JSON_FLAGS, &dlen);
	}
	if ((c->dropped && !ds) ||
	    !client_room(c, (ds ? dlen + 1 : 0) + len + 1)) {
		c->dropped++;
		/* relaxed: a statistic, see control_watch_dropped. */
		atomic_fetch_add_explicit(&ctl.watch_dropped, 1,
					  memory_order_relaxed);
	} else {
		if (ds)
			client_append(c, ds, dlen);
		client_append(c, s, len);
		c->dropped = 0;
		client_flush(c);
	}
	json_object_put(d);
}

/* Export thread: @ev as one line to every watcher; a filtered watcher
 * gets its state changes through its filter instead (the line is built
 * only when some watcher takes it). */
void control_broadcast(const struct vm_event *ev)
{
	struct json_object *o = NULL;
	const char *s = NULL;
	size_t len = 0;

	ctl.accept_paused = false;
	for (unsigned int i = 0; i < ctl.nclients; i++) {
		struct client *c = ctl.clients[i];

		if (c->dead || !c->watch)
			continue;
		if (c->edges && ev->kind == VM_EV_STATE) {
			edges_state(c, ev);
			continue;
		}
		if (!o) {
			o = control_event_json(ev);
			if (!o)
				return;
			s = json_object_to_json_string_length(o, JSON_FLAGS,
							      &len);
		}
		if (s)
			client_event(c, s, len);
	}
	json_object_put(o);
}

/* Any thread. */
uint64_t control_watch_dropped(void)
{
	/* relaxed: pairs with the increment in control_broadcast; a
	 * statistic, it orders nothing. */
	return atomic_load_explicit(&ctl.watch_dropped, memory_order_relaxed);
}
