/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The ACPI tables (ACPI 6.x, chapter 5), written into the BIOS read-only
 * area at load time: RSDP -> RSDT and XSDT -> FADT (-> FACS, DSDT), MADT
 * and, with --device intel-iommu, the DMAR (VT-d spec, chapter 8). The OEM
 * fields name the VMM; every table with a checksum has it right.
 */
#include <string.h>

#include <sysidle/guest_abi.h>

#include "base/error.h"
#include "machine/acpi.h"
#include "machine/devices/intel_iommu.h"
#include "machine/vm.h"

#define ACPI_HDR_LEN 36
#define FADT_LEN 276
#define FACS_LEN 64
#define FADT_MAJOR 6
#define FADT_MINOR 5

/* FADT flags (5.2.9, table 5.10) */
#define FADT_F_WBINVD (1u << 0)
#define FADT_F_PROC_C1 (1u << 2)
#define FADT_F_PWR_BUTTON (1u << 4) /* no fixed-feature power button */
#define FADT_F_SLP_BUTTON (1u << 5) /* no fixed-feature sleep button */
#define FADT_F_TMR_VAL_EXT (1u << 8)
#define FADT_BOOT_LEGACY_DEVICES (1u << 0)

/* MADT (5.2.12) */
#define MADT_PCAT_COMPAT 1u
#define MADT_LAPIC 0
#define MADT_IOAPIC 1
#define MADT_ISO 2
#define MADT_LAPIC_NMI 4
#define MADT_X2APIC 9
#define MADT_X2APIC_NMI 10
#define MPS_ACTIVE_HIGH 0x1
#define MPS_LEVEL 0xc
#define ACPI_IOAPIC_ID 0 /* the IOAPIC's reset ID */

/* DMAR (VT-d 8.1, 8.3, 8.3.1): one DRHD with the IOAPIC's device scope. */
#define DMAR_LEN (ACPI_HDR_LEN + 12 + DRHD_LEN)
#define DRHD_LEN (16 + DMAR_SCOPE_LEN)
#define DMAR_SCOPE_LEN (6 + 2) /* one (device, function) path entry */
#define DMAR_INTR_REMAP (1u << 0)
#define DMAR_DRHD 0
#define DRHD_INCLUDE_PCI_ALL (1u << 0)
#define DMAR_SCOPE_IOAPIC 3

#define GAS_SYSTEM_IO 1

/* A cursor over the area: each table is placed after the previous one. */
struct acpi_builder {
	struct vm *vm;
	uint32_t next; /* guest physical address */
	bool full;     /* a table did not fit: one of the two below */
	bool outgrown; /* past ACPI_AREA_END */
	bool no_ram;   /* not backed by RAM (--mem too small) */
};

static void put8(uint8_t *p, unsigned int off, uint8_t v) { p[off] = v; }
static void put16(uint8_t *p, unsigned int off, uint16_t v)
{
	memcpy(p + off, &v, 2);
}
static void put32(uint8_t *p, unsigned int off, uint32_t v)
{
	memcpy(p + off, &v, 4);
}
static void put64(uint8_t *p, unsigned int off, uint64_t v)
{
	memcpy(p + off, &v, 8);
}

static uint8_t checksum(const uint8_t *p, size_t len)
{
	uint8_t sum = 0;

	while (len--)
		sum = (uint8_t)(sum + *p++);
	return (uint8_t)-sum;
}

/* Zeroed room for @len bytes at an @align-aligned address; NULL (and
 * b->full, with the reason) when the area or the RAM behind it is too
 * small. */
static uint8_t *acpi_alloc(struct acpi_builder *b, uint32_t len,
			   uint32_t align, uint32_t *gpa)
{
	uint32_t at = (b->next + align - 1) & ~(align - 1);
	uint8_t *p = NULL;

	if (b->full)
		return NULL;
	if ((uint64_t)at + len > ACPI_AREA_END)
		b->outgrown = true;
	else if (!(p = guest_ptr(b->vm, at, len)))
		b->no_ram = true;
	if (!p) {
		b->full = true;
		return NULL;
	}
	memset(p, 0, len);
	b->next = at + len;
	*gpa = at;
	return p;
}

/* The common header (5.2.6); the checksum is set by acpi_finish. */
static void acpi_header(uint8_t *p, const char *sig, uint32_t len,
			uint8_t rev)
{
	memcpy(p, sig, 4);
	put32(p, 4, len);
	put8(p, 8, rev);
	memcpy(p + 10, "SYSIDL", 6);
	memcpy(p + 16, "SYSIDLVM", 8);
	put32(p, 24, 1);
	memcpy(p + 28, "SIVM", 4);
	put32(p, 32, 1);
}

