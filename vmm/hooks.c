/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * libvirt-style hooks: for each event the VMM runs DIR/vm, then every
 * executable regular file of DIR/vm.d/ in strcmp order (dot files
 * skipped), as libvirt runs /etc/libvirt/hooks/qemu and qemu.d/:
 *
 *	HOOK NAME started begin -          at start
 *	HOOK NAME idle begin -             FULL_NOTED reached
 *	HOOK NAME idle end DURATION_MS     FULL_NOTED left
 *	HOOK NAME stopped end -            at exit
 *
 * with a domain XML on stdin, stdout to /dev/null, stderr kept (its last
 * HOOK_ERR_MAX bytes) for the warning when the hook fails or is killed at
 * its timeout, an environment of LC_ALL, PATH and HOME only, in /, in a
 * process group of its own (a timeout kills the whole group).
 *
 * All of it runs on one worker thread. hooks_post() only queues, per
 * domain (told apart by uuid): a domain's pending "idle" events that have
 * not started yet are replaced by its latest one (counted as dropped), and
 * one that would repeat the last idle hook of that domain is dropped as
 * well, so each domain's "idle begin" and "idle end" always alternate;
 * "started" and "stopped" are never dropped, and idle events never move
 * across them. Used by the VMM (one domain) and the libvirt bridge (many):
 * see hooks.h.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sysidle/sysidle.h>

#include "hooks.h"

#define HOOKS_QUEUE_MAX 65536 /* coalescing keeps it at <= 3 per domain */
#define HOOK_ERR_MAX 4096   /* the tail of a hook's stderr we report */
#define HOOK_REAP_NS 5000000000ull /* after SIGKILL, wait at most this */
#define HOOK_NO_PIDFD_MS 20 /* poll period when pidfd_open is missing */

struct hook_event {
	char *name, *uuid;      /* owned copies of the hook_domain's */
	unsigned int ncpus;
	char op[16], subop[16], extra[24];
	int state;
	uint64_t since_unix_ms;
};

/* A domain whose last idle hook taken from the queue was "idle begin". */
struct hook_begun {
	char *uuid;
};

static struct {
	char *dir;              /* set before the worker starts, then const */
	uint64_t timeout_ns;
	char thread_name[16];
	void (*warn)(const char *fmt, ...);
	pthread_t thread;
	bool started;           /* posting side only */

	pthread_mutex_t lock;   /* guards everything below */
	pthread_cond_t cond;    /* queue not empty, or stop */
	struct hook_event *q;   /* q[0 .. n-1], oldest first */
	size_t n, cap;
	bool stop;
	struct hook_begun *begun; /* domains whose idle hooks last began */
	size_t nbegun, capbegun;
	uint64_t run, failed, dropped;
} hookq = { .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER };

static uint64_t hooks_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void event_free(struct hook_event *ev)
{
	free(ev->name);
	free(ev->uuid);
	ev->name = ev->uuid = NULL;
}

/* Under the lock: the begun entry of @uuid, or -1. */
static long begun_find(const char *uuid)
{
	for (size_t i = 0; i < hookq.nbegun; i++)
		if (!strcmp(hookq.begun[i].uuid, uuid))
			return (long)i;
	return -1;
}

/* Under the lock (worker): record whether @uuid's idle hooks last began.
 * An allocation failure forgets it (the next idle event is not dropped). */
static void begun_set(const char *uuid, bool begun)
{
	long i = begun_find(uuid);

	if (!begun && i >= 0) {
		free(hookq.begun[i].uuid);
		hookq.begun[i] = hookq.begun[--hookq.nbegun];
	} else if (begun && i < 0) {
		if (hookq.nbegun == hookq.capbegun) {
			size_t cap = hookq.capbegun ? 2 * hookq.capbegun : 8;
			struct hook_begun *b = realloc(hookq.begun,
						       cap * sizeof(*b));

			if (!b)
				return;
			hookq.begun = b;
			hookq.capbegun = cap;
		}
		hookq.begun[hookq.nbegun].uuid = strdup(uuid);
		if (hookq.begun[hookq.nbegun].uuid)
			hookq.nbegun++;
	}
}

static char *const hook_env[] = {
	"LC_ALL=C",
	"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	"HOME=/",
	NULL
};

