/* SPDX-License-Identifier: GPL-2.0-only */
/* VT-d: its registers, DMA remapping through tables in a fake RAM, fault
 * recording, queued invalidation and interrupt remapping. */
#include <check.h>
#include <string.h>

#include "machine/bus.h"
#include "machine/devices/intel_iommu.h"
#include "machine/irq.h"
#include "machine/pci.h"
#include "machine/vcpu.h"
#include "machine/vm.h"

#define RAM_SIZE 0x40000u
#define ROOT 0x1000u
#define CTX 0x2000u
#define PT3 0x3000u
#define PT2 0x4000u
#define PT1 0x5000u
#define IRT 0x6000u
#define IQ 0x7000u
#define SID 0x0008 /* 00:01.0 */

static uint8_t ram[RAM_SIZE];
static struct vtd vtd;
static struct irq_msg sent;
static int nsent;

/* What intel_iommu.c calls outside its file. */
void *guest_ptr(struct vm *vm, uint64_t gpa, uint64_t len)
{
	(void)vm;
	return gpa + len > RAM_SIZE || gpa + len < gpa ? NULL : ram + gpa;
}

void irq_send(struct vm *vm, struct vcpu *src, const struct irq_msg *m)
{
	(void)vm; (void)src;
	sent = *m;
	nsent++;
}

bool irq_msi_decode(uint64_t addr, uint32_t data, struct irq_msg *m)
{
	*m = (struct irq_msg){
		.dest = (uint32_t)(addr >> APIC_MSI_ADDR_DEST_SHIFT) &
			APIC_XAPIC_ID_MASK,
		.vector = (uint8_t)data };
	return (addr >> APIC_MSI_ADDR_SHIFT) ==
	       APIC_MSI_ADDR_BASE >> APIC_MSI_ADDR_SHIFT;
}

int bus_register(enum bus_space space, uint64_t base, uint64_t len,
		 bus_handler fn, void *opaque)
{
	(void)space; (void)base; (void)len; (void)fn; (void)opaque;
	return 0;
}

void pci_set_dma_translate(pci_dma_translate_fn fn) { (void)fn; }
void irq_set_remap(irq_remap_fn fn) { (void)fn; }

static void put64(uint64_t gpa, uint64_t v) { memcpy(ram + gpa, &v, 8); }

static void wr64(unsigned int off, uint64_t v)
{
	vtd_write32(&vtd, off, (uint32_t)v);
	vtd_write32(&vtd, off + 4, (uint32_t)(v >> 32));
}

static uint64_t rd64(unsigned int off)
{
	return vtd_read32(&vtd, off) |
	       (uint64_t)vtd_read32(&vtd, off + 4) << 32;
}

static void gcmd(uint32_t bit)
{
	vtd_write32(&vtd, VTD_GCMD, vtd_read32(&vtd, VTD_GSTS) | bit);
}

/* Root entry for bus 0, context entry for SID (3-level, FPD as given),
 * IOVA 0x1000 -> 0x9000 read/write and IOVA 0x2000 -> 0xa000 read-only. */
static void map(bool fpd)
{
	put64(ROOT, CTX | 1);
	put64(CTX + SID * 16, PT3 | (fpd ? 2 : 0) | 1);
	put64(CTX + SID * 16 + 8, 1 /* AW 39 */ | (uint64_t)SID << 8);
	put64(PT3, PT2 | 3);
	put64(PT2, PT1 | 3);
	put64(PT1 + 8, 0x9000 | 3);
	put64(PT1 + 16, 0xa000 | 1);
	wr64(VTD_RTADDR, ROOT);
	gcmd(VTD_GCMD_SRTP);
	gcmd(VTD_GCMD_TE);
}

static void setup(void)
{
	memset(ram, 0, sizeof(ram));
	nsent = 0;
	vtd_reset(&vtd, NULL);
}

