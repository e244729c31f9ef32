/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * vCPU threads. Each is a state machine driven by events posted under its
 * lock (interrupt, NMI, INIT, SIPI, stop, pause):
 *
 *   WAIT_SIPI --SIPI--> RUNNING --HLT, nothing pending--> HALTED
 *       ^                  |  ^----------interrupt----------'
 *       '------INIT--------'
 *   RUNNING, HALTED --pause--> PAUSED --resume--> back where it was
 *   any state --stop--> FINISHED
 *
 * A vCPU in WAIT_SIPI parks in place (its state stays WAIT_SIPI, so that a
 * SIPI posted while the VM is paused is still accepted, and resumes it).
 * S3 (sleep.c) is an INIT of every vCPU; its resume starts the boot vCPU
 * out of WAIT_SIPI as a SIPI would, at the waking vector.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>

#include "base/error.h"
#include "base/housekeeping.h"
#include "base/sched.h"
#include "base/time.h"
#include "machine/bus.h"
#include "machine/irq.h"
#include "machine/kvm_sys.h"
#include "machine/msr.h"
#include "machine/pause.h"
#include "machine/vcpu.h"
#include "machine/vcpu_loop.h"
#include "machine/vm.h"

#define SIG_VCPU_KICK SIGUSR1 /* SIGUSR2 is the outside world's (main.c) */
#define VCPU_STACK_SIZE (256u << 10)

/* The vCPU whose thread this is: set as the thread starts (vcpu_thread),
 * read through vcpu_current(). */
static __thread struct vcpu *vcpu_self;

struct vcpu *vcpu_current(void)
{
	return vcpu_self;
}

/* The kick's signal only has to interrupt KVM_RUN: the kicker has set
 * immediate_exit itself (see vcpu_kick_run), so the handler does nothing.
 * It must not rely on running at once: a sanitizer may defer it to the
 * thread's next library call, after KVM_RUN has started. */
static void vcpu_kick_handler(int sig)
{
	(void)sig;
}

/* KVM's kvm_run.immediate_exit, a plain byte of KVM's ABI that KVM reads
 * at KVM_RUN, as the atomic byte the kicker and @v's thread share: the
 * same size and alignment (checked here). Caller: @v's fd is mapped. */
_Static_assert(sizeof(_Atomic uint8_t) == sizeof(uint8_t) &&
	       _Alignof(_Atomic uint8_t) == _Alignof(uint8_t),
	       "immediate_exit: an atomic byte is a byte");
static _Atomic uint8_t *immediate_exit(struct vcpu *v)
{
	return (_Atomic uint8_t *)&v->run->immediate_exit;
}

/* Interrupt @v's KVM_RUN, or make its next one return at once. Caller
 * holds v->lock and has seen v->in_run set. */
static void vcpu_kick_run(struct vcpu *v)
{
	/* release: KVM reads the flag as KVM_RUN starts; a KVM_RUN already
	 * under way is ended by the signal. Pairs with the store of 0 in
	 * vcpu_run_once after KVM_RUN returns; a flag set after that store
	 * only costs one KVM_RUN that returns EINTR. */
	atomic_store_explicit(immediate_exit(v), 1, memory_order_release);
	pthread_kill(v->thread, SIG_VCPU_KICK);
}

/* Caller holds v->lock and has just posted an event for @v. */
void vcpu_kick_from(struct vcpu *v, int reason, int src, uint32_t detail)
{
	v->wake_reason = (uint8_t)reason;
	/* release: pairs with the acquire loads of a polling HLT
	 * (vcpu_halt.c spin_until); the event is already posted */
	atomic_fetch_add_explicit(&v->wake_seq, 1, memory_order_release);
	if (pause_pending()) /* the VM is paused or pausing: this resumes it */
		pause_wake((enum pause_reason)reason);
	if (v->state == VCPU_HALTED && !v->wake_posted_ns) {
		v->wake_posted_ns = now_ns();
		v->wake_src = (uint8_t)src;
		v->wake_detail = detail;
	}
	if (v->state != VCPU_RUNNING)
		pthread_cond_signal(&v->wake);
	else if (atomic_load(&v->in_run)) /* pairs with the store before the injection check in vcpu_run_once, under v->lock as here */
		vcpu_kick_run(v);
}

