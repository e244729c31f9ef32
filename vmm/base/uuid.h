/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * UUIDs in their canonical text form (RFC 9562, 8-4-4-4-12 lowercase hex
 * digits): parsed from an option, or derived from a name (version 5).
 */
#ifndef VMM_BASE_UUID_H
#define VMM_BASE_UUID_H

#include <stddef.h>
#include <stdint.h>

#define UUID_STR_LEN 37 /* 36 characters and the NUL */

/* The namespace of the VMs' default uuids (vmm/export/README.md,
 * "Metrics"). */
#define VMM_UUID_NAMESPACE "515d85be-6f26-497a-a590-01cdee562eb4"

/* @s: a NUL-terminated string. 0 when it is a uuid in the canonical form
 * (hex digits of either case), written lowercase to @out; else -1 and
 * @out untouched. */
int uuid_parse(const char *s, char out[UUID_STR_LEN]);

/* @ns: a canonical uuid (uuid_parse accepts it); @name: @len bytes. The
 * version-5 uuid of @name in @ns (SHA-1 of the namespace's 16 bytes and
 * @name's bytes, RFC 9562 5.5), lowercase, to @out. -1 for a bad @ns. */
int uuid_v5(const char *ns, const void *name, size_t len,
	    char out[UUID_STR_LEN]);

#endif
