/* SPDX-License-Identifier: GPL-2.0-only */
/* The ACPI PM registers: the PM timer's rate against a fake clock, the
 * write-1-to-clear status, the enables, SLP_EN for S3 and S5, the RTC
 * alarm's wake-up. */
#include <check.h>
#include <stdlib.h>

#include "base/error.h"
#include "base/time.h"
#include "machine/acpi.h"
#include "machine/bus.h"
#include "machine/devices/acpi_pm.h"
#include "machine/devices/devices.h"
#include "machine/irq.h"
#include "machine/vm.h"

/* What acpi_pm.c calls outside its file. */
static uint64_t fake_now;
static int sci_level = -1;
static int sleeps, resumes, stops;
uint64_t now_ns(void) { return fake_now; }
void irq_isa_set(unsigned int pin, bool level)
{
	ck_assert_uint_eq(pin, ACPI_SCI_IRQ);
	sci_level = level;
}
void sleep_enter(struct vm *vm) { (void)vm; sleeps++; }
void sleep_resume(struct vm *vm) { (void)vm; resumes++; }
void vm_stop(int status) { (void)status; stops++; }
int bus_register(enum bus_space space, uint64_t base, uint64_t len,
		 bus_handler fn, void *opaque)
{
	(void)space; (void)base; (void)len; (void)fn; (void)opaque;
	return 0;
}

static struct acpi_pm pm;

static void setup(void)
{
	fake_now = 1000000000ull;
	sci_level = -1;
	sleeps = resumes = stops = 0;
	acpi_pm_reset(&pm, fake_now);
}

static uint32_t rd(unsigned int off, unsigned int len)
{
	uint8_t b[4] = { 0 };
	uint32_t v = 0;

	ck_assert_int_eq(acpi_pm_access(&pm, off, b, len, false, fake_now),
			 ACPI_PM_NONE);
	for (unsigned int i = 0; i < len; i++)
		v |= (uint32_t)b[i] << (8 * i);
	return v;
}

static enum acpi_pm_action wr(unsigned int off, unsigned int len, uint32_t v)
{
	uint8_t b[4];

	for (unsigned int i = 0; i < 4; i++)
		b[i] = (uint8_t)(v >> (8 * i));
	return acpi_pm_access(&pm, off, b, len, true, fake_now);
}

START_TEST(test_timer_rate)
{
	uint32_t t0 = rd(ACPI_PM_TMR, 4), t1;

	ck_assert_uint_eq(t0, 0);
	fake_now += 1000000000ull; /* one second: 3579545 ticks */
	t1 = rd(ACPI_PM_TMR, 4);
	ck_assert_uint_eq(t1 - t0, 3579545);
	fake_now += 1000; /* 1 us: 3 ticks (3.58, truncated) */
	ck_assert_uint_eq(rd(ACPI_PM_TMR, 4) - t1, 3);
	/* a write does not move it */
	wr(ACPI_PM_TMR, 4, 0);
	ck_assert_uint_eq(rd(ACPI_PM_TMR, 4) - t1, 3);
}
END_TEST

START_TEST(test_timer_wraps_and_tmr_sts)
{
	/* 2^31 ticks: the top bit of the 32-bit counter flips, TMR_STS */
	uint64_t half = (1ull << 31) * 1000000000ull / ACPI_PM_TMR_HZ + 1;

	ck_assert_uint_eq(rd(ACPI_PM1_EVT, 2) & PM1_TMR, 0);
	fake_now += half;
	ck_assert_uint_eq(rd(ACPI_PM1_EVT, 2) & PM1_TMR, PM1_TMR);
	ck_assert_uint_ge(rd(ACPI_PM_TMR, 4), 1u << 31);
	wr(ACPI_PM1_EVT, 2, PM1_TMR);
	ck_assert_uint_eq(rd(ACPI_PM1_EVT, 2) & PM1_TMR, 0);
	fake_now += half; /* wraps to 0: the top bit changes again */
	ck_assert_uint_lt(rd(ACPI_PM_TMR, 4), 1u << 31);
	ck_assert_uint_eq(rd(ACPI_PM1_EVT, 2) & PM1_TMR, PM1_TMR);
}
END_TEST

