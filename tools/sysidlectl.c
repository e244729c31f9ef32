/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * sysidlectl: the client of the VMM's control socket (see vmm/README.md
 * for the protocol and tools/sysidlectl.md for the manual).
 *
 *   sysidlectl [--dir DIR] [--json] [--timeout SECONDS] COMMAND
 *   list | status NAME | watch NAME | kick NAME | pause NAME | resume NAME
 *
 * Single-threaded. Every socket is non-blocking and every wait is a poll
 * bounded by the --timeout deadline, except the wait for watch's events,
 * which lasts until the VM stops or SIGINT.
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#define DEFAULT_DIR "/run/sysidle" /* the VMM's default socket directory */
#define MAX_LINE (1u << 20)        /* longest reply line accepted */

enum {
	EXIT_OK = 0,
	EXIT_ERR = 1,    /* an error from the VM or the connection */
	EXIT_USAGE = 2,  /* bad usage */
	EXIT_SIGINT = 130, /* watch: 128 + the signal (SIGINT, SIGTERM) */
};

/* conn_line() results besides a line */
enum { LINE_OK = 1, LINE_EOF = 0, LINE_ERR = -1, LINE_TIMEOUT = -2,
       LINE_INTR = -3 };

static struct {
	const char *dir;
	bool json;
	int64_t timeout_ms;
} opt = { .dir = DEFAULT_DIR, .timeout_ms = 5000 };

static volatile sig_atomic_t interrupted;
static sigset_t poll_mask;      /* the mask ppoll() waits with ... */
static bool poll_mask_set;      /* ... when watch blocked SIGINT */

/* A connection to one VM's socket. */
struct conn {
	int fd;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	char *buf;                  /* received bytes not consumed yet */
	size_t len, cap, skip;      /* skip: the last line returned */
	char err[512];              /* why the last call failed */
};

static const char usage_text[] =
"usage: sysidlectl [--dir DIR] [--json] [--timeout SECONDS] COMMAND\n"
"       COMMAND: list | status NAME | watch NAME | kick NAME | pause NAME |\n"
"                resume NAME | --help\n";

static const char help_text[] =
"\n"
"Commands:\n"
"  list           every VM with a socket in DIR, one line each:\n"
"                 NAME STATE SINCE VCPUS(idle/total) PID\n"
"  status NAME    the VM's state, its vCPUs and its counters\n"
"  watch NAME     one line per idle state change, until the VM stops\n"
"  kick NAME      end the VM's full idle (its tick restarts)\n"
"  pause NAME     park every vCPU of the VM (it resumes by itself when a\n"
"                 timer, serial input or a kick wakes one); returns once\n"
"                 every vCPU is parked\n"
"  resume NAME    let a paused VM run again\n"
"\n"
"Options:\n"
"  --dir DIR          the sockets' directory (default " DEFAULT_DIR ")\n"
"  --json             JSON output: list: one object per VM per line;\n"
"                     status: the status object; watch: the socket's lines;\n"
"                     kick, pause, resume: the reply\n"
"  --timeout SECONDS  wait at most SECONDS for a reply (default 5; watch\n"
"                     waits for its events as long as the VM runs)\n"
"  -h, --help         print this help and exit 0\n"
"\n"
"NAME is a VM's name (socket DIR/NAME.sock) or a socket path with a '/'.\n"
"\n"
"Exit status: 0 ok, 1 error from the VM or the connection (no such VM,\n"
"permission denied, malformed reply, timeout), 2 bad usage, 130 (143)\n"
"watch ended by SIGINT (SIGTERM).\n";

static void errmsg(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));

