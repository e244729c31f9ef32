// SPDX-License-Identifier: GPL-2.0-only
/*
 * selftest.elf's topology checks: the CPUs the MADT describes against
 * fw_cfg, x2APIC IDs of 255 and up, and x2APIC cluster addressing (SDM
 * 10.12.10.2: the logical ID is derived from the x2APIC ID, bits 31:16 the
 * cluster, ID >> 4, and bits 15:0 one bit per member, 1 << (ID & 0xf)).
 */
#include "selftest.h"

#define VEC_IPI_LOGICAL 0x47

static void h_logical(struct irq_frame *f)
{
	(void)f;
	this_cpu()->cnt_logical++;
}

/* x2APIC logical ID of an x2APIC ID, as the LDR holds it. */
static u32 x2apic_ldr_of(u32 id)
{
	return ((id >> 4) << APIC_LDR_X2APIC_CLUSTER_SHIFT) | (1u << (id & 0xf));
}

/* See selftest.h. */
void check_cpu_census(void)
{
	const struct cpu_census *c = &cpu_census;

	check(c->from_madt, "acpi: MADT found, %u enabled processor entries", c->madt_enabled);
	if (!c->from_madt)
		return;
	check(c->madt_enabled == c->fwcfg_cpus, "acpi: the MADT's %u cpus are fw_cfg's %u",
	      c->madt_enabled, c->fwcfg_cpus);
	check(nr_cpus + c->xapic_unreachable + c->over_limit == c->madt_enabled,
	      "cpus: %u to bring up, %u beyond xAPIC's reach, %u beyond the runtime's %u, "
	      "of %u",
	      nr_cpus, c->xapic_unreachable, c->over_limit, MAX_CPUS, c->madt_enabled);
	if (apic_x2 && c->madt_enabled > 255)
		check(c->max_apic_id >= 255 && c->xapic_unreachable == 0,
		      "cpus: x2APIC IDs up to %u all taken", c->max_apic_id);
	if (!apic_x2 && c->madt_enabled > 255)
		check(c->xapic_unreachable >= c->madt_enabled - 255 && c->max_apic_id < 255,
		      "cpus: in xAPIC mode %u cpus left offline (APIC IDs of 255 and up, and "
		      "those whose 8-bit ID they repeat)",
		      c->xapic_unreachable);
}

/* See selftest.h. */
void check_ldr(u32 cpu)
{
	u32 id = percpus[cpu].apic_id, ldr;

	if (!apic_x2)
		return;
	ldr = apic_read(APIC_REG_LDR);
	check(ldr == x2apic_ldr_of(id), "cpu%u: x2apic ldr 0x%x (cluster %u, member bit %u)", cpu,
	      ldr, id >> 4, id & 0xf);
}

/* See selftest.h. */
void check_logical_ipis(u32 n)
{
	static u32 before[MAX_CPUS];
	u32 clusters = 0, sent_to = 0, cluster_max = 0, wrong = 0;
	bool ok = true;

	if (!apic_x2) {
		printf("# logical ipis: x2APIC cluster mode only, not checked in xAPIC mode\n");
		return;
	}
	irq_set_handler(VEC_IPI_LOGICAL, h_logical);
	irq_enable();
	for (u32 i = 0; i < n; i++)
		before[i] = percpus[i].cnt_logical;
	for (u32 i = 0; i < n; i++) {
		u32 cluster = percpus[i].apic_id >> 4, members = 0;
		bool first = true;

		/* one IPI per cluster, sent when its first member is met */
		for (u32 j = 0; j < i && first; j++)
			first = percpus[j].apic_id >> 4 != cluster;
		if (!first)
			continue;
		for (u32 j = i; j < n; j++)
			if (percpus[j].apic_id >> 4 == cluster)
				members |= 1u << (percpus[j].apic_id & 0xf);
		apic_send_ipi((cluster << APIC_LDR_X2APIC_CLUSTER_SHIFT) | members,
			      APIC_DEST_LOGICAL | APIC_ICR_DM_FIXED | VEC_IPI_LOGICAL);
		for (u32 j = i; j < n; j++)
			if (percpus[j].apic_id >> 4 == cluster) {
				ok &= wait_u32(&percpus[j].cnt_logical, before[j] + 1, SEC);
				sent_to++;
			}
		clusters++;
		if (cluster > cluster_max)
			cluster_max = cluster;
	}
	udelay_tsc(2 * MS); /* a stray second delivery would land by now */
	for (u32 i = 0; i < n; i++)
		wrong += percpus[i].cnt_logical != before[i] + 1;
	check(ok && sent_to == n && wrong == 0,
	      "ipi: logical (x2apic cluster) to %u clusters up to %u reached each of %u cpus once "
	      "(%u wrong)",
	      clusters, cluster_max, n, wrong);
}
