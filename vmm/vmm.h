/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The VMM's core types: the VM, its vCPUs, the port/MMIO bus, the one
 * error pattern, and the entry points of each device file.
 */
#ifndef VMM_VMM_H
#define VMM_VMM_H

#include <linux/kvm.h>
#include <pthread.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <sysidle/guest_abi.h>

#include "lapic.h"

/*
 * Exit status of the process. A guest's write of V to the debug-exit port
 * makes the VMM exit with V & 0xff, as is; the VMM's own failures use
 * 120..125 and a stop by signal 128 + the signal number, so a guest that
 * keeps its codes below 120 is never ambiguous.
 */
enum vmm_status {
	VMM_EXIT_USAGE = 120,        /* bad option, missing kernel */
	VMM_EXIT_IMAGE = 121,        /* unreadable/bad ELF, no multiboot header,
				      * RAM too small for the image */
	VMM_EXIT_KVM = 122,          /* no /dev/kvm, missing capability, too
				      * many vCPUs, a KVM ioctl failed */
	VMM_EXIT_TRIPLE_FAULT = 123, /* KVM_EXIT_SHUTDOWN */
	VMM_EXIT_INTERNAL = 124,     /* emulation failure, failed entry,
				      * unknown exit reason */
	VMM_EXIT_STATS = 125,        /* --stats-json could not be written */
	VMM_EXIT_SIGNAL_BASE = 128,  /* + SIGINT/SIGTERM/SIGHUP */
};

#define VMM_MAX_CPUS 1024
#define container_of(p, type, member) \
	((type *)((char *)(p) - offsetof(type, member)))
#define VCPU_EXIT_REASONS 64 /* counters kept for exit_reason < 64 */

enum vcpu_state {
	VCPU_WAIT_SIPI, /* AP before its SIPI, or any vCPU after INIT */
	VCPU_RUNNING,   /* in or around KVM_RUN */
	VCPU_HALTED,    /* HLT with nothing pending: thread blocked */
	VCPU_PAUSED,    /* parked by a pause (from RUNNING or HALTED) */
	VCPU_FINISHED,  /* the VM is stopping: thread returns */
};

struct vcpu_stats {
	uint64_t exits[VCPU_EXIT_REASONS];
	uint64_t hlt_exits;
	uint64_t irqs_injected;
	uint64_t nmis_injected;
	uint64_t halted_ns;
	uint64_t wakeups;          /* HALTED -> RUNNING */
	uint64_t wake_latency_ns;  /* sum over wakeups: event posted -> the
				    * KVM_RUN that delivers it */
	uint64_t wake_latency_max_ns;
};

struct vm;

/*
 * The paravirtual tick of one vCPU (pvtick.c; ABI in guest_abi.h). Tick k
 * (k >= 1) is due at epoch_ns + k * period_ns; @next is the first tick not
 * yet accounted (delivered or counted missed). Guarded by the vCPU lock.
 */
struct pvtick {
	uint32_t hz;          /* 0: off */
	uint8_t vector;       /* 0: not set yet */
	uint64_t period_ns;
	uint64_t epoch_ns;
	uint64_t next;
	uint64_t missed;      /* read-and-clear through MSR_SYSIDLE_PVTICK_MISSED */
	uint64_t deadline_ns; /* the hk timer's deadline, 0: not armed */
	bool suppressed;      /* disarmed by --sysidle: catch up when resumed */
	uint64_t stop_missed; /* counted missed since the VM's tick stopped */
	struct hk_timer timer;
	uint64_t delivered;   /* stats: ticks posted to the IRR */
	uint64_t nsuppressed; /* stats: ticks counted missed instead */
};

struct vcpu {
	struct vm *vm;
	unsigned int id;
	int fd;
	struct kvm_run *run;
	pthread_t thread;
	bool started;

	/* lock guards everything below it; the vCPU's own thread is the only
	 * writer of state, other threads post events and kick. */
	pthread_mutex_t lock;
	pthread_cond_t wake;
	enum vcpu_state state;
	atomic_bool in_run; /* between the injection check and KVM_RUN's end */
	bool nmi_pending;
	bool init_pending;
	bool sipi_pending;
	uint8_t sipi_vector;
	uint8_t wake_reason; /* enum pause_reason of the last event posted */
	uint64_t wake_posted_ns; /* first event posted while HALTED, or 0 */
	struct lapic lapic;
	struct pvtick pvt;

	/* --sysidle bookkeeping (idle.c), written by the vCPU thread only:
	 * idle_seq is even while the thread is halted (or waits for SIPI),
	 * woke_ns is when it last left that state (set before idle_seq turns
	 * odd), halted_at_ns when it last entered it. */
	atomic_uint idle_seq;
	_Atomic uint64_t woke_ns;
	_Atomic uint64_t halted_at_ns;