/* Worker: @s XML-escaped at @p (room for 6 bytes a character). */
static char *xml_escape(char *p, const char *s)
{
	for (; *s; s++) {
		switch (*s) {
		case '&': p = stpcpy(p, "&amp;"); break;
		case '<': p = stpcpy(p, "&lt;"); break;
		case '>': p = stpcpy(p, "&gt;"); break;
		case '\'': p = stpcpy(p, "&apos;"); break;
		case '"': p = stpcpy(p, "&quot;"); break;
		default: *p++ = *s;
		}
	}
	*p = '\0';
	return p;
}

/* Worker: the domain XML every hook of @ev reads on stdin (malloc'd;
 * NULL: out of memory). */
static char *domain_xml(const struct hook_event *ev)
{
	char *name = malloc(6 * strlen(ev->name) + 1);
	char *uuid = malloc(6 * strlen(ev->uuid) + 1);
	char since[40], *xml = NULL;
	time_t t = (time_t)(ev->since_unix_ms / 1000);
	struct tm tm;

	if (name && uuid) {
		xml_escape(name, ev->name);
		xml_escape(uuid, ev->uuid);
		gmtime_r(&t, &tm);
		strftime(since, sizeof(since), "%Y-%m-%dT%H:%M:%S", &tm);
		if (asprintf(&xml, "<domain type='kvm'><name>%s</name>"
			     "<uuid>%s</uuid><vcpu>%u</vcpu><metadata>"
			     "<sysidle:state xmlns:sysidle='urn:sysidle:1' "
			     "state='%s' num='%d' since='%s.%03uZ' "
			     "since_unix_ms='%llu'/></metadata></domain>\n",
			     name, uuid, ev->ncpus,
			     sysidle_state_name((enum sysidle_state)ev->state),
			     ev->state, since,
			     (unsigned int)(ev->since_unix_ms % 1000),
			     (unsigned long long)ev->since_unix_ms) < 0)
			xml = NULL;
	}
	free(name);
	free(uuid);
	return xml;
}

/* Worker: append what @fd holds now to @err, keeping the last bytes only.
 * Returns false at end of file or on an error (then close @fd). */
static bool read_err(int fd, char *err, size_t *len)
{
	char buf[HOOK_ERR_MAX];
	ssize_t r;

	while ((r = read(fd, buf, sizeof(buf))) > 0) {
		size_t n = (size_t)r, keep = *len;

		if (keep + n > HOOK_ERR_MAX)
			keep = HOOK_ERR_MAX - n;
		memmove(err, err + *len - keep, keep);
		memcpy(err + keep, buf, n);
		*len = keep + n;
	}
	return r < 0 && (errno == EAGAIN || errno == EINTR);
}

/* Worker: start @argv[0] with @in / @err as stdin / stderr; 0 or errno. */
static int spawn_hook(pid_t *pid, char *const argv[], int in, int err)
{
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	sigset_t none, all;
	int rc;

	sigemptyset(&none);
	sigfillset(&all);
	posix_spawn_file_actions_init(&fa);
	posix_spawnattr_init(&at);
	posix_spawn_file_actions_adddup2(&fa, in, 0);
	posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, err, 2);
	posix_spawn_file_actions_addclosefrom_np(&fa, 3);
	posix_spawn_file_actions_addchdir_np(&fa, "/");
	/* Its own process group (a timeout kills the group), and no signal
	 * mask or ignored signal (SIGPIPE) of ours. */
	posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP |
				 POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
	posix_spawnattr_setpgroup(&at, 0);
	posix_spawnattr_setsigmask(&at, &none);
	posix_spawnattr_setsigdefault(&at, &all);
	rc = posix_spawn(pid, argv[0], &fa, &at, argv, hook_env);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&at);
	return rc;
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/*
 * Worker: run the hook argv[0] with @xml on its stdin, bounded by the
 * timeout. Returns its wait status, or -1 with @what saying why. The wait
 * polls a pidfd (without pidfd_open: a short period, and waitpid(WNOHANG)
 * each time), the stdin and stderr pipes, with a deadline; no sleep.
 */
