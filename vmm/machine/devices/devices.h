/* SPDX-License-Identifier: GPL-2.0-only */
/* The PC devices, one per file: each registers its ports or MMIO range on
 * the bus at init, before any vCPU runs. */
#ifndef VMM_MACHINE_DEVICES_H
#define VMM_MACHINE_DEVICES_H

#include <stdbool.h>
#include <stdint.h>

#include "machine/vm.h"

int serial_init(struct vm *vm);     /* 16550 UART at 0x3f8, IRQ 4 */
int serial_input_start(void);       /* stdin -> the UART, its own thread */
void serial_input_stop(void);
/* The UART -> stdout (serial_out.c): a bounded buffer, its own writer
 * thread; put never blocks (full: the byte is dropped and counted); stop
 * flushes for at most 500 ms, reports the dropped bytes on stderr. */
int serial_output_start(void);
void serial_output_put(uint8_t c);
void serial_output_stop(void);
uint64_t serial_output_dropped(void);
int debug_exit_init(struct vm *vm); /* isa-debug-exit at 0xf4 */
int fw_cfg_init(struct vm *vm);     /* fw_cfg at 0x510/0x511 */
int legacy_init(struct vm *vm);     /* PIT ports, ignored */
int ioapic_init(struct vm *vm);     /* IOAPIC at 0xfec00000 */
void ioapic_set_irq(unsigned int pin, bool level);
void ioapic_eoi(uint8_t vector);
int pic_init(struct vm *vm);        /* 8259A pair at 0x20, 0xa0; ELCR */
void pic_set_irq(unsigned int irq, bool level);
bool pic_intr(void);                /* INTR, to the BSP's LINT0 */
uint8_t pic_intack(void);           /* INTA: the vector */
/* QEMU's pc-testdev (--device pc-testdev): 0xe0, 0xe4, 0xe8, IRQ lines at
 * 0x2000, iomem at 0xff000000. */
int pc_testdev_init(struct vm *vm);
int lapic_init(struct vm *vm);      /* local APIC MMIO at 0xfee00000 */
void ioapic_reset(void);            /* platform reset (S3 resume) */
int acpi_pm_init(struct vm *vm);    /* ACPI PM registers at 0x600 */
void acpi_pm_rtc_alarm(void);       /* the RTC's alarm interrupt fired */
int rtc_init(struct vm *vm);        /* CMOS RTC at 0x70/0x71, IRQ 8 */
bool rtc_nmi_masked(void);          /* port 0x70 bit 7: NMI disabled */
int q35_host_init(struct vm *vm);   /* PCI host bridge at 00:00.0 */
int edu_init(struct vm *vm);        /* QEMU's edu device, next free slot */
int intel_iommu_init(struct vm *vm); /* VT-d registers at 0xfed90000 */

#endif
