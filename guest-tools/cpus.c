// SPDX-License-Identifier: GPL-2.0-only
/*
 * Which CPUs there are and how to address them: the APIC IDs of the MADT's
 * enabled processor entries (acpi.c), as an OS takes them, the BSP first;
 * without an MADT, fw_cfg's CPU count with APIC ID = index. At most
 * MAX_CPUS. In xAPIC mode an APIC's ID is 8 bits, the low 8 of its x2APIC
 * ID (SDM 10.12.5.1, 10.4.6), and 0xff is the broadcast: a CPU whose ID is
 * 255 or more cannot be addressed, and answers for the CPU below 255 whose
 * ID its low 8 bits repeat (an INIT or SIPI to one would start both), so
 * both are left out. Firmware hands such machines over in x2APIC mode.
 */
#include "rt.h"

struct cpu_census cpu_census;

/* The APIC IDs described: the MADT's, or without one 0 .. fw_cfg's - 1. */
static u32 ids[MAX_CPUS];
static u32 nids;

/* In xAPIC mode: id cannot be addressed alone (see above). */
static bool xapic_unaddressable(u32 id)
{
	if (id >= 255)
		return true;
	for (u32 i = 0; i < nids; i++)
		if (ids[i] != id && (ids[i] & 0xff) == id)
			return true;
	return false;
}

/* Add id as the next CPU unless xAPIC cannot reach it or the table is full. */
static void take(u32 id)
{
	if (!apic_x2 && xapic_unaddressable(id)) {
		cpu_census.xapic_unreachable++;
		return;
	}
	if (nr_cpus >= MAX_CPUS) {
		cpu_census.over_limit++;
		return;
	}
	percpus[nr_cpus++].apic_id = id;
	if (id > cpu_census.max_apic_id)
		cpu_census.max_apic_id = id;
}

/* See rt.h. */
void cpus_enumerate(void)
{
	u32 bsp = percpus[0].apic_id, described = 0;
	int n = acpi_cpu_apic_ids(ids, MAX_CPUS, &described);

	cpu_census.fwcfg_cpus = fwcfg_nb_cpus();
	cpu_census.max_apic_id = bsp;
	if (n >= 0) {
		cpu_census.from_madt = true;
		cpu_census.madt_enabled = described;
	} else { /* no MADT: fw_cfg's count, APIC ID = index */
		described = cpu_census.fwcfg_cpus;
		n = described < MAX_CPUS ? (int)described : MAX_CPUS;
		for (int i = 0; i < n; i++)
			ids[i] = (u32)i;
	}
	nids = (u32)n;
	cpu_census.over_limit = described - nids;
	nr_cpus = 1; /* the BSP, percpus[0], whatever the tables say */
	for (u32 i = 0; i < nids; i++)
		if (ids[i] != bsp)
			take(ids[i]);
}