/* One "sysidlectl: ..." line on stderr. */
static void errmsg(const char *fmt, ...)
{
	va_list ap;

	fputs("sysidlectl: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* A usage error: its line, the synopsis, exit status 2. */
static int usage_error(const char *fmt, const char *arg)
{
	fputs("sysidlectl: ", stderr);
	fprintf(stderr, fmt, arg);
	fputc('\n', stderr);
	fputs(usage_text, stderr);
	return EXIT_USAGE;
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Milliseconds left before @deadline (-1: none) for poll(). */
static int remaining(int64_t deadline)
{
	int64_t left;

	if (deadline < 0)
		return -1;
	left = deadline - now_ms();
	if (left < 0)
		return 0;
	return left > 1000000 ? 1000000 : (int)left;
}

/* poll() one fd; 1 ready, 0 timeout, LINE_INTR on SIGINT, -1 error. */
static int wait_fd(int fd, short events, int64_t deadline)
{
	struct pollfd p = { .fd = fd, .events = events };
	struct timespec ts, *tp = NULL;
	int ms, n;

	for (;;) {
		if (interrupted)
			return LINE_INTR;
		ms = remaining(deadline);
		if (ms >= 0) {
			ts.tv_sec = ms / 1000;
			ts.tv_nsec = (long)(ms % 1000) * 1000000;
			tp = &ts;
		}
		n = ppoll(&p, 1, tp, poll_mask_set ? &poll_mask : NULL);
		if (n >= 0)
			return n;
		if (errno != EINTR)
			return -1;
	}
}

/* The socket path for @name: a path when it has a '/', else DIR/NAME.sock.
 * Returns 0, or -1 when it is too long. */
static int socket_path(const char *name, char *path, size_t size)
{
	int n;

	if (strchr(name, '/'))
		n = snprintf(path, size, "%s", name);
	else
		n = snprintf(path, size, "%s/%s.sock", opt.dir, name);
	return n < 0 || (size_t)n >= size ? -1 : 0;
}

/* Connect to @c->path by @deadline. Returns 0, or -1 with @c->err set. */
static int conn_open(struct conn *c, int64_t deadline)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };

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

static void conn_close(struct conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	free(c->buf);
	c->buf = NULL;
	c->len = c->cap = c->skip = 0;
}

/* Send the request {"cmd":@cmd} by @deadline. Returns 0, or -1 with
 * @c->err set; a peer that already closed is not an error here (it may have
 * sent its reason: the caller reads it). */
static int conn_send(struct conn *c, const char *cmd, int64_t deadline)
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
		w = wait_fd(c->fd, POLLOUT, deadline);
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

/* The next line from @c (NUL-terminated, without its newline, valid until
 * the next call) into @line, waiting until @deadline (-1: forever).
 * Returns LINE_OK, LINE_EOF (closed by the VM, no partial line left),
 * LINE_TIMEOUT, LINE_INTR (SIGINT) or LINE_ERR (@c->err set). */
static int conn_line(struct conn *c, char **line, int64_t deadline)
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
		if (nl) {
			*nl = '\0';
			*line = c->buf;
			c->skip = (size_t)(nl - c->buf) + 1;
			return LINE_OK;
		}
		if (c->len >= MAX_LINE) {
			snprintf(c->err, sizeof(c->err), "malformed reply: a "
				 "line longer than %u bytes", MAX_LINE);
			return LINE_ERR;
		}
		if (c->cap - c->len < 4096) {
			size_t cap = c->cap ? 2 * c->cap : 16384;
			char *b = realloc(c->buf, cap + 1);

			if (!b) {
				snprintf(c->err, sizeof(c->err),
					 "out of memory");
				return LINE_ERR;
			}
			c->buf = b;
			c->cap = cap;
		}
		/* Checked here too: a peer dripping bytes never lets the
		 * wait below time out. */
		if (deadline >= 0 && now_ms() >= deadline)
			return LINE_TIMEOUT;
		n = recv(c->fd, c->buf + c->len, c->cap - c->len, 0);
		if (n > 0) {
			c->len += (size_t)n;
			continue;
		}
		if (n == 0) {
			if (!c->len)
				return LINE_EOF;
			snprintf(c->err, sizeof(c->err), "malformed reply: "
				 "the connection closed within a line");
			return LINE_ERR;
		}
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN) {
			snprintf(c->err, sizeof(c->err), "%s: %s", c->path,
				 strerror(errno));
			return LINE_ERR;
		}
		w = wait_fd(c->fd, POLLIN, deadline);
		if (w == 0)
			return LINE_TIMEOUT;
		if (w == LINE_INTR)
			return LINE_INTR;
		if (w < 0) {
			snprintf(c->err, sizeof(c->err), "poll: %s",
				 strerror(errno));
			return LINE_ERR;
		}
	}
}

