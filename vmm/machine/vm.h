/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The machine: the VM and its vCPUs on KVM, the port/MMIO bus, the loader.
 * This layer knows nothing of sysidle or of the outside world: the idle
 * layer plugs into the vCPU loop through struct vcpu_idle_ops, the export
 * layer reads what it needs through the getters below.
 */
#ifndef VMM_MACHINE_VM_H
#define VMM_MACHINE_VM_H

#include <linux/kvm.h>
#include <pthread.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <sysidle/guest_abi.h>

#include "base/error.h"
#include "base/housekeeping.h"
#include "base/time.h"
#include "machine/devices/lapic.h"
#include "machine/halt_rules.h"

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
	_Atomic uint64_t hlt_exits; /* read by status snapshots */
	uint64_t irqs_injected;
	uint64_t nmis_injected;
	uint64_t halted_ns;
	uint64_t wakeups;          /* HALTED -> RUNNING */
	uint64_t wake_latency_ns;  /* sum over wakeups: event posted -> the
				    * KVM_RUN that delivers it */
	uint64_t wake_latency_max_ns;
	uint64_t halt_polls;        /* HLTs that polled before blocking */
	uint64_t halt_poll_hits;    /* ... and were woken while polling */
	uint64_t halt_poll_ns;      /* time spent polling (host CPU) */
	uint64_t halt_poll_preempted; /* ... polls ended by a preemption */
	uint64_t timer_self_fired;  /* LAPIC timer expiries served by this
				     * vCPU's own thread (in HLT or before
				     * KVM_RUN), not the housekeeping thread */
	uint64_t timer_spin_ns;     /* spun to a timer's deadline (advance) */
	uint64_t pv_eois;           /* EOIs the guest made by its PV EOI flag */
	/* waits ended by their timer advance (the lead learned from them),
	 * by class of the sleep (halt_rules.h timer_advance_class) */
	uint64_t timer_advance_wakes[TIMER_ADVANCE_CLASSES];
};

struct vm;

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
	uint8_t nmi_pending; /* NMIs posted, not yet given to KVM: 0..2 */
	bool init_pending;
	bool sipi_pending;
	uint8_t sipi_vector;
	bool resume_pending;   /* S3 resume: start at resume_addr, as SIPI */
	bool resume_protected; /* ... in flat 32-bit protected mode */
	uint32_t resume_addr;
	uint8_t wake_reason; /* enum pause_reason of the last event posted */
	/* Bumped at every event posted (vcpu_kick_for, vcpus_nudge), under
	 * the lock: a polling HLT (vcpu_halt.c) watches it without the lock. */
	atomic_uint wake_seq;
	uint64_t wake_posted_ns; /* first event posted while HALTED, or 0 */
	struct lapic lapic;
	/* The LAPIC timer's host timer (vcpu_timer.c): on the housekeeping
	 * thread (timer_hk), or served by this vCPU's own thread
	 * (timer_self, written by that thread only, lock held). */
	struct hk_timer timer_hk;
	bool timer_self;

	/* Written by the vCPU thread only; other threads read the counters
	 * export shows (hlt_exits) with relaxed atomic loads. */
	struct vcpu_stats stats;
	atomic_int tid; /* the vCPU thread's host TID, set when it starts */
	uint64_t wake_posted_run_ns; /* a wake-up not yet timed (stats) */
	/* vcpu_halt.c, this vCPU's thread only: the adaptive halt-polling
	 * window and timer advance, one per class of sleep (0..their
	 * --halt-poll-ns and --timer-advance-ns maxima). */
	uint64_t poll_ns, advance_ns[TIMER_ADVANCE_CLASSES];
	/* run->s.regs.events is what KVM stored at the last KVM_RUN's return
	 * (vm->sync_events), not outdated by a state set since: an interrupt
	 * goes in through it, no KVM_INTERRUPT. This thread only. */
	bool events_fresh;
} __attribute__((aligned(64)));

/* The vCPU whose thread this is (NULL on any other thread). */
extern __thread struct vcpu *vcpu_self;

