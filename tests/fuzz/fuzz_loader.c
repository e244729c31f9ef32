/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Fuzz target: the Multiboot loader (loader.c, multiboot_elf.c). The input
 * is the kernel file, loaded with one module into 2 MiB of guest RAM (the
 * ACPI tables are left out). Invariants: an image is either refused (the
 * VM's exit status says 111) or loaded: its entry point set, the last
 * PT_LOAD segment's bytes in RAM as in the file and its bss zero, the
 * multiboot info and the module inside RAM.
 */
#include <assert.h>
#include <elf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/error.h"
#include "machine/acpi.h"
#include "machine/loader.h"
#include "machine/vm.h"

#define FUZZ_RAM (2u << 20) /* kernels are linked at 1 MiB */

static int fail_status = -1;
static uint8_t *ram; /* the guest RAM: one heap block, so ASan sees past it */

/* base/error.c, quiet: the status of the first failure. */
int vmm_fail(int status, const char *fmt, ...)
{
	(void)fmt;
	if (fail_status < 0)
		fail_status = status;
	return -1;
}

void vmm_warn(const char *fmt, ...)
{
	(void)fmt;
}

void vm_stop(int status)
{
	if (fail_status < 0)
		fail_status = status;
}

int acpi_tables_build(struct vm *vm)
{
	(void)vm;
	return 0;
}

/* A memfd holding @len bytes of @data; its /proc path into @path. */
static int memfd_with(const char *name, const uint8_t *data, size_t len,
		      char *path, size_t path_len)
{
	int fd = memfd_create(name, MFD_CLOEXEC);

	if (fd < 0 || (len && write(fd, data, len) != (ssize_t)len)) {
		perror("fuzz-loader: memfd");
		abort();
	}
	snprintf(path, path_len, "/proc/self/fd/%d", fd);
	return fd;
}

/* The last PT_LOAD with bytes in memory, as loaded into @vm. */
static void check_last_segment(struct vm *vm, const uint8_t *data, size_t size)
{
	Elf32_Ehdr eh;
	Elf32_Phdr ph, last = { 0 };
	const uint8_t *mem;

	memcpy(&eh, data, sizeof(eh));
	for (unsigned int i = 0; i < eh.e_phnum; i++) {
		memcpy(&ph, data + eh.e_phoff + i * sizeof(ph), sizeof(ph));
		if (ph.p_type == PT_LOAD && ph.p_memsz)
			last = ph;
	}
	assert(last.p_memsz && last.p_offset + last.p_filesz <= size);
	mem = guest_ptr(vm, last.p_paddr, last.p_memsz);
	assert(mem);
	assert(!memcmp(mem, data + last.p_offset, last.p_filesz));
	for (uint32_t i = last.p_filesz; i < last.p_memsz; i++)
		assert(mem[i] == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint8_t module[] = "a module";
	char kpath[64], mpath[64];
	const char *modules[1] = { mpath };
	struct machine_config cfg = { .mem_size = FUZZ_RAM, .ncpus = 1,
				      .kernel = kpath, .append = "x=1",
				      .modules = modules, .nmodules = 1 };
	struct vm vm = { .ram_size = FUZZ_RAM, .ram_low = FUZZ_RAM,
			 .cfg = &cfg };
	int kfd = memfd_with("kernel", data, size, kpath, sizeof(kpath));
	int mfd = memfd_with("module", module, sizeof(module), mpath,
			     sizeof(mpath));

	if (!ram)
		ram = malloc(FUZZ_RAM);
	assert(ram);
	vm.ram = ram;
	fail_status = -1;
	if (loader_load(&vm, &cfg) == 0) {
		assert(fail_status < 0);
		assert(vm.mbi && vm.mbi + 88 <= FUZZ_RAM);
		check_last_segment(&vm, data, size);
	} else {
		assert(fail_status == VMM_EXIT_IMAGE);
	}
	close(kfd);
	close(mfd);
	return 0;
}
