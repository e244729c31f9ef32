/* Multiboot entry for the VMM's bring-up test guests: own GDT, a stack,
 * then main(magic, info); its return value goes to the debug-exit port. */
#define MB_MAGIC 0x1BADB002
#define MB_FLAGS 0x00000003

	.section .multiboot, "a"
	.align 4
#ifndef NO_MULTIBOOT
	.long MB_MAGIC, MB_FLAGS, -(MB_MAGIC + MB_FLAGS)
#else
	.long 0, 0, 0
#endif

	.text
	.globl _start
_start:
	lgdt gdt_desc
	ljmp $0x08, $1f
1:	mov $0x10, %ecx
	mov %ecx, %ds
	mov %ecx, %es
	mov %ecx, %fs
	mov %ecx, %gs
	mov %ecx, %ss
	mov $stack_top, %esp
	push %ebx
	push %eax
	call main
	mov %eax, %edx
	mov $0xf4, %dx
	outl %eax, %dx
2:	cli
	hlt
	jmp 2b

	.data
	.align 8
	.globl gdt
gdt:	.quad 0
	.quad 0x00cf9a000000ffff	/* 0x08: flat code */
	.quad 0x00cf92000000ffff	/* 0x10: flat data */
gdt_desc:
	.word gdt_desc - gdt - 1
	.long gdt

	.bss
	.align 16
	.space 16384
stack_top:
