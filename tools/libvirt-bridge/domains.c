/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * sysidle-libvirt's domains: one struct tracked per libvirt domain seen,
 * each scan fed to its machine (domain_idle.c), each change published: the
 * log line, the metadata (publish.c) and the hooks (hook_queue.c).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bridge.h"
#include "hook_queue.h"
#include "publish.h"

struct tracked **doms;
size_t ndoms;
static char **unknown;        /* replay records naming no domain (warned) */
static size_t nunknown;

static struct hook_domain hook_dom(const struct tracked *t)
{
	return (struct hook_domain){ t->name, t->uuid, t->ncpus };
}

/* @t's urn:sysidle:1 document for state @st since @since_unix_ms. */
static struct sysidle_doc doc_of(const struct tracked *t,
				 enum sysidle_state st, uint64_t since_unix_ms)
{
	return (struct sysidle_doc){
		.state = st, .since_unix_ms = since_unix_ms,
		.full_idle_periods = domain_idle_full_periods(t->di),
		.vcpus = t->ncpus,
	};
}

static struct tracked *tracked_get(const struct stats_domain *sd)
{
	struct tracked *t, **d;

	for (size_t i = 0; i < ndoms; i++)
		if (!strcmp(doms[i]->uuid, sd->uuid))
			return doms[i];
	d = realloc(doms, (ndoms + 1) * sizeof(*d));
	if (!d)
		return NULL;
	doms = d;
	t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->di = domain_idle_new();
	t->name = strdup(sd->name);
	if (!t->di || !t->name) {
		domain_idle_free(t->di);
		free(t->name);
		free(t);
		return NULL;
	}
	memcpy(t->uuid, sd->uuid, sizeof(t->uuid));
	doms[ndoms++] = t;
	return t;
}

void tracked_free(struct tracked *t)
{
	if (t->dom)
		virDomainFree(t->dom);
	domain_idle_free(t->di);
	free(t->name);
	free(t);
}

/* A state published: the log line, the metadata (and, --verbose, what
 * libvirt then holds). */
static void publish(struct tracked *t, enum sysidle_state st, const char *why)
{
	struct sysidle_doc doc = doc_of(t, st, unix_ms());
	char *back;

	t->published = st;
	if (st == SYSIDLE_FULL_NOTED)
		t->noted_unix_ms = doc.since_unix_ms;
	if (!opt.once) /* --once: print_once says it all at the end */
		say("%s: %s (%s)", t->name, sysidle_state_name(st), why);
	if (!t->dom)
		return;
	if (publish_metadata(t->dom, &doc) < 0) {
		if (!t->meta_failed)
			warn("%s: cannot set its metadata: %s (until it "
			     "works again, not repeated)", t->name, lv_error());
		t->meta_failed = true;
		return;
	}
	t->meta_failed = false;
	if (opt.verbose && !opt.once) {
		back = publish_read_back(t->dom);
		say("%s: metadata %s read back: %s", t->name, PUBLISH_NS,
		    back ? back : lv_error());
		free(back);
	}
}

/* @t is no longer watched (it went away, or the bridge stops): a fully
 * idle domain's idle period ends, then "stopped end". */
void unwatch(struct tracked *t, const char *why)
{
	struct hook_domain hd = hook_dom(t);
	struct sysidle_doc doc = doc_of(t, SYSIDLE_NOT, unix_ms());

	if (!t->watched || opt.once)
		return;
	if (t->published == SYSIDLE_FULL_NOTED)
		publish_hooks_change(&hd, SYSIDLE_FULL_NOTED, &doc,
				     doc.since_unix_ms - t->noted_unix_ms);
	hook_queue_post(&hd, "stopped", "end", NULL, &doc);
	say("%s: stopped (%s)", t->name, why);
	t->watched = false;
}

