/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Fuzz target: the control socket's request reader (control_request.c:
 * lines split out of what a client sends, each parsed as a JSON request
 * and answered) and the status object it answers with (control_json.c).
 * The input is what one client sends; the first byte seeds the sizes of
 * the reads it arrives in, as recv() would cut it. What control.c does
 * around them (the socket, the output queue) and what the requests act on
 * (pause, kick, the status snapshot) are replaced here.
 * Invariants: every reply is one JSON object with a boolean "ok"; the
 * input buffer never holds more than it has room for; no more replies than
 * request lines (plus one for a line too long); a "pause" is answered once
 * it is complete, and nothing after it is answered before.
 */
#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/time.h"
#include "export/control.h"
#include "export/control_client.h"
#include "idle/idle.h"
#include "machine/pause.h"
#include "machine/vm.h"

static struct control_socket ctl;

struct control_socket *control_socket(void)
{
	return &ctl;
}

static struct vm_status fake_st;
static struct vcpu_status fake_vcpus[2];
static uint64_t pauses_requested, pauses_done;
static unsigned int replies;
static bool pause_outstanding;

static uint64_t fake_now = 5000000000ull;

uint64_t now_ns(void)
{
	return fake_now;
}

uint64_t mono_to_unix_ms(uint64_t mono_ns)
{
	return 1767323045000ull + mono_ns / 1000000u;
}

static int last_edge; /* -1: none yet, else the last "idle" sent */

/* A filtered watcher's edge (control_edges.c): a JSON object line whose
 * "idle" alternates, starting opposite to the watch reply's full_idle. */
void client_event(struct client *c, const char *s, size_t len)
{
	struct json_object *o = json_tokener_parse(s), *v;
	int idle;

	(void)c;
	assert(strlen(s) == len);
	assert(o && json_object_is_type(o, json_type_object));
	assert(json_object_object_get_ex(o, "idle", &v));
	idle = json_object_get_boolean(v);
	assert(last_edge != idle);
	last_edge = idle;
	json_object_put(o);
}

/* The bytes after the input's last newline, once a filtered watch is in
 * place: state events, each byte a state (low 3 bits) and a step of the
 * clock (the rest, in ms), with the due edges sent as the export thread
 * would. Checks that no edge is sent early (before its enter or leave
 * time) or left pending once due, and that they alternate. */
static void drive_edges(struct client *c, const uint8_t *p, size_t n)
{
	struct vm_event ev = { .kind = VM_EV_STATE, .cpu = -1 };

	ctl.clients[0] = c;
	ctl.nclients = 1;
	last_edge = c->edge_idle;
	for (size_t i = 0; i < n; i++) {
		bool was = c->edge_idle;

		fake_now += (uint64_t)(p[i] >> 3) * 1000000u;
		ev.from = c->edge_state;
		ev.to = (p[i] & 7) % 5;
		ev.mono_ns = fake_now;
		edges_state(c, &ev);
		edges_due(&ctl, fake_now);
		/* not late: an edge still pending is not due yet */
		assert(c->edge_idle == c->edge_in ||
		       fake_now < c->edge_since_ns + (c->edge_in ? c->enter_ns :
						      c->leave_ns));
		/* not early: an edge sent had been held long enough */
		assert(c->edge_idle == was ||
		       fake_now >= c->edge_since_ns + (c->edge_in ? c->enter_ns :
						       c->leave_ns));
	}
	ctl.nclients = 0;
}

void vm_status_read(struct vm *vm, struct vm_status *st)
{
	(void)vm;
	*st = fake_st;
}

/* The duty cycle of a VM fully idle for the last 90 s of its 100 s. */
void export_duty_read(struct vm_status *st, uint64_t now)
{
	struct duty_cycle *d = malloc(sizeof(*d));

	(void)now;
	memset(&st->duty, 0, sizeof(st->duty));
	if (!d)
		return;
	duty_cycle_init(d, 0);
	duty_cycle_set(d, 10000000000ull, 10000, true);
	duty_cycle_read(d, 100000000000ull, &st->duty);
	free(d);
}

/* The same VM's minutes, at @now. */
unsigned int export_duty_minutes(uint64_t now, struct duty_minute *out,
				 unsigned int n)
{
	struct duty_cycle *d = malloc(sizeof(*d));
	unsigned int m;

	if (!d)
		return 0;
	duty_cycle_init(d, 0);
	duty_cycle_set(d, 10000000000ull, 10000, true);
	m = duty_cycle_minutes(d, now, out, n);
	free(d);
	return m;
}