START_TEST(test_identity_regs)
{
	uint64_t cap = rd64(VTD_CAP), ecap = rd64(VTD_ECAP);

	ck_assert_uint_eq(vtd_read32(&vtd, VTD_VER), 0x10);
	ck_assert_uint_eq(cap >> 8 & 0x1f, 0x2);     /* SAGAW: 39 bits */
	ck_assert_uint_eq(cap >> 16 & 0x3f, 38);     /* MGAW */
	ck_assert_uint_eq(cap >> 34 & 3, 3);         /* 2M and 1G pages */
	ck_assert_uint_eq((cap >> 24 & 0x3ff) * 16, VTD_FRCD);
	ck_assert(ecap & 2);                         /* QI */
	ck_assert(ecap & 8);                         /* IR */
	ck_assert(!(ecap & 16));                     /* no EIM */
	ck_assert_uint_eq((ecap >> 8 & 0x3ff) * 16, VTD_IVA);
	ck_assert_uint_eq(vtd_read32(&vtd, VTD_GSTS), 0);
	ck_assert_uint_eq(vtd_read32(&vtd, VTD_FSTS), 0);
	ck_assert_uint_eq(vtd_read32(&vtd, VTD_FECTL), VTD_FECTL_IM);
}
END_TEST

START_TEST(test_global_command)
{
	wr64(VTD_RTADDR, 0x12345000);
	ck_assert_uint_eq(rd64(VTD_RTADDR), 0x12345000);
	gcmd(VTD_GCMD_SRTP);
	ck_assert(vtd_read32(&vtd, VTD_GSTS) & VTD_GCMD_SRTP);
	ck_assert_uint_eq(vtd.root, 0x12345000);
	wr64(VTD_IRTA, IRT | 0xf);
	gcmd(VTD_GCMD_SIRTP);
	gcmd(VTD_GCMD_QIE);
	gcmd(VTD_GCMD_TE);
	gcmd(VTD_GCMD_IRE);
	ck_assert_uint_eq(vtd_read32(&vtd, VTD_GSTS),
			  VTD_GCMD_SRTP | VTD_GCMD_SIRTP | VTD_GCMD_QIE |
			  VTD_GCMD_TE | VTD_GCMD_IRE);
	vtd_write32(&vtd, VTD_GCMD, VTD_GCMD_SRTP | VTD_GCMD_QIE);
	ck_assert_uint_eq(vtd_read32(&vtd, VTD_GSTS) & VTD_GCMD_TE, 0);
	ck_assert_uint_eq(vtd_read32(&vtd, VTD_GSTS) & VTD_GCMD_IRE, 0);
	/* register-based invalidations complete at once */
	wr64(VTD_CCMD, 1ull << 63 | 1ull << 61);
	ck_assert_uint_eq(rd64(VTD_CCMD) >> 63, 0);
	ck_assert_uint_eq(rd64(VTD_CCMD) >> 59 & 3, 1);
	wr64(VTD_IOTLB, 1ull << 63 | 1ull << 60);
	ck_assert_uint_eq(rd64(VTD_IOTLB) >> 63, 0);
	ck_assert_uint_eq(rd64(VTD_IOTLB) >> 57 & 3, 1);
}
END_TEST

START_TEST(test_dma_passthrough_and_translate)
{
	uint64_t gpa = 0;

	ck_assert_int_eq(vtd_translate(&vtd, SID, 0x1234, 4, true, &gpa), 0);
	ck_assert_uint_eq(gpa, 0x1234); /* TE off */
	map(false);
	ck_assert_int_eq(vtd_translate(&vtd, SID, 0x1234, 4, true, &gpa), 0);
	ck_assert_uint_eq(gpa, 0x9234);
	ck_assert_int_eq(vtd_translate(&vtd, SID, 0x2010, 4, false, &gpa), 0);
	ck_assert_uint_eq(gpa, 0xa010);
	/* a 2 MiB page at level 2 */
	put64(PT2 + 8, 0x00600000 | 1 << 7 | 3);
	ck_assert_int_eq(vtd_translate(&vtd, SID, 0x00212345, 4, false, &gpa), 0);
	ck_assert_uint_eq(gpa, 0x00612345);
	ck_assert_uint_eq(vtd_read32(&vtd, VTD_FSTS), 0);
}
END_TEST

