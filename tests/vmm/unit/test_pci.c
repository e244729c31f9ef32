/* SPDX-License-Identifier: GPL-2.0-only */
/* PCI bus 0: configuration mechanism #1, BARs, INTx, MSI and DMA. */
#include <check.h>

#include "pci_fakes.h"

static uint32_t last_off, last_len, hits;

static void test_bar(struct pci_dev *d, uint64_t off, uint8_t *data,
		     unsigned int len, bool is_write)
{
	(void)d;
	last_off = (uint32_t)off;
	last_len = len;
	hits++;
	if (!is_write)
		memset(data, 0x5a, len);
}

static struct pci_dev dev;

/* A device at 00:02.0: a 1 MiB memory BAR, a 256-byte I/O BAR, INTA, MSI. */
static void setup(void)
{
	pci_init(&fake_vm);
	ck_assert_int_eq(q35_host_init(&fake_vm), 0);
	memset(&dev, 0, sizeof(dev));
	dev.devfn = pci_free_devfn();
	dev.cfg[0] = 0x34; dev.cfg[1] = 0x12; dev.cfg[2] = 0x78; dev.cfg[3] = 0x56;
	dev.cfg[PCI_INTERRUPT_PIN] = 1;
	dev.bar[0] = (struct pci_bar){ .size = 1u << 20, .fn = test_bar };
	dev.bar[1] = (struct pci_bar){ .size = 256, .io = true, .fn = test_bar };
	pci_add_msi_cap(&dev, 0x40);
	ck_assert_int_eq(pci_register(&dev), 0);
}

START_TEST(test_host_bridge)
{
	ck_assert_uint_eq(dev.devfn, 8);
	ck_assert_uint_eq(cfg_read(0, 0, 4), 0x29c08086u);
	ck_assert_uint_eq(cfg_read(0, 0x0a, 2), 0x0600);
	ck_assert_uint_eq(cfg_read(0, 0x0e, 1), 0);
	ck_assert_uint_eq(cfg_read(0, 0x10, 4), 0); /* no BARs */
}
END_TEST

START_TEST(test_absent_all_ones)
{
	ck_assert_uint_eq(cfg_read(0x10, 0, 4), 0xffffffffu);
	ck_assert_uint_eq(cfg_read(0x01, 0, 2), 0xffff); /* 00:00.1 */
	/* bus 1 */
	pci_config_address_write(0x80010000u);
	{
		uint32_t v = 0;

		pci_config_data(0, (uint8_t *)&v, 4, false);
		ck_assert_uint_eq(v, 0xffffffffu);
	}
	/* enable bit clear: no config cycle */
	pci_config_address_write(0x00000000u);
	{
		uint32_t v = 0;

		pci_config_data(0, (uint8_t *)&v, 4, false);
		ck_assert_uint_eq(v, 0xffffffffu);
	}
	cfg_write(0x10, 0x04, 0x7, 2); /* ignored, no crash */
}
END_TEST

START_TEST(test_byte_word_access)
{
	ck_assert_uint_eq(cfg_read(8, 0, 4), 0x56781234u);
	ck_assert_uint_eq(cfg_read(8, 2, 2), 0x5678);
	ck_assert_uint_eq(cfg_read(8, 3, 1), 0x56);
	ck_assert_uint_eq(cfg_read(8, 1, 1), 0x12);
	/* CONFIG_ADDRESS bits 1:0 select the byte, as on QEMU */
	pci_config_address_write(0x80000802u);
	{
		uint32_t v = 0;

		pci_config_data(0, (uint8_t *)&v, 2, false);
		ck_assert_uint_eq(v, 0x5678);
	}
	ck_assert_uint_eq(pci_config_address_read(), 0x80000802u);
	/* read-only ID bytes ignore writes */
	cfg_write(8, 0, 0xffffffffu, 4);
	ck_assert_uint_eq(cfg_read(8, 0, 4), 0x56781234u);
}
END_TEST

