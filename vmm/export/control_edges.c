// SPDX-License-Identifier: GPL-2.0-only
/*
 * The filtered watch: {"cmd":"watch","edges":"full_idle",
 * "enter_after_ms":P,"leave_after_ms":R} gets no state events, only
 * settled full-idle edges: "idle":true once the VM has been FULL_NOTED
 * for P ms without a break, "idle":false once it has been out of
 * FULL_NOTED for R ms without a break (vmm/export/README.md, "Filtered
 * watch"). A wake shorter than R while reported idle, or a full idle period
 * shorter than P while reported busy, sends nothing at all.
 *
 * Each watcher keeps the VM's side of FULL_NOTED as its state events
 * say (edge_in, since edge_since_ns) and what it last reported
 * (edge_idle); while the two differ an edge is pending, due at
 * edge_since_ns + P or R. The export thread sees it at the next state
 * event or when its poll() times out at the earliest pending deadline
 * (control_poll_timeout): no timer of its own, and no wake-up but the
 * one at a deadline that really changes what is reported.
 *
 * Export thread only, like the rest of the control socket.
 */
#include <string.h>

#include "base/time.h"
#include "export/control_client.h"
#include <sysidle/sysidle.h>

#define EDGES_MAX_MS 3600000u /* an hour */

/* @key of @req as a hold in ns into @ns; false when present and not an
 * integer 0..EDGES_MAX_MS. */
static bool edges_hold(struct json_object *req, const char *key, uint64_t *ns)
{
	struct json_object *v;
	int64_t ms;

	*ns = 0;
	if (!json_object_object_get_ex(req, key, &v))
		return true;
	if (!json_object_is_type(v, json_type_int))
		return false;
	ms = json_object_get_int64(v);
	if (ms < 0 || ms > EDGES_MAX_MS)
		return false;
	*ns = (uint64_t)ms * 1000000u;
	return true;
}

const char *edges_parse(struct client *c, struct json_object *req)
{
	struct json_object *e;

	c->edges = false;
	if (!json_object_object_get_ex(req, "edges", &e))
		return NULL;
	if (!json_object_is_type(e, json_type_string) ||
	    strcmp(json_object_get_string(e), "full_idle"))
		return "bad watch: edges must be \"full_idle\"";
	if (!edges_hold(req, "enter_after_ms", &c->enter_ns))
		return "bad watch: enter_after_ms must be an integer "
		       "0..3600000";
	if (!edges_hold(req, "leave_after_ms", &c->leave_ns))
		return "bad watch: leave_after_ms must be an integer "
		       "0..3600000";
	c->edges = true;
	return NULL;
}

void edges_start(struct client *c, const struct vm_status *st,
		 struct json_object *r)
{
	uint64_t now = now_ns();

	c->edge_state = st->state;
	c->edge_in = st->state == SYSIDLE_FULL_NOTED;
	c->edge_since_ns = st->since_ns;
	c->edge_idle = c->edge_in && now - st->since_ns >= c->enter_ns;
	json_object_object_add(r, "edges", json_object_new_string("full_idle"));
	json_object_object_add(r, "enter_after_ms",
			       json_object_new_uint64(c->enter_ns / 1000000u));
	json_object_object_add(r, "leave_after_ms",
			       json_object_new_uint64(c->leave_ns / 1000000u));
	json_object_object_add(r, "full_idle",
			       json_object_new_boolean(c->edge_idle));
}

/* When @c's pending edge falls due; UINT64_MAX when none is pending. */
static uint64_t edge_deadline(const struct client *c)
{
	if (c->dead || !c->watch || !c->edges || c->edge_in == c->edge_idle)
		return UINT64_MAX;
	return c->edge_since_ns + (c->edge_in ? c->enter_ns : c->leave_ns);
}

/* Send @c's pending edge: {"event":"full_idle","idle":B,"unix_ms":NOW,
 * "since_unix_ms":S[,"state":..]}. */
static void edge_send(struct client *c, uint64_t now)
{
	struct json_object *o = json_object_new_object();
	const char *s;
	size_t len;

	c->edge_idle = c->edge_in;
	if (!o)
		return;
	json_object_object_add(o, "event", json_object_new_string("full_idle"));
	json_object_object_add(o, "idle", json_object_new_boolean(c->edge_in));
	json_object_object_add(o, "unix_ms",
			       json_object_new_uint64(mono_to_unix_ms(now)));
	json_object_object_add(o, "since_unix_ms", json_object_new_uint64(
				       mono_to_unix_ms(c->edge_since_ns)));
	if (!c->edge_in)
		json_object_object_add(o, "state", json_object_new_string(
					       sysidle_state_name(c->edge_state)));
	s = json_object_to_json_string_length(o, JSON_FLAGS, &len);
	if (s)
		client_event(c, s, len);
	json_object_put(o);
}

void edges_state(struct client *c, const struct vm_event *ev)
{
	bool in = ev->to == SYSIDLE_FULL_NOTED;
	uint64_t now = now_ns();

	c->edge_state = ev->to;
	if (in != c->edge_in) {
		c->edge_in = in;
		c->edge_since_ns = ev->mono_ns;
	}
	if (edge_deadline(c) <= now)
		edge_send(c, now);
}

uint64_t edges_due(struct control_socket *s, uint64_t now)
{
	uint64_t first = UINT64_MAX, d;

	for (unsigned int i = 0; i < s->nclients; i++) {
		struct client *c = s->clients[i];

		d = edge_deadline(c);
		if (d <= now) {
			edge_send(c, now);
			continue;
		}
		if (d < first)
			first = d;
	}
	return first;
}
