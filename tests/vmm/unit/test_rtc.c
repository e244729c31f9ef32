/* SPDX-License-Identifier: GPL-2.0-only */
/* The CMOS RTC: registers A-D, the time in BCD and binary, 12- and
 * 24-hour, setting the time, the alarm (exact and don't care), the
 * periodic interrupt, register C clearing IRQ 8. A fake clock. */
#include <check.h>
#include <stdlib.h>

#include "base/time.h"
#include "machine/bus.h"
#include "machine/devices/devices.h"
#include "machine/devices/rtc.h"
#include "machine/irq.h"

#define SEC 1000000000ull
/* 2026-12-04 13:45:59 UTC, a Friday */
#define T0 1796391959ll

/* What rtc.c calls outside its file. */
static uint64_t fake_now, armed;
static int irq8 = -1, alarms;
uint64_t now_ns(void) { return fake_now; }
uint64_t mono_to_unix_ms(uint64_t m) { return m / 1000000; }
void irq_isa_set(unsigned int pin, bool level)
{
	ck_assert_uint_eq(pin, 8);
	irq8 = level;
}
void acpi_pm_rtc_alarm(void) { alarms++; }
void hk_timer_init(struct hk_timer *t, hk_fire_fn fire)
{
	(void)t; (void)fire;
}
/* Names only count the housekeeping thread's wake-ups: none here. */
void hk_timer_set_name(struct hk_timer *t, const char *name)
{
	(void)t;
	(void)name;
}
void hk_timer_arm(struct hk_timer *t, uint64_t d) { (void)t; armed = d; }
void hk_timer_cancel_quiet(struct hk_timer *t) { (void)t; armed = 0; }
int bus_register(enum bus_space space, uint64_t base, uint64_t len,
		 bus_handler fn, void *opaque)
{
	(void)space; (void)base; (void)len; (void)fn; (void)opaque;
	return 0;
}

static struct rtc s;

/* The clock at T0 + @frac ns. */
static void setup(void)
{
	fake_now = 5 * SEC;
	armed = 0;
	irq8 = -1;
	alarms = 0;
	s.deadline_ns = 0;
	rtc_power_on(&s, fake_now, T0 * (int64_t)SEC - (int64_t)fake_now);
}

static uint8_t rd(uint8_t reg) { return rtc_read_reg(&s, reg, fake_now); }
/* Register C but PF (the power-on rate, 1024 Hz, sets it all the time). */
static uint8_t rd_c(void) { return rd(RTC_REG_C) & (uint8_t)~RTC_C_PF; }
static void wr(uint8_t reg, uint8_t v) { rtc_write_reg(&s, reg, v, fake_now); }

/* The housekeeping thread's firing, at the armed deadline. */
static void fire(void)
{
	ck_assert_uint_ne(armed, 0);
	fake_now = armed;
	s.deadline_ns = 0;
	armed = 0;
	rtc_update(&s, fake_now);
}

START_TEST(test_power_on)
{
	ck_assert_uint_eq(rd(RTC_REG_A), 0x26);
	ck_assert_uint_eq(rd(RTC_REG_B), RTC_B_24H);
	ck_assert_uint_eq(rd(RTC_REG_C), 0);
	ck_assert_uint_eq(rd(RTC_REG_D), RTC_D_VRT);
	wr(RTC_REG_D, 0); /* read-only */
	ck_assert_uint_eq(rd(RTC_REG_D), RTC_D_VRT);
	wr(0x40, 0x5a); /* CMOS RAM */
	ck_assert_uint_eq(rd(0x40), 0x5a);
	ck_assert_uint_eq(armed, 0); /* nothing enabled: no timer */
}
END_TEST

START_TEST(test_time_bcd_binary_12h)
{
	ck_assert_uint_eq(rd(RTC_SECONDS), 0x59);
	ck_assert_uint_eq(rd(RTC_MINUTES), 0x45);
	ck_assert_uint_eq(rd(RTC_HOURS), 0x13);
	ck_assert_uint_eq(rd(RTC_DAY_OF_WEEK), 6);
	ck_assert_uint_eq(rd(RTC_DAY_OF_MONTH), 0x04);
	ck_assert_uint_eq(rd(RTC_MONTH), 0x12);
	ck_assert_uint_eq(rd(RTC_YEAR), 0x26);
	ck_assert_uint_eq(rd(RTC_CENTURY), 0x20);
	wr(RTC_REG_B, RTC_B_24H | RTC_B_DM_BINARY);
	ck_assert_uint_eq(rd(RTC_SECONDS), 59);
	ck_assert_uint_eq(rd(RTC_HOURS), 13);
	wr(RTC_REG_B, RTC_B_DM_BINARY); /* 12-hour: 1 PM */
	ck_assert_uint_eq(rd(RTC_HOURS), 0x81);
	wr(RTC_REG_B, 0);
	ck_assert_uint_eq(rd(RTC_HOURS), 0x81);
	fake_now += SEC; /* the clock runs */
	ck_assert_uint_eq(rd(RTC_SECONDS), 0x00);
	ck_assert_uint_eq(rd(RTC_MINUTES), 0x46);
}
END_TEST

START_TEST(test_uip)
{
	/* T0 + .0 now; UIP in the last 244 us before each update */
	ck_assert_uint_eq(rd(RTC_REG_A) & RTC_A_UIP, 0);
	fake_now += SEC - 100000;
	ck_assert_uint_eq(rd(RTC_REG_A) & RTC_A_UIP, RTC_A_UIP);
	ck_assert_uint_eq(rd(RTC_SECONDS), 0x59);
	fake_now += 100000;
	ck_assert_uint_eq(rd(RTC_REG_A) & RTC_A_UIP, 0);
	ck_assert_uint_eq(rd(RTC_SECONDS), 0x00);
	wr(RTC_REG_A, 0x26 | RTC_A_UIP); /* read-only bit */
	ck_assert_uint_eq(rd(RTC_REG_A), 0x26);
}
END_TEST

START_TEST(test_set_time)
{
	wr(RTC_REG_B, RTC_B_24H | RTC_B_SET | RTC_B_UIE);
	ck_assert_uint_eq(rd(RTC_REG_B), RTC_B_24H | RTC_B_SET); /* no UIE */
	wr(RTC_HOURS, 0x08);
	wr(RTC_MINUTES, 0x30);
	wr(RTC_SECONDS, 0x00);
	fake_now += 5 * SEC; /* held while SET */
	ck_assert_uint_eq(rd(RTC_SECONDS), 0x00);
	ck_assert_uint_eq(rd(RTC_REG_C) & RTC_C_UF, 0);
	wr(RTC_REG_B, RTC_B_24H);
	fake_now += 2 * SEC + 1;
	ck_assert_uint_eq(rd(RTC_HOURS), 0x08);
	ck_assert_uint_eq(rd(RTC_MINUTES), 0x30);
	ck_assert_uint_eq(rd(RTC_SECONDS), 0x02);
	ck_assert_uint_eq(rd(RTC_DAY_OF_MONTH), 0x04);
	/* a write while running takes at once */
	wr(RTC_YEAR, 0x27);
	ck_assert_uint_eq(rd(RTC_YEAR), 0x27);
	ck_assert_uint_eq(rd(RTC_HOURS), 0x08);
}
END_TEST

/* A year the clock cannot count in int64 ns (century 99, or 00) is taken
 * as the last (first) second it can: 2225-09-28 23:48:51 UTC (1714-04-05
 * 00:11:09), with no overflow on the way. */
START_TEST(test_set_time_out_of_range)
{
	wr(RTC_CENTURY, 0x99);
	ck_assert_uint_eq(rd(RTC_CENTURY), 0x22);
	ck_assert_uint_eq(rd(RTC_YEAR), 0x25);
	ck_assert_uint_eq(rd(RTC_MONTH), 0x09);
	ck_assert_uint_eq(rd(RTC_DAY_OF_MONTH), 0x28);
	ck_assert_uint_eq(rd(RTC_HOURS), 0x23);
	wr(RTC_REG_B, RTC_B_24H | RTC_B_SET);
	wr(RTC_CENTURY, 0x00);
	wr(RTC_REG_B, RTC_B_24H);
	ck_assert_uint_eq(rd(RTC_CENTURY), 0x17);
	ck_assert_uint_eq(rd(RTC_YEAR), 0x14);
	ck_assert_uint_eq(rd(RTC_MONTH), 0x04);
	fake_now += 3 * SEC;
	ck_assert_uint_eq(rd(RTC_YEAR), 0x14);
}
END_TEST

START_TEST(test_alarm_exact)
{
	rd(RTC_REG_C);
	wr(RTC_HOURS_ALARM, 0x13);
	wr(RTC_MINUTES_ALARM, 0x46);
	wr(RTC_SECONDS_ALARM, 0x05);
	ck_assert_uint_eq(armed, 0);
	wr(RTC_REG_B, RTC_B_24H | RTC_B_AIE);
	/* 13:46:05 is 6 s after T0 */
	ck_assert_uint_eq(armed, 5 * SEC + 6 * SEC);
	fake_now += 5 * SEC;
	ck_assert_uint_eq(rd(RTC_REG_C) & RTC_C_AF, 0);
	ck_assert_int_ne(irq8, 1);
	fire();
	ck_assert_int_eq(irq8, 1);
	ck_assert_int_eq(alarms, 1);
	ck_assert_uint_eq(armed, 0); /* raised: nothing more until C is read */
	ck_assert_uint_eq(rd_c(), RTC_C_IRQF | RTC_C_AF | RTC_C_UF);
	ck_assert_int_eq(irq8, 0);
	ck_assert_uint_eq(rd_c(), 0);
	/* the next match is a day later */
	ck_assert_uint_eq(armed, 5 * SEC + (6 + 86400) * SEC);
}
END_TEST

START_TEST(test_alarm_dont_care)
{
	/* seconds don't care, 13:47: first at 13:47:00, then each second */
	wr(RTC_HOURS_ALARM, 0x13);
	wr(RTC_MINUTES_ALARM, 0x47);
	wr(RTC_SECONDS_ALARM, 0xff);
	wr(RTC_REG_B, RTC_B_24H | RTC_B_AIE);
	ck_assert_uint_eq(armed, 5 * SEC + 61 * SEC);
	/* minutes don't care, 15:xx:00: first at 15:00:00, 4441 s on */
	wr(RTC_HOURS_ALARM, 0x15);
	wr(RTC_MINUTES_ALARM, 0xc5);
	wr(RTC_SECONDS_ALARM, 0x00);
	ck_assert_uint_eq(armed, 5 * SEC + 4441 * SEC);
	/* 23:59:59 binary, the day's last second */
	wr(RTC_REG_B, RTC_B_24H | RTC_B_AIE | RTC_B_DM_BINARY);
	wr(RTC_HOURS_ALARM, 23);
	wr(RTC_MINUTES_ALARM, 59);
	wr(RTC_SECONDS_ALARM, 59);
	ck_assert_uint_eq(armed, 5 * SEC + (10 * 3600 + 14 * 60) * SEC);
	wr(RTC_REG_B, RTC_B_24H | RTC_B_AIE);
	wr(RTC_HOURS_ALARM, 0x13);
	wr(RTC_MINUTES_ALARM, 0x47);
	wr(RTC_SECONDS_ALARM, 0xff);
	ck_assert_uint_eq(armed, 5 * SEC + 61 * SEC);
	/* all three don't care: every update */
	wr(RTC_MINUTES_ALARM, RTC_ALARM_DONT_CARE);
	wr(RTC_HOURS_ALARM, RTC_ALARM_DONT_CARE);
	ck_assert_uint_eq(armed, 6 * SEC);
	fire();
	ck_assert_uint_eq(rd_c(), RTC_C_IRQF | RTC_C_AF | RTC_C_UF);
	ck_assert_uint_eq(armed, 7 * SEC);
	/* an alarm that went by unseen is still flagged, lazily */
	wr(RTC_REG_B, RTC_B_24H);
	fake_now += 3 * SEC;
	ck_assert_uint_eq(rd_c(), RTC_C_AF | RTC_C_UF);
	/* a BCD value that never matches (seconds 0x61) */
	wr(RTC_SECONDS_ALARM, 0x61);
	wr(RTC_REG_B, RTC_B_24H | RTC_B_AIE);
	ck_assert_uint_eq(armed, 0);
}
END_TEST

