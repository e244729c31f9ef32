/* Prints "hello" and exits with the code given as exit=N (default 0);
 * 99 if the multiboot magic is wrong. print=N: N more bytes after
 * "hello\n", numbered 64-byte lines (line i: i in 10 decimal digits, then
 * 53 letters, the j-th 'a' + (i + j) % 26, then '\n'; the last line cut
 * at N), a line per rep outsb. stay=1: halts for good
 * instead of exiting (a stop signal ends it). */
#include "guest.h"

int main(uint32_t magic, uint32_t *mbi);

static void print_lines(unsigned int n)
{
	char line[64];
	const char *p;
	unsigned int len;

	for (unsigned int i = 0; n; i++) {
		unsigned int v = i;

		for (int d = 9; d >= 0; d--, v /= 10)
			line[d] = (char)('0' + v % 10);
		for (unsigned int j = 0; j < 53; j++)
			line[10 + j] = (char)('a' + (i + j) % 26);
		line[63] = '\n';
		p = line;
		len = n < 64 ? n : 64;
		n -= len;
		__asm__ volatile("rep outsb"
				 : "+S"(p), "+c"(len)
				 : "d"(0x3f8)
				 : "memory");
	}
}

int main(uint32_t magic, uint32_t *mbi)
{
	if (magic != 0x2BADB002)
		return 99;
	puts_serial("hello\n");
	print_lines(cmdline_uint(mbi, "print", 0));
	if (cmdline_uint(mbi, "stay", 0))
		for (;;)
			__asm__ volatile("cli; hlt" ::: "memory");
	return (int)cmdline_uint(mbi, "exit", 0);
}