START_TEST(test_dma_faults)
{
	uint64_t gpa = 0;

	map(false);
	/* write to a read-only page */
	ck_assert_int_eq(vtd_translate(&vtd, SID, 0x2010, 4, true, &gpa), -1);
	ck_assert(vtd_read32(&vtd, VTD_FSTS) & VTD_FSTS_PPF);
	ck_assert_uint_eq(rd64(VTD_FRCD), 0x2000);
	ck_assert_uint_eq(vtd_read32(&vtd, VTD_FRCD + 8), SID);
	ck_assert_uint_eq(vtd_read32(&vtd, VTD_FRCD + 12) & 0xff, 0x5);
	ck_assert(vtd_read32(&vtd, VTD_FRCD + 12) >> 31);
	ck_assert(vtd_read32(&vtd, VTD_FECTL) & VTD_FECTL_IP);
	ck_assert_int_eq(nsent, 0); /* masked */
	/* a second fault overflows the one register */
	ck_assert_int_eq(vtd_translate(&vtd, 0x10, 0, 4, false, &gpa), -1);
	ck_assert(vtd_read32(&vtd, VTD_FSTS) & VTD_FSTS_PFO);
	/* clearing F and PFO clears the pending bits */
	vtd_write32(&vtd, VTD_FRCD + 12, 1u << 31);
	vtd_write32(&vtd, VTD_FSTS, VTD_FSTS_PFO);
	ck_assert_uint_eq(vtd_read32(&vtd, VTD_FSTS), 0);
	ck_assert_uint_eq(vtd_read32(&vtd, VTD_FECTL) & VTD_FECTL_IP, 0);
	/* unmasked: the fault event message is sent */
	vtd_write32(&vtd, VTD_FEDATA, 0x55);
	vtd_write32(&vtd, VTD_FEADDR, 0xfee00000u);
	vtd_write32(&vtd, VTD_FECTL, 0);
	ck_assert_int_eq(vtd_translate(&vtd, 0x10, 0, 4, false, &gpa), -1);
	ck_assert_uint_eq(vtd_read32(&vtd, VTD_FRCD + 12) & 0xff, 0x2);
	ck_assert_int_eq(nsent, 1);
	ck_assert_uint_eq(sent.vector, 0x55);
	/* beyond the address width */
	vtd_write32(&vtd, VTD_FRCD + 12, 1u << 31);
	ck_assert_int_eq(vtd_translate(&vtd, SID, 1ull << 39, 4, false, &gpa), -1);
	ck_assert_uint_eq(vtd_read32(&vtd, VTD_FRCD + 12) & 0xff, 0x4);
}
END_TEST

START_TEST(test_fault_disabled)
{
	uint64_t gpa = 0;

	map(true);
	ck_assert_int_eq(vtd_translate(&vtd, SID, 0x3000, 4, false, &gpa), -1);
	ck_assert_uint_eq(vtd_read32(&vtd, VTD_FSTS), 0);
	/* tables outside RAM: a fault, not a crash */
	wr64(VTD_RTADDR, 0x7ffff000);
	gcmd(VTD_GCMD_SRTP);
	ck_assert_int_eq(vtd_translate(&vtd, SID, 0x1000, 4, false, &gpa), -1);
	ck_assert_uint_eq(vtd_read32(&vtd, VTD_FRCD + 12) & 0xff, 0x8);
}
END_TEST

START_TEST(test_queued_invalidation)
{
	wr64(VTD_IQA, IQ); /* 256 entries */
	gcmd(VTD_GCMD_QIE);
	ck_assert(vtd_read32(&vtd, VTD_GSTS) & VTD_GCMD_QIE);
	/* an IOTLB global invalidation, then a wait with status write and
	 * interrupt flag */
	put64(IQ, 0x2 | 1 << 4);
	put64(IQ + 16, 0x5 | 1 << 5 | 1 << 4 | (uint64_t)0xcafe << 32);
	put64(IQ + 24, 0x8000);
	vtd_write32(&vtd, VTD_IEDATA, 0x66);
	vtd_write32(&vtd, VTD_IEADDR, 0xfee00000u);
	vtd_write32(&vtd, VTD_IECTL, 0);
	wr64(VTD_IQT, 2 << 4);
	ck_assert_uint_eq(rd64(VTD_IQH), 2 << 4);
	ck_assert_uint_eq(*(uint32_t *)(ram + 0x8000), 0xcafe);
	ck_assert_uint_eq(vtd_read32(&vtd, VTD_ICS), 1);
	ck_assert_int_eq(nsent, 1);
	ck_assert_uint_eq(sent.vector, 0x66);
	vtd_write32(&vtd, VTD_ICS, 1);
	ck_assert_uint_eq(vtd_read32(&vtd, VTD_ICS), 0);
	/* an invalid descriptor stops the queue with IQE */
	put64(IQ + 32, 0xf);
	wr64(VTD_IQT, 3 << 4);
	ck_assert(vtd_read32(&vtd, VTD_FSTS) & VTD_FSTS_IQE);
	ck_assert_uint_eq(rd64(VTD_IQH), 2 << 4);
	/* QI stays on while the queue is not empty */
	vtd_write32(&vtd, VTD_GCMD, 0);
	ck_assert(vtd_read32(&vtd, VTD_GSTS) & VTD_GCMD_QIE);
}
END_TEST

