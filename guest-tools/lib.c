// SPDX-License-Identifier: GPL-2.0-only
/* memset/memcpy (the compiler may call them), strings, printf-lite. */
#include "rt.h"

void *memset(void *d, int c, size_t n)
{
	u8 *p = d;

	while (n--)
		*p++ = (u8)c;
	return d;
}

void *memcpy(void *d, const void *s, size_t n)
{
	u8 *p = d;
	const u8 *q = s;

	while (n--)
		*p++ = *q++;
	return d;
}

int memcmp(const void *a, const void *b, size_t n)
{
	const u8 *p = a, *q = b;

	for (; n; n--, p++, q++)
		if (*p != *q)
			return *p - *q;
	return 0;
}

size_t strlen(const char *s)
{
	size_t n = 0;

	while (s[n])
		n++;
	return n;
}

int strncmp(const char *a, const char *b, size_t n)
{
	for (; n; n--, a++, b++) {
		if (*a != *b)
			return (u8)*a - (u8)*b;
		if (!*a)
			return 0;
	}
	return 0;
}

/* Decimal or 0x-prefixed hex; dflt when s is NULL or has no digits. */
u64 parse_u64(const char *s, u64 dflt)
{
	u64 v = 0;
	unsigned base = 10;
	bool any = false;

	if (!s)
		return dflt;
	if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
		base = 16;
		s += 2;
	}
	for (;; s++) {
		unsigned d;

		if (*s >= '0' && *s <= '9')
			d = (unsigned)(*s - '0');
		else if (base == 16 && *s >= 'a' && *s <= 'f')
			d = (unsigned)(*s - 'a' + 10);
		else if (base == 16 && *s >= 'A' && *s <= 'F')
			d = (unsigned)(*s - 'A' + 10);
		else
			break;
		v = v * base + d;
		any = true;
	}
	return any ? v : dflt;
}

struct outbuf {
	char *buf;
	size_t size, len;
};

static void put(struct outbuf *o, char c)
{
	if (o->len + 1 < o->size)
		o->buf[o->len] = c;
	o->len++;
}

static void put_num(struct outbuf *o, u64 v, unsigned base, int width, char pad, bool neg)
{
	char tmp[24];
	int n = 0;

	do {
		unsigned d = (unsigned)(v % base);

		tmp[n++] = (char)(d < 10 ? '0' + d : 'a' + d - 10);
		v /= base;
	} while (v);
	if (neg)
		tmp[n++] = '-';
	while (width-- > n)
		put(o, pad);
	while (n)
		put(o, tmp[--n]);
}

/* %[0][width][l|ll|z]{d,i,u,x,p,s,c,%} */
int vsnprintf(char *buf, size_t size, const char *fmt, va_list ap)
{
	struct outbuf o = { buf, size, 0 };

	for (; *fmt; fmt++) {
		char pad = ' ';
		int width = 0, lng = 0;

		if (*fmt != '%') {
			put(&o, *fmt);
			continue;
		}
		fmt++;
		if (*fmt == '0') {
			pad = '0';
			fmt++;
		}
		while (*fmt >= '0' && *fmt <= '9')
			width = width * 10 + (*fmt++ - '0');
		while (*fmt == 'l' || *fmt == 'z') {
			lng++;
			fmt++;
		}
		switch (*fmt) {
		case 'd':
		case 'i': {
			long long v = lng ? va_arg(ap, long long) : va_arg(ap, int);

			put_num(&o, v < 0 ? (u64)-v : (u64)v, 10, width, pad, v < 0);
			break;
		}
		case 'u':
			put_num(&o, lng ? va_arg(ap, unsigned long long) : va_arg(ap, unsigned), 10, width,
				pad, false);
			break;
		case 'x':
			put_num(&o, lng ? va_arg(ap, unsigned long long) : va_arg(ap, unsigned), 16, width,
				pad, false);
			break;
		case 'p':
			put(&o, '0');
			put(&o, 'x');
			put_num(&o, (u64)(uintptr_t)va_arg(ap, void *), 16, width, pad, false);
			break;
		case 's': {
			const char *s = va_arg(ap, const char *);
			int n;

			if (!s)
				s = "(null)";
			n = (int)strlen(s);
			while (width-- > n)
				put(&o, ' ');
			while (*s)
				put(&o, *s++);
			break;
		}
		case 'c':
			put(&o, (char)va_arg(ap, int));
			break;
		case '%':
			put(&o, '%');
			break;
		case 0:
			fmt--;
			break;
		default:
			put(&o, '%');
			put(&o, *fmt);
		}
	}
	if (o.size)
		o.buf[o.len < o.size ? o.len : o.size - 1] = 0;
	return (int)o.len;
}

int snprintf(char *buf, size_t size, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, size, fmt, ap);
	va_end(ap);
	return n;
}

int printf(const char *fmt, ...)
{
	char buf[256];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	console_write(buf, (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1);
	return n;
}
