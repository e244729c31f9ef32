/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * QEMU's educational PCI device "edu" (1234:11e8): BAR0 is 1 MiB of
 * registers: an ID, a liveness check, a factorial unit, interrupt
 * status/raise/acknowledge, and a DMA engine moving bytes between guest
 * memory and a 4 KiB buffer at 0x40000. Interrupts are INTx or MSI. The
 * factorial and DMA complete at once, inside the write that starts them;
 * their status bits read as done and their interrupt follows completion.
 * All state is guarded by the PCI lock (handlers run under it).
 */
#include <inttypes.h>
#include <string.h>

#include "base/error.h"
#include "machine/devices/devices.h"
#include "machine/devices/edu.h"
#include "machine/pci.h"
#include "machine/vm.h"

#define EDU_ID 0x010000edu       /* version 1.0, 0xed */
#define EDU_STATUS_COMPUTING 0x01
#define EDU_STATUS_IRQFACT 0x80
#define EDU_IRQ_FACT 0x00000001u
#define EDU_IRQ_DMA 0x00000100u
#define EDU_DMA_RUN 0x1
#define EDU_DMA_FROM_DEV 0x2
#define EDU_DMA_IRQ 0x4
#define EDU_DMA_MASK ((1ull << 28) - 1) /* the device drives 28 address bits */

/* Caller holds the PCI lock. */
static void edu_raise(struct edu *e, uint32_t bits)
{
	e->irq_status |= bits;
	if (!e->irq_status)
		return;
	if (pci_msi_enabled(&e->pci))
		pci_msi_notify(&e->pci);
	else
		pci_set_irq(&e->pci, true);
}

/* Caller holds the PCI lock. */
static void edu_lower(struct edu *e, uint32_t bits)
{
	e->irq_status &= ~bits;
	if (!e->irq_status && !pci_msi_enabled(&e->pci))
		pci_set_irq(&e->pci, false);
}

/* n! mod 2^32, in at most 33 steps: from 34 on, n! has 32 factors of 2
 * (17 + 8 + 4 + 2 + 1), so it is 0 mod 2^32, as the loop would find after
 * up to 2^32 multiplications inside the guest's MMIO write. */
static uint32_t edu_factorial(uint32_t n)
{
	uint32_t r = 1;

	if (n >= 34)
		return 0;
	while (n > 1)
		r *= n--;
	return r;
}

/* Caller holds the PCI lock: @addr..+@len inside the buffer's window. */
static bool edu_in_buffer(uint64_t addr, uint64_t len)
{
	return addr >= EDU_DMA_BUF_ADDR && len <= EDU_DMA_BUF_SIZE &&
	       addr - EDU_DMA_BUF_ADDR <= EDU_DMA_BUF_SIZE - len;
}

static struct vmm_warn_limit edu_dma_warn =
	VMM_WARN_LIMIT("edu DMA errors");

/* Caller holds the PCI lock: runs the transfer the registers describe. */
static void edu_dma_run(struct edu *e)
{
	bool from_dev = e->dma_cmd & EDU_DMA_FROM_DEV;
	uint64_t buf = from_dev ? e->dma_src : e->dma_dst;
	uint64_t mem = (from_dev ? e->dma_dst : e->dma_src) & EDU_DMA_MASK;

	if (!edu_in_buffer(buf, e->dma_count))
		vmm_warn_limited(&edu_dma_warn, "edu: DMA of %#" PRIx64 " bytes "
				 "at buffer address %#" PRIx64 " outside its "
				 "buffer, dropped", e->dma_count, buf);
	else if (pci_dma_rw(&e->pci, mem,
			    e->buf + (buf - EDU_DMA_BUF_ADDR), e->dma_count,
			    !from_dev))
		vmm_warn_limited(&edu_dma_warn, "edu: DMA at %#" PRIx64
				 " failed", mem);
	e->dma_cmd &= ~(uint64_t)EDU_DMA_RUN;
	if (e->dma_cmd & EDU_DMA_IRQ)
		edu_raise(e, EDU_IRQ_DMA);
}

/* Caller holds the PCI lock. */
static uint64_t edu_read(struct edu *e, uint64_t off)
{
	switch (off) {
	case EDU_REG_ID: return EDU_ID;
	case EDU_REG_ALIVE: return ~e->alive & 0xffffffffu;
	case EDU_REG_FACTORIAL: return e->fact;
	case EDU_REG_STATUS: return e->status;
	case EDU_REG_IRQ_STATUS: return e->irq_status;
	case EDU_REG_DMA_SRC: return e->dma_src;
	case EDU_REG_DMA_DST: return e->dma_dst;
	case EDU_REG_DMA_COUNT: return e->dma_count;
	case EDU_REG_DMA_CMD: return e->dma_cmd;
	default: return ~0ull;
	}
}