static int run_hook(char *const argv[], const char *xml, char *err,
		    size_t *elen, char *what, size_t wsize)
{
	size_t xlen = strlen(xml), off = 0;
	int in[2] = { -1, -1 }, ep[2] = { -1, -1 }, pidfd, st = -1, rc;
	uint64_t deadline = hooks_now_ns() + hookq.timeout_ns;
	bool killed = false, reaped = false;
	pid_t pid;

	if (pipe2(in, O_CLOEXEC) < 0 || pipe2(ep, O_CLOEXEC) < 0)
		rc = errno;
	else
		rc = spawn_hook(&pid, argv, in[0], ep[1]);
	close_fd(&in[0]);
	close_fd(&ep[1]);
	if (rc) {
		close_fd(&in[1]);
		close_fd(&ep[0]);
		snprintf(what, wsize, "cannot run it: %s", strerror(rc));
		return -1;
	}
	/* Our ends only: the hook's ends stay blocking. */
	fcntl(in[1], F_SETFL, O_NONBLOCK);
	fcntl(ep[0], F_SETFL, O_NONBLOCK);
	pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	for (;;) {
		struct pollfd fds[3] = {
			{ .fd = pidfd, .events = POLLIN },
			{ .fd = ep[0], .events = POLLIN },
			{ .fd = in[1], .events = POLLOUT },
		};
		uint64_t now = hooks_now_ns();
		int ms = (int)((deadline - now + 999999) / 1000000);
		pid_t r = waitpid(pid, &st, WNOHANG);

		if (r == pid || (r < 0 && errno != EINTR) ||
		    (now >= deadline && killed)) {
			reaped = r == pid; /* else a zombie: cannot happen */
			break;
		}
		if (now >= deadline) {
			kill(-pid, SIGKILL); /* its process group */
			killed = true;
			deadline = now + HOOK_REAP_NS;
			continue;
		}
		if (pidfd < 0 && ms > HOOK_NO_PIDFD_MS)
			ms = HOOK_NO_PIDFD_MS;
		poll(fds, 3, ms); /* EINTR: the loop checks again */
		if (fds[1].revents && !read_err(ep[0], err, elen))
			close_fd(&ep[0]);
		if (fds[2].revents) {
			ssize_t w = write(in[1], xml + off, xlen - off);

			off += w > 0 ? (size_t)w : 0;
			/* all written, or EPIPE: it does not read its stdin */
			if (off == xlen || (w < 0 && errno != EAGAIN &&
					    errno != EINTR))
				close_fd(&in[1]);
		}
	}
	if (ep[0] >= 0)
		read_err(ep[0], err, elen); /* written just before it exited */
	close_fd(&ep[0]);
	close_fd(&in[1]);
	close_fd(&pidfd);
	if (killed)
		snprintf(what, wsize, "killed after %gs%s",
			 (double)hookq.timeout_ns / 1e9, reaped ? "" :
			 " (not reaped)");
	else if (!reaped)
		snprintf(what, wsize, "cannot wait for it");
	else if (WIFEXITED(st))
		snprintf(what, wsize, "exit status %d", WEXITSTATUS(st));
	else
		snprintf(what, wsize, "killed by signal %d", WTERMSIG(st));
	return killed || !reaped ? -1 : st;
}

/* Worker: run the hook at @path for @ev; count and report a failure. */
static void hook_one(const char *path, const struct hook_event *ev,
		     const char *xml)
{
	char *const argv[] = { (char *)path, ev->name,
			       (char *)ev->op, (char *)ev->subop,
			       (char *)(*ev->extra ? ev->extra : "-"), NULL };
	char err[HOOK_ERR_MAX + 1], what[64];
	size_t elen = 0;
	int st;

	st = run_hook(argv, xml, err, &elen, what, sizeof(what));
	while (elen && (err[elen - 1] == '\n' || err[elen - 1] == ' '))
		elen--;
	err[elen] = '\0';
	pthread_mutex_lock(&hookq.lock);
	hookq.run++;
	hookq.failed += st != 0;
	pthread_mutex_unlock(&hookq.lock);
	if (st != 0)
		hookq.warn("hook %s %s %s %s: %s%s%s", path, ev->name, ev->op,
			 ev->subop, what, elen ? "; stderr: " : "", err);
}

/* Worker: true if @path is an executable regular file. */
static bool is_hook(const char *path)
{
	struct stat sb;

	return stat(path, &sb) == 0 && S_ISREG(sb.st_mode) &&
	       access(path, X_OK) == 0;
}

