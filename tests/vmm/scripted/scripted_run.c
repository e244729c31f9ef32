/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * KVM_RUN of a scripted vCPU, in KVM's order: the events the VMM stored
 * in kvm_run (KVM_SYNC_X86_EVENTS) replace the queued interrupt; an
 * immediate_exit ends the run at once, the queued interrupt kept; the
 * answer to the last exit is read; the queued interrupt, then an NMI, is
 * taken (its handler pushed, IF cleared); an open interrupt window the
 * VMM asked for ends the run; then the steps run up to the next exit.
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <time.h>

#include "scripted.h"

#define STEPS_PER_RUN 1000000u   /* without an exit: a script's bug */
#define XAPIC_EOI_ADDR 0xfee000b0ull

/* Every return of KVM_RUN: what KVM stores in kvm_run at an exit. */
static int done(struct scripted_vcpu *c, int rc)
{
	struct kvm_run *r = c->run;

	r->if_flag = c->if_flag;
	r->ready_for_interrupt_injection = c->if_flag && c->pending_irq < 0;
	if (r->kvm_valid_regs & KVM_SYNC_X86_EVENTS) {
		struct kvm_vcpu_events *e = &r->s.regs.events;

		memset(e, 0, sizeof(*e));
		e->interrupt.injected = c->pending_irq >= 0;
		e->interrupt.nr = (uint8_t)(c->pending_irq & 0xff);
	}
	return rc;
}

static int exit_to(struct scripted_vcpu *c, uint32_t reason)
{
	c->run->exit_reason = reason;
	return done(c, 0);
}

static int interrupted(struct scripted_vcpu *c)
{
	c->run->exit_reason = KVM_EXIT_INTR;
	done(c, -1);
	errno = EINTR;
	return -1;
}

/*
 * Runs the guest on, no exit, as a guest busy on its CPU does: the
 * thread spins (burning its CPU time) until a signal (the VMM's kick) or,
 * with @until_ns, that time. Returns 1 at the time, 0 on a signal or a
 * kick already made. All signals are blocked while immediate_exit is
 * read, and let in only by a ppoll that does not wait: a kick is either
 * seen in the flag or pending as a signal, which ends that ppoll.
 */
