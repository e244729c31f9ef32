/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The guest <-> VMM ABI: what a guest of this VMM may rely on. A PC subset,
 * the same one QEMU gives, so that one guest image runs under both. Shared
 * by vmm/ and guest-tools/ (and nothing else is shared between them but
 * apic_regs.h, the APIC registers, which this header includes).
 *
 * Boot: Multiboot v1, an ELF32 image; entry in 32-bit protected mode with
 * flat 4 GiB code and data segments, paging and interrupts off, EAX =
 * MULTIBOOT_BOOTLOADER_MAGIC and EBX = the physical address of the
 * multiboot information (flags: memory, memory map, command line, modules).
 */
#ifndef SYSIDLE_GUEST_ABI_H
#define SYSIDLE_GUEST_ABI_H

/* Multiboot v1. */
#define MULTIBOOT_HEADER_MAGIC 0x1BADB002u
#define MULTIBOOT_BOOTLOADER_MAGIC 0x2BADB002u
#define MULTIBOOT_SEARCH_BYTES 8192 /* header within the first 8 KiB */
#define MULTIBOOT_INFO_MEMORY 0x001u
#define MULTIBOOT_INFO_CMDLINE 0x004u
#define MULTIBOOT_INFO_MODS 0x008u
#define MULTIBOOT_INFO_MEM_MAP 0x040u

/* Guest physical memory map. */
#define GUEST_RAM_BASE 0x00000000u
#define GUEST_AP_TRAMPOLINE 0x00008000u /* SIPI vector 0x08 by convention */
#define GUEST_IOAPIC_BASE 0xfec00000u
#define GUEST_LAPIC_BASE 0xfee00000u
#define GUEST_MMIO_HOLE 0xc0000000u /* RAM above this is not mapped */

/* I/O ports. */
#define GUEST_PORT_PIC1 0x20         /* 8259A master (also 0x21) */
#define GUEST_PORT_PIT 0x40          /* accepted and ignored (0x40-0x43) */
#define GUEST_PORT_PIC2 0xa0         /* 8259A slave, on IR2 (also 0xa1) */
#define GUEST_PORT_DEBUG_EXIT 0xf4   /* isa-debug-exit: write = exit */
#define GUEST_PORT_COM1 0x3f8        /* 16550 UART, 8 ports, IRQ 4 */
#define GUEST_IRQ_COM1 4             /* ISA IRQ: PIC input, IOAPIC pin */
#define GUEST_PORT_FW_CFG_SEL 0x510  /* fw_cfg selector (16-bit write) */
#define GUEST_PORT_FW_CFG_DATA 0x511 /* fw_cfg data (8-bit read) */

/*
 * isa-debug-exit: a write of V to GUEST_PORT_DEBUG_EXIT ends the VM.
 * This VMM exits with status V (0 = success). QEMU exits with (V << 1) | 1,
 * so a guest that means success writes 0 and QEMU reports 1.
 */

/* fw_cfg keys (QEMU's numbering). */
#define FW_CFG_SIGNATURE 0x0000 /* "QEMU" */
#define FW_CFG_ID 0x0001        /* u32 LE: bit 0 = traditional interface */
#define FW_CFG_RAM_SIZE 0x0003  /* u64 LE, bytes */
#define FW_CFG_NB_CPUS 0x0005   /* u16 LE */
#define FW_CFG_FILE_DIR 0x0019  /* u32 BE count, then 64-byte entries */

/* CPUID hypervisor leaves. */
#define CPUID_HV_BASE 0x40000000u /* EAX = max leaf, EBX:ECX:EDX = signature */
#define CPUID_HV_FEATURES 0x40000001u /* EAX = SYSIDLE_HV_F_* bits */
#define CPUID_HV_TIMING 0x40000010u /* EAX = TSC kHz, EBX = APIC timer kHz
					 * (the VMware/QEMU timing leaf) */
/* "SysIdleVMM\0\0" as EBX, ECX, EDX (little endian). */
#define SYSIDLE_HV_SIGNATURE_EBX 0x49737953u /* "SysI" */
#define SYSIDLE_HV_SIGNATURE_ECX 0x56656c64u /* "dleV" */
#define SYSIDLE_HV_SIGNATURE_EDX 0x00004d4du /* "MM\0\0" */

