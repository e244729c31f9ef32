/* SPDX-License-Identifier: GPL-2.0-only */
/* PIT, port 0x61 and the 0x80 delay port: accepted and ignored. */
#include <string.h>

#include <sysidle/guest_abi.h>

#include "machine/bus.h"
#include "machine/devices/devices.h"
#include "machine/vcpu.h"
#include "machine/vm.h"

static void legacy_io(struct vcpu *v, uint64_t off, uint8_t *data,
		      unsigned int len, bool is_write, void *opaque)
{
	(void)v; (void)off; (void)opaque;
	if (!is_write)
		memset(data, 0, len);
}

int legacy_init(struct vm *vm)
{
	(void)vm;
	if (bus_register(BUS_PIO, GUEST_PORT_PIT, 4, legacy_io, NULL) ||
	    bus_register(BUS_PIO, 0x61, 1, legacy_io, NULL))
		return -1;
	return bus_register(BUS_PIO, 0x80, 1, legacy_io, NULL);
}
