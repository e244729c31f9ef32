/* SPDX-License-Identifier: GPL-2.0-only */
/* The port and MMIO dispatch table: base, len, handler. */
#include <inttypes.h>
#include <string.h>

#include "base/error.h"
#include "machine/bus.h"
#include "machine/vcpu.h"

#define BUS_MAX_REGIONS 32

struct bus_region {
	uint64_t base, len;
	bus_handler fn;
	void *opaque;
};

static struct bus_region regions[2][BUS_MAX_REGIONS];
static unsigned int nregions[2];
static atomic_uchar port_logged[65536 / 8];
static struct vmm_warn_limit port_warn = VMM_WARN_LIMIT("unknown ports");
static struct vmm_warn_limit mmio_warn =
	VMM_WARN_LIMIT("unknown MMIO addresses");

/* Caller: setup time, before any vCPU thread starts (the table is then
 * read without a lock). */
int bus_register(enum bus_space space, uint64_t base, uint64_t len,
		 bus_handler fn, void *opaque)
{
	if (nregions[space] == BUS_MAX_REGIONS)
		return vmm_fail(VMM_EXIT_INTERNAL, "bus table full");
	regions[space][nregions[space]++] =
		(struct bus_region){ base, len, fn, opaque };
	return 0;
}

/* What the guest did, said once per port and for a bounded number of
 * ports and addresses (vmm_warn_limited). */
static void bus_unknown(enum bus_space space, uint64_t addr, bool is_write)
{
	const char *what = is_write ? "wrote" : "read";
	const char *result = is_write ? "ignored" : "reads as all-ones";
	uint8_t bit;

	if (space == BUS_PIO) {
		bit = (uint8_t)(1u << (addr & 7));
		if (atomic_fetch_or(&port_logged[(addr & 0xffff) / 8], bit) & bit)
			return;
		vmm_warn_limited(&port_warn, "guest %s unknown port %#" PRIx64
				 " (%s; logged once per port)", what, addr,
				 result);
	} else {
		vmm_warn_limited(&mmio_warn, "guest %s unknown MMIO address %#"
				 PRIx64 " (%s)", what, addr, result);
	}
}

/* Dispatches one access of @len bytes; unknown reads return all-ones. */
void bus_access(struct vcpu *v, enum bus_space space, uint64_t addr,
		uint8_t *data, unsigned int len, bool is_write)
{
	for (unsigned int i = 0; i < nregions[space]; i++) {
		struct bus_region *r = &regions[space][i];

		if (addr >= r->base && addr - r->base < r->len) {
			r->fn(v, addr - r->base, data, len, is_write, r->opaque);
			return;
		}
	}
	if (!is_write)
		memset(data, 0xff, len);
	bus_unknown(space, addr, is_write);
}