/*
 * What the idle layer does at the vCPU loop's idle points (filled in by
 * it; NULL without --sysidle: the loop then does none of it, and an HLT
 * with an interrupt already pending does not halt). @v's own thread calls
 * each one.
 *  - halt / wake, @v->lock held: the vCPU starts / stops waiting (HLT with
 *    nothing pending; @plain: a wait that is never a timekeeper's tick-only
 *    window: WAIT_SIPI, a pause). wake returns true when the idle layer's
 *    housekeeping work must follow (the loop calls kick_deferred, after
 *    the lock is dropped).
 *  - exit: before an exit is handled. inject, lock held: about to inject
 *    @vector. run_done: after KVM_RUN (@halting false, no lock), before
 *    the vCPU blocks in HLT (@halting true, no lock) or as it parks
 *    (@halting true, lock held).
 *  - may_poll, no lock: may this HLT poll before it blocks? (not while
 *    the VM is heading into full idle: the poll would only burn the CPU
 *    an idle VM must not cost)
 *  - exit_wanted, lock held, before KVM_RUN: must the guest's next EOI
 *    still exit? (the idle layer has work due at @v's first exit after a
 *    wake-up, which the pv tick's ABI promises at the latest at that EOI:
 *    no paravirtual EOI until then)
 */
struct vcpu_idle_ops {
	void (*halt)(struct vcpu *v, bool plain);
	bool (*wake)(struct vcpu *v, bool plain);
	void (*kick_deferred)(struct vcpu *v);
	void (*exit)(struct vcpu *v);
	void (*inject)(struct vcpu *v, int vector);
	void (*run_done)(struct vcpu *v, bool halting);
	bool (*may_poll)(struct vcpu *v);
	bool (*exit_wanted)(struct vcpu *v);
};

/* CPU features --cpu can take away from the guest (on by default). */
enum cpu_feature {
	CPU_F_X2APIC = 1u << 0,       /* CPUID.1:ECX[21], IA32_APIC_BASE.EXTD */
	CPU_F_TSC_DEADLINE = 1u << 1, /* CPUID.1:ECX[24], the LVT timer mode */
	CPU_F_PV_EOI = 1u << 2,       /* KVM's PV EOI (guest_abi.h) */
};

/* What the machine is made of (main.c's options). */
struct machine_config {
	uint64_t mem_size;
	unsigned int ncpus;
	const char *kernel;
	const char *append;
	const char **modules;
	unsigned int nmodules;
	enum lapic_tick_policy lapic_tick_policy; /* --lapic-tick-policy */
	unsigned int cpu_features_off; /* --cpu: enum cpu_feature bits */
	bool intel_iommu; /* --device intel-iommu: the ACPI tables get a DMAR */
	uint64_t halt_poll_max_ns;     /* --halt-poll-ns, 0: never poll */
	uint64_t timer_advance_max_ns; /* --timer-advance-ns, 0: none */
	bool timers_on_housekeeping;   /* --vcpu-timers housekeeping */
	bool inject_by_ioctl;          /* --interrupt-injection ioctl */
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
	uint8_t phys_bits; /* the guest's MAXPHYADDR (CPUID 0x80000008) */
	struct vcpu *vcpus;
	uint64_t entry; /* multiboot entry point */
	uint64_t mbi;   /* multiboot info address */
	const struct machine_config *cfg;
	const struct vcpu_idle_ops *idle; /* set before the vCPUs start */
	/* KVM syncs the vCPU events through kvm_run (KVM_CAP_SYNC_REGS):
	 * interrupts are injected at KVM_RUN, not by a KVM_INTERRUPT ioctl
	 * of their own (unless --interrupt-injection ioctl). */
	bool sync_events;
};

/* Translate a guest physical range to host memory, or NULL. */
void *guest_ptr(struct vm *vm, uint64_t gpa, uint64_t len);

/* kvm.c */
int kvm_vm_create(struct vm *vm, const struct machine_config *cfg);
void kvm_vm_destroy(struct vm *vm);

/* loader.c */
int loader_load(struct vm *vm, const struct machine_config *cfg);

/* bus.c: one table per address space, filled before any vCPU runs. */
enum bus_space { BUS_PIO, BUS_MMIO };
typedef void (*bus_handler)(struct vcpu *v, uint64_t off, uint8_t *data,
			    unsigned int len, bool is_write, void *opaque);
int bus_register(enum bus_space space, uint64_t base, uint64_t len,
		 bus_handler fn, void *opaque);
void bus_access(struct vcpu *v, enum bus_space space, uint64_t addr,
		uint8_t *data, unsigned int len, bool is_write);

/* msr.c: MSRs handled in userspace, by range; filled before any vCPU
 * runs. A handler returns 0, or -1 for #GP; it is called without @v's
 * lock. Unregistered MSRs raise #GP. */
typedef int (*msr_read_fn)(struct vcpu *v, uint32_t index, uint64_t *val);
typedef int (*msr_write_fn)(struct vcpu *v, uint32_t index, uint64_t val);
int msr_register(uint32_t first, uint32_t last, msr_read_fn rd,
		 msr_write_fn wr);
