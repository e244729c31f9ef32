// SPDX-License-Identifier: GPL-2.0-only
/*
 * idle.elf: bring every CPU up, then idle in HLT forever; CPU 0 keeps a
 * periodic tick at hz= (default 250; hz=0: no tick at all).
 */
#include "rt.h"

const char *guest_name = "idle";

void guest_main(void)
{
	u32 hz = (u32)cmdline_u64("hz", 250);
	u32 up;

	watchdog_start(0); /* idles forever: no deadline */
	up = smp_boot();
	tick_start(hz);
	printf("idle: %u cpus up, hz=%u\n", up, hz);
	idle_loop();
}