/* One scan's result for one domain. */
static void domain_scan(struct tracked *t, const struct stats_domain *sd,
			uint64_t t_ns)
{
	struct vcpu_sample *buf = calloc(sd->nvcpus + 1, sizeof(*buf));
	struct domain_idle_report r;
	struct domain_sample s;
	struct hook_domain hd;
	struct sysidle_doc doc;
	enum sysidle_state from = t->published;
	char why[200];
	int rc;

	if (!buf) {
		warn("%s: out of memory", t->name);
		return;
	}
	stats_domain_sample(sd, t_ns, buf, &s);
	rc = domain_idle_scan(t->di, &s, &r);
	free(buf);
	if (rc == DOMAIN_IDLE_ERROR) {
		warn("%s: %s", t->name, strerror(errno));
		return;
	}
	snprintf(t->reason, sizeof(t->reason), "%s", r.reason);
	t->skipped = rc == DOMAIN_IDLE_NO_STATS;
	if (t->skipped) {
		if (!t->warned)
			warn("%s: no vcpu.N.halt_exits.sum with "
			     "vcpu.N.blocking.cur or vcpu.N.halt_wait_ns.sum "
			     "statistics (libvirt or the kernel lacks KVM's "
			     "binary statistics): not watched, never reported "
			     "idle", t->name);
		t->warned = true;
		if (t->watched && t->published != SYSIDLE_NOT) {
			hd = hook_dom(t);
			doc = doc_of(t, SYSIDLE_NOT, unix_ms());
			publish_hooks_change(&hd, from, &doc, r.full_idle_ms);
			publish(t, SYSIDLE_NOT, r.reason);
		}
		return;
	}
	t->ncpus = r.ncpus;
	hd = hook_dom(t);
	if (!t->watched) {
		t->watched = true;
		doc = doc_of(t, SYSIDLE_NOT, unix_ms());
		if (!opt.once)
			hook_queue_post(&hd, "started", "begin", NULL, &doc);
		snprintf(why, sizeof(why), "watching %u vCPU%s; %s", r.ncpus,
			 r.ncpus == 1 ? "" : "s", r.reason);
		from = SYSIDLE_NOT;
	} else if (r.to != from || r.recreated) {
		snprintf(why, sizeof(why), "%s", r.reason);
	} else {
		return;
	}
	doc = doc_of(t, r.to, unix_ms());
	if (!opt.once)
		publish_hooks_change(&hd, from, &doc, r.full_idle_ms);
	publish(t, r.to, why);
}

/* After hook_queue_stop(): say how many hook events were never run, so whoever
 * finds fewer transitions in a hook's log than in the bridge's knows why. */
void report_dropped_hooks(void)
{
	uint64_t run, failed, dropped;

	hook_queue_counts(&run, &failed, &dropped);
	if (dropped)
		warn("%" PRIu64 " hook event%s dropped: the hooks ran slower "
		     "than the events came, and a domain's pending idle "
		     "events were coalesced (%" PRIu64 " hooks run)",
		     dropped, dropped == 1 ? "" : "s", run);
}

/* A replay record naming no libvirt domain: one warning per name. */
void warn_unknown(const char *name)
{
	char **u;

	for (size_t i = 0; i < nunknown; i++)
		if (!strcmp(unknown[i], name))
			return;
	u = realloc(unknown, (nunknown + 1) * sizeof(*u));
	if (!u || !(u[nunknown] = strdup(name))) {
		unknown = u ? u : unknown;
		return;
	}
	unknown = u;
	nunknown++;
	warn("--stats-file: no active libvirt domain '%s': its records are "
	     "ignored", name);
}

void process_scan(struct stats_scan *scan)
{
	size_t i, j;

	for (i = 0; i < ndoms; i++)
		doms[i]->seen = false;
	for (i = 0; i < scan->n; i++) {
		struct stats_domain *sd = &scan->doms[i];
		struct tracked *t;

		if (!stats_state_active(sd->state))
			continue; /* shut off: gone, below */
		t = tracked_get(sd);
		if (!t) {
			warn("%s: out of memory", sd->name);
			continue;
		}
		t->seen = true;
		if (strcmp(t->name, sd->name)) {
			char *n = strdup(sd->name);

			if (n) {
				free(t->name);
				t->name = n;
			}
		}
		if (t->dom)
			virDomainFree(t->dom);
		t->dom = sd->dom; /* the scan's reference, now ours */
		sd->dom = NULL;
		domain_scan(t, sd, scan->t_ns);
	}
	for (i = j = 0; i < ndoms; i++) {
		if (doms[i]->seen) {
			doms[j++] = doms[i];
			continue;
		}
		unwatch(doms[i], "the domain is gone");
		tracked_free(doms[i]);
	}
	ndoms = j;
}

void print_once(void)
{
	for (size_t i = 0; i < ndoms; i++) {
		struct tracked *t = doms[i];

		if (t->skipped)
			printf("%s: SKIPPED (%s)\n", t->name, t->reason);
		else
			printf("%s: %s (%s)\n", t->name,
			       sysidle_state_name(t->published), t->reason);
		if (opt.verbose && t->watched && t->dom) {
			char *back = publish_read_back(t->dom);

			printf("%s: metadata %s read back: %s\n", t->name,
			       PUBLISH_NS, back ? back : lv_error());
			free(back);
		}
	}
	if (!ndoms)
		printf("no active domains\n");
	fflush(stdout);
}

void domains_free(void)
{
	for (size_t i = 0; i < nunknown; i++)
		free(unknown[i]);
	free(unknown);
	unknown = NULL;
	nunknown = 0;
	free(doms);
	doms = NULL;
}
