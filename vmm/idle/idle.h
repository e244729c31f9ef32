/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The idle layer: the sysidle library wired into the VMM (--sysidle), and
 * the paravirtual tick. It plugs into the vCPU loop through the machine's
 * struct vcpu_idle_ops (left NULL without --sysidle), runs the timekeeper
 * side on the housekeeping thread, and posts every idle state change to
 * the event queue. It knows nothing of who reads those events.
 */
#ifndef VMM_IDLE_IDLE_H
#define VMM_IDLE_IDLE_H

#include <stdbool.h>
#include <stdint.h>

struct vcpu;
struct vm;

/* The machine's WAKE_SOURCES (machine/wake_source.h), checked there. */
#define IDLE_WAKE_SOURCES 8

/* --idle-memory: what the guest RAM of a VM fully idle for the delay is
 * advised (memory.c). */
enum idle_memory_mode {
	IDLE_MEMORY_OFF,
	IDLE_MEMORY_COLD,    /* MADV_COLD: reclaimed first under pressure */
	IDLE_MEMORY_PAGEOUT, /* MADV_PAGEOUT: reclaimed (to swap) at once */
};
#define IDLE_MEMORY_DELAY_DEFAULT_S 30
#define IDLE_MEMORY_DELAY_MAX_S 86400

struct idle_config {
	bool sysidle;            /* --sysidle */
	const char *log;         /* --sysidle-log FILE, "-": stderr */
	int timekeeper;          /* --timekeeper N (default 0) */
	int housekeeping_cpu;    /* --housekeeping-cpu N, -1: not pinned */
	uint64_t max_hold_ns;    /* --lapic-tick-max-hold, 0: the default */
	int idle_memory;         /* --idle-memory: enum idle_memory_mode */
	uint64_t idle_memory_delay_ns; /* --idle-memory-delay */
};
#define IDLE_MAX_HOLD_DEFAULT_NS 2000000000ull

/* Main thread, after the vCPUs are created and before the housekeeping
 * thread and the vCPUs start: the pv tick always, --sysidle if asked
 * (vm->idle is set then). */
int idle_init(struct vm *vm, const struct idle_config *cfg);
void idle_fini(void);
bool idle_enabled(void);
/* Any thread: the outside world asks the VM out of full idle (SIGUSR2). */
void idle_external_kick(void);
/* Any thread (the control socket's "kick"): the timekeeper takes a tick
 * now, then full idle ends. */
void idle_kick_timekeeper(void);
/* Housekeeping thread, or any thread after it stopped: write the queued
 * log lines, wake the event queue's readers. */
void idle_flush(void);

/* Any thread: the idle part of a status snapshot. */
struct idle_status {
	bool sysidle;
	int timekeeper;
	int state;                 /* enum sysidle_state */
	uint64_t since_ns;         /* CLOCK_MONOTONIC of the change to @state */
	uint64_t state_ns[5];      /* time in NOT .. FULL_NOTED, now included */
	uint64_t full_idle_done_ns; /* in FULL_NOTED, the periods ended only */
	uint64_t full_idle_periods;
	uint64_t force_exits, violations, scans, tick_restarts;
	/* exits from FULL_NOTED by what ended them (the machine's enum
	 * wake_source) */
	uint64_t full_exits_by[IDLE_WAKE_SOURCES];
};
void idle_read_status(struct idle_status *st, uint64_t uptime_ns,
		      uint64_t now);

/* Any thread: @v's pv tick, as status and --stats-json show it. */
struct pvtick_status {
	uint32_t hz;
	uint64_t delivered, suppressed;
};
void idle_vcpu_pvtick(struct vcpu *v, struct pvtick_status *st);

/* --idle-memory as status shows it: the setting, the host's swap, and
 * the advice passes (memory.c), each run once in a full-idle period. */
struct idle_memory_status {
	int mode;                  /* enum idle_memory_mode */
	uint64_t delay_ns;         /* --idle-memory-delay */
	uint64_t ram_bytes;        /* the guest RAM */
	bool swap_available;       /* a swap area on: at start, then each pass */
	bool zswap_enabled;        /* ... and zswap */
	uint64_t advised;          /* passes done */
	uint64_t cancelled;        /* passes cut short: the VM woke */
	uint64_t failed;           /* passes ended by an error (warned once) */
	uint64_t advised_bytes_total; /* resident bytes advised, every pass */
	/* The last pass done: resident bytes it advised, the guest RAM's
	 * resident bytes (mincore) before and after it (pages written to
	 * swap and still cached count as resident), the process's RssAnon
	 * before and after it, when it ended and how long it took. */
	uint64_t last_advised_bytes;
	uint64_t last_resident_before_bytes, last_resident_after_bytes;
	uint64_t last_rss_anon_before_bytes, last_rss_anon_after_bytes;
	uint64_t last_unix_ms, last_duration_ns;
};
/* Any thread. */
void idle_memory_read_status(struct idle_memory_status *st);
/* "off", "cold", "pageout". */
const char *idle_memory_mode_name(int mode);
/* Main thread, before the housekeeping thread starts: @advised is called
 * on the advice thread after each pass (it must not block). */
void idle_memory_set_notify(void (*advised)(void));
/* Main thread, after the vCPUs stopped and before the housekeeping and
 * export threads stop: the advice thread ended (a pass running ends at its
 * next chunk). */
void idle_memory_stop(void);

#define IDLE_LATENCY_SAMPLES 4096
struct idle_stats {
	bool enabled;
	int timekeeper;
	uint64_t delay_ns;
	uint64_t tick_period_ns;     /* the housekeeping tick, last armed */
	uint64_t state_ns[5];        /* time in NOT .. FULL_NOTED */
	uint64_t full_idle_periods;  /* tick stops */
	uint64_t lat_count, lat_min, lat_max, lat_sum, lat_median;
	uint64_t lat_p99; /* nearest rank over the first samples kept */
	uint64_t force_exits;        /* force_exit calls that changed the state */
	uint64_t violations;         /* FULL while a non-timekeeper ran */
	uint64_t scans;
	uint64_t tick_restarts;
	uint64_t hold_releases;      /* held LAPIC ticks released in full idle */
	uint64_t log_lines_dropped;  /* --sysidle-log lines not written */
	uint64_t full_exits_by[IDLE_WAKE_SOURCES]; /* as idle_status's */
	uint64_t log_write_failures; /* its writes that failed with an error */
};
/* Any thread: the --sysidle-log's writes that failed with an error (a
 * full disk, an I/O error, a read-only file system; not a reader that
 * does not keep up), since the start. */
uint64_t idle_log_write_failures(void);
/* After the housekeeping thread has stopped. */
void idle_get_stats(struct idle_stats *st);

#endif
