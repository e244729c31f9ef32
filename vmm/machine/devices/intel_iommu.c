/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Intel VT-d remapping hardware at 0xfed90000, as QEMU's intel-iommu
 * with 39-bit guest addresses and interrupt remapping in xAPIC mode:
 * root and context tables and second-level page tables for the PCI
 * devices' DMA (legacy mode, nothing cached, so every invalidation is
 * complete at once), one fault recording register, register-based and
 * queued invalidation (invalidation wait writes its status and raises its
 * event), and an interrupt remapping table for MSIs.
 */
#include <inttypes.h>
#include <pthread.h>
#include <string.h>

#include "machine/bus.h"
#include "machine/devices/devices.h"
#include "machine/devices/intel_iommu.h"
#include "machine/irq.h"
#include "machine/pci.h"
#include "machine/vcpu.h"
#include "machine/vm.h"

#define VTD_VERSION 0x10 /* 1.0 */
#define VTD_FRCD_UNITS (VTD_FRCD / 16)
#define VTD_IVA_UNITS (VTD_IVA / 16)
#define VTD_CAP_VALUE                                                   \
	(2ull /* ND: 16-bit domain ids */ | 0x2ull << 8 /* SAGAW 39 */ | \
	 (uint64_t)(VTD_AW - 1) << 16 /* MGAW */ |                       \
	 (uint64_t)VTD_FRCD_UNITS << 24 /* FRO */ |                      \
	 3ull << 34 /* SLLPS: 2M, 1G */)
#define VTD_ECAP_VALUE                                                  \
	(1ull << 1 /* QI */ | 1ull << 3 /* IR */ |                      \
	 (uint64_t)VTD_IVA_UNITS << 8 /* IRO */ | 0xfull << 20 /* MHMV */)
#define ADDR_MASK 0x000ffffffffff000ull

/* Fault reasons. */
enum {
	FR_ROOT_NOT_PRESENT = 0x1, FR_CTX_NOT_PRESENT = 0x2,
	FR_CTX_INVALID = 0x3, FR_ADDR_BEYOND_AW = 0x4, FR_WRITE = 0x5,
	FR_READ = 0x6, FR_PTE_ACCESS = 0x7, FR_ROOT_ACCESS = 0x8,
	FR_CTX_ACCESS = 0x9, FR_PTE_RESERVED = 0xc,
	FR_IR_INDEX = 0x21, FR_IRTE_NOT_PRESENT = 0x22, FR_IRT_ACCESS = 0x23,
	FR_IRTE_RESERVED = 0x24, FR_IR_COMPAT_BLOCKED = 0x25,
	FR_IR_SID = 0x26,
};

/* Any caller of the functions below holds the device's lock (or owns @s
 * alone, as a test does). */

static bool vtd_load(struct vtd *s, uint64_t gpa, void *buf, size_t len)
{
	void *p = guest_ptr(s->vm, gpa, len);

	if (!p)
		return false;
	memcpy(buf, p, len);
	return true;
}

/* A fault event or invalidation completion event: a message that is not
 * itself remapped. */
static void vtd_event(struct vtd *s, uint32_t addr, uint32_t uaddr,
		      uint32_t data)
{
	struct irq_msg m;

	if (irq_msi_decode((uint64_t)uaddr << 32 | addr, data, &m))
		irq_send(s->vm, NULL, &m);
}

static void vtd_fault_event(struct vtd *s)
{
	if (s->fectl & VTD_FECTL_IP)
		return;
	s->fectl |= VTD_FECTL_IP;
	if (!(s->fectl & VTD_FECTL_IM))
		vtd_event(s, s->feaddr, s->feuaddr, s->fedata);
}

/* Records a primary fault of @reason for requester @sid: @info is the
 * page address (DMA) or the interrupt index << 48. */
static void vtd_record_fault(struct vtd *s, uint16_t sid, uint8_t reason,
			     uint64_t info, bool is_write)
{
	if (s->frcd[1] & (1ull << 63)) {
		s->fsts |= VTD_FSTS_PFO;
		return;
	}
	s->frcd[0] = info;
	s->frcd[1] = sid | (uint64_t)reason << 32 |
		     (uint64_t)!is_write << 62 | 1ull << 63;
	vtd_fault_event(s);
}