/* IRTE @index: fixed, physical destination @dest (xAPIC: bits 47:40),
 * @vector, full source-id check against @sid. */
static void irte(unsigned int index, uint8_t vector, uint8_t dest,
		 uint16_t sid)
{
	put64(IRT + index * 16, 1 | (uint64_t)vector << 16 |
				(uint64_t)dest << 40);
	put64(IRT + index * 16 + 8, sid | 1ull << 18);
}

START_TEST(test_interrupt_remapping)
{
	struct irq_msg m;

	/* off: everything passes as compatibility format */
	ck_assert_int_eq(vtd_remap(&vtd, 0xfee00000u, 0x30, SID, &m), 1);
	wr64(VTD_IRTA, IRT | 3); /* 16 entries */
	gcmd(VTD_GCMD_SIRTP);
	gcmd(VTD_GCMD_IRE);
	irte(2, 0xee, 3, SID);
	/* remappable format, handle 2 */
	ck_assert_int_eq(vtd_remap(&vtd, 0xfee00000u | 2 << 5 | 1 << 4, 0,
				   SID, &m), 0);
	ck_assert_uint_eq(m.vector, 0xee);
	ck_assert_uint_eq(m.dest, 3);
	ck_assert(!m.logical);
	ck_assert_uint_eq(m.mode, 0);
	/* subhandle added with SHV */
	ck_assert_int_eq(vtd_remap(&vtd, 0xfee00000u | 1 << 5 | 1 << 4 | 1 << 3,
				   1, SID, &m), 0);
	ck_assert_uint_eq(m.vector, 0xee);
	/* wrong requester */
	ck_assert_int_eq(vtd_remap(&vtd, 0xfee00000u | 2 << 5 | 1 << 4, 0,
				   0x10, &m), -1);
	ck_assert_uint_eq(vtd_read32(&vtd, VTD_FRCD + 12) & 0xff, 0x26);
	ck_assert_uint_eq(rd64(VTD_FRCD) >> 48, 2);
	vtd_write32(&vtd, VTD_FRCD + 12, 1u << 31);
	/* not present; beyond the table */
	ck_assert_int_eq(vtd_remap(&vtd, 0xfee00000u | 5 << 5 | 1 << 4, 0,
				   SID, &m), -1);
	ck_assert_uint_eq(vtd_read32(&vtd, VTD_FRCD + 12) & 0xff, 0x22);
	vtd_write32(&vtd, VTD_FRCD + 12, 1u << 31);
	ck_assert_int_eq(vtd_remap(&vtd, 0xfee00000u | 16 << 5 | 1 << 4, 0,
				   SID, &m), -1);
	ck_assert_uint_eq(vtd_read32(&vtd, VTD_FRCD + 12) & 0xff, 0x21);
	vtd_write32(&vtd, VTD_FRCD + 12, 1u << 31);
	/* compatibility format: blocked unless CFI */
	ck_assert_int_eq(vtd_remap(&vtd, 0xfee00000u, 0x30, SID, &m), -1);
	ck_assert_uint_eq(vtd_read32(&vtd, VTD_FRCD + 12) & 0xff, 0x25);
	gcmd(VTD_GCMD_CFI);
	ck_assert_int_eq(vtd_remap(&vtd, 0xfee00000u, 0x30, SID, &m), 1);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("intel_iommu");
	TCase *tc = tcase_create("intel_iommu");
	SRunner *sr;
	int failed;

	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_test(tc, test_identity_regs);
	tcase_add_test(tc, test_global_command);
	tcase_add_test(tc, test_dma_passthrough_and_translate);
	tcase_add_test(tc, test_dma_faults);
	tcase_add_test(tc, test_fault_disabled);
	tcase_add_test(tc, test_queued_invalidation);
	tcase_add_test(tc, test_interrupt_remapping);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_ENV);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
