/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The ACPI platform the guest sees: where the tables live (acpi.c), the
 * PM register block (devices/acpi_pm.c) and the sleep states the DSDT
 * names (sleep.c).
 */
#ifndef VMM_MACHINE_ACPI_H
#define VMM_MACHINE_ACPI_H

#include <stdint.h>

struct vm;

/* The tables: the BIOS read-only area, reserved in the memory map. The
 * RSDP is its first 16-byte paragraph, the FACS the first 64-byte block
 * after it. */
#define ACPI_AREA_BASE 0xe0000u
#define ACPI_AREA_END 0x100000u
#define ACPI_RSDP_ADDR ACPI_AREA_BASE
#define ACPI_FACS_ADDR (ACPI_AREA_BASE + 0x40)

/* FACS fields the sleep code reads (ACPI 6.x, 5.2.10). */
#define ACPI_FACS_WAKING_VECTOR 12   /* u32, real mode */
#define ACPI_FACS_X_WAKING_VECTOR 24 /* u64, 32-bit protected mode */

/* The PM register block, PIIX4/ICH9 style at port 0x600. */
#define ACPI_PM_BASE 0x600u
#define ACPI_PM_LEN 0x40u
#define ACPI_PM1_EVT 0x0 /* PM1_STS (16 bits), then PM1_EN (16 bits) */
#define ACPI_PM1_CNT 0x4 /* 16 bits */
#define ACPI_PM_TMR 0x8  /* 32 bits, read-only */
#define ACPI_PM_TMR_HZ 3579545ull
#define ACPI_PM_TMR_BITS 32 /* TMR_VAL_EXT in the FADT */
#define ACPI_SCI_IRQ 9

/* SLP_TYP values, as the DSDT's \_S3 and \_S5 packages give them. */
#define ACPI_SLP_TYP_S5 0
#define ACPI_SLP_TYP_S3 1

/* acpi.c: writes every table into guest RAM. Caller: the loader, after
 * the kernel, its modules and the multiboot info are placed (none of them
 * overlaps the area). */
int acpi_tables_build(struct vm *vm);

/* sleep.c: S3. sleep_enter: any vCPU thread holding no vCPU lock; every
 * vCPU stops running guest code and waits (as for SIPI) with its local
 * APIC reset. sleep_resume: any thread holding no vCPU lock; the boot
 * vCPU starts at the FACS waking vector, the others keep waiting for
 * SIPI. */
void sleep_enter(struct vm *vm);
void sleep_resume(struct vm *vm);

#endif
