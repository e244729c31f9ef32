/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The export thread: a reader of the one event queue (base/event.h). It
 * passes each event to the control socket's watchers, and rewrites the
 * metrics file at each batch of
 * changes (unless, in full idle, the file already shows them), when a hook
 * has ended (its counters: hooks.c wakes it) or an --idle-memory pass
 * (the idle layer's, through main.c) and at most once a second
 * while the VM is not fully idle (no periodic wake-up once it is). It
 * keeps the VM's duty cycle from the changes it reads (common/duty_cycle.h:
 * no timer; figures computed when status or the file asks). It only
 * polls: a slow client, a full disk or a hung hook delays
 * nothing but itself.
 *
 * A write of the metrics file that fails (ENOSPC, EIO, EROFS...) is warned
 * once with its cause; the file on disk is then older than the truth, and
 * the write is tried again at the next rewrite due and, in full idle, by
 * a timer every METRICS_RETRY_NS that runs only while the writes fail
 * (the one wake-up in full idle, made only while the file is not
 * current). The first write that works is warned too ("written again
 * after N failed attempts"), and the file counts the failures
 * (sysidle_vm_file_write_failures_total). At exit, when the last version
 * (sysidle_vm_up 0) cannot be written, the file is removed (unlink needs
 * no space), so that no old version is left saying the VM runs.
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <sysidle/sysidle.h>

#include "base/error.h"
#include "base/time.h"
#include "export/export.h"
#include "export/history.h"
#include "export/hooks.h"
#include "idle/idle.h"
#include "machine/vm.h"

#define EXPORT_BATCH 256 /* events read at a time */
#define EXPORT_MAX_FDS 64
#define METRICS_PERIOD_NS 1000000000ull
/* In full idle: one more rewrite this long after a snapshot that caught a
 * vCPU still running (the timekeeper halts just after FULL_NOTED), at most
 * METRICS_SETTLE_TRIES times a period. */
#define METRICS_SETTLE_NS 20000000ull
#define METRICS_SETTLE_TRIES 5
/* In full idle, while the metrics file's writes fail: another try this
 * often (no timer once one works). */
#define METRICS_RETRY_NS 5000000000ull

enum metrics_timer { TIMER_OFF, TIMER_PERIODIC, TIMER_SETTLE, TIMER_RETRY };

/* What a metrics file in full idle shows that a rewrite could change: the
 * state and its time, every vCPU halted, the pause. Two equal ones in full
 * idle: the second rewrite would be no news (its events came after the
 * snapshot that already showed them), and is not made. */
struct metrics_shown {
	bool valid;
	int state;
	uint64_t since_ns;
	bool halted, paused;
	uint64_t pauses, resumes_requested, resumes_self;
	uint64_t hooks_run, hooks_failed, hooks_dropped;
	uint64_t idle_memory_passes; /* --idle-memory passes ended */
};

static struct {
	struct vm *vm;
	const struct export_config *cfg;
	pthread_t thread;
	bool started;
	int stop_fd, timer_fd;
	int counters_fd;           /* eventfd: counters changed (a hook ended, an
				    * --idle-memory pass: export_counters_changed) */
	struct event_reader events;
	struct vm_status *st;

	/* export thread only */
	int state;
	enum metrics_timer timer_mode;
	bool settle;               /* the last snapshot in full idle was not */
	unsigned int settle_tries; /* settle rewrites in this full idle period */
	uint64_t metrics_failing;  /* failed writes since the last that worked */
	int metrics_errno;         /* the last failure's cause */
	_Atomic uint64_t metrics_failures; /* all failed writes */
	struct metrics_shown shown; /* what the file last written showed */
	struct duty_cycle duty;    /* fed by export_drain */
} ex = { .stop_fd = -1, .timer_fd = -1, .counters_fd = -1,
	  .events = { .fd = -1, .slot = -1 } };

/* Any thread: see export.h. */
uint64_t export_metrics_write_failures(void)
{
	return atomic_load_explicit(&ex.metrics_failures, memory_order_relaxed);
}

uint64_t export_events_dropped(void)
{
	return event_reader_lost(&ex.events);
}

/* The export thread, or the main thread once it has stopped (export.h);
 * @st a snapshot of vm_status_new's. */
unsigned int export_duty_minutes(uint64_t now, struct duty_minute *out,
				 unsigned int n)
{
	return duty_cycle_minutes(&ex.duty, now, out, n);
}

void export_duty_read(struct vm_status *st, uint64_t now)
{
	duty_cycle_read(&ex.duty, now, &st->duty);
}

/* The hooks thread, after a hook ended (its counters changed), between
 * export_start and export_stop: the metrics file shows it, also in full
 * idle. Never blocks (the eventfd only adds up). */
void export_hooks_ended(void)
{
	export_counters_changed();
}

/* Any thread: see export.h. The hooks' eventfd: the same rewrite. */
void export_counters_changed(void)
{
	uint64_t one = 1;

	if (ex.counters_fd >= 0 &&
	    write(ex.counters_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		vmm_warn("export: cannot wake the export thread: %s",
			 strerror(errno));
}

static bool all_halted(const struct vm_status *st)
{
	for (unsigned int i = 0; i < st->ncpus; i++)
		if (!st->vcpus[i].halted)
			return false;
	return true;
}

static bool shown_equal(const struct metrics_shown *a,
			const struct metrics_shown *b)
{
	return a->valid && b->valid && a->state == b->state &&
	       a->since_ns == b->since_ns && a->halted == b->halted &&
	       a->paused == b->paused && a->pauses == b->pauses &&
	       a->resumes_requested == b->resumes_requested &&
	       a->resumes_self == b->resumes_self &&
	       a->hooks_run == b->hooks_run &&
	       a->hooks_failed == b->hooks_failed &&
	       a->hooks_dropped == b->hooks_dropped &&
	       a->idle_memory_passes == b->idle_memory_passes;
}

/* Export thread, or the main thread once it has stopped: one write of the
 * metrics file at @path from ex.st (read just before), its failure or its
 * recovery warned and counted. Returns 0, or -1 with errno set. */
static int metrics_write_once(const char *path, bool up)
{
	struct metrics_files files = {
		.metrics_failures = export_metrics_write_failures(),
		.log_failures = idle_log_write_failures() };

	if (metrics_write(path, ex.st, up, &files) == 0) {
		if (ex.metrics_failing)
			vmm_warn("--metrics-file '%s': written again after %"
				 PRIu64 " failed attempts", path,
				 ex.metrics_failing);
		ex.metrics_failing = 0;
		return 0;
	}
	ex.metrics_errno = errno;
	if (!ex.metrics_failing)
		vmm_warn("--metrics-file '%s': cannot write: %s (the file is "
			 "not current until a write works again; retried, "
			 "further failures not reported)", path,
			 strerror(ex.metrics_errno));
	ex.metrics_failing++;
	atomic_fetch_add_explicit(&ex.metrics_failures, 1,
				  memory_order_relaxed);
	errno = ex.metrics_errno;
	return -1;
}

/* Export thread: rewrite the metrics file now; in settled full idle only
 * when it would show something new, unless @always (at start and exit). A
 * snapshot is taken after the state changed, and the changes' events can
 * still be queued behind it: their drain must not rewrite a file that
 * already shows them. */
static void export_metrics(bool always, bool up)
{
	const char *path = ex.cfg->metrics_file;
	struct metrics_shown now;

	if (!path)
		return;
	vm_status_read(ex.vm, ex.st);
	export_duty_read(ex.st, now_ns());
	now = (struct metrics_shown){
		.valid = true, .state = ex.st->state,
		.since_ns = ex.st->since_ns, .halted = all_halted(ex.st),
		.paused = ex.st->paused, .pauses = ex.st->pauses,
		.resumes_requested = ex.st->resumes_requested,
		.resumes_self = ex.st->resumes_self,
		.hooks_run = ex.st->hooks_run,
		.hooks_failed = ex.st->hooks_failed,
		.hooks_dropped = ex.st->hooks_dropped,
		.idle_memory_passes = ex.st->idle_memory.advised +
				      ex.st->idle_memory.cancelled +
				      ex.st->idle_memory.failed };
	if (!always && now.state == SYSIDLE_FULL_NOTED && now.halted &&
	    shown_equal(&now, &ex.shown)) {
		ex.settle = false;
		return;
	}
	if (metrics_write_once(path, up) < 0)
		now.valid = false;
	ex.shown = now;
	if (ex.state != SYSIDLE_FULL_NOTED)
		ex.settle_tries = 0;
	ex.settle = ex.state == SYSIDLE_FULL_NOTED && !now.halted &&
		    ex.settle_tries++ < METRICS_SETTLE_TRIES;
}

/* Export thread: the periodic metrics timer runs while not fully idle; in
 * full idle only a one-shot settle rewrite (export_metrics), if any, or,
 * while the file's writes fail, a retry every METRICS_RETRY_NS. */
static void export_metrics_timer(void)
{
	struct itimerspec its = { 0 };
	enum metrics_timer want = TIMER_OFF;

	if (ex.cfg->metrics_file && ex.state != SYSIDLE_FULL_NOTED)
		want = TIMER_PERIODIC;
	else if (ex.cfg->metrics_file && ex.settle)
		want = TIMER_SETTLE;
	else if (ex.cfg->metrics_file && ex.metrics_failing)
		want = TIMER_RETRY;
	if (want == ex.timer_mode)
		return;
	if (want == TIMER_PERIODIC) {
		its.it_value.tv_sec = METRICS_PERIOD_NS / 1000000000ull;
		its.it_interval = its.it_value;
	} else if (want == TIMER_SETTLE) {
		its.it_value.tv_nsec = METRICS_SETTLE_NS;
	} else if (want == TIMER_RETRY) {
		its.it_value.tv_sec = METRICS_RETRY_NS / 1000000000ull;
		its.it_interval = its.it_value;
	}
	if (timerfd_settime(ex.timer_fd, 0, &its, NULL) == 0)
		ex.timer_mode = want;
}

/* Export thread: take what the queue holds and pass it on. Returns true
 * when it held any change. */
static bool export_drain(void)
{
	static struct vm_event evs[EXPORT_BATCH];
	unsigned int n, i;
	bool any = false;

	do {
		n = event_read(&ex.events, evs, EXPORT_BATCH);
		for (i = 0; i < n; i++) {
			control_broadcast(&evs[i]);
			history_add(&evs[i]);
			if (evs[i].kind != VM_EV_STATE)
				continue; /* a pause or a resume: watchers only */
			ex.state = evs[i].to;
			duty_cycle_set(&ex.duty, evs[i].mono_ns,
				       evs[i].unix_ms,
				       evs[i].to == SYSIDLE_FULL_NOTED);
		}
		any |= n > 0;
	} while (n == EXPORT_BATCH);
	return any;
}

static void *export_thread(void *arg)
{
	struct pollfd fds[EXPORT_MAX_FDS];
	uint64_t buf;
	bool changed;
	int n;

	(void)arg;
	pthread_setname_np(pthread_self(), "vmm-export");
	export_metrics(true, true);
	export_metrics_timer();
	for (;;) {
		fds[0] = (struct pollfd){ .fd = ex.stop_fd, .events = POLLIN };
		fds[1] = (struct pollfd){ .fd = ex.events.fd, .events = POLLIN };
		fds[2] = (struct pollfd){ .fd = ex.timer_fd, .events = POLLIN };
		fds[3] = (struct pollfd){ .fd = ex.counters_fd,
					  .events = POLLIN };
		n = 4 + control_pollfds(fds + 4, EXPORT_MAX_FDS - 4);
		if (poll(fds, (nfds_t)n, control_poll_timeout()) < 0) {
			if (errno == EINTR)
				continue;
			vmm_warn("export thread: poll: %s", strerror(errno));
			break;
		}
		if (fds[0].revents)
			break;
		/* One rewrite per wake-up: at a change, and for the periodic
		 * timer only while not fully idle (it may have expired just
		 * as the change to FULL_NOTED came in). */
		changed = fds[1].revents && export_drain();
		if (fds[2].revents &&
		    read(ex.timer_fd, &buf, sizeof(buf)) == sizeof(buf)) {
			if (ex.timer_mode == TIMER_SETTLE) {
				ex.timer_mode = TIMER_OFF; /* one-shot: expired */
				changed = changed || ex.settle;
				ex.settle = false;
			} else if (ex.state != SYSIDLE_FULL_NOTED ||
				   ex.timer_mode == TIMER_RETRY) {
				changed = true; /* periodic, or a retry */
			}
		}
		/* a hook ended, an --idle-memory pass: their counters (in
		 * settled full idle only when they changed: export_metrics) */
		if (fds[3].revents &&
		    read(ex.counters_fd, &buf, sizeof(buf)) == sizeof(buf))
			changed = true;
		if (changed)
			export_metrics(false, true);
		control_handle(fds + 4, n - 4);
		export_metrics_timer();
	}
	return NULL;
}

/* Main thread, before the vCPUs start. */
int export_start(struct vm *vm, const struct export_config *o)
{
	char why[160];
	int err;

	ex.vm = vm;
	ex.cfg = o;
	if (o->metrics_file && metrics_check(o->metrics_file, why,
					     sizeof(why)))
		return vmm_fail(VMM_EXIT_USAGE, "cannot write --metrics-file "
				"'%s': %s", o->metrics_file, why);
	ex.state = SYSIDLE_NOT;
	history_reset();
	duty_cycle_init(&ex.duty, time_start_ns());
	if (status_init(o->name, o->uuid))
		return -1;
	ex.st = vm_status_new(vm);
	if (!ex.st)
		return vmm_fail(VMM_EXIT_KVM, "export: out of memory");
	if (control_open(vm, o))
		return -1;
	ex.counters_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (ex.counters_fd < 0)
		return vmm_fail(VMM_EXIT_KVM, "export: eventfd: %s",
				strerror(errno));
	if (hooks_start(vm, o))
		return -1;
	ex.stop_fd = eventfd(0, EFD_CLOEXEC);
	ex.timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (event_reader_open(&ex.events) || ex.stop_fd < 0 || ex.timer_fd < 0)
		return vmm_fail(VMM_EXIT_KVM, "export: eventfd/timerfd: %s",
				strerror(errno));
	ex.started = true;
	err = pthread_create(&ex.thread, NULL, export_thread, NULL);
	if (err) {
		ex.started = false;
		return vmm_fail(VMM_EXIT_KVM, "cannot start the export thread: "
				"%s", strerror(err));
	}
	return 0;
}

/* Main thread, once the export thread has stopped: the file's last version
 * (sysidle_vm_up 0: the VM is gone). When it cannot be written, the file
 * on disk, an older version saying the VM runs, is removed (a regular
 * file only: a FIFO or a device is nobody's version). */
static void metrics_write_last(const char *path)
{
	struct stat sb;
	int err;

	export_metrics(true, false);
	if (!ex.metrics_failing)
		return;
	err = ex.metrics_errno;
	if (lstat(path, &sb) < 0 || !S_ISREG(sb.st_mode))
		return;
	if (unlink(path) == 0)
		vmm_warn("--metrics-file '%s': removed: its last version (the "
			 "VM down) cannot be written (%s), and the one there "
			 "said the VM runs", path, strerror(err));
	else
		vmm_warn("--metrics-file '%s': its last version (the VM down) "
			 "cannot be written (%s), nor the file removed (%s): it "
			 "still says the VM runs", path, strerror(err),
			 strerror(errno));
}

/* Main thread, after the vCPUs and the housekeeping thread have stopped. */
void export_stop(void)
{
	uint64_t one = 1;

	if (ex.started) {
		if (write(ex.stop_fd, &one, sizeof(one)) < 0)
			vmm_warn("cannot stop the export thread");
		pthread_join(ex.thread, NULL);
		ex.started = false;
		export_drain(); /* the last changes: for the metrics file,
				 * written below */
	}
	hooks_stop(); /* the last hooks: "idle end" if due, "stopped" */
	control_close();
	if (ex.st && ex.cfg->metrics_file)
		metrics_write_last(ex.cfg->metrics_file);
	vm_status_free(ex.st);
	ex.st = NULL;
	event_reader_close(&ex.events);
	if (ex.stop_fd >= 0)
		close(ex.stop_fd);
	if (ex.timer_fd >= 0)
		close(ex.timer_fd);
	if (ex.counters_fd >= 0)
		close(ex.counters_fd);
	ex.stop_fd = ex.timer_fd = ex.counters_fd = -1;
}
