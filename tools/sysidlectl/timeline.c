/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * sysidlectl timeline NAME --svg FILE: the VM's idle state over the last
 * hour, from its "history" reply (vmm/export/README.md), drawn as SVG text
 * written here: a band per state with the time spent in it, the full-idle
 * periods shaded, a tick under the bands at each end of full idle coloured
 * by its cause, a wall-clock (local time) axis and a legend.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sysidlectl.h"

#define TL_W 960
#define TL_LEFT 110          /* the bands' labels */
#define TL_RIGHT 20
#define TL_TOP 52
#define TL_BAND 24
#define TL_STATES 5
#define TL_CHANGES_MAX 100000 /* changes drawn at most */
#define TL_FULL_IDLE_FILL "#2ca02c" /* FULL_NOTED: the tests look for it */

static const char *const state_names[TL_STATES] = {
	"NOT", "SHORT", "LONG", "FULL", "FULL_NOTED" };
static const char *const state_fill[TL_STATES] = {
	"#d62728", "#ff7f0e", "#ffbb78", "#98df8a", TL_FULL_IDLE_FILL };

/* The causes of an end of full idle, their colours (last: unknown). */
static const struct { const char *by, *fill; } causes[] = {
	{ "lapic-timer", "#1f77b4" }, { "pv-tick", "#9467bd" },
	{ "ipi", "#8c564b" }, { "device", "#e377c2" },
	{ "serial-input", "#7f7f7f" }, { "kick", "#bcbd22" },
	{ "signal", "#17becf" }, { "other", "#000000" },
	{ "unknown", "#aaaaaa" },
};
#define TL_CAUSES (sizeof(causes) / sizeof(causes[0]))

/* The state named @s (any string), 0..4, or -1. */
static int state_num(const char *s)
{
	for (int i = 0; i < TL_STATES; i++)
		if (!strcmp(s, state_names[i]))
			return i;
	return -1;
}

/* The index in causes[] of the cause named @by (NULL or unknown: the
 * last, "unknown"). */
static size_t cause_num(const char *by)
{
	for (size_t i = 0; by && i + 1 < TL_CAUSES; i++)
		if (!strcmp(by, causes[i].by))
			return i;
	return TL_CAUSES - 1;
}

/* @s XML-escaped into @f. */
static void xml_text(FILE *f, const char *s)
{
	for (; *s; s++) {
		switch (*s) {
		case '&': fputs("&amp;", f); break;
		case '<': fputs("&lt;", f); break;
		case '>': fputs("&gt;", f); break;
		case '"': fputs("&quot;", f); break;
		case '\'': fputs("&apos;", f); break;
		default:
			if ((unsigned char)*s >= 0x20 || *s == '\t')
				fputc(*s, f);
		}
	}
}

/* Local time of @unix_ms by @fmt (strftime) into @buf. */
static void local_time(int64_t unix_ms, const char *fmt, char *buf,
		       size_t size)
{
	time_t t = (time_t)(unix_ms / 1000);
	struct tm tm;

	if (!localtime_r(&t, &tm) || !strftime(buf, size, fmt, &tm))
		snprintf(buf, size, "?");
}

struct plot {
	int64_t t0, t1;      /* the span drawn, Unix ms */
	double width;        /* of the plot area */
};

/* The x of Unix ms @t, clamped to the plot; @p->t1 > @p->t0. */
static double x_of(const struct plot *p, int64_t t)
{
	if (t < p->t0)
		t = p->t0;
	if (t > p->t1)
		t = p->t1;
	return TL_LEFT + (double)(t - p->t0) * p->width /
		(double)(p->t1 - p->t0);
}

/* One state's stretch [@a, @b) in its band; full idle shaded behind every
 * band too. */
static void segment(FILE *f, const struct plot *p, int st, int64_t a,
		    int64_t b)
{
	double x = x_of(p, a), w = x_of(p, b) - x;

	if (st < 0 || b <= a)
		return;
	if (w < 0.5)
		w = 0.5;
	if (st == TL_STATES - 1)
		fprintf(f, "<rect x='%.2f' y='%d' width='%.2f' height='%d' "
			"fill='#c7e9c0'/>\n", x, TL_TOP, w,
			TL_BAND * TL_STATES);
	fprintf(f, "<rect x='%.2f' y='%d' width='%.2f' height='%d' "
		"fill='%s'/>\n", x, TL_TOP + (TL_STATES - 1 - st) * TL_BAND + 3,
		w, TL_BAND - 6, state_fill[st]);
}

/* The time axis under the bands at @y: a tick and an HH:MM label every
 * step, at most 8. */
