/* SPDX-License-Identifier: GPL-2.0-only */
/* Output files that never block the VM (file.h). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/file.h"
#include "base/time.h"

/* Any thread: see file.h. */
const char *file_kind_name(mode_t mode)
{
	if (S_ISREG(mode))
		return "a regular file";
	if (S_ISDIR(mode))
		return "a directory";
	if (S_ISFIFO(mode))
		return "a FIFO";
	if (S_ISCHR(mode))
		return "a character device";
	if (S_ISBLK(mode))
		return "a block device";
	if (S_ISSOCK(mode))
		return "a socket";
	if (S_ISLNK(mode))
		return "a symbolic link";
	return "an unknown kind of file";
}

/* The kinds output_open() refuses: a message, else NULL. */
static const char *output_kind_refused(mode_t mode)
{
	if (S_ISDIR(mode))
		return "is a directory";
	if (S_ISSOCK(mode))
		return "is a socket (expected a regular file, a FIFO or a "
		       "character device)";
	if (S_ISBLK(mode))
		return "is a block device (expected a regular file, a FIFO "
		       "or a character device)";
	return NULL;
}

/* Any thread: see file.h. */
int output_dir_check(const char *path, char *why, size_t n)
{
	const char *slash = strrchr(path, '/');
	char dir[PATH_MAX];
	struct stat sb;

	if (!slash)
		snprintf(dir, sizeof(dir), ".");
	else if (slash == path)
		snprintf(dir, sizeof(dir), "/");
	else if ((size_t)snprintf(dir, sizeof(dir), "%.*s",
				  (int)(slash - path), path) >= sizeof(dir)) {
		snprintf(why, n, "%s", strerror(ENAMETOOLONG));
		return -1;
	}
	if (stat(dir, &sb) < 0) {
		snprintf(why, n, "its directory '%s' %s", dir, errno == ENOENT ?
			 "does not exist" : strerror(errno));
		return -1;
	}
	if (!S_ISDIR(sb.st_mode)) {
		snprintf(why, n, "'%s' is not a directory", dir);
		return -1;
	}
	if (access(dir, W_OK | X_OK) < 0) {
		snprintf(why, n, "cannot create files in '%s': %s", dir,
			 strerror(errno));
		return -1;
	}
	return 0;
}

/* Any thread: see file.h. */
int output_check(const char *path, char *why, size_t n)
{
	const char *what;
	struct stat sb;

	if (stat(path, &sb) == 0) {
		what = output_kind_refused(sb.st_mode);
		if (what) {
			snprintf(why, n, "%s", what);
			return -1;
		}
		if (access(path, W_OK) < 0) {
			snprintf(why, n, "cannot be written: %s",
				 strerror(errno));
			return -1;
		}
		return 0;
	}
	if (errno != ENOENT) {
		snprintf(why, n, "%s", strerror(errno));
		return -1;
	}
	return output_dir_check(path, why, n);
}

/* Any thread: see file.h. */
int output_open(const char *path, bool *fifo, char *why, size_t n)
{
	const char *what;
	struct stat sb;
	int fd, err;

	/* The kind first: open() would say ENXIO for a socket and for a
	 * FIFO with no reader alike. */
	if (stat(path, &sb) == 0 && (what = output_kind_refused(sb.st_mode))) {
		snprintf(why, n, "%s", what);
		errno = S_ISDIR(sb.st_mode) ? EISDIR : ENODEV;
		return -1;
	}
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NONBLOCK | O_CLOEXEC,
		  0666);
	if (fd < 0) {
		err = errno;
		if (err == ENXIO && stat(path, &sb) == 0 &&
		    S_ISFIFO(sb.st_mode)) {
			snprintf(why, n, "is a FIFO with no reader");
		} else {
			snprintf(why, n, "%s", strerror(err));
			if (err == ENXIO) /* a socket put there meanwhile */
				err = ENODEV;
		}
		errno = err;
		return -1;
	}
	/* What was opened, not what stat() saw: the path may have changed. */
	if (fstat(fd, &sb) < 0 || (what = output_kind_refused(sb.st_mode))) {
		err = what ? ENODEV : errno;
		snprintf(why, n, "%s", what ? what : strerror(err));
		close(fd);
		errno = err;
		return -1;
	}
	if (fifo)
		*fifo = S_ISFIFO(sb.st_mode);
	return fd;
}

/* Any thread: see file.h. */
size_t output_write(int fd, const void *buf, size_t len,
		    uint64_t deadline_ns)
{
	struct pollfd p = { .fd = fd, .events = POLLOUT };
	const char *b = buf;
	size_t done = 0;
	uint64_t now;
	ssize_t w;
	int ms, r;

	while (done < len) {
		now = now_ns();
		ms = 0;
		if (deadline_ns > now)
			ms = (int)((deadline_ns - now + 999999) / 1000000);
		/* A blocking fd (stderr) is written only once poll() says
		 * it takes some: see file.h. */
		r = poll(&p, 1, ms);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return done;
		if (r == 0) {
			if (deadline_ns > now_ns())
				continue;
			errno = ETIMEDOUT;
			return done;
		}
		w = write(fd, b + done, len - done);
		if (w > 0) {
			done += (size_t)w;
			continue;
		}
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EAGAIN) {
			if (deadline_ns > now_ns())
				continue;
			errno = ETIMEDOUT;
		}
		if (w == 0)
			errno = EIO;
		return done;
	}
	return done;
}