START_TEST(test_sts_w1c_and_en)
{
	ck_assert(!acpi_pm_alarm(&pm)); /* awake: RTC_STS only */
	ck_assert_uint_eq(rd(ACPI_PM1_EVT, 2), PM1_RTC);
	wr(ACPI_PM1_EVT, 2, 0); /* writing 0 keeps it */
	ck_assert_uint_eq(rd(ACPI_PM1_EVT, 2), PM1_RTC);
	wr(ACPI_PM1_EVT, 2, PM1_STS_WAK); /* another bit: keeps it */
	ck_assert_uint_eq(rd(ACPI_PM1_EVT, 2), PM1_RTC);
	wr(ACPI_PM1_EVT, 2, PM1_RTC);
	ck_assert_uint_eq(rd(ACPI_PM1_EVT, 2), 0);

	wr(ACPI_PM1_EVT + 2, 2, PM1_RTC | 0x8000); /* reserved bit dropped */
	ck_assert_uint_eq(rd(ACPI_PM1_EVT + 2, 2), PM1_RTC);
	ck_assert_uint_eq(rd(ACPI_PM1_EVT, 4), (uint32_t)PM1_RTC << 16);
	/* a dword write to the block: STS W1C and EN together */
	wr(ACPI_PM1_EVT, 4, 0);
	ck_assert_uint_eq(rd(ACPI_PM1_EVT + 2, 2), 0);
}
END_TEST

START_TEST(test_sci)
{
	ck_assert_uint_eq(rd(ACPI_PM1_CNT, 2) & PM1_CNT_SCI_EN, PM1_CNT_SCI_EN);
	wr(ACPI_PM1_EVT + 2, 2, PM1_RTC);
	acpi_pm_alarm(&pm);
	ck_assert_int_eq(sci_level, 1); /* RTC_STS & RTC_EN & SCI_EN */
	wr(ACPI_PM1_EVT, 2, PM1_RTC);
	ck_assert_int_eq(sci_level, 0);
}
END_TEST

START_TEST(test_slp_en)
{
	/* SLP_TYP alone does nothing; SLP_EN reads back 0 */
	ck_assert_int_eq(wr(ACPI_PM1_CNT, 2, ACPI_SLP_TYP_S3 << 10),
			 ACPI_PM_NONE);
	ck_assert_uint_eq(rd(ACPI_PM1_CNT, 2),
			  (ACPI_SLP_TYP_S3 << 10) | PM1_CNT_SCI_EN);
	ck_assert_int_eq(wr(ACPI_PM1_CNT, 2,
			    (ACPI_SLP_TYP_S3 << 10) | PM1_CNT_SLP_EN),
			 ACPI_PM_SLEEP_S3);
	ck_assert_uint_eq(rd(ACPI_PM1_CNT, 2) & PM1_CNT_SLP_EN, 0);
	ck_assert(pm.asleep);
	/* asleep: no RTC_EN, no wake-up */
	ck_assert(!acpi_pm_alarm(&pm));
	ck_assert(pm.asleep);
	wr(ACPI_PM1_EVT, 2, PM1_RTC);
	wr(ACPI_PM1_EVT + 2, 2, PM1_RTC);
	ck_assert(acpi_pm_alarm(&pm));
	ck_assert(!pm.asleep);
	ck_assert_uint_eq(rd(ACPI_PM1_EVT, 2), PM1_STS_WAK | PM1_RTC);
	wr(ACPI_PM1_EVT, 2, PM1_STS_WAK | PM1_RTC);
	ck_assert_uint_eq(rd(ACPI_PM1_EVT, 2), 0);
	/* the high byte alone, as an 8-bit write: S5 */
	ck_assert_int_eq(wr(ACPI_PM1_CNT + 1, 1,
			    (ACPI_SLP_TYP_S5 << 2) | (PM1_CNT_SLP_EN >> 8)),
			 ACPI_PM_POWER_OFF);
	/* a sleep type the DSDT does not name */
	ck_assert_int_eq(wr(ACPI_PM1_CNT, 2, (5u << 10) | PM1_CNT_SLP_EN),
			 ACPI_PM_NONE);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("acpi_pm");
	TCase *tc = tcase_create("acpi_pm");
	SRunner *sr;
	int failed;

	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_test(tc, test_timer_rate);
	tcase_add_test(tc, test_timer_wraps_and_tmr_sts);
	tcase_add_test(tc, test_sts_w1c_and_en);
	tcase_add_test(tc, test_sci);
	tcase_add_test(tc, test_slp_en);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_ENV);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