static void acpi_finish(uint8_t *p, uint32_t len)
{
	p[9] = 0;
	p[9] = checksum(p, len);
}

/* Generic Address Structure (5.2.3.2), a port range. */
static void put_gas_io(uint8_t *p, unsigned int off, uint8_t bits,
		       uint8_t access, uint16_t port)
{
	put8(p, off, GAS_SYSTEM_IO);
	put8(p, off + 1, bits);
	put8(p, off + 2, 0);
	put8(p, off + 3, access);
	put64(p, off + 4, port);
}

/* FACS (5.2.10): no checksum; the OS writes the waking vectors. */
static uint32_t acpi_facs(struct acpi_builder *b)
{
	uint32_t gpa;
	uint8_t *p = acpi_alloc(b, FACS_LEN, 64, &gpa);

	if (!p)
		return 0;
	memcpy(p, "FACS", 4);
	put32(p, 4, FACS_LEN);
	put8(p, 32, 2); /* version */
	return gpa;
}

/*
 * The DSDT: one definition block with the sleep packages the PM1a control
 * block uses: Name (\_S3, Package (4) { SLP_TYPa, SLP_TYPb, 0, 0 }) and
 * the same for \_S5.
 */
static uint32_t acpi_dsdt(struct acpi_builder *b)
{
	static const uint8_t aml[] = {
		0x08, '\\', '_', 'S', '3', '_', /* NameOp \_S3_ */
		0x12, 0x06, 0x04,               /* PackageOp, PkgLength, 4 */
		ACPI_SLP_TYP_S3, ACPI_SLP_TYP_S3, 0x00, 0x00,
		0x08, '\\', '_', 'S', '5', '_',
		0x12, 0x06, 0x04,
		ACPI_SLP_TYP_S5, ACPI_SLP_TYP_S5, 0x00, 0x00,
	};
	uint32_t gpa, len = ACPI_HDR_LEN + sizeof(aml);
	uint8_t *p = acpi_alloc(b, len, 16, &gpa);

	_Static_assert(ACPI_SLP_TYP_S3 <= 1 && ACPI_SLP_TYP_S5 <= 1,
		       "the packages use ZeroOp/OneOp");
	if (!p)
		return 0;
	acpi_header(p, "DSDT", len, 2);
	memcpy(p + ACPI_HDR_LEN, aml, sizeof(aml));
	acpi_finish(p, len);
	return gpa;
}

/*
 * FADT (5.2.9). X_FIRMWARE_CTRL stays 0: the spec has FIRMWARE_CTRL be
 * zero when it is set, and the FACS is below 4 GiB.
 */
static uint32_t acpi_fadt(struct acpi_builder *b, uint32_t facs,
			  uint32_t dsdt)
{
	uint32_t gpa;
	uint8_t *p = acpi_alloc(b, FADT_LEN, 16, &gpa);

	if (!p)
		return 0;
	acpi_header(p, "FACP", FADT_LEN, FADT_MAJOR);
	put32(p, 36, facs);
	put32(p, 40, dsdt);
	put16(p, 46, ACPI_SCI_IRQ);
	/* SMI_CMD 0: no legacy mode, the OS finds SCI_EN already set. */
	put32(p, 56, ACPI_PM_BASE + ACPI_PM1_EVT);
	put32(p, 64, ACPI_PM_BASE + ACPI_PM1_CNT);
	put32(p, 76, ACPI_PM_BASE + ACPI_PM_TMR);
	put8(p, 88, 4); /* PM1_EVT_LEN */
	put8(p, 89, 2); /* PM1_CNT_LEN */
	put8(p, 91, 4); /* PM_TMR_LEN */
	put16(p, 96, 101);  /* P_LVL2_LAT > 100: no C2 */
	put16(p, 98, 1001); /* P_LVL3_LAT > 1000: no C3 */
	put8(p, 108, 0x32); /* CENTURY: the RTC's century register */
	put16(p, 109, FADT_BOOT_LEGACY_DEVICES);
	put32(p, 112, FADT_F_WBINVD | FADT_F_PROC_C1 | FADT_F_PWR_BUTTON |
		      FADT_F_SLP_BUTTON |
		      (ACPI_PM_TMR_BITS == 32 ? FADT_F_TMR_VAL_EXT : 0));
	put8(p, 131, FADT_MINOR);
	put64(p, 140, dsdt); /* X_DSDT */
	put_gas_io(p, 148, 32, 2, ACPI_PM_BASE + ACPI_PM1_EVT);
	put_gas_io(p, 172, 16, 2, ACPI_PM_BASE + ACPI_PM1_CNT);
	put_gas_io(p, 208, 32, 3, ACPI_PM_BASE + ACPI_PM_TMR);
	acpi_finish(p, FADT_LEN);
	return gpa;
}