static int no_dot(const struct dirent *d)
{
	return d->d_name[0] != '.';
}

static int by_strcmp(const struct dirent **a, const struct dirent **b)
{
	return strcmp((*a)->d_name, (*b)->d_name);
}

/* Worker: DIR/vm, then DIR/vm.d/ *, for @ev (the directory is read anew
 * each time: hooks can be added while the VM runs). */
static void hooks_run(const struct hook_event *ev)
{
	char path[PATH_MAX], *xml = domain_xml(ev);
	struct dirent **ents;
	int n;

	if (!xml) {
		hookq.warn("hooks %s %s %s: out of memory", ev->name, ev->op,
			   ev->subop);
		return;
	}
	snprintf(path, sizeof(path), "%s/vm", hookq.dir);
	if (is_hook(path))
		hook_one(path, ev, xml);
	snprintf(path, sizeof(path), "%s/vm.d", hookq.dir);
	n = scandir(path, &ents, no_dot, by_strcmp);
	for (int i = 0; i < n; i++) {
		if ((size_t)snprintf(path, sizeof(path), "%s/vm.d/%s", hookq.dir,
				     ents[i]->d_name) < sizeof(path) &&
		    is_hook(path))
			hook_one(path, ev, xml);
		free(ents[i]);
	}
	if (n >= 0)
		free(ents);
	free(xml);
}

/* The worker, started by hooks_start: one event at a time, in queue order,
 * until hooks_stop asks it to stop and the queue is empty. */
static void *hooks_thread(void *arg)
{
	struct hook_event ev;

	(void)arg;
	pthread_setname_np(pthread_self(), hookq.thread_name);
	pthread_mutex_lock(&hookq.lock);
	for (;;) {
		while (!hookq.n && !hookq.stop)
			pthread_cond_wait(&hookq.cond, &hookq.lock);
		if (!hookq.n)
			break; /* stopping, and the queue is drained */
		ev = hookq.q[0];
		memmove(hookq.q, hookq.q + 1, --hookq.n * sizeof(ev));
		/* "started" and "stopped" begin a domain's idle afresh. */
		begun_set(ev.uuid, !strcmp(ev.op, "idle") &&
			  !strcmp(ev.subop, "begin"));
		pthread_mutex_unlock(&hookq.lock);
		hooks_run(&ev);
		event_free(&ev);
		pthread_mutex_lock(&hookq.lock);
	}
	pthread_mutex_unlock(&hookq.lock);
	return NULL;
}

int hooks_parse_timeout(const char *text, uint64_t *ns)
{
	char *end;
	double sec;

	errno = 0;
	sec = strtod(text, &end);
	if (errno || *end || end == text || !(sec > 0) ||
	    sec > HOOKS_TIMEOUT_MAX_S)
		return -1;
	*ns = (uint64_t)(sec * 1e9);
	return 0;
}

/* Before any hooks_post. A missing dir means no hooks; one that is not a
 * readable directory, a warning and no hooks. */
int hooks_start(const struct hooks_config *cfg)
{
	const char *dir = cfg->dir;
	struct stat sb;
	DIR *d;
	int err;

	hookq.warn = cfg->warn;
	if (!dir || (stat(dir, &sb) < 0 && errno == ENOENT))
		return 0;
	errno = ENOTDIR;
	d = stat(dir, &sb) == 0 && S_ISDIR(sb.st_mode) ? opendir(dir) : NULL;
	if (!d) {
		cfg->warn("--hooks '%s': %s: no hooks", dir, strerror(errno));
		return 0;
	}
	closedir(d);
	hookq.dir = realpath(dir, NULL); /* hooks run in / */
	if (!hookq.dir) {
		cfg->warn("--hooks '%s': %s: no hooks", dir, strerror(errno));
		return 0;
	}
	hookq.timeout_ns = cfg->timeout_ns;
	snprintf(hookq.thread_name, sizeof(hookq.thread_name), "%s",
		 cfg->thread_name ? cfg->thread_name : "hooks");
	hookq.stop = false;
	err = pthread_create(&hookq.thread, NULL, hooks_thread, NULL);
	if (err) {
		free(hookq.dir);
		hookq.dir = NULL;
		errno = err;
		return -1;
	}
	hookq.started = true;
	return 0;
}

