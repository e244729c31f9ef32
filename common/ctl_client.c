/* SPDX-License-Identifier: GPL-2.0-only */
/* A client of the VMM's control socket: see ctl_client.h. */
#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "ctl_client.h"
#include "monotonic.h"

/* Milliseconds left before @deadline (-1: none) for poll(). */
static int remaining(int64_t deadline)
{
	int64_t left;

	if (deadline < 0)
		return -1;
	left = deadline - monotonic_ms();
	if (left < 0)
		return 0;
	return left > 1000000 ? 1000000 : (int)left;
}

/* poll() the socket; 1 ready, 0 timeout, CTL_INTR, -1 error. */
static int wait_fd(struct ctl_conn *c, short events, int64_t deadline)
{
	struct pollfd p = { .fd = c->fd, .events = events };
	struct timespec ts, *tp = NULL;
	int ms, n;

	for (;;) {
		if (c->intr && *c->intr)
			return CTL_INTR;
		ms = remaining(deadline);
		if (ms >= 0) {
			ts.tv_sec = ms / 1000;
			ts.tv_nsec = (long)(ms % 1000) * 1000000;
			tp = &ts;
		}
		n = ppoll(&p, 1, tp, c->sigmask);
		if (n >= 0)
			return n;
		if (errno != EINTR)
			return -1;
	}
}

int ctl_socket_path(const char *dir, const char *name, char *path,
		    size_t size)
{
	int n;

	if (strchr(name, '/'))
		n = snprintf(path, size, "%s", name);
	else
		n = snprintf(path, size, "%s/%s.sock", dir, name);
	return n < 0 || (size_t)n >= size ? -1 : 0;
}

int ctl_open(struct ctl_conn *c, int64_t deadline)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };

	c->buf = NULL;
	c->len = c->cap = c->skip = 0;
	c->lines = 0;
	c->err[0] = '\0';
	memcpy(sa.sun_path, c->path, sizeof(sa.sun_path));
	c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (c->fd < 0) {
		snprintf(c->err, sizeof(c->err), "socket: %s", strerror(errno));
		return -1;
	}
	/* A non-blocking AF_UNIX connect fails with EAGAIN while the
	 * server's backlog is full: try again until the deadline. */
	while (connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int e = errno;

		if (e == EAGAIN || e == EINTR) {
			if (remaining(deadline) == 0) {
				snprintf(c->err, sizeof(c->err), "%s: no "
					 "connection within the timeout "
					 "(server busy)", c->path);
				return -1;
			}
			poll(NULL, 0, 10); /* a bounded wait, then retry */
			continue;
		}
		if (e == ENOENT)
			snprintf(c->err, sizeof(c->err), "no such socket %s",
				 c->path);
		else if (e == ECONNREFUSED)
			snprintf(c->err, sizeof(c->err), "the VM is not "
				 "running (stale socket %s: connection "
				 "refused)", c->path);
		else if (e == EACCES || e == EPERM)
			snprintf(c->err, sizeof(c->err), "permission denied "
				 "(%s)", c->path);
		else
			snprintf(c->err, sizeof(c->err), "%s: %s", c->path,
				 strerror(e));
		errno = e;
		return -1;
	}
	return 0;
}

void ctl_close(struct ctl_conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	free(c->buf);
	c->buf = NULL;
	c->len = c->cap = c->skip = 0;
}

int ctl_send(struct ctl_conn *c, const char *cmd, int64_t deadline)
{
	json_object *req = json_object_new_object();
	const char *s;
	char *line = NULL;
	size_t off = 0, len;
	int ret = -1;

	if (!req || json_object_object_add(req, "cmd",
					   json_object_new_string(cmd))) {
		snprintf(c->err, sizeof(c->err), "out of memory");
		goto out;
	}
	s = json_object_to_json_string_ext(req, JSON_C_TO_STRING_PLAIN);
	if (!s || asprintf(&line, "%s\n", s) < 0) {
		line = NULL;
		snprintf(c->err, sizeof(c->err), "out of memory");
		goto out;
	}
	len = strlen(line);
	while (off < len) {
		ssize_t n = send(c->fd, line + off, len - off,
				 MSG_NOSIGNAL | MSG_DONTWAIT);
		int w;

		if (n >= 0) {
			off += (size_t)n;
			continue;
		}
		if (errno == EPIPE || errno == ECONNRESET) {
			ret = 0; /* read what it said */
			goto out;
		}
		if (errno != EAGAIN && errno != EINTR) {
			snprintf(c->err, sizeof(c->err), "%s: send: %s",
				 c->path, strerror(errno));
			goto out;
		}
		w = wait_fd(c, POLLOUT, deadline);
		if (w <= 0) {
			snprintf(c->err, sizeof(c->err), "%s: %s", c->path,
				 w == 0 ? "timeout sending the request" :
				 strerror(errno));
			goto out;
		}
	}
	ret = 0;
out:
	free(line);
	json_object_put(req);
	return ret;
}

