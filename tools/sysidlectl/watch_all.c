/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * sysidlectl watch (no NAME): the events of every VM of DIR, each line
 * prefixed with the VM's name, including VMs that start later (inotify on
 * DIR: a new socket is connected to at once, retried every 100 ms for 5 s
 * while its VMM is not listening yet). A VM that stops is reported and
 * dropped. At most WATCH_MAX_VMS VMs at once; until SIGINT or SIGTERM.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <time.h>
#include <unistd.h>

#include "monotonic.h"
#include "sysidlectl.h"

#define WATCH_MAX_VMS 256
#define WATCH_RETRY_MS 100
#define WATCH_RETRY_FOR_MS 5000

struct watched {
	char ent[256];      /* the socket's file name in DIR */
	char name[96];      /* the VM's name */
	struct ctl_conn c;
	bool live;          /* connected and watching */
	int64_t retry_until; /* not yet connected: when to give up */
};

static struct watched vms[WATCH_MAX_VMS];

static struct watched *slot_of(const char *ent, bool add)
{
	struct watched *free_slot = NULL;

	for (int i = 0; i < WATCH_MAX_VMS; i++) {
		if ((vms[i].live || vms[i].retry_until) &&
		    !strcmp(vms[i].ent, ent))
			return &vms[i];
		if (!vms[i].live && !vms[i].retry_until && !free_slot)
			free_slot = &vms[i];
	}
	if (!add || !free_slot)
		return NULL;
	memset(free_slot, 0, sizeof(*free_slot));
	snprintf(free_slot->ent, sizeof(free_slot->ent), "%s", ent);
	snprintf(free_slot->name, sizeof(free_slot->name), "%.*s",
		 (int)(strlen(ent) - 5), ent);
	free_slot->retry_until = monotonic_ms() + WATCH_RETRY_FOR_MS;
	free_slot->c.fd = -1;
	return free_slot;
}

/* One "NAME: ..." line, or the event with "vm" added (--json). */
static void show(struct watched *w, json_object *e, const char *line)
{
	const char *ev = ctl_str_or(e, "event", "");

	if (options()->json) {
		json_object_object_add(e, "vm", json_object_new_string(w->name));
		print_json(e);
		return;
	}
	(void)line;
	if (strcmp(ev, "state") && strcmp(ev, "paused") &&
	    strcmp(ev, "resumed") && strcmp(ev, "dropped"))
		return;
	printf("%s: ", w->name);
	print_event(e);
}

/* A one-line notice about @w ("watching", "stopped"). */
static void notice(struct watched *w, const char *what, json_object *reply)
{
	if (options()->json) {
		json_object *o = json_object_new_object();

		json_object_object_add(o, "vm", json_object_new_string(w->name));
		json_object_object_add(o, "event", json_object_new_string(what));
		if (reply)
			json_object_object_add(o, "state", json_object_new_string(
				ctl_str_or(reply, "state", "?")));
		print_json(o);
		json_object_put(o);
	} else if (reply) {
		printf("%s: %s (current state %s)\n", w->name, what,
		       ctl_str_or(reply, "state", "?"));
	} else {
		printf("%s: %s\n", w->name, what);
	}
}

/* Connect @w and ask "watch" (its name from a status first). */
static void try_connect(struct watched *w)
{
	int64_t deadline = monotonic_ms() + options()->timeout_ms;
	json_object *vm, *r;
	char why[256];
	int res;

	r = fetch_status(w->ent, &vm, why, sizeof(why));
	if (!r) {
		if (monotonic_ms() >= w->retry_until) {
			fprintf(stderr, "sysidlectl: %s: %s\n", w->ent, why);
			w->retry_until = 0;
		}
		return;
	}
	snprintf(w->name, sizeof(w->name), "%s", ctl_str_or(vm, "name", w->name));
	json_object_put(r);
	conn_init(&w->c);
	if (snprintf(w->c.path, sizeof(w->c.path), "%s/%s", options()->dir, w->ent) >=
	    (int)sizeof(w->c.path) || ctl_open(&w->c, deadline)) {
		w->retry_until = 0;
		return;
	}
	r = ctl_request(&w->c, "watch", deadline, &res);
	if (!r) {
		fprintf(stderr, "sysidlectl: %s: %s\n", w->name, w->c.err);
		ctl_close(&w->c);
		w->retry_until = 0;
		return;
	}
	w->live = true;
	w->retry_until = 0;
	notice(w, "watching", r);
	json_object_put(r);
}