	/* Written by the vCPU thread only; other threads read the counters
	 * export shows (hlt_exits) with relaxed atomic loads. */
	struct vcpu_stats stats;
	int tid; /* the vCPU thread's host TID, set when it starts */
	uint64_t hk_kick_due_ns; /* idle_kick_deferred(), 0: none */
	uint64_t wake_posted_run_ns; /* a wake-up not yet timed (stats) */
} __attribute__((aligned(64)));

struct vm_module {
	const char *path;
};

#define DEFAULT_CONTROL_DIR "/run/sysidle"
#define DEFAULT_HOOKS_DIR "/etc/sysidle/hooks"
#define CONTROL_PATH_MAX 108 /* sizeof(sun_path) */

struct vm_options {
	uint64_t mem_size;
	unsigned int ncpus;
	const char *kernel;
	const char *append;
	const char **modules;
	unsigned int nmodules;
	const char *stats_json;
	bool sysidle;            /* --sysidle */
	const char *sysidle_log; /* --sysidle-log FILE, "-": stderr */
	int timekeeper;          /* --timekeeper N (default 0) */
	int housekeeping_cpu;    /* --housekeeping-cpu N, -1: not pinned */
	const char *name;        /* --name, default KERNEL-STEM-PID */
	const char *control;     /* --control PATH, NULL: none ("none") */
	bool control_explicit;   /* --control given: failing to open is fatal */
	const char *metrics_file; /* --metrics-file PATH, NULL: none */
	const char *hooks_dir;   /* --hooks DIR (default /etc/sysidle/hooks) */
	uint64_t hook_timeout_ns; /* --hook-timeout SECONDS (default 10) */
};

struct vm {
	int kvm_fd;
	int vm_fd;
	int run_size;
	uint8_t *ram;
	uint64_t ram_size; /* total guest RAM */
	uint64_t ram_low;  /* RAM mapped at 0 (below GUEST_MMIO_HOLE) */
	unsigned int ncpus;
	unsigned int max_cpus;
	uint32_t tsc_khz;
	struct vcpu *vcpus;
	uint64_t entry; /* multiboot entry point */
	uint64_t mbi;   /* multiboot info address */
	const struct vm_options *opts;
};

/* Errors: every failure goes through vmm_fail, which prints one
 * "vmm: <message>" line on stderr (the first failure only), records
 * @status and stops the VM. It returns -1 so callers can
 * `return vmm_fail(...)`. */