static void axis(FILE *f, const struct plot *p, int y)
{
	static const int64_t steps[] = { 1000, 2000, 5000, 10000, 30000,
					 60000, 300000, 600000, 900000,
					 1800000, 3600000 };
	int64_t step = steps[sizeof(steps) / sizeof(steps[0]) - 1], t;
	char lab[32];

	for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++)
		if ((p->t1 - p->t0) / steps[i] <= 8) {
			step = steps[i];
			break;
		}
	fprintf(f, "<line x1='%d' y1='%d' x2='%.0f' y2='%d' stroke='#000'/>\n",
		TL_LEFT, y, TL_LEFT + p->width, y);
	local_time(p->t0, "%H:%M:%S", lab, sizeof(lab));
	fprintf(f, "<text x='%d' y='%d' text-anchor='start' fill='#555'>"
		"%s</text>\n", TL_LEFT, y + 34, lab);
	local_time(p->t1, "%H:%M:%S", lab, sizeof(lab));
	fprintf(f, "<text x='%.0f' y='%d' text-anchor='end' fill='#555'>"
		"%s</text>\n", TL_LEFT + p->width, y + 34, lab);
	for (t = (p->t0 / step + 1) * step; t <= p->t1; t += step) {
		local_time(t, step < 60000 ? "%H:%M:%S" : "%H:%M", lab,
			   sizeof(lab));
		fprintf(f, "<line x1='%.2f' y1='%d' x2='%.2f' y2='%d' "
			"stroke='#000'/><text x='%.2f' y='%d' "
			"text-anchor='middle'>%s</text>\n", x_of(p, t), y,
			x_of(p, t), y + 5, x_of(p, t), y + 18, lab);
	}
}

/* The legend at @y: the states, the shading, the causes seen (@seen). */
static void legend(FILE *f, int y, const bool *seen)
{
	int x = TL_LEFT;

	for (int i = 0; i < TL_STATES; i++, x += 110)
		fprintf(f, "<rect x='%d' y='%d' width='12' height='12' "
			"fill='%s'/><text x='%d' y='%d'>%s</text>\n", x, y,
			state_fill[i], x + 16, y + 11, state_names[i]);
	fprintf(f, "<rect x='%d' y='%d' width='12' height='12' fill='#c7e9c0'/>"
		"<text x='%d' y='%d'>fully idle</text>\n", x, y, x + 16, y + 11);
	x = TL_LEFT;
	y += 20;
	fprintf(f, "<text x='%d' y='%d'>ends of full idle, by cause:</text>\n",
		x, y + 11);
	x += 190;
	for (size_t i = 0; i < TL_CAUSES; i++) {
		if (!seen[i])
			continue;
		fprintf(f, "<rect x='%d' y='%d' width='4' height='12' "
			"fill='%s'/><text x='%d' y='%d'>%s</text>\n", x, y,
			causes[i].fill, x + 8, y + 11, causes[i].by);
		x += 110;
	}
}

/* The band at @y of the minutes' full-idle shares (the reply's "minutes",
 * whole whatever the kept changes lost): a bar per minute, as high as
 * the share of the minute the VM was fully idle. */
static void minutes_band(FILE *f, const struct plot *p, json_object *h, int y)
{
	json_object *a = ctl_member(h, "minutes", json_type_array), *v;
	size_t n = a ? json_object_array_length(a) : 0;

	fprintf(f, "<text x='10' y='%d'>full idle/min</text>\n"
		"<rect x='%d' y='%d' width='%.0f' height='%d' fill='#f4f4f4'/>\n",
		y + 16, TL_LEFT, y, p->width, TL_BAND - 2);
	for (size_t i = 0; i < n && i < 24 * 60; i++) {
		json_object *m = json_object_array_get_idx(a, i);
		int64_t t0 = (v = ctl_number(m, "start_unix_ms")) ?
			json_object_get_int64(v) : p->t0;
		double span = (v = ctl_number(m, "span_s")) ?
			json_object_get_double(v) : 0;
		double r = (v = ctl_number(m, "full_idle_ratio")) ?
			json_object_get_double(v) : 0;
		int64_t t1 = t0 + (int64_t)(span * 1000);
		double h_px = (r < 0 ? 0 : r > 1 ? 1 : r) * (TL_BAND - 2);

		if (t1 <= p->t0 || h_px <= 0)
			continue;
		if (t0 < p->t0)
			t0 = p->t0;
		fprintf(f, "<rect x='%.2f' y='%.2f' width='%.2f' height='%.2f' "
			"fill='%s'/>\n", x_of(p, t0), y + TL_BAND - 2 - h_px,
			x_of(p, t1) - x_of(p, t0), h_px, TL_FULL_IDLE_FILL);
	}
}