/* The context entry of @sid: 0, or a fault reason. */
static int vtd_context(struct vtd *s, uint16_t sid, uint64_t ce[2])
{
	uint64_t re[2];

	if (!vtd_load(s, (s->root & ADDR_MASK) + (sid >> 8) * 16, re, 16))
		return FR_ROOT_ACCESS;
	if (!(re[0] & 1))
		return FR_ROOT_NOT_PRESENT;
	if (!vtd_load(s, (re[0] & ADDR_MASK) + (sid & 0xff) * 16, ce, 16))
		return FR_CTX_ACCESS;
	if (!(ce[0] & 1))
		return FR_CTX_NOT_PRESENT;
	return 0;
}

/* Walks the second-level tables for @iova: 0 and @gpa, or a fault reason. */
static int vtd_walk(struct vtd *s, const uint64_t ce[2], uint64_t iova,
		    bool is_write, uint64_t *gpa)
{
	unsigned int aw = ce[1] & 7, levels = aw + 2;
	uint64_t table = ce[0] & ADDR_MASK, pte = 0;

	if ((ce[0] >> 2 & 3) != 0 || aw != 1) /* only 3-level translation */
		return FR_CTX_INVALID;
	if (iova >> VTD_AW)
		return FR_ADDR_BEYOND_AW;
	for (unsigned int level = levels; level > 0; level--) {
		unsigned int shift = 12 + 9 * (level - 1);

		if (!vtd_load(s, table + ((iova >> shift) & 0x1ff) * 8, &pte, 8))
			return FR_PTE_ACCESS;
		if (!(pte & (is_write ? 2 : 1)))
			return is_write ? FR_WRITE : FR_READ;
		if (level == 1 || (pte & (1u << 7))) {
			if (level > 3)
				return FR_PTE_RESERVED;
			*gpa = (pte & ADDR_MASK & ~((1ull << shift) - 1)) |
			       (iova & ((1ull << shift) - 1));
			return 0;
		}
		table = pte & ADDR_MASK;
	}
	return FR_PTE_ACCESS;
}

/*
 * A DMA access of @len bytes at @iova by @sid, inside one 4 KiB page:
 * returns 0 and the address in guest memory, or -1 after recording the
 * fault (unless the context entry disables fault reporting).
 */
int vtd_translate(struct vtd *s, uint16_t sid, uint64_t iova, uint64_t len,
		  bool is_write, uint64_t *gpa)
{
	uint64_t ce[2] = { 0, 0 };
	int r;

	(void)len;
	if (!(s->gsts & VTD_GCMD_TE)) {
		*gpa = iova;
		return 0;
	}
	r = vtd_context(s, sid, ce);
	if (!r)
		r = vtd_walk(s, ce, iova, is_write, gpa);
	if (!r)
		return 0;
	if (!(ce[0] & 2)) /* FPD */
		vtd_record_fault(s, sid, (uint8_t)r, iova & ~0xfffull,
				 is_write);
	return -1;
}

/* Checks the IRTE's source-id against @sid; true when it may use it. A
 * message without a requester id (the IOAPIC's, as on QEMU's machine) is
 * not checked: the DMAR names VTD_IOAPIC_SID for the IOAPIC, an OS puts
 * that in the IOAPIC's IRTEs, and any value there is accepted. */
static bool vtd_irte_sid_ok(const uint64_t irte[2], uint16_t sid)
{
	static const uint16_t sq_mask[4] = { 0xffff, 0xfffb, 0xfff9, 0xfff8 };
	uint16_t want = (uint16_t)irte[1];

	if (sid == IRQ_SID_NONE)
		return true;
	switch (irte[1] >> 18 & 3) {
	case 0: return true;
	case 1: return ((sid ^ want) & sq_mask[irte[1] >> 16 & 3]) == 0;
	case 2: return (sid >> 8) >= (want >> 8) && (sid >> 8) <= (want & 0xff);
	default: return false;
	}
}

/*
 * An interrupt request (an MSI's address and data) from @sid: 1 when
 * remapping is off (compatibility format passes), 0 with @m filled from
 * its IRTE, -1 when blocked (a fault recorded unless the IRTE says not).
 */
int vtd_remap(struct vtd *s, uint64_t addr, uint32_t data, uint16_t sid,
	      struct irq_msg *m)
{
	uint64_t irte[2] = { 0, 0 };
	unsigned int index;
	uint8_t reason;

