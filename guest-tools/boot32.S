/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Multiboot v1 header, 32-bit entry and the switch to long mode, shared by
 * the BSP (from the loader) and the APs (from ap_trampoline.S). The page
 * tables are built by the assembler: 4 GiB identity mapped with 2 MiB pages,
 * the top GiB (APIC and IOAPIC) uncached.
 */
#include <sysidle/guest_abi.h>

#define MB_FLAGS 0x00000003 /* page-align modules, want memory info */

	.section .multiboot, "a"
	.balign 4
	.long MULTIBOOT_HEADER_MAGIC
	.long MB_FLAGS
	.long -(MULTIBOOT_HEADER_MAGIC + MB_FLAGS)

	.section .text.boot, "ax"
	.code32
	.globl _start
_start:
	cli
	cld
	movl %eax, mb_magic
	movl %ebx, mb_info
	movl $boot_stack_top, %esp
	/* zero .bss (the loader should have, but be sure) */
	movl $__bss_start, %edi
	movl $__bss_end, %ecx
	subl %edi, %ecx
	shrl $2, %ecx
	xorl %eax, %eax
	rep stosl
	xorl %esi, %esi /* BSP */
	jmp enter_long_mode

	/* APs arrive here from the trampoline, in protected mode, CS = 0x18 */
	.globl ap_entry32
ap_entry32:
	movw $0x10, %ax
	movw %ax, %ds
	movw %ax, %es
	movw %ax, %ss
	movl $1, %esi /* AP */

enter_long_mode:
	lgdt gdt_ptr
	movl %cr4, %eax
	orl $0x20, %eax /* PAE */
	movl %eax, %cr4
	movl $pml4, %eax
	movl %eax, %cr3
	movl $0xc0000080, %ecx /* EFER */
	rdmsr
	orl $0x100, %eax /* LME */
	wrmsr
	movl %cr0, %eax
	orl $0x80000001, %eax /* PG | PE */
	movl %eax, %cr0
	ljmp $0x08, $long_entry

	.code64
long_entry:
	movw $0x10, %ax
	movw %ax, %ds
	movw %ax, %es
	movw %ax, %ss
	xorl %eax, %eax
	movw %ax, %fs
	movw %ax, %gs
	testl %esi, %esi
	jnz 1f
	movq $boot_stack_top, %rsp
	call boot_main
	jmp 2f
1:	movq ap_stack_top(%rip), %rsp
	movl ap_boot_cpu(%rip), %edi
	call ap_main
2:	cli
	hlt
	jmp 2b

	.section .data
	.balign 16
	.globl gdt, gdt_end
gdt:
	.quad 0
	.quad 0x00af9a000000ffff /* 0x08: 64-bit code */
	.quad 0x00cf92000000ffff /* 0x10: data */
	.quad 0x00cf9a000000ffff /* 0x18: 32-bit code (AP trampoline) */
gdt_end:
	.balign 4
	.word 0
gdt_ptr:
	.word gdt_end - gdt - 1
	.long gdt

	.globl mb_magic, mb_info, ap_stack_top, ap_boot_cpu
mb_magic: .long 0
mb_info: .long 0
	.balign 8
ap_stack_top: .quad 0
ap_boot_cpu: .long 0

	/* page tables */
	.balign 4096
pml4:
	.quad pdpt + 0x003
	.fill 511, 8, 0
pdpt:
	.quad pd + 0x0000 + 0x003
	.quad pd + 0x1000 + 0x003
	.quad pd + 0x2000 + 0x003
	.quad pd + 0x3000 + 0x003
	.fill 508, 8, 0
pd:
	.set pg, 0
	.rept 2048
	.if pg >= 1536
	.quad (pg << 21) | 0x09b /* P | RW | PWT | PCD | PS */
	.else
	.quad (pg << 21) | 0x083 /* P | RW | PS */
	.endif
	.set pg, pg + 1
	.endr

	.section .bss
	.balign 16
boot_stack:
	.skip 0x4000
boot_stack_top:
