/* SPDX-License-Identifier: GPL-2.0-only */
/* The CMOS RTC (rtc.c): state and register logic, apart from the ports so
 * that they can be driven without KVM. */
#ifndef VMM_MACHINE_DEVICES_RTC_H
#define VMM_MACHINE_DEVICES_RTC_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/housekeeping.h"

#define RTC_SECONDS 0x00
#define RTC_SECONDS_ALARM 0x01
#define RTC_MINUTES 0x02
#define RTC_MINUTES_ALARM 0x03
#define RTC_HOURS 0x04
#define RTC_HOURS_ALARM 0x05
#define RTC_DAY_OF_WEEK 0x06
#define RTC_DAY_OF_MONTH 0x07
#define RTC_MONTH 0x08
#define RTC_YEAR 0x09
#define RTC_REG_A 0x0a
#define RTC_REG_B 0x0b
#define RTC_REG_C 0x0c
#define RTC_REG_D 0x0d
#define RTC_CENTURY 0x32 /* the FADT's CENTURY */

#define RTC_A_UIP 0x80
#define RTC_A_DV_MASK 0x70
#define RTC_A_RS_MASK 0x0f
#define RTC_B_SET 0x80
#define RTC_B_PIE 0x40
#define RTC_B_AIE 0x20
#define RTC_B_UIE 0x10
#define RTC_B_DM_BINARY 0x04
#define RTC_B_24H 0x02
#define RTC_C_IRQF 0x80
#define RTC_C_PF 0x40
#define RTC_C_AF 0x20
#define RTC_C_UF 0x10
#define RTC_D_VRT 0x80
#define RTC_ALARM_DONT_CARE 0xc0 /* both top bits set: matches any value */
#define RTC_UIP_NS 244141 /* UIP is set this long before each update */

struct rtc {
	pthread_mutex_t lock; /* guards the rest; taken before the PM's */
	uint8_t cmos[128]; /* time registers: their values while SET holds
			    * the clock; C: the flags accounted so far */
	uint8_t index;
	bool nmi_masked;   /* port 0x70 bit 7 */
	int64_t offset_ns; /* the RTC's Unix time = host monotonic + this */
	uint64_t acc_ns;   /* host time up to which C's flags are accounted */
	uint64_t deadline_ns; /* the timer's, 0: not armed */
	bool irq;          /* IRQ 8's level */
	bool alarm_irq;    /* AF and AIE, as last seen */
	struct hk_timer timer;
};

/* Callers below hold s->lock; @now is the host's monotonic time. */
void rtc_power_on(struct rtc *s, uint64_t now, int64_t offset_ns);
uint8_t rtc_read_reg(struct rtc *s, uint8_t reg, uint64_t now);
void rtc_write_reg(struct rtc *s, uint8_t reg, uint8_t val, uint64_t now);
/* The timer's work: flags and IRQ up to @now, the next deadline. */
void rtc_update(struct rtc *s, uint64_t now);

#endif
