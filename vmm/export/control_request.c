/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The control socket's requests (protocol in vmm/export/README.md): one JSON
 * object a line, "status", "watch", "kick", "pause", "resume", "history".
 * Export thread only.
 */
#include <stdio.h>
#include <string.h>

#include <json-c/json.h>

#include <sysidle/sysidle.h>

#include "base/time.h"
#include "export/control.h"
#include "export/control_client.h"
#include "export/export.h"
#include "export/history.h"
#include "idle/idle.h"
#include "machine/pause.h"

/* Export thread: the VM object of a "status" reply, from a fresh
 * snapshot. */
static struct json_object *status_object(void)
{
	struct control_socket *ctl = control_socket();
	uint64_t now;

	vm_status_read(ctl->vm, ctl->st);
	now = now_ns();
	export_duty_read(ctl->st, now);
	return control_status_json(ctl->st, now);
}

/* Export thread: {"ok":true,"cmd":@cmd}, with @id (borrowed) copied. */
static struct json_object *reply_ok(const char *cmd, struct json_object *id)
{
	struct json_object *r = json_object_new_object();

	json_object_object_add(r, "ok", json_object_new_boolean(1));
	json_object_object_add(r, "cmd", json_object_new_string(cmd));
	if (id)
		json_object_object_add(r, "id", json_object_get(id));
	return r;
}

/* Export thread: the reply to @c's "pause" once the pause it waits for is
 * complete: {"ok":true,"cmd":"pause","paused":true}. Returns whether it
 * was sent (or there was none to send). */
bool client_pause_reply(struct client *c)
{
	struct json_object *r;

	if (!c->pause_want)
		return true;
	if (pause_completed() < c->pause_want)
		return false;
	r = reply_ok("pause", c->pause_id);
	json_object_object_add(r, "paused", json_object_new_boolean(1));
	json_object_put(c->pause_id);
	c->pause_id = NULL;
	c->pause_want = 0;
	client_reply(c, r);
	return true;
}

/* Export thread: the reply to "history" ({"since_s":S}, 1..HISTORY_SPAN_S,
 * default HISTORY_SPAN_S) into *@r, or an error text (static). @req is the
 * parsed request, @id borrowed. */
static const char *history_reply(struct json_object *req,
				 struct json_object *id,
				 struct json_object **r)
{
	struct control_socket *ctl = control_socket();
	struct json_object *v, *h;
	int64_t since = HISTORY_SPAN_S;

	*r = NULL;
	if (json_object_object_get_ex(req, "since_s", &v)) {
		if (!json_object_is_type(v, json_type_int))
			return "history: \"since_s\" must be a whole number "
			       "of seconds, 1 to 3600";
		since = json_object_get_int64(v);
		if (since < 1 || since > HISTORY_SPAN_S)
			return "history: \"since_s\" must be 1 to 3600";
	}
	vm_status_read(ctl->vm, ctl->st);
	h = history_json(ctl->st, (unsigned int)since, now_ns());
	if (!h)
		return "history: out of memory";
	*r = reply_ok("history", id);
	json_object_object_foreach(h, key, val)
		json_object_object_add(*r, key, json_object_get(val));
	json_object_put(h);
	return NULL;
}

