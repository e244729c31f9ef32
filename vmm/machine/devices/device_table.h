/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The VM's devices as one table, in init order: the PC devices every VM
 * has, then the opt-in ones that --device NAME turns on. devices_init()
 * brings them up; the command line takes the opt-in ones' names and help
 * from the table.
 */
#ifndef VMM_MACHINE_DEVICE_TABLE_H
#define VMM_MACHINE_DEVICE_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "machine/vm.h"

struct device_desc {
	const char *name;
	int (*init)(struct vm *vm);  /* registers it on the bus; 0 or -1 */
	bool optional;               /* off unless --device NAME */
	const char *help;            /* --help: what it is and where (lines
				      * after the first start at the help
				      * column) */
};

/* The table: *@n entries, in init order; static storage. */
const struct device_desc *device_table(size_t *n);

/* The index of the opt-in device @name, or -1 if there is none. */
int device_optional_index(const char *name);

/*
 * Brings up every device every VM has, then the opt-in ones whose bit
 * (1 << index in the table) is set in @optional_on, in table order.
 * Call once, after the VM's memory exists and before any vCPU runs.
 * Returns 0, or -1 when one failed (it said why).
 */
int devices_init(struct vm *vm, uint32_t optional_on);

#endif