/* MADT length for @ncpus: xAPIC entries for APIC IDs below 255, x2APIC
 * entries (and an x2APIC NMI entry) for the others. */
static uint32_t madt_len(unsigned int ncpus)
{
	unsigned int x2 = ncpus > 255 ? ncpus - 255 : 0;

	return ACPI_HDR_LEN + 8 + (ncpus - x2) * 8 + x2 * 16 + 12 +
	       2 * 10 + 6 + (x2 ? 12 : 0);
}

/* MADT (5.2.12): local APIC i has APIC ID i, as lapic_reset sets it. */
static uint32_t acpi_madt(struct acpi_builder *b, unsigned int ncpus)
{
	uint32_t gpa, len = madt_len(ncpus), o = ACPI_HDR_LEN + 8;
	uint8_t *p = acpi_alloc(b, len, 16, &gpa);
	bool x2 = false;

	if (!p)
		return 0;
	acpi_header(p, "APIC", len, 5);
	put32(p, 36, GUEST_LAPIC_BASE);
	put32(p, 40, MADT_PCAT_COMPAT);
	for (unsigned int i = 0; i < ncpus; i++) {
		if (i < 255) {
			put8(p, o, MADT_LAPIC);
			put8(p, o + 1, 8);
			put8(p, o + 2, (uint8_t)i); /* processor UID */
			put8(p, o + 3, (uint8_t)i); /* APIC ID */
			put32(p, o + 4, 1);         /* enabled */
			o += 8;
		} else {
			put8(p, o, MADT_X2APIC);
			put8(p, o + 1, 16);
			put32(p, o + 4, i); /* x2APIC ID */
			put32(p, o + 8, 1);
			put32(p, o + 12, i); /* UID */
			o += 16;
			x2 = true;
		}
	}
	put8(p, o, MADT_IOAPIC);
	put8(p, o + 1, 12);
	put8(p, o + 2, ACPI_IOAPIC_ID);
	put32(p, o + 4, GUEST_IOAPIC_BASE);
	put32(p, o + 8, 0); /* GSI base */
	o += 12;
	/* ISA IRQ 0 (the PIT) is GSI 2; the SCI is level, active high. */
	put8(p, o, MADT_ISO);
	put8(p, o + 1, 10);
	put32(p, o + 4, 2);
	o += 10;
	put8(p, o, MADT_ISO);
	put8(p, o + 1, 10);
	put8(p, o + 3, ACPI_SCI_IRQ);
	put32(p, o + 4, ACPI_SCI_IRQ);
	put16(p, o + 8, MPS_ACTIVE_HIGH | MPS_LEVEL);
	o += 10;
	/* LINT1 of every processor is NMI. */
	put8(p, o, MADT_LAPIC_NMI);
	put8(p, o + 1, 6);
	put8(p, o + 2, 0xff);
	put8(p, o + 5, 1);
	o += 6;
	if (x2) {
		put8(p, o, MADT_X2APIC_NMI);
		put8(p, o + 1, 12);
		put32(p, o + 4, 0xffffffffu);
		put8(p, o + 8, 1);
		o += 12;
	}
	acpi_finish(p, len);
	return gpa;
}

/*
 * DMAR: the remapping hardware of --device intel-iommu. Host address
 * width VTD_AW - 1 (as CAP.MGAW encodes it); INTR_REMAP and no
 * X2APIC_OPT_OUT: ECAP.EIM clear already tells the OS that remapped
 * interrupts are xAPIC-format, and the opt-out would keep it from using
 * x2APIC at all (vCPUs past APIC ID 254 included). One DRHD, segment 0,
 * INCLUDE_PCI_ALL, whose only device scope is the IOAPIC (an OS enables
 * interrupt remapping only when every IOAPIC is under a unit). Caller:
 * acpi_tables_build, only when the device is configured.
 */
