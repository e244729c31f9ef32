/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * A Multiboot v1 kernel as an ELF32 i386 executable: its headers checked
 * first, then its PT_LOAD segments read straight into guest RAM.
 */
#include <elf.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <sysidle/guest_abi.h>

#include "base/error.h"
#include "machine/acpi.h"
#include "machine/image.h"
#include "machine/vm.h"

/* The Multiboot header's flags. Bits 0-15 are requirements: a loader
 * that does not meet one must refuse the kernel. Bits 16-31 are optional
 * features, of which only bit 16 changes how the kernel is loaded. */
#define MB_HDR_PAGE_ALIGN 0x00001u  /* modules on 4 KiB boundaries: met */
#define MB_HDR_MEMORY_INFO 0x00002u /* mem_* and the memory map: met */
#define MB_HDR_VIDEO_MODE 0x00004u  /* a video mode table: not offered */
#define MB_HDR_REQUIRED 0x0ffffu
#define MB_HDR_MET (MB_HDR_PAGE_ALIGN | MB_HDR_MEMORY_INFO)
#define MB_HDR_AOUT_KLUDGE 0x10000u /* load by the header's addresses */

/* Reads @len bytes at @off into @buf; "truncated @what" when the image
 * is too short (the caller checked nothing). 0 or -1 after vmm_fail. */
static int read_part(const struct image *im, void *buf, size_t len,
		     uint64_t off, const char *what)
{
	if (off > im->size || len > im->size - off)
		return vmm_fail(VMM_EXIT_IMAGE, "'%s': truncated %s", im->path,
				what);
	return image_read(im, buf, len, off);
}

/* The ELF header of a little-endian ELF32 i386 executable, or -1. */
static int check_ehdr(const struct image *im, const uint8_t *head,
		      size_t head_len, Elf32_Ehdr *eh)
{
	if (head_len < SELFMAG || memcmp(head, ELFMAG, SELFMAG))
		return vmm_fail(VMM_EXIT_IMAGE, "'%s' is not an ELF file",
				im->path);
	if (head_len < sizeof(*eh))
		return vmm_fail(VMM_EXIT_IMAGE, "'%s': truncated ELF header",
				im->path);
	memcpy(eh, head, sizeof(*eh));
	if (eh->e_ident[EI_CLASS] != ELFCLASS32)
		return vmm_fail(VMM_EXIT_IMAGE, "'%s' is not an ELF32 i386 "
				"image (ELF class %u; multiboot v1 needs "
				"one)", im->path, eh->e_ident[EI_CLASS]);
	if (eh->e_ident[EI_DATA] != ELFDATA2LSB)
		return vmm_fail(VMM_EXIT_IMAGE, "'%s' is not an ELF32 i386 "
				"image (%s; multiboot v1 needs one)", im->path,
				eh->e_ident[EI_DATA] == ELFDATA2MSB ?
				"big-endian" : "unknown byte order");
	if (eh->e_ident[EI_VERSION] != EV_CURRENT ||
	    eh->e_version != EV_CURRENT)
		return vmm_fail(VMM_EXIT_IMAGE, "'%s': unknown ELF version %u",
				im->path, eh->e_ident[EI_VERSION]);
	if (eh->e_machine != EM_386)
		return vmm_fail(VMM_EXIT_IMAGE, "'%s' is not an ELF32 i386 "
				"image (ELF machine %u; multiboot v1 needs "
				"one)", im->path, eh->e_machine);
	if (eh->e_type != ET_EXEC)
		return vmm_fail(VMM_EXIT_IMAGE, "'%s' is not an executable "
				"(ELF type %u)", im->path, eh->e_type);
	if (eh->e_phentsize != sizeof(Elf32_Phdr) || eh->e_phnum == 0)
		return vmm_fail(VMM_EXIT_IMAGE, "'%s': no ELF program headers",
				im->path);
	return 0;
}

/* The Multiboot header in @head (the image's first bytes, at most 8 KiB):
 * found and its requirements met, or -1. */
