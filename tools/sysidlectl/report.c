/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * sysidlectl report: every VM of the host, this VMM's (the sockets of DIR)
 * and the libvirt domains of the bridge's metrics file (--bridge-metrics),
 * with its duty cycle and a recommendation by the rules below (the help
 * and tools/sysidlectl.md state them):
 *
 *  1. fully idle at least 97 % of the window (the 24 h one, or the VM's
 *     whole life when younger; the span used is shown): "suspend or pack";
 *  2. else, every vCPU halted at least 80 % of a one-second sample (two
 *     status requests REPORT_SAMPLE_S apart; a vCPU that waits for its
 *     start-up IPI counts as halted) and at least half of the last
 *     minute's wake-ups from a periodic tick (why_rules.c's tick rows):
 *     "a tick policy";
 *  3. else: "nothing" (busy: a vCPU running, or woken by its own work);
 *     without a duty cycle and with no vCPU running, "unknown".
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sysidlectl.h"

#define IDLE_RULE 0.97  /* rule 1's share of the window fully idle */
#define HALTED_RULE 0.8 /* rule 2's share of the sample each vCPU halted */
#define REPORT_SAMPLE_S 1 /* rule 2's sample */
#define DAY_S 86400.0

struct report_row {
	char name[256], kind[8], state[16], since[32], woken[320];
	const char *advice, *why;
	double ratio, span_s;   /* NAN: duty cycle unknown */
	const char *window;     /* "24h", "life" */
	json_object *o;         /* --json */
};

/* Status objects @prev and @vm of one VM, @prev the earlier (NULL: none,
 * then the vCPUs halted now): how many vCPUs were halted less than
 * HALTED_RULE of the time between them ("halted_s", the current wait in;
 * a vCPU idle in both with no halted time moved waits for its SIPI or is
 * parked: halted). */
static size_t vcpus_busy(json_object *prev, json_object *vm)
{
	json_object *a = ctl_member(vm, "vcpus", json_type_array);
	json_object *b = ctl_member(prev, "vcpus", json_type_array);
	size_t n = a ? json_object_array_length(a) : 0, busy = 0, total;
	double dt = num_or(vm, "uptime_s", 0) - num_or(prev, "uptime_s", 0);

	if (!b || json_object_array_length(b) != n || dt <= 0)
		return vcpus_halted(vm, &total) < total ?
		       total - vcpus_halted(vm, &total) : 0;
	for (size_t i = 0; i < n; i++) {
		json_object *x = json_object_array_get_idx(b, i);
		json_object *y = json_object_array_get_idx(a, i);
		double h = num_or(y, "halted_s", 0) - num_or(x, "halted_s", 0);
		json_object *ix = ctl_member(x, "idle", json_type_boolean);
		json_object *iy = ctl_member(y, "idle", json_type_boolean);
		bool parked = h <= 0 && ix && iy && json_object_get_boolean(ix)
			      && json_object_get_boolean(iy);

		busy += !parked && h < HALTED_RULE * dt;
	}
	return busy;
}

/* Rule 2's test on status object @vm (@prev the sample before it, or
 * NULL): every vCPU mostly halted, and half the wake-ups of the last
 * minute or more from tick rules; the busiest source's label and rate
 * into @woken. *@running: vCPUs not halted now. */
static bool ticking(json_object *prev, json_object *vm, char *woken,
		    size_t size, size_t *running)
{
	json_object *rows = ctl_member(ctl_member(vm, "wake_sources",
						  json_type_object),
				       "vcpus", json_type_array);
	size_t n = rows ? json_object_array_length(rows) : 0, total;
	double all = 0, tick = 0;
	char label[96], rate[32];

	*running = vcpus_halted(vm, &total);
	*running = total - *running;
	snprintf(woken, size, "-");
	for (size_t i = 0; i < n; i++) {
		json_object *r = json_object_array_get_idx(rows, i);
		const char *src = ctl_str_or(r, "source", "?");
		const char *last = ctl_str_or(r, "last", NULL);
		double m = num_or(r, "last_minute", 0);

		all += m;
		if (why_rule_for(src, last, num_or(r, "vcpu", -1) ==
				 num_or(vm, "timekeeper", -1))->tick)
			tick += m;
		if (i == 0 && m > 0) {
			why_label(src, last, label, sizeof(label));
			fmt_per_s(num_or(r, "per_second", 0), rate, sizeof(rate));
			snprintf(woken, size, "vCPU %.0f %s %s",
				 num_or(r, "vcpu", -1), label, rate);
		}
	}
	return !vcpus_busy(prev, vm) && all > 0 && tick * 2 >= all;
}

/* Rule 1's inputs from status object @vm's "duty": the 24 h window's
 * ratio and span; false when it has none. */
