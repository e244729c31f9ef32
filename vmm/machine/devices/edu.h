/* SPDX-License-Identifier: GPL-2.0-only */
/* QEMU's edu PCI device: its registers and state (see edu.c). */
#ifndef VMM_MACHINE_DEVICES_EDU_H
#define VMM_MACHINE_DEVICES_EDU_H

#include <stdbool.h>
#include <stdint.h>

#include "machine/pci.h"

#define EDU_BAR_SIZE (1u << 20)
#define EDU_DMA_BUF_ADDR 0x40000u
#define EDU_DMA_BUF_SIZE 4096u

enum edu_reg {
	EDU_REG_ID = 0x00,
	EDU_REG_ALIVE = 0x04,
	EDU_REG_FACTORIAL = 0x08,
	EDU_REG_STATUS = 0x20,
	EDU_REG_IRQ_STATUS = 0x24,
	EDU_REG_IRQ_RAISE = 0x60,
	EDU_REG_IRQ_ACK = 0x64,
	EDU_REG_DMA_SRC = 0x80,
	EDU_REG_DMA_DST = 0x88,
	EDU_REG_DMA_COUNT = 0x90,
	EDU_REG_DMA_CMD = 0x98,
};

struct edu {
	struct pci_dev pci;
	uint32_t alive, fact, status, irq_status;
	uint64_t dma_src, dma_dst, dma_count, dma_cmd;
	uint8_t buf[EDU_DMA_BUF_SIZE];
};

void edu_setup(struct edu *e, uint8_t devfn);
void edu_mmio(struct edu *e, uint64_t off, uint8_t *data, unsigned int len,
	      bool is_write);

#endif
