/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * PCI bus 0 behind a host bridge: configuration mechanism #1, BARs that
 * decode where the guest puts them inside two windows registered on the
 * bus (memory below the IOAPIC, I/O at 0xc000), INTx to the IOAPIC, MSI,
 * and DMA for bus masters. With no firmware, pci_register() does what a
 * BIOS would: it places the BARs, enables decoding and fills in the
 * interrupt line.
 */
#include <inttypes.h>
#include <pthread.h>
#include <string.h>

#include "base/error.h"
#include "machine/bus.h"
#include "machine/devices/devices.h"
#include "machine/irq.h"
#include "machine/pci.h"
#include "machine/vcpu.h"
#include "machine/vm.h"

#define PCI_MAX_DEVS 32
#define CONFIG_ENABLE 0x80000000u

static struct vmm_warn_limit dma_warn =
	VMM_WARN_LIMIT("PCI DMA outside RAM");

static struct {
	pthread_mutex_t lock; /* pci_lock: see pci.h */
	struct vm *vm;
	uint32_t config_address;
	struct pci_dev *devs[PCI_MAX_DEVS];
	unsigned int ndevs;
	uint32_t next_mem, next_io;
	uint8_t next_cap[PCI_MAX_DEVS];
	pci_dma_translate_fn translate;
} pci = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.next_mem = PCI_MMIO_WINDOW_BASE,
	.next_io = PCI_IO_WINDOW_BASE,
};

static uint32_t cfg_read32(const struct pci_dev *d, unsigned int off)
{
	uint32_t v;

	memcpy(&v, &d->cfg[off], 4);
	return v;
}

static void cfg_write32(struct pci_dev *d, unsigned int off, uint32_t v)
{
	memcpy(&d->cfg[off], &v, 4);
}

static uint16_t cfg_read16(const struct pci_dev *d, unsigned int off)
{
	return (uint16_t)(d->cfg[off] | d->cfg[off + 1] << 8);
}

static struct pci_dev *pci_find(uint8_t devfn)
{
	for (unsigned int i = 0; i < pci.ndevs; i++)
		if (pci.devs[i]->devfn == devfn)
			return pci.devs[i];
	return NULL;
}

uint16_t pci_sid(const struct pci_dev *d)
{
	return d->devfn; /* bus 0 */
}

/* The IOAPIC pin @d's INTx pin is wired to: INTA..INTD swizzled by slot.
 * Interrupt Line (0x3c) only tells software what was set up; the guest
 * may write anything there, so the wiring never follows it. */
static unsigned int pci_intx_gsi(const struct pci_dev *d)
{
	return PCI_INTX_GSI_BASE +
	       (((d->devfn >> 3) + d->cfg[PCI_INTERRUPT_PIN] - 1) & 3);
}

/* Caller holds pci_lock. INTx follows the device's level unless MSI is
 * on or the command register disables it. */
static void pci_update_intx(struct pci_dev *d)
{
	bool level = d->intx_level && !pci_msi_enabled(d) &&
		     !(cfg_read16(d, PCI_COMMAND) & PCI_COMMAND_INTX_DISABLE);

	if (d->cfg[PCI_INTERRUPT_PIN])
		ioapic_set_irq(pci_intx_gsi(d), level);
}

/* Caller holds pci_lock. */
bool pci_msi_enabled(const struct pci_dev *d)
{
	return d->msi_cap && (d->cfg[d->msi_cap + PCI_MSI_FLAGS] &
			      PCI_MSI_FLAGS_ENABLE);
}

/* Caller holds pci_lock: sends the message the MSI capability holds. */
void pci_msi_notify(struct pci_dev *d)
{
	unsigned int c = d->msi_cap;
	uint64_t addr = cfg_read32(d, c + PCI_MSI_ADDRESS_LO) |
			(uint64_t)cfg_read32(d, c + PCI_MSI_ADDRESS_HI) << 32;
	uint32_t data = cfg_read16(d, c + PCI_MSI_DATA_64);

	if (!pci_msi_enabled(d) ||
	    !(cfg_read16(d, PCI_COMMAND) & PCI_COMMAND_MASTER))
		return; /* an MSI is a memory write: needs bus mastering */
	irq_msi(d->vm, addr, data, pci_sid(d));
}