	if (!(s->gsts & VTD_GCMD_IRE))
		return 1;
	if (!(addr & (1u << 4))) { /* compatibility format */
		if (s->gsts & VTD_GCMD_CFI)
			return 1;
		vtd_record_fault(s, sid, FR_IR_COMPAT_BLOCKED, 0, true);
		return -1;
	}
	index = (unsigned int)((addr >> 5) & 0x7fff) |
		(unsigned int)((addr >> 2) & 1) << 15;
	if (addr & (1u << 3)) /* SHV: the data holds a subhandle */
		index = (index + (data & 0xffff)) & 0xffff;
	if (index >= 2u << (s->irt & 0xf))
		reason = FR_IR_INDEX;
	else if (!vtd_load(s, (s->irt & ADDR_MASK) + index * 16ull, irte, 16))
		reason = FR_IRT_ACCESS;
	else if (!(irte[0] & 1))
		reason = FR_IRTE_NOT_PRESENT;
	else if (irte[0] & (1u << 15)) /* posted: not supported */
		reason = FR_IRTE_RESERVED;
	else if (!vtd_irte_sid_ok(irte, sid))
		reason = FR_IR_SID;
	else {
		bool eim = s->irt & (1u << 11);
		uint32_t dst = (uint32_t)(irte[0] >> 32);

		*m = (struct irq_msg){
			.dest = eim ? dst : (dst >> 8) & 0xff,
			.logical = irte[0] & (1u << 2),
			.trigger_level = irte[0] & (1u << 4),
			.mode = (uint8_t)(irte[0] >> 5 & 7),
			.vector = (uint8_t)(irte[0] >> 16),
			.x2apic = eim,
		};
		return 0;
	}
	if (!(irte[0] & 2)) /* FPD */
		vtd_record_fault(s, sid, reason, (uint64_t)index << 48, true);
	return -1;
}

/* Runs the invalidation queue from IQH up to IQT. */
static void vtd_run_queue(struct vtd *s)
{
	uint64_t qbase = s->iqa & ADDR_MASK;
	uint64_t entries = 256ull << (s->iqa & 7);

	while (s->iqh != s->iqt && !(s->fsts & VTD_FSTS_IQE)) {
		uint64_t d[2];
		uint8_t type;

		if (!vtd_load(s, qbase + (s->iqh >> 4) * 16, d, 16)) {
			s->fsts |= VTD_FSTS_IQE;
			break;
		}
		type = d[0] & 0xf;
		if (type == 5) { /* invalidation wait */
			if (d[0] & (1u << 5)) { /* status write */
				uint32_t status = (uint32_t)(d[0] >> 32);
				void *p = guest_ptr(s->vm, d[1] & ~3ull, 4);

				if (!p) {
					s->fsts |= VTD_FSTS_IQE;
					break;
				}
				memcpy(p, &status, 4);
			}
			if ((d[0] & (1u << 4)) && !(s->ics & 1)) {
				s->ics |= 1;
				s->iectl |= VTD_FECTL_IP;
				if (!(s->iectl & VTD_FECTL_IM))
					vtd_event(s, s->ieaddr, s->ieuaddr,
						  s->iedata);
			}
		} else if (type < 1 || type > 4) {
			/* context, IOTLB, device-TLB and interrupt entry
			 * invalidations have nothing cached to drop */
			s->fsts |= VTD_FSTS_IQE;
			break;
		}
		s->iqh = ((s->iqh >> 4) + 1) % entries << 4;
	}
	if (s->fsts & VTD_FSTS_IQE)
		vtd_fault_event(s);
}

static void vtd_command(struct vtd *s, uint32_t cmd)
{
	const uint32_t toggles = VTD_GCMD_TE | VTD_GCMD_QIE | VTD_GCMD_IRE |
				 VTD_GCMD_CFI;

	if (cmd & VTD_GCMD_SRTP) {
		s->root = s->rtaddr;
		s->gsts |= VTD_GCMD_SRTP;
	}
	if (cmd & VTD_GCMD_SIRTP) {
		s->irt = s->irta;
		s->gsts |= VTD_GCMD_SIRTP;
	}
	if ((cmd & VTD_GCMD_QIE) && !(s->gsts & VTD_GCMD_QIE))
		s->iqh = 0;
	/* QI can be turned off only when the queue is empty */
	if (!(cmd & VTD_GCMD_QIE) && (s->gsts & VTD_GCMD_QIE)) {
		if (s->iqh != s->iqt)
			cmd |= VTD_GCMD_QIE;
		else
			s->iqh = 0;
	}
	s->gsts = (s->gsts & ~toggles) | (cmd & toggles);
}

