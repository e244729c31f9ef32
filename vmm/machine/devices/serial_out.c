/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The UART's transmitter side (serial.c): the guest's bytes go into a
 * bounded ring that the vCPU thread appends to without ever blocking, and
 * a thread of its own, vmm-serial-out, drains the ring to stdout in order
 * with ordinary blocking write(2)s on fd 1 (never through stdio's FILE,
 * which nothing else uses for guest output). A byte that finds the ring
 * full is dropped and counted: a stdout nobody reads (a paused pager, a
 * stuck log pipe) costs the guest its output, never a vCPU or the stop.
 *
 * At the stop, what stdout takes within SERIAL_OUT_FLUSH_NS is written;
 * the rest counts as dropped, and a writer stuck in write() is left
 * behind, detached (the process's exit ends it). The count is reported
 * once on stderr and in --stats-json.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "base/error.h"
#include "base/file.h"
#include "machine/devices/devices.h"

#define SERIAL_OUT_SIZE 65536u /* the ring, in bytes */
/* One write() at most: a pipe that poll() calls writable takes it without
 * blocking (one free page), so the writer waits in poll(), where the stop
 * can wake it, and seldom in write(). */
#define SERIAL_OUT_CHUNK PIPE_BUF
#define SERIAL_OUT_FLUSH_NS 500000000ll /* the stop's flush, at most */

enum serial_out_state {
	OUT_RUN,     /* the VM runs: the writer waits for bytes */
	OUT_DRAIN,   /* stopping: the writer ends once the ring is empty */
	OUT_ABANDON, /* the flush's time is up: the writer ends at once */
};

static struct {
	/* A leaf, taken under uart.lock; held for a few instructions only
	 * (never across poll() or write()): ring, head, count, dropped, err,
	 * exited. */
	pthread_mutex_t lock;
	pthread_cond_t more;    /* the writer waits: bytes, or a stop */
	pthread_cond_t drained; /* the stop waits for the writer's end */
	uint8_t ring[SERIAL_OUT_SIZE];
	unsigned int head, count;
	uint64_t dropped;  /* bytes lost: the ring full, stdout failed, the
			    * stop's flush ran out of time */
	int err;           /* errno of a failed write: all later bytes drop */
	bool exited;       /* the writer left its loop */
	/* enum serial_out_state: written under lock, read under it too but
	 * in serial_out_write() (the pairing is described there). */
	atomic_int state;
	atomic_bool in_write; /* the writer is in (or entering) write() */
	int stop_fd;       /* eventfd: OUT_ABANDON, wakes the writer's poll */
	pthread_t thread;
	bool started;      /* main thread only */
} out = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.more = PTHREAD_COND_INITIALIZER,
	.stop_fd = -1,
};

/* Any thread, any lock but out.lock held (the vCPU thread under
 * uart.lock): queue @c for stdout, or drop and count it. Never blocks:
 * out.lock is only ever held briefly. */
void serial_output_put(uint8_t c)
{
	pthread_mutex_lock(&out.lock);
	if (out.count == SERIAL_OUT_SIZE || out.err) {
		out.dropped++;
	} else {
		out.ring[(out.head + out.count) % SERIAL_OUT_SIZE] = c;
		/* The writer waits only with the ring empty. */
		if (out.count++ == 0)
			pthread_cond_signal(&out.more);
	}
	pthread_mutex_unlock(&out.lock);
}

/* The writer thread, without out.lock: write up to @len bytes of @buf to
 * stdout once poll() says it can take some. Returns the bytes written, 0
 * when the stop gave up on stdout (OUT_ABANDON), -errno on a failure. */