/* Caller holds pci_lock. The device drives its INTx pin to @level; the
 * pin stays low to the IOAPIC while MSI is on or INTx is disabled. */
void pci_set_irq(struct pci_dev *d, bool level)
{
	d->intx_level = level;
	if (level)
		d->cfg[PCI_STATUS] |= PCI_STATUS_INTERRUPT;
	else
		d->cfg[PCI_STATUS] &= (uint8_t)~PCI_STATUS_INTERRUPT;
	pci_update_intx(d);
}

/*
 * Caller holds pci_lock. Bus-master DMA of @len bytes between guest
 * memory at @addr (an IOVA when an IOMMU translates) and @buf; @to_device:
 * memory is read. Returns 0, or -1 when bus mastering is off, the IOMMU
 * faults or the address is not RAM (nothing beyond the fault is moved).
 */
int pci_dma_rw(struct pci_dev *d, uint64_t addr, void *buf, uint64_t len,
	       bool to_device)
{
	uint8_t *p = buf;

	if (!(cfg_read16(d, PCI_COMMAND) & PCI_COMMAND_MASTER))
		return -1;
	while (len) {
		uint64_t n = 0x1000 - (addr & 0xfff), gpa = addr;
		uint8_t *host;

		if (n > len)
			n = len;
		if (pci.translate &&
		    pci.translate(pci_sid(d), addr, n, !to_device, &gpa))
			return -1;
		host = guest_ptr(d->vm, gpa, n);
		if (!host) {
			vmm_warn_limited(&dma_warn, "PCI %02x.%x: DMA to %#"
					 PRIx64 ", not RAM", d->devfn >> 3,
					 d->devfn & 7, gpa);
			return -1;
		}
		if (to_device)
			memcpy(p, host, n);
		else
			memcpy(host, p, n);
		p += n;
		addr += n;
		len -= n;
	}
	return 0;
}

/* Setup time. */
void pci_set_dma_translate(pci_dma_translate_fn fn)
{
	pci.translate = fn;
}

static uint32_t bar_mask(const struct pci_bar *b)
{
	return ~(b->size - 1) & (b->io ? 0xfffffffcu : 0xfffffff0u);
}

/* Caller holds pci_lock. @reg..@reg+@len stays inside one dword. */
static void pci_config_write(struct pci_dev *d, unsigned int reg,
			     const uint8_t *data, unsigned int len)
{
	uint16_t old_cmd = cfg_read16(d, PCI_COMMAND);
	uint8_t old_msi = d->msi_cap ? d->cfg[d->msi_cap + PCI_MSI_FLAGS] : 0;

	for (unsigned int i = 0; i < len; i++)
		d->cfg[reg + i] = (uint8_t)((d->cfg[reg + i] & ~d->wmask[reg + i]) |
					    (data[i] & d->wmask[reg + i]));
	if (((cfg_read16(d, PCI_COMMAND) ^ old_cmd) & PCI_COMMAND_INTX_DISABLE) ||
	    (d->msi_cap && d->cfg[d->msi_cap + PCI_MSI_FLAGS] != old_msi))
		pci_update_intx(d);
}

void pci_config_address_write(uint32_t val)
{
	pthread_mutex_lock(&pci.lock);
	pci.config_address = val & 0x80ffffffu;
	pthread_mutex_unlock(&pci.lock);
}

uint32_t pci_config_address_read(void)
{
	uint32_t v;

	pthread_mutex_lock(&pci.lock);
	v = pci.config_address;
	pthread_mutex_unlock(&pci.lock);
	return v;
}

/*
 * Any thread: a config cycle through CONFIG_DATA byte @byte (0..3) of
 * @len bytes. The register is CONFIG_ADDRESS bits 7:0 ORed with @byte:
 * bits 1:0 are kept as written, as QEMU's hosts do and software written
 * for them relies on. Functions that do not exist read all-ones and
 * ignore writes.
 */