/* Export thread: one request line (@len bytes, no newline). */
void client_request(struct client *c, const char *line, size_t len)
{
	struct control_socket *ctl = control_socket();
	struct json_tokener *tok;
	struct json_object *req, *cmdo, *id = NULL, *r;
	enum json_tokener_error jerr;
	const char *cmd;
	size_t end;

	while (len && (line[len - 1] == '\r' || line[len - 1] == ' ' ||
		       line[len - 1] == '\t'))
		len--;
	if (!len)
		return; /* a blank line: nothing asked */
	c->spoke = true;
	tok = json_tokener_new();
	if (!tok) {
		client_drop(c);
		return;
	}
	req = json_tokener_parse_ex(tok, line, (int)len);
	jerr = json_tokener_get_error(tok);
	end = json_tokener_get_parse_end(tok);
	json_tokener_free(tok);
	if (jerr == json_tokener_continue)
		jerr = json_tokener_error_parse_eof;
	if (jerr != json_tokener_success) {
		json_object_put(req);
		client_error(c, NULL, "malformed request: %s",
			     json_tokener_error_desc(jerr));
		return;
	}
	if (strspn(line + end, " \t") != len - end) {
		json_object_put(req);
		client_error(c, NULL, "malformed request: data after the "
			     "JSON object");
		return;
	}
	if (!json_object_is_type(req, json_type_object)) {
		json_object_put(req);
		client_error(c, NULL, "malformed request: not a JSON object");
		return;
	}
	json_object_object_get_ex(req, "id", &id);
	if (!json_object_object_get_ex(req, "cmd", &cmdo) ||
	    !json_object_is_type(cmdo, json_type_string)) {
		client_error(c, id, "malformed request: no \"cmd\" string");
		json_object_put(req);
		return;
	}
	cmd = json_object_get_string(cmdo);
	if (!strcmp(cmd, "status")) {
		r = reply_ok(cmd, id);
		json_object_object_add(r, "vm", status_object());
		client_reply(c, r);
	} else if (!strcmp(cmd, "watch")) {
		const char *bad = edges_parse(c, req);

		if (bad) {
			client_error(c, id, "%s", bad);
			json_object_put(req);
			return;
		}
		vm_status_read(ctl->vm, ctl->st);
		r = reply_ok(cmd, id);
		json_object_object_add(r, "state", json_object_new_string(
					       sysidle_state_name(ctl->st->state)));
		json_object_object_add(r, "since_unix_ms",
			json_object_new_uint64(ctl->st->since_unix_ms));
		json_object_object_add(r, "paused",
				       json_object_new_boolean(ctl->st->paused));
		if (c->edges)
			edges_start(c, ctl->st, r);
		c->watch = true;
		client_reply(c, r);
	} else if (!strcmp(cmd, "kick")) {
		if (idle_enabled()) {
			pause_wake(PAUSE_REASON_KICK); /* a paused VM resumes */
			idle_kick_timekeeper();
			client_reply(c, reply_ok(cmd, id));
		} else {
			client_error(c, id, "kick needs --sysidle");
		}
	} else if (!strcmp(cmd, "pause")) {
		c->pause_want = pause_request();
		c->pause_id = id ? json_object_get(id) : NULL;
		client_pause_reply(c); /* now if already paused, else later */
	} else if (!strcmp(cmd, "history")) {
		const char *bad = history_reply(req, id, &r);

		if (bad)
			client_error(c, id, "%s", bad);
		else
			client_reply(c, r);
	} else if (!strcmp(cmd, "resume")) {
		pause_wake(PAUSE_REASON_REQUEST);
		r = reply_ok(cmd, id);
		json_object_object_add(r, "paused", json_object_new_boolean(0));
		client_reply(c, r);
	} else {
		client_error(c, id, "unknown command '%.64s%s'", cmd,
			     strlen(cmd) > 64 ? "..." : "");
	}
	json_object_put(req);
}

/* Export thread: serve the complete lines @c has buffered, up to a
 * "pause" whose reply must come first. */
void client_serve(struct client *c)
{
	char *line = c->in, *nl;
	size_t used;

	while (!c->dead && !c->watch && !c->closing && !c->pause_want &&
	       (nl = memchr(line, '\n', c->in_len - (size_t)(line - c->in)))) {
		*nl = '\0';
		client_request(c, line, (size_t)(nl - line));
		line = nl + 1;
	}
	if (c->dead)
		return;
	used = (size_t)(line - c->in);
	if (c->watch || c->closing) {
		c->in_len = 0;
		return;
	}
	memmove(c->in, line, c->in_len - used);
	c->in_len -= used;
	if (!c->pause_want && c->in_len > CONTROL_LINE_MAX) {
		c->in_len = 0;
		c->closing = true;
		client_error(c, NULL, "malformed request: longer than %d "
			     "bytes", CONTROL_LINE_MAX);
	}
}
