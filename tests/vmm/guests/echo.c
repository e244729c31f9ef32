/* Polls the UART for one byte of input and exits with it minus '0' (so
 * "7" gives 7); prints "ready" first. */
#include "guest.h"

int main(uint32_t magic, uint32_t *mbi);

int main(uint32_t magic, uint32_t *mbi)
{
	(void)magic; (void)mbi;
	puts_serial("ready\n");
	while (!(inb(0x3f8 + 5) & 1))
		;
	return inb(0x3f8) - '0';
}
