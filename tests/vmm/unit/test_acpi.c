/* SPDX-License-Identifier: GPL-2.0-only */
/* The ACPI tables as a guest finds them: the RSDP by its signature in the
 * BIOS area, the tables from the RSDT and the XSDT, every checksum, the
 * FADT's blocks, the FACS, the DSDT's sleep packages, the MADT's
 * entries for N vCPUs, and the DMAR with --device intel-iommu. */
#include <check.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "machine/acpi.h"
#include "machine/vm.h"

#define RAM_SIZE (2u << 20)

static uint8_t *ram;
static struct vm vm;
static struct machine_config cfg;
static int failures;

/* What acpi.c calls outside its file. */
void *guest_ptr(struct vm *v, uint64_t gpa, uint64_t len)
{
	return gpa + len <= v->ram_low ? v->ram + gpa : NULL;
}
int vmm_fail(int status, const char *fmt, ...)
{
	(void)status; (void)fmt;
	failures++;
	return -1;
}

static uint32_t get32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static uint64_t get64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return v; }
static uint16_t get16(const uint8_t *p) { uint16_t v; memcpy(&v, p, 2); return v; }

static uint8_t sum(const uint8_t *p, size_t n)
{
	uint8_t s = 0;

	while (n--)
		s = (uint8_t)(s + *p++);
	return s;
}

/* The tables for @ncpus vCPUs, with the IOMMU when @iommu; @with_cfg
 * false: no machine config at all (vm->cfg NULL). */
static void build_with(unsigned int ncpus, bool with_cfg, bool iommu)
{
	ram = calloc(1, RAM_SIZE);
	memset(ram + ACPI_AREA_BASE, 0xa5, ACPI_AREA_END - ACPI_AREA_BASE);
	cfg = (struct machine_config){ .ncpus = ncpus, .intel_iommu = iommu };
	vm = (struct vm){ .ram = ram, .ram_low = RAM_SIZE,
			  .ram_size = RAM_SIZE, .ncpus = ncpus,
			  .cfg = with_cfg ? &cfg : NULL };
	failures = 0;
	ck_assert_int_eq(acpi_tables_build(&vm), 0);
	ck_assert_int_eq(failures, 0);
}

static void build(unsigned int ncpus)
{
	build_with(ncpus, false, false);
}

/* The RSDP as the guest's scan finds it. */
static const uint8_t *find_rsdp(void)
{
	for (uint32_t a = 0xe0000; a < 0x100000; a += 16)
		if (!memcmp(ram + a, "RSD PTR ", 8))
			return ram + a;
	return NULL;
}

/* The number of tables the XSDT lists. */
static unsigned int nr_tables(void)
{
	return (get32(ram + get64(find_rsdp() + 24) + 4) - 36) / 8;
}

/* A table through the XSDT (and the same through the RSDT). */
static const uint8_t *find_table(const char *sig)
{
	const uint8_t *rsdp = find_rsdp();
	const uint8_t *rsdt = ram + get32(rsdp + 16);
	const uint8_t *xsdt = ram + get64(rsdp + 24);
	const uint8_t *found = NULL;
	unsigned int n = (get32(xsdt + 4) - 36) / 8;

	ck_assert_uint_eq((get32(rsdt + 4) - 36) / 4, n);
	for (unsigned int i = 0; i < n; i++) {
		uint64_t x = get64(xsdt + 36 + 8 * i);

		ck_assert_uint_eq(get32(rsdt + 36 + 4 * i), x);
		if (!memcmp(ram + x, sig, 4))
			found = ram + x;
	}
	return found;
}