static void drop(struct watched *w, const char *why)
{
	notice(w, why, NULL);
	ctl_close(&w->c);
	w->live = false;
	w->retry_until = 0;
}

/* Everything @w has sent; drops it when it ended. */
static void drain(struct watched *w)
{
	char *line;
	int n;

	/* deadline now + 1 ms: what is there is read, no more is awaited */
	while ((n = ctl_line(&w->c, &line, monotonic_ms() + 1)) == CTL_OK) {
		json_object *e = ctl_parse_object(&w->c, line);

		if (!e) {
			drop(w, w->c.err);
			return;
		}
		show(w, e, line);
		json_object_put(e);
	}
	if (n == CTL_EOF)
		drop(w, "stopped");
	else if (n == CTL_ERR)
		drop(w, w->c.err);
}

static void scan_dir(void)
{
	size_t n;
	int rc;
	char **ents = list_sockets(&n, &rc);

	for (size_t i = 0; ents && i < n; i++) {
		if (!slot_of(ents[i], false) && !slot_of(ents[i], true))
			fprintf(stderr, "sysidlectl: %s: more than %d VMs, not "
				"watched\n", ents[i], WATCH_MAX_VMS);
		free(ents[i]);
	}
	free(ents);
}

int cmd_watch_all(void)
{
	const sigset_t *mask = watch_signals();
	struct pollfd pfd[WATCH_MAX_VMS + 1];
	struct watched *by_fd[WATCH_MAX_VMS + 1];
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
	int in = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);

	if (in < 0 || inotify_add_watch(in, options()->dir, IN_CREATE | IN_MOVED_TO |
					IN_ONLYDIR) < 0) {
		errmsg("--dir %s: cannot watch it: %s", options()->dir, strerror(errno));
		if (in >= 0)
			close(in);
		return EXIT_ERR;
	}
	scan_dir();
	while (!watch_interrupted()) {
		struct timespec ts = { 0, WATCH_RETRY_MS * 1000000L };
		bool pending = false;
		nfds_t nf = 1;

		for (int i = 0; i < WATCH_MAX_VMS; i++)
			if (!vms[i].live && vms[i].retry_until)
				try_connect(&vms[i]);
		if (fflush(stdout))
			break;
		pfd[0] = (struct pollfd){ .fd = in, .events = POLLIN };
		for (int i = 0; i < WATCH_MAX_VMS; i++) {
			if (vms[i].live) {
				by_fd[nf] = &vms[i];
				pfd[nf++] = (struct pollfd){ .fd = vms[i].c.fd,
							     .events = POLLIN };
			}
			pending |= !vms[i].live && vms[i].retry_until;
		}
		if (ppoll(pfd, nf, pending ? &ts : NULL, mask) < 0 &&
		    errno != EINTR)
			break;
		if (pfd[0].revents & POLLIN) {
			while (read(in, buf, sizeof(buf)) > 0)
				; /* which entry does not matter: rescan */
			scan_dir();
		}
		for (nfds_t i = 1; i < nf; i++)
			if (pfd[i].revents)
				drain(by_fd[i]);
	}
	for (int i = 0; i < WATCH_MAX_VMS; i++)
		if (vms[i].live)
			ctl_close(&vms[i].c);
	close(in);
	flush_out();
	return watch_interrupted() ? 128 + watch_interrupted() : EXIT_ERR;
}
