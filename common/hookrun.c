/* SPDX-License-Identifier: GPL-2.0-only */
/* libvirt-style hooks, run synchronously: see hookrun.h. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hookrun.h"
#include "monotonic.h"

#define HOOK_ERR_MAX 4096   /* the tail of a hook's stderr we report */
#define HOOK_REAP_NS 5000000000ull /* after SIGKILL, wait at most this */
#define HOOK_NO_PIDFD_MS 20 /* poll period when pidfd_open is missing */

static char *const hook_env[] = {
	"LC_ALL=C",
	"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	"HOME=/",
	NULL
};

/* append what @fd holds now to @err, keeping the last bytes only.
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

/* start @argv[0] with @in / @err as stdin / stderr; 0 or errno. */
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

void hookrun_stop_set(struct hookrun_stop *stop, uint64_t by_ns)
{
	/* release: pairs with the acquire in stop_by(), which reads it
	 * after the wake-up on fd the caller sends next */
	atomic_store_explicit(&stop->by_ns, by_ns ? by_ns : 1,
			      memory_order_release);
}

/* The stop's bound, 0 when there is none (yet). */
static uint64_t stop_by(const struct hookrun_config *cfg)
{
	/* acquire: pairs with the release in hookrun_stop_set */
	return cfg->stop ? atomic_load_explicit(&cfg->stop->by_ns,
						 memory_order_acquire)
			 : 0;
}

/*
 * Run the hook argv[0] with @xml on its stdin, bounded by the
 * timeout, and by the stop's bound once it is set. Returns its wait status, or -1 with @what saying why. The wait
 * polls a pidfd (without pidfd_open: a short period, and waitpid(WNOHANG)
 * each time), the stdin and stderr pipes, with a deadline; no sleep.
 */
static int run_hook(const struct hookrun_config *cfg, char *const argv[],
		    const char *xml, char *err, size_t *elen, char *what,
		    size_t wsize)
{
	size_t xlen = strlen(xml), off = 0;
	int in[2] = { -1, -1 }, ep[2] = { -1, -1 }, pidfd, st = -1, rc;
	uint64_t deadline = monotonic_ns() + cfg->timeout_ns;
	bool killed = false, reaped = false, cut = false;
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
		uint64_t now = monotonic_ns(), by = stop_by(cfg);
		struct pollfd fds[4] = {
			{ .fd = pidfd, .events = POLLIN },
			{ .fd = ep[0], .events = POLLIN },
			{ .fd = in[1], .events = POLLOUT },
			/* the stop's wake-up, until its bound is seen */
			{ .fd = cfg->stop && !by ? cfg->stop->fd : -1,
			  .events = POLLIN },
		};

		if (by && by < deadline && !killed) {
			deadline = by; /* the stop's bound comes first */
			cut = true;
		}
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
		poll(fds, 4, ms); /* EINTR: the loop checks again */
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
	if (killed && cut)
		snprintf(what, wsize, "killed: stopping, and the hooks' time "
			 "is spent%s", reaped ? "" : " (not reaped)");
	else if (killed)
		snprintf(what, wsize, "killed after %gs%s",
			 (double)cfg->timeout_ns / 1e9, reaped ? "" :
			 " (not reaped)");
	else if (!reaped)
		snprintf(what, wsize, "cannot wait for it");
	else if (WIFEXITED(st))
		snprintf(what, wsize, "exit status %d", WEXITSTATUS(st));
	else
		snprintf(what, wsize, "killed by signal %d", WTERMSIG(st));
	return killed || !reaped ? -1 : st;
}

/* true if @path is an executable regular file. */
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

/* Run the hook at @path with @argv[1..]; count and report a failure. */
static void hook_one(const struct hookrun_config *cfg, const char *path,
		     char **argv, const char *xml, uint64_t *run,
		     uint64_t *failed)
{
	char err[HOOK_ERR_MAX + 1], what[64];
	size_t elen = 0;
	uint64_t by = stop_by(cfg);
	int st;

	argv[0] = (char *)path;
	if (by && monotonic_ns() >= by) {
		snprintf(what, sizeof(what), "not run: stopping, and the "
			 "hooks' time is spent");
		st = -1;
	} else {
		st = run_hook(cfg, argv, xml, err, &elen, what, sizeof(what));
	}
	while (elen && (err[elen - 1] == '\n' || err[elen - 1] == ' '))
		elen--;
	err[elen] = '\0';
	++*run;
	*failed += st != 0;
	if (st != 0)
		cfg->warn("hook %s %s %s %s: %s%s%s", path, argv[1], argv[2],
			  argv[3], what, elen ? "; stderr: " : "", err);
}

