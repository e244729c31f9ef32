/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The AP start-up code, copied to GUEST_AP_TRAMPOLINE (SIPI vector 0x08):
 * real mode -> protected mode with the runtime's GDT, then into boot32.S,
 * which switches to long mode on the stack the BSP left in ap_stack_top.
 */
#include <sysidle/guest_abi.h>

#define T(x) ((x) - ap_tramp_start + GUEST_AP_TRAMPOLINE)

	.section .rodata.tramp, "a"
	.code16
	.globl ap_tramp_start, ap_tramp_end, ap_tramp_flag_off
ap_tramp_start:
	cli
	cld
	xorw %ax, %ax
	movw %ax, %ds
	movb $1, T(tramp_flag) /* tells the BSP: no second SIPI needed */
	lgdtl T(tramp_gdtr)
	movl %cr0, %eax
	orl $1, %eax
	movl %eax, %cr0
	ljmpl $0x18, $ap_entry32
	.balign 8
tramp_gdtr:
	.word 4 * 8 - 1 /* boot32.S: four descriptors */
	.long gdt
tramp_flag:
	.byte 0
ap_tramp_end:
	.balign 4
ap_tramp_flag_off:
	.long tramp_flag - ap_tramp_start
	.code64
