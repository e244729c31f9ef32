/* SPDX-License-Identifier: GPL-2.0-only */
/* The port and MMIO bus (bus.c): one table per address space, filled
 * before any vCPU runs. */
#ifndef VMM_MACHINE_BUS_H
#define VMM_MACHINE_BUS_H

#include <stdbool.h>
#include <stdint.h>

struct vcpu;

enum bus_space { BUS_PIO, BUS_MMIO };
typedef void (*bus_handler)(struct vcpu *v, uint64_t off, uint8_t *data,
			    unsigned int len, bool is_write, void *opaque);
/* Setup time, before any vCPU thread starts (the table is then read
 * without a lock). */
int bus_register(enum bus_space space, uint64_t base, uint64_t len,
		 bus_handler fn, void *opaque);
/* @v's thread: one access of @len bytes; unknown reads return all-ones. */
void bus_access(struct vcpu *v, enum bus_space space, uint64_t addr,
		uint8_t *data, unsigned int len, bool is_write);

#endif