START_TEST(test_bar_sizing)
{
	uint32_t bar0 = cfg_read(8, 0x10, 4), bar1 = cfg_read(8, 0x14, 4);

	/* placed by the bus, aligned, in the windows */
	ck_assert_uint_eq(bar0 & 0xf, 0);
	ck_assert_uint_eq(bar0 & 0xfffff, 0);
	ck_assert_uint_ge(bar0, PCI_MMIO_WINDOW_BASE);
	ck_assert_uint_eq(bar1 & 3, 1);
	ck_assert_uint_ge(bar1 & ~3u, PCI_IO_WINDOW_BASE);
	cfg_write(8, 0x10, 0xffffffffu, 4);
	ck_assert_uint_eq(cfg_read(8, 0x10, 4), 0xfff00000u);
	cfg_write(8, 0x14, 0xffffffffu, 4);
	ck_assert_uint_eq(cfg_read(8, 0x14, 4), 0xffffff01u);
	cfg_write(8, 0x18, 0xffffffffu, 4);
	ck_assert_uint_eq(cfg_read(8, 0x18, 4), 0); /* no BAR2 */
	cfg_write(8, 0x10, bar0, 4);
	ck_assert_uint_eq(cfg_read(8, 0x10, 4), bar0);
	/* decoding enabled as firmware leaves it */
	ck_assert_uint_eq(cfg_read(8, PCI_COMMAND, 2) & 3, 3);
}
END_TEST

START_TEST(test_bar_decode)
{
	uint32_t bar0 = cfg_read(8, 0x10, 4), bar1 = cfg_read(8, 0x14, 4) & ~3u;
	uint8_t buf[4];

	ck_assert(pci_bar_access(false, bar0 + 0x24, buf, 4, false));
	ck_assert_uint_eq(last_off, 0x24);
	ck_assert_uint_eq(buf[0], 0x5a);
	ck_assert(pci_bar_access(true, bar1 + 3, buf, 1, true));
	ck_assert_uint_eq(last_off, 3);
	ck_assert(!pci_bar_access(false, bar0 + (1u << 20), buf, 4, false));
	/* moved by the guest: decodes at the new place only */
	cfg_write(8, 0x10, 0xd0000000u, 4);
	ck_assert(!pci_bar_access(false, bar0, buf, 4, false));
	ck_assert(pci_bar_access(false, 0xd0000008u, buf, 4, false));
	ck_assert_uint_eq(last_off, 8);
	/* memory decode off */
	cfg_write(8, PCI_COMMAND, PCI_COMMAND_IO, 2);
	ck_assert(!pci_bar_access(false, 0xd0000008u, buf, 4, false));
	ck_assert(pci_bar_access(true, bar1, buf, 4, false));
	cfg_write(8, PCI_COMMAND, 0, 2);
	ck_assert(!pci_bar_access(true, bar1, buf, 4, false));
}
END_TEST

START_TEST(test_capability_list)
{
	ck_assert(cfg_read(8, PCI_STATUS, 2) & PCI_STATUS_CAP_LIST);
	ck_assert_uint_eq(cfg_read(8, PCI_CAPABILITY_LIST, 1), 0x40);
	ck_assert_uint_eq(cfg_read(8, 0x40, 1), PCI_CAP_ID_MSI);
	ck_assert_uint_eq(cfg_read(8, 0x41, 1), 0);
	ck_assert_uint_eq(cfg_read(8, 0x42, 2), PCI_MSI_FLAGS_64BIT);
}
END_TEST

