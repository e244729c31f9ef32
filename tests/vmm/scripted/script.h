/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * A scripted guest (README.md): for each vCPU the exits it makes, in
 * order, and for each vector what the guest does when it takes it. Read
 * once, before any vCPU runs; read-only afterwards.
 */
#ifndef SCRIPTED_SCRIPT_H
#define SCRIPTED_SCRIPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SCRIPT_MAX_BYTES (1u << 20)
#define SCRIPT_MAX_STEPS 100000u
#define SCRIPT_MAX_SECTIONS 1024u
#define SCRIPT_MAX_OUTS 4096u /* bytes of one outs: the PIO page */

enum script_op {
	OP_OUT,       /* a: port, size, b: value          -> KVM_EXIT_IO */
	OP_IN,        /* a: port, size                    -> KVM_EXIT_IO */
	OP_OUTS,      /* a: port, data: bytes (rep outsb) -> KVM_EXIT_IO */
	OP_MMIO_WRITE, /* a: address, size, b: value      -> KVM_EXIT_MMIO */
	OP_MMIO_READ, /* a: address, size                 -> KVM_EXIT_MMIO */
	OP_WRMSR,     /* a: MSR, b: value            -> KVM_EXIT_X86_WRMSR */
	OP_RDMSR,     /* a: MSR                      -> KVM_EXIT_X86_RDMSR */
	OP_HLT,       /*                                  -> KVM_EXIT_HLT */
	OP_HLT_UNTIL, /* a: vector: HLT until it has been taken -> HLT */
	OP_SHUTDOWN,  /* a triple fault              -> KVM_EXIT_SHUTDOWN */
	OP_STI,       /* IF = 1, no exit */
	OP_CLI,       /* IF = 0, no exit */
	OP_WAIT_IRQ,  /* a: vector: run, no exit, until it has been taken
		       * (again, since the last wait-irq for it ended) */
	OP_SPIN,      /* run for ever, no exit (only kicks end a KVM_RUN) */
	OP_BUSY,      /* a: ns to run with no exit */
	OP_REPEAT,    /* a: count (0: for ever); jump: past its END */
	OP_END,       /* jump: its REPEAT */
};

struct script_step {
	enum script_op op;
	uint8_t size;
	bool tsc_relative;  /* b is added to the guest TSC when it runs */
	uint64_t a, b;
	uint32_t jump;
	uint32_t line;      /* in the script, for the trace */
	const uint8_t *data; /* OP_OUTS: its bytes, len of them */
	uint32_t len;
};

struct script_program {
	const struct script_step *steps;
	uint32_t n;
};

enum script_section_kind { SECTION_VCPU, SECTION_ON_VECTOR, SECTION_ON_NMI,
			   SECTION_ON_DEFAULT };

struct script_section {
	enum script_section_kind kind;
	uint32_t first, last;   /* vCPU ids, or the vector (first == last) */
	struct script_program prog;
};

struct script {
	struct script_section *sections;
	uint32_t nsections;
	struct script_step *steps; /* every section's steps, one array */
};

/* Reads @path into @s. Returns 0, or -1 having written one line saying
 * where and why into @err (@err_len bytes). */
int script_load(const char *path, struct script *s, char *err,
		size_t err_len);

/* The program vCPU @id runs (the first section naming it), or NULL. */
const struct script_program *script_vcpu(const struct script *s,
					 uint32_t id);
/* What the guest does on taking vector @vec: its own section, else the
 * `on default` one, else NULL (then: an EOI). */
const struct script_program *script_on_vector(const struct script *s,
					      uint32_t vec);
/* On an NMI (NULL: nothing). */
const struct script_program *script_on_nmi(const struct script *s);

#endif
