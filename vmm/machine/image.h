/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * A kernel or module image being loaded: read piece by piece (headers
 * first, then only the segments, straight into guest RAM), never whole,
 * and stoppable between pieces. loader.c reads files with pread; the
 * loader's fuzz target reads from memory.
 */
#ifndef VMM_MACHINE_IMAGE_H
#define VMM_MACHINE_IMAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct vm;

#define IMAGE_CHUNK (16u << 20) /* bytes read between two stop checks */

struct image {
	const char *path;  /* for messages */
	const char *what;  /* "kernel", "module" */
	uint64_t size;     /* bytes */
	/* @len bytes at @off (within @size) into @buf: 0, or -1 with errno
	 * set (a short read sets EIO). */
	int (*read)(const struct image *im, void *buf, size_t len,
		    uint64_t off);
	void *ctx;
	/* Polled between two pieces: true stops the load (it has set the
	 * VM's exit status). NULL: never. */
	bool (*stop)(const struct image *im);
};

/* @len bytes at @off of @im into @buf, IMAGE_CHUNK at a time with a stop
 * check before each: 0, or -1 after vmm_fail (or the stop). */
int image_read(const struct image *im, void *buf, size_t len, uint64_t off);

/* "RAM too small" for @path, which needs RAM up to @need: -1 after
 * vmm_fail. */
int image_too_small(struct vm *vm, const char *path, uint64_t need);

/* multiboot_elf.c: checks @im as a Multiboot v1 ELF32 i386 kernel (ELF
 * header, program headers, the Multiboot header and its flags) before
 * reading anything else, then copies its PT_LOAD segments into @vm's RAM
 * below vm->ram_low, clearing their bss. Sets vm->entry and *@top, the
 * end of the highest segment. Caller: the VM's RAM exists, no vCPU runs.
 * 0, or -1 after vmm_fail (exit status VMM_EXIT_IMAGE) or a stop. */
int multiboot_elf_load(struct vm *vm, const struct image *im, uint64_t *top);

#endif