static uint32_t acpi_dmar(struct acpi_builder *b)
{
	uint32_t gpa, o = ACPI_HDR_LEN + 12;
	uint8_t *p = acpi_alloc(b, DMAR_LEN, 16, &gpa);

	if (!p)
		return 0;
	acpi_header(p, "DMAR", DMAR_LEN, 1);
	put8(p, ACPI_HDR_LEN, VTD_AW - 1);
	put8(p, ACPI_HDR_LEN + 1, DMAR_INTR_REMAP);
	put16(p, o, DMAR_DRHD);
	put16(p, o + 2, DRHD_LEN);
	put8(p, o + 4, DRHD_INCLUDE_PCI_ALL);
	put16(p, o + 6, 0); /* segment */
	put64(p, o + 8, VTD_BASE);
	o += 16;
	put8(p, o, DMAR_SCOPE_IOAPIC);
	put8(p, o + 1, DMAR_SCOPE_LEN);
	put8(p, o + 4, ACPI_IOAPIC_ID); /* enumeration ID, as the MADT's */
	put8(p, o + 5, VTD_IOAPIC_SID >> 8);          /* start bus */
	put8(p, o + 6, (VTD_IOAPIC_SID >> 3) & 0x1f); /* device */
	put8(p, o + 7, VTD_IOAPIC_SID & 7);           /* function */
	acpi_finish(p, DMAR_LEN);
	return gpa;
}

/* RSDT (32-bit entries) or XSDT (64-bit entries) listing @tables. */
static uint32_t acpi_sdt(struct acpi_builder *b, bool xsdt,
			 const uint32_t *tables, unsigned int n)
{
	unsigned int esz = xsdt ? 8 : 4;
	uint32_t gpa, len = ACPI_HDR_LEN + n * esz;
	uint8_t *p = acpi_alloc(b, len, 16, &gpa);

	if (!p)
		return 0;
	acpi_header(p, xsdt ? "XSDT" : "RSDT", len, 1);
	for (unsigned int i = 0; i < n; i++) {
		if (xsdt)
			put64(p, ACPI_HDR_LEN + i * 8, tables[i]);
		else
			put32(p, ACPI_HDR_LEN + i * 4, tables[i]);
	}
	acpi_finish(p, len);
	return gpa;
}

/* RSDP (5.2.5.3), revision 2: both checksums. */
static void acpi_rsdp(uint8_t *p, uint32_t rsdt, uint32_t xsdt)
{
	memcpy(p, "RSD PTR ", 8);
	memcpy(p + 9, "SYSIDL", 6);
	put8(p, 15, 2);
	put32(p, 16, rsdt);
	put32(p, 20, 36);
	put64(p, 24, xsdt);
	p[8] = checksum(p, 20);
	p[32] = checksum(p, 36);
}

/* The message for tables that did not fit: b->full is set. */
static int acpi_no_room(const struct acpi_builder *b)
{
	if (b->outgrown)
		return vmm_fail(VMM_EXIT_IMAGE, "the ACPI tables for %u vCPUs "
				"outgrow their area %#x-%#x",
				b->vm->ncpus, ACPI_AREA_BASE, ACPI_AREA_END - 1);
	return vmm_fail(VMM_EXIT_IMAGE, "the ACPI tables do not fit in RAM "
			"at %#x-%#x (--mem too small?)",
			ACPI_AREA_BASE, ACPI_AREA_END - 1);
}

/* See acpi.h. The RSDP and the FACS sit at fixed addresses; the DMAR is
 * there when vm->cfg says --device intel-iommu. */
int acpi_tables_build(struct vm *vm)
{
	struct acpi_builder b = { .vm = vm, .next = ACPI_RSDP_ADDR };
	uint32_t rsdp_gpa, facs, dsdt, tables[3], rsdt, xsdt;
	uint8_t *rsdp = acpi_alloc(&b, 36, 16, &rsdp_gpa);
	unsigned int n = 0;

	facs = acpi_facs(&b);
	dsdt = acpi_dsdt(&b);
	tables[n++] = acpi_fadt(&b, facs, dsdt);
	tables[n++] = acpi_madt(&b, vm->ncpus);
	if (vm->cfg && vm->cfg->intel_iommu)
		tables[n++] = acpi_dmar(&b);
	rsdt = acpi_sdt(&b, false, tables, n);
	xsdt = acpi_sdt(&b, true, tables, n);
	if (b.full)
		return acpi_no_room(&b);
	if (!rsdp || rsdp_gpa != ACPI_RSDP_ADDR || facs != ACPI_FACS_ADDR)
		return vmm_fail(VMM_EXIT_IMAGE, "the ACPI tables' RSDP and "
				"FACS are not at %#x and %#x",
				ACPI_RSDP_ADDR, ACPI_FACS_ADDR);
	acpi_rsdp(rsdp, rsdt, xsdt);
	return 0;
}