/* A poster that does not name its source: the pause reason's. */
void vcpu_kick_for(struct vcpu *v, int reason)
{
	int src = WAKE_SRC_OTHER;

	if (reason == PAUSE_REASON_INPUT)
		src = WAKE_SRC_SERIAL;
	else if (reason == PAUSE_REASON_KICK)
		src = WAKE_SRC_KICK;
	vcpu_kick_from(v, reason, src, 0);
}

void vcpu_kick(struct vcpu *v)
{
	vcpu_kick_for(v, pause_thread_reason());
}

/* An event that ends HLT. Caller: @v's thread, v->lock held. */
bool vcpu_has_wake_event(struct vcpu *v)
{
	lapic_take_timer(&v->lapic);
	return v->nmi_pending || v->init_pending ||
	       (v->run->if_flag && (irq_extint_pending(v) ||
				    lapic_pending_vector(&v->lapic) >= 0));
}

/*
 * @vec into the guest at the next KVM_RUN: through the events KVM stored
 * at the last exit (the snapshot it takes back at KVM_RUN, as
 * KVM_SET_VCPU_EVENTS would, with the interrupt added), or KVM_INTERRUPT.
 * NMIs, the SIPI vector and SMM are left out of what KVM takes: KVM_NMI
 * may have queued one since the snapshot.
 */
static int vcpu_queue_interrupt(struct vcpu *v, int vec)
{
	struct kvm_interrupt irq = { .irq = (uint32_t)vec };
	struct kvm_vcpu_events *e = &v->run->s.regs.events;

	if (!v->events_fresh)
		return kvm_sys_ioctl(v->fd, KVM_INTERRUPT, &irq);
	e->interrupt.injected = 1;
	e->interrupt.nr = (uint8_t)vec;
	e->interrupt.soft = 0;
	e->flags &= ~(uint32_t)(KVM_VCPUEVENT_VALID_NMI_PENDING |
				KVM_VCPUEVENT_VALID_SIPI_VECTOR |
				KVM_VCPUEVENT_VALID_SMM);
	v->run->kvm_dirty_regs |= KVM_SYNC_X86_EVENTS;
	return 0;
}

/*
 * NMI first, then the PIC's ExtINT (acknowledged at the PIC as it is
 * injected; the LAPIC's IRR, ISR and TPR play no part), then the highest
 * deliverable LAPIC vector, if the guest can take an interrupt now; else
 * ask KVM to exit when it can; then the PV EOI flag, if the guest may end
 * its interrupt in service without an exit. Caller: @v's thread, lock
 * held, right before KVM_RUN.
 */
static void vcpu_inject(struct vcpu *v)
{
	bool extint = irq_extint_pending(v);
	int vec;

	lapic_take_timer(&v->lapic); /* its expiry marked pending */
	vec = lapic_pending_vector(&v->lapic);

	/* KVM keeps what the CPU would latch: of two NMIs, the second
	 * waits for the first one's IRET (or is dropped if one is in
	 * service already). */
	while (v->nmi_pending && kvm_sys_ioctl_n(v->fd, KVM_NMI, 0) == 0) {
		v->nmi_pending--;
		v->stats.nmis_injected++;
	}
	if ((extint || vec >= 0) && v->run->ready_for_interrupt_injection &&
	    v->run->if_flag) {
		if (extint)
			vec = irq_extint_ack(v);
		if (v->vm->idle)
			v->vm->idle->inject(v, vec);
		if (vcpu_queue_interrupt(v, vec) == 0) {
			if (!extint)
				lapic_accept(&v->lapic, vec);
			v->stats.irqs_injected++;
		}
		extint = irq_extint_pending(v);
		vec = lapic_pending_vector(&v->lapic);
	}
	v->run->request_interrupt_window = extint || vec >= 0;
	lapic_pv_eoi_enter(v, v->vm->idle && v->vm->idle->exit_wanted(v));
	/* KVM loads CR8 from here at KVM_RUN: the TPR, as the guest last
	 * wrote it through the APIC registers (or INIT reset it). */
	v->run->cr8 = v->lapic.tpr >> APIC_PRIORITY_CLASS_SHIFT;
}