static bool duty_of(json_object *vm, double *ratio, double *span)
{
	json_object *d = ctl_member(vm, "duty", json_type_object);
	json_object *r = ctl_member(d, "full_idle_ratio", json_type_object);
	json_object *s = ctl_member(d, "span_s", json_type_object);

	if (!r || !s || !ctl_number(r, "24h") || !ctl_number(s, "24h"))
		return false;
	*ratio = num_or(r, "24h", 0);
	*span = num_or(s, "24h", 0);
	return true;
}

/* The recommendation by the rules, and the reason in a few words. */
static void advise(struct report_row *r, bool tick, size_t running)
{
	if (!isnan(r->ratio) && r->ratio >= IDLE_RULE) {
		r->advice = "suspend or pack";
		r->why = "fully idle 97 % of the window or more";
	} else if (tick) {
		r->advice = "a tick policy";
		r->why = "its vCPUs mostly halted, woken mostly by a periodic "
			 "tick";
	} else if (running || !isnan(r->ratio)) {
		r->advice = "nothing";
		r->why = running ? "busy: a vCPU running" :
			"busy: woken by its own work";
	} else {
		r->advice = "unknown";
		r->why = "duty cycle unknown";
	}
}

/* A row for the VM with socket DIR/@ent; @prev its status object a
 * sample earlier (NULL: none). */
static void vmm_row(struct report_row *r, const char *ent, json_object *prev)
{
	json_object *vm, *reply;
	char why[256];
	size_t running = 0;
	bool tick = false;

	memset(r, 0, sizeof(*r));
	r->ratio = r->span_s = NAN;
	snprintf(r->kind, sizeof(r->kind), "vmm");
	snprintf(r->name, sizeof(r->name), "%.*s", (int)(strlen(ent) - 5), ent);
	snprintf(r->state, sizeof(r->state), "?");
	snprintf(r->since, sizeof(r->since), "-");
	snprintf(r->woken, sizeof(r->woken), "-");
	reply = fetch_status(ent, &vm, why, sizeof(why));
	if (!reply) {
		r->advice = "unknown";
		r->why = NULL;
		r->o = json_object_new_object();
		json_object_object_add(r->o, "error",
				       json_object_new_string(why));
		snprintf(r->woken, sizeof(r->woken), "%s", why);
		return;
	}
	snprintf(r->name, sizeof(r->name), "%s", ctl_str_or(vm, "name", "?"));
	snprintf(r->state, sizeof(r->state), "%s", ctl_str_or(vm, "state",
							      "?"));
	fmt_duration(num_or(vm, "in_state_s", -1), r->since, sizeof(r->since));
	if (duty_of(vm, &r->ratio, &r->span_s)) {
		r->window = r->span_s >= DAY_S - 61 ? "24h" : "life";
	} else if (!strcmp(r->state, "FULL_NOTED") &&
		   num_or(vm, "in_state_s", 0) >= DAY_S) {
		r->ratio = 1; /* idle all day, without a duty cycle */
		r->span_s = DAY_S;
		r->window = "24h";
	}
	tick = ticking(prev, vm, r->woken, sizeof(r->woken), &running);
	if (running && !strcmp(r->woken, "-")) /* busy, never halting */
		snprintf(r->woken, sizeof(r->woken), "%zu vCPU%s running",
			 running, running > 1 ? "s" : "");
	advise(r, tick, running);
	r->o = json_object_new_object();
	json_object_object_add(r->o, "running_vcpus",
			       json_object_new_int64((int64_t)running));
	json_object_put(reply);
}

/* A row for bridge domain @b at Unix time @now: its state, and its duty
 * cycle from the bridge's --wakes-file @wakes (NULL: none), else only
 * when it has been fully idle the whole day. */
static void libvirt_row(struct report_row *r, const struct bridge_domain *b,
			double now, json_object *wakes)
{
	json_object *d = wakes ? ctl_member(wakes_file_domain(wakes, b->uuid),
					    "duty", json_type_object) : NULL;

	static const char *const states[] = { "NOT", "SHORT", "LONG", "FULL",
					      "FULL_NOTED" };

	memset(r, 0, sizeof(*r));
	r->ratio = r->span_s = NAN;
	snprintf(r->kind, sizeof(r->kind), "libvirt");
	snprintf(r->name, sizeof(r->name), "%s", b->name);
	snprintf(r->state, sizeof(r->state), "%s",
		 b->state >= 0 ? states[b->state] : "?");
	if (b->since_s > 0)
		fmt_duration(now - b->since_s, r->since, sizeof(r->since));
	else
		snprintf(r->since, sizeof(r->since), "-");
	snprintf(r->woken, sizeof(r->woken), "-");
	if (d && ctl_number(d, "full_idle_ratio_24h") &&
	    ctl_number(d, "span_24h_s")) { /* the bridge's --wakes-file */
		r->ratio = num_or(d, "full_idle_ratio_24h", 0);
		r->span_s = num_or(d, "span_24h_s", 0);
		r->window = r->span_s >= DAY_S - 61 ? "24h" : "life";
	} else if (b->state == 4 && b->full_since_s > 0 &&
	    now - b->full_since_s >= DAY_S) {
		r->ratio = 1;
		r->span_s = DAY_S;
		r->window = "24h";
	}
	advise(r, false, 0);
	if (isnan(r->ratio))
		r->why = "duty cycle unknown (without the bridge's "
			 "--wakes-file, known only for a domain idle all day)";
	r->o = json_object_new_object();
	json_object_object_add(r->o, "uuid", json_object_new_string(b->uuid));
}