START_TEST(test_rsdp)
{
	const uint8_t *p;

	build(1);
	p = find_rsdp();
	ck_assert_ptr_nonnull(p);
	ck_assert_uint_eq((uintptr_t)(p - ram) % 16, 0);
	ck_assert_uint_eq(p[15], 2);
	ck_assert_uint_eq(sum(p, 20), 0);
	ck_assert_uint_eq(get32(p + 20), 36);
	ck_assert_uint_eq(sum(p, 36), 0);
	ck_assert_mem_eq(ram + get32(p + 16), "RSDT", 4);
	ck_assert_mem_eq(ram + get64(p + 24), "XSDT", 4);
	free(ram);
}
END_TEST

START_TEST(test_checksums)
{
	static const char *const sigs[] = { "RSDT", "XSDT" };
	const uint8_t *rsdp, *t;

	build(2);
	rsdp = find_rsdp();
	for (unsigned int i = 0; i < 2; i++) {
		t = ram + (i ? get64(rsdp + 24) : get32(rsdp + 16));
		ck_assert_mem_eq(t, sigs[i], 4);
		ck_assert_uint_eq(sum(t, get32(t + 4)), 0);
	}
	t = find_table("FACP");
	ck_assert_ptr_nonnull(t);
	ck_assert_uint_eq(sum(t, get32(t + 4)), 0);
	ck_assert_uint_eq(sum(ram + get32(t + 40), get32(ram + get32(t + 40) + 4)),
			  0);
	t = find_table("APIC");
	ck_assert_ptr_nonnull(t);
	ck_assert_uint_eq(sum(t, get32(t + 4)), 0);
	/* every table inside the reserved area */
	ck_assert_uint_ge(t - ram, ACPI_AREA_BASE);
	ck_assert_uint_le(t - ram + get32(t + 4), ACPI_AREA_END);
	free(ram);
}
END_TEST

START_TEST(test_fadt_facs_dsdt)
{
	const uint8_t *f, *facs, *dsdt;
	static const uint8_t s3[] = { 0x08, '\\', '_', 'S', '3', '_', 0x12,
				      0x06, 0x04, ACPI_SLP_TYP_S3 };
	static const uint8_t s5[] = { 0x08, '\\', '_', 'S', '5', '_', 0x12,
				      0x06, 0x04, ACPI_SLP_TYP_S5 };

	build(1);
	f = find_table("FACP");
	ck_assert_uint_eq(get32(f + 4), 276);
	ck_assert_uint_eq(get16(f + 46), 9);        /* SCI_INT */
	ck_assert_uint_eq(get32(f + 56), 0x600);    /* PM1a_EVT_BLK */
	ck_assert_uint_eq(get32(f + 64), 0x604);    /* PM1a_CNT_BLK */
	ck_assert_uint_eq(get32(f + 76), 0x608);    /* PM_TMR_BLK */
	ck_assert_uint_eq(f[88], 4);
	ck_assert_uint_eq(f[89], 2);
	ck_assert_uint_eq(f[91], 4);
	ck_assert_uint_eq(get32(f + 112) & (1u << 8), 1u << 8); /* TMR_VAL_EXT */
	ck_assert_uint_eq(get64(f + 148 + 4), 0x600); /* X_PM1a_EVT_BLK */
	ck_assert_uint_eq(f[148], 1);                 /* system I/O */
	ck_assert_uint_eq(get64(f + 172 + 4), 0x604);
	ck_assert_uint_eq(get64(f + 208 + 4), 0x608);
	ck_assert_uint_eq(f[208 + 1], 32);
	ck_assert_uint_eq(get64(f + 140), get32(f + 40)); /* X_DSDT */

	ck_assert_uint_eq(get32(f + 36) % 64, 0);
	facs = ram + get32(f + 36);
	ck_assert_mem_eq(facs, "FACS", 4);
	ck_assert_uint_eq(get32(facs + 4), 64);
	ck_assert_uint_eq(get32(facs + 12), 0); /* waking vector: the OS's */
	ck_assert_uint_eq(get64(facs + 24), 0);
	ck_assert_uint_eq(get32(f + 36), ACPI_FACS_ADDR);

	dsdt = ram + get32(f + 40);
	ck_assert_mem_eq(dsdt, "DSDT", 4);
	ck_assert_uint_eq(sum(dsdt, get32(dsdt + 4)), 0);
	ck_assert_ptr_nonnull(memmem(dsdt + 36, get32(dsdt + 4) - 36, s3,
				     sizeof(s3)));
	ck_assert_ptr_nonnull(memmem(dsdt + 36, get32(dsdt + 4) - 36, s5,
				     sizeof(s5)));
	free(ram);
}
END_TEST

