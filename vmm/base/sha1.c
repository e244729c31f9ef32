/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * SHA-1 as FIPS 180-4 defines it: 512-bit blocks, big-endian words, the
 * 80-word message schedule (6.1.2), and the padding of 5.1.1 (a 1 bit,
 * zeros, the length in bits as a 64-bit big-endian number).
 */
#include <string.h>

#include "base/sha1.h"

/* @x rotated left by @n bits; @n: 1..31 (ROTL^n of FIPS 180-4, 3.2). */
static uint32_t rol(uint32_t x, unsigned int n)
{
	return (x << n) | (x >> (32 - n));
}

/* @c set up by sha1_init; @p: one whole 64-byte block. */
static void sha1_block(struct sha1 *c, const uint8_t *p)
{
	uint32_t w[80], a, b, cc, d, e, f, k, t;
	unsigned int i;

	for (i = 0; i < 16; i++)
		w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
		       (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
	for (; i < 80; i++)
		w[i] = rol(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
	a = c->h[0];
	b = c->h[1];
	cc = c->h[2];
	d = c->h[3];
	e = c->h[4];
	for (i = 0; i < 80; i++) {
		if (i < 20) {
			f = (b & cc) | (~b & d);            /* Ch */
			k = 0x5a827999;
		} else if (i < 40) {
			f = b ^ cc ^ d;                     /* Parity */
			k = 0x6ed9eba1;
		} else if (i < 60) {
			f = (b & cc) | (b & d) | (cc & d);  /* Maj */
			k = 0x8f1bbcdc;
		} else {
			f = b ^ cc ^ d;                     /* Parity */
			k = 0xca62c1d6;
		}
		t = rol(a, 5) + f + e + k + w[i];
		e = d;
		d = cc;
		cc = rol(b, 30);
		b = a;
		a = t;
	}
	c->h[0] += a;
	c->h[1] += b;
	c->h[2] += cc;
	c->h[3] += d;
	c->h[4] += e;
}

/* @c: any memory the caller owns. */
void sha1_init(struct sha1 *c)
{
	static const uint32_t h0[5] = {
		0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476, 0xc3d2e1f0,
	};

	memcpy(c->h, h0, sizeof(h0));
	c->len = 0;
}

/* @c set up by sha1_init, not finished; @data: @n readable bytes. */
void sha1_update(struct sha1 *c, const void *data, size_t n)
{
	const uint8_t *p = data;
	size_t have = (size_t)(c->len % 64), take;

	c->len += n;
	while (n) {
		take = 64 - have < n ? 64 - have : n;
		if (have == 0 && take == 64) {
			sha1_block(c, p);
		} else {
			memcpy(c->block + have, p, take);
			if (have + take == 64)
				sha1_block(c, c->block);
		}
		have = (have + take) % 64;
		p += take;
		n -= take;
	}
}

/* @c set up by sha1_init; @out: 20 writable bytes. */
void sha1_final(struct sha1 *c, uint8_t out[SHA1_DIGEST_SIZE])
{
	uint64_t bits = c->len * 8;
	size_t have = (size_t)(c->len % 64);
	unsigned int i;

	c->block[have++] = 0x80;
	if (have > 56) {
		memset(c->block + have, 0, 64 - have);
		sha1_block(c, c->block);
		have = 0;
	}
	memset(c->block + have, 0, 56 - have);
	for (i = 0; i < 8; i++)
		c->block[56 + i] = (uint8_t)(bits >> (56 - 8 * i));
	sha1_block(c, c->block);
	for (i = 0; i < 5; i++) {
		out[4 * i] = (uint8_t)(c->h[i] >> 24);
		out[4 * i + 1] = (uint8_t)(c->h[i] >> 16);
		out[4 * i + 2] = (uint8_t)(c->h[i] >> 8);
		out[4 * i + 3] = (uint8_t)c->h[i];
	}
}
