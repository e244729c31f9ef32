/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * --stats-file FILE: recorded statistics, replayed one scan per interval
 * (for tests and offline replay). One line per domain and scan:
 *
 *	T_MS DOMAIN [KEY=VALUE ...]
 *
 * T_MS: the time of the scan in milliseconds (any origin, never going
 * back); consecutive lines with the same T_MS make one scan. DOMAIN: a
 * libvirt domain's name or uuid (no white space). KEY: a statistic as
 * virConnectGetAllDomainStats names it; the bridge uses
 * vcpu.N.halt_exits.sum, vcpu.N.blocking.cur, vcpu.N.halt_wait_ns.sum,
 * vcpu.current and state.state
 * (state.state overrides libvirt's state: 5, shut off, makes the domain
 * gone for that scan). VALUE: an unsigned integer (booleans 0 or 1).
 * Blank lines and lines starting with '#' are ignored.
 *
 * Bounds: a line has at most STATS_LINE_MAX bytes and no NUL byte, the
 * file at most STATS_LINES_MAX lines; FILE may be a FIFO (its writer is
 * waited for), and a stop signal ends the reading (stats_file_open).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "stats_source.h"

/* Bounds on the input: a line (a scan of one domain, KEY=VALUE for each
 * statistic) and the whole file. */
#define STATS_LINE_MAX 65536
#define STATS_LINES_MAX 1000000

struct stats_kv {
	char *key;
	uint64_t value;
};

struct stats_record {
	uint64_t t_ms;
	char *domain;
	struct stats_kv *kv;
	size_t nkv;
	bool matched;
};

struct stats_file {
	struct stats_record *recs;
	size_t n, cap;
	size_t next;             /* the first record of the next scan */
	size_t last, last_end;   /* the last scan replayed: [last, last_end) */
};

static void record_free(struct stats_record *r)
{
	for (size_t i = 0; i < r->nkv; i++)
		free(r->kv[i].key);
	free(r->kv);
	free(r->domain);
}

void stats_file_close(struct stats_file *f)
{
	if (!f)
		return;
	for (size_t i = 0; i < f->n; i++)
		record_free(&f->recs[i]);
	free(f->recs);
	free(f);
}

static bool parse_u64(const char *s, uint64_t *v)
{
	char *end;

	if (*s < '0' || *s > '9')
		return false;
	errno = 0;
	*v = strtoull(s, &end, 10);
	return !errno && !*end;
}

/* One line into @r; NULL, or what is wrong with it. */
static const char *parse_line(char *line, struct stats_record *r)
{
	char *save = NULL, *tok = strtok_r(line, " \t\r\n", &save);

	memset(r, 0, sizeof(*r));
	if (!parse_u64(tok, &r->t_ms))
		return "expected T_MS (milliseconds) first";
	tok = strtok_r(NULL, " \t\r\n", &save);
	if (!tok)
		return "expected a domain name or uuid after T_MS";
	r->domain = strdup(tok);
	if (!r->domain)
		return "out of memory";
	while ((tok = strtok_r(NULL, " \t\r\n", &save))) {
		char *eq = strchr(tok, '=');
		struct stats_kv *kv;
		uint64_t v;

		if (!eq || eq == tok || !parse_u64(eq + 1, &v))
			return "expected KEY=VALUE, VALUE an unsigned integer";
		kv = realloc(r->kv, (r->nkv + 1) * sizeof(*kv));
		if (!kv)
			return "out of memory";
		r->kv = kv;
		*eq = '\0';
		kv[r->nkv].key = strdup(tok);
		kv[r->nkv].value = v;
		if (!kv[r->nkv++].key)
			return "out of memory";
	}
	return NULL;
}

/* The input, read in chunks of STATS_CHUNK bytes from a non-blocking
 * descriptor; before each chunk one poll() on it and on the stop
 * descriptor, so that a stop is seen within a chunk (a FIFO without a
 * writer, or one that stalls, waits in that poll()). */
#define STATS_CHUNK 65536

struct stats_in {
	int fd, stop_fd;
	size_t pos, len;
	char buf[STATS_CHUNK];
};

enum { IN_EOF = -1, IN_STOP = -2, IN_ERR = -3 };

/* The next byte of @in, or IN_EOF, IN_STOP (@in->stop_fd readable) or
 * IN_ERR (errno set). @in->fd must be non-blocking. */
static int in_getc(struct stats_in *in)
{
	while (in->pos == in->len) {
		struct pollfd p[2] = {
			{ .fd = in->fd, .events = POLLIN },
			{ .fd = in->stop_fd, .events = POLLIN },
		};
		ssize_t n;

		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			return IN_ERR;
		}
		if (p[1].revents)
			return IN_STOP;
		if (!p[0].revents)
			continue;
		n = read(in->fd, in->buf, sizeof(in->buf));
		if (n == 0)
			return IN_EOF;
		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR)
				continue;
			return IN_ERR;
		}
		in->pos = 0;
		in->len = (size_t)n;
	}
	return (unsigned char)in->buf[in->pos++];
}

/* A line of at most STATS_LINE_MAX bytes into @buf (STATS_LINE_MAX + 1
 * bytes), without its newline: its length, IN_EOF at the end of the input,
 * IN_STOP, IN_ERR, or -4 for a line too long or holding a NUL byte (the
 * rest of it unread). */
static long read_line(struct stats_in *in, char *buf)
{
	long n = 0;
	int c;

	while ((c = in_getc(in)) >= 0 && c != '\n') {
		if (n == STATS_LINE_MAX || c == '\0')
			return -4;
		buf[n++] = (char)c;
	}
	if (c == IN_STOP || c == IN_ERR || (c == IN_EOF && n == 0))
		return c;
	buf[n] = '\0';
	return n;
}

