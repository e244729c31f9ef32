/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * MC146818 CMOS RTC at ports 0x70 (index, bit 7 masks NMI) and 0x71
 * (data): the time and date from the host clock (UTC) plus what the guest
 * set, in BCD or binary and 12- or 24-hour per register B; the alarm
 * (0xc0-0xff: don't care), the periodic and the update-ended interrupts
 * on IRQ 8, cleared by reading register C; 114 bytes of CMOS RAM.
 *
 * Nothing ticks: the time and the flags of register C are worked out from
 * the clock when read; one housekeeping timer is armed only for an
 * interrupt that is enabled and not yet raised.
 */
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "base/housekeeping.h"
#include "base/time.h"
#include "machine/bus.h"
#include "machine/devices/devices.h"
#include "machine/devices/rtc.h"
#include "machine/irq.h"
#include "machine/vcpu.h"
#include "machine/vm.h"

#define RTC_IRQ 8
#define NS_PER_SEC 1000000000ll
#define SECS_PER_DAY 86400ll
#define DV_NORMAL 0x20 /* 32.768 kHz time base, dividers running */

static struct rtc rtcdev = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* The one place IRQ 8 is driven. Caller holds the RTC's lock. */
static void rtc_set_irq_line(bool level)
{
	irq_isa_set(RTC_IRQ, level);
}

static uint8_t to_bcd(unsigned int v)
{
	return (uint8_t)(((v / 10) << 4) | (v % 10));
}

static unsigned int from_bcd(uint8_t v)
{
	return (v >> 4) * 10u + (v & 0xfu);
}

/* A time register's value in the format register B asks for. */
static uint8_t rtc_fmt(const struct rtc *s, unsigned int v)
{
	return s->cmos[RTC_REG_B] & RTC_B_DM_BINARY ? (uint8_t)v : to_bcd(v);
}

static unsigned int rtc_unfmt(const struct rtc *s, uint8_t v)
{
	return s->cmos[RTC_REG_B] & RTC_B_DM_BINARY ? v : from_bcd(v);
}

static uint8_t rtc_fmt_hour(const struct rtc *s, unsigned int h)
{
	if (s->cmos[RTC_REG_B] & RTC_B_24H)
		return rtc_fmt(s, h);
	return (uint8_t)(rtc_fmt(s, h % 12 ? h % 12 : 12) | (h >= 12 ? 0x80 : 0));
}

static unsigned int rtc_unfmt_hour(const struct rtc *s, uint8_t v)
{
	if (s->cmos[RTC_REG_B] & RTC_B_24H)
		return rtc_unfmt(s, v);
	return rtc_unfmt(s, v & 0x7f) % 12 + (v & 0x80 ? 12 : 0);
}

/* The clock runs: SET clear and the dividers in normal operation. */
static bool rtc_running(const struct rtc *s)
{
	return !(s->cmos[RTC_REG_B] & RTC_B_SET) &&
	       (s->cmos[RTC_REG_A] & RTC_A_DV_MASK) == DV_NORMAL;
}

/* The RTC's Unix time in ns at host time @now. */
static int64_t rtc_time_ns(const struct rtc *s, uint64_t now)
{
	return (int64_t)now + s->offset_ns;
}

static int64_t floor_div(int64_t a, int64_t b)
{
	return a / b - (a % b < 0);
}

/* Writes the time at Unix second @t into the time registers. */
static void rtc_store_time(struct rtc *s, int64_t t)
{
	time_t tt = (time_t)t;
	struct tm tm;

	gmtime_r(&tt, &tm);
	s->cmos[RTC_SECONDS] = rtc_fmt(s, (unsigned int)tm.tm_sec);
	s->cmos[RTC_MINUTES] = rtc_fmt(s, (unsigned int)tm.tm_min);
	s->cmos[RTC_HOURS] = rtc_fmt_hour(s, (unsigned int)tm.tm_hour);
	s->cmos[RTC_DAY_OF_WEEK] = rtc_fmt(s, (unsigned int)tm.tm_wday + 1);
	s->cmos[RTC_DAY_OF_MONTH] = rtc_fmt(s, (unsigned int)tm.tm_mday);
	s->cmos[RTC_MONTH] = rtc_fmt(s, (unsigned int)tm.tm_mon + 1);
	s->cmos[RTC_YEAR] = rtc_fmt(s, (unsigned int)(tm.tm_year + 1900) % 100);
	s->cmos[RTC_CENTURY] = rtc_fmt(s, (unsigned int)(tm.tm_year + 1900) / 100);
}

/*
 * The Unix seconds the clock can hold: the RTC's time is kept in int64 ns
 * (offset_ns, with the host's monotonic time added), so a time the guest
 * sets beyond about 1714..2225 (a century register of 0 or 99, BCD
 * garbage) is taken as the nearest end of that range, not overflowed.
 */
#define RTC_SECS_MAX ((INT64_MAX - (1ll << 60)) / NS_PER_SEC - 1)

/* The Unix second the time registers hold (within +-RTC_SECS_MAX). */
static int64_t rtc_load_time(const struct rtc *s)
{
	struct tm tm = {
		.tm_sec = (int)rtc_unfmt(s, s->cmos[RTC_SECONDS]),
		.tm_min = (int)rtc_unfmt(s, s->cmos[RTC_MINUTES]),
		.tm_hour = (int)rtc_unfmt_hour(s, s->cmos[RTC_HOURS]),
		.tm_mday = (int)rtc_unfmt(s, s->cmos[RTC_DAY_OF_MONTH]),
		.tm_mon = (int)rtc_unfmt(s, s->cmos[RTC_MONTH]) - 1,
		.tm_year = (int)(rtc_unfmt(s, s->cmos[RTC_CENTURY]) * 100 +
				 rtc_unfmt(s, s->cmos[RTC_YEAR])) - 1900,
	};
	int64_t t = (int64_t)timegm(&tm);

	if (t > RTC_SECS_MAX)
		return RTC_SECS_MAX;
	return t < -RTC_SECS_MAX ? -RTC_SECS_MAX : t;
}

/* An alarm register against the current value (hours: 0..23). */
static bool rtc_alarm_field(const struct rtc *s, uint8_t a, unsigned int v,
			    bool hour)
{
	if ((a & RTC_ALARM_DONT_CARE) == RTC_ALARM_DONT_CARE)
		return true;
	return (hour ? rtc_unfmt_hour(s, a) : rtc_unfmt(s, a)) == v;
}

/* An alarm register that can match: don't care, or a valid value. */
static bool rtc_alarm_valid(const struct rtc *s, uint8_t a, bool hour)
{
	if ((a & RTC_ALARM_DONT_CARE) == RTC_ALARM_DONT_CARE)
		return true;
	return hour ? rtc_unfmt_hour(s, a) < 24 : rtc_unfmt(s, a) < 60;
}

/*
 * The first update at a second in (@from, @to] the alarm matches, or 0.
 * A day covers every pattern the alarm registers can give. Hours and
 * minutes that do not match are skipped whole: a few hundred steps at
 * most.
 */
static int64_t rtc_next_alarm(const struct rtc *s, int64_t from, int64_t to)
{
	uint8_t as = s->cmos[RTC_SECONDS_ALARM], am = s->cmos[RTC_MINUTES_ALARM];
	uint8_t ah = s->cmos[RTC_HOURS_ALARM];
	int64_t t = from + 1, sod;

	if (!rtc_alarm_valid(s, as, false) || !rtc_alarm_valid(s, am, false) ||
	    !rtc_alarm_valid(s, ah, true))
		return 0;
	if (to - from > SECS_PER_DAY)
		to = from + SECS_PER_DAY;
	while (t <= to) {
		sod = t - floor_div(t, SECS_PER_DAY) * SECS_PER_DAY;
		if (!rtc_alarm_field(s, ah, (unsigned int)(sod / 3600), true))
			t += 3600 - sod % 3600;
		else if (!rtc_alarm_field(s, am, (unsigned int)(sod / 60 % 60),
					  false))
			t += 60 - sod % 60;
		else if (!rtc_alarm_field(s, as, (unsigned int)(sod % 60), false))
			t++;
		else
			return t;
	}
	return 0;
}

/* The periodic interrupt's period from RS (register A), 0: off. */
static int64_t rtc_period_ns(const struct rtc *s)
{
	unsigned int rs = s->cmos[RTC_REG_A] & RTC_A_RS_MASK;

	if (rs == 0)
		return 0;
	if (rs < 3)
		rs += 7; /* 1 and 2 give the 256 Hz and 128 Hz of 8 and 9 */
	return (NS_PER_SEC << (rs - 1)) / 32768;
}

static uint8_t rtc_irqf(const struct rtc *s, uint8_t c)
{
	uint8_t b = s->cmos[RTC_REG_B];

	return ((c & RTC_C_PF) && (b & RTC_B_PIE)) ||
	       ((c & RTC_C_AF) && (b & RTC_B_AIE)) ||
	       ((c & RTC_C_UF) && (b & RTC_B_UIE)) ? RTC_C_IRQF : 0;
}

/* Register C's flags for what happened in (acc_ns, @now], then IRQF, IRQ
 * 8 and the PM's alarm event (on the alarm interrupt's rising edge).
 * Caller holds s->lock. */
static void rtc_account(struct rtc *s, uint64_t now)
{
	uint8_t c = s->cmos[RTC_REG_C];
	int64_t period = rtc_period_ns(s), from, to;
	bool alarm;

	if (now > s->acc_ns) {
		if (period && floor_div((int64_t)now, period) >
			      floor_div((int64_t)s->acc_ns, period))
			c |= RTC_C_PF;
		if (rtc_running(s)) {
			from = floor_div(rtc_time_ns(s, s->acc_ns), NS_PER_SEC);
			to = floor_div(rtc_time_ns(s, now), NS_PER_SEC);
			if (to > from)
				c |= RTC_C_UF;
			if (to > from && !(c & RTC_C_AF) &&
			    rtc_next_alarm(s, from, to))
				c |= RTC_C_AF;
		}
		s->acc_ns = now;
	}
	c |= rtc_irqf(s, c);
	s->cmos[RTC_REG_C] = c;
	if ((c & RTC_C_IRQF) && !s->irq) {
		s->irq = true;
		rtc_set_irq_line(true);
	}
	alarm = (c & RTC_C_AF) && (s->cmos[RTC_REG_B] & RTC_B_AIE);
	if (alarm && !s->alarm_irq)
		acpi_pm_rtc_alarm();
	s->alarm_irq = alarm;
}

/* The next host time an enabled interrupt that is not yet raised is due,
 * or 0. An alarm is watched even while IRQF is set: the PM's wake-up
 * needs it. Caller holds s->lock, rtc_account done. */
static uint64_t rtc_next_deadline(const struct rtc *s, uint64_t now)
{
	uint8_t b = s->cmos[RTC_REG_B], c = s->cmos[RTC_REG_C];
	int64_t sec = floor_div(rtc_time_ns(s, now), NS_PER_SEC), t;
	int64_t period = rtc_period_ns(s);
	uint64_t best = 0, d;

	if ((b & RTC_B_AIE) && !(c & RTC_C_AF) && rtc_running(s) &&
	    (t = rtc_next_alarm(s, sec, sec + SECS_PER_DAY)))
		best = (uint64_t)(t * NS_PER_SEC - s->offset_ns);
	if (c & RTC_C_IRQF)
		return best;
	if ((b & RTC_B_PIE) && period) {
		d = (uint64_t)((floor_div((int64_t)now, period) + 1) * period);
		best = best && best < d ? best : d;
	}
	if ((b & RTC_B_UIE) && rtc_running(s)) {
		d = (uint64_t)((sec + 1) * NS_PER_SEC - s->offset_ns);
		best = best && best < d ? best : d;
	}
	return best;
}

/* Caller holds s->lock. */
void rtc_update(struct rtc *s, uint64_t now)
{
	uint64_t d;

	rtc_account(s, now);
	d = rtc_next_deadline(s, now);
	if (d == s->deadline_ns)
		return;
	s->deadline_ns = d;
	if (d)
		hk_timer_arm(&s->timer, d);
	else
		hk_timer_cancel_quiet(&s->timer);
}

/* Power-on: 24-hour BCD, dividers running at 1024 Hz RS, no interrupt.
 * Caller holds s->lock (or no other thread runs yet). */
void rtc_power_on(struct rtc *s, uint64_t now, int64_t offset_ns)
{
	memset(s->cmos, 0, sizeof(s->cmos));
	s->cmos[RTC_REG_A] = DV_NORMAL | 0x06;
	s->cmos[RTC_REG_B] = RTC_B_24H;
	s->cmos[RTC_REG_D] = RTC_D_VRT;
	s->index = 0;
	s->nmi_masked = false;
	s->offset_ns = offset_ns;
	s->acc_ns = now;
	s->irq = false;
	s->alarm_irq = false;
}

static bool rtc_is_time_reg(uint8_t reg)
{
	return reg == RTC_SECONDS || reg == RTC_MINUTES || reg == RTC_HOURS ||
	       (reg >= RTC_DAY_OF_WEEK && reg <= RTC_YEAR) ||
	       reg == RTC_CENTURY;
}

/* Caller holds s->lock. */
uint8_t rtc_read_reg(struct rtc *s, uint8_t reg, uint64_t now)
{
	int64_t t;
	uint8_t v;

	reg &= 0x7f;
	rtc_update(s, now);
	if (rtc_is_time_reg(reg) && rtc_running(s)) {
		rtc_store_time(s, floor_div(rtc_time_ns(s, now), NS_PER_SEC));
		return s->cmos[reg];
	}
	switch (reg) {
	case RTC_REG_A:
		t = rtc_time_ns(s, now) % NS_PER_SEC;
		if (t < 0)
			t += NS_PER_SEC;
		v = s->cmos[reg] & (uint8_t)~RTC_A_UIP;
		if (rtc_running(s) && t >= NS_PER_SEC - RTC_UIP_NS)
			v |= RTC_A_UIP;
		return v;
	case RTC_REG_C:
		v = s->cmos[reg];
		s->cmos[reg] = 0;
		if (s->irq) {
			s->irq = false;
			rtc_set_irq_line(false);
		}
		rtc_update(s, now); /* the next interrupt may be armed now */
		return v;
	default:
		return s->cmos[reg];
	}
}

/* The time registers take a write at once: the clock goes on from the
 * new time, in phase with its seconds. Caller holds s->lock. */
static void rtc_write_time(struct rtc *s, uint8_t reg, uint8_t val,
			   uint64_t now)
{
	int64_t g = rtc_time_ns(s, now);
	int64_t frac = g - floor_div(g, NS_PER_SEC) * NS_PER_SEC;

	if (!rtc_running(s)) {
		s->cmos[reg] = val; /* taken when the clock runs again */
		return;
	}
	rtc_store_time(s, floor_div(g, NS_PER_SEC));
	s->cmos[reg] = val;
	s->offset_ns = rtc_load_time(s) * NS_PER_SEC + frac - (int64_t)now;
}

/* Caller holds s->lock. */
void rtc_write_reg(struct rtc *s, uint8_t reg, uint8_t val, uint64_t now)
{
	bool ran;

	reg &= 0x7f;
	rtc_account(s, now);
	ran = rtc_running(s);
	if (rtc_is_time_reg(reg)) {
		rtc_write_time(s, reg, val, now);
	} else if (reg == RTC_REG_A || reg == RTC_REG_B) {
		if (ran) /* the time as it stands, should the clock stop */
			rtc_store_time(s, floor_div(rtc_time_ns(s, now),
						    NS_PER_SEC));
		if (reg == RTC_REG_A)
			s->cmos[reg] = (uint8_t)((s->cmos[reg] & RTC_A_UIP) |
						 (val & ~RTC_A_UIP));
		else
			/* SET clears UIE; a new format reformats the time */
			s->cmos[reg] = val & RTC_B_SET ?
				       (uint8_t)(val & ~RTC_B_UIE) : val;
		if (ran && reg == RTC_REG_B)
			rtc_store_time(s, floor_div(rtc_time_ns(s, now),
						    NS_PER_SEC));
		if (!ran && rtc_running(s)) /* started: from .0 of its second */
			s->offset_ns = rtc_load_time(s) * NS_PER_SEC -
				       (int64_t)now;
	} else if (reg != RTC_REG_C && reg != RTC_REG_D) {
		s->cmos[reg] = val;
	}
	rtc_update(s, now); /* IRQF follows the enables of what is flagged */
}

static void rtc_io(struct vcpu *v, uint64_t off, uint8_t *data,
		   unsigned int len, bool is_write, void *opaque)
{
	(void)v; (void)opaque;
	pthread_mutex_lock(&rtcdev.lock);
	if (off == 0 && is_write) {
		rtcdev.index = data[0] & 0x7f;
		rtcdev.nmi_masked = data[0] & 0x80;
	} else if (off == 0) {
		data[0] = 0xff; /* the index port is write-only */
	} else if (is_write) {
		rtc_write_reg(&rtcdev, rtcdev.index, data[0], now_ns());
	} else {
		data[0] = rtc_read_reg(&rtcdev, rtcdev.index, now_ns());
	}
	pthread_mutex_unlock(&rtcdev.lock);
	if (!is_write && len > 1)
		memset(data + 1, 0xff, len - 1);
}

/* Housekeeping thread, no lock held. */
static void rtc_timer_fire(struct hk_timer *t, uint64_t deadline_ns)
{
	uint64_t now = now_ns();

	(void)t;
	pthread_mutex_lock(&rtcdev.lock);
	if (deadline_ns == rtcdev.deadline_ns) {
		rtcdev.deadline_ns = 0; /* fired: re-armed below if needed */
		rtc_update(&rtcdev, now > deadline_ns ? now : deadline_ns);
	}
	pthread_mutex_unlock(&rtcdev.lock);
}

/* Any thread: bit 7 of the last write to port 0x70 (NMI disabled). */
bool rtc_nmi_masked(void)
{
	bool m;

	pthread_mutex_lock(&rtcdev.lock);
	m = rtcdev.nmi_masked;
	pthread_mutex_unlock(&rtcdev.lock);
	return m;
}

int rtc_init(struct vm *vm)
{
	uint64_t now = now_ns();

	(void)vm;
	hk_timer_init(&rtcdev.timer, rtc_timer_fire);
	hk_timer_set_name(&rtcdev.timer, "rtc");
	rtc_power_on(&rtcdev, now,
		     (int64_t)(mono_to_unix_ms(now) * 1000000ull) - (int64_t)now);
	return bus_register(BUS_PIO, 0x70, 2, rtc_io, NULL);
}