/*
 * CR8 is TPR[7:4]: a MOV to CR8 the guest made shows in the TPR. KVM
 * stores CR8 in run->cr8 at every exit. Caller: @v's thread, right after
 * KVM_RUN, lock not held (only this thread writes the TPR).
 */
static void vcpu_sync_cr8(struct vcpu *v)
{
	uint64_t cr8 = v->run->cr8;

	if (cr8 == v->lapic.tpr >> APIC_PRIORITY_CLASS_SHIFT)
		return;
	pthread_mutex_lock(&v->lock);
	v->lapic.tpr = (uint32_t)(cr8 & 0xf) << APIC_PRIORITY_CLASS_SHIFT;
	pthread_mutex_unlock(&v->lock);
}

static void vcpu_exit_io(struct vcpu *v)
{
	struct kvm_run *r = v->run;
	uint8_t *p = (uint8_t *)r + r->io.data_offset;

	for (uint32_t i = 0; i < r->io.count; i++, p += r->io.size)
		bus_access(v, BUS_PIO, r->io.port, p, r->io.size,
			   r->io.direction == KVM_EXIT_IO_OUT);
}

static uint64_t vcpu_rip(struct vcpu *v)
{
	struct kvm_regs regs;

	return kvm_sys_ioctl(v->fd, KVM_GET_REGS, &regs) < 0 ? 0 : regs.rip;
}

/* The only switch over exit_reason. Returns the next state. */
static enum vcpu_state vcpu_handle_exit(struct vcpu *v)
{
	struct kvm_run *r = v->run;
	enum vcpu_state next = VCPU_RUNNING;

	if (r->exit_reason < VCPU_EXIT_REASONS)
		v->stats.exits[r->exit_reason]++;
	if (v->vm->idle)
		v->vm->idle->exit(v);
	switch (r->exit_reason) {
	case KVM_EXIT_IO:
		vcpu_exit_io(v);
		break;
	case KVM_EXIT_MMIO:
		if (lapic_mmio_claims(&v->lapic, r->mmio.phys_addr))
			lapic_mmio(v, r->mmio.phys_addr & (APIC_PAGE_SIZE - 1),
				   r->mmio.data, r->mmio.len, r->mmio.is_write,
				   NULL);
		else
			bus_access(v, BUS_MMIO, r->mmio.phys_addr, r->mmio.data,
				   r->mmio.len, r->mmio.is_write);
		break;
	case KVM_EXIT_X86_RDMSR:
	case KVM_EXIT_X86_WRMSR:
		msr_exit(v);
		break;
	case KVM_EXIT_HLT:
		/* relaxed: one writer; status snapshots read it. */
		atomic_store_explicit(&v->stats.hlt_exits,
			atomic_load_explicit(&v->stats.hlt_exits,
					     memory_order_relaxed) + 1,
			memory_order_relaxed);
		pthread_mutex_lock(&v->lock);
		/* With idle hooks, even with an event pending this is an
		 * idle entry and exit (a tick-only window ends here). */
		if (!vcpu_has_wake_event(v) || v->vm->idle)
			next = VCPU_HALTED;
		pthread_mutex_unlock(&v->lock);
		break;
	case KVM_EXIT_IRQ_WINDOW_OPEN:
	case KVM_EXIT_INTR:
	case KVM_EXIT_SET_TPR: /* CR8 lowered: vcpu_sync_cr8 took it */
		break;
	case KVM_EXIT_SHUTDOWN:
		vmm_fail(VMM_EXIT_TRIPLE_FAULT, "vCPU %u: triple fault "
			 "(KVM_EXIT_SHUTDOWN) at rip %#" PRIx64, v->id,
			 vcpu_rip(v));
		return VCPU_FINISHED;
	case KVM_EXIT_INTERNAL_ERROR:
		vmm_fail(VMM_EXIT_INTERNAL, "vCPU %u: KVM internal error, "
			 "suberror %u%s, at rip %#" PRIx64, v->id,
			 r->internal.suberror,
			 r->internal.suberror == KVM_INTERNAL_ERROR_EMULATION ?
			 " (emulation failure)" : "", vcpu_rip(v));
		return VCPU_FINISHED;
	case KVM_EXIT_FAIL_ENTRY:
		vmm_fail(VMM_EXIT_INTERNAL, "vCPU %u: VM entry failed, hardware "
			 "reason %#llx", v->id,
			 r->fail_entry.hardware_entry_failure_reason);
		return VCPU_FINISHED;
	default:
		vmm_fail(VMM_EXIT_INTERNAL, "vCPU %u: unknown KVM exit reason "
			 "%u at rip %#" PRIx64, v->id, r->exit_reason,
			 vcpu_rip(v));
		return VCPU_FINISHED;
	}
	return next;
}