struct stats_file *stats_file_open(const char *path, int stop_fd,
				   bool *stopped, char *err, size_t esize)
{
	struct stats_file *f = calloc(1, sizeof(*f));
	struct stats_in *in = malloc(sizeof(*in));
	char *line = malloc(STATS_LINE_MAX + 1);
	unsigned long lineno = 0;
	const char *bad = NULL;
	long len;

	*stopped = false;
	if (!f || !in || !line) {
		snprintf(err, esize, "%s", strerror(errno));
		free(in);
		in = NULL;
		goto fail;
	}
	/* Non-blocking: a FIFO's open() does not wait for a writer. */
	*in = (struct stats_in){ .stop_fd = stop_fd };
	in->fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (in->fd < 0) {
		snprintf(err, esize, "%s", strerror(errno));
		goto fail;
	}
	while ((len = read_line(in, line)) != IN_EOF) {
		struct stats_record r;
		char *p = line + strspn(line, " \t\r");

		lineno++;
		if (len == IN_STOP) {
			*stopped = true;
			snprintf(err, esize, "stopped reading it at line %lu",
				 lineno);
			goto fail;
		}
		if (len == IN_ERR) {
			snprintf(err, esize, "line %lu: %s", lineno,
				 strerror(errno));
			goto fail;
		}
		if (len == -4) {
			snprintf(err, esize, "line %lu: longer than %d bytes, "
				 "or a NUL byte in it", lineno, STATS_LINE_MAX);
			goto fail;
		}
		if (lineno > STATS_LINES_MAX) {
			snprintf(err, esize, "line %lu: more than %d lines",
				 lineno, STATS_LINES_MAX);
			goto fail;
		}
		if (!*p || *p == '#')
			continue;
		bad = parse_line(p, &r);
		if (!bad && f->n && r.t_ms < f->recs[f->n - 1].t_ms)
			bad = "T_MS goes back";
		if (!bad && f->n == f->cap) {
			size_t cap = f->cap ? 2 * f->cap : 64;
			struct stats_record *recs = realloc(f->recs,
							    cap * sizeof(*recs));

			if (!recs)
				bad = "out of memory";
			else {
				f->recs = recs;
				f->cap = cap;
			}
		}
		if (bad) {
			record_free(&r);
			snprintf(err, esize, "line %lu: %s", lineno, bad);
			goto fail;
		}
		f->recs[f->n++] = r;
	}
	if (!f->n) {
		snprintf(err, esize, "no scans in it");
		goto fail;
	}
	free(line);
	close(in->fd);
	free(in);
	return f;
fail:
	free(line);
	if (in && in->fd >= 0)
		close(in->fd);
	free(in);
	stats_file_close(f);
	return NULL;
}

bool stats_file_done(const struct stats_file *f)
{
	return f->next >= f->n;
}

/* The record of the scan [@b, @e) for @sd, or NULL. */
static struct stats_record *find(struct stats_file *f, size_t b, size_t e,
				 const struct stats_domain *sd)
{
	for (size_t i = b; i < e; i++)
		if (!strcmp(f->recs[i].domain, sd->name) ||
		    !strcmp(f->recs[i].domain, sd->uuid))
			return &f->recs[i];
	return NULL;
}

int stats_file_next(struct stats_file *f, virConnectPtr conn,
		    struct stats_scan *out)
{
	virDomainPtr *doms = NULL;
	size_t b = f->next, e = b;
	int n, rc = 0;

	memset(out, 0, sizeof(*out));
	if (stats_file_done(f))
		return 0;
	while (e < f->n && f->recs[e].t_ms == f->recs[b].t_ms)
		e++;
	n = virConnectListAllDomains(conn, &doms, VIR_CONNECT_LIST_DOMAINS_ACTIVE);
	if (n < 0)
		return -1;
	out->t_ns = f->recs[b].t_ms * 1000000u;
	out->doms = calloc((size_t)n + 1, sizeof(*out->doms));
	for (int i = 0; i < n; i++) {
		struct stats_domain *sd = out->doms ? &out->doms[out->n] : NULL;
		const char *name = virDomainGetName(doms[i]);
		struct stats_record *r;
		int reason;

		if (!sd || rc) {
			rc = -1; /* out of memory */
			virDomainFree(doms[i]);
			continue;
		}
		if (!name || virDomainGetUUIDString(doms[i], sd->uuid) < 0 ||
		    virDomainGetState(doms[i], &sd->state, &reason, 0) < 0) {
			virDomainFree(doms[i]);
			continue; /* gone meanwhile */
		}
		sd->name = strdup(name);
		if (!sd->name) {
			rc = -1;
			virDomainFree(doms[i]);
			continue;
		}
		sd->dom = doms[i];
		out->n++;
		r = find(f, b, e, sd);
		if (r) {
			r->matched = true;
			for (size_t k = 0; k < r->nkv && !rc; k++)
				rc = stats_domain_set(sd, r->kv[k].key,
						      r->kv[k].value);
		}
	}
	free(doms);
	if (rc) {
		stats_scan_free(out);
		return -1;
	}
	f->last = b;
	f->last_end = e;
	f->next = e;
	return 0;
}

const char *stats_file_unmatched(const struct stats_file *f, size_t i)
{
	for (size_t k = f->last; k < f->last_end; k++)
		if (!f->recs[k].matched && !i--)
			return f->recs[k].domain;
	return NULL;
}
