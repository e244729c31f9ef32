/* SPDX-License-Identifier: GPL-2.0-only */
/* Between the stand-in's files: its vCPU (kvm_scripted.c keeps the fds
 * and answers the ioctls, scripted_run.c plays KVM_RUN). */
#ifndef SCRIPTED_SCRIPTED_H
#define SCRIPTED_SCRIPTED_H

#include <linux/kvm.h>
#include <stdbool.h>
#include <stdint.h>

#include "script.h"

#define PAGE 4096u
#define RUN_SIZE (2 * PAGE)      /* kvm_run, then the PIO data page */
#define PIO_OFFSET PAGE
#define MAX_FRAMES 8             /* the program and nested handlers */
#define MAX_LOOPS 16
#define GUEST_TSC_KHZ 1000000    /* one guest TSC count is one ns */

struct frame {
	const struct script_program *prog;
	uint32_t pc;
	bool saved_if;           /* what IRET puts back */
	uint32_t depth;          /* open repeats */
	uint32_t left[MAX_LOOPS]; /* their counts; 0: for ever */
	bool step_started;       /* the step at pc began in an earlier run */
	uint64_t mark;           /* its busy deadline */
};

struct scripted_vcpu {
	uint32_t id;
	struct kvm_run *run;
	struct kvm_regs regs;
	struct kvm_sregs sregs;
	struct frame frames[MAX_FRAMES];
	uint32_t nframes;
	bool if_flag;
	int pending_irq;         /* queued, not yet taken; -1: none */
	unsigned int nmis;
	uint64_t taken[256];     /* interrupts taken, by vector */
	uint64_t waited[256];    /* of those, seen by a wait-irq */
	const struct script_step *completing; /* answered at the next run */
	bool ended;
};

/* The script, read at the first kvm_sys_open. */
const struct script *scripted_script(void);

uint64_t mono_ns(void);
/* One trace line for @c, written whole (O_APPEND). Any thread. */
void trace(const struct scripted_vcpu *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* The VMM broke KVM's contract: say what (@what: a format with one %d
 * for @arg) and fail its KVM_RUN with EINVAL. */
int contract(struct scripted_vcpu *c, const char *what, int arg);
/* KVM_RUN of @c. Caller: @c's thread. */
int run_vcpu(struct scripted_vcpu *c);

#endif