int vmm_fail(int status, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void vmm_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void vm_stop(int status); /* first caller's status wins */
bool vm_stopping(void);
int vm_status(void);
uint64_t now_ns(void);    /* CLOCK_MONOTONIC */

/* Translate a guest physical range to host memory, or NULL. */
void *guest_ptr(struct vm *vm, uint64_t gpa, uint64_t len);

/* kvm.c */
int kvm_vm_create(struct vm *vm, const struct vm_options *opts);
void kvm_vm_destroy(struct vm *vm);

/* loader.c */
int loader_load(struct vm *vm, const struct vm_options *opts);

/* bus.c: one table per address space, filled before any vCPU runs. */
enum bus_space { BUS_PIO, BUS_MMIO };
typedef void (*bus_handler)(struct vcpu *v, uint64_t off, uint8_t *data,
			    unsigned int len, bool is_write, void *opaque);
int bus_register(enum bus_space space, uint64_t base, uint64_t len,
		 bus_handler fn, void *opaque);
void bus_access(struct vcpu *v, enum bus_space space, uint64_t addr,
		uint8_t *data, unsigned int len, bool is_write);

/* vcpu.c */
int vcpus_create(struct vm *vm);
int vcpus_start(struct vm *vm);
void vcpus_stop(struct vm *vm);
void vcpus_join(struct vm *vm);
/* Any thread holding no vCPU lock: every vCPU looks at the stop and pause
 * flags again (woken from its wait, or out of KVM_RUN). */
void vcpus_nudge(struct vm *vm);
/* Caller holds v->lock and has just posted an event for @v: wake @v. While
 * the VM is paused (or pausing) the event resumes it, for @reason;
 * vcpu_kick() gives this thread's reason (pause_set_thread_reason). */
void vcpu_kick(struct vcpu *v);
void vcpu_kick_for(struct vcpu *v, int reason);
int vcpu_set_sipi_state(struct vcpu *v, uint8_t vector); /* vcpu_setup.c */

/* irq.c: interrupt messages, from the IOAPIC or a local APIC's ICR. */
struct irq_msg {
	uint32_t dest;
	uint8_t vector;
	uint8_t mode;      /* APIC delivery mode, 0..7 */
	uint8_t shorthand; /* 0 none, 1 self, 2 all, 3 all but self */
	bool logical;
	bool level;        /* ICR level: assert (INIT de-assert is dropped) */
	bool trigger_level; /* level-triggered: EOI goes back to the IOAPIC */
	bool x2apic;       /* 32-bit destination format */
};
void irq_send(struct vm *vm, struct vcpu *src, const struct irq_msg *m);

/* cpuid.c, msr.c */
int cpuid_setup(struct vcpu *v);
int msr_vm_setup(struct vm *vm);
void msr_exit(struct vcpu *v);

/* devices */
int serial_init(struct vm *vm);
int serial_input_start(void);
void serial_input_stop(void);
int debug_exit_init(struct vm *vm);
int fw_cfg_init(struct vm *vm);
int legacy_init(struct vm *vm);
int ioapic_init(struct vm *vm);
void ioapic_set_irq(unsigned int pin, bool level);
void ioapic_eoi(uint8_t vector);

/* pvtick.c: the paravirtual tick. Callers hold the vCPU lock unless said
 * otherwise. */
void pvtick_init(struct vcpu *v);
void pvtick_reset(struct vcpu *v);
bool pvtick_msr(uint32_t index);
/* Without the lock held (they take it); -1 means #GP. */
int pvtick_msr_read(struct vcpu *v, uint32_t index, uint64_t *val);
int pvtick_msr_write(struct vcpu *v, uint32_t index, uint64_t val);
/* The VM's tick stops (suspend) or @v runs again (resume, catching up the
 * periods that passed as missed). */
void pvtick_suspend(struct vcpu *v);
void pvtick_resume(struct vcpu *v);
bool pvtick_deliver_now(struct vcpu *v);

/* idle.c: --sysidle. idle_enabled() is false without it and every other
 * call is then a no-op. */
int idle_init(struct vm *vm);
void idle_fini(void);
bool idle_enabled(void);
int idle_timekeeper(void);
/* vCPU thread, @v's lock held: HLT with nothing pending (or WAIT_SIPI)
 * starts, and ends. idle_wake returns true when the housekeeping thread
 * must be kicked (after the lock is dropped). */
void idle_halt(struct vcpu *v, bool sipi);
bool idle_wake(struct vcpu *v, bool sipi);
/* Timekeeper vCPU thread: its tick-only wake-up window. */
void idle_tk_exit(struct vcpu *v);
void idle_tk_inject(struct vcpu *v, int vector);
/* Any thread: the outside world asks the VM out of full idle (SIGUSR2). */
void idle_external_kick(void);
void idle_kick_timekeeper(void);
/* pvtick.c asks: may this tick be suppressed? Caller holds @v's lock. */
bool idle_suppress_tick(const struct vcpu *v);
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
};
/* After the housekeeping thread has stopped. */
void idle_get_stats(struct idle_stats *st);
void idle_kick_deferred(struct vcpu *v);
void idle_kick_due(struct vcpu *v, bool halting);
void idle_flush(void); /* housekeeping thread, or after it stopped */

/* pause.c: the control socket's pause / resume (see the top of pause.c).
 * A resume's reason, as the watch events and the counters name it. */
enum pause_reason {
	PAUSE_REASON_OTHER,   /* INIT, SIPI, NMI, an IPI, anything else */
	PAUSE_REASON_REQUEST, /* the "resume" request */
	PAUSE_REASON_TIMER,   /* a LAPIC timer or a pv tick */
	PAUSE_REASON_INPUT,   /* serial input raised its IRQ */
	PAUSE_REASON_KICK,    /* the "kick" request */
};
int pause_init(struct vm *vm);
bool pause_pending(void);
uint64_t pause_request(void);
bool pause_wake(enum pause_reason reason);
void pause_park(void);
void pause_stop(void);
uint64_t pause_completed(void);
const char *pause_reason_name(int reason);
/* The reason vcpu_kick() gives the events this thread posts (the serial
 * input thread: input; default other). */
void pause_set_thread_reason(enum pause_reason reason);
enum pause_reason pause_thread_reason(void);

/* status.c (the rest of its API is in export.h) */
int status_init(struct vm *vm);
/* idle.c: the idle part of a status snapshot, any thread. */
struct vm_status;
void idle_read_status(struct vm_status *st, uint64_t now);
void pause_read_status(struct vm_status *st);
/* idle.c: any thread, any lock but idle.c's own held: queue a watch event
 * behind the state changes already queued (without --sysidle straight to
 * the export thread). */
struct idle_event;
void idle_post_event(const struct idle_event *ev);
/* idle.c: @v's thread, lock held: a RUNNING vCPU parks for a pause (idle
 * for --sysidle while parked) and comes back (a real wake-up, never a
 * tick-only window; true: kick the housekeeping thread). */
void idle_park(struct vcpu *v);
bool idle_unpark(struct vcpu *v);

/* stats.c */
int stats_write(struct vm *vm, const char *path, int status);

#endif