/* @line as one JSON object, or NULL (@c->err set). */
static json_object *parse_object(struct conn *c, const char *line)
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

static json_object *member(json_object *o, const char *key, json_type type)
{
	json_object *v;

	if (!o || !json_object_object_get_ex(o, key, &v) ||
	    !json_object_is_type(v, type))
		return NULL;
	return v;
}

/* A member that may be an int or a double (both are numbers in JSON). */
static json_object *number(json_object *o, const char *key)
{
	json_object *v = member(o, key, json_type_int);

	return v ? v : member(o, key, json_type_double);
}

static const char *str_or(json_object *o, const char *key, const char *def)
{
	json_object *v = member(o, key, json_type_string);

	return v ? json_object_get_string(v) : def;
}

/* Request @cmd on an open connection and read its reply by @deadline.
 * Returns the reply ({"ok":true,...}), or NULL with @c->err set and
 * *@rc the exit status (LINE_INTR: SIGINT). */
static json_object *request(struct conn *c, const char *cmd,
			    int64_t deadline, int *rc)
{
	json_object *r, *ok;
	char *line;
	int n;

	*rc = EXIT_ERR;
	if (conn_send(c, cmd, deadline))
		return NULL;
	n = conn_line(c, &line, deadline);
	if (n == LINE_TIMEOUT) {
		snprintf(c->err, sizeof(c->err), "no reply within %g s "
			 "(timeout)", (double)opt.timeout_ms / 1000);
		return NULL;
	}
	if (n == LINE_EOF)
		snprintf(c->err, sizeof(c->err), "the VM closed the "
			 "connection without a reply");
	if (n == LINE_INTR)
		*rc = EXIT_SIGINT;
	if (n != LINE_OK)
		return NULL;
	r = parse_object(c, line);
	if (!r)
		return NULL;
	ok = member(r, "ok", json_type_boolean);
	if (!ok) {
		snprintf(c->err, sizeof(c->err), "malformed reply: no \"ok\"");
	} else if (!json_object_get_boolean(ok)) {
		snprintf(c->err, sizeof(c->err), "%s",
			 str_or(r, "error", "error without a reason"));
	} else {
		return r;
	}
	json_object_put(r);
	return NULL;
}

/* Connect to VM @name (a name or a path) and ask @cmd. Returns the reply,
 * or NULL after one error line on stderr (*@rc: the exit status). */
static json_object *ask(struct conn *c, const char *name, const char *cmd,
			int *rc)
{
	int64_t deadline = now_ms() + opt.timeout_ms;
	json_object *r;

	c->fd = -1;
	*rc = EXIT_ERR;
	if (socket_path(name, c->path, sizeof(c->path))) {
		errmsg("%s: socket path too long (at most %zu bytes)", name,
		       sizeof(c->path) - 1);
		return NULL;
	}
	if (conn_open(c, deadline)) {
		if (errno == ENOENT && !strchr(name, '/'))
			errmsg("no such VM '%s' (no socket %s)", name,
			       c->path);
		else if (errno == ENOENT)
			errmsg("%s", c->err);
		else
			errmsg("%s: %s", name, c->err);
		return NULL;
	}
	r = request(c, cmd, deadline, rc);
	if (!r && *rc != EXIT_SIGINT)
		errmsg("%s: %s", name, c->err);
	return r;
}

/* "1.5s", "3m04s", "2h05m", "3d04h" */
static void fmt_duration(double s, char *buf, size_t size)
{
	long t = (long)s;

	if (!(s >= 0))
		snprintf(buf, size, "?");
	else if (s < 60)
		snprintf(buf, size, "%.1fs", s);
	else if (t < 3600)
		snprintf(buf, size, "%ldm%02lds", t / 60, t % 60);
	else if (t < 86400)
		snprintf(buf, size, "%ldh%02ldm", t / 3600, t % 3600 / 60);
	else
		snprintf(buf, size, "%ldd%02ldh", t / 86400, t % 86400 / 3600);
}