static ssize_t serial_out_write(const uint8_t *buf, size_t len)
{
	struct pollfd fds[2] = {
		{ .fd = STDOUT_FILENO, .events = POLLOUT },
		{ .fd = out.stop_fd, .events = POLLIN },
	};
	ssize_t n;

	for (;;) {
		if (poll(fds, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (fds[1].revents)
			return 0;
		/* seq_cst store then load; pairs with serial_output_stop()'s
		 * store of OUT_ABANDON then load of in_write: either the stop
		 * sees us in write() and leaves us behind, or we see
		 * OUT_ABANDON here and do not enter it (then it joins us). */
		atomic_store(&out.in_write, true);
		if (atomic_load(&out.state) == OUT_ABANDON) {
			atomic_store(&out.in_write, false);
			return 0;
		}
		/* POLLERR, POLLHUP, POLLNVAL: write() says what failed. */
		n = write(STDOUT_FILENO, buf, len);
		atomic_store(&out.in_write, false); /* seq_cst, as above */
		if (n > 0)
			return n;
		/* EAGAIN: a stdout left O_NONBLOCK by whoever shares it */
		if (n < 0 && errno != EAGAIN && errno != EINTR)
			return -errno;
	}
}

/* The writer thread, out.lock held: the write of @n bytes from the head
 * is done (@n < 0: -errno, stdout failed; the rest is dropped and so is
 * what comes later). Nothing to do once the stop gave up: it counted the
 * ring, this chunk too, as dropped. */
static void serial_out_consume(ssize_t n)
{
	if (atomic_load(&out.state) == OUT_ABANDON)
		return;
	if (n < 0) {
		out.err = (int)-n;
		out.dropped += out.count;
		out.count = 0;
		return;
	}
	out.head = (out.head + (unsigned int)n) % SERIAL_OUT_SIZE;
	out.count -= (unsigned int)n;
}

/* The writer thread: the ring to stdout, in order, until the stop. */
static void *serial_out_thread(void *arg)
{
	unsigned int head, len;
	ssize_t n;

	(void)arg;
	pthread_setname_np(pthread_self(), "vmm-serial-out");
	pthread_mutex_lock(&out.lock);
	for (;;) {
		while (!out.count && atomic_load(&out.state) == OUT_RUN)
			pthread_cond_wait(&out.more, &out.lock);
		if (!out.count || atomic_load(&out.state) == OUT_ABANDON)
			break;
		head = out.head;
		len = out.count;
		if (len > SERIAL_OUT_SIZE - head)
			len = SERIAL_OUT_SIZE - head;
		if (len > SERIAL_OUT_CHUNK)
			len = SERIAL_OUT_CHUNK;
		pthread_mutex_unlock(&out.lock);
		/* ring[head, head + len) stays as it is without the lock:
		 * serial_output_put() only fills the free part. */
		n = serial_out_write(out.ring + head, len);
		pthread_mutex_lock(&out.lock);
		serial_out_consume(n);
	}
	out.exited = true;
	pthread_cond_broadcast(&out.drained);
	pthread_mutex_unlock(&out.lock);
	return NULL;
}

/* The main thread, before any vCPU runs: the writer thread. */
int serial_output_start(void)
{
	pthread_condattr_t attr;

	out.stop_fd = eventfd(0, EFD_CLOEXEC);
	if (out.stop_fd < 0)
		return vmm_fail(VMM_EXIT_KVM, "eventfd: %s", strerror(errno));
	/* the stop's deadline is a CLOCK_MONOTONIC time */
	if (pthread_condattr_init(&attr) ||
	    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC) ||
	    pthread_cond_init(&out.drained, &attr))
		return vmm_fail(VMM_EXIT_KVM, "serial output: cannot set up "
				"its condition variable");
	pthread_condattr_destroy(&attr);
	if (pthread_create(&out.thread, NULL, serial_out_thread, NULL))
		return vmm_fail(VMM_EXIT_KVM, "cannot start the serial "
				"output thread");
	out.started = true;
	return 0;
}

/* serial_output_stop(), out.lock held: wait until the writer has emptied
 * the ring and ended, or until @deadline (CLOCK_MONOTONIC). */
static void serial_out_wait_drained(const struct timespec *deadline)
{
	int r = 0;

	/* 0: woken (perhaps spuriously); ETIMEDOUT, or any error: done */
	while (!out.exited && !r)
		r = pthread_cond_timedwait(&out.drained, &out.lock, deadline);
}

/* serial_output_stop(), out.lock held, the flush's time up: count what is
 * left as dropped and make the writer end. Returns true when the writer
 * will end by itself (join it), false when it may be stuck in write()
 * (leave it). */
static bool serial_out_abandon(void)
{
	uint64_t one = 1;

	out.dropped += out.count;
	out.count = 0;
	/* seq_cst; pairs with serial_out_write(): see there. */
	atomic_store(&out.state, OUT_ABANDON);
	pthread_cond_signal(&out.more);
	if (write(out.stop_fd, &one, sizeof(one)) < 0)
		return false;
	return !atomic_load(&out.in_write);
}

/* The main thread, once every vCPU thread has been joined (nothing more
 * is put): write what stdout takes within SERIAL_OUT_FLUSH_NS, then end
 * the writer or leave it behind; report the dropped bytes once. */
void serial_output_stop(void)
{
	struct timespec deadline;
	bool join = true;
	uint64_t dropped;
	int err;

	if (!out.started)
		return;
	clock_gettime(CLOCK_MONOTONIC, &deadline);
	deadline.tv_nsec += SERIAL_OUT_FLUSH_NS;
	deadline.tv_sec += deadline.tv_nsec / 1000000000;
	deadline.tv_nsec %= 1000000000;
	pthread_mutex_lock(&out.lock);
	/* seq_cst like every store of state: read without the lock in
	 * serial_out_write(). */
	atomic_store(&out.state, OUT_DRAIN);
	pthread_cond_signal(&out.more);
	serial_out_wait_drained(&deadline);
	if (!out.exited)
		join = serial_out_abandon();
	dropped = out.dropped;
	err = out.err;
	pthread_mutex_unlock(&out.lock);
	if (join)
		pthread_join(out.thread, NULL);
	else
		pthread_detach(out.thread);
	out.started = false;
	if (dropped) /* never blocks, even on the same blocked pipe (2>&1) */
		vmm_warn("serial: %" PRIu64 " bytes of guest output dropped: "
			 "%s%s", dropped, err ? "stdout: " : "",
			 err ? strerror(err) : "stdout was not being read");
}

/* Any thread: the guest's output bytes dropped so far (all of them after
 * serial_output_stop()). */
uint64_t serial_output_dropped(void)
{
	uint64_t n;

	pthread_mutex_lock(&out.lock);
	n = out.dropped;
	pthread_mutex_unlock(&out.lock);
	return n;
}
