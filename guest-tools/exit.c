// SPDX-License-Identifier: GPL-2.0-only
/* Leave the VM through isa-debug-exit (this VMM: status = code; QEMU: 2*code+1). */
#include "rt.h"

void guest_exit(u32 code)
{
	outl(GUEST_PORT_DEBUG_EXIT, code);
	/* no debug-exit device: stop here rather than run on */
	for (;;)
		__asm__ volatile("cli; hlt");
}
