/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * sysidle: "is the whole machine idle?" — Paul McKenney's full-system-idle
 * state machine (Linux NO_HZ_FULL_SYSIDLE, 2013) as a library.
 *
 * A machine has N CPUs (for the VMM: vCPUs). Each CPU tells the library when
 * it goes idle (sysidle_enter) and when it stops being idle (sysidle_exit).
 * One side, the timekeeper (for the VMM: the housekeeping thread), scans the
 * CPUs off the hot path (sysidle_scan) and asks in O(1) whether the machine
 * is fully idle (sysidle_is_idle). When that answer is true the timekeeper
 * may stop its periodic work; the CPU whose exit ends the full-idle period
 * is told so (sysidle_exit returns true) and must wake the timekeeper.
 *
 * Global state, advanced at most one step per scan while every scanned CPU
 * is idle, reset to NOT by the first CPU to leave idle above SHORT:
 *
 *   NOT -> SHORT -> LONG -> FULL -> FULL_NOTED
 *          (scan)  (scan,   (scan,   (sysidle_is_idle, by cmpxchg)
 *                  +delay)  +delay)
 *
 * Threading contract:
 *  - sysidle_enter/sysidle_exit(cpu) are called only by the owner of @cpu
 *    (one thread at a time per CPU), alternately, starting with enter: every
 *    CPU starts busy.
 *  - sysidle_scan, sysidle_is_idle, sysidle_poll and sysidle_force_exit are
 *    the timekeeper side: one thread at a time (the timekeeper, or callers
 *    that serialise themselves). They are safe against any number of
 *    concurrent enter/exit calls, but two overlapping scans are not safe
 *    with each other: the protocol needs each scan's counter loads to come
 *    after the previous scan's state change (the model check shows the
 *    failure).
 *  - sysidle_state may be called from anywhere.
 *
 * Time: an idle entry does not read the clock (it is the hot path). It
 * records the library's "jiffies", the time of the latest scan, as the
 * kernel recorded jiffies; the scans work out the latest time each entry can
 * have happened, so the delay is never cut short and is granted at most one
 * scan late, whatever the scan rate. The clock is read only by sysidle_scan
 * when there is a delay, and to date the on_transition calls.
 */
#ifndef SYSIDLE_SYSIDLE_H
#define SYSIDLE_SYSIDLE_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Global full-system-idle state; the order matters (compared with <, >). */
enum sysidle_state {
	SYSIDLE_NOT = 0,        /* some CPU is not idle */
	SYSIDLE_SHORT = 1,      /* all CPUs seen idle by one scan */
	SYSIDLE_LONG = 2,       /* all idle for at least the delay */
	SYSIDLE_FULL = 3,       /* a further all-idle scan: ready */
	SYSIDLE_FULL_NOTED = 4, /* the timekeeper has noted it, may stop */
};
#define SYSIDLE_NR_STATES 5

/* How the machine-wide answer is computed. Only SYSIDLE_STRATEGY_SYSIDLE is
 * meant for use; the two naive strategies from the 2013 article exist for
 * comparison (benchmarks, tests) and go straight between NOT and
 * FULL_NOTED. */
enum sysidle_strategy {
	SYSIDLE_STRATEGY_SYSIDLE = 0, /* per-CPU counters + state machine */
	SYSIDLE_STRATEGY_COUNTER = 1, /* one global atomic count of idle CPUs */
	SYSIDLE_STRATEGY_SCAN = 2,    /* per-CPU flags, all scanned per query */
};

/* Monotonic time source in nanoseconds; @arg is sysidle_config.clock_arg. */
typedef uint64_t (*sysidle_clock_fn)(void *arg);

/* Called after every change of the global state, by the thread that made it
 * (a CPU in sysidle_exit, or the timekeeper side). @cpu is the CPU whose exit
 * caused it, or -1 for the timekeeper side. Runs on the hot path only when
 * the global state changes; it must not call back into the library. Calls
 * made by different threads are not ordered with each other: a consumer
 * that needs the exact order reads sysidle_state() or serialises itself. */
typedef void (*sysidle_transition_fn)(void *arg, enum sysidle_state from,
				      enum sysidle_state to, int cpu,
				      uint64_t now_ns);

#define SYSIDLE_MAX_CPUS 65536
#define SYSIDLE_NO_TIMEKEEPER (-1)
#define SYSIDLE_DEFAULT_SMALL 8
#define SYSIDLE_DELAY_DEFAULT UINT64_MAX

