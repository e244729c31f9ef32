/* For guests that provoke #GP on purpose with rdmsr/wrmsr: a handler that
 * counts it and resumes after the 2-byte instruction, and its IDT. Same
 * privilege, interrupts off: it drops the error code, CS and EFLAGS and
 * jumps back, without iret (which an instruction emulator may not support
 * outside real mode). One file per guest includes it. */
#ifndef TEST_GUEST_GP_SKIP_H
#define TEST_GUEST_GP_SKIP_H

#include <stdint.h>

void gp_entry(void);
volatile uint32_t gp_count;

__asm__(".globl gp_entry\n"
	"gp_entry:\n"
	"	incl gp_count\n"
	"	addl $4, %esp\n"
	"	addl $2, (%esp)\n"
	"	popl 4(%esp)\n"
	"	addl $4, %esp\n"
	"	ret\n");

static uint64_t gp_idt[32];

/* Loads an IDT whose vector 13 is gp_entry (code selector 0x08). */
static inline void gp_skip_install(void)
{
	struct { uint16_t limit; uint32_t base; } __attribute__((packed))
		idtr = { sizeof(gp_idt) - 1, (uint32_t)(uintptr_t)gp_idt };
	uint32_t h = (uint32_t)(uintptr_t)gp_entry;

	gp_idt[13] = (h & 0xffff) | (0x08u << 16) |
		     ((uint64_t)(0x8e00u | (h & 0xffff0000u)) << 32);
	__asm__ volatile("lidt %0" : : "m"(idtr));
}

#endif