/* Print @r (text or --json) and free what it holds. */
static void report_print(struct report_row *r, int w)
{
	char ratio[16], span[40];

	if (isnan(r->ratio))
		snprintf(ratio, sizeof(ratio), "?");
	else
		snprintf(ratio, sizeof(ratio), "%.1f%%", r->ratio * 100);
	if (isnan(r->span_s))
		snprintf(span, sizeof(span), "-");
	else if (!strcmp(r->window, "24h"))
		snprintf(span, sizeof(span), "24h");
	else
		fmt_duration(r->span_s, span, sizeof(span));
	if (!options()->json) {
		printf("%-*s  %-7s %-10s %-7s %-9s %-7s %-16s %s\n", w, r->name,
		       r->kind, r->state, r->since, ratio, span, r->advice,
		       r->woken);
	} else {
		json_object *o = r->o ? r->o : json_object_new_object();

		json_object_object_add(o, "name", json_object_new_string(
					       r->name));
		json_object_object_add(o, "kind", json_object_new_string(
					       r->kind));
		json_object_object_add(o, "state", json_object_new_string(
					       r->state));
		json_object_object_add(o, "full_idle_ratio", isnan(r->ratio) ?
			NULL : json_object_new_double(r->ratio));
		json_object_object_add(o, "span_s", isnan(r->span_s) ? NULL :
				       json_object_new_double(r->span_s));
		json_object_object_add(o, "window", r->window ?
			json_object_new_string(r->window) : NULL);
		json_object_object_add(o, "woken_by", json_object_new_string(
					       r->woken));
		json_object_object_add(o, "advice", json_object_new_string(
					       r->advice));
		json_object_object_add(o, "reason", r->why ?
			json_object_new_string(r->why) : NULL);
		print_json(o);
		r->o = o;
	}
	json_object_put(r->o);
	r->o = NULL;
}

/* See sysidlectl.h: @bridge_metrics the bridge's metrics file, NULL:
 * none. */
int cmd_report(const char *bridge_metrics, const char *wakes_file)
{
	json_object *wakes = NULL;
	struct bridge_domains bd = { 0 };
	struct report_row *rows;
	json_object **prev, **prev_vm;
	size_t n, nb = 0, i;
	char **ents;
	int rc, w = 4;

	ents = list_sockets(&n, &rc);
	if (!ents)
		return rc;
	if (bridge_metrics && bridge_read(bridge_metrics, &bd)) {
		for (i = 0; i < n; i++)
			free(ents[i]);
		free(ents);
		return EXIT_ERR;
	}
	if (wakes_file && !(wakes = wakes_file_read(wakes_file))) {
		rc = EXIT_ERR;
		goto out;
	}
	nb = bd.n;
	rows = calloc(n + nb + 1, sizeof(*rows));
	if (!rows) {
		errmsg("out of memory");
		rc = EXIT_ERR;
		goto out;
	}
	prev = calloc(n + 1, sizeof(*prev));
	prev_vm = calloc(n + 1, sizeof(*prev_vm));
	for (i = 0; prev && prev_vm && i < n; i++) {
		char why[256];

		prev[i] = fetch_status(ents[i], &prev_vm[i], why, sizeof(why));
	}
	if (n) /* rule 2's sample */
		nanosleep(&(struct timespec){ REPORT_SAMPLE_S, 0 }, NULL);
	for (i = 0; i < n; i++)
		vmm_row(&rows[i], ents[i], prev && prev[i] ? prev_vm[i] : NULL);
	for (i = 0; prev && i < n; i++)
		json_object_put(prev[i]);
	free(prev);
	free(prev_vm);
	for (i = 0; i < nb; i++)
		libvirt_row(&rows[n + i], &bd.v[i], (double)time(NULL), wakes);
	for (i = 0; i < n + nb; i++)
		if ((int)strlen(rows[i].name) > w)
			w = (int)strlen(rows[i].name);
	if (!options()->json)
		printf("%-*s  %-7s %-10s %-7s %-9s %-7s %-16s %s\n", w, "NAME",
		       "KIND", "STATE", "SINCE", "FULLIDLE", "WINDOW", "ADVICE",
		       "WOKEN MOST BY");
	for (i = 0; i < n + nb; i++)
		report_print(&rows[i], w);
	if (bridge_metrics && !bd.up && !options()->json)
		printf("(the bridge's file says it is not running: its "
		       "domains as last seen)\n");
	free(rows);
	rc = flush_out();
out:
	json_object_put(wakes);
	bridge_free(&bd);
	for (i = 0; i < n; i++)
		free(ents[i]);
	free(ents);
	return rc;
}