struct sysidle_config {
	unsigned int ncpus;       /* 1 .. SYSIDLE_MAX_CPUS */
	int timekeeper;           /* CPU excluded from the scan, or -1 */
	unsigned int small_cpus;  /* "small machine" threshold (default 8) */
	uint64_t delay_ns;        /* SYSIDLE_DELAY_DEFAULT: sysidle_default_delay_ns */
	enum sysidle_strategy strategy;
	sysidle_clock_fn clock;   /* NULL: CLOCK_MONOTONIC */
	void *clock_arg;
	sysidle_transition_fn on_transition; /* optional */
	void *transition_arg;
};

struct sysidle;

/* Fill @cfg with defaults for a machine of @ncpus CPUs: no timekeeper,
 * small threshold 8, default delay, the sysidle strategy, CLOCK_MONOTONIC
 * (read on the timekeeper side only). */
void sysidle_config_init(struct sysidle_config *cfg, unsigned int ncpus);

/* The delay an all-idle period must last before SHORT->LONG and LONG->FULL:
 * 0 when @ncpus <= @small_cpus, else ceil(@ncpus / 16) ms — the kernel's
 * DIV_ROUND_UP(nr_cpu_ids * HZ, rcu_fanout_leaf * 1000) jiffies with
 * HZ = 1000 and a leaf fanout of 16. */
uint64_t sysidle_default_delay_ns(unsigned int ncpus, unsigned int small_cpus);

/* Create a machine from @cfg. Returns NULL with errno = EINVAL for a bad
 * configuration (0 or too many CPUs, timekeeper out of range, unknown
 * strategy) or ENOMEM. All CPUs start busy, the state starts at NOT. */
struct sysidle *sysidle_create(const struct sysidle_config *cfg);
void sysidle_destroy(struct sysidle *s);

/* Hot path. Caller: the owner of @cpu, alternating enter and exit.
 * sysidle_exit returns true when this call ended a noted full-idle period
 * (it moved the state from FULL_NOTED to NOT): the caller must then wake the
 * timekeeper. The timekeeper CPU's own exit never touches the global state:
 * it must call sysidle_force_exit when it does more than take its tick. */
void sysidle_enter(struct sysidle *s, unsigned int cpu);
bool sysidle_exit(struct sysidle *s, unsigned int cpu);

/* Timekeeper side. One O(N) pass over every non-timekeeper CPU. If all are
 * idle it advances the state one step (NOT->SHORT at once; SHORT->LONG and
 * LONG->FULL once the newest idle entry is certainly at least the delay
 * old); if one
 * is busy it cancels (FULL and above, or LONG, go back to NOT; SHORT stays,
 * as in the kernel: a short idle period costs no global write). A race with
 * a CPU leaving idle is resolved for the busy side: a failed cmpxchg is not
 * retried. Returns the state after the pass. */
enum sysidle_state sysidle_scan(struct sysidle *s);

/* Timekeeper side, O(1). Returns true when the machine is fully idle and
 * the timekeeper may stop: the call that sees FULL turns it into FULL_NOTED
 * (cmpxchg), and later calls see FULL_NOTED. Returns false otherwise. After
 * it returned true the timekeeper must wait to be woken (by the CPU whose
 * sysidle_exit returned true) before it relies on the machine being busy. */
bool sysidle_is_idle(struct sysidle *s);

/* Timekeeper side: the kernel's rcu_sys_is_idle(). On a small machine
 * (ncpus <= small_cpus) scan inline, up to three passes while each one
 * advances the state, then sysidle_is_idle. On a larger one only the O(1)
 * query: the caller runs sysidle_scan at its own pace (no more often than
 * the delay). */
bool sysidle_poll(struct sysidle *s);

/* Timekeeper side: the timekeeper did more than take its tick, so the
 * machine is not idle: reset the state to NOT if it is above SHORT. Returns
 * true when this call cleared FULL_NOTED. */
bool sysidle_force_exit(struct sysidle *s);

/* Current global state (a snapshot; may change as soon as it is read). */
enum sysidle_state sysidle_state(const struct sysidle *s);

/* Read-only facts about the machine. */
unsigned int sysidle_ncpus(const struct sysidle *s);
uint64_t sysidle_delay_ns(const struct sysidle *s);
bool sysidle_cpu_is_idle(const struct sysidle *s, unsigned int cpu);

const char *sysidle_state_name(enum sysidle_state st);
/* The state named @name, as sysidle_state_name() spells it ("NOT", ...,
 * "FULL_NOTED"); -1 when unknown (or NULL). */
int sysidle_state_from_name(const char *name);
const char *sysidle_strategy_name(enum sysidle_strategy st);
/* Parse "sysidle", "counter" or "scan"; returns -1 when unknown. */
int sysidle_strategy_parse(const char *name);

#ifdef __cplusplus
}
#endif
#endif
