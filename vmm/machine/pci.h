/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * PCI bus 0: configuration mechanism #1 (ports 0xcf8/0xcfc), a memory and
 * an I/O window in which the devices' BARs decode, INTx and MSI, and DMA
 * through the IOMMU when one is present.
 *
 * Locking: one lock (pci_lock) guards every device's configuration space
 * and its registers: config cycles and BAR accesses run under it, so a
 * device's BAR handler is called with it held and may raise its interrupt
 * or do DMA from there. Order: pci_lock, then the IOAPIC's lock, then the
 * IOMMU's, then vCPU locks.
 */
#ifndef VMM_MACHINE_PCI_H
#define VMM_MACHINE_PCI_H

#include <stdbool.h>
#include <stdint.h>

#define PCI_MMIO_WINDOW_BASE 0xc0000000u /* up to the IOAPIC */
#define PCI_MMIO_WINDOW_END 0xfec00000u
#define PCI_IO_WINDOW_BASE 0xc000u
#define PCI_IO_WINDOW_END 0x10000u
#define PCI_INTX_GSI_BASE 16 /* INTA..INTD: IOAPIC pins 16..19, swizzled */

#define PCI_CONFIG_SIZE 256
#define PCI_NUM_BARS 6

/* Configuration space offsets and bits used by the bus and its devices. */
#define PCI_VENDOR_ID 0x00
#define PCI_DEVICE_ID 0x02
#define PCI_COMMAND 0x04
#define  PCI_COMMAND_IO 0x1
#define  PCI_COMMAND_MEMORY 0x2
#define  PCI_COMMAND_MASTER 0x4
#define  PCI_COMMAND_INTX_DISABLE 0x400
#define PCI_STATUS 0x06
#define  PCI_STATUS_INTERRUPT 0x08
#define  PCI_STATUS_CAP_LIST 0x10
#define PCI_REVISION_ID 0x08
#define PCI_CLASS_PROG 0x09
#define PCI_CLASS_DEVICE 0x0a
#define PCI_HEADER_TYPE 0x0e
#define PCI_BASE_ADDRESS_0 0x10
#define PCI_SUBSYSTEM_VENDOR_ID 0x2c
#define PCI_SUBSYSTEM_ID 0x2e
#define PCI_CAPABILITY_LIST 0x34
#define PCI_INTERRUPT_LINE 0x3c
#define PCI_INTERRUPT_PIN 0x3d
#define PCI_CAP_ID_MSI 0x05
#define PCI_MSI_FLAGS 2
#define  PCI_MSI_FLAGS_ENABLE 0x1
#define  PCI_MSI_FLAGS_64BIT 0x80
#define PCI_MSI_ADDRESS_LO 4
#define PCI_MSI_ADDRESS_HI 8
#define PCI_MSI_DATA_64 12

struct pci_dev;

/* A BAR's register window: called with pci_lock held, @off inside it,
 * @len 1..8. */
typedef void (*pci_bar_fn)(struct pci_dev *d, uint64_t off, uint8_t *data,
			   unsigned int len, bool is_write);

struct pci_bar {
	uint32_t size; /* a power of two, 0: no BAR */
	bool io;       /* an I/O BAR, else 32-bit memory */
	pci_bar_fn fn;
};

/*
 * One function on bus 0. The device fills the identity bytes of cfg[],
 * the writable bits in wmask[] and its BARs before pci_register(); the
 * bus owns the BAR registers' masks and the capability chain.
 */
struct pci_dev {
	struct vm *vm;
	uint8_t devfn;
	uint8_t cfg[PCI_CONFIG_SIZE];
	uint8_t wmask[PCI_CONFIG_SIZE];
	struct pci_bar bar[PCI_NUM_BARS];
	uint8_t msi_cap; /* offset of the MSI capability, or 0 */
	bool intx_level;
	void *opaque;
};

/* The DMA remapper (an IOMMU): translates @iova of requester @sid for an
 * access of @len bytes, returns 0 and the physical address, or -1 (a
 * fault it has recorded). Called with pci_lock held. */
typedef int (*pci_dma_translate_fn)(uint16_t sid, uint64_t iova,
				    uint64_t len, bool is_write,
				    uint64_t *gpa);

/* Setup time, before the vCPUs start. */
int pci_init(struct vm *vm);
uint8_t pci_free_devfn(void);
int pci_register(struct pci_dev *d);
void pci_add_msi_cap(struct pci_dev *d, uint8_t off);
void pci_set_dma_translate(pci_dma_translate_fn fn);

/* Config cycles (what ports 0xcf8..0xcff do); any thread. */
void pci_config_address_write(uint32_t val);
uint32_t pci_config_address_read(void);
void pci_config_data(unsigned int byte, uint8_t *data, unsigned int len,
		     bool is_write);
/* A BAR access at guest physical / port address @addr; any thread. */
bool pci_bar_access(bool io, uint64_t addr, uint8_t *data,
		    unsigned int len, bool is_write);

/* Called with pci_lock held (from a BAR handler). */
void pci_set_irq(struct pci_dev *d, bool level);
bool pci_msi_enabled(const struct pci_dev *d);
void pci_msi_notify(struct pci_dev *d);
int pci_dma_rw(struct pci_dev *d, uint64_t addr, void *buf, uint64_t len,
	       bool to_device);
uint16_t pci_sid(const struct pci_dev *d);

#endif
