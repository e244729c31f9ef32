/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * SHA-1 (FIPS 180-4, section 6.1), for name-based (version 5) UUIDs: a
 * digest of a short name, not a security boundary.
 */
#ifndef VMM_BASE_SHA1_H
#define VMM_BASE_SHA1_H

#include <stddef.h>
#include <stdint.h>

#define SHA1_DIGEST_SIZE 20

struct sha1 {
	uint32_t h[5];
	uint64_t len;          /* bytes hashed so far */
	uint8_t block[64];     /* the partial block: len % 64 bytes */
};

/* @c: any memory the caller owns; sets the initial hash value. */
void sha1_init(struct sha1 *c);
/* @c: set up by sha1_init and not finished yet; @data: @n bytes (NULL
 * only when @n is 0). */
void sha1_update(struct sha1 *c, const void *data, size_t n);
/* @c: set up by sha1_init; the digest goes to @out (20 bytes). @c is
 * spent afterwards (sha1_init again to reuse it). */
void sha1_final(struct sha1 *c, uint8_t out[SHA1_DIGEST_SIZE]);

#endif