START_TEST(test_intx_and_msi)
{
	/* INTA of slot 1 swizzles to pin 17 */
	ck_assert_uint_eq(cfg_read(8, PCI_INTERRUPT_LINE, 1), 17);
	pci_set_irq(&dev, true);
	ck_assert_int_eq(intx.pin, 17);
	ck_assert_int_eq(intx.level, 1);
	ck_assert(cfg_read(8, PCI_STATUS, 2) & PCI_STATUS_INTERRUPT);
	/* INTx disable drops the pin */
	cfg_write(8, PCI_COMMAND, PCI_COMMAND_MEMORY | PCI_COMMAND_INTX_DISABLE, 2);
	ck_assert_int_eq(intx.level, 0);
	cfg_write(8, PCI_COMMAND, PCI_COMMAND_MEMORY, 2);
	ck_assert_int_eq(intx.level, 1);
	/* MSI on: the pin goes low, a notify sends the message */
	cfg_write(8, 0x44, 0xfee01004u, 4);
	cfg_write(8, 0x48, 0, 4);
	cfg_write(8, 0x4c, 0x4041, 2);
	cfg_write(8, 0x42, PCI_MSI_FLAGS_ENABLE, 2);
	ck_assert(pci_msi_enabled(&dev));
	ck_assert_int_eq(intx.level, 0);
	pci_msi_notify(&dev);
	ck_assert_int_eq(msi.count, 0); /* no bus mastering yet */
	cfg_write(8, PCI_COMMAND, PCI_COMMAND_MEMORY | PCI_COMMAND_MASTER, 2);
	pci_msi_notify(&dev);
	ck_assert_int_eq(msi.count, 1);
	ck_assert_uint_eq(msi.addr, 0xfee01004u);
	ck_assert_uint_eq(msi.data, 0x4041);
	ck_assert_uint_eq(msi.sid, 8);
}
END_TEST

/* Interrupt Line is the guest's to write (0xff: "unknown" to some
 * drivers); the pin stays the one INTA of slot 1 is wired to. */
START_TEST(test_intx_line_written)
{
	cfg_write(8, PCI_INTERRUPT_LINE, 0xff, 1);
	ck_assert_uint_eq(cfg_read(8, PCI_INTERRUPT_LINE, 1), 0xff);
	pci_set_irq(&dev, true);
	ck_assert_int_eq(intx.pin, 17);
	ck_assert_int_eq(intx.level, 1);
	pci_set_irq(&dev, false);
	ck_assert_int_eq(intx.pin, 17);
	ck_assert_int_eq(intx.level, 0);
}
END_TEST

static int translate_calls;

static int fake_translate(uint16_t sid, uint64_t iova, uint64_t len,
			  bool is_write, uint64_t *gpa)
{
	(void)sid; (void)len; (void)is_write;
	translate_calls++;
	if (iova >= 0x100000)
		return -1;
	*gpa = iova + 0x1000;
	return 0;
}

START_TEST(test_dma)
{
	uint8_t buf[8] = "abcdefg";

	ck_assert_int_eq(pci_dma_rw(&dev, 0x100, buf, 8, false), -1);
	cfg_write(8, PCI_COMMAND, PCI_COMMAND_MASTER, 2);
	ck_assert_int_eq(pci_dma_rw(&dev, 0x100, buf, 8, false), 0);
	ck_assert_mem_eq(fake_ram + 0x100, "abcdefg", 8);
	memset(buf, 0, sizeof(buf));
	ck_assert_int_eq(pci_dma_rw(&dev, 0x100, buf, 8, true), 0);
	ck_assert_mem_eq(buf, "abcdefg", 8);
	/* outside RAM: refused, no crash */
	ck_assert_int_eq(pci_dma_rw(&dev, 0x40000000u, buf, 8, false), -1);
	/* through the IOMMU, page by page */
	pci_set_dma_translate(fake_translate);
	ck_assert_int_eq(pci_dma_rw(&dev, 0xffc, buf, 8, true), 0);
	ck_assert_int_eq(translate_calls, 2);
	ck_assert_mem_eq(buf, fake_ram + 0x1ffc, 8);
	ck_assert_int_eq(pci_dma_rw(&dev, 0x100000, buf, 8, true), -1);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("pci");
	TCase *tc = tcase_create("pci");
	SRunner *sr;
	int failed;

	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_test(tc, test_host_bridge);
	tcase_add_test(tc, test_absent_all_ones);
	tcase_add_test(tc, test_byte_word_access);
	tcase_add_test(tc, test_bar_sizing);
	tcase_add_test(tc, test_bar_decode);
	tcase_add_test(tc, test_capability_list);
	tcase_add_test(tc, test_intx_and_msi);
	tcase_add_test(tc, test_intx_line_written);
	tcase_add_test(tc, test_dma);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_ENV);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
