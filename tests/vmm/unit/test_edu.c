/* SPDX-License-Identifier: GPL-2.0-only */
/* QEMU's edu device: its registers, DMA into a fake RAM, INTx and MSI
 * (through the real PCI bus code, with fake IOAPIC and APIC delivery). */
#include <check.h>

#include "machine/devices/edu.h"
#include "pci_fakes.h"

static struct edu edu;

static void setup(void)
{
	pci_init(&fake_vm);
	edu_setup(&edu, 0x18);
	ck_assert_int_eq(pci_register(&edu.pci), 0);
}

static uint64_t rd(uint64_t off, unsigned int len)
{
	uint64_t v = 0;

	edu_mmio(&edu, off, (uint8_t *)&v, len, false);
	return v;
}

static void wr(uint64_t off, uint64_t v, unsigned int len)
{
	edu_mmio(&edu, off, (uint8_t *)&v, len, true);
}

START_TEST(test_identity)
{
	ck_assert_uint_eq(cfg_read(0x18, 0, 4), 0x11e81234u);
	ck_assert_uint_eq(cfg_read(0x18, 0x08, 4) >> 8, 0x00ff00);
	ck_assert_uint_eq(cfg_read(0x18, 0x10, 4) & 0xfffff, 0);
	cfg_write(0x18, 0x10, 0xffffffffu, 4);
	ck_assert_uint_eq(cfg_read(0x18, 0x10, 4), 0xfff00000u); /* 1 MiB */
	ck_assert_uint_eq(rd(EDU_REG_ID, 4), 0x010000edu);
	ck_assert_uint_eq(rd(EDU_REG_ID, 2), 0xffff); /* only dwords */
}
END_TEST

START_TEST(test_liveness)
{
	wr(EDU_REG_ALIVE, 0x12345678u, 4);
	ck_assert_uint_eq(rd(EDU_REG_ALIVE, 4), 0xedcba987u);
	wr(EDU_REG_ALIVE, 0, 4);
	ck_assert_uint_eq(rd(EDU_REG_ALIVE, 4), 0xffffffffu);
}
END_TEST

START_TEST(test_factorial)
{
	wr(EDU_REG_FACTORIAL, 5, 4);
	ck_assert_uint_eq(rd(EDU_REG_STATUS, 4) & 1, 0); /* done */
	ck_assert_uint_eq(rd(EDU_REG_FACTORIAL, 4), 120);
	wr(EDU_REG_FACTORIAL, 12, 4);
	ck_assert_uint_eq(rd(EDU_REG_FACTORIAL, 4), 479001600u);
	ck_assert_uint_eq(rd(EDU_REG_IRQ_STATUS, 4), 0);
	/* with the raise-at-end bit: interrupt status 1, INTx high */
	wr(EDU_REG_STATUS, 0x80, 4);
	ck_assert_uint_eq(rd(EDU_REG_STATUS, 4), 0x80);
	wr(EDU_REG_FACTORIAL, 3, 4);
	ck_assert_uint_eq(rd(EDU_REG_FACTORIAL, 4), 6);
	ck_assert_uint_eq(rd(EDU_REG_IRQ_STATUS, 4), 1);
	ck_assert_int_eq(intx.level, 1);
}
END_TEST

/* n! mod 2^32 at once for any n: 0 from 34 on, where the loop would take
 * up to 2^32 steps inside the MMIO write. */
START_TEST(test_factorial_large)
{
	wr(EDU_REG_FACTORIAL, 33, 4);
	ck_assert_uint_eq(rd(EDU_REG_FACTORIAL, 4), 0x80000000u);
	wr(EDU_REG_FACTORIAL, 34, 4);
	ck_assert_uint_eq(rd(EDU_REG_FACTORIAL, 4), 0);
	wr(EDU_REG_FACTORIAL, 0xffffffffu, 4);
	ck_assert_uint_eq(rd(EDU_REG_FACTORIAL, 4), 0);
	ck_assert_uint_eq(rd(EDU_REG_STATUS, 4) & 1, 0); /* done */
}
END_TEST

START_TEST(test_intx)
{
	int line = (int)cfg_read(0x18, PCI_INTERRUPT_LINE, 1);

	wr(EDU_REG_IRQ_RAISE, 0x30, 4);
	ck_assert_uint_eq(rd(EDU_REG_IRQ_STATUS, 4), 0x30);
	ck_assert_int_eq(intx.pin, line);
	ck_assert_int_eq(intx.level, 1);
	wr(EDU_REG_IRQ_ACK, 0x10, 4);
	ck_assert_int_eq(intx.level, 1);
	wr(EDU_REG_IRQ_ACK, 0x20, 4);
	ck_assert_uint_eq(rd(EDU_REG_IRQ_STATUS, 4), 0);
	ck_assert_int_eq(intx.level, 0);
}
END_TEST