/* Counts the MADT's entries of each type for @ncpus vCPUs and checks
 * what each says. */
static void check_madt(unsigned int ncpus)
{
	const uint8_t *m, *e, *end;
	unsigned int count[16] = { 0 }, next_id = 0;
	bool iso0 = false, iso9 = false;

	build(ncpus);
	m = find_table("APIC");
	ck_assert_uint_eq(get32(m + 36), 0xfee00000u);
	ck_assert_uint_eq(get32(m + 40) & 1, 1); /* PCAT_COMPAT */
	end = m + get32(m + 4);
	for (e = m + 44; e < end; e += e[1]) {
		ck_assert_uint_ge(e[1], 2);
		ck_assert_uint_lt(e[0], 16);
		count[e[0]]++;
		switch (e[0]) {
		case 0: /* local APIC, in ID order */
			ck_assert_uint_eq(e[3], next_id++);
			ck_assert_uint_eq(get32(e + 4) & 1, 1);
			break;
		case 9:
			ck_assert_uint_eq(get32(e + 4), next_id++);
			ck_assert_uint_eq(get32(e + 8) & 1, 1);
			break;
		case 1:
			ck_assert_uint_eq(get32(e + 4), 0xfec00000u);
			ck_assert_uint_eq(get32(e + 8), 0);
			break;
		case 2:
			if (e[3] == 0 && get32(e + 4) == 2)
				iso0 = true;
			if (e[3] == 9 && get32(e + 4) == 9 &&
			    get16(e + 8) == 0xd)
				iso9 = true;
			break;
		case 4:
			ck_assert_uint_eq(e[2], 0xff);
			ck_assert_uint_eq(e[5], 1); /* LINT1 */
			break;
		}
	}
	ck_assert_ptr_eq(e, end);
	ck_assert_uint_eq(next_id, ncpus);
	ck_assert_uint_eq(count[0], ncpus < 255 ? ncpus : 255);
	ck_assert_uint_eq(count[9], ncpus > 255 ? ncpus - 255 : 0);
	ck_assert_uint_eq(count[1], 1);
	ck_assert_uint_eq(count[4], 1);
	ck_assert_uint_eq(count[10], ncpus > 255 ? 1 : 0);
	ck_assert(iso0);
	ck_assert(iso9);
	free(ram);
}

START_TEST(test_madt)
{
	check_madt(1);
	check_madt(4);
	check_madt(64);
	check_madt(255);
	check_madt(1024);
}
END_TEST

/* The table at @t lies inside the reserved area. */
static void check_in_area(const uint8_t *t)
{
	ck_assert_uint_ge(t - ram, ACPI_AREA_BASE);
	ck_assert_uint_le(t - ram + get32(t + 4), ACPI_AREA_END);
}

START_TEST(test_no_dmar_without_iommu)
{
	build(1); /* no config */
	ck_assert_ptr_null(find_table("DMAR"));
	ck_assert_uint_eq(nr_tables(), 2);
	free(ram);
	build_with(4, true, false);
	ck_assert_ptr_null(find_table("DMAR"));
	ck_assert_uint_eq(nr_tables(), 2);
	free(ram);
}
END_TEST

/* The DMAR of the 39-bit, xAPIC-mode VT-d unit at 0xfed90000 for
 * @ncpus vCPUs: header, DRHD and the IOAPIC's scope. */
