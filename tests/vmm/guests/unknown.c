/* Reads an unknown port (expects 0xff) and reads and writes an unknown
 * MSR (expects #GP each time), then writes and reads 256 other unknown
 * ports, twice, and reads 40 unknown MSRs (the VMM's log must stay short).
 * Exits 0, or 1..4 naming the failed check. */
#include "guest.h"

int main(uint32_t magic, uint32_t *mbi);
void gp_entry(void);

volatile uint32_t gp_count;

/* #GP: count it and resume after the 2-byte rdmsr/wrmsr. Same privilege,
 * interrupts off: drop error code, CS and EFLAGS and jump back, without
 * iret (which an instruction emulator may not support outside real mode). */
__asm__(".globl gp_entry\n"
	"gp_entry:\n"
	"	incl gp_count\n"
	"	addl $4, %esp\n"
	"	addl $2, (%esp)\n"
	"	popl 4(%esp)\n"
	"	addl $4, %esp\n"
	"	ret\n");

static uint64_t idt[32];

int main(uint32_t magic, uint32_t *mbi)
{
	struct { uint16_t limit; uint32_t base; } __attribute__((packed))
		idtr = { sizeof(idt) - 1, (uint32_t)(uintptr_t)idt };
	uint32_t h = (uint32_t)(uintptr_t)gp_entry, lo, hi;

	(void)magic; (void)mbi;
	idt[13] = (h & 0xffff) | (0x08u << 16) |
		  ((uint64_t)(0x8e00u | (h & 0xffff0000u)) << 32);
	__asm__ volatile("lidt %0" : : "m"(idtr));
	if (inb(0x99) != 0xff)
		return 1;
	__asm__ volatile("rdmsr" : "=a"(lo), "=d"(hi) : "c"(0x4b564dffu));
	if (gp_count != 1)
		return 2;
	__asm__ volatile("wrmsr" : : "a"(1), "d"(0), "c"(0x4b564dffu));
	if (gp_count != 2)
		return 3;
	for (int round = 0; round < 2; round++)
		for (uint16_t port = 0x9000; port < 0x9100; port++) {
			outb(port, 1);
			if (inb(port) != 0xff)
				return 4;
		}
	for (uint32_t msr = 0x4b564e00u; msr < 0x4b564e28u; msr++)
		__asm__ volatile("rdmsr" : "=a"(lo), "=d"(hi) : "c"(msr));
	puts_serial("unknown ok\n");
	return 0;
}
