/* SPDX-License-Identifier: GPL-2.0-only */
/* The bridge's bounded stop: see stop.h. */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "bridge.h"
#include "metrics.h"
#include "monotonic.h"
#include "stop.h"

static struct {
	int sigfd;                   /* SIGTERM, SIGINT */
	int stop_efd;                /* readable once a stop was asked for */
	int done_efd;                /* stop_finish(): the thread ends */
	uint64_t grace_ns;
	const char *metrics_file;    /* --metrics-file, NULL: none */
	const char *wakes_file;      /* --wakes-file, NULL: none */
	pthread_t thread;
	bool started;
	atomic_int signo;            /* the first stop signal, 0: none */
	_Atomic(const char *) phase; /* the main thread's, for the message */
} st = { .sigfd = -1, .stop_efd = -1, .done_efd = -1 };

/* The clean stop did not end: exit now, saying @why and where it was. */
static void stop_force(const char *why)
{
	/* Pairs with the release store in stop_phase(). */
	const char *phase = atomic_load_explicit(&st.phase,
						 memory_order_acquire);

	warn_nowait("%s: %s, in the middle of %s: exiting now (metadata left "
		    "behind stops counting when its lease runs out)", PROG,
		    why, phase ? phase : "the stop");
	metrics_write_down(st.metrics_file);
	if (st.wakes_file) /* a file no longer kept current: gone */
		unlink(st.wakes_file);
	_exit(STOP_FORCED_STATUS);
}

/* Reads the stop signals until stop_finish(); after the first, gives the
 * clean stop st.grace_ns. */
static void *stop_thread(void *arg)
{
	struct pollfd p[2] = { { .fd = st.sigfd, .events = POLLIN },
			       { .fd = st.done_efd, .events = POLLIN } };
	uint64_t deadline = 0, one = 1;
	struct signalfd_siginfo si;
	char why[64];

	(void)arg;
	pthread_setname_np(pthread_self(), "sysidle-stop");
	for (;;) {
		int timeout = -1, n;

		if (deadline) {
			uint64_t now = monotonic_ns();

			if (now >= deadline) {
				snprintf(why, sizeof(why), "the stop did not "
					 "end within %" PRIu64 " s",
					 st.grace_ns / 1000000000u);
				stop_force(why);
			}
			timeout = (int)((deadline - now + 999999) / 1000000);
		}
		n = poll(p, 2, timeout);
		if (n < 0 && errno != EINTR)
			return NULL; /* not expected: the clean stop alone */
		if (n <= 0)
			continue;
		if (p[1].revents)
			return NULL;
		if (!(p[0].revents & POLLIN) ||
		    read(st.sigfd, &si, sizeof(si)) != sizeof(si))
			continue;
		if (deadline) {
			snprintf(why, sizeof(why), "signal %u again",
				 si.ssi_signo);
			stop_force(why);
		}
		deadline = monotonic_ns() + st.grace_ns;
		/* Pairs with the acquire load in stop_requested(); the
		 * eventfd wakes a main thread waiting in poll. */
		atomic_store_explicit(&st.signo, (int)si.ssi_signo,
				      memory_order_release);
		if (write(st.stop_efd, &one, sizeof(one)) != sizeof(one))
			warn("stop: eventfd: %s", strerror(errno));
	}
}

int stop_start(uint64_t grace_ns, const char *metrics_file,
	       const char *wakes_file)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	if (pthread_sigmask(SIG_BLOCK, &set, NULL) != 0)
		return -1;
	st.grace_ns = grace_ns;
	st.metrics_file = metrics_file;
	st.wakes_file = wakes_file;
	st.sigfd = signalfd(-1, &set, SFD_CLOEXEC);
	st.stop_efd = eventfd(0, EFD_CLOEXEC);
	st.done_efd = eventfd(0, EFD_CLOEXEC);
	if (st.sigfd < 0 || st.stop_efd < 0 || st.done_efd < 0)
		return -1;
	errno = pthread_create(&st.thread, NULL, stop_thread, NULL);
	if (errno)
		return -1;
	st.started = true;
	return 0;
}

int stop_requested(void)
{
	/* Pairs with the release store in stop_thread(). */
	return atomic_load_explicit(&st.signo, memory_order_acquire);
}

int stop_fd(void)
{
	return st.stop_efd;
}

void stop_phase(const char *what)
{
	/* Pairs with the acquire load in stop_force(). */
	atomic_store_explicit(&st.phase, what, memory_order_release);
}

void stop_finish(void)
{
	uint64_t one = 1;

	if (!st.started)
		return;
	if (write(st.done_efd, &one, sizeof(one)) == sizeof(one))
		pthread_join(st.thread, NULL);
	st.started = false;
	close(st.sigfd);
	close(st.stop_efd);
	close(st.done_efd);
	st.sigfd = st.stop_efd = st.done_efd = -1;
}
