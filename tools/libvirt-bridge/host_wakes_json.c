/* SPDX-License-Identifier: GPL-2.0-only */
/* A domain's host-side wake-up figures as JSON: see host_wakes.h. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "host_wakes.h"

#define ABOUT "the host's view: KVM's counters of the VM (summed over its " \
	      "vCPUs) and the wake-ups of the QEMU process's threads, not a " \
	      "guest-side attribution"

/* The length of the valid UTF-8 sequence at @s, 0: not one. The caller
 * guarantees @s is NUL-terminated (the NUL ends a sequence as invalid). */
static size_t utf8_len(const unsigned char *s)
{
	size_t n = *s >= 0xf0 && *s <= 0xf4 ? 4 : *s >= 0xe0 ? 3 :
		   *s >= 0xc2 && *s < 0xe0 ? 2 : 0;

	if (!n || (n == 3 && *s >= 0xf0))
		return 0;
	for (size_t i = 1; i < n; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	return n;
}

/* No requirement but an open @f; see host_wakes.h. */
void host_wakes_json_string(FILE *f, const char *s)
{
	const unsigned char *p = (const unsigned char *)(s ? s : "");

	fputc('"', f);
	while (*p) {
		size_t n = *p >= 0x80 ? utf8_len(p) : 1;

		if (*p == '"' || *p == '\\')
			fprintf(f, "\\%c", *p);
		else if (*p < 0x20 || *p == 0x7f)
			fprintf(f, "\\u%04x", *p);
		else if (*p >= 0x80 && !n)
			fputc('?', f);
		else
			fwrite(p, 1, n, f);
		p += n ? n : 1;
	}
	fputc('"', f);
}

/* "per_s": @v with 3 decimals, or null without @has. The caller
 * guarantees @f is open for writing (for the functions below too). */
static void per_s(FILE *f, bool has, double v)
{
	if (has)
		fprintf(f, "\"per_s\":%.3f", v);
	else
		fputs("\"per_s\":null", f);
}

/* KVM's counters: "kvm":{...} or "kvm":null with "kvm_absent". The
 * caller guarantees @hw is valid. */
static void kvm_json(FILE *f, const struct host_wakes *hw)
{
	bool any = false;

	for (int k = 0; k < HW_KVM_N; k++) {
		uint64_t total;
		double r = 0;
		bool has;

		if (!host_wakes_kvm_total(hw, (enum host_wakes_kvm)k, &total))
			continue;
		fprintf(f, "%s\"%s\":{\"total\":%" PRIu64 ",",
			any ? "," : "\"kvm\":{\"scope\":\"vm\",",
			host_wakes_kvm_file((enum host_wakes_kvm)k), total);
		has = host_wakes_kvm_rate(hw, (enum host_wakes_kvm)k, &r);
		per_s(f, has, r);
		fputc('}', f);
		any = true;
	}
	if (any) {
		fputs("}", f);
		return;
	}
	fputs("\"kvm\":null,\"kvm_absent\":", f);
	host_wakes_json_string(f, host_wakes_kvm_why(hw));
}

/* The thread names, busiest first over the window (then by total). The
 * caller guarantees @hw is valid. */
static void threads_json(FILE *f, const struct host_wakes *hw)
{
	unsigned int n = host_wakes_nthreads(hw), order[HOST_WAKES_NAMES];
	double r[HOST_WAKES_NAMES];
	bool has[HOST_WAKES_NAMES];
	uint64_t tot[HOST_WAKES_NAMES];

	for (unsigned int i = 0; i < n; i++) {
		unsigned int th, j = i;

		host_wakes_thread(hw, i, &th, &tot[i]);
		r[i] = 0;
		has[i] = host_wakes_thread_rate(hw, i, &r[i]);
		while (j > 0 && (r[order[j - 1]] < r[i] ||
				 (r[order[j - 1]] == r[i] &&
				  tot[order[j - 1]] < tot[i]))) {
			order[j] = order[j - 1];
			j--;
		}
		order[j] = i;
	}
	fputs("\"threads\":[", f);
	for (unsigned int k = 0; k < n; k++) {
		unsigned int i = order[k], th;
		uint64_t total;
		const char *name = host_wakes_thread(hw, i, &th, &total);

		fputs(k ? ",{\"name\":" : "{\"name\":", f);
		host_wakes_json_string(f, name);
		fprintf(f, ",\"threads\":%u,\"wakeups_total\":%" PRIu64 ",",
			th, total);
		per_s(f, has[i], r[i]);
		fputc('}', f);
	}
	fprintf(f, "],\"threads_capped\":%s",
		host_wakes_capped(hw) ? "true" : "false");
}

/* See host_wakes.h for what the caller guarantees. */
void host_wakes_json(FILE *f, const struct host_wakes *hw)
{
	uint64_t span;

	fputs("{\"source\":\"host\",\"about\":\"" ABOUT "\",", f);
	if (!hw || !host_wakes_pid(hw) || *host_wakes_why(hw)) {
		fputs("\"absent\":", f);
		host_wakes_json_string(f, hw ? host_wakes_why(hw) :
				       "not read");
		fputc('}', f);
		return;
	}
	span = host_wakes_span_ns(hw);
	fprintf(f, "\"pid\":%d,\"window_s\":%" PRIu64 ".%03" PRIu64
		",\"samples\":%u,", host_wakes_pid(hw), span / 1000000000u,
		span / 1000000u % 1000u, host_wakes_samples(hw));
	kvm_json(f, hw);
	fputc(',', f);
	threads_json(f, hw);
	fputc('}', f);
}