int ctl_line(struct ctl_conn *c, char **line, int64_t deadline)
{
	for (;;) {
		char *nl;
		ssize_t n;
		int w;

		if (c->skip) {
			memmove(c->buf, c->buf + c->skip, c->len - c->skip);
			c->len -= c->skip;
			c->skip = 0;
		}
		nl = c->len ? memchr(c->buf, '\n', c->len) : NULL;
		if (nl && (size_t)(nl - c->buf) <= CTL_MAX_LINE) {
			*nl = '\0';
			*line = c->buf;
			c->skip = (size_t)(nl - c->buf) + 1;
			c->lines++;
			return CTL_OK;
		}
		if (nl || c->len > CTL_MAX_LINE) {
			snprintf(c->err, sizeof(c->err), "malformed reply: "
				 "line %lu from %s: longer than %u bytes",
				 c->lines + 1, c->path, CTL_MAX_LINE);
			return CTL_ERR;
		}
		if (c->cap - c->len < 4096) {
			size_t cap = c->cap ? 2 * c->cap : 16384;
			char *b = realloc(c->buf, cap + 1);

			if (!b) {
				snprintf(c->err, sizeof(c->err),
					 "out of memory");
				return CTL_ERR;
			}
			c->buf = b;
			c->cap = cap;
		}
		/* Checked here too: a peer dripping bytes never lets the
		 * wait below time out. */
		if (deadline >= 0 && monotonic_ms() >= deadline)
			return CTL_TIMEOUT;
		n = recv(c->fd, c->buf + c->len, c->cap - c->len, 0);
		if (n > 0) {
			c->len += (size_t)n;
			continue;
		}
		if (n == 0) {
			if (!c->len)
				return CTL_EOF;
			snprintf(c->err, sizeof(c->err), "malformed reply: "
				 "the connection closed within a line");
			return CTL_ERR;
		}
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN) {
			snprintf(c->err, sizeof(c->err), "%s: %s", c->path,
				 strerror(errno));
			return CTL_ERR;
		}
		w = wait_fd(c, POLLIN, deadline);
		if (w == 0)
			return CTL_TIMEOUT;
		if (w == CTL_INTR)
			return CTL_INTR;
		if (w < 0) {
			snprintf(c->err, sizeof(c->err), "poll: %s",
				 strerror(errno));
			return CTL_ERR;
		}
	}
}

json_object *ctl_parse_object(struct ctl_conn *c, const char *line)
{
	json_tokener *tok = json_tokener_new();
	json_object *o = NULL;
	size_t len = strlen(line);

	if (!tok) {
		snprintf(c->err, sizeof(c->err), "out of memory");
		return NULL;
	}
	o = json_tokener_parse_ex(tok, line, (int)len);
	if (!o || json_tokener_get_error(tok) != json_tokener_success ||
	    json_tokener_get_parse_end(tok) != len ||
	    !json_object_is_type(o, json_type_object)) {
		json_object_put(o);
		o = NULL;
		snprintf(c->err, sizeof(c->err), "malformed reply: %.60s%s",
			 line, len > 60 ? "..." : "");
	}
	json_tokener_free(tok);
	return o;
}

json_object *ctl_member(json_object *o, const char *key, json_type type)
{
	json_object *v;

	if (!o || !json_object_object_get_ex(o, key, &v) ||
	    !json_object_is_type(v, type))
		return NULL;
	return v;
}

json_object *ctl_number(json_object *o, const char *key)
{
	json_object *v = ctl_member(o, key, json_type_int);

	return v ? v : ctl_member(o, key, json_type_double);
}

const char *ctl_str_or(json_object *o, const char *key, const char *def)
{
	json_object *v = ctl_member(o, key, json_type_string);

	return v ? json_object_get_string(v) : def;
}

json_object *ctl_request(struct ctl_conn *c, const char *cmd,
			 int64_t deadline, int *res)
{
	json_object *r, *ok;
	char *line;
	int n;

	*res = CTL_ERR;
	if (ctl_send(c, cmd, deadline))
		return NULL;
	n = ctl_line(c, &line, deadline);
	if (n == CTL_TIMEOUT) {
		*res = CTL_TIMEOUT;
		snprintf(c->err, sizeof(c->err), "no reply within %g s "
			 "(timeout)", (double)c->timeout_ms / 1000);
		return NULL;
	}
	if (n == CTL_EOF)
		snprintf(c->err, sizeof(c->err), "the VM closed the "
			 "connection without a reply");
	if (n == CTL_INTR)
		*res = CTL_INTR;
	if (n != CTL_OK)
		return NULL;
	r = ctl_parse_object(c, line);
	if (!r)
		return NULL;
	ok = ctl_member(r, "ok", json_type_boolean);
	if (!ok) {
		snprintf(c->err, sizeof(c->err), "malformed reply: no \"ok\"");
	} else if (!json_object_get_boolean(ok)) {
		snprintf(c->err, sizeof(c->err), "%s",
			 ctl_str_or(r, "error", "error without a reason"));
	} else {
		return r;
	}
	json_object_put(r);
	return NULL;
}
