/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * sysidlectl why NAME: what has kept the VM out of full idle lately, from
 * its status (wake_sources, the vCPUs running now, the ends of full idle
 * by cause), each source in plain words with its rate and the advice of
 * why_rules.c. --json: the same as one object.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "sysidlectl.h"

#define WHY_TOP 8       /* sources shown, busiest first */
#define WHY_EARLIER 3   /* ... of those before the last minute, if none in it */

/* See sysidlectl.h. */
double num_or(json_object *o, const char *key, double def)
{
	json_object *v = ctl_number(o, key);

	return v ? json_object_get_double(v) : def;
}

/* The wake_sources rows to show: those of the last minute (at most
 * WHY_TOP), else the busiest before it (WHY_EARLIER), into @out; returns
 * how many, *@earlier set for the latter. @rows may be NULL. */
static size_t pick_rows(json_object *rows, json_object **out, bool *earlier)
{
	size_t n = rows ? json_object_array_length(rows) : 0, k = 0;

	*earlier = false;
	for (size_t i = 0; i < n && k < WHY_TOP; i++) {
		json_object *r = json_object_array_get_idx(rows, i);

		if (num_or(r, "last_minute", 0) > 0)
			out[k++] = r;
	}
	if (k)
		return k;
	*earlier = true;
	for (size_t i = 0; i < n && k < WHY_EARLIER; i++) {
		json_object *r = json_object_array_get_idx(rows, i);

		if (num_or(r, "total", 0) > 0)
			out[k++] = r;
	}
	return k;
}

/* One row's explanation as JSON: the row's numbers and the rule's words;
 * @tk the VM's timekeeper vCPU (-1: none). */
static json_object *row_json(json_object *r, double tk)
{
	const char *src = ctl_str_or(r, "source", "?");
	const char *last = ctl_str_or(r, "last", NULL);
	const struct why_rule *rule = why_rule_for(src, last,
						   num_or(r, "vcpu", -1) == tk);
	json_object *o = json_object_new_object();
	char label[96];

	why_label(src, last, label, sizeof(label));
	json_object_object_add(o, "vcpu", json_object_new_int64(
				       (int64_t)num_or(r, "vcpu", -1)));
	json_object_object_add(o, "source", json_object_new_string(src));
	json_object_object_add(o, "last", json_object_new_string(
				       last ? last : ""));
	json_object_object_add(o, "per_second", json_object_new_double(
				       num_or(r, "per_second", 0)));
	json_object_object_add(o, "last_minute", json_object_new_int64(
				       (int64_t)num_or(r, "last_minute", 0)));
	json_object_object_add(o, "total", json_object_new_int64(
				       (int64_t)num_or(r, "total", 0)));
	json_object_object_add(o, "label", json_object_new_string(label));
	json_object_object_add(o, "what", json_object_new_string(rule->what));
	json_object_object_add(o, "advice",
			       json_object_new_string(rule->advice));
	json_object_object_add(o, "tick", json_object_new_boolean(rule->tick));
	return o;
}

/* The explanation of status object @vm as one JSON object (the caller
 * puts it). */
static json_object *why_json(json_object *vm)
{
	json_object *ws = ctl_member(vm, "wake_sources", json_type_object);
	json_object *rows = ctl_member(ws, "vcpus", json_type_array);
	json_object *hk = ctl_member(ws, "housekeeping", json_type_array);
	json_object *exits = ctl_member(ws, "full_idle_exits",
					json_type_object);
	json_object *vcpus = ctl_member(vm, "vcpus", json_type_array);
	json_object *o = json_object_new_object(), *a, *v;
	json_object *pick[WHY_TOP];
	bool earlier;
	size_t n = pick_rows(rows, pick, &earlier);

	json_object_object_add(o, "name", json_object_new_string(
				       ctl_str_or(vm, "name", "?")));
	v = ctl_member(vm, "sysidle", json_type_boolean);
	json_object_object_add(o, "sysidle", json_object_new_boolean(
				       v && json_object_get_boolean(v)));
	json_object_object_add(o, "state", json_object_new_string(
				       ctl_str_or(vm, "state", "?")));
	json_object_object_add(o, "in_state_s", json_object_new_double(
				       num_or(vm, "in_state_s", -1)));
	json_object_object_add(o, "window_s", json_object_new_double(
				       num_or(ws, "window_s", 0)));
	a = json_object_new_array();
	for (size_t i = 0; vcpus && i < json_object_array_length(vcpus); i++) {
		json_object *c = json_object_array_get_idx(vcpus, i);

		v = ctl_member(c, "idle", json_type_boolean);
		if (v && !json_object_get_boolean(v))
			json_object_array_add(a, json_object_new_int64(
				(int64_t)num_or(c, "id", -1)));
	}
	json_object_object_add(o, "running_vcpus", a);
	a = json_object_new_array();
	for (size_t i = 0; i < n; i++)
		json_object_array_add(a, row_json(pick[i],
						  num_or(vm, "timekeeper", -1)));
	json_object_object_add(o, "sources", a);
	json_object_object_add(o, "sources_before_last_minute",
			       json_object_new_boolean(earlier && n));
	json_object_object_add(o, "full_idle_exits", exits ?
			       json_object_get(exits) : json_object_new_object());
	a = json_object_new_array();
	for (size_t i = 0; hk && i < json_object_array_length(hk); i++) {
		json_object *h = json_object_array_get_idx(hk, i), *e;
		const char *reason = ctl_str_or(h, "reason", "?");

		if (num_or(h, "last_minute", 0) <= 0)
			continue;
		e = json_object_new_object();
		json_object_object_add(e, "reason",
				       json_object_new_string(reason));
		json_object_object_add(e, "per_second", json_object_new_double(
					       num_or(h, "per_second", 0)));
		json_object_object_add(e, "note", json_object_new_string(
					       why_housekeeping_note(reason)));
		json_object_array_add(a, e);
	}
	json_object_object_add(o, "housekeeping", a);
	return o;
}