/* Local time "HH:MM:SS.mmm" of @unix_ms. */
static void fmt_clock(int64_t unix_ms, char *buf, size_t size)
{
	time_t t = (time_t)(unix_ms / 1000);
	struct tm tm;

	if (unix_ms < 0 || !localtime_r(&t, &tm)) {
		snprintf(buf, size, "?");
		return;
	}
	snprintf(buf, size, "%02d:%02d:%02d.%03d", tm.tm_hour, tm.tm_min,
		 tm.tm_sec, (int)(unix_ms % 1000));
}

static int64_t unix_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Flush stdout; an error (a closed pipe, a full disk) is reported. */
static int flush_out(void)
{
	if (fflush(stdout) == 0)
		return EXIT_OK;
	errmsg("stdout: %s", strerror(errno));
	return EXIT_ERR;
}

static void print_json(json_object *o)
{
	puts(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN |
					    JSON_C_TO_STRING_NOSLASHESCAPE));
}

/* The status object of a status reply, or NULL (@c->err set). */
static json_object *status_vm(struct conn *c, json_object *reply)
{
	json_object *vm = member(reply, "vm", json_type_object);

	if (!vm || !member(vm, "state", json_type_string) ||
	    !member(vm, "vcpus", json_type_array)) {
		snprintf(c->err, sizeof(c->err), "malformed reply: no status "
			 "object");
		return NULL;
	}
	return vm;
}

/* One line of list. */
struct row {
	char *name;
	char state[16], since[32], vcpus[24], pid[16];
	char *why;                  /* "?" rows: the reason */
	json_object *reply;         /* --json: the reply */
	json_object *vm;            /* its status object */
};

