/* SPDX-License-Identifier: GPL-2.0-only */
/* sysidlectl's commands: list, status, kick, pause, resume, watch (see
 * sysidlectl.h); the socket through common's ctl_client. */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "monotonic.h"
#include "sysidlectl.h"

static volatile sig_atomic_t interrupted;
static sigset_t poll_mask;      /* the mask ppoll() waits with ... */
static bool poll_mask_set;      /* ... when watch blocked SIGINT */

/* A connection not open yet, with the interruption watch sets up. */
void conn_init(struct ctl_conn *c)
{
	*c = (struct ctl_conn){ .fd = -1, .timeout_ms = options()->timeout_ms,
				.intr = &interrupted,
				.sigmask = poll_mask_set ? &poll_mask : NULL };
}

/* Request @cmd on an open connection and read its reply by @deadline.
 * Returns the reply ({"ok":true,...}), or NULL with @c->err set and
 * *@rc the exit status (EXIT_SIGINT: SIGINT). */
static json_object *request(struct ctl_conn *c, const char *cmd,
			    int64_t deadline, int *rc)
{
	json_object *r;
	int res;

	r = ctl_request(c, cmd, deadline, &res);
	*rc = r ? EXIT_OK : res == CTL_INTR ? EXIT_SIGINT : EXIT_ERR;
	return r;
}

static int find_by_name(const char *name, char *path, size_t size);

/* Connect to VM @name (a name or a path) and ask @cmd. Returns the reply,
 * or NULL after one error line on stderr (*@rc: the exit status). */