/* The human form of why_json's object @w. */
static void print_why(json_object *w)
{
	json_object *a, *v;
	char dur[32], rate[32];
	bool sysidle = json_object_get_boolean(ctl_member(w, "sysidle",
						json_type_boolean));
	size_t n;
	int any = 0;

	fmt_duration(num_or(w, "in_state_s", -1), dur, sizeof(dur));
	if (sysidle)
		printf("%s: %s for %s\n", ctl_str_or(w, "name", "?"),
		       ctl_str_or(w, "state", "?"), dur);
	else
		printf("%s: full idle is off (the VMM runs without --sysidle): "
		       "its idle state is not tracked; its wake-ups still "
		       "are\n", ctl_str_or(w, "name", "?"));
	a = ctl_member(w, "running_vcpus", json_type_array);
	n = a ? json_object_array_length(a) : 0;
	if (n) {
		printf("Running now (not halted):");
		for (size_t i = 0; i < n; i++)
			printf("%s vCPU %s", i ? "," : "",
			       json_object_get_string(
				       json_object_array_get_idx(a, i)));
		printf(": guest work keeps the VM out of full idle\n");
	}
	a = ctl_member(w, "sources", json_type_array);
	n = a ? json_object_array_length(a) : 0;
	v = ctl_member(w, "sources_before_last_minute", json_type_boolean);
	if (!n)
		printf("No vCPU woken from HLT yet\n");
	else if (v && json_object_get_boolean(v))
		printf("No vCPU woken from HLT in the last %.0fs; before "
		       "that, the busiest:\n", num_or(w, "window_s", 60));
	else
		printf("What woke its vCPUs in the last %.0fs, busiest "
		       "first:\n", num_or(w, "window_s", 60));
	for (size_t i = 0; i < n; i++) {
		json_object *r = json_object_array_get_idx(a, i);
		const char *advice = ctl_str_or(r, "advice", "");

		fmt_per_s(num_or(r, "per_second", 0), rate, sizeof(rate));
		if (v && json_object_get_boolean(v))
			snprintf(rate, sizeof(rate), "%" PRId64 " in all",
				 (int64_t)num_or(r, "total", 0));
		printf("  vCPU %" PRId64 " %s, %s: %s%s%s\n",
		       (int64_t)num_or(r, "vcpu", -1),
		       ctl_str_or(r, "label", "?"), rate,
		       ctl_str_or(r, "what", ""), *advice ? "; " : "", advice);
	}
	if (sysidle) {
		printf("Ends of full idle by cause:");
		json_object_object_foreach(ctl_member(w, "full_idle_exits",
						      json_type_object), k, x) {
			if (json_object_get_int64(x) > 0)
				printf("%s %s %" PRId64, any++ ? "," : "", k,
				       json_object_get_int64(x));
		}
		printf("%s\n", any ? "" : " none yet");
		json_object_object_foreach(ctl_member(w, "full_idle_exits",
						      json_type_object), c, y) {
			const struct why_rule *r = why_rule_for(c, NULL, true);

			if (json_object_get_int64(y) > 0)
				printf("  %s: %s\n", c, r->what);
		}
	}
	a = ctl_member(w, "housekeeping", json_type_array);
	n = a ? json_object_array_length(a) : 0;
	for (size_t i = 0; i < n; i++) {
		json_object *h = json_object_array_get_idx(a, i);
		const char *note = ctl_str_or(h, "note", "");

		fmt_per_s(num_or(h, "per_second", 0), rate, sizeof(rate));
		printf("%s %s %s%s%s%s", i ? "," : "Housekeeping thread:",
		       ctl_str_or(h, "reason", "?"), rate, *note ? " (" : "",
		       note, *note ? ")" : "");
	}
	if (n)
		putchar('\n');
}

/* See sysidlectl.h: @name a VM's name or socket path. */
int cmd_why(const char *name)
{
	struct ctl_conn c = { .fd = -1 };
	json_object *r, *vm, *w;
	int rc;

	r = ask(&c, name, "status", &rc);
	vm = r ? status_vm(&c, r) : NULL;
	if (r && !vm) {
		errmsg("%s: %s", name, c.err);
		rc = EXIT_ERR;
	}
	if (vm) {
		w = why_json(vm);
		if (options()->json)
			print_json(w);
		else
			print_why(w);
		rc = flush_out();
		if (rc == EXIT_OK && !json_object_get_boolean(
			    ctl_member(w, "sysidle", json_type_boolean))) {
			errmsg("%s: full idle is off (the VMM runs without "
			       "--sysidle)", name);
			rc = EXIT_NO_SYSIDLE;
		}
		json_object_put(w);
	}
	json_object_put(r);
	ctl_close(&c);
	return rc;
}
