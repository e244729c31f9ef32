/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * ACPI fixed-hardware PM registers at port 0x600 (the PIIX4/ICH9 layout):
 * PM1a event block (PM1_STS, PM1_EN), PM1a control block, and the 32-bit
 * PM timer at 3.579545 MHz, read from the host's monotonic clock. The SCI
 * is IRQ 9. A sleep request (SLP_EN) enters S3 or powers off.
 */
#include <pthread.h>
#include <string.h>

#include "base/error.h"
#include "base/time.h"
#include "machine/acpi.h"
#include "machine/bus.h"
#include "machine/devices/acpi_pm.h"
#include "machine/devices/devices.h"
#include "machine/irq.h"
#include "machine/vcpu.h"
#include "machine/vm.h"

#define PM1_STS_W1C (PM1_GBL | PM1_PWRBTN | PM1_SLPBTN | PM1_RTC | PM1_STS_WAK)
#define PM1_EN_BITS (PM1_TMR | PM1_GBL | PM1_PWRBTN | PM1_SLPBTN | PM1_RTC)
#define PM1_CNT_RW (PM1_CNT_BM_RLD | PM1_CNT_GBL_RLS | PM1_CNT_SLP_TYP)
#define PM1_SCI_EVENTS (PM1_TMR | PM1_GBL | PM1_PWRBTN | PM1_SLPBTN | PM1_RTC)
#define PM_REGS_LEN 12

static struct {
	struct acpi_pm pm;
	struct vm *vm;
} pmdev = { .pm.lock = PTHREAD_MUTEX_INITIALIZER };

/* Timer ticks since pm->tmr_base_ns, not wrapped. */
static uint64_t pm_ticks(const struct acpi_pm *pm, uint64_t now)
{
	uint64_t ns = now > pm->tmr_base_ns ? now - pm->tmr_base_ns : 0;

	return (uint64_t)((unsigned __int128)ns * ACPI_PM_TMR_HZ / 1000000000u);
}

/* Caller holds pm->lock. */
uint32_t acpi_pm_timer(const struct acpi_pm *pm, uint64_t now)
{
	uint64_t t = pm_ticks(pm, now);

	return (uint32_t)(t & ((1ull << ACPI_PM_TMR_BITS) - 1));
}

/* PM1_STS as read: TMR_STS is set once the timer's top bit has changed
 * since it was last cleared. Caller holds pm->lock. */
static uint16_t pm_sts(const struct acpi_pm *pm, uint64_t now)
{
	bool tmr = (pm_ticks(pm, now) >> (ACPI_PM_TMR_BITS - 1)) !=
		   (pm->tmr_sts_ticks >> (ACPI_PM_TMR_BITS - 1));

	return (uint16_t)(pm->sts | (tmr ? PM1_TMR : 0));
}

/* Drives IRQ 9 to the SCI's level (a timer carry raises it only once the
 * status is read: no timer runs for it). Caller holds pm->lock. */
static void pm_update_sci(struct acpi_pm *pm, uint64_t now)
{
	bool level = (pm->cnt & PM1_CNT_SCI_EN) &&
		     (pm_sts(pm, now) & pm->en & PM1_SCI_EVENTS);

	if (level != pm->sci) {
		pm->sci = level;
		irq_isa_set(ACPI_SCI_IRQ, level);
	}
}

/* Power-on state: no legacy mode, so SCI_EN is set and stays set. Caller
 * holds pm->lock (or no other thread runs yet). */
void acpi_pm_reset(struct acpi_pm *pm, uint64_t now)
{
	pm->sts = 0;
	pm->en = 0;
	pm->cnt = PM1_CNT_SCI_EN;
	pm->tmr_base_ns = now;
	pm->tmr_sts_ticks = 0;
	pm->asleep = false;
	pm->sci = false;
}

static enum acpi_pm_action pm_write_cnt(struct acpi_pm *pm, uint16_t val,
					uint16_t mask)
{
	unsigned int typ;

	pm->cnt = (uint16_t)((pm->cnt & ~(mask & PM1_CNT_RW)) |
			     (val & mask & PM1_CNT_RW));
	if (!(val & mask & PM1_CNT_SLP_EN))
		return ACPI_PM_NONE;
	typ = (pm->cnt & PM1_CNT_SLP_TYP) >> PM1_CNT_SLP_TYP_SHIFT;
	if (typ == ACPI_SLP_TYP_S5)
		return ACPI_PM_POWER_OFF;
	if (typ == ACPI_SLP_TYP_S3 && !pm->asleep) {
		pm->asleep = true;
		return ACPI_PM_SLEEP_S3;
	}
	return ACPI_PM_NONE; /* a sleep type the DSDT does not offer */
}

