/* Announces itself, then spins forever with interrupts off. */
#include "guest.h"

int main(uint32_t magic, uint32_t *mbi);

int main(uint32_t magic, uint32_t *mbi)
{
	(void)magic; (void)mbi;
	puts_serial("spinning\n");
	for (;;)
		__asm__ volatile("cli" ::: "memory");
	return 1;
}