uint64_t pause_request(void)
{
	return ++pauses_requested;
}

bool pause_wake(enum pause_reason reason)
{
	(void)reason;
	return true;
}

const char *pause_reason_name(int reason)
{
	(void)reason;
	return "request";
}

uint64_t pause_completed(void)
{
	return pauses_done;
}

bool idle_enabled(void)
{
	return fake_st.sysidle;
}

void idle_kick_timekeeper(void)
{
}

const char *idle_memory_mode_name(int mode)
{
	return mode ? "pageout" : "off";
}

void client_drop(struct client *c)
{
	c->dead = true;
}

/* Checks one reply line: a JSON object with a boolean "ok". */
static void check_reply(struct json_object *obj)
{
	struct json_object *ok;

	assert(json_object_is_type(obj, json_type_object));
	assert(json_object_object_get_ex(obj, "ok", &ok));
	assert(json_object_is_type(ok, json_type_boolean));
	assert(json_object_to_json_string_ext(obj, JSON_FLAGS));
	replies++;
}

void client_reply(struct client *c, struct json_object *obj)
{
	(void)c;
	assert(!pause_outstanding || pauses_done >= pauses_requested);
	check_reply(obj);
	json_object_put(obj);
}

void client_error(struct client *c, struct json_object *id,
		  const char *fmt, ...)
{
	struct json_object *r = json_object_new_object();
	char msg[512];
	va_list ap;

	(void)c;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	json_object_object_add(r, "ok", json_object_new_boolean(0));
	json_object_object_add(r, "error", json_object_new_string(msg));
	if (id)
		json_object_object_add(r, "id", json_object_get(id));
	check_reply(r);
	json_object_put(r);
}

/* What client_input (control.c) does with @n bytes from recv. */
static void client_receive(struct client *c, const uint8_t *p, size_t n)
{
	assert(c->in_len + n <= sizeof(c->in));
	memcpy(c->in + c->in_len, p, n);
	c->in_len += n;
	client_serve(c);
	assert(c->in_len <= sizeof(c->in));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct client c;
	static struct vm_status snapshot;
	unsigned int seed = size ? data[0] : 0, lines = 0;
	size_t off = size ? 1 : 0;

	for (size_t i = off; i < size; i++)
		lines += data[i] == '\n';
	memset(&c, 0, sizeof(c));
	c.fd = -1;
	fake_now = 5000000000ull;
	ctl.st = &snapshot;
	replies = 0;
	pauses_requested = pauses_done = 0;
	pause_outstanding = false;
	fake_st = (struct vm_status){ .name = "fuzz", .uuid =
		"00000000-0000-0000-0000-000000000000", .pid = 1,
		.sysidle = seed & 1, .state = (int)(seed >> 1) % 5,
		.since_ns = 1, .ncpus = 2, .vcpus = fake_vcpus };
	while (off < size && !c.dead && !c.watch && !c.closing) {
		size_t room = sizeof(c.in) - c.in_len;
		size_t n = 1 + (seed = seed * 1103515245u + 12345u) % 4096;

		if (c.pause_want) {
			/* POLLIN is off until the pause completes. */
			pause_outstanding = true;
			pauses_done = pauses_requested;
			assert(client_pause_reply(&c));
			pause_outstanding = false;
			client_serve(&c);
			continue;
		}
		if (n > size - off)
			n = size - off;
		if (n > room)
			n = room;
		if (n == 0)
			break; /* full, with a pause pending: not read */
		client_receive(&c, data + off, n);
		off += n;
	}
	while (c.pause_want && !c.dead) {
		pauses_done = pauses_requested;
		assert(client_pause_reply(&c));
		client_serve(&c);
	}
	/* End of input: a last line without its newline counts. */
	if (!c.dead && !c.watch && !c.closing && c.in_len) {
		c.in[c.in_len] = '\0';
		client_request(&c, c.in, c.in_len);
		lines++;
	}
	if (!c.dead && c.watch && c.edges) {
		/* the state events: the bytes after the input's last newline */
		const uint8_t *nl = memrchr(data, '\n', size);

		if (nl)
			drive_edges(&c, nl + 1, size - (size_t)(nl + 1 - data));
	}
	json_object_put(c.pause_id);
	assert(replies <= lines + 1);
	return 0;
}