/* Caller holds the PCI lock. */
static void edu_write(struct edu *e, uint64_t off, uint64_t val)
{
	switch (off) {
	case EDU_REG_ALIVE:
		e->alive = (uint32_t)val;
		break;
	case EDU_REG_FACTORIAL:
		if (e->status & EDU_STATUS_COMPUTING)
			break;
		e->fact = edu_factorial((uint32_t)val);
		if (e->status & EDU_STATUS_IRQFACT)
			edu_raise(e, EDU_IRQ_FACT);
		break;
	case EDU_REG_STATUS:
		e->status = (e->status & ~EDU_STATUS_IRQFACT) |
			    ((uint32_t)val & EDU_STATUS_IRQFACT);
		break;
	case EDU_REG_IRQ_RAISE:
		edu_raise(e, (uint32_t)val);
		break;
	case EDU_REG_IRQ_ACK:
		edu_lower(e, (uint32_t)val);
		break;
	case EDU_REG_DMA_SRC:
		if (!(e->dma_cmd & EDU_DMA_RUN))
			e->dma_src = val;
		break;
	case EDU_REG_DMA_DST:
		if (!(e->dma_cmd & EDU_DMA_RUN))
			e->dma_dst = val;
		break;
	case EDU_REG_DMA_COUNT:
		if (!(e->dma_cmd & EDU_DMA_RUN))
			e->dma_count = val;
		break;
	case EDU_REG_DMA_CMD:
		if (e->dma_cmd & EDU_DMA_RUN)
			break;
		e->dma_cmd = val;
		if (val & EDU_DMA_RUN)
			edu_dma_run(e);
		break;
	}
}

/*
 * Caller holds the PCI lock. One access to BAR0: 4-byte accesses below
 * 0x80, 4 or 8 bytes from 0x80 (the DMA registers); other sizes read
 * all-ones and are ignored, as on the device.
 */
void edu_mmio(struct edu *e, uint64_t off, uint8_t *data, unsigned int len,
	      bool is_write)
{
	uint64_t val = 0;
	bool ok = len == 4 || (len == 8 && off >= 0x80);

	if (is_write) {
		memcpy(&val, data, len < 8 ? len : 8);
		if (ok)
			edu_write(e, off, val);
		return;
	}
	val = ok ? edu_read(e, off) : ~0ull;
	memcpy(data, &val, len < 8 ? len : 8);
}

static void edu_bar0(struct pci_dev *d, uint64_t off, uint8_t *data,
		     unsigned int len, bool is_write)
{
	edu_mmio(d->opaque, off, data, len, is_write);
}

/* Setup time: fills @e's configuration space (as the device: class
 * "other", INTA, an MSI capability at 0x40). */
void edu_setup(struct edu *e, uint8_t devfn)
{
	struct pci_dev *d = &e->pci;

	memset(e, 0, sizeof(*e));
	d->devfn = devfn;
	d->opaque = e;
	d->cfg[PCI_VENDOR_ID] = 0x34;
	d->cfg[PCI_VENDOR_ID + 1] = 0x12;
	d->cfg[PCI_DEVICE_ID] = 0xe8;
	d->cfg[PCI_DEVICE_ID + 1] = 0x11;
	d->cfg[PCI_REVISION_ID] = 0x10;
	d->cfg[PCI_CLASS_DEVICE] = 0xff; /* unclassified: 0x00ff */
	d->cfg[PCI_SUBSYSTEM_VENDOR_ID] = 0xf4;
	d->cfg[PCI_SUBSYSTEM_VENDOR_ID + 1] = 0x1a;
	d->cfg[PCI_SUBSYSTEM_ID] = 0x00;
	d->cfg[PCI_SUBSYSTEM_ID + 1] = 0x11;
	d->cfg[PCI_INTERRUPT_PIN] = 1;
	d->bar[0] = (struct pci_bar){ .size = EDU_BAR_SIZE, .fn = edu_bar0 };
	pci_add_msi_cap(d, 0x40);
}

int edu_init(struct vm *vm)
{
	static struct edu edu;

	(void)vm;
	edu_setup(&edu, pci_free_devfn());
	return pci_register(&edu.pci);
}