START_TEST(test_alarm_12h)
{
	/* 12-hour mode: the alarm hour has the PM bit too; 1 PM = 0x81 */
	wr(RTC_REG_B, 0);
	wr(RTC_HOURS_ALARM, 0x81);
	wr(RTC_MINUTES_ALARM, 0x46);
	wr(RTC_SECONDS_ALARM, 0x00);
	wr(RTC_REG_B, RTC_B_AIE);
	ck_assert_uint_eq(armed, 6 * SEC);
	wr(RTC_HOURS_ALARM, 0x01); /* 1 AM */
	ck_assert_uint_ne(armed, 6 * SEC);
}
END_TEST

START_TEST(test_periodic_and_update)
{
	/* RS 15: 2 Hz. PF is set without PIE, but raises nothing */
	wr(RTC_REG_A, 0x2f);
	fake_now += SEC / 2;
	ck_assert_uint_eq(rd(RTC_REG_C), RTC_C_PF);
	ck_assert_int_ne(irq8, 1);
	wr(RTC_REG_B, RTC_B_24H | RTC_B_PIE);
	ck_assert_uint_eq(armed, 6 * SEC);
	fire();
	ck_assert_int_eq(irq8, 1);
	ck_assert_uint_eq(armed, 0);
	fake_now += SEC / 4;
	ck_assert_uint_eq(rd(RTC_REG_C), RTC_C_IRQF | RTC_C_PF | RTC_C_UF);
	ck_assert_int_eq(irq8, 0);
	ck_assert_uint_eq(armed, 6 * SEC + SEC / 2);
	/* UIE alone: at each second */
	wr(RTC_REG_B, RTC_B_24H | RTC_B_UIE);
	ck_assert_uint_eq(armed, 7 * SEC);
	wr(RTC_REG_B, RTC_B_24H);
	ck_assert_uint_eq(armed, 0);
}
END_TEST

START_TEST(test_irqf_on_enable)
{
	/* an update flagged, then UIE: IRQF and IRQ 8 at once */
	fake_now += SEC;
	wr(RTC_REG_B, RTC_B_24H | RTC_B_UIE);
	ck_assert_int_eq(irq8, 1);
	ck_assert_uint_eq(rd_c(), RTC_C_IRQF | RTC_C_UF);
	ck_assert_int_eq(irq8, 0);
}
END_TEST

int main(void)
{
	Suite *su = suite_create("rtc");
	TCase *tc = tcase_create("rtc");
	SRunner *sr;
	int failed;

	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_test(tc, test_power_on);
	tcase_add_test(tc, test_time_bcd_binary_12h);
	tcase_add_test(tc, test_uip);
	tcase_add_test(tc, test_set_time);
	tcase_add_test(tc, test_set_time_out_of_range);
	tcase_add_test(tc, test_alarm_exact);
	tcase_add_test(tc, test_alarm_dont_care);
	tcase_add_test(tc, test_alarm_12h);
	tcase_add_test(tc, test_periodic_and_update);
	tcase_add_test(tc, test_irqf_on_enable);
	suite_add_tcase(su, tc);
	sr = srunner_create(su);
	srunner_run_all(sr, CK_ENV);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
