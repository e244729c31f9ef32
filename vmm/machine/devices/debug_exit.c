/* SPDX-License-Identifier: GPL-2.0-only */
/* isa-debug-exit: a write of V to port 0xf4 ends the VM with status V. */
#include <string.h>

#include <sysidle/guest_abi.h>

#include "base/error.h"
#include "machine/bus.h"
#include "machine/devices/devices.h"
#include "machine/vcpu.h"
#include "machine/vm.h"

static void debug_exit_io(struct vcpu *v, uint64_t off, uint8_t *data,
			  unsigned int len, bool is_write, void *opaque)
{
	uint32_t val = 0;

	(void)v; (void)off; (void)opaque;
	if (!is_write) {
		memset(data, 0xff, len);
		return;
	}
	memcpy(&val, data, len < 4 ? len : 4);
	vm_stop((int)(val & 0xff));
}

int debug_exit_init(struct vm *vm)
{
	(void)vm;
	return bus_register(BUS_PIO, GUEST_PORT_DEBUG_EXIT, 4, debug_exit_io,
			    NULL);
}