json_object *ask(struct ctl_conn *c, const char *name, const char *cmd,
			int *rc)
{
	int64_t deadline = monotonic_ms() + options()->timeout_ms;
	json_object *r;

	conn_init(c);
	*rc = EXIT_ERR;
	if (ctl_socket_path(options()->dir, name, c->path, sizeof(c->path))) {
		errmsg("%s: socket path too long (at most %zu bytes)", name,
		       sizeof(c->path) - 1);
		return NULL;
	}
	/* no DIR/NAME.sock: the VM that reports that name */
	if (!strchr(name, '/') && access(c->path, F_OK) && errno == ENOENT)
		find_by_name(name, c->path, sizeof(c->path));
	if (ctl_open(c, deadline)) {
		if (errno == ENOENT && !strchr(name, '/'))
			errmsg("no such VM '%s' (no socket %s, and no VM "
			       "of that name in %s)", name, c->path, options()->dir);
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

/* The status object of a status reply, or NULL (@c->err set). */
json_object *status_vm(struct ctl_conn *c, json_object *reply)
{
	json_object *vm = ctl_member(reply, "vm", json_type_object);

	if (!vm || !ctl_member(vm, "state", json_type_string) ||
	    !ctl_member(vm, "vcpus", json_type_array)) {
		snprintf(c->err, sizeof(c->err), "malformed reply: no status "
			 "object");
		return NULL;
	}
	return vm;
}

/* The status reply of the VM with the socket DIR/@ent, and in *@vm its
 * status object; NULL with @why set (a line) when there is none. */
json_object *fetch_status(const char *ent, json_object **vm, char *why,
			  size_t size)
{
	struct ctl_conn c;
	int64_t deadline = monotonic_ms() + options()->timeout_ms;
	json_object *reply = NULL;
	int rc;

	conn_init(&c);
	*vm = NULL;
	if (snprintf(c.path, sizeof(c.path), "%s/%s", options()->dir, ent) >=
	    (int)sizeof(c.path)) {
		snprintf(why, size, "socket path too long");
		return NULL;
	}
	if (ctl_open(&c, deadline) == 0) {
		reply = request(&c, "status", deadline, &rc);
		*vm = reply ? status_vm(&c, reply) : NULL;
	}
	if (!*vm) {
		snprintf(why, size, "%s", c.err);
		json_object_put(reply);
		reply = NULL;
	}
	ctl_close(&c);
	return reply;
}

/* The socket in DIR of the VM whose reported name is @name (its socket
 * file may be named otherwise: --control), into @path; 0 or -1. */
static int find_by_name(const char *name, char *path, size_t size)
{
	size_t n;
	char **ents = list_sockets(&n, &(int){ 0 }), why[8];
	int found = -1;

	for (size_t i = 0; ents && i < n; i++) {
		json_object *vm, *r = found ? fetch_status(ents[i], &vm, why,
							    sizeof(why)) : NULL;

		if (r && !strcmp(ctl_str_or(vm, "name", ""), name) &&
		    snprintf(path, size, "%s/%s", options()->dir, ents[i]) <
		    (int)size)
			found = 0;
		json_object_put(r);
		free(ents[i]);
	}
	free(ents);
	return found;
}

size_t vcpus_halted(json_object *vm, size_t *total)
{
	json_object *a = ctl_member(vm, "vcpus", json_type_array);
	size_t halted = 0;

	*total = a ? json_object_array_length(a) : 0;
	for (size_t i = 0; i < *total; i++) {
		json_object *v = ctl_member(json_object_array_get_idx(a, i),
					    "idle", json_type_boolean);

		halted += v && json_object_get_boolean(v);
	}
	return halted;
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
	json_object *vm, *a;
	size_t n, idle;
	char why[512];

	r->name = strndup(ent, strlen(ent) - strlen(".sock"));
	snprintf(r->state, sizeof(r->state), "?");
	snprintf(r->since, sizeof(r->since), "-");
	snprintf(r->vcpus, sizeof(r->vcpus), "-");
	snprintf(r->pid, sizeof(r->pid), "-");
	r->reply = fetch_status(ent, &r->vm, why, sizeof(why));
	if (!r->vm) {
		r->why = strdup(why);
		return;
	}
	if (ctl_member(r->vm, "name", json_type_string)) { /* its own name */
		free(r->name);
		r->name = strdup(ctl_str_or(r->vm, "name", "?"));
	}
	vm = r->vm;
	snprintf(r->state, sizeof(r->state), "%s",
		 ctl_str_or(vm, "state", "?"));
	a = ctl_number(vm, "in_state_s");
	if (a)
		fmt_duration(json_object_get_double(a), r->since,
			     sizeof(r->since));
	idle = vcpus_halted(vm, &n);
	snprintf(r->vcpus, sizeof(r->vcpus), "%zu/%zu", idle, n);
	a = ctl_member(vm, "pid", json_type_int);
	if (a)
		snprintf(r->pid, sizeof(r->pid), "%" PRId64,
			 json_object_get_int64(a));
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names of the *.sock entries of DIR, sorted; NULL: error (printed,
 * a missing DIR too). */
char **list_sockets(size_t *n, int *rc)
{
	DIR *d = opendir(options()->dir);
	struct dirent *e;
	char **v = NULL, **nv;
	size_t cap = 0;

	*n = 0;
	*rc = EXIT_OK;
	if (!d) {
		errmsg("--dir %s: %s", options()->dir, strerror(errno));
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

int cmd_list(void)
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
	if (!options()->json)
		printf("%-*s  %-10s %-8s %-7s %s\n", (int)w, "NAME", "STATE",
		       "SINCE", "HALTED", "PID");
	for (i = 0; i < n; i++) {
		struct row *r = &rows[i];
		const char *name = r->name ? r->name : "?";

		if (options()->json && r->vm) {
			json_object_object_add(r->vm, "socket",
					       json_object_new_string(ents[i]));
			print_json(r->vm);
		} else if (options()->json) {
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
			printf("%-*s  %-10s %-8s %-7s %s%s%s\n", (int)w, name,
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

int cmd_status(const char *name)
{
	struct ctl_conn c = { .fd = -1 };
	json_object *r, *vm;
	int rc;

	r = ask(&c, name, "status", &rc);
	if (!r) {
		ctl_close(&c);
		return rc;
	}
	vm = status_vm(&c, r);
	if (!vm) {
		errmsg("%s: %s", name, c.err);
		rc = EXIT_ERR;
	} else {
		if (options()->json)
			print_json(vm);
		else
			print_status(vm);
		rc = flush_out();
	}
	json_object_put(r);
	ctl_close(&c);
	return rc;
}

/* kick, pause, resume: the request, and the reply with --json. */
int cmd_simple(const char *name, const char *cmd)
{
	struct ctl_conn c = { .fd = -1 };
	json_object *r;
	int rc;

	r = ask(&c, name, cmd, &rc);
	if (r) {
		if (options()->json)
			print_json(r);
		rc = flush_out();
	}
	json_object_put(r);
	ctl_close(&c);
	return rc;
}

static void on_signal(int sig)
{
	interrupted = sig;
}

/* See sysidlectl.h; any time. */
int watch_interrupted(void)
{
	return interrupted;
}

/* Block SIGINT (and SIGTERM) outside ppoll(), so that one arriving at any
 * point ends the wait: watch then exits 128 + the signal. */
const sigset_t *watch_signals(void)
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
	return &poll_mask;
}

int cmd_watch(const char *name)
{
	struct ctl_conn c = { .fd = -1 };
	json_object *r, *e;
	char clk[32], *line;
	int rc, n;

	watch_signals();
	r = ask(&c, name, "watch", &rc);
	if (!r)
		goto out;
	if (options()->json) {
		print_json(r);
	} else {
		e = ctl_number(r, "since_unix_ms");
		fmt_clock(e ? json_object_get_int64(e) : -1, clk, sizeof(clk));
		e = ctl_member(r, "paused", json_type_boolean);
		printf("%s %s (current state%s)\n", clk,
		       ctl_str_or(r, "state", "?"),
		       e && json_object_get_boolean(e) ? ", paused" : "");
	}
	json_object_put(r);
	fflush(stdout);
	for (;;) {
		n = ctl_line(&c, &line, -1);
		if (n != CTL_OK)
			break;
		e = ctl_parse_object(&c, line);
		if (!e) {
			n = CTL_ERR;
			break;
		}
		if (options()->json)
			puts(line);
		else
			print_event(e);
		json_object_put(e);
		if (fflush(stdout)) {
			snprintf(c.err, sizeof(c.err), "stdout: %s",
				 strerror(errno));
			n = CTL_ERR;
			break;
		}
	}
	if (n == CTL_EOF) {
		rc = EXIT_OK; /* the VM stopped */
	} else if (n == CTL_INTR) {
		rc = 128 + interrupted;
	} else {
		errmsg("%s: %s", name, c.err);
		rc = EXIT_ERR;
	}
out:
	ctl_close(&c);
	if (rc == EXIT_SIGINT && interrupted)
		rc = 128 + interrupted;
	return rc;
}

