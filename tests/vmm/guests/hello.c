/* Prints "hello" and exits with the code given as exit=N (default 0);
 * 99 if the multiboot magic is wrong. */
#include "guest.h"

int main(uint32_t magic, uint32_t *mbi);

int main(uint32_t magic, uint32_t *mbi)
{
	if (magic != 0x2BADB002)
		return 99;
	puts_serial("hello\n");
	return (int)cmdline_uint(mbi, "exit", 0);
}
