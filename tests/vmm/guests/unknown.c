/* Reads an unknown port (expects 0xff) and reads and writes an unknown
 * MSR (expects #GP each time), then writes and reads 256 other unknown
 * ports, twice, and reads 40 unknown MSRs (the VMM's log must stay short).
 * Exits 0, or 1..4 naming the failed check. */
#include "gp_skip.h"
#include "guest.h"

int main(uint32_t magic, uint32_t *mbi);

int main(uint32_t magic, uint32_t *mbi)
{
	uint32_t lo, hi;

	(void)magic; (void)mbi;
	gp_skip_install();
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
