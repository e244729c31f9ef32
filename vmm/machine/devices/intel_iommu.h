/* SPDX-License-Identifier: GPL-2.0-only */
/* Intel VT-d remapping hardware: registers and state (see intel_iommu.c). */
#ifndef VMM_MACHINE_DEVICES_INTEL_IOMMU_H
#define VMM_MACHINE_DEVICES_INTEL_IOMMU_H

#include <stdbool.h>
#include <stdint.h>

#include "machine/irq.h"

struct vm;

#define VTD_BASE 0xfed90000u
#define VTD_SIZE 0x1000u
#define VTD_AW 39 /* guest address width: CAP.MGAW is VTD_AW - 1 */
/* The IOAPIC's source-id as the DMAR's device scope names it: bus 0xff,
 * device 0, function 0 (QEMU's q35 path). The IOAPIC's own messages carry
 * no requester id (IRQ_SID_NONE), as on QEMU, so an IRTE's source-id is
 * not checked against it: see vtd_irte_sid_ok. */
#define VTD_IOAPIC_SID 0xff00u

enum vtd_reg {
	VTD_VER = 0x00, VTD_CAP = 0x08, VTD_ECAP = 0x10, VTD_GCMD = 0x18,
	VTD_GSTS = 0x1c, VTD_RTADDR = 0x20, VTD_CCMD = 0x28, VTD_FSTS = 0x34,
	VTD_FECTL = 0x38, VTD_FEDATA = 0x3c, VTD_FEADDR = 0x40,
	VTD_FEUADDR = 0x44, VTD_IQH = 0x80, VTD_IQT = 0x88, VTD_IQA = 0x90,
	VTD_ICS = 0x9c, VTD_IECTL = 0xa0, VTD_IEDATA = 0xa4,
	VTD_IEADDR = 0xa8, VTD_IEUADDR = 0xac, VTD_IRTA = 0xb8,
	VTD_IVA = 0xf0, VTD_IOTLB = 0xf8, VTD_FRCD = 0x220,
};

/* Global command / status bits. */
#define VTD_GCMD_TE (1u << 31)
#define VTD_GCMD_SRTP (1u << 30)
#define VTD_GCMD_SFL (1u << 29)
#define VTD_GCMD_WBF (1u << 27)
#define VTD_GCMD_QIE (1u << 26)
#define VTD_GCMD_IRE (1u << 25)
#define VTD_GCMD_SIRTP (1u << 24)
#define VTD_GCMD_CFI (1u << 23)

/* Fault status bits. */
#define VTD_FSTS_PFO (1u << 0)
#define VTD_FSTS_PPF (1u << 1)
#define VTD_FSTS_IQE (1u << 4)
#define VTD_FECTL_IM (1u << 31)
#define VTD_FECTL_IP (1u << 30)

struct vtd {
	struct vm *vm;
	uint32_t gsts, fsts, fectl, fedata, feaddr, feuaddr;
	uint32_t ics, iectl, iedata, ieaddr, ieuaddr;
	uint64_t rtaddr, root;    /* written, and latched by SRTP */
	uint64_t irta, irt;       /* written, and latched by SIRTP */
	uint64_t ccmd, iva, iotlb;
	uint64_t iqh, iqt, iqa;
	uint64_t frcd[2];         /* the one fault recording register */
};

void vtd_reset(struct vtd *s, struct vm *vm);
uint32_t vtd_read32(struct vtd *s, unsigned int off);
void vtd_write32(struct vtd *s, unsigned int off, uint32_t val);
int vtd_translate(struct vtd *s, uint16_t sid, uint64_t iova, uint64_t len,
		  bool is_write, uint64_t *gpa);
int vtd_remap(struct vtd *s, uint64_t addr, uint32_t data, uint16_t sid,
	      struct irq_msg *m);

#endif