/* The SVG of history reply @h for VM @name into @f. */
static void draw(FILE *f, const char *name, json_object *h)
{
	json_object *a = ctl_member(h, "changes", json_type_array), *v;
	size_t n = a ? json_object_array_length(a) : 0;
	struct plot p = { .width = TL_W - TL_LEFT - TL_RIGHT };
	bool seen[TL_CAUSES] = { false };
	int64_t at, trunc = -1;
	int st, ym = TL_TOP + TL_STATES * TL_BAND + 4, y = ym + TL_BAND + 2;
	char a0[64], a1[64];

	if (n > TL_CHANGES_MAX)
		n = TL_CHANGES_MAX;
	v = ctl_number(h, "from_unix_ms");
	p.t0 = v ? json_object_get_int64(v) : 0;
	v = ctl_number(h, "now_unix_ms");
	p.t1 = v ? json_object_get_int64(v) : p.t0;
	if (p.t1 <= p.t0)
		p.t1 = p.t0 + 1;
	if ((v = ctl_number(h, "truncated_before_unix_ms")))
		trunc = json_object_get_int64(v);
	fprintf(f, "<?xml version='1.0' encoding='UTF-8'?>\n"
		"<svg xmlns='http://www.w3.org/2000/svg' width='%d' "
		"height='%d' viewBox='0 0 %d %d' font-family='sans-serif' "
		"font-size='12'>\n<rect width='100%%' height='100%%' "
		"fill='#ffffff'/>\n", TL_W, y + 118, TL_W, y + 118);
	local_time(p.t0, "%Y-%m-%d %H:%M:%S", a0, sizeof(a0));
	local_time(p.t1, "%H:%M:%S %Z", a1, sizeof(a1));
	fputs("<text x='10' y='22' font-size='15' font-weight='bold'>", f);
	xml_text(f, name);
	fprintf(f, ": idle state, %s to %s</text>\n", a0, a1);
	for (int i = 0; i < TL_STATES; i++)
		fprintf(f, "<text x='10' y='%d'>%s</text>\n",
			TL_TOP + (TL_STATES - 1 - i) * TL_BAND + 16,
			state_names[i]);
	at = trunc > p.t0 ? trunc : p.t0;
	st = n ? state_num(ctl_str_or(json_object_array_get_idx(a, 0),
				      "from", "")) :
		state_num(ctl_str_or(h, "state", ""));
	for (size_t i = 0; i < n; i++) {
		json_object *c = json_object_array_get_idx(a, i);
		int64_t t = (v = ctl_number(c, "unix_ms")) ?
			json_object_get_int64(v) : at;

		if (t < at)
			t = at;
		segment(f, &p, st, at, t);
		if (st == TL_STATES - 1 && state_num(ctl_str_or(c, "to", "")) !=
		    st) {
			size_t k = cause_num(ctl_str_or(c, "by", NULL));

			seen[k] = true;
			fprintf(f, "<line x1='%.2f' y1='%d' x2='%.2f' y2='%d' "
				"stroke='%s' stroke-width='2'/>\n", x_of(&p, t),
				y + 2, x_of(&p, t), y + 16, causes[k].fill);
		}
		st = state_num(ctl_str_or(c, "to", ""));
		at = t;
	}
	segment(f, &p, st, at, p.t1);
	minutes_band(f, &p, h, ym);
	axis(f, &p, y + 20);
	if (trunc > p.t0) {
		local_time(trunc, "%H:%M:%S", a0, sizeof(a0));
		fprintf(f, "<text x='%d' y='%d' fill='#d62728'>changes before "
			"%s not kept (the VMM keeps the last %s)</text>\n",
			TL_LEFT, TL_TOP - 8, a0, (v = ctl_number(h, "capacity")) ?
			json_object_get_string(v) : "few");
	}
	v = ctl_member(h, "sysidle", json_type_boolean);
	if (v && !json_object_get_boolean(v))
		fprintf(f, "<text x='%d' y='%d' fill='#d62728'>full idle is "
			"off: the VMM runs without --sysidle</text>\n",
			TL_LEFT, TL_TOP - 8);
	legend(f, y + 58, seen);
	fputs("</svg>\n", f);
}

/* See sysidlectl.h: @svg the file to write (created or truncated). */
int cmd_timeline(const char *name, const char *svg)
{
	struct ctl_conn c = { .fd = -1 };
	json_object *h, *a;
	FILE *f;
	int rc;

	h = ask(&c, name, "history", &rc);
	ctl_close(&c);
	if (!h)
		return rc;
	a = ctl_member(h, "changes", json_type_array);
	if (!a || !ctl_number(h, "from_unix_ms") ||
	    !ctl_number(h, "now_unix_ms")) {
		errmsg("%s: malformed reply: no history (a VMM older than "
		       "this sysidlectl?)", name);
		json_object_put(h);
		return EXIT_ERR;
	}
	f = fopen(svg, "w");
	if (!f) {
		errmsg("timeline: cannot write %s: %s", svg, strerror(errno));
		json_object_put(h);
		return EXIT_ERR;
	}
	draw(f, name, h);
	rc = ferror(f);
	if (fclose(f) || rc) {
		errmsg("timeline: cannot write %s: %s", svg, strerror(errno));
		json_object_put(h);
		return EXIT_ERR;
	}
	if (options()->json)
		print_json(h);
	else
		printf("%s: %zu state changes drawn into %s\n", name,
		       json_object_array_length(a), svg);
	json_object_put(h);
	return flush_out();
}
