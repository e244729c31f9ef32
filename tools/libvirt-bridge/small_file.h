/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The small files of /proc and KVM's debugfs, read whole into a buffer
 * (small_file.c): what stats_host.c and host_wakes.c both read.
 */
#ifndef SYSIDLE_LIBVIRT_SMALL_FILE_H
#define SYSIDLE_LIBVIRT_SMALL_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Read the file @dirfd/@path whole into @buf (@size > 1 bytes, at most
 * @size - 1 of them), NUL-terminated; its length, or -1. */
ssize_t small_file_read(int dirfd, const char *path, char *buf, size_t size);
/* The unsigned decimal at the start of @s (after blanks); false when
 * there is none or it overflows. @s is NUL-terminated. */
bool small_file_u64(const char *s, uint64_t *v);

#endif