/* Fill @r for the socket DIR/@ent. */
static void list_one(struct row *r, const char *ent)
{
	struct conn c = { .fd = -1 };
	json_object *vm, *a;
	int64_t deadline = now_ms() + opt.timeout_ms;
	size_t n, idle = 0;
	int rc;

	r->name = strndup(ent, strlen(ent) - strlen(".sock"));
	snprintf(r->state, sizeof(r->state), "?");
	snprintf(r->since, sizeof(r->since), "-");
	snprintf(r->vcpus, sizeof(r->vcpus), "-");
	snprintf(r->pid, sizeof(r->pid), "-");
	if (snprintf(c.path, sizeof(c.path), "%s/%s", opt.dir, ent) >=
	    (int)sizeof(c.path)) {
		r->why = strdup("socket path too long");
		return;
	}
	if (conn_open(&c, deadline) == 0) {
		r->reply = request(&c, "status", deadline, &rc);
		r->vm = r->reply ? status_vm(&c, r->reply) : NULL;
	}
	if (!r->vm) {
		r->why = strdup(c.err);
		conn_close(&c);
		return;
	}
	conn_close(&c);
	vm = r->vm;
	snprintf(r->state, sizeof(r->state), "%s",
		 str_or(vm, "state", "?"));
	a = number(vm, "in_state_s");
	if (a)
		fmt_duration(json_object_get_double(a), r->since,
			     sizeof(r->since));
	a = member(vm, "vcpus", json_type_array);
	n = json_object_array_length(a);
	for (size_t i = 0; i < n; i++) {
		json_object *v = member(json_object_array_get_idx(a, i),
					"idle", json_type_boolean);

		idle += v && json_object_get_boolean(v);
	}
	snprintf(r->vcpus, sizeof(r->vcpus), "%zu/%zu", idle, n);
	a = member(vm, "pid", json_type_int);
	if (a)
		snprintf(r->pid, sizeof(r->pid), "%" PRId64,
			 json_object_get_int64(a));
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names of the *.sock entries of DIR, sorted; NULL: error (printed),
 * with *@n 0 and a missing DIR no error. */
static char **list_sockets(size_t *n, int *rc)
{
	DIR *d = opendir(opt.dir);
	struct dirent *e;
	char **v = NULL, **nv;
	size_t cap = 0;

	*n = 0;
	*rc = EXIT_OK;
	if (!d) {
		if (errno == ENOENT)
			return calloc(1, sizeof(*v));
		errmsg("%s: %s", opt.dir, strerror(errno));
		*rc = EXIT_ERR;
		return NULL;
	}
	while ((e = readdir(d))) {
		size_t len = strlen(e->d_name);

		if (len <= 5 || strcmp(e->d_name + len - 5, ".sock"))
			continue;
		if (*n + 1 >= cap) {
			cap = cap ? 2 * cap : 16;
			nv = realloc(v, cap * sizeof(*v));
			if (!nv)
				break;
			v = nv;
		}
		v[*n] = strdup(e->d_name);
		if (v[*n])
			++*n;
	}
	closedir(d);
	if (!v)
		v = calloc(1, sizeof(*v));
	if (v)
		qsort(v, *n, sizeof(*v), cmp_str);
	return v;
}

static int cmd_list(void)
{
	size_t n, i, w = 4;
	struct row *rows;
	char **ents;
	int rc;

	ents = list_sockets(&n, &rc);
	if (!ents)
		return rc;
	rows = calloc(n + 1, sizeof(*rows));
	if (!rows) {
		errmsg("out of memory");
		return EXIT_ERR;
	}
	for (i = 0; i < n; i++) {
		list_one(&rows[i], ents[i]);
		if (rows[i].name && strlen(rows[i].name) > w)
			w = strlen(rows[i].name);
	}
	if (!opt.json)
		printf("%-*s %-10s %-8s %-6s %s\n", (int)w, "NAME", "STATE",
		       "SINCE", "VCPUS", "PID");
	for (i = 0; i < n; i++) {
		struct row *r = &rows[i];
		const char *name = r->name ? r->name : "?";

		if (opt.json && r->vm) {
			json_object_object_add(r->vm, "socket",
					       json_object_new_string(ents[i]));
			print_json(r->vm);
		} else if (opt.json) {
			json_object *o = json_object_new_object();

			json_object_object_add(o, "name",
					       json_object_new_string(name));
			json_object_object_add(o, "socket",
					       json_object_new_string(ents[i]));
			json_object_object_add(o, "state",
					       json_object_new_string("?"));
			json_object_object_add(o, "error",
				json_object_new_string(r->why ? r->why : "?"));
			print_json(o);
			json_object_put(o);
		} else {
			printf("%-*s %-10s %-8s %-6s %s%s%s\n", (int)w, name,
			       r->state, r->since, r->vcpus, r->pid,
			       r->why ? "  " : "", r->why ? r->why : "");
		}
		free(r->name);
		free(r->why);
		json_object_put(r->reply);
		free(ents[i]);
	}
	free(rows);
	free(ents);
	return flush_out();
}

/* status: the counters, nested objects on one line. */
static void print_counters(json_object *counters)
{
	if (!counters)
		return;
	printf("\ncounters\n");
	json_object_object_foreach(counters, key, val) {
		printf("  %-22s", key);
		if (json_object_is_type(val, json_type_object)) {
			json_object_object_foreach(val, k, v)
				printf(" %s %.3f", k,
				       json_object_get_double(v));
		} else if (json_object_is_type(val, json_type_double)) {
			printf(" %.3f", json_object_get_double(val));
		} else {
			printf(" %s", json_object_get_string(val));
		}
		putchar('\n');
	}
}

static void print_status(json_object *vm)
{
	json_object *v, *a = member(vm, "vcpus", json_type_array);
	char clk[32], dur[32];
	size_t i, n = json_object_array_length(a);
	bool sysidle = (v = member(vm, "sysidle", json_type_boolean)) &&
		       json_object_get_boolean(v);

	printf("name        %s\n", str_or(vm, "name", "?"));
	printf("uuid        %s\n", str_or(vm, "uuid", "?"));
	v = number(vm, "pid");
	printf("pid         %s\n", v ? json_object_get_string(v) : "?");
	if (sysidle) {
		v = number(vm, "timekeeper");
		printf("sysidle     on, timekeeper vCPU %s", v ?
		       json_object_get_string(v) : "?");
		v = number(vm, "housekeeping_tid");
		printf(", housekeeping thread %s\n", v ?
		       json_object_get_string(v) : "?");
	} else {
		printf("sysidle     off\n");
	}
	v = number(vm, "since_unix_ms");
	fmt_clock(v ? json_object_get_int64(v) : -1, clk, sizeof(clk));
	v = number(vm, "in_state_s");
	fmt_duration(v ? json_object_get_double(v) : -1, dur, sizeof(dur));
	printf("state       %s since %s (%s)\n", str_or(vm, "state", "?"),
	       clk, dur);
	v = member(vm, "paused", json_type_boolean);
	if (v && json_object_get_boolean(v))
		printf("paused      yes (every vCPU parked)\n");
	v = number(vm, "uptime_s");
	fmt_duration(v ? json_object_get_double(v) : -1, dur, sizeof(dur));
	printf("uptime      %s\n", dur);
	printf("\n%4s %8s %4s %12s %16s\n", "VCPU", "TID", "IDLE",
	       "HALT_EXITS", "TICKS_SUPPRESSED");
	for (i = 0; i < n; i++) {
		json_object *c = json_object_array_get_idx(a, i), *x, *t, *h,
			    *s;

		x = number(c, "id");
		t = number(c, "tid");
		h = number(c, "halt_exits");
		s = number(c, "ticks_suppressed");
		v = member(c, "idle", json_type_boolean);
		printf("%4s %8s %4s %12s %16s\n",
		       x ? json_object_get_string(x) : "?",
		       t ? json_object_get_string(t) : "?",
		       v ? (json_object_get_boolean(v) ? "yes" : "no") : "?",
		       h ? json_object_get_string(h) : "?",
		       s ? json_object_get_string(s) : "?");
	}
	print_counters(member(vm, "counters", json_type_object));
}

static int cmd_status(const char *name)
{
	struct conn c = { .fd = -1 };
	json_object *r, *vm;
	int rc;

	r = ask(&c, name, "status", &rc);
	if (!r) {
		conn_close(&c);
		return rc;
	}
	vm = status_vm(&c, r);
	if (!vm) {
		errmsg("%s: %s", name, c.err);
		rc = EXIT_ERR;
	} else {
		if (opt.json)
			print_json(vm);
		else
			print_status(vm);
		rc = flush_out();
	}
	json_object_put(r);
	conn_close(&c);
	return rc;
}

/* kick, pause, resume: the request, and the reply with --json. */
static int cmd_simple(const char *name, const char *cmd)
{
	struct conn c = { .fd = -1 };
	json_object *r;
	int rc;

	r = ask(&c, name, cmd, &rc);
	if (r) {
		if (opt.json)
			print_json(r);
		rc = flush_out();
	}
	json_object_put(r);
	conn_close(&c);
	return rc;
}

/* watch, human form: one event line. */
static void print_event(json_object *e)
{
	const char *ev = str_or(e, "event", "");
	json_object *v;
	char clk[32];

	if (!strcmp(ev, "dropped")) {
		fmt_clock(unix_now_ms(), clk, sizeof(clk));
		v = number(e, "count");
		printf("%s (%s events dropped: this client was too slow)\n",
		       clk, v ? json_object_get_string(v) : "?");
		return;
	}
	if (!strcmp(ev, "paused") || !strcmp(ev, "resumed")) {
		v = number(e, "unix_ms");
		fmt_clock(v ? json_object_get_int64(v) : -1, clk, sizeof(clk));
		printf("%s %s", clk, ev);
		v = number(e, "paused_ms");
		if (!strcmp(ev, "resumed"))
			printf(" by %s after %s ms", str_or(e, "reason", "?"),
			       v ? json_object_get_string(v) : "?");
		putchar('\n');
		return;
	}
	if (strcmp(ev, "state"))
		return; /* an event this version does not know */
	v = number(e, "unix_ms");
	fmt_clock(v ? json_object_get_int64(v) : -1, clk, sizeof(clk));
	printf("%s %s -> %s", clk, str_or(e, "from", "?"),
	       str_or(e, "to", "?"));
	v = number(e, "vcpu");
	if (v && json_object_get_int64(v) >= 0)
		printf(" vcpu %" PRId64, json_object_get_int64(v));
	v = number(e, "full_idle_ms");
	if (v)
		printf(" full idle %" PRId64 " ms", json_object_get_int64(v));
	putchar('\n');
}

static void on_signal(int sig)
{
	interrupted = sig;
}

/* Block SIGINT (and SIGTERM) outside ppoll(), so that one arriving at any
 * point ends the wait: watch then exits 128 + the signal. */
static void watch_signals(void)
{
	struct sigaction sa = { .sa_handler = on_signal };
	sigset_t block;

	sigemptyset(&block);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGTERM);
	sigprocmask(SIG_BLOCK, &block, &poll_mask);
	sigdelset(&poll_mask, SIGINT);
	sigdelset(&poll_mask, SIGTERM);
	poll_mask_set = true;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
}

