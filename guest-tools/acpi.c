// SPDX-License-Identifier: GPL-2.0-only
/*
 * The CPUs the firmware describes, from the ACPI MADT (ACPI 6.5, 5.2.12):
 * the RSDP found where 5.2.5.1 says to look (the first KiB of the EBDA,
 * then 0xE0000..0xFFFFF, on 16-byte boundaries, checksum valid), the XSDT
 * (revision 2 and up) or the RSDT, the table signed "APIC", and in it the
 * Processor Local APIC entries (type 0, 8-bit APIC IDs) and the Processor
 * Local x2APIC entries (type 9, 32-bit IDs; firmware uses them for IDs of
 * 255 and up). An entry counts when its Enabled flag is set; one only
 * "online capable" is a CPU that may be hot-added later, not one present.
 * All of it lies below 4 GiB, identity mapped by boot32.S.
 */
#include "rt.h"

#define MADT_TYPE_LAPIC 0
#define MADT_TYPE_X2APIC 9
#define MADT_LAPIC_ENABLED 1u
#define ACPI_HEADER_LEN 36u
#define MADT_ENTRIES_OFF 44u
#define ACPI_BIOS_AREA 0xe0000u
#define ACPI_BIOS_AREA_END 0x100000u
#define EBDA_SEGMENT_PTR 0x40eu

static u32 get32(const u8 *p)
{
	return (u32)p[0] | (u32)p[1] << 8 | (u32)p[2] << 16 | (u32)p[3] << 24;
}

static u64 get64(const u8 *p)
{
	return get32(p) | (u64)get32(p + 4) << 32;
}

static bool sum_is_zero(const u8 *p, u32 len)
{
	u8 s = 0;

	for (u32 i = 0; i < len; i++)
		s += p[i];
	return s == 0;
}

/* A table address the runtime can read: below 4 GiB (identity mapped) and
 * clear of the top GiB's MMIO. */
static const u8 *table_at(u64 addr)
{
	if (addr == 0 || addr >= 0xc0000000ull)
		return NULL;
	return (const u8 *)(uintptr_t)addr;
}

/* The RSDP in [from, to): 16-byte aligned, signature, first 20 bytes sum
 * to zero (and the whole 36 for revision 2 and up). */
static const u8 *rsdp_in(u32 from, u32 to)
{
	for (u32 a = from & ~15u; a + 36 <= to; a += 16) {
		const u8 *p = (const u8 *)(uintptr_t)a;

		if (memcmp(p, "RSD PTR ", 8) || !sum_is_zero(p, 20))
			continue;
		if (p[15] >= 2 && !sum_is_zero(p, get32(p + 20) < 36 ? 36 : get32(p + 20)))
			continue;
		return p;
	}
	return NULL;
}

static const u8 *find_rsdp(void)
{
	const volatile u16 *bda_ebda;
	const u8 *p = NULL;
	u32 ebda;

	/* the address through a register: GCC takes a constant one this low
	 * for a null pointer's neighbourhood and refuses the read */
	__asm__("" : "=r"(bda_ebda) : "0"((uintptr_t)EBDA_SEGMENT_PTR));
	ebda = (u32)*bda_ebda << 4;

	if (ebda >= 0x80000 && ebda < 0xa0000)
		p = rsdp_in(ebda, ebda + 1024);
	return p ? p : rsdp_in(ACPI_BIOS_AREA, ACPI_BIOS_AREA_END);
}

/* A table with a valid header and checksum, or NULL. */
static const u8 *valid_table(u64 addr, const char *sig)
{
	const u8 *t = table_at(addr);

	if (!t || memcmp(t, sig, 4))
		return NULL;
	u32 len = get32(t + 4);

	if (len < ACPI_HEADER_LEN || len > (1u << 20) || !sum_is_zero(t, len))
		return NULL;
	return t;
}

/* The MADT through the XSDT (8-byte entries) or else the RSDT (4-byte). */
static const u8 *find_madt(void)
{
	const u8 *rsdp = find_rsdp(), *sdt;
	u32 width = 8;

	if (!rsdp)
		return NULL;
	sdt = rsdp[15] >= 2 ? valid_table(get64(rsdp + 24), "XSDT") : NULL;
	if (!sdt) {
		sdt = valid_table(get32(rsdp + 16), "RSDT");
		width = 4;
	}
	if (!sdt)
		return NULL;
	for (u32 o = ACPI_HEADER_LEN; o + width <= get32(sdt + 4); o += width) {
		u64 a = width == 8 ? get64(sdt + o) : get32(sdt + o);
		const u8 *t = valid_table(a, "APIC");

		if (t)
			return t;
	}
	return NULL;
}

static bool seen(const u32 *ids, u32 n, u32 id)
{
	for (u32 i = 0; i < n; i++)
		if (ids[i] == id)
			return true;
	return false;
}

/* See rt.h. */
int acpi_cpu_apic_ids(u32 *ids, u32 max, u32 *described)
{
	const u8 *madt = find_madt();
	u32 n = 0, all = 0, len, o;

	if (!madt)
		return -1;
	len = get32(madt + 4);
	for (o = MADT_ENTRIES_OFF; o + 2 <= len; o += madt[o + 1]) {
		u8 type = madt[o], elen = madt[o + 1];
		u32 id, flags;

		if (elen < 2 || o + elen > len)
			break; /* malformed: stop at what was read */
		if (type == MADT_TYPE_LAPIC && elen >= 8) {
			id = madt[o + 3];
			flags = get32(madt + o + 4);
		} else if (type == MADT_TYPE_X2APIC && elen >= 16) {
			id = get32(madt + o + 4);
			flags = get32(madt + o + 8);
		} else {
			continue;
		}
		if (!(flags & MADT_LAPIC_ENABLED) || seen(ids, n < max ? n : max, id))
			continue;
		all++;
		if (n < max)
			ids[n++] = id;
	}
	*described = all;
	return (int)n;
}
