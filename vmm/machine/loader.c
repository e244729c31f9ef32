/* SPDX-License-Identifier: GPL-2.0-only */
/* Multiboot v1 loader: ELF32 PT_LOAD segments, modules, multiboot info. */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "machine/acpi.h"
#include "machine/vm.h"

#define PAGE_ALIGN(x) (((x) + 0xfffull) & ~0xfffull)

struct mb_info {
	uint32_t flags, mem_lower, mem_upper, boot_device, cmdline;
	uint32_t mods_count, mods_addr, syms[4], mmap_length, mmap_addr;
} __attribute__((packed));

struct mb_module {
	uint32_t mod_start, mod_end, string, reserved;
} __attribute__((packed));

struct mb_mmap {
	uint32_t size;
	uint64_t addr, len;
	uint32_t type;
} __attribute__((packed));

/*
 * Reads all of @path into a malloc'd buffer; on failure prints why.
 * The caller guarantees @path and @what are valid strings and that @max
 * bounds what may be read (the guest RAM): only a regular file of at
 * most @max bytes is read.  The open uses O_NONBLOCK so that a FIFO can
 * never block it; O_NONBLOCK is cleared once the file is known regular.
 */
static uint8_t *read_file(const char *path, const char *what, size_t *len,
			  uint64_t max)
{
	struct stat st;
	uint8_t *buf;
	ssize_t r;
	size_t got = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);

	if (fd < 0 || fstat(fd, &st) < 0) {
		vmm_fail(VMM_EXIT_IMAGE, "cannot read %s '%s': %s", what, path,
			 strerror(errno));
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		vmm_fail(VMM_EXIT_IMAGE, "%s '%s' is not a regular file "
			 "(a FIFO, device or directory is refused)", what, path);
		return NULL;
	}
	if ((uint64_t)st.st_size > max) {
		close(fd);
		vmm_fail(VMM_EXIT_IMAGE, "%s '%s' is %lld bytes, more than "
			 "the guest RAM (%" PRIu64 " bytes)", what, path,
			 (long long)st.st_size, max);
		return NULL;
	}
	if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) < 0) {
		vmm_fail(VMM_EXIT_IMAGE, "cannot read %s '%s': %s", what, path,
			 strerror(errno));
		close(fd);
		return NULL;
	}
	buf = malloc((size_t)st.st_size + 1);
	while (buf && got < (size_t)st.st_size &&
	       (r = read(fd, buf + got, (size_t)st.st_size - got)) > 0)
		got += (size_t)r;
	close(fd);
	if (!buf || got != (size_t)st.st_size) {
		free(buf);
		vmm_fail(VMM_EXIT_IMAGE, "cannot read %s '%s'", what, path);
		return NULL;
	}
	*len = got;
	return buf;
}

static int too_small(struct vm *vm, const char *path, uint64_t need)
{
	return vmm_fail(VMM_EXIT_IMAGE, "RAM too small for the image '%s': "
			"it needs %" PRIu64 " KiB below 3 GiB, --mem gives %"
			PRIu64 " KiB", path, (need + 1023) >> 10,
			(vm->cfg->mem_size < vm->ram_low ? vm->cfg->mem_size
							  : vm->ram_low) >> 10);
}

static int has_multiboot_header(const uint8_t *img, size_t len)
{
	size_t end = len < MULTIBOOT_SEARCH_BYTES ? len : MULTIBOOT_SEARCH_BYTES;
	uint32_t h[3];

	for (size_t off = 0; off + 12 <= end; off += 4) {
		memcpy(h, img + off, sizeof(h));
		if (h[0] == MULTIBOOT_HEADER_MAGIC && h[0] + h[1] + h[2] == 0)
			return 1;
	}
	return 0;
}

/* [addr, addr + len) meets the ACPI tables' area (the BIOS area). */
static bool overlaps_acpi(uint64_t addr, uint64_t len)
{
	return addr < ACPI_AREA_END && addr + len > ACPI_AREA_BASE;
}