void vtd_reset(struct vtd *s, struct vm *vm)
{
	memset(s, 0, sizeof(*s));
	s->vm = vm;
	s->fectl = VTD_FECTL_IM;
	s->iectl = VTD_FECTL_IM;
}

static uint32_t hi(uint64_t v) { return (uint32_t)(v >> 32); }

static void set_lo(uint64_t *r, uint32_t v)
{
	*r = (*r & ~0xffffffffull) | v;
}

static void set_hi(uint64_t *r, uint32_t v)
{
	*r = (*r & 0xffffffffull) | (uint64_t)v << 32;
}

/* A 4-byte register read at @off (dword aligned); holes read 0. */
uint32_t vtd_read32(struct vtd *s, unsigned int off)
{
	switch (off) {
	case VTD_VER: return VTD_VERSION;
	case VTD_CAP: return (uint32_t)VTD_CAP_VALUE;
	case VTD_CAP + 4: return hi(VTD_CAP_VALUE);
	case VTD_ECAP: return (uint32_t)VTD_ECAP_VALUE;
	case VTD_ECAP + 4: return hi(VTD_ECAP_VALUE);
	case VTD_GSTS: return s->gsts;
	case VTD_RTADDR: return (uint32_t)s->rtaddr;
	case VTD_RTADDR + 4: return hi(s->rtaddr);
	case VTD_CCMD: return (uint32_t)s->ccmd;
	case VTD_CCMD + 4: return hi(s->ccmd);
	case VTD_FSTS:
		return s->fsts | (s->frcd[1] >> 63 ? VTD_FSTS_PPF : 0);
	case VTD_FECTL: return s->fectl;
	case VTD_FEDATA: return s->fedata;
	case VTD_FEADDR: return s->feaddr;
	case VTD_FEUADDR: return s->feuaddr;
	case VTD_IQH: return (uint32_t)s->iqh;
	case VTD_IQT: return (uint32_t)s->iqt;
	case VTD_IQA: return (uint32_t)s->iqa;
	case VTD_IQA + 4: return hi(s->iqa);
	case VTD_ICS: return s->ics;
	case VTD_IECTL: return s->iectl;
	case VTD_IEDATA: return s->iedata;
	case VTD_IEADDR: return s->ieaddr;
	case VTD_IEUADDR: return s->ieuaddr;
	case VTD_IRTA: return (uint32_t)s->irta;
	case VTD_IRTA + 4: return hi(s->irta);
	case VTD_IVA: return (uint32_t)s->iva;
	case VTD_IVA + 4: return hi(s->iva);
	case VTD_IOTLB: return (uint32_t)s->iotlb;
	case VTD_IOTLB + 4: return hi(s->iotlb);
	case VTD_FRCD: return (uint32_t)s->frcd[0];
	case VTD_FRCD + 4: return hi(s->frcd[0]);
	case VTD_FRCD + 8: return (uint32_t)s->frcd[1];
	case VTD_FRCD + 12: return hi(s->frcd[1]);
	default: return 0;
	}
}

/* Status bits the hardware clears when the event is handled (RW1C). */
static void vtd_clear_fault_status(struct vtd *s, uint32_t val)
{
	s->fsts &= ~(val & (VTD_FSTS_PFO | VTD_FSTS_IQE | 0x60u));
	if (!s->fsts && !(s->frcd[1] >> 63))
		s->fectl &= ~VTD_FECTL_IP;
}