static void check_dmar(unsigned int ncpus)
{
	const uint8_t *d, *u, *sc, *m, *e;
	int ioapic_id = -1;

	build_with(ncpus, true, true);
	ck_assert_uint_eq(nr_tables(), 3);
	d = find_table("DMAR");
	ck_assert_ptr_nonnull(d);
	check_in_area(d);
	check_in_area(find_table("APIC"));
	check_in_area(ram + get32(find_rsdp() + 16));
	check_in_area(ram + get64(find_rsdp() + 24));
	ck_assert_uint_eq(get32(d + 4), 36 + 12 + 16 + 8);
	ck_assert_uint_eq(d[8], 1); /* revision */
	ck_assert_uint_eq(sum(d, get32(d + 4)), 0);
	ck_assert_uint_eq(d[36], 38); /* host address width - 1 */
	ck_assert_uint_eq(d[37], 1);  /* INTR_REMAP, no X2APIC_OPT_OUT */
	for (unsigned int i = 38; i < 48; i++)
		ck_assert_uint_eq(d[i], 0);

	u = d + 48; /* the DRHD */
	ck_assert_uint_eq(get16(u), 0);
	ck_assert_uint_eq(get16(u + 2), 16 + 8);
	ck_assert_uint_eq(u[4], 1); /* INCLUDE_PCI_ALL */
	ck_assert_uint_eq(get16(u + 6), 0); /* segment */
	ck_assert_uint_eq(get64(u + 8), 0xfed90000u);

	m = find_table("APIC"); /* the IOAPIC's ID as the MADT gives it */
	for (e = m + 44; e < m + get32(m + 4); e += e[1])
		if (e[0] == 1)
			ioapic_id = e[2];
	sc = u + 16; /* its device scope */
	ck_assert_uint_eq(sc[0], 3); /* IOAPIC */
	ck_assert_uint_eq(sc[1], 8);
	ck_assert_int_eq(sc[4], ioapic_id);
	ck_assert_uint_eq(sc[5], 0xff); /* start bus */
	ck_assert_uint_eq(sc[6], 0);    /* device */
	ck_assert_uint_eq(sc[7], 0);    /* function */
	ck_assert_ptr_eq(sc + 8, d + get32(d + 4));
	free(ram);
}

START_TEST(test_dmar)
{
	check_dmar(1);
	check_dmar(255);
	check_dmar(1024); /* the largest MADT still fits with the DMAR */
}
END_TEST

START_TEST(test_outgrown)
{
	ram = calloc(1, RAM_SIZE);
	cfg = (struct machine_config){ .intel_iommu = true };
	vm = (struct vm){ .ram = ram, .ram_low = RAM_SIZE,
			  .ram_size = RAM_SIZE, .ncpus = 16 * 1024,
			  .cfg = &cfg };
	failures = 0;
	ck_assert_int_eq(acpi_tables_build(&vm), -1);
	ck_assert_int_eq(failures, 1);
	free(ram);
}
END_TEST

START_TEST(test_ram_too_small)
{
	ram = calloc(1, RAM_SIZE);
	vm = (struct vm){ .ram = ram, .ram_low = 0xe0100, .ram_size = 0xe0100,
			  .ncpus = 1 };
	failures = 0;
	ck_assert_int_eq(acpi_tables_build(&vm), -1);
	ck_assert_int_eq(failures, 1);
	free(ram);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("acpi");
	TCase *tc = tcase_create("acpi");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, test_rsdp);
	tcase_add_test(tc, test_checksums);
	tcase_add_test(tc, test_fadt_facs_dsdt);
	tcase_add_test(tc, test_madt);
	tcase_add_test(tc, test_no_dmar_without_iommu);
	tcase_add_test(tc, test_dmar);
	tcase_add_test(tc, test_outgrown);
	tcase_add_test(tc, test_ram_too_small);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_ENV);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
