/* SPDX-License-Identifier: GPL-2.0-only */
/* sysidlectl's output: durations, clocks, status and watch lines, JSON
 * (through json-c). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "sysidlectl.h"

void fmt_duration(double s, char *buf, size_t size)
{
	long t = (long)s;

	if (!(s >= 0))
		snprintf(buf, size, "?");
	else if (s < 60)
		snprintf(buf, size, "%.1fs", s);
	else if (t < 3600)
		snprintf(buf, size, "%ldm%02lds", t / 60, t % 60);
	else if (t < 86400)
		snprintf(buf, size, "%ldh%02ldm", t / 3600, t % 3600 / 60);
	else
		snprintf(buf, size, "%ldd%02ldh", t / 86400, t % 86400 / 3600);
}

void fmt_clock(int64_t unix_ms, char *buf, size_t size)
{
	time_t t = (time_t)(unix_ms / 1000);
	struct tm tm;

	if (unix_ms < 0 || !localtime_r(&t, &tm)) {
		snprintf(buf, size, "?");
		return;
	}
	snprintf(buf, size, "%02d:%02d:%02d.%03d", tm.tm_hour, tm.tm_min,
		 tm.tm_sec, (int)(unix_ms % 1000));
}

static int64_t unix_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void print_json(json_object *o)
{
	puts(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN |
					    JSON_C_TO_STRING_NOSLASHESCAPE));
}

/* status: the counters, nested objects on one line. */
static void print_counters(json_object *counters)
{
	if (!counters)
		return;
	printf("\ncounters\n");
	json_object_object_foreach(counters, key, val) {
		printf("  %-22s", key);
		if (json_object_is_type(val, json_type_object)) {
			json_object_object_foreach(val, k, v)
				printf(" %s %.3f", k,
				       json_object_get_double(v));
		} else if (json_object_is_type(val, json_type_double)) {
			printf(" %.3f", json_object_get_double(val));
		} else {
			printf(" %s", json_object_get_string(val));
		}
		putchar('\n');
	}
}

/* status: the duty cycle (absent from an older VMM: nothing printed). */
static void print_duty(json_object *duty)
{
	static const char *const win[] = { "1m", "1h", "24h" };
	json_object *ratio = ctl_member(duty, "full_idle_ratio",
					json_type_object);
	json_object *span = ctl_member(duty, "span_s", json_type_object);
	json_object *v;
	char buf[32], clk[32];

	if (!duty || !ratio || !span)
		return;
	printf("\nduty cycle (fully idle)\n");
	for (size_t i = 0; i < sizeof(win) / sizeof(win[0]); i++) {
		v = ctl_number(span, win[i]);
		fmt_duration(v ? json_object_get_double(v) : -1, buf,
			     sizeof(buf));
		v = ctl_number(ratio, win[i]);
		printf("  %-22s %5.1f %% of %s\n", win[i],
		       v ? 100 * json_object_get_double(v) : 0, buf);
	}
	v = ctl_number(duty, "longest_busy_s");
	fmt_duration(v ? json_object_get_double(v) : -1, buf, sizeof(buf));
	printf("  %-22s %s", "longest_busy", buf);
	v = ctl_number(duty, "longest_busy_24h_s");
	fmt_duration(v ? json_object_get_double(v) : -1, buf, sizeof(buf));
	printf(" (24h: %s)\n", buf);
	v = ctl_number(duty, "left_full_idle_unix_ms");
	if (v && json_object_get_int64(v) > 0)
		fmt_clock(json_object_get_int64(v), clk, sizeof(clk));
	else
		snprintf(clk, sizeof(clk), "never");
	printf("  %-22s %s\n", "left_full_idle", clk);
}

/* status: @key of @m, a number of bytes, in MiB with one decimal into
 * @buf ("?" when absent). */
static const char *mib_of(json_object *m, const char *key, char *buf,
			  size_t size)
{
	json_object *v = ctl_number(m, key);

	if (!v)
		return "?";
	snprintf(buf, size, "%.1f MiB", (double)json_object_get_int64(v) /
		 (1 << 20));
	return buf;
}

/* status: @key of @m, a count, as text ("?" when absent). */
static const char *count_of(json_object *m, const char *key)
{
	json_object *v = ctl_number(m, key);

	return v ? json_object_get_string(v) : "?";
}

/* status: --idle-memory's passes (absent, or mode off: nothing printed). */
static void print_idle_memory(json_object *m)
{
	const char *mode = ctl_str_or(m, "mode", "off");
	json_object *v = ctl_number(m, "delay_s");
	char a[32], b[32], c[32], clk[32];

	if (!m || !strcmp(mode, "off"))
		return;
	printf("\nidle memory (%s, after %.0f s fully idle)\n", mode,
	       v ? json_object_get_double(v) : 0);
	v = ctl_member(m, "swap_available", json_type_boolean);
	printf("  %-22s %s\n", "swap", v && json_object_get_boolean(v) ?
	       "available" : "none: nothing can be given back");
	printf("  %-22s %s done, %s cancelled, %s failed\n", "passes",
	       count_of(m, "advised"), count_of(m, "cancelled"),
	       count_of(m, "failed"));
	v = ctl_number(m, "last_advised_unix_ms");
	if (!v || json_object_get_int64(v) <= 0)
		return;
	fmt_clock(json_object_get_int64(v), clk, sizeof(clk));
	printf("  %-22s %s advised at %s, RssAnon %s -> %s\n", "last pass",
	       mib_of(m, "last_advised_bytes", a, sizeof(a)), clk,
	       mib_of(m, "last_rss_anon_before_bytes", b, sizeof(b)),
	       mib_of(m, "last_rss_anon_after_bytes", c, sizeof(c)));
}

