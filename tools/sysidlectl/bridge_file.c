/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The libvirt domains the bridge (sysidle-libvirt --metrics-file FILE)
 * publishes, read back from that Prometheus text file for `report`: each
 * domain's state, since when, and when its full idle began. Bounds: lines
 * longer than BRIDGE_LINE_MAX are skipped, at most BRIDGE_DOMAINS_MAX
 * domains and BRIDGE_FILE_MAX bytes are read; what does not parse is
 * skipped.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sysidlectl.h"

#define BRIDGE_LINE_MAX 4096
#define BRIDGE_FILE_MAX (64L << 20)

/* The value of label @key in @labels ("vm=\"a\",uuid=\"b\"", NUL-ended),
 * unescaped (\\, \", \n) into @out (@size bytes); 0, or -1 when absent,
 * malformed or too long. */
static int label(const char *labels, const char *key, char *out, size_t size)
{
	const char *p = labels;

	while (*p) {
		const char *eq = strchr(p, '=');
		bool want;
		size_t k = 0;

		if (!eq || eq[1] != '"')
			return -1;
		want = (size_t)(eq - p) == strlen(key) &&
		       !strncmp(p, key, strlen(key));
		for (p = eq + 2; *p && *p != '"'; p++) {
			char ch = *p;

			if (ch == '\\' && p[1])
				ch = *++p == 'n' ? '\n' : *p;
			if (want && k + 1 >= size)
				return -1;
			if (want)
				out[k++] = ch;
		}
		if (*p != '"')
			return -1;
		if (want) {
			out[k] = '\0';
			return 0;
		}
		p++;
		if (*p == ',')
			p++;
	}
	return -1;
}

/* The domain named @vm in @d, added if new (NULL: the table is full). */
static struct bridge_domain *domain(struct bridge_domains *d, const char *vm,
				    const char *uuid)
{
	struct bridge_domain *nd;

	for (size_t i = 0; i < d->n; i++)
		if (!strcmp(d->v[i].name, vm) && !strcmp(d->v[i].uuid, uuid))
			return &d->v[i];
	if (d->n >= BRIDGE_DOMAINS_MAX)
		return NULL;
	nd = realloc(d->v, (d->n + 1) * sizeof(*d->v));
	if (!nd)
		return NULL;
	d->v = nd;
	nd = &d->v[d->n++];
	memset(nd, 0, sizeof(*nd));
	snprintf(nd->name, sizeof(nd->name), "%s", vm);
	snprintf(nd->uuid, sizeof(nd->uuid), "%s", uuid);
	nd->state = -1;
	return nd;
}

/* One sample line into @d. */
static void sample(struct bridge_domains *d, char *line)
{
	static const char *const names[] = {
		"sysidle_vm_state", "sysidle_vm_state_since_timestamp_seconds",
		"sysidle_vm_full_idle_since_timestamp_seconds",
		"sysidle_vm_full_idle_seconds_total",
	};
	char *open = strchr(line, '{'), *close, *end;
	char vm[sizeof(d->v->name)], uuid[sizeof(d->v->uuid)];
	struct bridge_domain *b;
	double val;
	size_t i;

	if (!open || !(close = strrchr(open, '}')))
		return;
	*open = '\0';
	*close = '\0';
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcmp(line, names[i]))
			break;
	if (i == sizeof(names) / sizeof(names[0]))
		return;
	if (label(open + 1, "vm", vm, sizeof(vm)) ||
	    label(open + 1, "uuid", uuid, sizeof(uuid)))
		return;
	errno = 0;
	val = strtod(close + 1, &end);
	if (errno || end == close + 1 || !(val >= 0) || val > 1e15)
		return;
	b = domain(d, vm, uuid);
	if (!b)
		return;
	if (i == 0 && val <= 4)
		b->state = (int)val;
	else if (i == 1)
		b->since_s = val;
	else if (i == 2)
		b->full_since_s = val;
	else if (i == 3)
		b->idle_done_s = val;
}

/* See sysidlectl.h. */
int bridge_read(const char *path, struct bridge_domains *d)
{
	char line[BRIDGE_LINE_MAX + 2];
	FILE *f = fopen(path, "r");
	long read = 0;
	bool up = false;

	memset(d, 0, sizeof(*d));
	if (!f) {
		errmsg("--bridge-metrics %s: %s", path, strerror(errno));
		return -1;
	}
	while (read < BRIDGE_FILE_MAX && fgets(line, sizeof(line), f)) {
		size_t len = strlen(line);

		read += (long)len;
		if (len && line[len - 1] != '\n' && !feof(f)) {
			int ch; /* too long: skip the rest of it */

			while ((ch = fgetc(f)) != EOF && ch != '\n')
				read++;
			continue;
		}
		if (!strncmp(line, "sysidle_libvirt_up ", 19))
			up = atoi(line + 19) == 1;
		else if (line[0] != '#')
			sample(d, line);
	}
	fclose(f);
	d->up = up;
	return 0;
}

/* See sysidlectl.h. */
void bridge_free(struct bridge_domains *d)
{
	free(d->v);
	d->v = NULL;
	d->n = 0;
}
