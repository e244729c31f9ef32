/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Multiboot v1 loader: the kernel (multiboot_elf.c), its modules and the
 * multiboot info. Files are read piece by piece with pread, headers first,
 * and a stop signal ends the load between two pieces.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sysidle/guest_abi.h>

#include "base/error.h"
#include "base/signals.h"
#include "machine/acpi.h"
#include "machine/image.h"
#include "machine/loader.h"
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

/* pread of a file image (ctx: the descriptor). */
static int file_read(const struct image *im, void *buf, size_t len,
		     uint64_t off)
{
	int fd = (int)(intptr_t)im->ctx;
	size_t got = 0;
	ssize_t r;

	while (got < len) {
		r = pread(fd, (uint8_t *)buf + got, len - got,
			  (off_t)(off + got));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			if (r == 0)
				errno = EIO; /* shorter than fstat said */
			return -1;
		}
		got += (size_t)r;
	}
	return 0;
}

/* Between two pieces of an image: a stop signal ends the load. */
static bool load_stopped(const struct image *im)
{
	int sig = vm_stop_signal_take();

	if (!sig)
		return false;
	vmm_fail(VMM_EXIT_SIGNAL_BASE + sig, "stopped by SIG%s while loading "
		 "the %s '%s'", sigabbrev_np(sig), im->what, im->path);
	return true;
}

/*
 * Opens @path as an image: only a regular file, and nothing of it read
 * yet. The caller guarantees @path and @what stay valid while @im is
 * used, and calls image_close(@im) after, also on failure. The open uses
 * O_NONBLOCK so that a FIFO can never block it. 0, or -1 after vmm_fail.
 */
static int image_open(struct image *im, const char *path, const char *what)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);

	*im = (struct image){ .path = path, .what = what, .read = file_read,
			      .stop = load_stopped, .ctx = (void *)(intptr_t)fd };
	if (fd < 0 || fstat(fd, &st) < 0)
		return vmm_fail(VMM_EXIT_IMAGE, "cannot read %s '%s': %s",
				what, path, strerror(errno));
	if (!S_ISREG(st.st_mode))
		return vmm_fail(VMM_EXIT_IMAGE, "%s '%s' is not a regular file "
				"(a FIFO, device or directory is refused)",
				what, path);
	im->size = (uint64_t)st.st_size;
	return 0;
}

static void image_close(struct image *im)
{
	if ((int)(intptr_t)im->ctx >= 0)
		close((int)(intptr_t)im->ctx);
	im->ctx = (void *)(intptr_t)-1;
}

int image_read(const struct image *im, void *buf, size_t len, uint64_t off)
{
	for (size_t done = 0, n; done < len; done += n) {
		n = len - done < IMAGE_CHUNK ? len - done : IMAGE_CHUNK;
		if (im->stop && im->stop(im))
			return -1;
		if (im->read(im, (uint8_t *)buf + done, n, off + done))
			return vmm_fail(VMM_EXIT_IMAGE, "cannot read %s '%s': "
					"%s", im->what, im->path,
					strerror(errno));
	}
	return 0;
}

int image_too_small(struct vm *vm, const char *path, uint64_t need)
{
	return vmm_fail(VMM_EXIT_IMAGE, "RAM too small for the image '%s': "
			"it needs %" PRIu64 " KiB below 3 GiB, --mem gives %"
			PRIu64 " KiB", path, (need + 1023) >> 10,
			(vm->cfg->mem_size < vm->ram_low ? vm->cfg->mem_size
							  : vm->ram_low) >> 10);
}

/* [addr, addr + len) meets the ACPI tables' area (the BIOS area). */
static bool overlaps_acpi(uint64_t addr, uint64_t len)
{
	return addr < ACPI_AREA_END && addr + len > ACPI_AREA_BASE;
}

/* Room for @len bytes at *@at (below ram_low, past the ACPI tables' area
 * if it would meet it): their address, *@at advanced past them; or
 * UINT64_MAX, *@ok false, after the message (once). */
static uint64_t reserve(struct vm *vm, const char *path, uint64_t *at,
			uint64_t len, bool *ok)
{
	uint64_t addr = *at;

	if (overlaps_acpi(addr, len))
		addr = ACPI_AREA_END;
	if (!*ok || addr + len > vm->ram_low) {
		if (*ok)
			image_too_small(vm, path, addr + len);
		*ok = false;
		return UINT64_MAX;
	}
	*at = addr + len;
	return addr;
}

/* Appends @len bytes of @data at *@at (see reserve). */
static uint32_t place(struct vm *vm, const char *path, uint64_t *at,
		      const void *data, size_t len, bool *ok)
{
	uint64_t addr = reserve(vm, path, at, len, ok);

	if (!*ok)
		return 0;
	memcpy(vm->ram + addr, data, len);
	return (uint32_t)addr;
}

/* Module @path read straight into RAM at the next page from *@at. */
static int load_module(struct vm *vm, const struct machine_config *opts,
		       const char *path, uint64_t *at, struct mb_module *mod,
		       bool *ok)
{
	struct image im;
	uint64_t addr;
	int rc = -1;

	if (image_open(&im, path, "module"))
		goto out;
	if (im.size > vm->ram_size) {
		vmm_fail(VMM_EXIT_IMAGE, "module '%s' is %" PRIu64 " bytes, "
			 "more than the guest RAM (%" PRIu64 " bytes)", path,
			 im.size, vm->ram_size);
		goto out;
	}
	*at = PAGE_ALIGN(*at);
	addr = reserve(vm, opts->kernel, at, im.size, ok);
	if (!*ok || image_read(&im, vm->ram + addr, im.size, 0))
		goto out;
	mod->mod_start = (uint32_t)addr;
	mod->mod_end = (uint32_t)(addr + im.size);
	mod->reserved = 0;
	rc = 0;
out:
	image_close(&im);
	return rc;
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
 * yet, the stop signals are blocked. Sets vm->entry and vm->mbi.
 */
int loader_load(struct vm *vm, const struct machine_config *opts)
{
	struct mb_info mbi = { 0 };
	struct mb_module mods[opts->nmodules + 1];
	struct mb_mmap mmap[5];
	uint64_t at, mbi_addr;
	struct image im;
	char *cmdline;
	bool ok = true;
	size_t n;
	int rc;

	rc = image_open(&im, opts->kernel, "kernel") ||
	     multiboot_elf_load(vm, &im, &at);
	image_close(&im);
	if (rc)
		return -1;
	for (unsigned int i = 0; i < opts->nmodules && ok; i++)
		if (load_module(vm, opts, opts->modules[i], &at, &mods[i], &ok))
			return -1;
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
