/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The control socket's opening and closing (main thread: before the export
 * thread starts, after it stopped): the socket's directory, a stale socket
 * left by a VMM that was killed (this path's, and the others of the
 * default directory: control_sweep), binding and listening, and closing
 * every client at the end. The clients and their requests: control.c,
 * control_request.c.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "base/error.h"
#include "base/file.h"
#include "export/control.h"
#include "export/control_client.h"
#include "export/export.h"
#include "machine/vm.h"

/* Main thread: mkdir -p @dir, the directories it creates mode 0700. */
static int mkdir_p(const char *dir)
{
	char buf[CONTROL_PATH_MAX];
	size_t i, len = strlen(dir);

	if (len >= sizeof(buf)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	memcpy(buf, dir, len + 1);
	for (i = 1; i <= len; i++) {
		if (buf[i] != '/' && buf[i] != '\0')
			continue;
		buf[i] = '\0';
		if (mkdir(buf, 0700) < 0 && errno != EEXIST)
			return -1;
		buf[i] = dir[i];
	}
	return 0;
}

/*
 * Main thread: an existing file at @path. Returns 0 when it is gone (a
 * stale socket, unlinked), 1 when another process listens on it, -1 with
 * errno set otherwise (ENOTSOCK: not a socket, left alone; *@mode, when
 * not NULL, says what it is). Never blocks: nothing but a socket is
 * touched, and that only by a non-blocking connect().
 */
static int control_stale(const struct sockaddr_un *addr, mode_t *mode)
{
	struct stat sb, now;
	int fd, r;

	if (lstat(addr->sun_path, &sb) < 0)
		return errno == ENOENT ? 0 : -1;
	if (!S_ISSOCK(sb.st_mode)) {
		if (mode)
			*mode = sb.st_mode;
		errno = ENOTSOCK;
		return -1;
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	r = connect(fd, (const struct sockaddr *)addr, sizeof(*addr));
	close(fd);
	/* EAGAIN: its backlog is full, someone is listening. */
	if (r == 0 || errno == EAGAIN || errno == EINPROGRESS)
		return 1;
	if (errno == ENOENT)
		return 0;
	if (errno != ECONNREFUSED)
		return -1;
	/* Still the socket that refused: what took its place meanwhile
	 * (a FIFO, a file) is not removed. */
	if (lstat(addr->sun_path, &now) < 0)
		return errno == ENOENT ? 0 : -1;
	if (!S_ISSOCK(now.st_mode) || now.st_dev != sb.st_dev ||
	    now.st_ino != sb.st_ino) {
		errno = EAGAIN;
		return -1;
	}
	if (unlink(addr->sun_path) < 0 && errno != ENOENT)
		return -1;
	return 0;
}

/*
 * Main thread: remove the stale sockets in the default directory, NAME.sock
 * files left by VMMs that were killed (SIGKILL, a crash) and that no one
 * listens on any more: default names carry the PID, so they would pile up.
 * A socket someone listens on, and anything that is not a socket, stays;
 * so does one made in the last CONTROL_SWEEP_AGE_S seconds (another VMM
 * may be between its bind() and its listen()). At most CONTROL_SWEEP_MAX
 * entries are looked at.
 */
#define CONTROL_SWEEP_AGE_S 10
#define CONTROL_SWEEP_MAX 4096
static void control_sweep(const char *dir)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	struct dirent *e;
	struct stat sb;
	unsigned int seen = 0;
	DIR *d = opendir(dir);
	time_t now = time(NULL);
	size_t n;

	if (!d)
		return;
	while ((e = readdir(d)) && seen++ < CONTROL_SWEEP_MAX) {
		n = strlen(e->d_name);
		if (n < 6 || strcmp(e->d_name + n - 5, ".sock") ||
		    (e->d_type != DT_SOCK && e->d_type != DT_UNKNOWN) ||
		    (size_t)snprintf(a.sun_path, sizeof(a.sun_path), "%s/%s",
				     dir, e->d_name) >= sizeof(a.sun_path) ||
		    lstat(a.sun_path, &sb) < 0 ||
		    sb.st_mtime > now - CONTROL_SWEEP_AGE_S)
			continue;
		(void)control_stale(&a, NULL); /* unlinks a socket no one
						 * listens on */
	}
	closedir(d);
}

/* Main thread: the failure of control_open. */
static int control_open_failed(bool explicit, const char *path,
			       const char *what)
{
	struct control_socket *ctl = control_socket();

	if (ctl->fd >= 0)
		close(ctl->fd);
	ctl->fd = -1;
	if (explicit)
		return vmm_fail(VMM_EXIT_USAGE, "control socket %s %s", path,
				what);
	vmm_warn("control socket %s %s: running without one", path, what);
	return 0;
}

/*
 * Main thread, before the export thread starts: create, bind and listen
 * on cfg->control. The socket is mode 0600 from the start: its inode
 * mode is set before bind(), which creates the file with it.
 */
int control_open(struct vm *vm, const struct export_config *o)
{
	struct control_socket *ctl = control_socket();
	bool explicit = o->control_explicit;
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	char msg[200], why[120];
	struct stat sb;
	mode_t mode = 0;
	int r;

	ctl->vm = vm;
	if (!o->control)
		return 0;
	if (strlen(o->control) >= sizeof(addr.sun_path))
		return control_open_failed(explicit, o->control,
					   "is too long a path");
	strcpy(addr.sun_path, o->control);
	ctl->st = vm_status_new(vm);
	if (!ctl->st)
		return vmm_fail(VMM_EXIT_KVM, "control socket: out of memory");
	if (!explicit && mkdir_p(DEFAULT_CONTROL_DIR) < 0) {
		snprintf(msg, sizeof(msg), "cannot be created: %s: %s",
			 DEFAULT_CONTROL_DIR, strerror(errno));
		return control_open_failed(false, o->control, msg);
	}
	if (!explicit)
		control_sweep(DEFAULT_CONTROL_DIR);
	if (explicit && output_dir_check(o->control, why, sizeof(why))) {
		snprintf(msg, sizeof(msg), "cannot be created: %s", why);
		return control_open_failed(explicit, o->control, msg);
	}
	r = control_stale(&addr, &mode);
	if (r > 0)
		return control_open_failed(explicit, o->control, "is in use");
	if (r < 0 && errno == ENOTSOCK) {
		snprintf(msg, sizeof(msg), "cannot be created: the path exists "
			 "and is %s, not a socket (left as it is)",
			 file_kind_name(mode));
		return control_open_failed(explicit, o->control, msg);
	}
	if (r < 0) {
		snprintf(msg, sizeof(msg), "cannot be created: %s",
			 strerror(errno));
		return control_open_failed(explicit, o->control, msg);
	}
	ctl->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
			0);
	if (ctl->fd < 0 || fchmod(ctl->fd, 0600) < 0 ||
	    bind(ctl->fd, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
		if (errno == EADDRINUSE) /* bound since control_stale */
			return control_open_failed(explicit, o->control,
						   "is in use");
		snprintf(msg, sizeof(msg), "cannot be created: %s",
			 strerror(errno));
		return control_open_failed(explicit, o->control, msg);
	}
	if (chmod(addr.sun_path, 0600) < 0 || lstat(addr.sun_path, &sb) < 0 ||
	    listen(ctl->fd, CONTROL_BACKLOG) < 0) {
		snprintf(msg, sizeof(msg), "cannot be created: %s",
			 strerror(errno));
		unlink(addr.sun_path);
		return control_open_failed(explicit, o->control, msg);
	}
	strcpy(ctl->path, addr.sun_path);
	ctl->dev = sb.st_dev;
	ctl->ino = sb.st_ino;
	return 0;
}

/* Main thread, after the export thread stopped: close every client and
 * the socket, remove the socket file if it still is ours. */
void control_close(void)
{
	struct control_socket *ctl = control_socket();
	struct stat sb;

	for (unsigned int i = 0; i < ctl->nclients; i++)
		client_free(ctl->clients[i]);
	ctl->nclients = 0;
	ctl->npolled = 0;
	if (ctl->fd >= 0) {
		close(ctl->fd);
		ctl->fd = -1;
		if (lstat(ctl->path, &sb) == 0 && sb.st_dev == ctl->dev &&
		    sb.st_ino == ctl->ino)
			unlink(ctl->path);
	}
	vm_status_free(ctl->st);
	ctl->st = NULL;
}