/*
 * @v's thread, v->lock held, a pause pending: park (RUNNING or HALTED ->
 * PAUSED; WAIT_SIPI stays) until the VM resumes or stops, then go back to
 * the state it was in; v->lock is held again on return. For the idle
 * hooks a parked vCPU is idle: HALTED and WAIT_SIPI already are, a RUNNING
 * one enters idle here and leaves it as it comes back. An event already
 * pending that would wake or interrupt the vCPU now (posted before the
 * pause was asked) resumes the VM once it is parked, as one posted during
 * the pause does.
 */
void vcpu_park(struct vcpu *v)
{
	const struct vcpu_idle_ops *idle = v->vm->idle;
	enum vcpu_state from = v->state;
	bool kick = false;

	/* HALTED and WAIT_SIPI park only with nothing pending. */
	if (from == VCPU_RUNNING && vcpu_has_wake_event(v))
		pause_wake((enum pause_reason)v->wake_reason);
	if (from == VCPU_RUNNING && idle) {
		idle->run_done(v, true);
		idle->halt(v, true); /* plain: parked, not in HLT */
	}
	if (from != VCPU_WAIT_SIPI)
		v->state = VCPU_PAUSED;
	pthread_mutex_unlock(&v->lock);
	pause_park();
	pthread_mutex_lock(&v->lock);
	v->state = from;
	if (from == VCPU_RUNNING && idle)
		kick = idle->wake(v, true);
	if (kick)
		idle->kick_deferred(v);
}

/* One KVM_RUN and its exit. Caller: @v's thread, state RUNNING. */
static enum vcpu_state vcpu_run_once(struct vcpu *v)
{
	int r;

	vcpu_timer_entry(v);
	pthread_mutex_lock(&v->lock);
	if (v->init_pending) {
		v->init_pending = false;
		vcpu_reset(v);
		pthread_mutex_unlock(&v->lock);
		return VCPU_WAIT_SIPI;
	}
	/* in_run before the injection check: a kicker that posts after the
	 * check sees it and interrupts KVM_RUN (see vcpu_kick). */
	atomic_store(&v->in_run, true); /* pairs with the loads in vcpu_kick_for / vcpus_nudge */
	if (vm_stopping()) {
		atomic_store(&v->in_run, false); /* pairs with the same loads: not in KVM_RUN, under v->lock */
		pthread_mutex_unlock(&v->lock);
		return VCPU_FINISHED;
	}
	if (pause_pending()) {
		atomic_store(&v->in_run, false); /* pairs with the loads in vcpu_kick_for / vcpus_nudge, under v->lock as here */
		vcpu_park(v);
		pthread_mutex_unlock(&v->lock);
		return VCPU_RUNNING; /* looks at INIT, stop, pause again */
	}
	vcpu_inject(v);
	pthread_mutex_unlock(&v->lock);