/* Under the lock: append @ev (taking its strings), or drop it when the
 * queue is at its limit or cannot grow. */
static void queue_append(struct hook_event *ev)
{
	if (hookq.n == hookq.cap && hookq.cap < HOOKS_QUEUE_MAX) {
		size_t cap = hookq.cap ? 2 * hookq.cap : 16;
		struct hook_event *q = realloc(hookq.q, cap * sizeof(*q));

		if (q) {
			hookq.q = q;
			hookq.cap = cap;
		}
	}
	if (hookq.n < hookq.cap) {
		hookq.q[hookq.n++] = *ev;
	} else {
		hookq.dropped++;
		event_free(ev);
	}
}

/* The posting thread (one at a time): queue an event for the worker. Never
 * blocks beyond the queue's mutex. */
void hooks_post(const struct hook_domain *dom, const char *op,
		const char *subop, const char *extra, int state,
		uint64_t since_unix_ms)
{
	struct hook_event ev = { .ncpus = dom->ncpus, .state = state,
				 .since_unix_ms = since_unix_ms };
	size_t i, j, last;
	bool begun;

	if (!hookq.started)
		return;
	snprintf(ev.op, sizeof(ev.op), "%s", op ? op : "-");
	snprintf(ev.subop, sizeof(ev.subop), "%s", subop ? subop : "-");
	snprintf(ev.extra, sizeof(ev.extra), "%s", extra ? extra : "");
	ev.name = strdup(dom->name ? dom->name : "");
	ev.uuid = strdup(dom->uuid ? dom->uuid : "");
	pthread_mutex_lock(&hookq.lock);
	if (!ev.name || !ev.uuid) {
		hookq.dropped++;
		pthread_mutex_unlock(&hookq.lock);
		event_free(&ev);
		hookq.warn("hooks %s %s: out of memory", ev.op, ev.subop);
		return;
	}
	if (!strcmp(ev.op, "idle")) {
		/* The domain's latest idle state wins over its pending ones
		 * (those after its last pending started/stopped); and if it
		 * is the state its hooks last saw (a wake-up and a new full
		 * idle both coalesced away), it is dropped too, so its hooks
		 * always see begin and end alternate. */
		begun = begun_find(ev.uuid) >= 0;
		for (i = 0, last = 0; i < hookq.n; i++)
			if (!strcmp(hookq.q[i].uuid, ev.uuid) &&
			    strcmp(hookq.q[i].op, "idle")) {
				last = i + 1;
				begun = false;
			}
		for (i = j = last; i < hookq.n; i++) {
			struct hook_event *e = &hookq.q[i];

			if (!strcmp(e->op, "idle") && !strcmp(e->uuid, ev.uuid)) {
				hookq.dropped++;
				event_free(e);
			} else {
				hookq.q[j++] = *e;
			}
		}
		hookq.n = j;
		if (begun == !strcmp(ev.subop, "begin")) {
			hookq.dropped++;
			pthread_mutex_unlock(&hookq.lock);
			event_free(&ev);
			return;
		}
	}
	queue_append(&ev);
	pthread_cond_signal(&hookq.cond);
	pthread_mutex_unlock(&hookq.lock);
}

/* After the last hooks_post: run what is queued, then stop. */
void hooks_stop(void)
{
	if (!hookq.started)
		return;
	pthread_mutex_lock(&hookq.lock);
	hookq.stop = true;
	pthread_cond_signal(&hookq.cond);
	pthread_mutex_unlock(&hookq.lock);
	pthread_join(hookq.thread, NULL);
	hookq.started = false;
	free(hookq.dir);
	hookq.dir = NULL;
	free(hookq.q);
	hookq.q = NULL;
	hookq.n = hookq.cap = 0;
	for (size_t i = 0; i < hookq.nbegun; i++)
		free(hookq.begun[i].uuid);
	free(hookq.begun);
	hookq.begun = NULL;
	hookq.nbegun = hookq.capbegun = 0;
}

/* Any thread. */
void hooks_counts(uint64_t *run, uint64_t *failed, uint64_t *dropped)
{
	pthread_mutex_lock(&hookq.lock);
	*run = hookq.run;
	*failed = hookq.failed;
	*dropped = hookq.dropped;
	pthread_mutex_unlock(&hookq.lock);
}