int msr_vm_setup(struct vm *vm);
void msr_exit(struct vcpu *v);

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
/* vcpu_timer.c, @v's thread: how near a LAPIC timer deadline it serves
 * itself before its next KVM_RUN rather than handing it to the
 * housekeeping thread (0: timers stay there, --vcpu-timers housekeeping). */
uint64_t vcpu_timer_keep_ns(const struct vcpu *v);
/* Any thread: @v is halted, waiting for SIPI or paused (a snapshot). */
bool vcpu_is_halted(struct vcpu *v);
int vcpu_set_sipi_state(struct vcpu *v, uint8_t vector); /* vcpu_setup.c */
/* vcpu_setup.c: the S3 resume state: real mode at CS = @addr >> 4,
 * IP = @addr & 0xf, or flat protected mode at @addr (@protected). */
int vcpu_set_resume_state(struct vcpu *v, uint32_t addr, bool protected);
/* vcpu_setup.c, @v's thread: KVM's copy of IA32_APIC_BASE, which its
 * CPUID.1:EDX.APIC follows; -1 when KVM refuses @val. */
int vcpu_set_kvm_apic_base(struct vcpu *v, uint64_t val);
/* vcpu_setup.c: per-vCPU state that INIT resets along with the local
 * APIC (the pv tick); set before the vCPUs are created. Lock held. */
void vcpu_set_reset_hook(void (*reset)(struct vcpu *v));
void vcpu_reset(struct vcpu *v);

/* irq.c: interrupt messages, from the IOAPIC or a local APIC's ICR. */
struct irq_msg {
	uint32_t dest;
	uint8_t vector;
	uint8_t mode;      /* enum apic_delivery_mode */
	uint8_t shorthand; /* APIC_SHORTHAND_NONE, _SELF, _ALL, _ALL_BUT_SELF */
	bool logical;
	bool level;        /* ICR level: assert (INIT de-assert is dropped) */
	bool trigger_level; /* level-triggered: EOI goes back to the IOAPIC */
	bool x2apic;       /* 32-bit destination format */
};
void irq_send(struct vm *vm, struct vcpu *src, const struct irq_msg *m);
/* An ISA IRQ line (0..23) driven to @level, as a PC wires it: lines 0-15
 * to the PICs' inputs, and to the IOAPIC pin of the same number except
 * line 0 (pin 2) and line 2 (the cascade: PIC only); 16-23 to the IOAPIC
 * only. Any thread holding no vCPU lock. */
void irq_isa_set(unsigned int line, bool level);
/* ExtINT: the PIC's INTR through the BSP's LINT0. The PIC's INTR went
 * high: wake the BSP if it takes it (no vCPU lock held). */
void irq_extint_kick(struct vm *vm);
/* @v's lock held: @v takes the PIC's INTR now and it is high; ack: INTA,
 * the vector to inject (it bypasses the LAPIC's IRR, ISR and TPR). */
bool irq_extint_pending(const struct vcpu *v);
int irq_extint_ack(struct vcpu *v);
/* An MSI: a memory write of @data to @addr (0xfeexxxxx) by requester @sid
 * (PCI bus/dev/fn, or IRQ_SID_NONE). Any thread holding no vCPU lock. An interrupt
 * remapper, when set (setup time), sees every one first: it returns 0 and
 * fills @m, 1 to let a compatibility-format message through, or -1 to
 * block it. */
typedef int (*irq_remap_fn)(uint64_t addr, uint32_t data, uint16_t sid,
			    struct irq_msg *m);
void irq_set_remap(irq_remap_fn fn);
#define IRQ_SID_NONE 0xffff /* no requester id (the IOAPIC's messages) */
void irq_msi(struct vm *vm, uint64_t addr, uint32_t data, uint16_t sid);
bool irq_msi_decode(uint64_t addr, uint32_t data, struct irq_msg *m);

/* cpuid.c */
int cpuid_setup(struct vcpu *v);
/* --cpu FLAGS: comma-separated +feature / -feature (x2apic, tsc-deadline,
 * pv-eoi) into @off (the enum cpu_feature bits turned off); -1: @bad names
 * the flag that is not one. */
int cpu_features_parse(const char *flags, unsigned int *off, char *bad,
		       size_t bad_len);

/* Any thread: the VM's guest CPU has feature @f (enum cpu_feature). */
static inline bool vm_cpu_has(const struct vm *vm, unsigned int f)
{
	return !(vm->cfg && (vm->cfg->cpu_features_off & f));
}

#endif