static int cmd_watch(const char *name)
{
	struct conn c = { .fd = -1 };
	json_object *r, *e;
	char clk[32], *line;
	int rc, n;

	watch_signals();
	r = ask(&c, name, "watch", &rc);
	if (!r)
		goto out;
	if (opt.json) {
		print_json(r);
	} else {
		e = number(r, "since_unix_ms");
		fmt_clock(e ? json_object_get_int64(e) : -1, clk, sizeof(clk));
		e = member(r, "paused", json_type_boolean);
		printf("%s %s (current state%s)\n", clk, str_or(r, "state", "?"),
		       e && json_object_get_boolean(e) ? ", paused" : "");
	}
	json_object_put(r);
	fflush(stdout);
	for (;;) {
		n = conn_line(&c, &line, -1);
		if (n != LINE_OK)
			break;
		e = parse_object(&c, line);
		if (!e) {
			n = LINE_ERR;
			break;
		}
		if (opt.json)
			puts(line);
		else
			print_event(e);
		json_object_put(e);
		if (fflush(stdout)) {
			snprintf(c.err, sizeof(c.err), "stdout: %s",
				 strerror(errno));
			n = LINE_ERR;
			break;
		}
	}
	if (n == LINE_EOF) {
		rc = EXIT_OK; /* the VM stopped */
	} else if (n == LINE_INTR) {
		rc = 128 + interrupted;
	} else {
		errmsg("%s: %s", name, c.err);
		rc = EXIT_ERR;
	}
out:
	conn_close(&c);
	if (rc == EXIT_SIGINT && interrupted)
		rc = 128 + interrupted;
	return rc;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "dir", required_argument, NULL, 'd' },
		{ "json", no_argument, NULL, 'j' },
		{ "timeout", required_argument, NULL, 't' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *cmd;
	char *end;
	double sec;
	int c;

	opterr = 0;
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case 'd':
			if (!*optarg)
				return usage_error("%s--dir: expected a "
						   "directory", "");
			opt.dir = optarg;
			break;
		case 'j':
			opt.json = true;
			break;
		case 't':
			errno = 0;
			sec = strtod(optarg, &end);
			if (errno || end == optarg || *end || !(sec > 0) ||
			    sec > 86400)
				return usage_error("--timeout '%s': expected "
						   "seconds, more than 0 and "
						   "at most 86400", optarg);
			opt.timeout_ms = (int64_t)(sec * 1000);
			if (opt.timeout_ms < 1)
				opt.timeout_ms = 1;
			break;
		case 'h':
			fputs(usage_text, stdout);
			fputs(help_text, stdout);
			return flush_out();
		default:
			if (optopt == 'd' || optopt == 't')
				return usage_error("option '%s' needs an "
						   "argument",
						   argv[optind - 1]);
			return usage_error("unknown option '%s'",
					   argv[optind - 1]);
		}
	}
	if (optind >= argc)
		return usage_error("%sexpected a command", "");
	cmd = argv[optind++];
	if (!strcmp(cmd, "list")) {
		if (optind < argc)
			return usage_error("list: unexpected argument '%s'",
					   argv[optind]);
		return cmd_list();
	}
	if (strcmp(cmd, "status") && strcmp(cmd, "watch") &&
	    strcmp(cmd, "kick") && strcmp(cmd, "pause") &&
	    strcmp(cmd, "resume"))
		return usage_error("unknown command '%s'", cmd);
	if (optind >= argc)
		return usage_error("%s: expected a VM name or socket path",
				   cmd);
	if (optind + 1 < argc)
		return usage_error("unexpected argument '%s'",
				   argv[optind + 1]);
	if (!*argv[optind])
		return usage_error("%s: empty VM name", cmd);
	if (!strcmp(cmd, "status"))
		return cmd_status(argv[optind]);
	if (!strcmp(cmd, "watch"))
		return cmd_watch(argv[optind]);
	return cmd_simple(argv[optind], cmd);
}