void pci_config_data(unsigned int byte, uint8_t *data, unsigned int len,
		     bool is_write)
{
	struct pci_dev *d = NULL;
	uint32_t a;
	unsigned int reg;

	if (byte + len > 4)
		len = 4 - byte;
	pthread_mutex_lock(&pci.lock);
	a = pci.config_address;
	reg = (a & 0xff) | byte;
	if (reg + len > PCI_CONFIG_SIZE)
		len = PCI_CONFIG_SIZE - reg;
	if ((a & CONFIG_ENABLE) && ((a >> 16) & 0xff) == 0)
		d = pci_find((uint8_t)(a >> 8));
	if (d && is_write)
		pci_config_write(d, reg, data, len);
	else if (d)
		memcpy(data, &d->cfg[reg], len);
	else if (!is_write)
		memset(data, 0xff, len);
	pthread_mutex_unlock(&pci.lock);
}

/*
 * Any thread: an access to @addr in the memory (@io false) or I/O window.
 * Returns false when no enabled BAR decodes it.
 */
bool pci_bar_access(bool io, uint64_t addr, uint8_t *data, unsigned int len,
		    bool is_write)
{
	pthread_mutex_lock(&pci.lock);
	for (unsigned int i = 0; i < pci.ndevs; i++) {
		struct pci_dev *d = pci.devs[i];
		uint16_t cmd = cfg_read16(d, PCI_COMMAND);

		if (!(cmd & (io ? PCI_COMMAND_IO : PCI_COMMAND_MEMORY)))
			continue;
		for (unsigned int b = 0; b < PCI_NUM_BARS; b++) {
			struct pci_bar *bar = &d->bar[b];
			uint64_t base;

			if (!bar->size || bar->io != io)
				continue;
			base = cfg_read32(d, PCI_BASE_ADDRESS_0 + 4 * b) &
			       bar_mask(bar);
			if (addr < base || addr + len > base + bar->size)
				continue;
			bar->fn(d, addr - base, data, len, is_write);
			pthread_mutex_unlock(&pci.lock);
			return true;
		}
	}
	pthread_mutex_unlock(&pci.lock);
	return false;
}

/* Setup time: chains an MSI capability (64-bit, one vector) at @off. */
void pci_add_msi_cap(struct pci_dev *d, uint8_t off)
{
	d->cfg[off] = PCI_CAP_ID_MSI;
	d->cfg[off + 1] = d->cfg[PCI_CAPABILITY_LIST];
	d->cfg[PCI_CAPABILITY_LIST] = off;
	d->cfg[PCI_STATUS] |= PCI_STATUS_CAP_LIST;
	d->cfg[off + PCI_MSI_FLAGS] = PCI_MSI_FLAGS_64BIT;
	d->wmask[off + PCI_MSI_FLAGS] = PCI_MSI_FLAGS_ENABLE;
	memset(&d->wmask[off + PCI_MSI_ADDRESS_LO], 0xff, 8);
	d->wmask[off + PCI_MSI_ADDRESS_LO] = 0xfc;
	memset(&d->wmask[off + PCI_MSI_DATA_64], 0xff, 2);
	d->msi_cap = off;
}

