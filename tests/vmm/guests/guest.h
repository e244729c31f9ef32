/* Tiny helpers for the VMM's bring-up test guests (32-bit, no paging). */
#ifndef TEST_GUEST_H
#define TEST_GUEST_H

#include <stdint.h>

static inline void outb(uint16_t port, uint8_t v)
{
	__asm__ volatile("outb %0, %1" : : "a"(v), "Nd"(port));
}

static inline uint8_t inb(uint16_t port)
{
	uint8_t v;

	__asm__ volatile("inb %1, %0" : "=a"(v) : "Nd"(port));
	return v;
}

static inline void puts_serial(const char *s)
{
	for (; *s; s++)
		outb(0x3f8, (uint8_t)*s);
}

/* Finds "key=" in the multiboot command line; returns its value or @def. */
static inline unsigned int cmdline_uint(uint32_t *mbi, const char *key,
					unsigned int def)
{
	const char *p = (const char *)(uintptr_t)mbi[4];

	if (!(mbi[0] & 4))
		return def;
	for (; *p; p++) {
		const char *k = key, *q = p;
		unsigned int v = 0;

		while (*k && *q == *k)
			k++, q++;
		if (*k || *q != '=' || (p != (const char *)(uintptr_t)mbi[4] &&
					p[-1] != ' '))
			continue;
		for (q++; *q >= '0' && *q <= '9'; q++)
			v = v * 10 + (unsigned int)(*q - '0');
		return v;
	}
	return def;
}

#endif