START_TEST(test_msi)
{
	cfg_write(0x18, PCI_COMMAND, PCI_COMMAND_MEMORY | PCI_COMMAND_MASTER, 2);
	cfg_write(0x18, 0x44, 0xfee02000u, 4);
	cfg_write(0x18, 0x4c, 0x0031, 2);
	cfg_write(0x18, 0x42, PCI_MSI_FLAGS_ENABLE, 2);
	wr(EDU_REG_IRQ_RAISE, 1, 4);
	ck_assert_int_eq(msi.count, 1);
	ck_assert_uint_eq(msi.addr, 0xfee02000u);
	ck_assert_uint_eq(msi.data, 0x31);
	ck_assert_uint_eq(msi.sid, 0x18);
	ck_assert_int_ne(intx.level, 1);
	/* every raise is a message, as on the device */
	wr(EDU_REG_IRQ_RAISE, 1, 4);
	ck_assert_int_eq(msi.count, 2);
	wr(EDU_REG_IRQ_ACK, 1, 4);
	ck_assert_int_eq(msi.count, 2);
}
END_TEST

static void dma(uint64_t src, uint64_t dst, uint64_t count, uint64_t cmd)
{
	wr(EDU_REG_DMA_SRC, src, 8);
	wr(EDU_REG_DMA_DST, dst, 8);
	wr(EDU_REG_DMA_COUNT, count, 8);
	wr(EDU_REG_DMA_CMD, cmd, 4);
}

START_TEST(test_dma)
{
	memcpy(fake_ram + 0x2000, "\x78\x56\x34\x12", 4);
	cfg_write(0x18, PCI_COMMAND, PCI_COMMAND_MEMORY | PCI_COMMAND_MASTER, 2);
	dma(0x2000, EDU_DMA_BUF_ADDR + 0x10, 4, 1); /* RAM -> buffer */
	ck_assert_uint_eq(rd(EDU_REG_DMA_CMD, 4) & 1, 0);
	ck_assert_mem_eq(edu.buf + 0x10, "\x78\x56\x34\x12", 4);
	dma(EDU_DMA_BUF_ADDR + 0x10, 0x2004, 4, 3 | 4); /* buffer -> RAM, IRQ */
	ck_assert_mem_eq(fake_ram + 0x2004, "\x78\x56\x34\x12", 4);
	ck_assert_uint_eq(rd(EDU_REG_IRQ_STATUS, 4), 0x100);
	ck_assert_uint_eq(rd(EDU_REG_DMA_SRC, 8), EDU_DMA_BUF_ADDR + 0x10);
	ck_assert_uint_eq(rd(EDU_REG_DMA_COUNT, 8), 4);
}
END_TEST

START_TEST(test_dma_refused)
{
	memset(fake_ram + 0x3000, 0xaa, 16);
	/* no bus mastering: nothing moves, the command still completes */
	cfg_write(0x18, PCI_COMMAND, PCI_COMMAND_MEMORY, 2);
	dma(EDU_DMA_BUF_ADDR, 0x3000, 16, 3);
	ck_assert_uint_eq(fake_ram[0x3000], 0xaa);
	ck_assert_uint_eq(rd(EDU_REG_DMA_CMD, 4) & 1, 0);
	cfg_write(0x18, PCI_COMMAND, PCI_COMMAND_MEMORY | PCI_COMMAND_MASTER, 2);
	/* beyond the 4 KiB buffer, and outside RAM: dropped, no crash */
	dma(EDU_DMA_BUF_ADDR + 0xff0, 0x3000, 0x20, 3);
	ck_assert_uint_eq(fake_ram[0x3000], 0xaa);
	dma(0x0fff0000u, EDU_DMA_BUF_ADDR, 16, 1);
	ck_assert_uint_eq(rd(EDU_REG_DMA_CMD, 4) & 1, 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("edu");
	TCase *tc = tcase_create("edu");
	SRunner *sr;
	int failed;

	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_test(tc, test_identity);
	tcase_add_test(tc, test_liveness);
	tcase_add_test(tc, test_factorial);
	tcase_add_test(tc, test_factorial_large);
	tcase_add_test(tc, test_intx);
	tcase_add_test(tc, test_msi);
	tcase_add_test(tc, test_dma);
	tcase_add_test(tc, test_dma_refused);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_ENV);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
