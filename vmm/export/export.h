/*
 * The export layer: the VM's idle state for the outside world. One
 * snapshot type (struct vm_status), fed from the layers below through
 * their getters, and the readers of the one event queue (base/event.h):
 *
 *  - status.c   the VM's identity, and vm_status_read from any thread;
 *  - export.c   the export thread: reads the event queue, drives the
 *               control socket, the metrics file and the hooks thread;
 *               it never blocks on a client, a file or a hook;
 *  - control.c  the control socket (status / watch / kick / pause /
 *               resume), control_request.c its requests, control_json.c
 *               its JSON; history.c the last state changes, for its
 *               "history" request;
 *  - metrics.c  writes the Prometheus text file atomically;
 *  - hooks.c    runs the hooks, libvirt's way, on its own thread: a
 *               second reader of the event queue;
 *  - stats.c    --stats-json at exit.
 *
 * No vCPU thread and not the housekeeping thread ever waits for any of
 * them: the guest and the state machine go on whatever a client, the disk
 * or a hook does. Nothing below this layer includes it.
 */
#ifndef VMM_EXPORT_EXPORT_H
#define VMM_EXPORT_EXPORT_H

#include <stdbool.h>
#include <stdint.h>

#include "base/event.h"
#include "base/housekeeping.h"
#include "idle/idle.h"
#include "duty_cycle.h"

struct pollfd;

struct vm;

/* One vCPU, as status / watch / metrics show it. */
struct vcpu_status {
	unsigned int id;
	int tid;                   /* host thread id (0: not started yet) */
	bool halted;               /* blocked on HLT, or waiting for SIPI */
	uint64_t halt_exits;       /* KVM_EXIT_HLT count */
	uint64_t ticks_suppressed; /* pv ticks counted missed, not delivered */
	uint64_t halted_ns;        /* blocked in HLT, the current wait in */
	/* wake-ups from HLT by source (the machine's enum wake_source): in
	 * all, in the last minute (over recent_span_ns), the last one's
	 * detail */
	uint64_t wakeups[IDLE_WAKE_SOURCES], recent[IDLE_WAKE_SOURCES];
	uint32_t detail[IDLE_WAKE_SOURCES];
	uint64_t recent_span_ns;
};

/* A snapshot of the whole VM. Counters are monotonic; fields are read one by
 * one, not under one lock, so a snapshot taken during a change may mix the
 * values just before and just after it. */
struct vm_status {
	const char *name;          /* --name */
	const char *uuid;          /* 36 characters: --uuid, or from the name */
	int pid;
	int hk_tid;                /* the housekeeping thread (0: not started) */
	bool sysidle;              /* --sysidle given */
	int timekeeper;            /* the timekeeper vCPU */
	int state;                 /* enum sysidle_state (NOT without --sysidle) */
	uint64_t since_ns;         /* CLOCK_MONOTONIC of the change to @state */
	uint64_t since_unix_ms;    /* the same instant, wall clock, ms */
	uint64_t uptime_ns;        /* since the VM was created */
	uint64_t state_ns[5];      /* time in NOT .. FULL_NOTED, now included */
	uint64_t full_idle_ns;     /* time fully idle (tick stopped), total */
	uint64_t full_idle_done_ns; /* the same, the periods ended only */
	uint64_t full_idle_periods;
	uint64_t ticks_suppressed; /* sum over the vCPUs */
	uint64_t host_timer_wakeups; /* housekeeping timerfd expiries */
	uint64_t hk_wakeups;       /* all housekeeping thread wake-ups */
	uint64_t halt_exits;       /* sum over the vCPUs */
	uint64_t force_exits, violations, scans, tick_restarts;
	uint64_t full_exits_by[IDLE_WAKE_SOURCES]; /* FULL_NOTED ended by */
	/* the housekeeping thread's wake-ups by what woke it */
	struct hk_wake_count hk_by[HK_WAKE_KINDS];
	unsigned int n_hk_by;
	uint64_t events_dropped;   /* events the export thread lost */
	uint64_t watch_dropped;    /* events not sent to slow watchers */
	uint64_t hooks_run, hooks_failed, hooks_dropped;
	bool paused;               /* every vCPU parked by "pause" (pause.c) */
	uint64_t pauses;           /* pauses completed */
	uint64_t resumes_requested, resumes_self; /* by "resume" / a wake source */
	struct idle_memory_status idle_memory; /* --idle-memory (idle.h) */
	unsigned int ncpus;
	struct vcpu_status *vcpus; /* @ncpus entries */
	/* The duty cycle (common/duty_cycle.h) as of the state changes the
	 * export thread has read: not filled by vm_status_read, but by
	 * export_duty_read, on the export thread. */
	struct duty_report duty;
};