/* Copies the PT_LOAD segments into RAM; returns the end of the highest. */
static int load_elf32(struct vm *vm, const char *path, const uint8_t *img,
		      size_t len, uint64_t *top)
{
	Elf32_Ehdr eh;
	Elf32_Phdr ph;

	if (len < 4 || memcmp(img, ELFMAG, SELFMAG))
		return vmm_fail(VMM_EXIT_IMAGE, "'%s' is not an ELF file", path);
	if (len < sizeof(eh))
		return vmm_fail(VMM_EXIT_IMAGE, "'%s': truncated ELF header",
				path);
	memcpy(&eh, img, sizeof(eh));
	if (eh.e_ident[EI_CLASS] != ELFCLASS32 || eh.e_machine != EM_386)
		return vmm_fail(VMM_EXIT_IMAGE, "'%s' is not an ELF32 i386 "
				"image (multiboot v1 needs one)", path);
	if (eh.e_phentsize != sizeof(ph) ||
	    eh.e_phoff + (uint64_t)eh.e_phnum * sizeof(ph) > len)
		return vmm_fail(VMM_EXIT_IMAGE, "'%s': truncated ELF program "
				"headers", path);
	for (unsigned int i = 0; i < eh.e_phnum; i++) {
		memcpy(&ph, img + eh.e_phoff + i * sizeof(ph), sizeof(ph));
		if (ph.p_type == PT_LOAD &&
		    (ph.p_filesz > ph.p_memsz ||
		     (uint64_t)ph.p_offset + ph.p_filesz > len))
			return vmm_fail(VMM_EXIT_IMAGE, "'%s': truncated ELF "
					"segment %u", path, i);
	}
	if (!has_multiboot_header(img, len))
		return vmm_fail(VMM_EXIT_IMAGE, "'%s': no multiboot header in "
				"the first 8 KiB", path);
	*top = 0;
	for (unsigned int i = 0; i < eh.e_phnum; i++) {
		uint8_t *dst;

		memcpy(&ph, img + eh.e_phoff + i * sizeof(ph), sizeof(ph));
		if (ph.p_type != PT_LOAD || ph.p_memsz == 0)
			continue;
		if (overlaps_acpi(ph.p_paddr, ph.p_memsz))
			return vmm_fail(VMM_EXIT_IMAGE, "'%s': segment %u at "
					"%#" PRIx32 "-%#" PRIx64 " overlaps the "
					"ACPI tables' area %#x-%#x; link the "
					"kernel at 1 MiB or above", path, i,
					ph.p_paddr, (uint64_t)ph.p_paddr +
					ph.p_memsz - 1, ACPI_AREA_BASE,
					ACPI_AREA_END - 1);
		dst = guest_ptr(vm, ph.p_paddr, ph.p_memsz);
		if (!dst || (uint64_t)ph.p_paddr + ph.p_memsz > vm->ram_low)
			return too_small(vm, path,
					 (uint64_t)ph.p_paddr + ph.p_memsz);
		memcpy(dst, img + ph.p_offset, ph.p_filesz);
		memset(dst + ph.p_filesz, 0, ph.p_memsz - ph.p_filesz);
		if ((uint64_t)ph.p_paddr + ph.p_memsz > *top)
			*top = (uint64_t)ph.p_paddr + ph.p_memsz;
	}
	if (*top == 0)
		return vmm_fail(VMM_EXIT_IMAGE, "'%s': no loadable segment",
				path);
	vm->entry = eh.e_entry;
	return 0;
}

/* Appends @len bytes at *@at (below ram_low, past the ACPI tables'
 * area if it would meet it), advancing it. */
static uint32_t place(struct vm *vm, const char *path, uint64_t *at,
		      const void *data, size_t len, bool *ok)
{
	uint64_t addr = *at;

	if (overlaps_acpi(addr, len))
		addr = ACPI_AREA_END;

	if (!*ok || addr + len > vm->ram_low) {
		if (*ok)
			too_small(vm, path, addr + len);
		*ok = false;
		return 0;
	}
	memcpy(vm->ram + addr, data, len);
	*at = addr + len;
	return (uint32_t)addr;
}