	if (v->wake_posted_run_ns) { /* the wake path, posted -> KVM_RUN */
		uint64_t lat = now_ns() - v->wake_posted_run_ns;

		v->wake_posted_run_ns = 0;
		v->stats.wakeups++;
		v->stats.wake_latency_ns += lat;
		if (lat > v->stats.wake_latency_max_ns)
			v->stats.wake_latency_max_ns = lat;
	}
	r = kvm_sys_ioctl_n(v->fd, KVM_RUN, 0);
	v->run->kvm_dirty_regs = 0;
	v->events_fresh = v->vm->sync_events; /* stored at every return */
	atomic_store(&v->in_run, false); /* pairs with the loads in vcpu_kick_for / vcpus_nudge: a late kick only sets immediate_exit, cleared below */
	/* an EOI the guest made by its flag, done now that the vCPU is out
	 * of KVM_RUN (a vector it lets in is posted, not kicked for) */
	lapic_pv_eoi_exit(v);
	if (v->vm->idle)
		v->vm->idle->run_done(v, false);
	/* relaxed: pairs with the release store in vcpu_kick_run; a kick
	 * that raced this KVM_RUN's return has posted its event, which the
	 * next vcpu_run_once sees under v->lock */
	atomic_store_explicit(immediate_exit(v), 0, memory_order_relaxed);
	vcpu_sync_cr8(v);
	if (r < 0) {
		if (errno == EINTR || errno == EAGAIN) {
			v->stats.exits[KVM_EXIT_INTR]++;
			return VCPU_RUNNING;
		}
		vmm_fail(VMM_EXIT_KVM, "vCPU %u: KVM_RUN: %s", v->id,
			 strerror(errno));
		return VCPU_FINISHED;
	}
	return vcpu_handle_exit(v);
}

/* Blocks until a SIPI, then starts in real mode at its vector; or until
 * an S3 resume, then starts at the waking vector. */
static enum vcpu_state vcpu_wait_sipi(struct vcpu *v)
{
	const struct vcpu_idle_ops *idle = v->vm->idle;
	uint8_t vector;
	bool kick = false, resume, protected;
	uint32_t addr;
	int err;

	pthread_mutex_lock(&v->lock);
	v->state = VCPU_WAIT_SIPI;
	if (idle)
		idle->halt(v, true); /* a vCPU waiting for SIPI is idle */
	for (;;) {
		if (v->init_pending) { /* INIT while waiting: reset again */
			v->init_pending = false;
			vcpu_reset(v);
		}
		if (v->sipi_pending || v->resume_pending || vm_stopping())
			break;
		if (pause_pending()) {
			vcpu_park(v); /* stays WAIT_SIPI, idle throughout */
			continue;
		}
		pthread_cond_wait(&v->wake, &v->lock);
	}
	resume = v->resume_pending;
	v->resume_pending = v->sipi_pending = false;
	vector = v->sipi_vector;
	addr = v->resume_addr;
	protected = v->resume_protected;
	if (idle)
		kick = idle->wake(v, true);
	pthread_mutex_unlock(&v->lock);
	if (kick) /* at once: a SIPI's wake-up is not a guest's wake path */
		housekeeping_kick();
	if (vm_stopping())
		return VCPU_FINISHED;
	err = resume ? vcpu_set_resume_state(v, addr, protected)
		     : vcpu_set_sipi_state(v, vector);
	if (err)
		return VCPU_FINISHED;
	pthread_mutex_lock(&v->lock);
	v->state = VCPU_RUNNING;
	pthread_mutex_unlock(&v->lock);
	return VCPU_RUNNING;
}