static int check_multiboot_header(const struct image *im, const uint8_t *head,
				  size_t head_len)
{
	uint32_t h[3];

	for (size_t off = 0; off + sizeof(h) <= head_len; off += 4) {
		memcpy(h, head + off, sizeof(h));
		if (h[0] != MULTIBOOT_HEADER_MAGIC || h[0] + h[1] + h[2] != 0)
			continue;
		if (h[1] & MB_HDR_AOUT_KLUDGE)
			return vmm_fail(VMM_EXIT_IMAGE, "'%s': its multiboot "
					"header asks to be loaded by the "
					"header's addresses (flag 16, the a.out "
					"kludge); only ELF segments are "
					"loaded", im->path);
		if (h[1] & MB_HDR_REQUIRED & ~MB_HDR_MET)
			return vmm_fail(VMM_EXIT_IMAGE, "'%s': its multiboot "
					"header requires what this loader does "
					"not provide (flags %#" PRIx32 "%s; "
					"provided: 0 page-aligned modules, "
					"1 memory information)", im->path,
					h[1] & MB_HDR_REQUIRED & ~MB_HDR_MET,
					h[1] & MB_HDR_VIDEO_MODE ?
					", 2: video mode information" : "");
		return 0;
	}
	return vmm_fail(VMM_EXIT_IMAGE, "'%s': no multiboot header in the "
			"first 8 KiB", im->path);
}

/* Each PT_LOAD of @ph (@n) within the file. 0 or -1. */
static int check_segments_in_file(const struct image *im,
				  const Elf32_Phdr *ph, unsigned int n)
{
	for (unsigned int i = 0; i < n; i++)
		if (ph[i].p_type == PT_LOAD &&
		    (ph[i].p_filesz > ph[i].p_memsz ||
		     (uint64_t)ph[i].p_offset + ph[i].p_filesz > im->size))
			return vmm_fail(VMM_EXIT_IMAGE, "'%s': truncated ELF "
					"segment %u", im->path, i);
	return 0;
}

/* Each PT_LOAD of @ph (@n) within RAM below vm->ram_low, clear of the
 * ACPI tables' area; sets *@top. 0 or -1. */
static int check_segments(struct vm *vm, const struct image *im,
			  const Elf32_Phdr *ph, unsigned int n, uint64_t *top)
{
	*top = 0;
	for (unsigned int i = 0; i < n; i++) {
		uint64_t end = (uint64_t)ph[i].p_paddr + ph[i].p_memsz;

		if (ph[i].p_type != PT_LOAD || ph[i].p_memsz == 0)
			continue;
		if (ph[i].p_paddr < ACPI_AREA_END && end > ACPI_AREA_BASE)
			return vmm_fail(VMM_EXIT_IMAGE, "'%s': segment %u at "
					"%#" PRIx32 "-%#" PRIx64 " overlaps the "
					"ACPI tables' area %#x-%#x; link the "
					"kernel at 1 MiB or above", im->path,
					i, ph[i].p_paddr, end - 1,
					ACPI_AREA_BASE, ACPI_AREA_END - 1);
		if (end > vm->ram_low ||
		    !guest_ptr(vm, ph[i].p_paddr, ph[i].p_memsz))
			return image_too_small(vm, im->path, end);
		if (end > *top)
			*top = end;
	}
	if (*top == 0)
		return vmm_fail(VMM_EXIT_IMAGE, "'%s': no loadable segment",
				im->path);
	return 0;
}

int multiboot_elf_load(struct vm *vm, const struct image *im, uint64_t *top)
{
	size_t head_len = im->size < MULTIBOOT_SEARCH_BYTES ?
			  (size_t)im->size : MULTIBOOT_SEARCH_BYTES;
	uint8_t head[MULTIBOOT_SEARCH_BYTES];
	Elf32_Phdr *ph;
	Elf32_Ehdr eh = { 0 };
	size_t ph_len;

	if (image_read(im, head, head_len, 0) ||
	    check_ehdr(im, head, head_len, &eh))
		return -1;
	ph_len = (size_t)eh.e_phnum * sizeof(*ph);
	ph = malloc(ph_len);
	if (!ph)
		return vmm_fail(VMM_EXIT_IMAGE, "out of memory");
	if (read_part(im, ph, ph_len, eh.e_phoff, "ELF program headers") ||
	    check_segments_in_file(im, ph, eh.e_phnum) ||
	    check_multiboot_header(im, head, head_len) ||
	    check_segments(vm, im, ph, eh.e_phnum, top)) {
		free(ph);
		return -1;
	}
	/* Only now is anything read beyond the headers. */
	for (unsigned int i = 0; i < eh.e_phnum; i++) {
		uint8_t *dst;

		if (ph[i].p_type != PT_LOAD || ph[i].p_memsz == 0)
			continue;
		dst = guest_ptr(vm, ph[i].p_paddr, ph[i].p_memsz);
		if (image_read(im, dst, ph[i].p_filesz, ph[i].p_offset)) {
			free(ph);
			return -1;
		}
		memset(dst + ph[i].p_filesz, 0, ph[i].p_memsz - ph[i].p_filesz);
	}
	free(ph);
	vm->entry = eh.e_entry;
	return 0;
}
