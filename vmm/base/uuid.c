/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Canonical uuid text, and version-5 (name-based, SHA-1) uuids as RFC 9562
 * section 5.5 defines them.
 */
#include <stdio.h>

#include "base/sha1.h"
#include "base/uuid.h"

/* @c: any character. Its value as a hex digit, or -1. */
static int hex_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* @s: NUL-terminated. Its 16 bytes into @b when it is a canonical uuid
 * (dashes after the 8th, 12th, 16th and 20th digits); else -1. */
static int uuid_bytes(const char *s, uint8_t b[16])
{
	unsigned int i, n = 0;
	int hi, lo;

	for (i = 0; i < 36; i++) {
		if (i == 8 || i == 13 || i == 18 || i == 23) {
			if (s[i] != '-')
				return -1;
			continue;
		}
		hi = hex_value(s[i]);
		if (hi < 0)
			return -1;
		lo = hex_value(s[++i]);
		if (lo < 0)
			return -1;
		b[n++] = (uint8_t)(hi << 4 | lo);
	}
	return s[36] == '\0' ? 0 : -1;
}

/* @b: 16 bytes; @out: UUID_STR_LEN writable bytes. */
static void uuid_format(const uint8_t b[16], char out[UUID_STR_LEN])
{
	snprintf(out, UUID_STR_LEN,
		 "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-"
		 "%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2], b[3], b[4],
		 b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
		 b[14], b[15]);
}

/* @s: NUL-terminated; @out: UUID_STR_LEN writable bytes. */
int uuid_parse(const char *s, char out[UUID_STR_LEN])
{
	uint8_t b[16];

	if (uuid_bytes(s, b))
		return -1;
	uuid_format(b, out);
	return 0;
}

/* @ns: NUL-terminated; @name: @len readable bytes; @out: UUID_STR_LEN
 * writable bytes. */
int uuid_v5(const char *ns, const void *name, size_t len,
	    char out[UUID_STR_LEN])
{
	uint8_t b[16], md[SHA1_DIGEST_SIZE];
	struct sha1 c;

	if (uuid_bytes(ns, b))
		return -1;
	sha1_init(&c);
	sha1_update(&c, b, sizeof(b));
	sha1_update(&c, name, len);
	sha1_final(&c, md);
	md[6] = (md[6] & 0x0f) | 0x50; /* version 5 */
	md[8] = (md[8] & 0x3f) | 0x80; /* the RFC 9562 variant (10xx) */
	uuid_format(md, out);
	return 0;
}
