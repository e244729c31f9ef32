// SPDX-License-Identifier: GPL-2.0-only
/*
 * The BSP's C entry: console, command line, IDT, per-CPU data, legacy PIC
 * masked, the APIC in the chosen mode, the TSC rate and the watchdog; then
 * the image's guest_main(). SMP bring-up is left to the image.
 */
#include "rt.h"

extern u32 mb_magic, mb_info;
u32 mb_mem_upper_kb;

struct mb_info {
	u32 flags, mem_lower, mem_upper, boot_device, cmdline;
};

void boot_main(void);
void boot_main(void)
{
	const char *cmd = NULL;

	console_init();
	if (mb_magic == MULTIBOOT_BOOTLOADER_MAGIC && mb_info) {
		const struct mb_info *mi = (const struct mb_info *)(uintptr_t)mb_info;

		if (mi->flags & MULTIBOOT_INFO_CMDLINE)
			cmd = (const char *)(uintptr_t)mi->cmdline;
		if (mi->flags & MULTIBOOT_INFO_MEMORY)
			mb_mem_upper_kb = mi->mem_upper;
	}
	cmdline_init(cmd);
	percpu_setup(0);
	idt_init();
	pic_init_masked();
	apic_choose_mode();
	apic_cpu_init();
	percpus[0].apic_id = apic_id();
	percpus[0].online = 1;
	cpus_online = 1;
	tsc_init();
	watchdog_start(cmdline_u64("timeout", 60));
	cpus_enumerate();
	printf("# %s: boot (multiboot magic %s), cmdline \"%s\", %s, tsc %llu kHz%s\n", guest_name,
	       mb_magic == MULTIBOOT_BOOTLOADER_MAGIC ? "ok" : "BAD", cmdline_raw(),
	       apic_x2 ? "x2apic" : "xapic", (unsigned long long)tsc_khz,
	       tsc_from_cpuid ? " (cpuid)" : " (calibrated)");
	guest_main();
	guest_exit(EXIT_OK);
}