/* A 4-byte register write at @off (dword aligned). */
void vtd_write32(struct vtd *s, unsigned int off, uint32_t val)
{
	switch (off) {
	case VTD_GCMD: vtd_command(s, val); break;
	case VTD_RTADDR: set_lo(&s->rtaddr, val & 0xfffff000u); break;
	case VTD_RTADDR + 4: set_hi(&s->rtaddr, val); break;
	case VTD_CCMD: set_lo(&s->ccmd, val); break;
	case VTD_CCMD + 4:
		/* ICC: done at once; the actual granularity is the one asked */
		set_hi(&s->ccmd, val & ~(1u << 31));
		s->ccmd = (s->ccmd & ~(3ull << 59)) | (s->ccmd >> 61 & 3) << 59;
		break;
	case VTD_FSTS: vtd_clear_fault_status(s, val); break;
	case VTD_FECTL:
		s->fectl = (s->fectl & ~VTD_FECTL_IM) | (val & VTD_FECTL_IM);
		if (!(s->fectl & VTD_FECTL_IM) && (s->fectl & VTD_FECTL_IP))
			vtd_event(s, s->feaddr, s->feuaddr, s->fedata);
		break;
	case VTD_FEDATA: s->fedata = val & 0xffff; break;
	case VTD_FEADDR: s->feaddr = val & ~3u; break;
	case VTD_FEUADDR: s->feuaddr = val; break;
	case VTD_IQT:
		s->iqt = val & 0x7fff0u;
		if (s->gsts & VTD_GCMD_QIE)
			vtd_run_queue(s);
		break;
	case VTD_IQA: set_lo(&s->iqa, val & 0xfffff007u); break;
	case VTD_IQA + 4: set_hi(&s->iqa, val); break;
	case VTD_ICS:
		s->ics &= ~(val & 1);
		if (!s->ics)
			s->iectl &= ~VTD_FECTL_IP;
		break;
	case VTD_IECTL:
		s->iectl = (s->iectl & ~VTD_FECTL_IM) | (val & VTD_FECTL_IM);
		if (!(s->iectl & VTD_FECTL_IM) && (s->iectl & VTD_FECTL_IP)) {
			vtd_event(s, s->ieaddr, s->ieuaddr, s->iedata);
			s->iectl &= ~VTD_FECTL_IP;
		}
		break;
	case VTD_IEDATA: s->iedata = val & 0xffff; break;
	case VTD_IEADDR: s->ieaddr = val & ~3u; break;
	case VTD_IEUADDR: s->ieuaddr = val; break;
	case VTD_IRTA: set_lo(&s->irta, val & 0xfffff80fu); break;
	case VTD_IRTA + 4: set_hi(&s->irta, val); break;
	case VTD_IVA: set_lo(&s->iva, val); break;
	case VTD_IVA + 4: set_hi(&s->iva, val); break;
	case VTD_IOTLB: set_lo(&s->iotlb, val); break;
	case VTD_IOTLB + 4:
		/* IVT: done at once, at the granularity asked */
		set_hi(&s->iotlb, val & ~(1u << 31));
		s->iotlb = (s->iotlb & ~(3ull << 57)) |
			   (s->iotlb >> 60 & 3) << 57;
		break;
	case VTD_FRCD + 12:
		if (val & (1u << 31)) {
			s->frcd[1] &= ~(1ull << 63);
			vtd_clear_fault_status(s, 0);
		}
		break;
	}
}

static struct {
	pthread_mutex_t lock; /* after the PCI and IOAPIC locks */
	struct vtd s;
} iommu = { .lock = PTHREAD_MUTEX_INITIALIZER };

static void vtd_mmio(struct vcpu *v, uint64_t off, uint8_t *data,
		     unsigned int len, bool is_write, void *opaque)
{
	uint32_t w[2] = { 0, 0 };

	(void)v; (void)opaque;
	if ((len != 4 && len != 8) || (off & (len - 1))) {
		if (!is_write)
			memset(data, 0, len);
		return;
	}
	pthread_mutex_lock(&iommu.lock);
	if (is_write) {
		memcpy(w, data, len);
		for (unsigned int i = 0; i < len / 4; i++)
			vtd_write32(&iommu.s, (unsigned int)off + 4 * i, w[i]);
	} else {
		for (unsigned int i = 0; i < len / 4; i++)
			w[i] = vtd_read32(&iommu.s, (unsigned int)off + 4 * i);
		memcpy(data, w, len);
	}
	pthread_mutex_unlock(&iommu.lock);
}

static int vtd_dma_hook(uint16_t sid, uint64_t iova, uint64_t len,
			bool is_write, uint64_t *gpa)
{
	int r;

	pthread_mutex_lock(&iommu.lock);
	r = vtd_translate(&iommu.s, sid, iova, len, is_write, gpa);
	pthread_mutex_unlock(&iommu.lock);
	return r;
}

static int vtd_remap_hook(uint64_t addr, uint32_t data, uint16_t sid,
			  struct irq_msg *m)
{
	int r;

	pthread_mutex_lock(&iommu.lock);
	r = vtd_remap(&iommu.s, addr, data, sid, m);
	pthread_mutex_unlock(&iommu.lock);
	return r;
}

int intel_iommu_init(struct vm *vm)
{
	vtd_reset(&iommu.s, vm);
	pci_set_dma_translate(vtd_dma_hook);
	irq_set_remap(vtd_remap_hook);
	return bus_register(BUS_MMIO, VTD_BASE, VTD_SIZE, vtd_mmio, NULL);
}