/* status.c */
/* Main thread, before the export thread starts: the VM's name and its
 * uuid: @uuid (canonical, lowercase) or, NULL, the version-5 uuid of
 * @name in VMM_UUID_NAMESPACE (base/uuid.h). */
int status_init(const char *name, const char *uuid);
struct vm_status *vm_status_new(const struct vm *vm); /* NULL: out of memory */
void vm_status_read(struct vm *vm, struct vm_status *st); /* any thread */
void vm_status_free(struct vm_status *st);
/* 0 when @s may be a VM's name (--name): 1..80 bytes, no '/', no
 * control characters; else -1. */
int vm_name_check(const char *s);
/* The VM's name and uuid (set once by status_init). */
const char *vm_name(void);
const char *vm_uuid(void);

#define DEFAULT_CONTROL_DIR "/run/sysidle"
#define CONTROL_PATH_MAX 108 /* sizeof(sun_path) */

/* What main.c's options say about the outside world. */
struct export_config {
	const char *name;          /* --name */
	const char *uuid;          /* --uuid, lowercase; NULL: from the name */
	const char *control;       /* --control PATH, NULL: none ("none") */
	bool control_explicit;     /* --control given: failing to open is fatal */
	const char *metrics_file;  /* --metrics-file PATH, NULL: none */
	const char *hooks_dir;     /* --hooks DIR */
	uint64_t hook_timeout_ns;  /* --hook-timeout SECONDS */
};

/* export.c: the export thread. export_start() runs after idle_init and
 * before the vCPUs start (the "started" hook goes first); export_stop()
 * after they are joined: it runs the "stopped" hook, closes the control
 * socket and writes the metrics file one last time. */
int export_start(struct vm *vm, const struct export_config *cfg);
void export_stop(void);
uint64_t export_events_dropped(void); /* any thread */
/* The export thread (the main thread once it stopped): the duty cycle at
 * @now (CLOCK_MONOTONIC), from the state changes it has read, into
 * @st->duty. */
void export_duty_read(struct vm_status *st, uint64_t now);
/* The same thread: the last @n minutes' full-idle time at @now, oldest
 * first (common/duty_cycle.h duty_cycle_minutes); how many. */
unsigned int export_duty_minutes(uint64_t now, struct duty_minute *out,
				 unsigned int n);
/* The hooks thread: a hook ended or an idle change was dropped (the hook
 * counters changed); the export thread rewrites the metrics file. */
void export_hooks_ended(void);
/* Any thread, between export_start and export_stop, never blocking:
 * counters the metrics file shows changed without an event (an
 * --idle-memory pass); the export thread rewrites it, in full idle too. */
void export_counters_changed(void);

/* control.c: the control socket, driven by the export thread only (the
 * functions below are called on it, except open/close: on the main
 * thread before it starts and after it stops).
 * control_open: create the socket (cfg->control; NULL: none). An
 * explicit --control that fails is fatal (vmm_fail, returns -1); the
 * default path failing is a warning and no socket (returns 0). */
int control_open(struct vm *vm, const struct export_config *cfg);
void control_close(void);
/* Fill up to @max pollfds (listening socket and clients); returns how many. */
int control_pollfds(struct pollfd *fds, int max);
/* After poll(): handle the entries control_pollfds filled (same order). */
void control_handle(struct pollfd *fds, int n);
/* poll()'s timeout for the control socket (ms, -1: none): a connection
 * that sent no request is closed after a while (control_handle). */
int control_poll_timeout(void);
/* An idle state change: to every watcher, never blocking (a watcher whose
 * socket buffer is full loses the event; counted). */
void control_broadcast(const struct vm_event *ev);
uint64_t control_watch_dropped(void);

/* stats.c: --stats-json FILE at exit, after every vCPU and the
 * housekeeping thread have been joined; 0, or -1 after a message. */
int stats_write(struct vm *vm, const char *path, int status);
/* stats.c, main thread at start: whether the path can be written at exit;
 * 0, or -1 after vmm_fail(VMM_EXIT_STATS). */
int stats_check(const char *path);

/* What the metrics file says of the VMM's own files' writes. */
struct metrics_files {
	uint64_t metrics_failures;  /* failed writes of the metrics file */
	uint64_t log_failures;      /* of --sysidle-log (idle layer) */
};

/* metrics.c: write @st to @path in Prometheus text format (temporary file in
 * the same directory, then rename), with @files. Returns 0, or -1 with
 * errno set and no temporary file left. */
int metrics_write(const char *path, const struct vm_status *st, bool up,
		  const struct metrics_files *files);
/* export.c, any thread: failed writes of the metrics file so far. */
uint64_t export_metrics_write_failures(void);
/* metrics.c: whether @path can be written so; 0, or -1 with @why (@n). */
int metrics_check(const char *path, char *why, size_t n);

#endif
