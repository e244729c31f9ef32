/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The local APIC and the IOAPIC as the guest sees them (Intel SDM vol. 3,
 * chapter "Advanced Programmable Interrupt Controller (APIC)"; the 82093AA
 * IOAPIC datasheet): register offsets, the fields of each register, and
 * the delivery modes an interrupt message carries. Part of the guest ABI
 * (guest_abi.h includes it): the VMM and the guests name every APIC
 * register and bit from here.
 *
 * Local APIC register layout. xAPIC: a 4 KiB page at IA32_APIC_BASE, one
 * 32-bit register every 16 bytes; x2APIC: MSR 0x800 + (offset >> 4)
 * (APIC_X2APIC_MSR), 64 bits for the ICR. What each holds:
 *
 *   offset  name         holds
 *   0x020   ID           the APIC ID (xAPIC: bits 31:24; x2APIC: 32 bits)
 *   0x030   VERSION      version (7:0), max LVT entry (23:16)
 *   0x080   TPR          task priority (7:4 class, 3:0 sub-class)
 *   0x090   APR          arbitration priority (not implemented: reads 0)
 *   0x0a0   PPR          processor priority: max(TPR, class in service)
 *   0x0b0   EOI          write: end the highest interrupt in service
 *   0x0c0   RRD          remote read (not implemented: reads 0)
 *   0x0d0   LDR          logical destination (xAPIC: bits 31:24)
 *   0x0e0   DFR          destination format (xAPIC only; flat: all ones)
 *   0x0f0   SVR          spurious interrupt vector, APIC software enable
 *   0x100   ISR0..7      in service, vectors 0..255, 32 a register
 *   0x180   TMR0..7      trigger mode of each vector (1: level)
 *   0x200   IRR0..7      requested, vectors 0..255
 *   0x280   ESR          error status
 *   0x2f0   LVT_CMCI     corrected machine check LVT (not implemented)
 *   0x300   ICR_LOW      interrupt command, bits 31:0 (x2APIC: all 64)
 *   0x310   ICR_HIGH     interrupt command, bits 63:32 (xAPIC only)
 *   0x320   LVT_TIMER    the local timer's LVT entry
 *   0x330   LVT_THERMAL  thermal sensor LVT
 *   0x340   LVT_PERF     performance counter LVT
 *   0x350   LVT_LINT0    local interrupt pin 0 (the PIC's INTR, ExtINT)
 *   0x360   LVT_LINT1    local interrupt pin 1 (NMI)
 *   0x370   LVT_ERROR    APIC error LVT
 *   0x380   TIMER_ICR    timer initial count (the SDM's TMICT)
 *   0x390   TIMER_CCR    timer current count (TMCCT), read-only
 *   0x3e0   TIMER_DCR    timer divide configuration (TDCR)
 *   0x3f0   SELF_IPI     x2APIC only: write a vector, a fixed self IPI
 */
#ifndef SYSIDLE_APIC_REGS_H
#define SYSIDLE_APIC_REGS_H

/* IA32_APIC_BASE: where the xAPIC page is, and the mode. */
#define MSR_IA32_APIC_BASE 0x1b
#define MSR_IA32_TSC_DEADLINE 0x6e0
#define APIC_BASE_BSP (1u << 8)     /* read-only: the boot CPU */
#define APIC_BASE_X2APIC (1u << 10) /* EXTD: x2APIC mode */
#define APIC_BASE_ENABLE (1u << 11) /* EN: the APIC is on */
#define APIC_BASE_RESERVED 0x2ffu   /* bits 9, 7:0 (and above MAXPHYADDR) */
#define APIC_PAGE_SIZE 0x1000       /* the xAPIC page, base 4 KiB aligned */
#define APIC_REG_OFFSET_MASK 0xff0  /* a register's offset in the page */

/* Register offsets (the table above). */
#define APIC_REG_ID 0x020
#define APIC_REG_VERSION 0x030
#define APIC_REG_TPR 0x080
#define APIC_REG_APR 0x090
#define APIC_REG_PPR 0x0a0
#define APIC_REG_EOI 0x0b0
#define APIC_REG_RRD 0x0c0
#define APIC_REG_LDR 0x0d0
#define APIC_REG_DFR 0x0e0
#define APIC_REG_SVR 0x0f0
#define APIC_REG_ISR 0x100 /* ISR0; ISRn at APIC_REG_ISR + n * 0x10 */
#define APIC_REG_TMR 0x180 /* TMR0 */
#define APIC_REG_IRR 0x200 /* IRR0 */
#define APIC_REG_ESR 0x280
#define APIC_REG_LVT_CMCI 0x2f0
#define APIC_REG_ICR_LOW 0x300
#define APIC_REG_ICR_HIGH 0x310
#define APIC_REG_LVT_TIMER 0x320
#define APIC_REG_LVT_THERMAL 0x330
#define APIC_REG_LVT_PERF 0x340
#define APIC_REG_LVT_LINT0 0x350
#define APIC_REG_LVT_LINT1 0x360
#define APIC_REG_LVT_ERROR 0x370
#define APIC_REG_TIMER_ICR 0x380
#define APIC_REG_TIMER_CCR 0x390
#define APIC_REG_TIMER_DCR 0x3e0
#define APIC_REG_SELF_IPI 0x3f0 /* x2APIC only */

#define APIC_REG_STRIDE 0x10  /* one register to the next */
#define APIC_VECTOR_BANKS 8   /* ISR, TMR, IRR: 8 registers of 32 vectors */
/* The 256-bit vector arrays ISR, TMR and IRR: register n of the array at
 * @reg0 holds vectors 32n..32n+31. */
#define APIC_REG_BANK(reg0, n) ((reg0) + (n) * APIC_REG_STRIDE)

/* x2APIC: register @reg as an MSR, and back. */
#define MSR_X2APIC_BASE 0x800
#define MSR_X2APIC_LAST 0x8ff
#define APIC_X2APIC_MSR(reg) (MSR_X2APIC_BASE + ((reg) >> 4))
#define APIC_X2APIC_REG(msr) (((msr) - MSR_X2APIC_BASE) << 4)

/* VERSION: this APIC's version (an integrated APIC, as KVM's); the
 * highest LVT entry's number in bits 23:16. */
#define APIC_VERSION 0x14
#define APIC_VERSION_MAX_LVT_SHIFT 16

/* ID and LDR: the xAPIC ID and logical ID are bits 31:24. The x2APIC LDR
 * is derived from the ID: cluster (ID 31:4) in bits 31:16, one bit of 16
 * (ID 3:0) in bits 15:0. */
#define APIC_ID_SHIFT 24
#define APIC_LDR_XAPIC_MASK 0xff000000u
#define APIC_LDR_X2APIC_CLUSTER_SHIFT 16
#define APIC_LDR_X2APIC_MEMBERS 0xffffu

/* DFR: bits 31:28 the model (1111: flat, 0000: cluster), 27:0 all ones. */
#define APIC_DFR_RESERVED_ONES 0x0fffffffu
#define APIC_DFR_FLAT 0xffffffffu /* the reset value */

/* TPR, PPR: the priority class is the vector's bits 7:4; CR8 is the
 * TPR's class. */
#define APIC_PRIORITY_MASK 0xffu
#define APIC_PRIORITY_CLASS 0xf0u
#define APIC_PRIORITY_CLASS_SHIFT 4

/* SVR */
#define APIC_SVR_VECTOR 0xffu           /* spurious vector; reset 0xff */
#define APIC_SVR_ENABLE (1u << 8)       /* APIC software enable */
#define APIC_SVR_FOCUS_OFF (1u << 9)    /* focus processor checking off */
#define APIC_SVR_WRITABLE (APIC_SVR_VECTOR | APIC_SVR_ENABLE | \
			   APIC_SVR_FOCUS_OFF)

/* ESR */
#define APIC_ESR_RECV_ILLEGAL_VECTOR (1u << 6)

/* Vectors: 8 bits in every message and LVT entry; 0..15 are reserved (a
 * message with one is an illegal vector). */
#define APIC_VECTOR_MASK 0xffu
#define APIC_VECTOR_FIRST_VALID 16
#define APIC_VECTOR_COUNT 256

/*
 * The delivery mode, bits 10:8 of the ICR, of an LVT entry (not the
 * timer's), of an IOAPIC redirection entry and of an MSI's data: one
 * encoding for all of them.
 */
#ifndef __ASSEMBLER__
enum apic_delivery_mode {
	APIC_DM_FIXED = 0,   /* the vector, to every destination */
	APIC_DM_LOWEST = 1,  /* the vector, to the lowest-priority one */
	APIC_DM_SMI = 2,     /* system management interrupt */
	APIC_DM_NMI = 4,     /* non-maskable interrupt, vector ignored */
	APIC_DM_INIT = 5,    /* INIT, vector ignored */
	APIC_DM_STARTUP = 6, /* start-up IPI, vector: the start page */
	APIC_DM_EXTINT = 7,  /* the vector from the 8259A (INTA cycle) */
};
#endif
#define APIC_DM_SHIFT 8
#define APIC_DM_MASK (7u << APIC_DM_SHIFT)
/* The delivery mode field holding @mode, and the mode in field @val. */
#define APIC_DM_FIELD(mode) ((unsigned int)(mode) << APIC_DM_SHIFT)
#define APIC_DM_OF(val) (((val) >> APIC_DM_SHIFT) & 7u)

/* Fields shared by the ICR, the LVT entries and the IOAPIC's entries. */
#define APIC_DEST_LOGICAL (1u << 11)  /* destination mode (ICR, RTE) */
#define APIC_SEND_PENDING (1u << 12)  /* delivery status, read-only */
#define APIC_POLARITY_LOW (1u << 13)  /* pin polarity (LVT LINTn, RTE) */
#define APIC_REMOTE_IRR (1u << 14)    /* level accepted (LVT LINTn, RTE) */
#define APIC_TRIGGER_LEVEL (1u << 15) /* trigger mode: level, else edge */

/* ICR */
#define APIC_ICR_DM_FIXED APIC_DM_FIELD(APIC_DM_FIXED)
#define APIC_ICR_DM_NMI APIC_DM_FIELD(APIC_DM_NMI)
#define APIC_ICR_DM_INIT APIC_DM_FIELD(APIC_DM_INIT)
#define APIC_ICR_DM_STARTUP APIC_DM_FIELD(APIC_DM_STARTUP)
#define APIC_ICR_LEVEL_ASSERT (1u << 14) /* level: assert, else de-assert */
/* Destination shorthand, bits 19:18: no shorthand (the destination
 * field), self, all including self, all excluding self. */
#define APIC_ICR_SHORTHAND_SHIFT 18
#define APIC_SHORTHAND_NONE 0u
#define APIC_SHORTHAND_SELF 1u
#define APIC_SHORTHAND_ALL 2u
#define APIC_SHORTHAND_ALL_BUT_SELF 3u
#define APIC_ICR_SHORTHAND_OF(val) (((val) >> APIC_ICR_SHORTHAND_SHIFT) & 3u)
#define APIC_ICR_DEST_SELF (APIC_SHORTHAND_SELF << APIC_ICR_SHORTHAND_SHIFT)
#define APIC_ICR_DEST_ALL (APIC_SHORTHAND_ALL << APIC_ICR_SHORTHAND_SHIFT)
#define APIC_ICR_DEST_ALL_BUT_SELF \
	(APIC_SHORTHAND_ALL_BUT_SELF << APIC_ICR_SHORTHAND_SHIFT)
/* xAPIC: the destination is ICR_HIGH bits 31:24 (x2APIC: ICR 63:32). */
#define APIC_ICR_HIGH_DEST_SHIFT 24
#define APIC_ICR_HIGH_DEST_MASK 0xff000000u

/* Destinations: an xAPIC ID is 8 bits, an x2APIC ID 32; all ones is the
 * broadcast. */
#define APIC_XAPIC_ID_MASK 0xffu
#define APIC_BROADCAST_XAPIC 0xffu
#define APIC_BROADCAST_X2APIC 0xffffffffu

/* LVT entries: vector, delivery mode (not the timer's), delivery status,
 * polarity, remote IRR and trigger mode (LINT0/1 only), the mask; the
 * timer's mode in bits 18:17. */
#define APIC_LVT_MASKED (1u << 16)
#define APIC_LVT_TIMER_MODE_SHIFT 17
#define APIC_LVT_TIMER_MODE (3u << APIC_LVT_TIMER_MODE_SHIFT)
#define APIC_LVT_TIMER_ONESHOT (0u << 17)
#define APIC_LVT_TIMER_PERIODIC (1u << 17)
#define APIC_LVT_TIMER_TSCDEADLINE (2u << 17)
/* What a write to a non-timer LVT entry keeps (remote IRR and the
 * delivery status are the APIC's). */
#define APIC_LVT_WRITABLE (APIC_VECTOR_MASK | APIC_DM_MASK | \
			   APIC_POLARITY_LOW | APIC_TRIGGER_LEVEL | \
			   APIC_LVT_MASKED)

