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
 * All of it runs on one worker thread. hooks_post() only queues: pending
 * "idle" events that have not started yet are replaced by the latest one
 * (counted as dropped), and one that would repeat the last idle hook run
 * is dropped as well, so "idle begin" and "idle end" always alternate;
 * "started" and "stopped" are never dropped.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sysidle/sysidle.h>

#include "export.h"
#include "vmm.h"

#define HOOKS_QUEUE 16      /* coalescing keeps it at <= 3 in practice */
#define HOOK_ERR_MAX 4096   /* the tail of a hook's stderr we report */
#define HOOK_REAP_NS 5000000000ull /* after SIGKILL, wait at most this */
#define HOOK_NO_PIDFD_MS 20 /* poll period when pidfd_open is missing */

struct hook_event {
	char op[16], subop[16], extra[24];
	int state;
	uint64_t since_unix_ms;
};

static struct {
	char *dir;              /* set before the worker starts, then const */
	uint64_t timeout_ns;
	unsigned int ncpus;
	pthread_t thread;
	bool started;           /* main thread only */

	pthread_mutex_t lock;   /* guards everything below */
	pthread_cond_t cond;    /* queue not empty, or stop */
	struct hook_event q[HOOKS_QUEUE];
	unsigned int head, n;
	bool stop;
	bool idle_begun; /* the last idle hook taken from the queue: begin */
	uint64_t run, failed, dropped;
} hookq = { .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER };

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

/* Worker: the domain XML every hook of @ev reads on stdin. */
static int domain_xml(char *buf, size_t size, const struct hook_event *ev)
{
	char name[6 * 80 + 1], since[40];
	time_t t = (time_t)(ev->since_unix_ms / 1000);
	struct tm tm;

	if (strlen(vm_name()) > 80) /* checked by the option parser */
		return -1;
	xml_escape(name, vm_name());
	gmtime_r(&t, &tm);
	strftime(since, sizeof(since), "%Y-%m-%dT%H:%M:%S", &tm);
	return snprintf(buf, size, "<domain type='kvm'><name>%s</name>"
			"<uuid>%s</uuid><vcpu>%u</vcpu><metadata>"
			"<sysidle:state xmlns:sysidle='urn:sysidle:1' "
			"state='%s' since='%s.%03uZ'/></metadata></domain>\n",
			name, vm_uuid(), hookq.ncpus,
			sysidle_state_name((enum sysidle_state)ev->state),
			since, (unsigned int)(ev->since_unix_ms % 1000));
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
	uint64_t deadline = now_ns() + hookq.timeout_ns;
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
		uint64_t now = now_ns();
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
	char *const argv[] = { (char *)path, (char *)vm_name(),
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
		vmm_warn("hook %s %s %s %s: %s%s%s", path, vm_name(), ev->op,
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
	char xml[1024], path[PATH_MAX];
	struct dirent **ents;
	int n = domain_xml(xml, sizeof(xml), ev);

	if (n < 0 || n >= (int)sizeof(xml))
		return; /* cannot happen: --name has at most 80 bytes */
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
}

/* The worker, started by hooks_start: one event at a time, in queue order,
 * until hooks_stop asks it to stop and the queue is empty. */
static void *hooks_thread(void *arg)
{
	struct hook_event ev;

	(void)arg;
	pthread_setname_np(pthread_self(), "vmm-hooks");
	pthread_mutex_lock(&hookq.lock);
	for (;;) {
		while (!hookq.n && !hookq.stop)
			pthread_cond_wait(&hookq.cond, &hookq.lock);
		if (!hookq.n)
			break; /* stopping, and the queue is drained */
		ev = hookq.q[hookq.head];
		hookq.head = (hookq.head + 1) % HOOKS_QUEUE;
		hookq.n--;
		if (!strcmp(ev.op, "idle"))
			hookq.idle_begun = !strcmp(ev.subop, "begin");
		pthread_mutex_unlock(&hookq.lock);
		hooks_run(&ev);
		pthread_mutex_lock(&hookq.lock);
	}
	pthread_mutex_unlock(&hookq.lock);
	return NULL;
}

/* Main thread, before the export thread starts. A missing @dir means no
 * hooks; one that is not a readable directory, a warning and no hooks. */
int hooks_start(const char *dir, uint64_t timeout_ns, const struct vm *vm)
{
	struct stat sb;
	DIR *d;
	int err;

	if (!dir || (stat(dir, &sb) < 0 && errno == ENOENT))
		return 0;
	errno = ENOTDIR;
	d = stat(dir, &sb) == 0 && S_ISDIR(sb.st_mode) ? opendir(dir) : NULL;
	if (!d) {
		vmm_warn("--hooks '%s': %s: no hooks", dir, strerror(errno));
		return 0;
	}
	closedir(d);
	hookq.dir = realpath(dir, NULL); /* hooks run in / */
	if (!hookq.dir) {
		vmm_warn("--hooks '%s': %s: no hooks", dir, strerror(errno));
		return 0;
	}
	hookq.timeout_ns = timeout_ns;
	hookq.ncpus = vm->ncpus;
	err = pthread_create(&hookq.thread, NULL, hooks_thread, NULL);
	if (err) {
		free(hookq.dir);
		hookq.dir = NULL;
		return vmm_fail(VMM_EXIT_KVM, "cannot start the hooks thread: "
				"%s", strerror(err));
	}
	hookq.started = true;
	return 0;
}

/* Main or export thread (one at a time, as export.c guarantees): queue an
 * event for the worker. Never blocks beyond the queue's mutex. */
void hooks_post(const char *op, const char *subop, const char *extra,
		int state, uint64_t since_unix_ms)
{
	struct hook_event ev = { .state = state, .since_unix_ms = since_unix_ms };
	unsigned int i, j;

	if (!hookq.started)
		return;
	snprintf(ev.op, sizeof(ev.op), "%s", op ? op : "-");
	snprintf(ev.subop, sizeof(ev.subop), "%s", subop ? subop : "-");
	snprintf(ev.extra, sizeof(ev.extra), "%s", extra ? extra : "");
	pthread_mutex_lock(&hookq.lock);
	if (!strcmp(ev.op, "idle")) {
		/* The latest idle state wins over the pending ones; and if it
		 * is the state the hooks last saw (a wake-up and a new full
		 * idle both coalesced away), it is dropped too, so the hooks
		 * always see begin and end alternate. */
		for (i = j = 0; i < hookq.n; i++) {
			struct hook_event *e = &hookq.q[(hookq.head + i) % HOOKS_QUEUE];

			if (strcmp(e->op, "idle"))
				hookq.q[(hookq.head + j++) % HOOKS_QUEUE] = *e;
		}
		hookq.dropped += hookq.n - j;
		hookq.n = j;
		if (hookq.idle_begun == !strcmp(ev.subop, "begin")) {
			hookq.dropped++;
			pthread_mutex_unlock(&hookq.lock);
			return;
		}
	}
	if (hookq.n < HOOKS_QUEUE)
		hookq.q[(hookq.head + hookq.n++) % HOOKS_QUEUE] = ev;
	else
		hookq.dropped++;
	pthread_cond_signal(&hookq.cond);
	pthread_mutex_unlock(&hookq.lock);
}

/* Main thread, after the last hooks_post: run what is queued, then stop. */
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