static int wait_kick(struct scripted_vcpu *c, uint64_t until_ns)
{
	struct timespec zero = { 0, 0 };
	sigset_t all, old;
	int rc = 0;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	for (;;) {
		/* acquire: pairs with the VMM's release store of the flag
		 * before its signal (vcpu_kick_run): a kick that is not
		 * pending as a signal any more has set it */
		if (__atomic_load_n(&c->run->immediate_exit, __ATOMIC_ACQUIRE))
			break;
		if (until_ns && mono_ns() >= until_ns) {
			rc = 1;
			break;
		}
		if (ppoll(NULL, 0, &zero, &old) < 0 && errno == EINTR)
			break; /* the signal's handler has run */
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return rc;
}

/* The guest takes @vec: its handler runs next, with IF clear. */
static int take_irq(struct scripted_vcpu *c, int vec)
{
	static const struct script_step eoi = {
		.op = OP_MMIO_WRITE, .size = 4, .a = XAPIC_EOI_ADDR,
	};
	static const struct script_program eoi_only = { &eoi, 1 };
	const struct script_program *h;
	struct frame *f;

	if (!c->if_flag)
		return contract(c, "vector %d injected while IF is clear",
				vec);
	if (vec < 16)
		return contract(c, "vector %d injected: an exception", vec);
	if (c->nframes == MAX_FRAMES)
		return contract(c, "vector %d: interrupts nested too deep",
				vec);
	c->taken[vec]++;
	trace(c, "irq %#x", (unsigned int)vec);
	h = script_on_vector(scripted_script(), (uint32_t)vec);
	f = &c->frames[c->nframes++];
	memset(f, 0, sizeof(*f));
	f->prog = h ? h : &eoi_only;
	f->saved_if = c->if_flag;
	c->if_flag = false;
	return 0;
}

static int take_nmi(struct scripted_vcpu *c)
{
	const struct script_program *h = script_on_nmi(scripted_script());
	struct frame *f;

	trace(c, "nmi");
	if (!h)
		return 0;
	if (c->nframes == MAX_FRAMES)
		return contract(c, "NMI: handlers nested deeper than %d",
				MAX_FRAMES);
	f = &c->frames[c->nframes++];
	memset(f, 0, sizeof(*f));
	f->prog = h;
	f->saved_if = c->if_flag;
	return 0;
}

static uint64_t le_value(const uint8_t *p, uint8_t size)
{
	uint64_t v = 0;

	for (int i = size - 1; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

/* The VMM's answer to the last exit, into the trace. */
static void complete(struct scripted_vcpu *c)
{
	const struct script_step *st = c->completing;
	struct kvm_run *r = c->run;

	c->completing = NULL;
	if (!st)
		return;
	switch (st->op) {
	case OP_IN:
		trace(c, "in %#" PRIx64 " = %#" PRIx64, st->a,
		      le_value((uint8_t *)r + PIO_OFFSET, st->size));
		break;
	case OP_MMIO_READ:
		trace(c, "mmio-read %#" PRIx64 " = %#" PRIx64, st->a,
		      le_value(r->mmio.data, st->size));
		break;
	case OP_RDMSR:
		if (r->msr.error)
			trace(c, "rdmsr %#" PRIx64 " #GP", st->a);
		else
			trace(c, "rdmsr %#" PRIx64 " = %#llx", st->a,
			      (unsigned long long)r->msr.data);
		break;
	case OP_WRMSR:
		if (r->msr.error)
			trace(c, "wrmsr %#" PRIx64 " #GP", st->a);
		break;
	default:
		break;
	}
}

/* Fills kvm_run for the exit @st makes. */
static int exit_for(struct scripted_vcpu *c, const struct script_step *st)
{
	struct kvm_run *r = c->run;
	uint64_t val = st->b + (st->tsc_relative ? mono_ns() : 0);
	uint8_t *pio = (uint8_t *)r + PIO_OFFSET;

	switch (st->op) {
	case OP_OUT:
	case OP_IN:
		r->io.direction = st->op == OP_OUT ? KVM_EXIT_IO_OUT
						   : KVM_EXIT_IO_IN;
		r->io.size = st->size;
		r->io.port = (uint16_t)st->a;
		r->io.count = 1;
		r->io.data_offset = PIO_OFFSET;
		memset(pio, 0, 8);
		for (int i = 0; i < st->size; i++)
			pio[i] = (uint8_t)(val >> (8 * i));
		c->completing = st->op == OP_IN ? st : NULL;
		return exit_to(c, KVM_EXIT_IO);
	case OP_OUTS: /* rep outsb: the bytes in the PIO page, one exit */
		r->io.direction = KVM_EXIT_IO_OUT;
		r->io.size = 1;
		r->io.port = (uint16_t)st->a;
		r->io.count = st->len;
		r->io.data_offset = PIO_OFFSET;
		memcpy(pio, st->data, st->len);
		c->completing = NULL;
		return exit_to(c, KVM_EXIT_IO);
	case OP_MMIO_WRITE:
	case OP_MMIO_READ:
		r->mmio.phys_addr = st->a;
		r->mmio.len = st->size;
		r->mmio.is_write = st->op == OP_MMIO_WRITE;
		memset(r->mmio.data, 0, sizeof(r->mmio.data));
		for (int i = 0; i < st->size; i++)
			r->mmio.data[i] = (uint8_t)(val >> (8 * i));
		c->completing = r->mmio.is_write ? NULL : st;
		return exit_to(c, KVM_EXIT_MMIO);
	case OP_WRMSR:
	case OP_RDMSR:
		r->msr.index = (uint32_t)st->a;
		r->msr.data = st->op == OP_WRMSR ? val : 0;
		r->msr.error = 0;
		r->msr.reason = KVM_MSR_EXIT_REASON_FILTER;
		c->completing = st;
		return exit_to(c, st->op == OP_WRMSR ? KVM_EXIT_X86_WRMSR
						     : KVM_EXIT_X86_RDMSR);
	case OP_HLT:
		return exit_to(c, KVM_EXIT_HLT);
	default: /* OP_SHUTDOWN */
		return exit_to(c, KVM_EXIT_SHUTDOWN);
	}
}

/* The program ran out: the guest stops as `cli; hlt` does. */
static int ended(struct scripted_vcpu *c)
{
	if (!c->ended)
		trace(c, "end");
	c->ended = true;
	c->if_flag = false;
	return exit_to(c, KVM_EXIT_HLT);
}

/* The step at the top frame's pc, if it makes no exit: 1 to go on, 0 to
 * end the run as it stands (@rc), -1 when it is one that exits. */
static int inner_step(struct scripted_vcpu *c, struct frame *f,
		      const struct script_step *st, int *rc)
{
	struct kvm_run *r = c->run;

	switch (st->op) {
	case OP_STI:
		c->if_flag = true;
		f->pc++;
		if (r->request_interrupt_window) {
			*rc = exit_to(c, KVM_EXIT_IRQ_WINDOW_OPEN);
			return 0;
		}
		return 1;
	case OP_CLI:
		c->if_flag = false;
		f->pc++;
		return 1;
	case OP_REPEAT:
		if (f->depth == MAX_LOOPS) {
			*rc = contract(c, "repeat nested deeper than %d",
				       MAX_LOOPS);
			return 0;
		}
		f->left[f->depth++] = (uint32_t)st->a;
		f->pc++;
		return 1;
	case OP_END:
		if (f->left[f->depth - 1] == 0 || --f->left[f->depth - 1])
			f->pc = st->jump + 1;
		else
			f->pc++, f->depth--;
		return 1;
	case OP_WAIT_IRQ:
		/* as a guest's handler sets a flag its loop tests: one taken
		 * before the wait began counts */
		if (c->taken[st->a] > c->waited[st->a]) {
			c->waited[st->a] = c->taken[st->a];
			break;
		}
		wait_kick(c, 0); /* no time given: only a kick ends it */
		*rc = interrupted(c);
		return 0;
	case OP_SPIN:
		wait_kick(c, 0);
		*rc = interrupted(c);
		return 0;
	case OP_HLT_UNTIL: /* while (!flag) hlt; the flag set by a handler */
		if (c->taken[st->a] > c->waited[st->a]) {
			c->waited[st->a] = c->taken[st->a];
			break;
		}
		*rc = exit_to(c, KVM_EXIT_HLT);
		return 0;
	case OP_BUSY:
		if (!f->step_started) {
			f->step_started = true;
			f->mark = mono_ns() + st->a;
		}
		if (wait_kick(c, f->mark) == 1)
			break;
		*rc = interrupted(c);
		return 0;
	default:
		return -1;
	}
	f->step_started = false;
	f->pc++;
	return 1;
}

int run_vcpu(struct scripted_vcpu *c)
{
	struct kvm_run *r = c->run;
	struct kvm_vcpu_events *e;
	bool took = false;
	int rc;

	if (!r) {
		errno = EFAULT;
		return -1;
	}

	e = &r->s.regs.events;
	if (r->kvm_dirty_regs & KVM_SYNC_X86_EVENTS)
		c->pending_irq = e->interrupt.injected ? e->interrupt.nr : -1;
	/* acquire: pairs with the VMM's release store (vcpu_kick_run) */
	if (__atomic_load_n(&r->immediate_exit, __ATOMIC_ACQUIRE))
		return interrupted(c);
	complete(c);
	if (c->pending_irq >= 0) {
		int vec = c->pending_irq;

		c->pending_irq = -1;
		if (take_irq(c, vec))
			return done(c, -1);
		took = true;
	}
	if (c->nmis) {
		c->nmis--;
		if (take_nmi(c))
			return done(c, -1);
	}
	if (!took && r->request_interrupt_window && c->if_flag)
		return exit_to(c, KVM_EXIT_IRQ_WINDOW_OPEN);
	if (c->ended)
		return ended(c);
	for (uint32_t n = 0; n < STEPS_PER_RUN; n++) {
		struct frame *f = &c->frames[c->nframes - 1];
		const struct script_step *st;

		if (!f->prog || f->pc >= f->prog->n) {
			if (c->nframes == 1)
				return ended(c);
			c->if_flag = f->saved_if; /* IRET */
			c->nframes--;
			continue;
		}
		st = &f->prog->steps[f->pc];
		switch (inner_step(c, f, st, &rc)) {
		case 1:
			continue;
		case 0:
			return rc;
		default:
			f->step_started = false;
			f->pc++;
			return exit_for(c, st);
		}
	}
	return contract(c, "%d steps with no exit: a loop in the script "
			"that never leaves the guest", (int)STEPS_PER_RUN);
}