/*
 * The paravirtual tick (CPUID_HV_FEATURES EAX bit SYSIDLE_HV_F_PVTICK).
 *
 * A vCPU asks the VMM for a periodic timekeeping tick by writing the vector
 * to MSR_SYSIDLE_PVTICK_VECTOR and then the rate in Hz (1..10000) to
 * MSR_SYSIDLE_PVTICK_HZ; writing 0 Hz stops it. Each vCPU has its own tick.
 * The tick is delivered like a fixed, edge-triggered LAPIC interrupt (the
 * guest EOIs it). In exchange the guest accepts that the VMM may suppress
 * it: under --sysidle a halted vCPU other than the timekeeper (vCPU 0) gets
 * no tick, and the timekeeper gets none while the whole VM is fully idle.
 * Suppressed ticks are counted, not lost: MSR_SYSIDLE_PVTICK_MISSED reads,
 * and clears, the number of this vCPU's tick periods that passed without a
 * tick being delivered. A guest that keeps jiffies adds 1 + MISSED at each
 * tick it takes (and reads MISSED when it wakes for another reason, if it
 * needs its jiffies then), so its jiffies always equal elapsed ticks.
 * A suppressed tick starts again after the vCPU's first exit to the VMM
 * once it is woken: at the latest, the EOI of the interrupt that woke it.
 * Unknown bits or out-of-range values raise #GP.
 */
#define SYSIDLE_HV_F_PVTICK (1u << 0)
#define MSR_SYSIDLE_PVTICK_HZ 0x53490000u
#define MSR_SYSIDLE_PVTICK_VECTOR 0x53490001u
#define MSR_SYSIDLE_PVTICK_MISSED 0x53490002u
#define SYSIDLE_PVTICK_MAX_HZ 10000u

/*
 * KVM's paravirtual EOI, KVM's own ABI (Linux's
 * Documentation/virt/kvm/x86/cpuid.rst and msr.rst), offered at the next
 * hypervisor leaf range, where guests that know KVM look for it (Linux
 * scans 0x40000000..0x4000ff00 for the signature), with --cpu +pv-eoi. A vCPU writes the guest physical address of a flag word (4-byte
 * aligned, in RAM), ORed with 1 (enable), to MSR_KVM_PV_EOI; 0 turns it
 * off, and INIT does too. Bit 0 of the word's first byte set means: the
 * interrupt in service may be ended by clearing that bit with one
 * instruction (btr) instead of an EOI write. The VMM sets it as the vCPU
 * enters the guest, only when the one interrupt in service has nothing
 * else to do at its EOI (edge-triggered, nothing pending behind it) and
 * takes it back at the next exit, performing the EOI there if the guest
 * cleared it. Fewer exits per interrupt; the EOI itself is seen by the VMM
 * at the next exit instead of at once.
 */
#define CPUID_KVM_PV_BASE 0x40000100u /* EAX max leaf, EBX:ECX:EDX "KVMKVMKVM\0\0\0" */
#define CPUID_KVM_PV_FEATURES 0x40000101u /* EAX: KVM_PV_F_* bits */
#define KVM_PV_SIGNATURE_EBX 0x4b4d564bu /* "KVMK" */
#define KVM_PV_SIGNATURE_ECX 0x564b4d56u /* "VMKV" */
#define KVM_PV_SIGNATURE_EDX 0x0000004du /* "M\0\0\0" */
#define KVM_PV_F_EOI (1u << 6) /* KVM_FEATURE_PV_EOI */
#define MSR_KVM_PV_EOI 0x4b564d04u /* MSR_KVM_PV_EOI_EN */
#define KVM_PV_EOI_ENABLE 1u
#define KVM_PV_EOI_PENDING 1u /* bit 0 of the flag */

/* The local APIC (both modes) and the IOAPIC: their registers. */
#include "apic_regs.h"

/* The local APIC timer counts at this rate with a divide of 1 (as KVM's
 * in-kernel APIC: 1 ns per count); CPUID_HV_TIMING reports it too. */
#define GUEST_APIC_TIMER_HZ 1000000000ull

#endif