static size_t build_mmap(struct vm *vm, struct mb_mmap *m)
{
	size_t n = 0;

	m[n++] = (struct mb_mmap){ 20, 0, 0x9fc00, 1 };
	m[n++] = (struct mb_mmap){ 20, 0x9fc00, 0x400, 2 };
	/* the BIOS area, with the ACPI tables */
	m[n++] = (struct mb_mmap){ 20, ACPI_AREA_BASE,
				   ACPI_AREA_END - ACPI_AREA_BASE, 2 };
	if (vm->ram_low > 0x100000)
		m[n++] = (struct mb_mmap){ 20, 0x100000,
					   vm->ram_low - 0x100000, 1 };
	if (vm->ram_size > vm->ram_low)
		m[n++] = (struct mb_mmap){ 20, 1ull << 32,
					   vm->ram_size - vm->ram_low, 1 };
	return n;
}

/*
 * Loads opts->kernel and its modules and writes the multiboot info after
 * them, then the ACPI tables. Caller: the VM's RAM exists, no vCPU runs
 * yet. Sets vm->entry and vm->mbi.
 */
int loader_load(struct vm *vm, const struct machine_config *opts)
{
	struct mb_info mbi = { 0 };
	struct mb_module mods[opts->nmodules + 1];
	struct mb_mmap mmap[5];
	uint64_t at, mbi_addr;
	size_t len, n;
	uint8_t *img;
	char *cmdline;
	bool ok = true;

	img = read_file(opts->kernel, "kernel", &len, UINT64_MAX);
	if (!img)
		return -1;
	if (load_elf32(vm, opts->kernel, img, len, &at)) {
		free(img);
		return -1;
	}
	free(img);

	for (unsigned int i = 0; i < opts->nmodules && ok; i++) {
		img = read_file(opts->modules[i], "module", &len,
				 vm->ram_size);
		if (!img)
			return -1;
		at = PAGE_ALIGN(at);
		mods[i].mod_start = place(vm, opts->kernel, &at, img, len, &ok);
		mods[i].mod_end = mods[i].mod_start + (uint32_t)len;
		mods[i].reserved = 0;
		free(img);
	}
	for (unsigned int i = 0; i < opts->nmodules && ok; i++)
		mods[i].string = place(vm, opts->kernel, &at, opts->modules[i],
				       strlen(opts->modules[i]) + 1, &ok);

	if (asprintf(&cmdline, "%s%s%s", opts->kernel, *opts->append ? " " : "",
		     opts->append) < 0)
		return vmm_fail(VMM_EXIT_IMAGE, "out of memory");
	mbi.cmdline = place(vm, opts->kernel, &at, cmdline, strlen(cmdline) + 1,
			    &ok);
	free(cmdline);
	at = (at + 7) & ~7ull;
	n = build_mmap(vm, mmap);
	mbi.mmap_addr = place(vm, opts->kernel, &at, mmap, n * sizeof(*mmap),
			      &ok);
	mbi.mmap_length = (uint32_t)(n * sizeof(*mmap));
	mbi.mods_count = opts->nmodules;
	mbi.mods_addr = place(vm, opts->kernel, &at, mods,
			      opts->nmodules * sizeof(*mods), &ok);
	mbi.flags = MULTIBOOT_INFO_MEMORY | MULTIBOOT_INFO_CMDLINE |
		    MULTIBOOT_INFO_MODS | MULTIBOOT_INFO_MEM_MAP;
	mbi.mem_lower = 639;
	mbi.mem_upper = vm->ram_low > 0x100000 ?
			(uint32_t)((vm->ram_low - 0x100000) >> 10) : 0;
	mbi_addr = place(vm, opts->kernel, &at, &mbi, sizeof(mbi), &ok);
	if (!ok || acpi_tables_build(vm))
		return -1;
	vm->mbi = mbi_addr;
	return 0;
}
