/* SPDX-License-Identifier: GPL-2.0-only */
/* The lease on the published metadata: see lease.h. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "bridge.h"
#include "lease.h"

static struct {
	char host[65];
	uint64_t pid, start_ticks;
} writer;

/* This process's start, in clock ticks after boot (field 22 of
 * /proc/self/stat, after the command's closing parenthesis); 0 when it
 * cannot be read. */
static uint64_t self_start_ticks(void)
{
	char buf[1024], *p;
	uint64_t v = 0;
	FILE *f = fopen("/proc/self/stat", "re");
	size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;

	if (f)
		fclose(f);
	buf[n] = '\0';
	p = strrchr(buf, ')');
	/* after ')': field 3 (state) ... field 22 (starttime) */
	if (p && sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u "
			"%*u %*u %*d %*d %*d %*d %*d %*d %" SCNu64, &v) != 1)
		v = 0;
	return v;
}

void lease_init(const struct options *o)
{
	if (gethostname(writer.host, sizeof(writer.host) - 1) < 0 ||
	    !writer.host[0])
		snprintf(writer.host, sizeof(writer.host), "localhost");
	/* The schema's host name: letters, digits, '.', '_', '-'. */
	for (char *c = writer.host; *c; c++)
		if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
			    "0123456789._-", *c))
			*c = '-';
	/* --once: a snapshot whose writer is gone at once, by design: pid 0
	 * says so, and only its lease counts. */
	writer.pid = o->once ? 0 : (uint64_t)getpid();
	writer.start_ticks = o->once ? 0 : self_start_ticks();
}

void lease_fill(const struct options *o, struct sysidle_doc *doc,
		uint64_t now_ms)
{
	doc->valid_until_unix_ms = now_ms + o->lease_s * 1000u;
	doc->writer_pid = writer.pid;
	doc->writer_start_ticks = writer.start_ticks;
	memcpy(doc->writer_host, writer.host, sizeof(doc->writer_host));
}

bool lease_due(const struct options *o, uint64_t until_ms, uint64_t now_ms)
{
	return now_ms + o->lease_s * 1000u / 3 >= until_ms;
}