/*
 * One access of @len bytes at @off in the block, in any width: the bytes
 * written update the 16-bit registers they fall in. Caller holds
 * pm->lock. Returns what the machine must do next.
 */
enum acpi_pm_action acpi_pm_access(struct acpi_pm *pm, uint64_t off,
				   uint8_t *data, unsigned int len,
				   bool is_write, uint64_t now)
{
	uint8_t regs[PM_REGS_LEN] = { 0 }, wmask[PM_REGS_LEN] = { 0 };
	uint16_t sts = pm_sts(pm, now), val, mask;
	uint32_t tmr = acpi_pm_timer(pm, now);
	enum acpi_pm_action act = ACPI_PM_NONE;

	memcpy(regs + ACPI_PM1_EVT, &sts, 2);
	memcpy(regs + ACPI_PM1_EVT + 2, &pm->en, 2);
	memcpy(regs + ACPI_PM1_CNT, &pm->cnt, 2);
	memcpy(regs + ACPI_PM_TMR, &tmr, 4);
	for (unsigned int i = 0; i < len; i++) {
		uint64_t o = off + i;

		if (!is_write)
			data[i] = o < PM_REGS_LEN ? regs[o] : 0;
		else if (o < PM_REGS_LEN) {
			regs[o] = data[i];
			wmask[o] = 0xff;
		}
	}
	if (!is_write)
		return ACPI_PM_NONE;

	memcpy(&val, regs + ACPI_PM1_EVT, 2);
	memcpy(&mask, wmask + ACPI_PM1_EVT, 2);
	pm->sts &= (uint16_t)~(val & mask & PM1_STS_W1C);
	if (val & mask & PM1_TMR)
		pm->tmr_sts_ticks = pm_ticks(pm, now);
	memcpy(&val, regs + ACPI_PM1_EVT + 2, 2);
	memcpy(&mask, wmask + ACPI_PM1_EVT + 2, 2);
	pm->en = (uint16_t)((pm->en & ~mask) | (val & mask & PM1_EN_BITS));
	memcpy(&val, regs + ACPI_PM1_CNT, 2);
	memcpy(&mask, wmask + ACPI_PM1_CNT, 2);
	if (mask)
		act = pm_write_cnt(pm, val, mask);
	pm_update_sci(pm, now);
	return act;
}

/* Caller holds pm->lock. */
bool acpi_pm_alarm(struct acpi_pm *pm)
{
	bool wake = pm->asleep && (pm->en & PM1_RTC);

	pm->sts |= PM1_RTC;
	if (wake) {
		pm->sts |= PM1_STS_WAK;
		pm->asleep = false;
	}
	pm_update_sci(pm, now_ns());
	return wake;
}

/* Any thread holding no vCPU lock, the RTC's lock at most. The resume is
 * posted under pm.lock, so that it always follows the sleep it ends. */
void acpi_pm_rtc_alarm(void)
{
	pthread_mutex_lock(&pmdev.pm.lock);
	if (acpi_pm_alarm(&pmdev.pm))
		sleep_resume(pmdev.vm);
	pthread_mutex_unlock(&pmdev.pm.lock);
}

static void acpi_pm_io(struct vcpu *v, uint64_t off, uint8_t *data,
		       unsigned int len, bool is_write, void *opaque)
{
	enum acpi_pm_action act;

	(void)v; (void)opaque;
	pthread_mutex_lock(&pmdev.pm.lock);
	act = acpi_pm_access(&pmdev.pm, off, data, len, is_write, now_ns());
	if (act == ACPI_PM_SLEEP_S3)
		sleep_enter(pmdev.vm); /* under pm.lock: see acpi_pm_rtc_alarm */
	pthread_mutex_unlock(&pmdev.pm.lock);
	if (act == ACPI_PM_POWER_OFF)
		vm_stop(0);
}

int acpi_pm_init(struct vm *vm)
{
	pmdev.vm = vm;
	acpi_pm_reset(&pmdev.pm, now_ns());
	return bus_register(BUS_PIO, ACPI_PM_BASE, ACPI_PM_LEN, acpi_pm_io,
			    NULL);
}