/* TIMER_DCR: the divide value in bits 3, 1:0 (bit 2 is reserved); 0b111
 * is divide by 1, n divides by 2 << n. */
#define APIC_TDCR_MASK 0xbu
#define APIC_TDCR_DIV_1 0xbu

/*
 * The IOAPIC: two registers in its MMIO page, an index (IOREGSEL) and a
 * window (IOWIN) onto the register the index selects, and the EOI
 * register of version 0x20. The indexed registers: ID (bits 27:24),
 * version (bits 7:0, the highest redirection entry in 23:16),
 * arbitration ID, and one 64-bit redirection entry (RTE) per pin, as two
 * 32-bit halves from index 0x10.
 */
#define IOAPIC_MMIO_REGSEL 0x00
#define IOAPIC_MMIO_WIN 0x10
#define IOAPIC_MMIO_EOI 0x40 /* write: a vector's EOI (version 0x20) */
#define IOAPIC_REG_ID 0x00
#define IOAPIC_REG_VERSION 0x01
#define IOAPIC_REG_ARB 0x02
#define IOAPIC_REG_REDTBL 0x10
/* pin @pin's RTE: bits 31:0, bits 63:32 */
#define IOAPIC_REG_RTE_LO(pin) (IOAPIC_REG_REDTBL + 2 * (pin))
#define IOAPIC_REG_RTE_HI(pin) (IOAPIC_REG_REDTBL + 1 + 2 * (pin))
#define IOAPIC_ID_MASK 0x0f000000u
#define IOAPIC_VERSION_MAX_RTE_SHIFT 16
/* An RTE: vector (7:0), delivery mode (10:8), destination mode (11),
 * delivery status (12), polarity (13), remote IRR (14), trigger mode
 * (15), as in APIC messages; the mask (16) and the destination APIC ID
 * in bits 63:56. */
#define IOAPIC_RTE_MASKED (1u << 16)
#define IOAPIC_RTE_DEST_SHIFT 56

/*
 * A message-signalled interrupt to the local APICs (SDM "Message
 * Signalled Interrupts"): the address is 0xfeeXXXXX, destination ID in
 * bits 19:12, destination mode in bit 2; the data holds vector, delivery
 * mode and trigger mode as the ICR does.
 */
#define APIC_MSI_ADDR_BASE 0xfee00000u
#define APIC_MSI_ADDR_SHIFT 20 /* address bits 31:20 are 0xfee */
#define APIC_MSI_ADDR_DEST_SHIFT 12
#define APIC_MSI_ADDR_DEST_LOGICAL (1u << 2)

#endif