static void *vcpu_thread(void *arg)
{
	struct vcpu *v = arg;
	enum vcpu_state next = v->state;
	sigset_t kick;
	char name[16];

	snprintf(name, sizeof(name), "vmm-vcpu%u", v->id);
	pthread_setname_np(pthread_self(), name);
	/* relaxed: read by status snapshots only (a TID, no ordering). */
	atomic_store_explicit(&v->tid, (int)gettid(), memory_order_relaxed);
	vcpu_self = v;
	/* Its LAPIC timer is the timeout of its HLT wait: no timer slack
	 * (50 us by default) on a guest's deadline. */
	prctl(PR_SET_TIMERSLACK, 1ul, 0ul, 0ul, 0ul);
	sched_slice_apply();
	sigemptyset(&kick);
	sigaddset(&kick, SIG_VCPU_KICK);
	pthread_sigmask(SIG_UNBLOCK, &kick, NULL);

	while (next != VCPU_FINISHED) {
		if (vm_stopping())
			next = VCPU_FINISHED;
		switch (next) {
		case VCPU_WAIT_SIPI:
			next = vcpu_wait_sipi(v);
			break;
		case VCPU_RUNNING:
			next = vcpu_run_once(v);
			break;
		case VCPU_HALTED:
			next = vcpu_wait_interrupt(v);
			break;
		case VCPU_PAUSED: /* never a next state: parking is in place */
		case VCPU_FINISHED:
			break;
		}
	}
	pthread_mutex_lock(&v->lock);
	v->state = VCPU_FINISHED;
	pthread_mutex_unlock(&v->lock);
	return NULL;
}

/* Caller: the main thread, with SIG_VCPU_KICK blocked (threads inherit it
 * and unblock it themselves once they run). */
int vcpus_start(struct vm *vm)
{
	struct sigaction sa = { .sa_handler = vcpu_kick_handler };
	pthread_attr_t attr;
	sigset_t kick;
	int err = 0;

	sigemptyset(&sa.sa_mask);
	if (sigaction(SIG_VCPU_KICK, &sa, NULL) < 0)
		return vmm_fail(VMM_EXIT_KVM, "sigaction: %s", strerror(errno));
	sigemptyset(&kick);
	sigaddset(&kick, SIG_VCPU_KICK);
	pthread_sigmask(SIG_BLOCK, &kick, NULL);
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, VCPU_STACK_SIZE);
	for (unsigned int i = 0; i < vm->ncpus && !err; i++) {
		struct vcpu *v = &vm->vcpus[i];

		/* under the lock: vcpus_nudge (the export thread's "pause")
		 * reads thread and started */
		pthread_mutex_lock(&v->lock);
		err = pthread_create(&v->thread, &attr, vcpu_thread, v);
		v->started = !err;
		pthread_mutex_unlock(&v->lock);
	}
	pthread_attr_destroy(&attr);
	if (err)
		return vmm_fail(VMM_EXIT_KVM, "cannot start a vCPU thread: %s",
				strerror(err));
	return 0;
}

void vcpus_nudge(struct vm *vm)
{
	for (unsigned int i = 0; vm->vcpus && i < vm->ncpus; i++) {
		struct vcpu *v = &vm->vcpus[i];

		pthread_mutex_lock(&v->lock);
		if (v->started) {
			/* release: as in vcpu_kick_for (a polling HLT looks at
			 * the stop and pause flags again) */
			atomic_fetch_add_explicit(&v->wake_seq, 1,
						  memory_order_release);
			pthread_cond_broadcast(&v->wake);
			if (atomic_load(&v->in_run)) /* pairs with the stores in vcpu_run_once, under v->lock as here */
				vcpu_kick_run(v);
		}
		pthread_mutex_unlock(&v->lock);
	}
}

/* Any thread: a snapshot of whether @v waits (halted, for SIPI, or
 * parked). */
bool vcpu_is_halted(struct vcpu *v)
{
	bool halted;

	pthread_mutex_lock(&v->lock);
	halted = v->state == VCPU_HALTED || v->state == VCPU_WAIT_SIPI ||
		 v->state == VCPU_PAUSED;
	pthread_mutex_unlock(&v->lock);
	return halted;
}

/* Caller: vm_stop() was called; wakes every vCPU wherever it waits, a
 * parked one included. */
void vcpus_stop(struct vm *vm)
{
	vcpus_nudge(vm);
	pause_stop();
}

void vcpus_join(struct vm *vm)
{
	for (unsigned int i = 0; vm->vcpus && i < vm->ncpus; i++)
		if (vm->vcpus[i].started)
			pthread_join(vm->vcpus[i].thread, NULL);
}
