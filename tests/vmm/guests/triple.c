/* Triple-faults: an empty IDT, then an exception (ud2: this uses no
 * instruction a slow-path emulator may lack, as int3 or iret). */
#include "guest.h"

int main(uint32_t magic, uint32_t *mbi);

int main(uint32_t magic, uint32_t *mbi)
{
	static const struct { uint16_t limit; uint32_t base; }
		__attribute__((packed)) idt = { 0, 0 };

	(void)magic; (void)mbi;
	puts_serial("triple\n");
	__asm__ volatile("lidt %0; ud2" : : "m"(idt));
	return 1;
}