/* The hooks of @dir, in order: DIR/vm, then DIR/vm.d/ * sorted (read anew
 * each time). Returns how many paths it put in @paths (malloc'd each; at
 * most @max). */
static unsigned int hook_paths(const char *dir, char **paths,
			       unsigned int max)
{
	char path[PATH_MAX];
	struct dirent **ents;
	unsigned int k = 0;
	int n;

	snprintf(path, sizeof(path), "%s/vm", dir);
	if (is_hook(path) && k < max)
		paths[k++] = strdup(path);
	snprintf(path, sizeof(path), "%s/vm.d", dir);
	n = scandir(path, &ents, no_dot, by_strcmp);
	for (int i = 0; i < n; i++) {
		if ((size_t)snprintf(path, sizeof(path), "%s/vm.d/%s", dir,
				     ents[i]->d_name) < sizeof(path) &&
		    is_hook(path) && k < max)
			paths[k++] = strdup(path);
		free(ents[i]);
	}
	if (n >= 0)
		free(ents);
	while (k && !paths[k - 1]) /* strdup failed: fewer hooks */
		k--;
	return k;
}

#define HOOKS_MAX 256 /* hooks of one event; more are not run */

void hookrun_event_xml(const struct hookrun_config *cfg, const char *name,
		       const char *op, const char *subop, const char *extra,
		       const char *xml, uint64_t *run, uint64_t *failed)
{
	char *paths[HOOKS_MAX];
	char *argv[] = { NULL, (char *)(name ? name : ""),
			 (char *)(op ? op : "-"), (char *)(subop ? subop : "-"),
			 (char *)(extra && *extra ? extra : "-"), NULL };
	unsigned int n;

	n = hook_paths(cfg->dir, paths, HOOKS_MAX);
	for (unsigned int i = 0; i < n; i++) {
		if (paths[i])
			hook_one(cfg, paths[i], argv, xml, run, failed);
		free(paths[i]);
	}
}

void hookrun_event(const struct hookrun_config *cfg,
		   const struct hook_domain *dom, const char *op,
		   const char *subop, const char *extra,
		   const struct sysidle_doc *doc, uint64_t *run,
		   uint64_t *failed)
{
	char *xml = sysidle_doc_domain_xml(dom, doc);

	if (!xml) {
		cfg->warn("hooks %s %s %s: out of memory",
			  dom->name ? dom->name : "", op ? op : "-",
			  subop ? subop : "-");
		return;
	}
	hookrun_event_xml(cfg, dom->name, op, subop, extra, xml, run, failed);
	free(xml);
}

void hookrun_events_bounded(const struct hookrun_config *cfg,
			    const struct hook_domain *dom,
			    const struct hookrun_call *calls,
			    unsigned int ncalls, uint64_t *run,
			    uint64_t *failed)
{
	struct hookrun_stop bound = { .fd = -1 };
	struct hookrun_config c = *cfg;

	hookrun_stop_set(&bound, monotonic_ns() + cfg->timeout_ns);
	c.stop = &bound;
	for (unsigned int i = 0; i < ncalls; i++)
		hookrun_event(&c, dom, calls[i].op, calls[i].subop,
			      calls[i].extra, calls[i].doc, run, failed);
}

int hooks_parse_timeout(const char *text, uint64_t *ns)
{
	char *end;
	double sec;

	errno = 0;
	sec = strtod(text, &end);
	if (errno || *end || end == text || !(sec >= 0.001) ||
	    sec > HOOKS_TIMEOUT_MAX_S)
		return -1;
	*ns = (uint64_t)(sec * 1e9);
	return 0;
}

char *hookrun_resolve_dir(const char *dir,
			  void (*warn)(const char *fmt, ...))
{
	struct stat sb;
	char *real;
	DIR *d;

	if (!dir || (stat(dir, &sb) < 0 && errno == ENOENT))
		return NULL;
	errno = ENOTDIR;
	d = stat(dir, &sb) == 0 && S_ISDIR(sb.st_mode) ? opendir(dir) : NULL;
	if (!d) {
		warn("--hooks '%s': %s: no hooks", dir, strerror(errno));
		return NULL;
	}
	closedir(d);
	real = realpath(dir, NULL); /* hooks run in / */
	if (!real)
		warn("--hooks '%s': %s: no hooks", dir, strerror(errno));
	return real;
}
