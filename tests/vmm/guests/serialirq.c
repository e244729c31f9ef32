/* Waits in HLT for one byte of serial input, taken by the IRQ 4 handler
 * (IOAPIC pin 4 -> vector 0x40 -> local APIC 0), and exits with it minus
 * '0'; prints "ready" first. Exit 100 if woken without input 1000 times. */
#include "guest.h"

int main(uint32_t magic, uint32_t *mbi);
void irq_entry(void);

volatile uint32_t got;
volatile uint8_t byte;

/* Reads RBR, EOIs, then returns without iret (which an instruction
 * emulator may lack outside real mode): EFLAGS and EIP are rearranged so
 * that popfl; ret ends the handler. */
__asm__(".globl irq_entry\n"
	"irq_entry:\n"
	"	pushl %eax\n"
	"	pushl %edx\n"
	"	movw $0x3f8, %dx\n"
	"	inb %dx, %al\n"
	"	movb %al, byte\n"
	"	incl got\n"
	"	movl $0, 0xfee000b0\n"
	"	popl %edx\n"
	"	movl 4(%esp), %eax\n"
	"	xchgl %eax, 12(%esp)\n"
	"	movl %eax, 8(%esp)\n"
	"	popl %eax\n"
	"	addl $4, %esp\n"
	"	popfl\n"
	"	ret\n");

static uint64_t idt[0x41];

static void mmio_write(uint32_t addr, uint32_t val)
{
	*(volatile uint32_t *)(uintptr_t)addr = val;
}

int main(uint32_t magic, uint32_t *mbi)
{
	struct { uint16_t limit; uint32_t base; } __attribute__((packed))
		idtr = { sizeof(idt) - 1, (uint32_t)(uintptr_t)idt };
	uint32_t h = (uint32_t)(uintptr_t)irq_entry;
	unsigned int spurious = 0;

	(void)magic; (void)mbi;
	idt[0x40] = (h & 0xffff) | (0x08u << 16) |
		    ((uint64_t)(0x8e00u | (h & 0xffff0000u)) << 32);
	__asm__ volatile("lidt %0" : : "m"(idtr));
	mmio_write(0xfee000f0, 0x1ff);            /* SVR: enable */
	mmio_write(0xfec00000, 0x10 + 2 * 4 + 1); /* pin 4, high: APIC 0 */
	mmio_write(0xfec00010, 0);
	mmio_write(0xfec00000, 0x10 + 2 * 4);     /* pin 4, low: vector 0x40 */
	mmio_write(0xfec00010, 0x40);
	outb(0x3f8 + 1, 1);                       /* IER: receive interrupt */
	puts_serial("ready\n");
	while (!got && spurious++ < 1000)
		__asm__ volatile("sti; hlt; cli" ::: "memory");
	return got ? byte - '0' : 100;
}
