/* SPDX-License-Identifier: GPL-2.0-only */
/* The ACPI PM registers (acpi_pm.c): state and register logic, apart from
 * the bus so that they can be driven without KVM. */
#ifndef VMM_MACHINE_DEVICES_ACPI_PM_H
#define VMM_MACHINE_DEVICES_ACPI_PM_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

/* PM1_STS / PM1_EN bits (ACPI 6.x, 4.8.3.1) */
#define PM1_TMR (1u << 0)
#define PM1_GBL (1u << 5)
#define PM1_PWRBTN (1u << 8)
#define PM1_SLPBTN (1u << 9)
#define PM1_RTC (1u << 10)
#define PM1_STS_WAK (1u << 15)
/* PM1_CNT bits (4.8.3.2) */
#define PM1_CNT_SCI_EN (1u << 0)
#define PM1_CNT_BM_RLD (1u << 1)
#define PM1_CNT_GBL_RLS (1u << 2)
#define PM1_CNT_SLP_TYP_SHIFT 10
#define PM1_CNT_SLP_TYP (7u << PM1_CNT_SLP_TYP_SHIFT)
#define PM1_CNT_SLP_EN (1u << 13)

/* What a register access asks of the machine, done by the caller once
 * the device's lock is dropped. */
enum acpi_pm_action {
	ACPI_PM_NONE,
	ACPI_PM_SLEEP_S3,
	ACPI_PM_POWER_OFF,
};

struct acpi_pm {
	pthread_mutex_t lock; /* guards the rest; taken before the IOAPIC's */
	uint16_t sts, en, cnt; /* sts without TMR_STS (from the timer) */
	uint64_t tmr_base_ns;  /* the timer reads 0 at this host time */
	uint64_t tmr_sts_ticks; /* TMR_STS: the MSB changed since then */
	bool asleep;           /* S3 entered, not yet woken */
	bool sci;              /* the SCI line's level */
};

/* Callers below hold pm->lock; @now is the host's monotonic time. */
void acpi_pm_reset(struct acpi_pm *pm, uint64_t now);
uint32_t acpi_pm_timer(const struct acpi_pm *pm, uint64_t now);
enum acpi_pm_action acpi_pm_access(struct acpi_pm *pm, uint64_t off,
				   uint8_t *data, unsigned int len,
				   bool is_write, uint64_t now);
/* The RTC raised its alarm interrupt: RTC_STS; returns true when this
 * wakes the sleeping machine (WAK_STS set, asleep no more). */
bool acpi_pm_alarm(struct acpi_pm *pm);

#endif