/* Setup time: what firmware would do, BARs first-fit by alignment. */
static int pci_assign(struct pci_dev *d)
{
	uint16_t cmd = 0;

	for (unsigned int b = 0; b < PCI_NUM_BARS; b++) {
		struct pci_bar *bar = &d->bar[b];
		uint32_t *next = bar->io ? &pci.next_io : &pci.next_mem;
		uint32_t end = bar->io ? PCI_IO_WINDOW_END : PCI_MMIO_WINDOW_END;
		uint64_t base;

		if (!bar->size)
			continue;
		base = ((uint64_t)*next + bar->size - 1) & ~(uint64_t)(bar->size - 1);
		if (base + bar->size > end)
			return vmm_fail(VMM_EXIT_INTERNAL, "PCI window full");
		*next = (uint32_t)(base + bar->size);
		cfg_write32(d, PCI_BASE_ADDRESS_0 + 4 * b,
			    (uint32_t)base | (bar->io ? 1 : 0));
		memset(&d->wmask[PCI_BASE_ADDRESS_0 + 4 * b], 0, 4);
		for (unsigned int i = 0; i < 4; i++)
			d->wmask[PCI_BASE_ADDRESS_0 + 4 * b + i] =
				(uint8_t)(bar_mask(bar) >> (8 * i));
		cmd |= bar->io ? PCI_COMMAND_IO : PCI_COMMAND_MEMORY;
	}
	d->wmask[PCI_COMMAND] = PCI_COMMAND_IO | PCI_COMMAND_MEMORY |
				PCI_COMMAND_MASTER;
	d->wmask[PCI_COMMAND + 1] = PCI_COMMAND_INTX_DISABLE >> 8;
	d->cfg[PCI_COMMAND] |= (uint8_t)cmd;
	d->wmask[PCI_INTERRUPT_LINE] = 0xff;
	if (d->cfg[PCI_INTERRUPT_PIN])
		d->cfg[PCI_INTERRUPT_LINE] = (uint8_t)pci_intx_gsi(d);
	return 0;
}

/* Setup time: the first free device number on bus 0 (function 0). */
uint8_t pci_free_devfn(void)
{
	uint8_t devfn = 0;

	while (devfn < 0xf8 && pci_find(devfn))
		devfn += 8;
	return devfn;
}

/* Setup time, before the vCPUs start: @d at its devfn on bus 0. */
int pci_register(struct pci_dev *d)
{
	if (pci.ndevs == PCI_MAX_DEVS || pci_find(d->devfn))
		return vmm_fail(VMM_EXIT_INTERNAL, "PCI devfn %#x taken",
				d->devfn);
	d->vm = pci.vm;
	if (pci_assign(d))
		return -1;
	pci.devs[pci.ndevs++] = d;
	return 0;
}

/* CONFIG_ADDRESS is a dword register: other sizes do not reach it (and
 * leave 0xcf9, a chipset's reset control, to whoever claims it). */
static void pci_config_address_io(struct vcpu *v, uint64_t off,
				  uint8_t *data, unsigned int len,
				  bool is_write, void *opaque)
{
	uint32_t val = 0;

	(void)v; (void)opaque;
	if (off != 0 || len != 4) {
		if (!is_write)
			memset(data, 0xff, len);
		return;
	}
	if (is_write) {
		memcpy(&val, data, 4);
		pci_config_address_write(val);
	} else {
		val = pci_config_address_read();
		memcpy(data, &val, 4);
	}
}

static void pci_config_data_io(struct vcpu *v, uint64_t off, uint8_t *data,
			       unsigned int len, bool is_write, void *opaque)
{
	(void)v; (void)opaque;
	pci_config_data((unsigned int)off, data, len, is_write);
}

static void pci_window(struct vcpu *v, uint64_t off, uint8_t *data,
		       unsigned int len, bool is_write, void *opaque)
{
	bool io = opaque != NULL;
	uint64_t base = io ? PCI_IO_WINDOW_BASE : PCI_MMIO_WINDOW_BASE;

	(void)v;
	if (!pci_bar_access(io, base + off, data, len, is_write) && !is_write)
		memset(data, 0xff, len); /* master abort */
}

/* Setup time: the config ports and the two windows. */
int pci_init(struct vm *vm)
{
	static int io_tag;

	pci.vm = vm;
	return bus_register(BUS_PIO, 0xcf8, 1, pci_config_address_io, NULL) ||
	       bus_register(BUS_PIO, 0xcfc, 4, pci_config_data_io, NULL) ||
	       bus_register(BUS_PIO, PCI_IO_WINDOW_BASE,
			    PCI_IO_WINDOW_END - PCI_IO_WINDOW_BASE, pci_window,
			    &io_tag) ||
	       bus_register(BUS_MMIO, PCI_MMIO_WINDOW_BASE,
			    PCI_MMIO_WINDOW_END - PCI_MMIO_WINDOW_BASE,
			    pci_window, NULL) ? -1 : 0;
}