void print_status(json_object *vm)
{
	json_object *v, *a = ctl_member(vm, "vcpus", json_type_array);
	char clk[32], dur[32];
	size_t i, n = json_object_array_length(a);
	bool sysidle = (v = ctl_member(vm, "sysidle", json_type_boolean)) &&
		       json_object_get_boolean(v);

	printf("name        %s\n", ctl_str_or(vm, "name", "?"));
	printf("uuid        %s\n", ctl_str_or(vm, "uuid", "?"));
	v = ctl_number(vm, "pid");
	printf("pid         %s\n", v ? json_object_get_string(v) : "?");
	if (sysidle) {
		v = ctl_number(vm, "timekeeper");
		printf("sysidle     on, timekeeper vCPU %s", v ?
		       json_object_get_string(v) : "?");
		v = ctl_number(vm, "housekeeping_tid");
		printf(", housekeeping thread %s\n", v ?
		       json_object_get_string(v) : "?");
	} else {
		printf("sysidle     off\n");
	}
	v = ctl_number(vm, "since_unix_ms");
	fmt_clock(v ? json_object_get_int64(v) : -1, clk, sizeof(clk));
	v = ctl_number(vm, "in_state_s");
	fmt_duration(v ? json_object_get_double(v) : -1, dur, sizeof(dur));
	printf("state       %s since %s (%s)\n", ctl_str_or(vm, "state", "?"),
	       clk, dur);
	v = ctl_member(vm, "paused", json_type_boolean);
	if (v && json_object_get_boolean(v))
		printf("paused      yes (every vCPU parked)\n");
	v = ctl_number(vm, "uptime_s");
	fmt_duration(v ? json_object_get_double(v) : -1, dur, sizeof(dur));
	printf("uptime      %s\n", dur);
	printf("\n%4s %8s %4s %12s %16s\n", "VCPU", "TID", "IDLE",
	       "HALT_EXITS", "TICKS_SUPPRESSED");
	for (i = 0; i < n; i++) {
		json_object *c = json_object_array_get_idx(a, i), *x, *t, *h,
			    *s;

		x = ctl_number(c, "id");
		t = ctl_number(c, "tid");
		h = ctl_number(c, "halt_exits");
		s = ctl_number(c, "ticks_suppressed");
		v = ctl_member(c, "idle", json_type_boolean);
		printf("%4s %8s %4s %12s %16s\n",
		       x ? json_object_get_string(x) : "?",
		       t ? json_object_get_string(t) : "?",
		       v ? (json_object_get_boolean(v) ? "yes" : "no") : "?",
		       h ? json_object_get_string(h) : "?",
		       s ? json_object_get_string(s) : "?");
	}
	print_counters(ctl_member(vm, "counters", json_type_object));
	print_duty(ctl_member(vm, "duty", json_type_object));
	print_idle_memory(ctl_member(vm, "idle_memory", json_type_object));
}

void print_event(json_object *e)
{
	const char *ev = ctl_str_or(e, "event", "");
	json_object *v;
	char clk[32];

	if (!strcmp(ev, "dropped")) {
		fmt_clock(unix_now_ms(), clk, sizeof(clk));
		v = ctl_number(e, "count");
		printf("%s (%s events dropped: this client was too slow)\n",
		       clk, v ? json_object_get_string(v) : "?");
		return;
	}
	if (!strcmp(ev, "paused") || !strcmp(ev, "resumed")) {
		v = ctl_number(e, "unix_ms");
		fmt_clock(v ? json_object_get_int64(v) : -1, clk, sizeof(clk));
		printf("%s %s", clk, ev);
		v = ctl_number(e, "paused_ms");
		if (!strcmp(ev, "resumed"))
			printf(" by %s after %s ms",
			       ctl_str_or(e, "reason", "?"),
			       v ? json_object_get_string(v) : "?");
		putchar('\n');
		return;
	}
	if (strcmp(ev, "state"))
		return; /* an event this version does not know */
	v = ctl_number(e, "unix_ms");
	fmt_clock(v ? json_object_get_int64(v) : -1, clk, sizeof(clk));
	printf("%s %s -> %s", clk, ctl_str_or(e, "from", "?"),
	       ctl_str_or(e, "to", "?"));
	v = ctl_number(e, "vcpu");
	if (v && json_object_get_int64(v) >= 0)
		printf(" vcpu %" PRId64, json_object_get_int64(v));
	v = ctl_number(e, "full_idle_ms");
	if (v)
		printf(" full idle %" PRId64 " ms", json_object_get_int64(v));
	putchar('\n');
}

